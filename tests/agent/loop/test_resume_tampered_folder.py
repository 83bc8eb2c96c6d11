"""#41h: ``--resume`` of a run whose folder or checkpoint was tampered with (docs/trust.md: a run's
record and folder are data; nothing tampered is ever read as code; bad input is one clear line,
never a traceback, never a hang).

- A: the run folder's ``original_<kernel>`` with code appended, or a record without the kernel's
  digest, is refused in one line naming the file before anything imports it; nothing planted in the
  run folder is importable in the agent's process (the original is imported from a private copy).
- B, C: report.json, report.md, best.diff, transcript.jsonl and error.log replaced by a link to a
  file elsewhere, or by a named pipe, are replaced, never written through or waited on; a best
  kernel that is a named pipe is refused, not waited on; a candidates folder that is a link, or
  holds a link or a pipe, refuses the resume.
- D, E: a checkpoint whose figures do not fit what the report and the loop compute with (a time
  without its spread, a distributed run's configuration that is text, an interval that is text)
  is one line, the reports as they were; the report prints a time without its spread as such and
  never leaves report.json and report.md disagreeing.
- H: a kernel file name of 250 characters runs and resumes: every name the run makes in its folder
  stays within 255 bytes.
Hermetic: runs in tmp folders (the caches are the test session's own, tests/conftest.py)."""
from __future__ import annotations

import contextlib
import importlib
import json
import os
import shutil
import signal
import sqlite3
import sys
from pathlib import Path

import pytest

from swizzleperf.agent.loop import report as report_module
from swizzleperf.agent.loop import run
from swizzleperf.agent.loop.record import RunRecord
from swizzleperf.agent.proposers.scripted import ScriptedProposer
from swizzleperf.agent.verification.swizzles import catalog_source
from swizzleperf.sandbox.write_back import digest

ARGS = ["pid", "num_pid_m", "num_pid_n"]
ROOT = Path(__file__).resolve().parents[3]
GAS = ROOT / "kernels" / "distributed" / "gemm_all_scatter.py"


@pytest.fixture(autouse=True)
def _private_home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "home" / ".cache"))


@pytest.fixture(autouse=True)
def _sys_path_restored(monkeypatch):
    """A resume imports the kernel with its folder on ``sys.path``: each test's additions go."""
    monkeypatch.setattr(sys, "path", list(sys.path))


@contextlib.contextmanager
def _within(seconds: float):
    """Raise TimeoutError where the block is still running after ``seconds`` (a blocked open of
    a named pipe included), so that a regression fails instead of hanging the suite."""
    def stop(signum, frame):
        raise TimeoutError(f"still blocked after {seconds} s")
    previous = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory, gemm_path):
    """One short simulated run of gemm in the default work folder ``.swizzleperf`` of the folder
    it started from (the paths the record keeps are relative to it, as a user's are), kept as it
    left it: each test resumes a copy of its own."""
    folder = tmp_path_factory.mktemp("run")
    (folder / "gemm.py").write_text(gemm_path.read_text())
    with contextlib.chdir(folder):
        options = run.RunOptions(kernel="gemm.py", hw="mi300x", iterations=1)
        outcome = run.start(options, proposer=ScriptedProposer([("col", catalog_source("column-major", ARGS))]))
    return outcome.run_id, folder


@pytest.fixture(scope="module")
def finished_distributed_run(tmp_path_factory):
    """One short simulated run of the all-scatter GEMM on 4 ranks, kept as it left it."""
    folder = tmp_path_factory.mktemp("dist")
    with contextlib.chdir(folder):
        options = run.RunOptions(kernel=str(GAS), iterations=1, plateau=10, world_size=4, problem="llama70b-up-1k")
        outcome = run.start(options)
    return outcome.run_id, folder


@pytest.fixture
def copy_of(tmp_path, monkeypatch):
    """``copy_of(finished)``: ``(run id, work folder, run folder)`` of a copy of a finished run in
    the test's folder, which becomes the current folder (a resume from where the run started)."""
    def copy(finished) -> tuple:
        run_id, folder = finished
        shutil.copytree(folder, tmp_path, symlinks=True, dirs_exist_ok=True)
        monkeypatch.chdir(tmp_path)
        workdir = tmp_path / ".swizzleperf"
        return run_id, workdir, workdir / "runs" / run_id
    return copy


def _resume(run_id: str):
    return run.resume(run_id, workdir=".swizzleperf",
                      proposer=ScriptedProposer([("row", catalog_source("row-major", ARGS))]))


