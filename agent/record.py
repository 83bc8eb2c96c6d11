"""The run record: one SQLite file under ``.swizzleperf/`` holding the LangGraph checkpoints (for
resume), a ``runs`` table (one row per run, with the configuration that resume reuses) and an
``iterations`` table (one row per evaluated candidate) and a ``requests`` table (one row per request
to an LLM: the transcript) that ``pandas.read_sql`` loads."""
from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

import pandas as pd

DB_NAME = "swizzleperf.db"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY, kernel TEXT, kernel_path TEXT, hardware TEXT, mode TEXT,
    proposer TEXT, config_json TEXT, run_dir TEXT, started_at REAL, finished_at REAL,
    status TEXT, stop_reason TEXT
);
CREATE TABLE IF NOT EXISTS iterations (
    run_id TEXT, kind TEXT, iteration INTEGER, name TEXT, proposer TEXT, verdict TEXT,
    reason TEXT, rationale TEXT, candidate_source TEXT, diff TEXT,
    l2_hit_rate REAL, l2_source TEXT, time_ms REAL, time_spread_ms REAL, time_source TEXT,
    dram_bytes REAL, dram_source TEXT, predicted_l2_hit_rate REAL, predicted_dram_bytes REAL,
    predicted_source TEXT, metrics_json TEXT, lesson TEXT, prompt_tokens INTEGER,
    completion_tokens INTEGER, cost_usd REAL, is_best INTEGER, created_at REAL,
    PRIMARY KEY (run_id, kind, iteration)
);
CREATE TABLE IF NOT EXISTS requests (
    run_id TEXT, iteration INTEGER, n INTEGER, started_at REAL, seconds REAL, outcome TEXT,
    finish_reason TEXT, max_tokens INTEGER, temperature REAL, prompt_tokens INTEGER,
    completion_tokens INTEGER, tokens_source TEXT, messages_json TEXT, reply TEXT, tool_calls_json TEXT,
    rejected TEXT
);
"""
_METRIC_COLUMNS = ("l2_hit_rate", "l2_source", "time_ms", "time_spread_ms", "time_source",
                   "dram_bytes", "dram_source", "predicted_l2_hit_rate", "predicted_dram_bytes",
                   "predicted_source")


class UnknownRunError(KeyError):
    """No run with that id in the record."""

    def __str__(self) -> str:
        return str(self.args[0])


class RunRecord:
    """The SQLite run record under ``root`` (created on first use, not at import)."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self.db_path = self.root / DB_NAME

    def connect(self) -> sqlite3.Connection:
        """A connection with the tables created; the caller closes it. Several processes may write
        one record (``swizzleperf eval --gpus N``): the journal is WAL (readers never wait for the
        writer) and a writer waits up to 30 s for another's transaction to end."""
        self.root.mkdir(parents=True, exist_ok=True)
        connection = sqlite3.connect(self.db_path, check_same_thread=False, timeout=30)
        connection.execute("PRAGMA journal_mode=WAL")
        connection.executescript(_SCHEMA)
        return connection

    def create_run(self, run_id: str, row: dict, config: dict) -> None:
        with self.connect() as db:
            db.execute("INSERT INTO runs (run_id, kernel, kernel_path, hardware, mode, proposer, "
                       "config_json, run_dir, started_at, status) VALUES (?,?,?,?,?,?,?,?,?,?)",
                       (run_id, row["kernel"], row["kernel_path"], row["hardware"], row["mode"],
                        row["proposer"], json.dumps(config), row["run_dir"], time.time(), "running"))

    def run(self, run_id: str) -> dict:
        """The ``runs`` row of ``run_id`` with its config decoded. Raises UnknownRunError."""
        with self.connect() as db:
            db.row_factory = sqlite3.Row
            found = db.execute("SELECT * FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        if found is None:
            raise UnknownRunError(f"no run {run_id!r} in {self.db_path}")
        row = dict(found)
        row["config"] = json.loads(row.pop("config_json"))
        return row

    def finish_run(self, run_id: str, status: str, stop_reason: str) -> None:
        with self.connect() as db:
            db.execute("UPDATE runs SET finished_at = ?, status = ?, stop_reason = ? WHERE run_id = ?",
                       (time.time(), status, stop_reason, run_id))

    def save_attempt(self, run_id: str, attempt: dict, proposer: str, is_best: bool) -> None:
        """Insert or replace the row of one attempt (idempotent: a resumed node may write again)."""
        metrics = attempt.get("metrics") or {}
        values = {"run_id": run_id, "kind": attempt["kind"], "iteration": attempt["iteration"],
                  "name": attempt["name"], "proposer": proposer, "verdict": attempt["verdict"],
                  "reason": attempt.get("reason", ""), "rationale": attempt.get("rationale", ""),
                  "candidate_source": attempt.get("source", ""), "diff": attempt.get("diff", ""),
                  **{c: metrics.get(c) for c in _METRIC_COLUMNS},
                  "metrics_json": json.dumps(metrics), "lesson": attempt.get("lesson", ""),
                  "prompt_tokens": attempt.get("prompt_tokens", 0),
                  "completion_tokens": attempt.get("completion_tokens", 0),
                  "cost_usd": attempt.get("cost_usd", 0.0), "is_best": int(is_best),
                  "created_at": time.time()}
        with self.connect() as db:
            db.execute(f"INSERT OR REPLACE INTO iterations ({', '.join(values)}) "
                       f"VALUES ({', '.join('?' * len(values))})", tuple(values.values()))

    def save_requests(self, run_id: str, iteration: int, exchanges: list) -> None:
        """Append the requests one proposal made (``chat.Exchange.to_dict()`` each); a proposal
        re-run after a resume appends its own, since both were really sent."""
        rows = [(run_id, iteration, e["n"], e["started_at"], e["seconds"], e["outcome"], e["finish_reason"],
                 e["max_tokens"], e.get("temperature"), e["prompt_tokens"], e["completion_tokens"],
                 e["tokens_source"],
                 json.dumps(e["messages"]), e["reply"], json.dumps(e.get("tool_calls") or []),
                 e.get("rejected", "")) for e in exchanges]
        if rows:
            with self.connect() as db:
                db.executemany("INSERT INTO requests VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", rows)

    def requests(self, run_id: str) -> pd.DataFrame:
        """The transcript of a run: every request to the LLM, in the order sent."""
        with self.connect() as db:
            return pd.read_sql("SELECT * FROM requests WHERE run_id = ? ORDER BY started_at, n", db,
                               params=(run_id,))

    def mark_best(self, run_id: str, kind: str, iteration: int) -> None:
        with self.connect() as db:
            db.execute("UPDATE iterations SET is_best = (kind = ? AND iteration = ?) WHERE run_id = ?",
                       (kind, iteration, run_id))

    def iterations(self, run_id: str) -> pd.DataFrame:
        """The iterations of a run, in order (baseline and expert first)."""
        with self.connect() as db:
            return pd.read_sql("SELECT * FROM iterations WHERE run_id = ? ORDER BY "
                               "CASE kind WHEN 'baseline' THEN 0 WHEN 'expert' THEN 1 ELSE 2 END, "
                               "iteration", db, params=(run_id,))

    def latest_run_id(self) -> str | None:
        if not self.db_path.exists():
            return None
        with self.connect() as db:
            found = db.execute("SELECT run_id FROM runs ORDER BY started_at DESC LIMIT 1").fetchone()
        return found[0] if found else None
