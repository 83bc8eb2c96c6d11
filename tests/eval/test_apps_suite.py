"""``swizzleperf eval --apps DIR`` on a CPU (eval/apps.py, eval/app_worker.py): three tiny apps of
tests/helpers/apps/suite/ (a 2-D tiled matmul that a run verifies, simulated only; a launch of one
program, refused; an app that raises by itself) give three rows of the right classes with their
reasons, in the record and in OUT.json / OUT.md; a resume runs nothing again; a worker that crashes
is a tool failure row and the suite goes on; an exception inside the worker is a tool failure with
its traceback in the log; a row past its budget is stopped and marked."""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from run_cli import assert_one_line_error, swizzleperf
from swizzleperf.eval import app_worker, apps
from swizzleperf.eval.apps import AppsError, AppsOptions, list_apps, run_apps

SUITE = Path(__file__).resolve().parents[1] / "helpers" / "apps" / "suite"
SLEEPS = Path(__file__).resolve().parents[1] / "helpers" / "apps" / "sleeps.py"


@pytest.fixture(scope="module")
def three_rows(tmp_path_factory):
    folder = tmp_path_factory.mktemp("apps")
    options = AppsOptions(apps_dir=str(SUITE), names=list_apps(str(SUITE)), iterations=1, row_budget_s=300,
                          hw="mi300x", workdir=str(folder / ".swizzleperf"), out=str(folder / "out" / "suite"))
    seen = []
    eval_id, summary, files = run_apps(options, on_row=lambda row, done, total: seen.append((row, done, total)),
                                       gpus=2, devices=[])
    return options, eval_id, summary, files, seen


def test_each_app_gets_its_row_and_class(three_rows):
    options, eval_id, summary, files, seen = three_rows
    rows = {r["app"]: r for r in summary["rows"]}
    assert sorted(rows) == ["matmul.py", "one_program.py", "raises.py"]
    matmul = rows["matmul.py"]
    assert matmul["outcome"] == "verified, no gain", matmul
    assert matmul["reason"].startswith("verified; simulated only (no GPU): predicted L2"), matmul["reason"]
    assert (matmul["kernel"], matmul["grid"], matmul["programs"]) == ("matmul_kernel", "3x3", 9)
    assert matmul["waves"] == pytest.approx(9 / 304, abs=1e-3)          # mi300x: 304 CUs, one program each
    assert Path(matmul["run_dir"], "user.diff").exists()
    assert rows["one_program.py"]["outcome"] == "refused", rows["one_program.py"]
    assert "one program" in rows["one_program.py"]["reason"]
    assert rows["raises.py"]["outcome"] == "app failed", rows["raises.py"]
    assert "the input weights.bin is missing" in rows["raises.py"]["reason"]
    assert all(r["seconds"] < options.row_budget_s for r in rows.values())
    assert [done for _, done, _ in seen] == [1, 2, 3] and {total for *_, total in seen} == {3}


def test_rows_reach_the_record_and_both_tables(three_rows):
    options, eval_id, summary, files, _ = three_rows
    assert len(apps.rows(options.workdir, eval_id)) == 3
    counts = summary["counts"]
    assert counts["verified, no gain"] == counts["refused"] == counts["app failed"] == 1
    assert (summary["answered"], summary["ran"], summary["over_budget"]) == (2, 3, 0)
    stored = json.loads(files[0].read_text())
    assert stored["counts"] == summary["counts"] and len(stored["rows"]) == 3
    text = files[1].read_text()
    assert "**2 of 3 (67%)**" in text and "## refused (1)" in text and "| raises.py |" in text


def test_a_resumed_eval_runs_no_app_again(three_rows):
    options, eval_id, summary, _, _ = three_rows
    seen = []
    again, resumed, _ = run_apps(AppsOptions(apps_dir="", workdir=options.workdir), eval_id,
                                 on_row=lambda *row: seen.append(row), devices=[])
    assert again == eval_id and seen == [] and resumed["counts"] == summary["counts"]


def test_a_resumed_eval_runs_the_rows_of_an_outcome_again_when_asked(three_rows):
    """``--again "tool failure"`` after an upgrade: only those rows run once more, their rows replaced."""
    options, eval_id, summary, _, _ = three_rows
    seen = []
    _, resumed, _ = run_apps(AppsOptions(apps_dir="", workdir=options.workdir), eval_id,
                             on_row=lambda row, done, total: seen.append((row["app"], done, total)), devices=[],
                             again=("app failed",))
    assert seen == [("raises.py", 3, 3)] and resumed["counts"] == summary["counts"]
    assert len(apps.rows(options.workdir, eval_id)) == 3


