"""The run record holds only data (#41): what ``--resume`` and the report read back from
``swizzleperf.db`` is checked before use. A checkpoint naming a constructor (LangGraph's msgpack
extension types: ``module.name(arg)``) is not called; a ``runs`` row of the wrong shape (its
configuration 20 000 deep, text for a number, an unknown option, a number for a path) is one
line (``UnusableRunError``), never a traceback or a run started from it."""
from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import ormsgpack
import pytest
from langgraph.checkpoint.serde.jsonplus import EXT_CONSTRUCTOR_SINGLE_ARG

from swizzleperf.agent.loop import run
from swizzleperf.agent.loop.record import RunRecord, UnusableRunError
from swizzleperf.agent.proposers.scripted import ScriptedProposer
from swizzleperf.agent.verification.swizzles import catalog_source

ARGS = ["pid", "num_pid_m", "num_pid_n"]
ROW = {"kernel": "k", "kernel_path": "/k.py", "hardware": "h", "mode": "simulated", "proposer": "p", "run_dir": "r"}


def _finished_run(tmp_path: Path, gemm_path: Path) -> tuple[run.RunOptions, str]:
    kernel = tmp_path / "gemm.py"
    kernel.write_text(gemm_path.read_text())
    options = run.RunOptions(kernel=str(kernel), hw="mi300x", workdir=str(tmp_path / ".sp"), iterations=1)
    outcome = run.start(options, proposer=ScriptedProposer([("col", catalog_source("column-major", ARGS))]))
    return options, outcome.run_id


def test_a_checkpoint_that_names_a_constructor_is_not_called_on_resume(tmp_path, gemm_path):
    options, run_id = _finished_run(tmp_path, gemm_path)
    marker = tmp_path / "constructed"
    planted = ormsgpack.Ext(EXT_CONSTRUCTOR_SINGLE_ARG, ormsgpack.packb(("os", "mkdir", str(marker))))
    with sqlite3.connect(Path(options.workdir) / "swizzleperf.db") as db:
        rowid, kind, blob = db.execute("SELECT rowid, type, checkpoint FROM checkpoints WHERE thread_id = ? "
                                       "ORDER BY checkpoint_id DESC LIMIT 1", (run_id,)).fetchone()
        assert kind == "msgpack"
        checkpoint = ormsgpack.unpackb(blob, ext_hook=lambda code, data: ormsgpack.Ext(code, data))
        checkpoint["channel_values"]["stop_reason"] = planted
        db.execute("UPDATE checkpoints SET checkpoint = ? WHERE rowid = ?", (ormsgpack.packb(checkpoint), rowid))
    try:
        run.resume(run_id, workdir=options.workdir, proposer=ScriptedProposer([]))
    except run.RunError:
        pass   # what it says of a stop reason that is not text is not the point; the call is
    assert not marker.exists(), "a constructor named in the record ran"


DEEP = "[" * 20_000 + "]" * 20_000   # 40 000 characters: within the length allowed


@pytest.mark.parametrize("config, expected", [
    (DEEP, "nests 20000 levels deep"),
    ("5", "config: Input should be a valid dictionary"),
    (json.dumps({"kernel": "k.py", "iterations": "lots"}), "iterations: Input should be a valid integer"),
    (json.dumps({"kernel": "k.py", "shell": "rm -rf /"}), "shell: Extra inputs are not permitted"),
    (json.dumps({"kernel": "k.py", "hw": {"name": "mi300x"}}), "config.hw"),
    ("{not json", "is not JSON"),
])
def test_a_run_row_of_the_wrong_shape_is_one_line(tmp_path, config, expected):
    record = RunRecord(tmp_path / ".sp")
    record.create_run("r1", ROW, {"kernel": "k.py"})
    with sqlite3.connect(record.db_path) as db:
        db.execute("UPDATE runs SET config_json = ?", (config,))
    with pytest.raises(UnusableRunError) as info:
        run.resume("r1", workdir=str(tmp_path / ".sp"), proposer=ScriptedProposer([]))
    message = str(info.value)
    assert expected in message and "\n" not in message and len(message) < 1200, message


@pytest.mark.parametrize("column, value", [("started_at", "yesterday"), ("hardware", None), ("config_json", 7),
                                           ("run_dir", b"\x00" * 10)])
def test_a_run_row_with_a_column_of_the_wrong_type_is_one_line(tmp_path, column, value):
    record = RunRecord(tmp_path / ".sp")
    record.create_run("r1", ROW, {"kernel": "k.py"})
    with sqlite3.connect(record.db_path) as db:
        db.execute(f"UPDATE runs SET {column} = ?", (value,))
    with pytest.raises(UnusableRunError) as info:
        record.run("r1")
    assert column.removesuffix("_json") in str(info.value) and "\n" not in str(info.value)
