"""The run record: one SQLite file under ``.swizzleperf/`` holding the LangGraph checkpoints (for
resume), a ``runs`` table (one row per run, with the configuration that resume reuses) and an
``iterations`` table (one row per evaluated candidate) and a ``requests`` table (one row per request
to an LLM: the transcript) that ``pandas.read_sql`` loads.

Several processes may write one record (``eval --gpus N``, a second ``optimize``, a notebook): a
write waits for another's lock with a bounded retry (``RECORD_WAIT_S``), then raises
``RecordLocked``; a full disk raises ``RecordFull``; both one line. Every text stored goes through
``redact`` (no URL credentials or query secrets in the record). What is read back is data only,
checked before use (#41): a ``runs`` row against ``RunRow``, its configuration against the run's
options (``stored_options``); a row that fails is ``UnusableRunError``, one line. A record holding
what the project never creates (a view, a trigger, a table or index of another name: a planted
record, whose trigger could insert 3e8 rows on the first write) is refused on connecting,
``UnusableRecord``, one line naming the file; and every statement is aborted after
``RECORD_STATEMENT_S`` seconds of SQLite work (``StatementBound``), so that nothing in the file
can hang a run.
"""
from __future__ import annotations

import dataclasses
import json
import sqlite3
import time
import typing
from pathlib import Path
from typing import Annotated, Callable, TypeVar

import pandas as pd
import pydantic

from swizzleperf.sandbox import untrusted
from swizzleperf.sandbox.redact import redact, redact_all

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
    rejected TEXT, prompt_detail INTEGER, tools_tokens INTEGER
);
"""
#: Columns a table gained after its first release, each with its type: a record of an older version
#: gets them (NULL in its old rows) when it is opened.
_ADDED_COLUMNS = {"requests": (("prompt_detail", "INTEGER"), ("tools_tokens", "INTEGER"))}
#: Seconds a write waits for another process's lock on the record before giving up: an ``eval``
#: worker's transaction lasts milliseconds; a notebook or a second run holding it over a minute is
#: the case this bounds (then one line, the run saved up to its last step).
RECORD_WAIT_S = 120.0
#: Seconds SQLite's own busy handler waits within one try (the retry loop makes up the rest).
_TRY_WAIT_S = 5.0
#: Seconds of SQLite work one statement on the record may take before SQLite aborts it
#: (``sqlite3.OperationalError`` "interrupted"): the record's statements take milliseconds.
RECORD_STATEMENT_S = 20.0
#: The tables the project creates in the record: this module's, LangGraph's checkpointer's
#: (``checkpoints``, ``writes``) and the evals' (eval/evals_table.py, eval/apps.py). A record of an
#: older version may lack some; anything else (or an index other than a table's key) is refused.
RECORD_TABLES = frozenset({"runs", "iterations", "requests", "checkpoints", "writes", "evals", "app_evals",
                           "app_rows"})
#: Schema objects read from a record's ``sqlite_master`` at most (the project creates 16).
_MAX_SCHEMA_OBJECTS = 64
T = TypeVar("T")

_METRIC_COLUMNS = ("l2_hit_rate", "l2_source", "time_ms", "time_spread_ms", "time_source",
                   "dram_bytes", "dram_source", "predicted_l2_hit_rate", "predicted_dram_bytes",
                   "predicted_source")


class UnknownRunError(KeyError):
    """No run with that id in the record."""

    def __str__(self) -> str:
        return str(self.args[0])


class UnusableRunError(UnknownRunError):
    """The run's row is in the record but not of the shape this version wrote (damaged, planted,
    or from another version): one line, naming the field."""


#: Characters of a run's stored configuration (a few hundred in practice).
CONFIG_MAX_CHARS = 64 * 1024
_Text = Annotated[str, pydantic.Field(max_length=4096)]
#: A text value of a run's stored configuration: a path of up to 4096 bytes (PATH_MAX) as text, or as
#: the hex digits of its bytes (agent/loop/run.py ``RunOptions.kernel_path_bytes``: a path that is
#: not UTF-8 text, which the record's text would not keep).
_ConfigText = Annotated[str, pydantic.Field(max_length=2 * 4096)]


class RunRow(pydantic.BaseModel):
    """A ``runs`` row as ``create_run`` and ``finish_run`` write it."""
    model_config = pydantic.ConfigDict(strict=True)
    run_id: _Text
    kernel: _Text | None
    kernel_path: _Text | None
    hardware: _Text
    mode: _Text
    proposer: _Text | None
    run_dir: _Text
    started_at: float | None
    finished_at: float | None
    status: _Text | None
    stop_reason: Annotated[str, pydantic.Field(max_length=100_000)] | None
    config: dict[_Text, _ConfigText | int | float | bool | None]


def stored_options(row: dict, options_type: type[T], **overrides) -> T:
    """A run's options (the dataclass ``options_type``) from its row's ``config``, each field
    checked against its declared type (no coercion: ``"8"`` is not an iteration count), unknown
    keys refused; ``overrides`` replace stored fields.

    Raises:
        UnusableRunError: the first field that does not fit, in one line.
    """
    hints = typing.get_type_hints(options_type)
    fields = {f.name: (hints[f.name], ... if f.default is dataclasses.MISSING else f.default)
              for f in dataclasses.fields(options_type)}
    model = pydantic.create_model(f"Stored{options_type.__name__}",
                                  __config__=pydantic.ConfigDict(strict=True, extra="forbid"), **fields)
    try:
        checked = untrusted.validated(model, {**row["config"], **overrides}, f"run {row['run_id']}'s configuration",
                                      json.dumps(row["config"])[:400])
    except untrusted.UntrustedInput as exc:
        raise UnusableRunError(f"{exc}; it cannot be resumed") from None
    return options_type(**checked.model_dump())


def stored_json(text, what: str):
    """A JSON column read back (``messages_json``, ``tool_calls_json``) within ``untrusted``'s
    bounds; what does not load is kept as a one-line note in its place, not a traceback."""
    try:
        return untrusted.loads(text, what) if isinstance(text, str) else None
    except untrusted.UntrustedInput as exc:
        return f"(not readable from the record: {str(exc)[:300]})"


class RecordError(Exception):
    """The record cannot be written now (locked, disk full); the message is one line."""


class RecordLocked(RecordError):
    """Another process held the record's write lock longer than the wait allowed."""


