"""#41: ``--resume`` of a run whose LangGraph checkpoint was rewritten in the record: bytes that are
not msgpack, a ``pickle`` row (never unpickled), an extension naming ``os.system`` (never called),
a state of another shape or with values of the wrong type. Each was a Python traceback (the run's
``_finish`` read the same checkpoint again); each is now one line naming the record, nothing run,
the run's report as it was."""
from __future__ import annotations

import os
import pickle
import shutil
import sqlite3
from pathlib import Path

import ormsgpack
import pytest

from swizzleperf.agent.loop import run
from swizzleperf.agent.proposers.scripted import ScriptedProposer
from swizzleperf.agent.verification.swizzles import catalog_source

ARGS = ["pid", "num_pid_m", "num_pid_n"]


class _Payload:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def _rewritten_state(values: dict):
    def tamper(db: sqlite3.Connection, marker: Path) -> None:
        for rowid, kind, blob in db.execute("SELECT rowid, type, checkpoint FROM checkpoints").fetchall():
            checkpoint = run.CHECKPOINT_SERDE.loads_typed((kind, blob))
            checkpoint["channel_values"].update(values)
            db.execute("UPDATE checkpoints SET type = ?, checkpoint = ? WHERE rowid = ?",
                       (*run.CHECKPOINT_SERDE.dumps_typed(checkpoint), rowid))
    return tamper


def _every_row(kind: str, blob):
    def tamper(db: sqlite3.Connection, marker: Path) -> None:
        data = blob(marker) if callable(blob) else blob
        db.execute("UPDATE checkpoints SET type = ?, checkpoint = ?", (kind, data))
    return tamper


TAMPERED = {
    "bytes that are not msgpack": _every_row("msgpack", b"\xc1\xc1\xc1\xc1"),
    "a pickle": _every_row("pickle", lambda marker: pickle.dumps(_Payload(marker))),
    "an extension naming os.system": _every_row("msgpack", lambda marker: ormsgpack.packb(ormsgpack.Ext(
        0, ormsgpack.packb(("os", "system", (f"touch {marker}",)))))),
    "a state of another shape": _every_row("msgpack", ormsgpack.packb({"v": 4, "channel_values": {"history": 5}})),
    "an iteration that is text": _rewritten_state({"iteration": "many"}),
    "a history that is a number": _rewritten_state({"history": 5}),
    "an attempt that is a number": _rewritten_state({"history": [5]}),
    # found 2026-12-06: a figure of an attempt rewritten as text was a TypeError in the report
    "a best whose time is text": _rewritten_state({"best": {"name": "x", "metrics": {"time_ms": "fast"}}}),
    "an attempt whose verdict is a number": _rewritten_state({"history": [{"name": "x", "verdict": 7}]}),
    "an attempt whose hit rate is text": _rewritten_state({"history": [{"name": "x", "metrics": {"l2_hit_rate": "high"}}]}),
    "a best whose kernel file is a number": _rewritten_state({"best": {"name": "x", "kernel_file": 5}}),
}


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory, gemm_path):
    """One short run, its work folder kept as it left it (each test resumes a copy of its own)."""
    folder = tmp_path_factory.mktemp("run")
    kernel = folder / "gemm.py"
    kernel.write_text(gemm_path.read_text())
    options = run.RunOptions(kernel=str(kernel), hw="mi300x", workdir=str(folder / ".swizzleperf"), iterations=1)
    outcome = run.start(options, proposer=ScriptedProposer([("col", catalog_source("column-major", ARGS))]))
    return outcome.run_id, Path(options.workdir)


def _copy(finished_run, tmp_path: Path) -> tuple:
    run_id, workdir = finished_run
    copy = tmp_path / ".swizzleperf"
    shutil.copytree(workdir, copy)
    return run_id, copy, next(p for p in (copy / "runs").iterdir() if p.name == run_id)


@pytest.mark.parametrize("name", list(TAMPERED))
def test_a_rewritten_checkpoint_is_one_line_and_runs_nothing(finished_run, tmp_path, name):
    run_id, workdir, run_dir = _copy(finished_run, tmp_path)
    db_path = workdir / "swizzleperf.db"
    marker = tmp_path / "payload-ran"
    with sqlite3.connect(db_path) as db:
        TAMPERED[name](db, marker)
    db.close()
    report = (run_dir / "report.json").read_bytes()
    with pytest.raises(run.RunError, match="holds a checkpoint of run .* that cannot be read") as info:
        run.resume(run_id, workdir=str(workdir),
                   proposer=ScriptedProposer([("row", catalog_source("row-major", ARGS))]))
    assert "\n" not in str(info.value) and "swizzleperf.db" in str(info.value)
    assert not marker.exists(), "a checkpoint ran code"
    assert (run_dir / "report.json").read_bytes() == report


def test_an_untouched_checkpoint_still_resumes(finished_run, tmp_path):
    run_id, workdir, _ = _copy(finished_run, tmp_path)
    resumed = run.resume(run_id, workdir=str(workdir),
                         proposer=ScriptedProposer([("row", catalog_source("row-major", ARGS))]))
    assert resumed.status in ("finished", "stalled")
