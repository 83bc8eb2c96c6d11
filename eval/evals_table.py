"""The ``evals`` table of the record: one row per kernel of an eval (its run, status and reason),
shared by the eval (``eval/suite.py``) and its worker processes (``eval/workers.py``), which each
update only their kernel's row, in short transactions that SQLite serialises.
"""
from __future__ import annotations

import sqlite3
from pathlib import Path

from swizzleperf.agent.loop.record import RunRecord

# status: pending, running, finished, failed (reason says why) or interrupted. One row per kernel,
# written in the eval's kernel order when the eval starts; a worker updates only its kernel's row.
SCHEMA = """CREATE TABLE IF NOT EXISTS evals (
    eval_id TEXT, kernel TEXT, run_id TEXT, status TEXT, options_json TEXT, started_at REAL,
    reason TEXT, PRIMARY KEY (eval_id, kernel))"""


def connect(workdir: str) -> sqlite3.Connection:
    """The record of ``workdir`` with the evals table (created, or given its reason column).
    Raises RecordError (agent/loop/record.py) where the record cannot be opened."""
    connection = RunRecord(Path(workdir)).connect()
    connection.execute(SCHEMA)
    if "reason" not in {column[1] for column in connection.execute("PRAGMA table_info(evals)")}:
        try:  # a record written before the reason column
            connection.execute("ALTER TABLE evals ADD COLUMN reason TEXT")
        except sqlite3.OperationalError as exc:  # another process added it meanwhile
            if "duplicate column" not in str(exc):
                raise
    return connection


def row(workdir: str, eval_id: str, kernel: str) -> tuple | None:
    """``(run_id, status, reason)`` of one kernel of an eval, or None."""
    with connect(workdir) as db:
        return db.execute("SELECT run_id, status, reason FROM evals WHERE eval_id = ? AND kernel = ?",
                          (eval_id, kernel)).fetchone()


def kernel_status(workdir: str, eval_id: str, kernel: str) -> tuple:
    """``(status, reason)`` of one kernel of an eval."""
    found = row(workdir, eval_id, kernel)
    return (found[1], found[2] or "") if found else ("pending", "")


def set_status(workdir: str, eval_id: str, kernel: str, status: str, run_id: str | None = None,
               reason: str = "") -> None:
    """Update one kernel's row (its run id only when given); the row keeps its place in the table."""
    with connect(workdir) as db:
        db.execute("UPDATE evals SET run_id = COALESCE(?, run_id), status = ?, reason = ? "
                   "WHERE eval_id = ? AND kernel = ?", (run_id, status, reason[:300], eval_id, kernel))
