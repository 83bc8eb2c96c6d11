"""The run record holds only what the project creates (red-team C03, W02b): a ``swizzleperf.db``
carrying a trigger (one on ``runs`` inserting 3e8 rows hung ``optimize`` before it started), a
view, or a table or index of another name is refused on connecting, in one line naming the file
(``UnusableRecord``, a ``RecordError``), before anything is written or any trigger fires; a record
of an older version with fewer tables still opens; every statement is bounded
(``StatementBound``); and a new run's folder is never made outside ``--workdir`` through a link.

Each test has a workdir, HOME and XDG_CACHE_HOME of its own."""
from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

from swizzleperf.agent.loop import record as record_module
from swizzleperf.agent.loop import run
from swizzleperf.agent.loop.record import RecordError, RunRecord
from swizzleperf.agent.proposers.scripted import ScriptedProposer
from swizzleperf.agent.verification.swizzles import catalog_source

ARGS = ["pid", "num_pid_m", "num_pid_n"]
ROW = {"kernel": "k", "kernel_path": "/k.py", "hardware": "h", "mode": "simulated", "proposer": "p", "run_dir": "r"}
BOMB = ("CREATE TRIGGER bomb AFTER INSERT ON runs BEGIN INSERT INTO junk WITH RECURSIVE n(x) AS "
        "(SELECT 1 UNION ALL SELECT x+1 FROM n LIMIT {rows}) SELECT x FROM n; END")


@pytest.fixture(autouse=True)
def _private_home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))


def _record(tmp_path: Path) -> RunRecord:
    record = RunRecord(tmp_path / ".sp")
    record.connect().close()            # the tables a clean record has
    return record


def _plant(record: RunRecord, *statements: str) -> None:
    with sqlite3.connect(record.db_path) as db:
        for statement in statements:
            db.execute(statement)


def _count(record: RunRecord, table: str) -> int:
    with sqlite3.connect(record.db_path) as db:
        return db.execute(f"SELECT count(*) FROM {table}").fetchone()[0]


def test_a_record_with_a_trigger_on_runs_is_refused_in_one_line_before_it_fires(tmp_path):
    record = _record(tmp_path)
    _plant(record, "CREATE TABLE junk (x)", BOMB.format(rows=200_000))
    with pytest.raises(RecordError) as caught:
        record.create_run("r1", ROW, {"kernel": "k.py"})
    message = str(caught.value)
    assert "\n" not in message and str(record.db_path) in message
    assert "trigger named bomb" in message and "move it aside" in message
    assert _count(record, "junk") == 0, "the planted trigger ran"
    assert _count(record, "runs") == 0


@pytest.mark.parametrize("name, statements, expected", [
    ("a view", ["CREATE VIEW everything AS WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM n) "
                "SELECT x FROM n"], "a view named everything"),
    ("a trigger on another table", ["CREATE TRIGGER t AFTER UPDATE ON iterations BEGIN SELECT 1; END"],
     "a trigger named t"),
    ("an unknown table", ["CREATE TABLE junk (x)"], "a table named junk"),
    ("an unknown index", ["CREATE INDEX by_status ON runs (status)"], "an index named by_status"),
    ("an escape code in a name", ['CREATE TABLE "j\x1b]0;PWNED\x07" (x)'], "a table named j?]0;PWNED?"),
])
def test_a_record_holding_what_the_project_never_creates_is_refused(tmp_path, name, statements, expected):
    record = _record(tmp_path)
    _plant(record, *statements)
    for action in (lambda: record.latest_run_id(), lambda: record.run("r1"),
                   lambda: record.create_run("r1", ROW, {"kernel": "k.py"})):
        with pytest.raises(RecordError) as caught:
            action()
        assert expected in str(caught.value) and "\x1b" not in str(caught.value)
    assert _count(record, "runs") == 0


def test_a_record_of_an_older_version_and_one_every_command_wrote_still_open(tmp_path):
    older = RunRecord(tmp_path / "older")
    older.root.mkdir()
    _plant(older, "CREATE TABLE runs (run_id TEXT PRIMARY KEY, kernel TEXT, kernel_path TEXT, hardware TEXT, "
                  "mode TEXT, proposer TEXT, config_json TEXT, run_dir TEXT, started_at REAL, finished_at REAL, "
                  "status TEXT, stop_reason TEXT)")
    assert older.latest_run_id() is None
    older.create_run("r1", ROW, {"kernel": "k.py"})
    assert older.latest_run_id() == "r1"

    full = _record(tmp_path)
    from langgraph.checkpoint.sqlite import SqliteSaver

    from swizzleperf.eval import apps, evals_table
    evals_table.connect(str(full.root)).close()
    with full.connect() as db:
        db.executescript(apps._SCHEMA)
        SqliteSaver(db).setup()
    full.create_run("r2", ROW, {"kernel": "k.py"})
    assert full.latest_run_id() == "r2"
    with full.connect() as db:   # a user's ANALYZE adds SQLite's own statistics table: still a record
        db.execute("ANALYZE")
    full.create_run("r3", ROW, {"kernel": "k.py"})
    assert full.latest_run_id() == "r3"


