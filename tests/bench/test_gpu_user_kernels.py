"""bench/gpu_user_kernels.py --merge: several runs of the GPU script become one table, each example's
row from the latest run that finished it, every run kept (no GPU)."""
import json

import pytest

from bench import gpu_user_kernels


def _row(example: str, status: str, time_ms: float | None = None) -> dict:
    row = {"example": example, "kernel": f"{example}_kernel", "status": status, "wall_s": 10.0,
           "command": f"swizzleperf optimize --app 'python3 {example}/app.py' --kernel {example}_kernel"}
    if time_ms is not None:
        row["report"] = {"baseline": {"time_ms": time_ms, "time_spread_ms": 0.001},
                         "best": {"name": "grouped-m:8", "time_ms": time_ms * 0.9, "speedup_vs_baseline": 1.11,
                                  "beyond_noise_vs_baseline": True}}
    return row


def _run(command: str, rows: list, gpu: str = "h100") -> dict:
    return {"gpu": gpu, "gpus": 2, "command": command, "wall_s": 100.0, "iterations": 1, "examples": rows}


def test_the_latest_run_that_finished_an_example_gives_its_row(tmp_path):
    first = _run("first", [_row("transpose_2d", "optimized", 0.110), _row("stencil_2d", "timed out"),
                           _row("softmax", "not reached")])
    second = _run("second", [_row("stencil_2d", "optimized", 0.055), _row("softmax", "refused")])
    third = _run("third", [_row("transpose_2d", "timed out")])
    files = []
    for i, payload in enumerate((first, second, third)):
        files.append(tmp_path / f"run{i}.json")
        files[-1].write_text(json.dumps(payload))
    assert gpu_user_kernels.main([str(tmp_path / "out"), "--merge", *map(str, files)]) == 0
    merged = json.loads((tmp_path / "out" / "user_kernels_h100.json").read_text())
    rows = {r["example"]: r for r in merged["examples"]}
    assert rows["transpose_2d"]["status"] == "optimized"     # a later run that did not finish it does not replace it
    assert rows["stencil_2d"]["status"] == "optimized" and rows["softmax"]["status"] == "refused"
    assert [r["example"] for r in merged["examples"]] == ["transpose_2d", "stencil_2d", "softmax"]  # the script's order
    assert [r["command"] for r in merged["runs"]] == ["first", "second", "third"]
    text = (tmp_path / "out" / "user_kernels_h100.md").read_text()
    assert "`first`; then `second`; then `third`" in text and "| stencil_2d | stencil_2d_kernel |" in text
    # a merged file merges again, with nothing lost
    again = gpu_user_kernels.merged([merged, _run("fourth", [_row("row_norm", "optimized", 0.096)])])
    assert len(again["runs"]) == 4 and {r["example"] for r in again["examples"]} == {
        "transpose_2d", "stencil_2d", "softmax", "row_norm"}


def test_runs_of_different_gpus_are_one_line_not_a_table(tmp_path, capsys):
    files = [tmp_path / "a.json", tmp_path / "b.json"]
    files[0].write_text(json.dumps(_run("a", [_row("transpose_2d", "optimized", 0.1)], gpu="h100")))
    files[1].write_text(json.dumps(_run("b", [_row("transpose_2d", "optimized", 0.1)], gpu="h200")))
    assert gpu_user_kernels.main([str(tmp_path / "out"), "--merge", *map(str, files)]) == 2
    assert "different GPUs (h100, h200)" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
    with pytest.raises(ValueError):
        gpu_user_kernels.merged([json.loads(files[0].read_text()), json.loads(files[1].read_text())])