class RecordFull(RecordError):
    """The disk (or the file system's quota) holding the record is full."""


def storage_fault(exc: BaseException, path: Path | str) -> RecordError | None:
    """``exc`` as a RecordLocked / RecordFull naming ``path`` when it is a lock held too long or a
    full disk (SQLite's or the OS's), else None."""
    import errno
    if isinstance(exc, RecordError):
        return exc
    name = getattr(exc, "sqlite_errorname", "") or ""
    text = str(exc)
    if isinstance(exc, sqlite3.OperationalError) and (name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED"))
                                                      or "locked" in text):
        return RecordLocked(f"the run record {path} is locked by another process ({text})")
    if (isinstance(exc, sqlite3.Error) and (name.startswith("SQLITE_FULL") or "disk is full" in text)) or \
            (isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)):
        where = getattr(exc, "filename", None) or path
        return RecordFull(f"no space left on the disk holding {where} ({' '.join(text.split())[:160]}): free "
                          f"space and continue")
    return None


class _BoundedConnection(sqlite3.Connection):
    """A connection carrying its ``StatementBound`` (``bound``), installed by ``RunRecord.connect``."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.bound = untrusted.StatementBound(RECORD_STATEMENT_S)


class UnusableRecord(RecordError, sqlite3.DatabaseError):
    """The record holds what the project never creates (a view, a trigger, an unknown table or
    index): one line naming the file and the object, saying to move it aside. Also a
    ``sqlite3.DatabaseError``, so that a caller that turns a record which is not a database into
    one line (eval/apps.py) does the same with this one."""


def _plain(text, limit: int = 80) -> str:
    """``text`` as one printable line of at most ``limit`` characters (others as ``?``)."""
    text = str(text)
    return "".join(ch if ch.isprintable() else "?" for ch in text[:limit]) + ("..." if len(text) > limit else "")


def foreign_object(db: sqlite3.Connection) -> str | None:
    """The first object in ``db``'s schema that the project never creates (``"a trigger named
    bomb on runs"``; triggers and views named first), or None: only the tables of
    ``RECORD_TABLES`` and the indexes SQLite makes for their keys (``sqlite_autoindex_<table>_<n>``)
    may be there.

    Raises:
        sqlite3.DatabaseError: the file is not a database, or its schema cannot be read.
    """
    rows = db.execute("SELECT type, name, tbl_name FROM sqlite_master LIMIT ?", (_MAX_SCHEMA_OBJECTS + 1,)).fetchall()
    if len(rows) > _MAX_SCHEMA_OBJECTS:
        return f"more than {_MAX_SCHEMA_OBJECTS} schema objects"
    for kind, name, table in sorted(rows, key=lambda row: row[0] not in ("trigger", "view")):  # those first
        if kind == "table" and name == table and name in RECORD_TABLES:
            continue
        if kind == "table" and name in ("sqlite_stat1", "sqlite_stat4", "sqlite_sequence"):
            continue   # SQLite's own: ANALYZE's statistics, AUTOINCREMENT's counters
        if kind == "index" and isinstance(name, str) and name.startswith("sqlite_autoindex_sqlite_"):
            continue
        if (kind == "index" and table in RECORD_TABLES and isinstance(name, str)
                and name.startswith(f"sqlite_autoindex_{table}_") and name.rsplit("_", 1)[-1].isdigit()):
            continue
        article = "an" if str(kind)[:1] in ("a", "e", "i", "o", "u") else "a"
        return (f"{article} {_plain(kind, 20)} named {_plain(name)}"
                + ("" if kind != "trigger" else f" on {_plain(table)}"))
    return None


def _add_columns(db: sqlite3.Connection) -> None:
    """The columns of ``_ADDED_COLUMNS`` a record of an older version lacks, added."""
    for table, columns in _ADDED_COLUMNS.items():
        have = {column[1] for column in db.execute(f"PRAGMA table_info({table})")}
        for name, kind in columns:
            if name not in have:
                db.execute(f"ALTER TABLE {table} ADD COLUMN {name} {kind}")


class RunRecord:
    """The SQLite run record under ``root`` (created on first use, not at import); ``wait_s``:
    how long a write waits for another process's lock (default ``RECORD_WAIT_S``)."""

    def __init__(self, root: Path, wait_s: float | None = None):
        """Raises RecordError: ``root`` exists and is not a folder (one line)."""
        self.root = Path(root)
        if self.root.exists() and not self.root.is_dir():
            raise RecordError(f"--workdir {self.root} is a file, not a folder: give a folder (it is created "
                              f"if missing), e.g. the default .swizzleperf")
        self.db_path = self.root / DB_NAME
        self.wait_s = RECORD_WAIT_S if wait_s is None else wait_s

    def connect(self, timeout_s: float | None = None) -> sqlite3.Connection:
        """A connection with the tables created; the caller closes it. The journal is WAL
        (readers never wait for the writer); a writer waits up to ``timeout_s`` (default
        ``wait_s``) for another's transaction to end, then SQLite raises "database is locked".
        Its schema is checked first (``foreign_object``), nothing written before; each statement
        is bounded (``StatementBound``, ``RECORD_STATEMENT_S``; the connection's ``bound``
        attribute, which ``arm()`` restarts); ``PRAGMA trusted_schema`` is off.

        Raises:
            UnusableRecord: the record or a file of SQLite beside it is a link (``_refuse_links``), or
                it holds a view, a trigger or another object the project never
                creates (one line naming the file: move it aside).
            sqlite3.DatabaseError: not a database; sqlite3.OperationalError: locked, or a
                statement past its bound; OSError: the folder cannot be made.
        """
        self.root.mkdir(parents=True, exist_ok=True)
        self._refuse_links()
        connection = sqlite3.connect(self.db_path, check_same_thread=False,
                                     timeout=self.wait_s if timeout_s is None else timeout_s,
                                     factory=_BoundedConnection)
        try:
            connection.bound.install(connection)
            connection.bound.arm()
            connection.execute("PRAGMA trusted_schema=OFF")   # a schema's functions: innocuous ones only
            foreign = foreign_object(connection)
            if foreign is not None:
                raise UnusableRecord(f"{_plain(self.db_path, 300)} is not a usable run record: it holds {foreign}, "
                                     f"which swizzleperf never creates (a planted or edited record): move it aside "
                                     f"or give another --workdir")
            connection.execute("PRAGMA journal_mode=WAL")
            connection.executescript(_SCHEMA)
            _add_columns(connection)
        except BaseException:
            connection.close()
            raise
        return connection

    def _refuse_links(self) -> None:
        """Raises UnusableRecord: the record or a file of SQLite beside it is a link or has a second
        name (``untrusted.sqlite_file_not_its_own``; one line)."""
        why = untrusted.sqlite_file_not_its_own(self.db_path)
        if why is not None:
            raise UnusableRecord(f"{why}: the run record must be a file of the workdir's own; remove the link "
                                 f"or give another --workdir")

    def _do(self, action: Callable[[sqlite3.Connection], T]) -> T:
        """``action(db)`` in one transaction, retried while another process holds the lock, for
        ``wait_s`` in all.

        Raises:
            RecordLocked: still locked after ``wait_s``; RecordFull: the disk is full (one line each).
        """
        deadline, pause = time.monotonic() + self.wait_s, 0.1
        while True:
            try:
                db = self.connect(min(_TRY_WAIT_S, self.wait_s))
                try:
                    db.bound.arm()
                    with db:
                        return action(db)
                finally:
                    db.close()
            except (sqlite3.OperationalError, OSError) as exc:
                fault = storage_fault(exc, self.db_path)
                if fault is None:
                    raise
                if isinstance(fault, RecordFull) or time.monotonic() + pause > deadline:
                    if isinstance(fault, RecordLocked):
                        fault = RecordLocked(f"the run record {self.db_path} stayed locked by another process "
                                             f"for {self.wait_s:g} s: let it finish (or stop it) and continue")
                    raise fault from None
                time.sleep(pause)
                pause = min(2.0, pause * 2)

    def create_run(self, run_id: str, row: dict, config: dict) -> None:
        row, config = redact_all(row), redact_all(config)
        self._do(lambda db: db.execute(
            "INSERT INTO runs (run_id, kernel, kernel_path, hardware, mode, proposer, "
            "config_json, run_dir, started_at, status) VALUES (?,?,?,?,?,?,?,?,?,?)",
            (run_id, row["kernel"], row["kernel_path"], row["hardware"], row["mode"],
             row["proposer"], json.dumps(config), row["run_dir"], time.time(), "running")))

    def run(self, run_id: str) -> dict:
        """The ``runs`` row of ``run_id`` with its config decoded. Raises UnknownRunError."""
        def read(db):
            db.row_factory = sqlite3.Row
            return db.execute("SELECT * FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        found = self._do(read)
        if found is None:
            raise UnknownRunError(f"no run {run_id!r} in {self.db_path}")
        row = dict(found)
        text = row.pop("config_json")
        what = f"run {run_id!r}'s row in {self.db_path}"
        try:
            if not isinstance(text, str):
                raise untrusted.UntrustedInput(f"{what}: config_json is {type(text).__name__}, not text")
            row["config"] = untrusted.loads(text, f"{what}: config_json", max_chars=CONFIG_MAX_CHARS)
            return untrusted.validated(RunRow, row, what, text).model_dump()
        except untrusted.UntrustedInput as exc:
            raise UnusableRunError(f"{exc}; it cannot be resumed or reported") from None

    def finish_run(self, run_id: str, status: str, stop_reason: str) -> None:
        self._do(lambda db: db.execute(
            "UPDATE runs SET finished_at = ?, status = ?, stop_reason = ? WHERE run_id = ?",
            (time.time(), status, redact(stop_reason), run_id)))

    def save_attempt(self, run_id: str, attempt: dict, proposer: str, is_best: bool) -> None:
        """Insert or replace the row of one attempt (idempotent: a resumed node may write again)."""
        metrics = attempt.get("metrics") or {}
        values = {"run_id": run_id, "kind": attempt["kind"], "iteration": attempt["iteration"],
                  "name": attempt["name"], "proposer": proposer, "verdict": attempt["verdict"],
                  "reason": attempt.get("reason", ""), "rationale": attempt.get("rationale", ""),
                  "candidate_source": attempt.get("source", ""), "diff": attempt.get("diff", ""),
                  **{c: metrics.get(c) for c in _METRIC_COLUMNS},
                  "metrics_json": json.dumps(metrics, default=str), "lesson": attempt.get("lesson", ""),
                  "prompt_tokens": attempt.get("prompt_tokens", 0),
                  "completion_tokens": attempt.get("completion_tokens", 0),
                  "cost_usd": attempt.get("cost_usd", 0.0), "is_best": int(is_best),
                  "created_at": time.time()}
        values = redact_all(values)
        self._do(lambda db: db.execute(f"INSERT OR REPLACE INTO iterations ({', '.join(values)}) "
                                       f"VALUES ({', '.join('?' * len(values))})", tuple(values.values())))

    def save_requests(self, run_id: str, iteration: int, exchanges: list) -> None:
        """Append the requests one proposal made (``chat.Exchange.to_dict()`` each); a proposal
        re-run after a resume appends its own, since both were really sent."""
        rows = [tuple(redact_all([
                    run_id, iteration, e["n"], e["started_at"], e["seconds"], e["outcome"], e["finish_reason"],
                    e["max_tokens"], e.get("temperature"), e["prompt_tokens"], e["completion_tokens"],
                    e["tokens_source"], json.dumps(e["messages"]), e["reply"], json.dumps(e.get("tool_calls") or []),
                    e.get("rejected", ""), e.get("prompt_detail"), e.get("tools_tokens")])) for e in exchanges]
        columns = ("run_id, iteration, n, started_at, seconds, outcome, finish_reason, max_tokens, temperature, "
                   "prompt_tokens, completion_tokens, tokens_source, messages_json, reply, tool_calls_json, rejected, "
                   "prompt_detail, tools_tokens")
        if rows:
            self._do(lambda db: db.executemany(f"INSERT INTO requests ({columns}) VALUES ({', '.join('?' * 18)})", rows))

    def requests(self, run_id: str) -> pd.DataFrame:
        """The transcript of a run: every request to the LLM, in the order sent."""
        return self._do(lambda db: pd.read_sql("SELECT * FROM requests WHERE run_id = ? ORDER BY started_at, n",
                                               db, params=(run_id,)))

    def mark_best(self, run_id: str, kind: str, iteration: int) -> None:
        self._do(lambda db: db.execute("UPDATE iterations SET is_best = (kind = ? AND iteration = ?) WHERE run_id = ?",
                                       (kind, iteration, run_id)))

    def iterations(self, run_id: str) -> pd.DataFrame:
        """The iterations of a run, in order (baseline and expert first)."""
        return self._do(lambda db: pd.read_sql(
            "SELECT * FROM iterations WHERE run_id = ? ORDER BY "
            "CASE kind WHEN 'baseline' THEN 0 WHEN 'expert' THEN 1 ELSE 2 END, iteration", db, params=(run_id,)))

    def latest_run_id(self) -> str | None:
        if not self.db_path.exists():
            return None
        found = self._do(lambda db: db.execute("SELECT run_id FROM runs ORDER BY started_at DESC LIMIT 1").fetchone())
        return found[0] if found else None