def _tamper_state(workdir: Path, change) -> None:
    """Every checkpoint of the record that holds a baseline, a best and a history with
    ``change(channel_values)`` applied (the last one among them, which a resume reads)."""
    with sqlite3.connect(workdir / "swizzleperf.db") as db:
        for rowid, kind, blob in db.execute("SELECT rowid, type, checkpoint FROM checkpoints").fetchall():
            checkpoint = run.CHECKPOINT_SERDE.loads_typed((kind, blob))
            values = checkpoint["channel_values"]
            if not (values.get("baseline") and values.get("best") and values.get("history")):
                continue
            change(values)
            db.execute("UPDATE checkpoints SET type = ?, checkpoint = ? WHERE rowid = ?",
                       (*run.CHECKPOINT_SERDE.dumps_typed(checkpoint), rowid))
    db.close()


def _tamper_options(workdir: Path, **changes) -> None:
    with sqlite3.connect(workdir / "swizzleperf.db") as db:
        config = json.loads(db.execute("SELECT config_json FROM runs").fetchone()[0])
        db.execute("UPDATE runs SET config_json = ?", (json.dumps({**config, **changes}),))
    db.close()


# -- A: what resume imports ------------------------------------------------------------------------

def test_an_original_with_code_appended_is_refused_before_it_is_imported(finished_run, tmp_path, copy_of):
    run_id, workdir, run_dir = copy_of(finished_run)
    marker = tmp_path / "imported"
    original = run_dir / "original_gemm.py"
    original.write_text(original.read_text() + f"\nopen({str(marker)!r}, 'w').close()\n")
    reports = [(run_dir / name).read_bytes() for name in ("report.json", "report.md")]
    with pytest.raises(run.RunError, match="original_gemm.py") as info:
        _resume(run_id)
    assert not marker.exists(), "the run folder's tampered original ran in the agent's process"
    assert "\n" not in str(info.value) and "digest" in str(info.value)
    assert [(run_dir / name).read_bytes() for name in ("report.json", "report.md")] == reports


def test_a_record_without_the_kernels_digest_is_refused(finished_run, tmp_path, copy_of):
    run_id, workdir, run_dir = copy_of(finished_run)
    _tamper_options(workdir, kernel_sha256=None)
    with pytest.raises(run.RunError, match="no digest") as info:
        _resume(run_id)
    assert "original_gemm.py" in str(info.value) and "\n" not in str(info.value)


def test_an_original_replaced_by_a_link_is_refused(finished_run, tmp_path, copy_of):
    run_id, workdir, run_dir = copy_of(finished_run)
    elsewhere = tmp_path / "elsewhere.py"
    shutil.copy(run_dir / "original_gemm.py", elsewhere)   # the same bytes: still not read through a link
    (run_dir / "original_gemm.py").unlink()
    (run_dir / "original_gemm.py").symlink_to(elsewhere)
    with pytest.raises(run.RunError, match="original_gemm.py.* link"):
        _resume(run_id)