@pytest.mark.parametrize("args", [["--again", "tool failure", "--apps", str(SUITE)],
                                  ["--again", "broken", "--resume", "apps-x"], ["--again", "tool failure"]])
def test_again_without_a_resumed_apps_eval_or_with_no_outcome_is_one_line(tmp_path, args):
    assert_one_line_error(swizzleperf("eval", *args, "--workdir", str(tmp_path / ".swizzleperf"), cwd=tmp_path),
                          "--again")


def test_a_worker_that_crashes_is_a_tool_failure_and_the_suite_goes_on(tmp_path, monkeypatch):
    real = app_worker.worker_command
    crash = [sys.executable, "-c", "import sys; print('Traceback: boom'); sys.exit(3)"]
    monkeypatch.setattr(app_worker, "worker_command",
                        lambda job, row_file: crash if job.app.endswith("matmul.py") else real(job, row_file))
    options = AppsOptions(apps_dir=str(SUITE), names=["matmul.py", "raises.py"], iterations=1, row_budget_s=120,
                          workdir=str(tmp_path / ".swizzleperf"), out=str(tmp_path / "suite"))
    _, summary, _ = run_apps(options, devices=[])
    rows = {r["app"]: r for r in summary["rows"]}
    assert rows["matmul.py"]["outcome"] == "tool failure"
    assert rows["matmul.py"]["reason"] == "the worker died (exit code 3): Traceback: boom"
    assert rows["raises.py"]["outcome"] == "app failed"


def test_an_exception_in_the_worker_is_a_tool_failure_with_its_traceback(tmp_path, monkeypatch, capsys):
    from swizzleperf.agent.capture import bottleneck

    def broken(*args, **kwargs):
        raise ZeroDivisionError("a defect of ours")
    monkeypatch.setattr(bottleneck, "profile_app", broken)
    row = app_worker._Row(tmp_path / "row.json", "matmul.py")
    app_worker.evaluate(SUITE / "matmul.py", tmp_path / ".swizzleperf", 1, 60.0, row)
    written = json.loads((tmp_path / "row.json").read_text())
    assert (written["outcome"], written["reason"]) == ("tool failure", "ZeroDivisionError: a defect of ours")
    assert "Traceback" in capsys.readouterr().err


def test_a_row_past_its_budget_is_stopped_and_marked(tmp_path, monkeypatch):
    monkeypatch.setattr(app_worker, "STOP_GRACE_S", 2.0)
    monkeypatch.setattr(app_worker, "worker_command",
                        lambda job, row_file: [sys.executable, "-c", "import time; time.sleep(60)"])
    job = app_worker.RowJob(app=str(SLEEPS), folder=str(tmp_path / "row"), workdir=str(tmp_path), budget_s=3.0)
    started = time.monotonic()
    row = app_worker.run_row(job)
    assert time.monotonic() - started < 3.0 + 1.0 and row["seconds"] <= 3.0 + 0.5
    assert row["outcome"] == "timeout" and "at its budget of 3 s" in row["reason"], row


def test_an_app_past_the_workers_deadline_is_a_timeout(tmp_path):
    job = app_worker.RowJob(app=str(SLEEPS), folder=str(tmp_path / "row"), workdir=str(tmp_path / ".swizzleperf"),
                            budget_s=15.0)
    row = app_worker.run_row(job)
    assert row["outcome"] == "timeout" and row["seconds"] <= 15.0, row


def test_files_lists_names_and_says_which_are_missing(tmp_path):
    listed = tmp_path / "list.txt"
    listed.write_text("# the dev split\nraises.py\n\nmatmul.py\n")
    assert list_apps(str(SUITE), str(listed)) == ["raises.py", "matmul.py"]
    listed.write_text("raises.py\nnope.py\n")
    with pytest.raises(AppsError, match="not in .*: nope.py"):
        list_apps(str(SUITE), str(listed))


def test_ray_missing_is_one_line(monkeypatch):
    from swizzleperf.eval import apps_ray
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(apps_ray.RayMissing, match=r'pip install "swizzleperf\[ray\]"'):
        apps_ray.run_on_ray([], None, print)


