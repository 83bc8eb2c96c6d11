"""``optimize --app`` finishes its run folder with the user's patched file (``user_<file>``), its
patch (``user.diff``) and a section of report.json and report.md: each was written through a link
planted at its name (report.md appended to whatever the link named). Each is a new file renamed
over the name now, as every file a run writes (#41)."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from hang_guard import never_blocks

from swizzleperf.agent.capture import user_kernel

SOURCE = '''import triton


@triton.jit
def swizzle(pid, num_pid_m, num_pid_n):
    return pid // num_pid_n, pid % num_pid_n
'''
NAMES = ["user_kernel.py", "user.diff", "report.md"]


@pytest.fixture(autouse=True)
def _private_home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def _finished_run(tmp_path: Path) -> tuple:
    """A run folder as the loop leaves it (report.json, report.md) and what ``finish`` reads."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "report.json").write_text(json.dumps({"run_id": "r1"}))
    (run_dir / "report.md").write_text("# the run\n")
    user_file = tmp_path / "app" / "kernel.py"
    user_file.parent.mkdir()
    user_file.write_text(SOURCE)
    capture = SimpleNamespace(folder=tmp_path / "capture", launch={"app": "python app.py", "kernel": "k"},
                              describe=lambda: "k launched once with a 4 x 4 grid")
    lifted = SimpleNamespace(source=SOURCE, target_name="swizzle", target_source=SOURCE.split("\n\n\n")[1],
                             lines=[5, 6], kind="lifted", notes=[])
    prepared = SimpleNamespace(capture=capture, lifted=lifted, user_file=user_file, tolerance_note="bitwise",
                               original=SOURCE, original_sha256="", original_bytes=SOURCE.encode())
    outcome = SimpleNamespace(run_dir=str(run_dir), report={"best": {}}, status="finished")
    return run_dir, prepared, outcome


@pytest.mark.parametrize("kind", ["a link", "a named pipe"])
@pytest.mark.parametrize("name", NAMES)
def test_what_is_planted_in_the_run_folder_is_replaced(tmp_path, name, kind):
    run_dir, prepared, outcome = _finished_run(tmp_path)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    planted = run_dir / name
    if name == "report.md":
        planted.unlink()
    if kind == "a link":
        planted.symlink_to(victim)
    else:
        os.mkfifo(planted)
    with never_blocks(30, f"finish on a pipe planted at {name}"):
        summary = user_kernel.finish(outcome, prepared, in_place=False, test=None)
    assert victim.read_text() == "precious\n", f"{name}: written through a link"
    assert not planted.is_symlink() and planted.is_file()
    assert json.loads((run_dir / "report.json").read_text())["user_kernel"]["user_diff"] == summary["user_diff"]
    assert "## Your kernel" in (run_dir / "report.md").read_text()


def test_report_json_as_a_link_is_replaced_not_written_through(tmp_path):
    run_dir, prepared, outcome = _finished_run(tmp_path)
    victim = tmp_path / "victim.json"
    (run_dir / "report.json").rename(victim)
    (run_dir / "report.json").symlink_to(victim)
    user_kernel.finish(outcome, prepared, in_place=False, test=None)
    assert json.loads(victim.read_text()) == {"run_id": "r1"}
    assert not (run_dir / "report.json").is_symlink()
    assert json.loads((run_dir / "report.json").read_text())["user_kernel"]["app"] == "python app.py"


def test_the_patched_file_is_read_only_and_the_report_grows_by_a_section(tmp_path):
    run_dir, prepared, outcome = _finished_run(tmp_path)
    user_kernel.finish(outcome, prepared, in_place=False, test=None)
    assert (run_dir / "user_kernel.py").read_text() == SOURCE
    assert (run_dir / "user_kernel.py").stat().st_mode & 0o777 == 0o444
    assert (run_dir / "report.md").read_text().startswith("# the run\n\n## Your kernel\n")


@pytest.mark.parametrize("kind", ["a link", "a named pipe"])
def test_a_trace_note_that_is_no_regular_file_is_not_read(tmp_path, kind):
    """The capture folder's note of a trace without an access model (``trace_fallback.txt``) goes
    into report.md: a pipe planted there was waited on, a link's target copied into the report."""
    run_dir, prepared, outcome = _finished_run(tmp_path)
    prepared.capture.folder.mkdir()
    secret = tmp_path / "secret.txt"
    secret.write_text("a secret\n")
    planted = prepared.capture.folder / "trace_fallback.txt"
    if kind == "a link":
        planted.symlink_to(secret)
    else:
        os.mkfifo(planted)
    with never_blocks(30, "finish on a pipe planted at the trace note"):
        summary = user_kernel.finish(outcome, prepared, in_place=False, test=None)
    assert summary["lift_notes"] == [] and "a secret" not in (run_dir / "report.md").read_text()


def test_a_trace_note_is_reported(tmp_path):
    run_dir, prepared, outcome = _finished_run(tmp_path)
    prepared.capture.folder.mkdir()
    (prepared.capture.folder / "trace_fallback.txt").write_text("no access model: the tracer could not extend")
    summary = user_kernel.finish(outcome, prepared, in_place=False, test=None)
    assert summary["lift_notes"] == ["no access model: the tracer could not extend"]
    assert "- note: no access model" in (run_dir / "report.md").read_text()


@pytest.mark.parametrize("kind", ["a link", "a named pipe"])
def test_the_test_log_planted_in_the_run_folder_is_replaced(tmp_path, kind):
    """``--test``'s log (``user_test.log``, written by ``CappedLog``) was opened through a link."""
    run_dir, prepared, _ = _finished_run(tmp_path)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    planted = run_dir / "user_test.log"
    if kind == "a link":
        planted.symlink_to(victim)
    else:
        os.mkfifo(planted)
    command = f"{sys.executable} -c \"print('tested')\""
    with never_blocks(120, "the test's log on a planted pipe"):
        result = user_kernel.run_test(command, prepared.user_file, run_dir / "user_kernel.py", run_dir, 120)
    assert result["passed"], result
    assert victim.read_text() == "precious\n", "the test's log written through a link"
    assert not planted.is_symlink() and planted.is_file() and "tested" in planted.read_text()