def test_nothing_planted_in_the_run_folder_is_importable_after_a_resume(finished_run, tmp_path, copy_of):
    """The agent imports the original with its folder first on ``sys.path``: a module planted
    beside it (``openai.py``, which an LLM run imports after the kernel) would shadow the real one
    in the agent's process (#41h: it ran). The original is imported from a private copy."""
    run_id, workdir, run_dir = copy_of(finished_run)
    marker = tmp_path / "planted-ran"
    (run_dir / "swizzleperf_planted_41h.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    _resume(run_id)
    assert all(Path(p).resolve() != run_dir.resolve() for p in sys.path if p)
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("swizzleperf_planted_41h")
    assert not marker.exists()


# -- B, C: what resume writes ----------------------------------------------------------------------

@pytest.mark.parametrize("name", ["report.json", "report.md", "best.diff", "gemm.py", "transcript.jsonl"])
def test_a_link_in_the_run_folder_is_replaced_not_written_through(finished_run, tmp_path, copy_of, name):
    run_id, workdir, run_dir = copy_of(finished_run)
    if name == "transcript.jsonl":   # a run with LLM requests writes one
        RunRecord(workdir).save_requests(run_id, 1, [{
            "n": 1, "started_at": 1.0, "seconds": 0.5, "outcome": "ok", "finish_reason": "stop", "max_tokens": 10,
            "temperature": 0.2, "prompt_tokens": 1, "completion_tokens": 1, "tokens_source": "server",
            "messages": [{"role": "user", "content": "hi"}], "reply": "hello", "tool_calls": []}])
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    (run_dir / name).unlink(missing_ok=True)
    (run_dir / name).symlink_to(victim)
    with _within(60):
        _resume(run_id)
    assert victim.read_text() == "precious\n", f"{name}: written through a link"
    assert not (run_dir / name).is_symlink() and (run_dir / name).is_file()


def test_error_log_as_a_link_is_replaced_not_written_through(finished_run, tmp_path, copy_of):
    run_id, workdir, run_dir = copy_of(finished_run)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    (run_dir / "error.log").symlink_to(victim)
    try:
        raise ValueError("a defect")
    except ValueError as exc:
        error = run._failure(exc, RunRecord(workdir), run_id, run_dir)
    assert "internal error" in str(error) and "error.log" in str(error)
    assert victim.read_text() == "precious\n"
    assert "ValueError: a defect" in (run_dir / "error.log").read_text()


@pytest.mark.parametrize("name", ["report.json", "report.md", "best.diff"])
def test_a_named_pipe_in_the_run_folder_is_replaced_not_waited_on(finished_run, tmp_path, copy_of, name):
    run_id, workdir, run_dir = copy_of(finished_run)
    (run_dir / name).unlink()
    os.mkfifo(run_dir / name)
    with _within(60):
        _resume(run_id)
    assert (run_dir / name).is_file()
    if name == "report.json":
        assert json.loads((run_dir / name).read_text())["run_id"] == run_id


@pytest.mark.parametrize("name", ["report.json", "best.diff", "gemm.py"])
def test_a_folder_planted_at_an_output_name_is_moved_aside_not_a_lost_run(finished_run, tmp_path, copy_of, name):
    """Round nine of #41: a folder at one of the names a run writes (a rename cannot replace it) ended
    every resume in an IsADirectoryError traceback after all its work, the run left interrupted."""
    run_id, workdir, run_dir = copy_of(finished_run)
    (run_dir / name).unlink(missing_ok=True)
    (run_dir / name / "sub").mkdir(parents=True)
    (run_dir / name / "sub" / "kept.txt").write_text("kept\n")
    with _within(60):
        _resume(run_id)
    assert (run_dir / name).is_file() and not (run_dir / name).is_dir()
    aside = [f for f in run_dir.iterdir() if f.name.startswith(".swizzleperf-in-the-way-")]
    assert len(aside) == 1 and (aside[0] / "sub" / "kept.txt").read_text() == "kept\n"
    assert RunRecord(workdir).run(run_id)["status"] == "finished"


def test_outputs_that_cannot_be_written_still_close_the_run_in_the_record(finished_run, copy_of, monkeypatch):
    """A full disk (or anything else the file system refuses) while the reports are written: the
    run's row is closed with its result and the report says, in one line, what was not written."""
    run_id, workdir, run_dir = copy_of(finished_run)
    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(run, "write_outputs", full)
    with _within(60):
        outcome = _resume(run_id)
    assert "were not all written (OSError: [Errno 28] No space left on device)" in outcome.report["outputs_error"]
    assert f"--resume {run_id}" in outcome.report["outputs_error"]
    assert RunRecord(workdir).run(run_id)["status"] == "finished"


def test_a_best_kernel_that_is_a_named_pipe_is_refused_not_waited_on(finished_run, tmp_path, copy_of):
    run_id, workdir, run_dir = copy_of(finished_run)
    pipe = run_dir / "waiting.py"
    os.mkfifo(pipe)
    _tamper_state(workdir, lambda s: s["best"].update(kernel_file=str(pipe), kernel_sha256=digest("")))
    with _within(60):
        outcome = _resume(run_id)
    assert "not a regular file" in outcome.report["best_kernel_refused"]


def test_a_candidates_folder_that_is_a_link_is_refused(finished_run, tmp_path, copy_of):
    run_id, workdir, run_dir = copy_of(finished_run)
    outside = tmp_path / "outside"
    shutil.move(run_dir / "candidates", outside)
    (run_dir / "candidates").symlink_to(outside)
    with pytest.raises(run.RunError, match="candidates.* link") as info:
        _resume(run_id)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("kind", ["a link", "a named pipe"])
def test_a_candidates_folder_holding_a_link_or_a_pipe_is_refused(finished_run, tmp_path, copy_of, kind):
    """The candidates folder holds what the run wrote, regular files: a dangling link planted at
    a name the run writes later (``reference_<kernel>``) would be followed by the writer."""
    run_id, workdir, run_dir = copy_of(finished_run)
    planted = run_dir / "candidates" / "reference_original_gemm.py"
    planted.unlink(missing_ok=True)
    if kind == "a link":
        planted.symlink_to(tmp_path / "created-outside.py")
    else:
        os.mkfifo(planted)
    with _within(60), pytest.raises(run.RunError, match="reference_original_gemm.py") as info:
        _resume(run_id)
    assert "not a regular file" in str(info.value)
    assert not (tmp_path / "created-outside.py").exists()


def test_the_reports_are_unchanged_when_one_cannot_be_rendered(tmp_path):
    """report.json and report.md are rendered before either is written: a report that fails
    leaves both as they were (#41h: report.json was rewritten, report.md stayed old)."""
    (tmp_path / "report.json").write_text("old json")
    (tmp_path / "report.md").write_text("old md")
    with pytest.raises(KeyError):
        report_module.write_outputs(tmp_path, {"status": "finished"}, None, "gemm.py")
    assert (tmp_path / "report.json").read_text() == "old json"
    assert (tmp_path / "report.md").read_text() == "old md"


# -- D, E: figures the report and the loop compute with -------------------------------------------

def _time_without_spread(state: dict) -> None:
    for key in ("baseline", "best"):
        state[key]["metrics"].update(time_ms=1.5, time_spread_ms=None, time_source="measured:events:x")


def test_a_time_without_its_spread_is_one_line(finished_run, tmp_path, copy_of):
    run_id, workdir, run_dir = copy_of(finished_run)
    _tamper_state(workdir, _time_without_spread)
    reports = [(run_dir / name).read_bytes() for name in ("report.json", "report.md")]
    with pytest.raises(run.RunError, match="holds a checkpoint .* that cannot be read.*time_spread_ms") as info:
        _resume(run_id)
    assert "\n" not in str(info.value)
    assert [(run_dir / name).read_bytes() for name in ("report.json", "report.md")] == reports


def test_the_report_prints_a_time_without_its_spread_as_such():
    figure = {"name": "x", "time_ms": 3.355, "time_spread_ms": None, "time_source": "measured:events:GPU",
              "verdict": "PASS", "paired_gain_ms": 0.1, "paired_spread_ms": None, "torch_nccl_ms": 4.0}
    assert report_module.time_cells(figure) == ("3.355 ms", "measured:events:GPU")
    row = report_module._config_row("best: x", figure, {}, {"time_ms": 4.0})
    assert "| 3.355 |" in row and "paired gain +0.100 ms" in row


@pytest.mark.parametrize("field, value", [
    ("config", "bulk_sync"),                       # #41h: AttributeError: 'str' object has no attribute 'get'
    ("predicted_interval_ms", "ab"),                # #41h: IndexError: string index out of range
    ("predicted_interval_ms", [0.2, 0.1]),
    ("predicted_breakdown", {"host": "slow"}),
])
def test_a_distributed_checkpoint_of_the_wrong_shape_is_one_line(finished_distributed_run, copy_of, field, value):
    """Each attempt's figure rewritten (the report's table prints the best's and the kernel
    default's): one line naming the field, the report as it was."""
    run_id, workdir, run_dir = copy_of(finished_distributed_run)

    def change(state: dict) -> None:
        for attempt in [state["baseline"], state["best"], *state["history"]]:
            attempt["metrics"][field] = value
    _tamper_state(workdir, change)
    report = (run_dir / "report.json").read_bytes()
    with pytest.raises(run.RunError, match="holds a checkpoint .* that cannot be read") as info:
        run.resume(run_id, workdir=".swizzleperf")
    assert "\n" not in str(info.value) and f"metrics.{field}" in str(info.value)
    assert (run_dir / "report.json").read_bytes() == report


def test_an_untouched_distributed_run_still_resumes(finished_distributed_run, copy_of):
    run_id, workdir, run_dir = copy_of(finished_distributed_run)
    assert run.resume(run_id, workdir=".swizzleperf").status == "finished"


def _attempt(**metrics) -> dict:
    return {"kind": "candidate", "iteration": 1, "name": "x", "source": "s", "verdict": "PASS",
            "metrics": {"l2_hit_rate": 0.5, "time_ms": 1.0, "time_spread_ms": 0.1, **metrics}}


@pytest.mark.parametrize("metrics, field", [
    ({"time_ms": 0.0}, "time_ms"),                              # a divisor of every speedup
    ({"time_ms": float("nan")}, "time_ms"),
    ({"l2_hit_rate": None}, "l2_hit_rate"),                     # the simulated run's ranking key
    ({"dram_bytes": -1}, "dram_bytes"),
    ({"torch_nccl_ms": 2.0}, "torch_nccl_ms"),                 # without its spread and paired gain
    ({"paired_gain_ms": 0.1, "paired_spread_ms": 0.1}, "paired_gain_ms"),   # without torch + NCCL's time
    ({"rounds_ms": [1.0, 0.0]}, "rounds_ms"),
    ({"rounds_ms": "fast"}, "rounds_ms"),
    ({"predicted_time_ms": 1.0}, "predicted_time_ms"),         # without its compute and communication
    ({"profile": [{"name": "l2_hit_rate", "value": "high"}]}, "profile"),
    ({"roof": {"status": "measured"}}, "roof"),                 # no peaks
    ({"roof": {"status": "measured", "peaks": {}, "binding": "DRAM", "roof_share": 0.5, "max_gain": None}}, "roof"),
    ({"roof": {"status": "measured", "peaks": {}, "binding": "DRAM", "tflops": "lots"}}, "roof"),
])
def test_figures_that_do_not_fit_are_named(metrics, field):
    state = {"baseline": _attempt(), "best": _attempt(), "history": [_attempt(**metrics)]}
    with pytest.raises(TypeError, match=f"attempt 1 of its history: metrics.*{field}"):
        run._check_attempts(state)


def test_a_confirmation_contender_of_the_wrong_shape_is_named():
    state = {"baseline": _attempt(), "best": _attempt(),
             "confirmation": {"rounds": 5, "contenders": [{"name": "x", "time_ms": 1.0, "time_spread_ms": 0.1,
                                                           "rounds_ms": ["a"]}]}}
    with pytest.raises(TypeError, match="confirmation: contenders.0.rounds_ms"):
        run._check_attempts(state)


def test_a_genuine_measured_state_fits():
    roof = {"status": "measured", "binding": "DRAM", "tflops": 10.0, "gbps": 2000.0, "l2_gbps": None,
            "shares": {"compute": 0.1, "DRAM": 0.6, "L2": None}, "roof_share": 0.7, "max_gain": 0.4,
            "peaks": {"flops": 1e15, "flops_field": "peak_bf16_flops", "flops_what": "dense", "dram_bytes_per_s": 3e12,
                      "l2_bytes_per_s": None, "spec": "h100"}, "line": "x", "floor_ms": 0.7, "time_ms": 1.0}
    predicted_roof = {**roof, "status": "predicted", "tflops": "not measured", "roof_share": "not measured",
                      "max_gain": "not measured", "shares": {"compute": "not measured"}}
    state = {"baseline": _attempt(roof=roof), "best": _attempt(roof=predicted_roof, rounds_ms=[1.0, 1.1]),
             "history": [_attempt(torch_nccl_ms=2.0, torch_nccl_spread_ms=0.1, paired_gain_ms=1.0,
                                  paired_spread_ms=0.1, predicted_time_ms=1.0, predicted_compute_ms=0.5,
                                  predicted_comm_ms=0.5, predicted_hidden_share=0.5, predicted_interval_ms=[0.9, 1.2],
                                  config={"pattern": "bulk_sync", "COMM_SMS": 16}),
                         {"kind": "candidate", "iteration": 2, "name": "none", "source": "",
                          "verdict": "NO_CANDIDATE"}],
             "confirmation": {"rounds": 5, "contenders": [{"name": "x", "time_ms": 1.0, "time_spread_ms": 0.1,
                                                           "l2_hit_rate": None, "rounds_ms": [1.0]}]}}
    run._check_attempts(state)


# -- files the resumed loop would run again ------------------------------------------------------

def test_files_the_loop_would_run_again_must_be_as_verified(tmp_path):
    run_dir = tmp_path / "run"
    (run_dir / "candidates").mkdir(parents=True)
    kernel = run_dir / "candidates" / "candidate001-x_gemm.py"
    kernel.write_text("verified\n")
    outside = tmp_path / "outside.py"
    outside.write_text("planted\n")
    good = {**_attempt(), "kernel_file": str(kernel), "kernel_sha256": digest("verified\n")}
    state = {"baseline": good, "best": good, "history": [good]}
    assert run._unverified_files(state, run_dir, measured=True) is None
    assert "not in the run folder" in run._unverified_files(
        {**state, "best": {**good, "kernel_file": str(outside), "kernel_sha256": digest("planted\n")}}, run_dir, True)
    kernel.chmod(0o644)
    kernel.write_text("verified\nimport os\n")
    assert "changed after verification" in run._unverified_files(state, run_dir, measured=True)
    # simulated: a verified order is never run again, its file is only read through its digest
    assert run._unverified_files(state, run_dir, measured=False) is None
    # the attempt in flight is measured next, whatever the mode
    assert "changed after verification" in run._unverified_files({"pending": good}, run_dir, measured=False)
    kernel.write_text("verified\n")
    mapping = run_dir / "candidates" / "candidate001-x_gemm.map.npy"
    mapping.write_bytes(b"")
    assert run._unverified_files({"pending": {**good, "mapping": str(mapping)}}, run_dir, measured=False) is None
    outside_map = tmp_path / "elsewhere.map.npy"
    outside_map.write_bytes(b"")
    assert "mapping" in run._unverified_files({"pending": {**good, "mapping": str(outside_map)}}, run_dir, False)


# -- H: long kernel file names ---------------------------------------------------------------------

def test_a_kernel_file_name_of_250_characters_runs_and_resumes(tmp_path, gemm_path):
    kernel = tmp_path / ("k" * 247 + ".py")
    kernel.write_text(gemm_path.read_text())
    options = run.RunOptions(kernel=str(kernel), hw="mi300x", workdir=str(tmp_path / ".sp"), iterations=1)
    outcome = run.start(options, proposer=ScriptedProposer([("col", catalog_source("column-major", ARGS))]))
    assert outcome.status == "finished"
    resumed = run.resume(outcome.run_id, workdir=options.workdir, proposer=ScriptedProposer([]))
    assert resumed.status in ("finished", "stalled")
    names = [p.name for p in outcome.run_dir.rglob("*")]
    assert names and max(len(n.encode()) for n in names) <= 255
    assert any(n.startswith("original_kkkk") and n.endswith(".py") for n in names)


def test_in_place_writes_a_kernel_of_a_250_character_name(tmp_path):
    """``--in-place`` writes through a temporary file beside the kernel: its name stays short
    (it was ``.<name>.swizzleperf-<pid>.tmp``, past 255 bytes for such a kernel)."""
    from swizzleperf.sandbox.write_back import write_back
    kernel = tmp_path / ("k" * 247 + ".py")
    kernel.write_text("x = 1\n")
    kernel.chmod(0o640)
    assert write_back(kernel, digest("x = 1\n"), "x = 2\n") == (True, "written")
    assert kernel.read_text() == "x = 2\n" and (kernel.stat().st_mode & 0o777) == 0o640
    assert [p.name for p in tmp_path.iterdir()] == [kernel.name]


@pytest.mark.parametrize("name", ["gemm.py", "k" * 80 + ".py", "k" * 250 + ".py", "ä" * 120 + ".py"])
def test_names_in_the_run_folder_are_bounded_and_readable(name):
    short = run.in_folder_name(name)
    assert len(short.encode()) <= run.IN_FOLDER_NAME_BYTES and short.endswith(".py")
    if len(name.encode()) <= run.IN_FOLDER_NAME_BYTES:
        assert short == name
    else:
        assert short.startswith(name[:10]) and short != run.in_folder_name(name[:-4] + "x.py")


def test_a_run_folder_file_the_file_system_refuses_is_one_line(tmp_path, monkeypatch):
    run_dir = tmp_path / "runs" / "r1"
    (run_dir / "original_gemm.py").mkdir(parents=True)    # the name taken by a folder: moved aside
    run._make_run_dir(run_dir, "gemm.py", b"x = 1\n", str(tmp_path))
    assert (run_dir / "original_gemm.py").read_bytes() == b"x = 1\n"
    def refused(*args, **kwargs):                         # a name the file system refuses
        raise OSError(22, "Invalid argument")
    monkeypatch.setattr(run, "replace_file", refused)
    with pytest.raises(run.RunError, match="cannot write .*original_gemm.py") as info:
        run._make_run_dir(run_dir, "gemm.py", b"x = 1\n", str(tmp_path))
    assert "\n" not in str(info.value) and "run folder" in str(info.value)