def test_a_requests_table_of_an_older_version_gains_the_new_columns_and_the_transcript_carries_them(tmp_path):
    """A record written before ``prompt_detail`` and ``tools_tokens`` existed opens, gets both
    columns (NULL in its old rows), and a request saved afterwards carries them into
    ``transcript.jsonl`` as integers (3, not 3.0, beside the old row's null)."""
    import json
    older = RunRecord(tmp_path / "older")
    older.root.mkdir()
    _plant(older, "CREATE TABLE requests (run_id TEXT, iteration INTEGER, n INTEGER, started_at REAL, seconds REAL, "
                  "outcome TEXT, finish_reason TEXT, max_tokens INTEGER, temperature REAL, prompt_tokens INTEGER, "
                  "completion_tokens INTEGER, tokens_source TEXT, messages_json TEXT, reply TEXT, "
                  "tool_calls_json TEXT, rejected TEXT)",
           "INSERT INTO requests VALUES ('r', 1, 1, 1.0, 2.0, 'ok', 'stop', 64, 0.2, 10, 5, 'server', '[]', 'old', "
           "'[]', '')")
    exchange = {"n": 2, "started_at": 2.0, "seconds": 1.5, "outcome": "ok", "finish_reason": "stop", "max_tokens": 64,
                "temperature": 0.2, "prompt_tokens": 300, "completion_tokens": 7, "tokens_source": "estimated",
                "messages": [{"role": "user", "content": "hi"}], "reply": "new", "prompt_detail": 3,
                "tools_tokens": 232}
    older.save_requests("r", 1, [exchange])
    run._write_transcript(older, "r", tmp_path)
    lines = [json.loads(line) for line in (tmp_path / "transcript.jsonl").read_text().splitlines()]
    assert [(x["reply"], x["prompt_detail"], x["tools_tokens"]) for x in lines] == [("old", None, None), ("new", 3, 232)]
    assert isinstance(lines[1]["prompt_detail"], int) and isinstance(lines[1]["max_tokens"], int)


def test_a_statement_on_the_record_is_aborted_after_its_bound(tmp_path, monkeypatch):
    """A trigger added after the check (on the same connection: another process's change) fires on
    an insert: the statement is aborted after ``RECORD_STATEMENT_S`` and rolled back."""
    monkeypatch.setattr(record_module, "RECORD_STATEMENT_S", 0.2, raising=False)
    record = _record(tmp_path)
    db = record.connect()
    try:
        db.execute("CREATE TABLE junk (x)")
        db.execute(BOMB.format(rows=5_000_000))
        db.commit()
        started = time.monotonic()
        with pytest.raises(sqlite3.OperationalError, match="interrupted"):
            db.execute("INSERT INTO runs (run_id) VALUES ('r1')")
        assert time.monotonic() - started < 30
        db.rollback()
    finally:
        db.close()
    assert _count(record, "junk") == 0 and _count(record, "runs") == 0


def _options(tmp_path: Path, gemm_path: Path, workdir: Path) -> run.RunOptions:
    kernel = tmp_path / "gemm.py"
    kernel.write_text(gemm_path.read_text())
    return run.RunOptions(kernel=str(kernel), hw="mi300x", workdir=str(workdir), iterations=1)


def _proposer() -> ScriptedProposer:
    return ScriptedProposer([("col", catalog_source("column-major", ARGS))])


def test_optimize_with_a_planted_trigger_starts_nothing_and_says_so_in_one_line(tmp_path, gemm_path):
    record = _record(tmp_path)
    _plant(record, "CREATE TABLE junk (x)", BOMB.format(rows=200_000))
    options = _options(tmp_path, gemm_path, record.root)
    with pytest.raises(run.RunError) as caught:
        run.start(options, proposer=_proposer())
    message = str(caught.value)
    assert "\n" not in message and "trigger named bomb" in message and "nothing was started" in message
    assert _count(record, "junk") == 0 and _count(record, "runs") == 0
    assert not (record.root / "runs").exists(), "a run folder was left behind"


def test_a_runs_folder_linked_outside_the_workdir_is_refused_before_anything_is_made(tmp_path, gemm_path):
    """W02b: ``wd/runs`` a link to a folder outside ``wd`` (the red team's: ``/``)."""
    outside = tmp_path / "outside"
    outside.mkdir()
    workdir = tmp_path / "wd"
    workdir.mkdir()
    (workdir / "runs").symlink_to(outside)
    options = _options(tmp_path, gemm_path, workdir)
    with pytest.raises(run.RunError) as caught:
        run.start(options, proposer=_proposer())
    message = str(caught.value)
    assert "\n" not in message and "not inside" in message and "links followed" in message
    assert list(outside.iterdir()) == [], "the run folder was made outside the workdir"
    assert (workdir / "runs").is_symlink()


@pytest.mark.parametrize("name", ["swizzleperf.db", "swizzleperf.db-wal", "swizzleperf.db-journal"])
@pytest.mark.parametrize("target", ["an empty file", "nothing"])
def test_a_record_that_is_a_link_is_refused_and_the_file_it_names_left_alone(tmp_path, name, target):
    """#41 round thirteen (R10): ``swizzleperf.db`` a link to a user's empty ``__init__.py`` (or dangling)
    had SQLite write the record there; its ``-wal`` or ``-journal`` a link likewise."""
    victim = tmp_path / "userpkg" / "__init__.py"
    victim.parent.mkdir()
    if target == "an empty file":
        victim.write_bytes(b"")
    record = RunRecord(tmp_path / ".sp")
    record.root.mkdir()
    (record.root / name).symlink_to(victim)
    with pytest.raises(RecordError) as caught:
        record.create_run("r1", ROW, {"kernel": "k.py"})
    message = str(caught.value)
    assert "\n" not in message and "symbolic link" in message and name in message, message
    assert (victim.read_bytes() == b"") if target == "an empty file" else not victim.exists()


def test_a_record_with_a_second_name_elsewhere_is_refused(tmp_path):
    record = _record(tmp_path)
    other = tmp_path / "elsewhere.db"
    other.hardlink_to(record.db_path)
    before = other.read_bytes()
    with pytest.raises(RecordError, match="hard link"):
        record.create_run("r1", ROW, {"kernel": "k.py"})
    assert other.read_bytes() == before
