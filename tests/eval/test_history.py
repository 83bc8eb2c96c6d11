"""eval/history.py and notebooks/reflection_history.ipynb: a run read from its record (read only) or
from its run folder (the committed real-model runs keep no record), ranked by what the run ranked by."""
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from swizzleperf.agent.loop.record import RunRecord
from swizzleperf.eval import history

ROOT = Path(__file__).resolve().parents[2]
QWEN_GEMM = ROOT / "bench" / "results" / "real_llm" / "work" / "runs" / "20261124-012842-ba04"


def _files(folder: Path) -> set:
    return {p.relative_to(folder) for p in folder.rglob("*")}


def test_the_notebook_opens_a_committed_real_model_run_and_writes_nothing(tmp_path, monkeypatch):
    import matplotlib
    matplotlib.use("Agg")
    folder = tmp_path / "runs" / QWEN_GEMM.name
    shutil.copytree(QWEN_GEMM, folder)
    before = _files(tmp_path)
    monkeypatch.setenv("SWIZZLEPERF_RUN", str(folder))
    monkeypatch.delenv("SWIZZLEPERF_WORKDIR", raising=False)
    monkeypatch.chdir(tmp_path)
    notebook = json.loads((ROOT / "notebooks" / "reflection_history.ipynb").read_text())
    scope: dict = {}
    for cell in notebook["cells"]:
        if cell["cell_type"] == "code":
            exec("".join(cell["source"]), scope)                 # noqa: S102 (our own notebook)
    run, it = scope["run"], scope["it"]
    assert run["run_id"] == QWEN_GEMM.name and run["objective"] == "L2 hit rate"
    candidates = it[it.kind == "candidate"]
    assert len(candidates) == 8 and (candidates.verdict == "PASS").sum() == 5
    assert candidates[candidates.verdict == "PASS"].candidate_source.str.contains("def swizzle").all()
    assert history.spend(it).iloc[-1].prompt_tokens == 15377            # the record's total (summary.md)
    assert it.best_so_far.max() == pytest.approx(0.8395, abs=1e-4)
    assert _files(tmp_path) == before


def test_a_workdir_without_record_reads_its_latest_run_folder(tmp_path):
    for name in ("20261124-000000-aaaa", QWEN_GEMM.name):
        shutil.copytree(QWEN_GEMM, tmp_path / "runs" / name)
    run, _ = history.load_run(None, str(tmp_path))
    assert run["run_id"] == QWEN_GEMM.name and not (tmp_path / "swizzleperf.db").exists()


def test_nothing_to_read_is_one_clear_error_and_no_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="no swizzleperf.db and no run folder"):
        history.load_run(None, str(tmp_path))
    with pytest.raises(FileNotFoundError, match="runs/nope"):
        history.load_run("nope", str(tmp_path))
    assert list(tmp_path.iterdir()) == []


def _record(tmp_path: Path, attempts: list) -> RunRecord:
    record = RunRecord(tmp_path)
    record.create_run("r1", {"kernel": "gemm_all_scatter", "kernel_path": "k.py", "hardware": "h200",
                             "mode": "simulated", "proposer": "policy", "run_dir": "runs/r1"}, {})
    for i, (kind, l2, metrics, best) in enumerate(attempts):
        record.save_attempt("r1", {"kind": kind, "iteration": i, "name": f"c{i}", "verdict": "PASS",
                                   "metrics": {"l2_hit_rate": l2, **metrics}}, "policy", best)
    return record


def test_a_distributed_run_is_followed_by_its_predicted_time_not_its_gemm_l2(tmp_path):
    """The per-rank GEMM's L2 rises while the predicted time worsens: the best so far follows the
    time, as the distributed evaluator chose the best."""
    _record(tmp_path, [("baseline", 0.50, {"predicted_time_ms": 1.0}, False),
                       ("candidate", 0.60, {"predicted_time_ms": 0.8}, True),
                       ("candidate", 0.90, {"predicted_time_ms": 0.9}, False)])
    run, it = history.load_run(None, str(tmp_path))
    assert run["objective"] == "time (ms, predicted)"
    assert it.best_so_far.tolist() == [1.0, 0.8, 0.8]
    assert it.objective.tolist() == [1.0, 0.8, 0.9]


def test_a_single_gpu_run_without_time_follows_the_l2_and_the_record_is_left_as_it_was(tmp_path):
    record = _record(tmp_path, [("baseline", 0.5, {}, False), ("candidate", 0.7, {}, True),
                                ("candidate", 0.6, {}, False)])
    files = sorted(p.name for p in tmp_path.iterdir())
    run, it = history.load_run(None, str(tmp_path))
    assert run["objective"] == "L2 hit rate" and it.best_so_far.tolist() == [0.5, 0.7, 0.7]
    assert sorted(p.name for p in tmp_path.iterdir()) == files == ["swizzleperf.db"]
    assert isinstance(record.iterations("r1"), pd.DataFrame)


@pytest.mark.parametrize("reply, expected", [
    ("text\n```python\n@triton.jit\ndef swizzle(pid):\n    return pid, 0\n```\nwhy", "def swizzle(pid)"),
    ("```\ndef other():\n    pass\n```\n```py\ndef swizzle(p):\n    return p\n```", "def swizzle(p)"),
    ("no code at all", ""),
])
def test_the_source_a_run_took_is_read_from_the_reply(reply, expected):
    found = history.function_source(reply, "swizzle")
    assert (expected in found) if expected else found == ""
