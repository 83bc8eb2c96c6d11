"""The bottleneck, found (#42): ``swizzleperf profile --app CMD`` and ``optimize --app CMD`` without
``--kernel`` (agent/capture/bottleneck.py, the capture hook's profile mode), and the one-wave rule
(agent/verification/evaluate.py's ``order_cannot_matter``).

Tiny interpreted apps: tests/helpers/apps/three_kernels (a persistent scale, a one-program sum and
a 2-D tiled GEMM, hottest first by construction: the scale loops over 192 blocks, the sum over 192,
the GEMM runs 6 programs of one K step) and examples/user_kernels/tutorial_gemm. Under the
interpreter a kernel's time is the wall time of its launches on the CPU, labelled so.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from swizzleperf.agent.capture.bottleneck import KernelProfile, KernelRow, choose, profile_app, ranked
from swizzleperf.agent.capture.capture import CaptureError

APPS = Path(__file__).resolve().parents[2] / "helpers" / "apps"
EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "user_kernels"
THREE = APPS / "three_kernels"
INTERPRET = f"TRITON_INTERPRET=1 {sys.executable}"


def _cli(*args: str, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    env = dict(os.environ, TRITON_INTERPRET="1")
    return subprocess.run([sys.executable, "-m", "swizzleperf.agent.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


def _flat(proc: subprocess.CompletedProcess) -> str:
    return " ".join((proc.stdout + proc.stderr).split())


@pytest.fixture(scope="module")
def three(tmp_path_factory) -> KernelProfile:
    return profile_app(f"{INTERPRET} {THREE / 'app.py'}", tmp_path_factory.mktemp("work"), hw="mi300x")


def test_every_kernel_is_listed_with_calls_grid_and_its_interpreter_time(three):
    rows = {r.kernel: r for r in three.rows}
    assert [r.kernel for r in three.rows] == ["scale_kernel", "sum_kernel", "matmul_kernel"]   # hottest first
    assert (rows["matmul_kernel"].calls, rows["matmul_kernel"].grid, rows["matmul_kernel"].programs) == (1, (2, 3), 6)
    assert (rows["sum_kernel"].grid, rows["scale_kernel"].grid) == ((1,), (4,))
    assert all(r.source == "measured:interpreter-wall" and r.time_s > 0 for r in three.rows)
    assert sum(r.share for r in three.rows) == pytest.approx(1.0)
    assert "says nothing of GPU time" in three.note and "mi300x" in three.wave_note
    assert rows["matmul_kernel"].waves == pytest.approx(6 / 304)   # 304 CUs, one program each
    matmul = rows["matmul_kernel"]
    assert matmul.values["BLOCK_M"] == 16 and matmul.values["K"] == 16 and "a_ptr" in matmul.pointers
    assert matmul.line == 26 and Path(matmul.file).name == "kernels.py"


def test_the_hottest_kernel_whose_order_can_matter_is_chosen_and_each_hotter_one_says_why(three):
    choice = choose(three)
    assert [r.kernel for r in choice.chosen] == ["matmul_kernel"] and choice.kinds == {"matmul_kernel": "lifted"}
    passed, chosen = choice.lines()[:2], choice.lines()[2]
    assert passed[0].startswith("passed over scale_kernel (") and "a persistent kernel" in passed[0]
    assert "range(pid, num_blocks, tl.num_programs(0))` (line 11)" in passed[0]
    assert passed[1].startswith("passed over sum_kernel (") and "a launch of one program (grid 1)" in passed[1]
    assert chosen.startswith("chose matmul_kernel (") and "grid 2 x 3 (6 programs)" in chosen


def _row(kernel: str, time_s: float, programs: int, **fields) -> KernelRow:
    matmul = dict(values={"M": 32, "N": 48, "K": 16, "BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 16,
                          "stride_am": 16, "stride_ak": 1, "stride_bk": 48, "stride_bn": 1, "stride_cm": 48,
                          "stride_cn": 1}, pointers=("a_ptr", "b_ptr", "c_ptr"))
    base = dict(kernel=kernel, file=str(THREE / "kernels.py"), line=1, calls=1,
                grid=(2, 3) if programs == 6 else (programs,), programs=programs, time_s=time_s, share=None,
                source="measured:cupti")
    other = {"values": {"n_elements": 6144, "BLOCK": 32}, "pointers": ("x_ptr", "out_ptr")}
    base.update(matmul if kernel == "matmul_kernel" else other)
    return KernelRow(**{**base, **fields})


def _profile(*rows: KernelRow) -> KernelProfile:
    return KernelProfile("python app.py", rows, "measured:cupti", "", 132, "132 SMs", Path("."))


def test_a_measured_l2_hit_rate_at_95_percent_or_above_passes_a_kernel_over():
    hot = _row("matmul_kernel", 2.0, 6, l2_hit_rate=0.97, share=0.6)
    cool = _row("matmul_kernel", 1.0, 6, l2_hit_rate=0.60, share=0.3, line=2)
    choice = choose(_profile(hot, cool))
    assert choice.chosen == (cool,)
    assert choice.lines()[0] == ("passed over matmul_kernel (60% of the time): its L2 hit rate is 97.0% (measured), "
                                 "at or above 95%: little for an order to win")


def test_top_n_takes_the_n_hottest_whose_order_can_matter():
    rows = (_row("matmul_kernel", 3.0, 6), _row("sum_kernel", 2.0, 1), _row("matmul_kernel", 1.0, 6, line=2))
    assert choose(_profile(*rows), top=2).chosen == (rows[0], rows[2])


def test_an_app_with_no_kernel_whose_order_can_matter_is_refused_in_one_line():
    with pytest.raises(CaptureError) as info:
        choose(_profile(_row("scale_kernel", 2.0, 4, share=0.7), _row("sum_kernel", 1.0, 1, share=0.3)))
    message = str(info.value)
    assert message.startswith("no kernel of `python app.py` has a tile order that can matter: scale_kernel (70% of "
                              "the time): cannot reorder scale_kernel: a persistent kernel")
    assert "; sum_kernel (30% of the time): a launch of one program (grid 1)" in message and "\n" not in message


def test_the_processes_records_are_merged_per_kernel_the_largest_grid_kept():
    record = dict(kernel="k", file="/a.py", line=3, calls=2, grid=[4], programs=4, values={"n": 1}, pointers=["x"],
                  globals={}, wall_s=0.5, time_s=0.5, source="measured:interpreter-wall")
    rows = ranked([record, {**record, "calls": 1, "grid": [9], "programs": 9, "values": {"n": 2}, "time_s": 1.5},
                   {**record, "kernel": "other", "time_s": 2.0}], wave=3)
    assert [(r.kernel, r.calls, r.grid, r.values, r.share, r.waves) for r in rows] == [
        ("k", 3, (9,), {"n": 2}, 0.5, 3.0), ("other", 2, (4,), {"n": 1}, 0.5, 4 / 3)]


def test_profile_app_lists_the_tutorial_gemm_and_prints_json(tmp_path):
    app = f"{sys.executable} {EXAMPLES / 'tutorial_gemm' / 'app.py'}"
    proc = _cli("profile", "--app", app, "--hw", "h100", "--workdir", str(tmp_path / ".sp"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = _flat(proc)
    assert "matmul_kernel │ kernel.py:47 │ 2 │ 9 │ 9 │ 0.07 │" in out and "measured:interpreter-wall" in out
    assert "says nothing of GPU time" in out and "matmul_kernel: its tile order can matter (mapping lifted)" in out
    proc = _cli("profile", "--app", f"{sys.executable} {THREE / 'app.py'}", "--json", "--workdir",
                str(tmp_path / ".sp"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = json.loads(proc.stdout)   # nothing but JSON on stdout
    assert [r["kernel"] for r in rows] == ["scale_kernel", "sum_kernel", "matmul_kernel"]
    assert [r["order_can_matter"] for r in rows] == [False, False, True] and rows[2]["rewrite"] == "lifted"
    assert rows[2]["grid"] == [2, 3] and rows[2]["source"] == "measured:interpreter-wall"
    assert "says nothing of GPU time" in rows[2]["source_note"] and rows[1]["passed_over_because"].startswith("a launch")


def test_a_failing_app_is_one_line(tmp_path):
    proc = _cli("profile", "--app", f"{sys.executable} {APPS / 'fails.py'}", "--workdir", str(tmp_path / "wd"),
                cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "failed (exit code 1): fails.py: the input file is missing" in _flat(proc)


@pytest.mark.parametrize("workdir", [".", "/tmp"])
def test_a_workdir_the_app_must_write_is_refused_in_one_line_before_the_app_runs(tmp_path, workdir):
    """#41 round fourteen: with ``--workdir .`` (the app's working folder) the box let the app delete
    the runs and empty the record (a folder both read-only and writable to the app is writable)."""
    (tmp_path / "app.py").write_text("open('RAN', 'w').write('x')\n")
    proc = _cli("profile", "--app", f"{sys.executable} app.py", "--workdir", workdir, cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stdout + proc.stderr
    assert "is a folder the app must be able to write" in _flat(proc) and "--workdir" in _flat(proc)
    assert not (tmp_path / "RAN").exists() and not (tmp_path / "swizzleperf.db").exists()


def test_optimize_app_without_kernel_picks_the_tutorial_gemm_and_stops_at_one_wave(tmp_path):
    """On an A100 (one L2) the tutorial's 9 programs run in one wave: the run ends after the
    baseline's verification, no order timed."""
    app = f"{sys.executable} {EXAMPLES / 'tutorial_gemm' / 'app.py'}"
    proc = _cli("optimize", "--app", app, "--iterations", "1", "--hw", "a100", "--workdir", str(tmp_path / ".sp"),
                cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = _flat(proc)
    assert "chose matmul_kernel (100% of the time): grid 9 (9 programs)" in out
    assert "captured matmul_kernel (kernel.py:47)" in out
    report = json.loads(next((tmp_path / ".sp" / "runs").glob("*/report.json")).read_text())
    assert report["baseline"]["verdict"] == "PASS" and report["attempts"] == []
    assert report["stop_reason"].startswith("no order can matter at this size: 9 programs run in one wave (108 at "
                                            "once: 108 SMs x 1 resident per SM, a100, simulated: no GPU here)")


def test_optimize_app_top_runs_the_three_kernel_apps_reorderable_kernel_with_one_summary(tmp_path):
    proc = _cli("optimize", "--app", f"{sys.executable} {THREE / 'app.py'}", "--top", "2", "--iterations", "1",
                "--hw", "mi300x", "--workdir", str(tmp_path / ".sp"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = _flat(proc)
    assert "passed over scale_kernel (" in out and "passed over sum_kernel (" in out
    assert "chose matmul_kernel (" in out and "--top: the kernels optimized in turn" in out
    assert "matmul_kernel │" in out and "finished: iteration budget reached (1)" in out
    report = json.loads(next((tmp_path / ".sp" / "runs").glob("*/report.json")).read_text())
    assert report["baseline"]["verdict"] == "PASS" and report["user_kernel"]["kernel"] == "matmul_kernel"


def _event(name: str, us: float, device: str = "CUDA", start: float = 0.0):
    from types import SimpleNamespace
    return SimpleNamespace(name=name, device_type=SimpleNamespace(name=device),
                           time_range=SimpleNamespace(start=start, elapsed_us=lambda: us))


def test_the_gpu_path_matches_the_profilers_device_kernels_to_the_records_by_name(monkeypatch):
    """The CUPTI path without a GPU: a stopped torch.profiler stand-in holding two dispatches of one
    Triton kernel, one of another, a CPU op and a cuBLAS kernel. Each record gets its kernel's
    device time (Triton names the compiled kernel after its function), labelled measured:cupti; a
    kernel the profiler did not see is unmeasured, said so; the rest is the non-Triton GPU time."""
    from types import SimpleNamespace
    from swizzleperf.agent.capture import capture_hook as hook
    events = [_event("matmul_kernel", 30.0, start=1), _event("matmul_kernel", 10.0, start=2),
              _event("scale_kernel", 5.0), _event("aten::mm", 99.0, "CPU"), _event("sm90_xmma_gemm", 20.0)]
    profiler = SimpleNamespace(stop=lambda: None, events=lambda: events)
    monkeypatch.setattr(hook, "_clock", {"source": "measured:cupti", "profiler": profiler})
    monkeypatch.setattr(hook, "_dispatches", {"matmul_kernel": [True, True], "scale_kernel": [True]})
    entries = [dict(kernel="matmul_kernel", calls=2, wall_s=1e-3), dict(kernel="scale_kernel", calls=1, wall_s=1e-3),
               dict(kernel="never_seen", calls=1, wall_s=1e-3)]
    out, other = hook._kernel_times(entries)
    assert [e["time_s"] for e in out] == [pytest.approx(40e-6), pytest.approx(5e-6), None]
    assert [e["source"] for e in out] == ["measured:cupti", "measured:cupti",
                                          "unmeasured: measured:cupti recorded no GPU kernel named never_seen"]
    assert other == pytest.approx(20e-6)


def test_a_profiler_that_fails_at_exit_leaves_the_launch_calls_host_time_labelled_so(monkeypatch):
    from types import SimpleNamespace
    from swizzleperf.agent.capture import capture_hook as hook

    def stop():
        raise RuntimeError("CUPTI_ERROR_NOT_INITIALIZED")
    monkeypatch.setattr(hook, "_clock", {"source": "measured:cupti", "profiler": SimpleNamespace(stop=stop)})
    out, other = hook._kernel_times([dict(kernel="k", calls=1, wall_s=2e-3)])
    assert (out[0]["time_s"], out[0]["source"], other) == (2e-3, "measured:launch-wall", None)
    assert "torch.profiler failed at exit (RuntimeError: CUPTI_ERROR_NOT_INITIALIZED)" in hook._clock["note"]


def test_an_autotuners_benchmark_dispatches_are_left_out_of_a_kernels_gpu_time(monkeypatch):
    """The app's autotuner timed two configs (three dispatches each) before the app's own launch:
    the dispatches pair up with the launches in order, only the app's own is counted. Where they
    do not pair up, the mean dispatch times the app's launches stands in, said in the source."""
    from types import SimpleNamespace
    from swizzleperf.agent.capture import capture_hook as hook
    events = [_event("matmul_kernel", us, start=i) for i, us in enumerate([50, 50, 50, 20, 20, 20, 21])]
    profiler = SimpleNamespace(stop=lambda: None, events=lambda: events)
    monkeypatch.setattr(hook, "_clock", {"source": "measured:cupti", "profiler": profiler})
    monkeypatch.setattr(hook, "_dispatches", {"matmul_kernel": [False] * 6 + [True]})
    out, _ = hook._kernel_times([dict(kernel="matmul_kernel", calls=1, wall_s=1e-3)])
    assert (out[0]["time_s"], out[0]["source"]) == (pytest.approx(21e-6), "measured:cupti")
    monkeypatch.setattr(hook, "_clock", {"source": "measured:cupti", "profiler": profiler})
    monkeypatch.setattr(hook, "_dispatches", {"matmul_kernel": [False] * 5 + [True]})
    out, _ = hook._kernel_times([dict(kernel="matmul_kernel", calls=1, wall_s=1e-3)])
    assert out[0]["time_s"] == pytest.approx(231e-6 / 7)
    assert "the mean of 7 dispatches x 1 launches: the dispatches did not pair up with the 6 launches" \
        in out[0]["source"]
