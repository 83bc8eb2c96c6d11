"""The run record under faults (#21): a lock held by another process is waited for with a bounded
retry, then one line; a full disk is one line; in both cases the run resumes where it stopped."""
from __future__ import annotations

import errno
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from swizzleperf.agent.loop import record as record_module
from swizzleperf.agent.loop import run
from swizzleperf.agent.loop.record import RecordFull, RecordLocked, RunRecord
from swizzleperf.agent.proposers.scripted import ScriptedProposer
from swizzleperf.agent.verification.swizzles import catalog_source

ARGS = ["pid", "num_pid_m", "num_pid_n"]
ROW = {"kernel": "k", "kernel_path": "/k.py", "hardware": "h", "mode": "simulated", "proposer": "p", "run_dir": "r"}

_HOLDER = """
import sqlite3, sys, time
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("BEGIN IMMEDIATE")
print("held", flush=True)
time.sleep(float(sys.argv[2]))
db.execute("COMMIT")
"""


def hold_lock(db_path: Path, seconds: float) -> subprocess.Popen:
    """Another process holding the record's write lock for ``seconds`` (returns once it holds it)."""
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(db_path), str(seconds)],
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    return holder


def _record(tmp_path: Path, wait_s: float) -> RunRecord:
    record = RunRecord(tmp_path / ".sp", wait_s=wait_s)
    record.create_run("r1", ROW, {"base_url": None})
    return record


def test_a_write_waits_for_a_lock_held_briefly(tmp_path):
    record = _record(tmp_path, wait_s=30)
    holder = hold_lock(record.db_path, 1.5)
    start = time.monotonic()
    record.finish_run("r1", "finished", "done")
    assert time.monotonic() - start >= 1.0  # it waited, and then wrote
    assert record.run("r1")["status"] == "finished"
    holder.wait(timeout=10)


def test_a_lock_held_past_the_wait_is_one_line(tmp_path):
    record = _record(tmp_path, wait_s=1.0)
    holder = hold_lock(record.db_path, 8)
    try:
        start = time.monotonic()
        with pytest.raises(RecordLocked) as info:
            record.finish_run("r1", "finished", "done")
        assert time.monotonic() - start < 5
        assert str(info.value) == (f"the run record {record.db_path} stayed locked by another process for 1 s: "
                                   f"let it finish (or stop it) and continue")
        assert record.run("r1")["status"] == "running"  # readers never wait (WAL)
    finally:
        holder.kill()
        holder.wait()


def test_a_full_disk_is_one_line(tmp_path, monkeypatch):
    record = _record(tmp_path, wait_s=5)
    connect = RunRecord.connect

    def full(self, timeout_s=None):
        db = connect(self, timeout_s)
        pages = db.execute("PRAGMA page_count").fetchone()[0]
        db.execute(f"PRAGMA max_page_count = {pages}")  # SQLite's own SQLITE_FULL, as on a full disk
        return db
    monkeypatch.setattr(RunRecord, "connect", full)
    attempt = {"kind": "candidate", "iteration": 1, "name": "big", "verdict": "PASS", "rationale": "x" * 200_000}
    with pytest.raises(RecordFull, match=r"^no space left on the disk holding .*swizzleperf.db \(database or disk "
                                         r"is full\): free space and continue$"):
        record.save_attempt("r1", attempt, "p", is_best=False)


class Hooked(ScriptedProposer):
    """A scripted proposer that runs ``hooks[turn]`` (if any) before proposing in that turn."""

    def __init__(self, script, hooks):
        super().__init__(script)
        self.hooks = hooks

    def propose(self, context):
        hook = self.hooks.get(len(self.contexts))
        if hook:
            hook()
        return super().propose(context)


def _options(tmp_path: Path, gemm_path: Path, **extra) -> run.RunOptions:
    kernel = tmp_path / "gemm.py"
    kernel.write_text(gemm_path.read_text())
    return run.RunOptions(kernel=str(kernel), hw="mi300x", workdir=str(tmp_path / ".sp"), plateau=10, **extra)


def test_a_run_waits_out_a_short_lock_stops_in_one_line_at_a_long_one_and_resumes(tmp_path, gemm_path, monkeypatch):
    monkeypatch.setattr(record_module, "RECORD_WAIT_S", 2.0)
    options = _options(tmp_path, gemm_path, iterations=3)
    db = Path(options.workdir) / "swizzleperf.db"
    holders = []
    proposer = Hooked([("col", catalog_source("column-major", ARGS)), ("xcd", catalog_source("xcd-grouped-m:8:8", ARGS))],
                      {0: lambda: holders.append(hold_lock(db, 1.0)),    # shorter than the wait: waited out
                       1: lambda: holders.append(hold_lock(db, 6.0))})   # longer: the run stops, saved
    with pytest.raises(run.RunError) as info:
        run.start(options, proposer=proposer)
    message = str(info.value)
    assert "locked by another process" in message and "--resume" in message and "\n" not in message
    assert "internal error" not in message
    run_id = message.rsplit("--resume ", 1)[1].split()[0]
    for holder in holders:
        holder.wait(timeout=30)
    resumed = run.resume(run_id, workdir=options.workdir,
                         proposer=ScriptedProposer([("xcd", catalog_source("xcd-grouped-m:8:8", ARGS)),
                                                    ("grouped", catalog_source("grouped-m:8", ARGS))]))
    assert resumed.status == "finished"
    assert [a["name"] for a in resumed.report["attempts"]] == ["col", "xcd", "grouped"]


def test_a_full_disk_stops_the_run_in_one_line_and_it_resumes(tmp_path, gemm_path, monkeypatch):
    options = _options(tmp_path, gemm_path, iterations=2)
    write_text, replace = Path.write_text, os.replace

    def no_space(path, *args, **kwargs):
        if str(path).startswith(str(tmp_path)):
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return write_text(path, *args, **kwargs)

    def no_space_to_replace(source, target, *args, **kwargs):   # the run folder's files (write_back.replace_file)
        if str(target).startswith(str(tmp_path)):
            raise OSError(errno.ENOSPC, "No space left on device", str(target))
        return replace(source, target, *args, **kwargs)

    def full() -> None:
        monkeypatch.setattr(Path, "write_text", no_space)
        monkeypatch.setattr(os, "replace", no_space_to_replace)
    proposer = Hooked([("col", catalog_source("column-major", ARGS)), ("xcd", catalog_source("xcd-grouped-m:8:8", ARGS))],
                      {1: full})
    with pytest.raises(run.RunError) as info:
        run.start(options, proposer=proposer)
    message = str(info.value)
    assert message.startswith("no space left on the disk holding ") and "--resume" in message and "\n" not in message
    run_id = message.rsplit("--resume ", 1)[1].split()[0]
    monkeypatch.setattr(Path, "write_text", write_text)  # space freed
    monkeypatch.setattr(os, "replace", replace)
    resumed = run.resume(run_id, workdir=options.workdir, proposer=ScriptedProposer([]))
    assert resumed.status == "finished"
    assert [a["name"] for a in resumed.report["attempts"]] == ["col", "xcd"]
    assert (resumed.run_dir / "report.json").exists()