def test_the_command_line_refuses_bad_input_in_one_line(tmp_path):
    proc = swizzleperf("eval", "--apps", str(tmp_path / "nowhere"), cwd=tmp_path)
    assert proc.returncode == 2 and "--apps must be a folder" in proc.stderr and "Traceback" not in proc.stderr


def _measured(best_ms: float, beyond_noise: bool, baseline_l2: float = 0.5) -> dict:
    """A finished run's report on a GPU (the fields verdict reads): 1000 programs, 132 a wave."""
    return {"status": "finished", "hardware": "h100", "mode": "measured", "stop_reason": "iteration budget reached (2)",
            "baseline": {"verdict": "PASS", "name": "baseline", "time_ms": 1.0, "time_spread_ms": 0.01,
                         "l2_hit_rate": baseline_l2, "source": "ncu"},
            "best": {"kind": "candidate", "name": "grouped-m:8", "time_ms": best_ms, "time_spread_ms": 0.01,
                     "beyond_noise_vs_baseline": beyond_noise},
            "workload": {"programs": 1000, "programs_per_wave": 132, "wave_note": "132 SMs x 1"},
            "attempts": [{}, {}]}


def test_a_measured_gain_beyond_noise_is_optimized_and_one_within_it_is_not():
    row = app_worker.verdict(_measured(0.9, True), {"lift_notes": []})
    assert row["outcome"] == "optimized" and row["speedup"] == pytest.approx(1 / 0.9, abs=1e-3)
    assert row["speedup_spread"] == pytest.approx(1 / 0.9 * (0.01 ** 2 + (0.01 / 0.9) ** 2) ** 0.5, abs=1e-3)
    assert "grouped-m:8: 1.111x" in row["reason"] and row["waves"] == pytest.approx(1000 / 132, abs=1e-3)
    within = app_worker.verdict(_measured(0.995, False), {"lift_notes": []})
    assert within["outcome"] == "verified, no gain"
    assert within["reason"].startswith("no order beyond noise of the kernel's own (2 tried")
    roof = app_worker.verdict(_measured(0.995, False, baseline_l2=0.97), {"lift_notes": []})
    assert roof["reason"].startswith("at the roof: the kernel's own order already hits L2 97.0%")


def test_a_captured_launch_that_does_not_replay_is_ours_unless_two_replays_disagree():
    from swizzleperf.agent.verification.stages import NOT_REPRODUCIBLE
    report = _measured(1.0, False)
    report["baseline"]["verdict"] = "MISMATCH"
    report["stop_reason"] = "the unmodified kernel fails verification: MISMATCH: output differs from the reference"
    assert app_worker.verdict(report, {"lift_notes": []})["outcome"] == "tool failure"
    report["stop_reason"] += f"; a second run of the same launch on the same inputs leaves o otherwise: {NOT_REPRODUCIBLE}"
    row = app_worker.verdict(report, {"lift_notes": []})
    assert row["outcome"] == "refused" and row["reason"].startswith("the captured launch cannot be checked: ")


def test_a_captured_launch_reaching_outside_its_tensors_is_refused_with_where():
    from swizzleperf.agent.verification.bounds import OUTSIDE_ITS_TENSORS
    report = _measured(1.0, False)
    report["baseline"]["verdict"] = "RUNTIME_ERROR"
    report["stop_reason"] = ("the unmodified kernel fails verification: RUNTIME_ERROR: AcceleratorError: CUDA error: "
                             "an illegal memory access was encountered")
    assert app_worker.verdict(report, {"lift_notes": []})["outcome"] == "tool failure"
    report["stop_reason"] += (f"; under Triton's interpreter with every access checked: {OUTSIDE_ITS_TENSORS}: the load "
                              f"at line 174 of rotary_emb_nopad.py (fused_rotary_embedding_kernel_v2)")
    row = app_worker.verdict(report, {"lift_notes": []})
    assert row["outcome"] == "refused" and "the load at line 174 of rotary_emb_nopad.py" in row["reason"]


def test_on_a_gpu_the_orders_timed_are_named_before_what_the_simulator_could_not_do():
    """#42: an attention operator of 2.9 waves on an H100 read "not traced: no access model ..." though
    its orders had been timed: the row says they were, and which."""
    report = _measured(1.0, False)
    report["attempts"] = [{"name": "row-major", "time_ms": 0.39}, {"name": "grouped-m:8", "time_ms": 0.40}]
    row = app_worker.verdict(report, {"lift_notes": ["no access model: the tracer could not extend ..."]})
    assert row["reason"] == ("no order beyond noise of the kernel's own: 2 timed on the GPU (row-major, grouped-m:8; "
                             "iteration budget reached (2)); the simulator could not rank them (not traced: no "
                             "access model: the tracer could not extend ...)")


def test_a_run_that_tried_no_order_says_why_instead_of_0_tried():
    report = _measured(1.0, False)
    report.update(attempts=[], stop_reason="no catalog order differs from the kernel's own: of 9 members, 9 map ...")
    row = app_worker.verdict(report, {"lift_notes": []})
    assert row["reason"] == "no order tried: no catalog order differs from the kernel's own: of 9 members, 9 map ..."


def test_an_error_raised_in_our_hook_inside_the_app_is_told_from_the_apps_own(tmp_path):
    from swizzleperf.agent.capture.capture import _hook_frame
    hook = tmp_path / "hook"
    log = tmp_path / "app.log"
    log.write_text(f'Traceback (most recent call last):\n  File "/apps/app.py", line 3, in <module>\n'
                   f'  File "{hook}/swizzleperf_cuda_on_cpu.py", line 255, in _cpu_driver\nAttributeError: x\n')
    assert _hook_frame(log, hook) == "swizzleperf_cuda_on_cpu.py:255"
    log.write_text(f'Traceback (most recent call last):\n  File "{hook}/sitecustomize.py", line 9, in run\n'
                   f'  File "/apps/app.py", line 3, in <module>\nValueError: the app\'s own\n')
    assert _hook_frame(log, hook) is None


@pytest.mark.parametrize("slots, devices, shared", [(3, ["0"], True), (2, ["0", "1"], False), (2, [], False)])
def test_more_workers_than_gpus_share_them_through_the_gpu_lock(tmp_path, monkeypatch, slots, devices, shared):
    """Workers beyond the GPUs get the lock folder (sandbox/gpu_lock.py) and the GPU round-robin;
    one worker per GPU, or none on a CPU, gets no lock; --no-ncu reaches the worker's command."""
    seen = []

    def fake(job, on_start=lambda p: None):
        seen.append(job)
        return {**app_worker.empty_row(Path(job.app).name), "outcome": "refused", "seconds": 0.0}
    monkeypatch.setattr(apps, "run_row", fake)
    jobs = [app_worker.RowJob(app=str(tmp_path / f"a{i}.py"), folder=str(tmp_path / "rows" / f"a{i}"),
                              workdir=str(tmp_path), use_ncu=False) for i in range(4)]
    apps.run_local(jobs, slots, devices, lambda row: None)
    assert len(seen) == 4
    locks = {job.gpu_lock_dir for job in seen}
    assert locks == ({str(tmp_path / "rows" / "gpu-locks")} if shared else {None})
    assert {job.device for job in seen} <= (set(devices) if devices else {None})
    assert "--no-ncu" in app_worker.worker_command(seen[0], tmp_path / "row.json")


@pytest.mark.parametrize("error, raised", [
    ("RuntimeError: CUDA error: an illegal memory access was encountered", "AppFailedError"),
    ("AttributeError: 'NoneType' object has no attribute 'data_ptr'", "HookFailedError")])
def test_a_cuda_fault_that_surfaces_in_our_hook_is_the_apps_kernels(tmp_path, monkeypatch, error, raised):
    """TritonBench-G rotary_emb_nopad on an H100 (2026-12-06): a kernel that reads outside its tensors
    (its CPU run says so) faulted, and the fault surfaced at the hook's next synchronisation."""
    from swizzleperf.agent.capture import capture

    def app_that_faults(command, env, timeout_s, cwd, log, stuck):
        hook = tmp_path / "work" / "hook"
        log.write_text(f'Traceback (most recent call last):\n  File "/apps/app.py", line 3, in <module>\n'
                       f'  File "{hook}/sitecustomize.py", line 339, in launched\n{error}\n'
                       f'Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n')
        return 1
    monkeypatch.setattr(capture, "run_with_hook", app_that_faults)
    (tmp_path / "work").mkdir()
    with pytest.raises(capture.CaptureError) as stopped:
        capture.run_app("python app.py", {}, tmp_path / "work", 60, tmp_path)
    assert type(stopped.value).__name__ == raised, stopped.value
    if raised == "AppFailedError":
        assert "CUDA error 'an illegal memory access was encountered' from a kernel it launched" in str(stopped.value)
        assert "(sitecustomize.py:339)" in str(stopped.value)
