"""``swizzleperf eval --apps DIR``: every app of a folder through the ``optimize --app`` path, one row
each (issue #42). Each app file runs as ``python APP`` in its own folder, in its own worker process
with a wall-clock budget (eval/app_worker.py: the outcome classes and the row's columns), so a crash
or a hang of one app, or of the tool, is one row, never the suite.

Where the rows run: on this host, ``gpus`` workers at a time, each pinned to one GPU
(CUDA_VISIBLE_DEVICES) where there are GPUs, else sharing the CPU; or on a Ray cluster
(eval/apps_ray.py, ``--ray``), each app a task asking one GPU. Either way the rows come back to this
process, which alone writes them: to the ``app_rows`` table of the record
(``WORKDIR/swizzleperf.db``, beside the runs) and to ``OUT.json`` and ``OUT.md`` (the counts per
outcome, the share answered, the rows grouped by outcome), rewritten after every row. A resumed
eval (``--resume EVAL_ID``) skips the apps that already have a row; its stored options are data
(#41), read within ``MAX_OPTIONS_CHARS`` and checked against ``StoredAppsOptions`` first: a row
that does not fit is one line, the eval cannot be resumed, and the row is left as it was.

The rows propose with the built-in policy, or with the LLM the options name (``model`` and the rest
of ``app_worker.LLM_OPTIONS``, as ``optimize --app --model M`` does); the record and the tables keep
its endpoint without credentials (``redact``: a resume asks for the same ``--base-url`` again), and
the API key is never in them (the workers inherit ``OPENAI_API_KEY``).
"""
from __future__ import annotations

import ast
import json
import os
import secrets
import sqlite3
import stat
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from pathlib import Path, PurePosixPath
from typing import Annotated, Callable

import pandas as pd
import pydantic

from swizzleperf import sandbox
from swizzleperf.agent.loop.record import RunRecord
from swizzleperf.eval.app_worker import (ANSWERED, LLM_OPTIONS, OUTCOMES, RowJob, empty_row, proposer_name, run_row,
                                         stop)
from swizzleperf.eval.suite import PrintableText, StoredLLMOptions
from swizzleperf.sandbox import untrusted
from swizzleperf.sandbox.redact import MASK, redact
from swizzleperf.sandbox.untrusted import file_kind, shown   # shown: the tables' and the console's text from outside

DEFAULT_ROW_BUDGET_S = 600.0
#: Characters of an apps eval's stored options: the app names dominate (10 000 apps of 100-character
#: paths are 1 MB).
MAX_OPTIONS_CHARS = 4 << 20
#: Nesting of stored options: an object holding the list of names.
MAX_OPTIONS_DEPTH = 4
COLUMNS = list(empty_row(""))
NUMBERS = ("programs", "waves", "seconds", "baseline_ms", "baseline_spread_ms", "best_ms", "best_spread_ms",
           "speedup", "speedup_spread", "predicted_l2_baseline", "predicted_l2_best")
# app_evals: one row per eval (the options a resume reuses); app_rows: one row per app of an eval.
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS app_evals (eval_id TEXT PRIMARY KEY, options_json TEXT, started_at REAL);\n"
    "CREATE TABLE IF NOT EXISTS app_rows (eval_id TEXT, finished_at REAL, "
    + ", ".join(f"{c} {'REAL' if c in NUMBERS else 'TEXT'}" for c in COLUMNS) + ", PRIMARY KEY (eval_id, app));")


class AppsError(Exception):
    """Bad options for an apps eval, or an unknown eval id; one line for the user."""


@dataclass
class AppsOptions:
    """One eval of a folder of apps: which files, how long each, where recorded."""

    apps_dir: str
    names: list = field(default_factory=list)   # the app files of the folder, in the table's order
    iterations: int = 2
    row_budget_s: float = DEFAULT_ROW_BUDGET_S
    hw: str | None = None
    use_ncu: bool = True       # False (--no-ncu): orders timed, not profiled with ncu
    workdir: str = ".swizzleperf"
    out: str | None = None     # OUT of OUT.json / OUT.md; None: WORKDIR/results/EVAL_ID
    model: str | None = None   # the LLM (run.RunOptions' names, app_worker.LLM_OPTIONS); None: the built-in policy
    base_url: str | None = None
    llm_timeout_s: float = 300.0
    temperature: float = 0.2
    context_tokens: int | None = None
    llm_retries: int = 2
    evidence: bool = True
    price_in_per_mtok: float = 0.0
    price_out_per_mtok: float = 0.0

    def out_path(self, eval_id: str) -> Path:
        return Path(self.out) if self.out else Path(self.workdir) / "results" / eval_id


def _inside_the_folder(name: str) -> str:
    path = PurePosixPath(name)
    if not name or path.is_absolute() or ".." in path.parts:   # what list_apps lets through (_inside)
        raise ValueError("must be a path inside the apps folder (relative, without '..')")
    return name




class StoredAppsOptions(StoredLLMOptions):
    """``AppsOptions`` as ``_register`` stores them, checked before a resume believes them: each
    option's type and range (no coercion), app names printable paths inside the folder (a row's
    folder is made from its name), no other key. An option a row leaves out (a record written
    before it existed) keeps ``AppsOptions``' default."""
    model_config = pydantic.ConfigDict(strict=True, extra="forbid")
    apps_dir: PrintableText
    names: Annotated[list[Annotated[PrintableText, pydantic.AfterValidator(_inside_the_folder)]],
                     pydantic.Field(max_length=100_000)] = None
    iterations: Annotated[int, pydantic.Field(strict=True, ge=1, lt=1 << 31)] = None
    row_budget_s: Annotated[float, pydantic.Field(strict=True, gt=0.0, allow_inf_nan=False)] = None
    hw: PrintableText | None = None
    use_ncu: bool = None
    workdir: PrintableText = None
    out: PrintableText | None = None


def list_apps(apps_dir: str, files: str | None = None) -> list:
    """The app files of ``apps_dir``: the names listed in ``files`` (one a line, ``#`` comments), or
    every ``*.py`` in it. A listed name may be a path inside the folder (``ops/gemm.py``: its row is
    named so, the app runs in ``ops/``), written once (``./`` and doubled slashes dropped). Raises
    AppsError for a missing folder, list or file, for a path out of the folder: absolute, with
    ``..``, or through a folder that is a link out of it (#41), and for a folder whose own path is
    not printable UTF-8 text (its every app would be refused; its path titles the tables). A named
    pipe, socket or device among them is listed: ``run_apps`` records it as the app's failure
    without running it; so is a name that is not printable UTF-8 text (a newline, an escape code,
    bytes that are not UTF-8), listed as ``stored_name`` writes it and refused in its row."""
    folder = Path(apps_dir)
    if not folder.is_dir():
        raise AppsError(f"--apps must be a folder of app files, got {shown(apps_dir)}")
    if stored_name(apps_dir) != apps_dir:
        raise AppsError(f"--apps {stored_name(apps_dir)}: the folder's path holds a newline, an escape code, bytes "
                        f"that are not UTF-8 or another unprintable character; rename it (or link to it by a plain "
                        f"name) to eval its apps")
    if files is None:
        names = sorted(p.name for p in folder.glob("*.py"))
    else:
        try:   # bytes that are not UTF-8 read as the folder's listing reads them (surrogateescape)
            lines = Path(files).read_text(encoding="utf-8", errors="surrogateescape").splitlines()
        except OSError as exc:
            raise AppsError(f"--files {shown(files)}: {exc.strerror}") from None
        names = [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]
        names = [_inside(folder, name) for name in names]
        missing = [n for n in names if not (folder / n).is_file() and special_kind(folder / n) is None]
        if missing:
            raise AppsError(f"--files names {len(missing)} file(s) not in {shown(apps_dir)}: "
                            f"{', '.join(map(stored_name, missing[:5]))}")
    if not names:
        raise AppsError(f"no app files in {shown(apps_dir)}" + (f" from {shown(files)}" if files else " (*.py)"))
    return [stored_name(name) for name in names]


def stored_name(name: str) -> str:
    """An app's name as the record, the tables and the console keep it: as it is where it is
    printable UTF-8 text; else ``shown`` (``ascii()``: ``'a\\nb.py'``) or, for a name holding bytes
    that are not UTF-8 (a str with lone surrogates, which SQLite and a UTF-8 file cannot hold,
    red team 11 A08), those bytes as Python writes them (``b'\\xff\\xfe.py'``). Always printable
    ASCII or UTF-8; ``unstored_name`` undoes it."""
    if _has_surrogates(name):
        return ascii(name.encode("utf-8", "surrogateescape"))
    return shown(name)


def unstored_name(name: str) -> str | None:
    """The file name that ``stored_name`` wrote as ``name`` where it changed one (a Python literal
    of a str that is not printable, or of bytes that are not UTF-8), else None."""
    if name[:1] not in "'\"b" or len(name) > 4 * 4096:
        return None
    try:
        value = ast.literal_eval(name)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
    if isinstance(value, bytes):
        value = value.decode("utf-8", "surrogateescape")
    return value if isinstance(value, str) and stored_name(value) == name != value else None


def _has_surrogates(text: str) -> bool:
    try:
        text.encode("utf-8")
        return False
    except UnicodeEncodeError:
        return True


def special_kind(path: Path) -> str | None:
    """``"a named pipe"``, ``"a socket"``, ``"a character device"`` or ``"a block device"``
    (``untrusted.file_kind``) where ``path`` (a link followed) is one, found by ``stat`` without
    opening it (``python APP`` would block opening a named pipe until the row's budget, #41, read a
    device, or fail on a socket); None for a regular file, a folder, or a path that cannot be read
    (the worker says why: a link loop is the app's failure to start)."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return None
    return None if stat.S_ISREG(mode) or stat.S_ISDIR(mode) else file_kind(mode)


def _refused_row(options: AppsOptions, name: str) -> dict | None:
    """The row of an app recorded without a worker: a file that is not a regular file
    (``special_kind``), the app's failure, its kind the reason; a file whose name is not printable
    UTF-8 text (``stored_name`` changed it), refused, saying why. None for any other app."""
    path = Path(options.apps_dir) / name
    kind = special_kind(path)
    if kind is not None:
        return {**empty_row(name), "outcome": "app failed", "seconds": 0.0,
                "reason": f"{shown(name)} is {kind}, not a regular file: not opened (an app is a Python file)"}
    original = unstored_name(name)
    if original is None or os.path.lexists(path):   # a file named so itself: an app like any other
        return None
    why = ("is not UTF-8 text" if _has_surrogates(original)
           else "holds a newline, an escape code or another unprintable character")
    return {**empty_row(name), "outcome": "refused", "seconds": 0.0,
            "reason": f"the app's file name {name} {why}: not run; rename it to run it"}


def _inside(folder: Path, name: str) -> str:
    """``name`` of ``--files`` as the row's name: a relative path inside ``folder``, written once."""
    path = Path(name)
    why = ("an absolute path" if path.is_absolute() else "it holds '..'" if ".." in path.parts
           else "a link out of the folder" if not _within((folder / path).parent, folder) else None)
    if why:
        raise AppsError(f"--files names a path outside {shown(str(folder))}: {shown(name)} ({why}); "
                        f"name the apps by their paths inside it")
    return path.as_posix()


def _within(path: Path, folder: Path) -> bool:
    """Whether ``path`` (a folder, links followed) is ``folder`` or inside it."""
    try:
        return path.resolve().is_relative_to(folder.resolve())
    except (OSError, RuntimeError):   # a link loop: not a folder of the apps
        return False
    except ValueError:   # a NUL in the name: no such file, which the caller says
        return True


# -- the record -------------------------------------------------------------------------------

def _connect(workdir: str):
    db = RunRecord(Path(workdir)).connect()
    # text that is not UTF-8 (a record written by other means) is read with its bytes written out,
    # never an OperationalError out of a resume (red team 11, A08)
    db.text_factory = lambda data: data.decode("utf-8", "backslashreplace")
    db.executescript(_SCHEMA)
    have = {column[1] for column in db.execute("PRAGMA table_info(app_rows)")}
    for c in (c for c in COLUMNS if c not in have):   # a record of an older version: its rows keep NULL there
        db.execute(f"ALTER TABLE app_rows ADD COLUMN {c} {'REAL' if c in NUMBERS else 'TEXT'}")
    return db


def shown_options(options: AppsOptions) -> dict:
    """The options as the record and the tables keep them: the endpoint without its credentials."""
    return {**asdict(options), "base_url": redact(options.base_url) if options.base_url else None}


def _register(options: AppsOptions, eval_id: str) -> None:
    with _connect(options.workdir) as db:
        db.execute("INSERT OR IGNORE INTO app_evals VALUES (?, ?, ?)",
                   (eval_id, json.dumps(shown_options(options)), time.time()))


def stored_options(workdir: str, eval_id: str, base_url: str | None = None) -> AppsOptions | None:
    """The options an apps eval started with (its workdir ``workdir``, where the record is now),
    or None where ``eval_id`` is none. The record keeps the LLM endpoint without its credentials,
    so an endpoint that had some is ``base_url`` again (the same URL once redacted).

    Raises:
        AppsError: the eval's row does not hold options of the shape ``_register`` writes (too
            long, too deep, not JSON, an unknown key, a value of the wrong type or out of range, an
            app out of the folder): one line, the row left as it was; ``base_url`` is another
            endpoint than the eval's, or none where the eval's had credentials.
    """
    with _connect(workdir) as db:
        found = db.execute("SELECT options_json FROM app_evals WHERE eval_id = ?", (eval_id,)).fetchone()
    if found is None:
        return None
    try:
        stored = untrusted.load_json_checked(found[0], StoredAppsOptions, "the row of its options",
                                             MAX_OPTIONS_CHARS, MAX_OPTIONS_DEPTH)
    except untrusted.UntrustedInput as exc:
        raise AppsError(f"apps eval {shown(eval_id)} cannot be resumed: {exc}") from None
    options = AppsOptions(**{**stored.model_dump(exclude_unset=True), "workdir": workdir})
    if base_url is not None:
        if redact(base_url) != options.base_url:
            raise AppsError(f"--base-url {redact(base_url)} is not the endpoint apps eval {shown(eval_id)} used "
                            f"({options.base_url or 'none: its rows propose with the built-in policy'})")
        options.base_url = base_url
    elif options.base_url and MASK in options.base_url:
        raise AppsError(f"apps eval {shown(eval_id)} used the LLM endpoint {options.base_url}, whose credentials are "
                        f"not kept in the record: give the same --base-url again with --resume")
    return options


def _save(workdir: str, eval_id: str, row: dict) -> None:
    # a lone surrogate (a path's bytes that are not UTF-8, in a reason or the log's path) cannot be
    # stored: those bytes are written out as \xff instead (red team 11, A08)
    values = [_storable(row.get(c)) for c in COLUMNS]
    with _connect(workdir) as db:
        db.execute(f"INSERT OR REPLACE INTO app_rows (eval_id, finished_at, {', '.join(COLUMNS)}) "
                   f"VALUES ({', '.join('?' * (len(COLUMNS) + 2))})", [eval_id, time.time(), *values])


def _storable(value):
    if isinstance(value, str) and _has_surrogates(value):
        return value.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return value


def rows(workdir: str, eval_id: str) -> pd.DataFrame:
    """The eval's rows so far, in no particular order, each column of the type the table declares:
    a number column's value that is not a number (a record edited by hand: ``speedup='abc'``, #41
    round fourteen, raised in the tables) is read as missing, a text column's non-text as its text."""
    with _connect(workdir) as db:
        table = pd.read_sql("SELECT * FROM app_rows WHERE eval_id = ?", db, params=(eval_id,))
    for column in table.columns:
        if column in NUMBERS or column == "finished_at":
            table[column] = pd.to_numeric(table[column], errors="coerce")
        else:
            table[column] = table[column].map(lambda v: v if v is None or isinstance(v, str) else
                                              None if isinstance(v, float) and v != v else str(v))
    return table


# -- the eval ---------------------------------------------------------------------------------

def run_apps(options: AppsOptions, eval_id: str | None = None, on_row: Callable = lambda row, done, total: None,
             gpus: int = 1, devices: list | None = None, ray: bool = False, ray_address: str | None = None,
             on_start: Callable = lambda eval_id: None, again: tuple = ()) -> tuple:
    """Run (or resume, with ``eval_id``) the eval: the apps without a row, ``gpus`` at a time on this
    host (worker ``i`` on ``devices[i]``; default the visible GPUs, none on a CPU) or on Ray;
    ``on_start(eval_id)`` first, ``on_row(row, done, total)`` after each row. A resumed eval runs the
    apps whose row has an outcome in ``again`` ("tool failure", say, after an upgrade) once more,
    their rows replaced. Returns ``(eval_id, summary, [OUT.json, OUT.md])`` (``summarize``).

    Raises:
        AppsError: an unknown eval id, or one whose stored options cannot be resumed
            (``stored_options``); Ray asked for and not installed.
    """
    sandbox.shield_from_boxes()   # the apps' boxes never read this process's environment (its key)
    if eval_id is not None:
        stored = stored_options(options.workdir, eval_id, base_url=options.base_url)
        if stored is None:
            raise AppsError(f"no apps eval {eval_id!r} in {options.workdir}")
        options = stored
    eval_id = eval_id or time.strftime("apps-%Y%m%d-%H%M%S-") + secrets.token_hex(2)
    _register(options, eval_id)
    on_start(eval_id)
    if again:
        with _connect(options.workdir) as db:
            db.execute(f"DELETE FROM app_rows WHERE eval_id = ? AND outcome IN ({', '.join('?' * len(again))})",
                       [eval_id, *again])
    done = set(rows(options.workdir, eval_id).app)
    waiting = [name for name in options.names if name not in done]
    refused = [row for name in waiting if (row := _refused_row(options, name)) is not None]
    jobs = [_job(options, eval_id, name) for name in waiting if name not in {r["app"] for r in refused}]
    total, count = len(options.names), [len(done)]
    lock = threading.Lock()

    def record(row: dict) -> None:
        with lock:
            _save(options.workdir, eval_id, row)
            count[0] += 1
            write_tables(options, eval_id)
            on_row(row, count[0], total)

    try:
        try:
            for row in refused:   # a named pipe, a socket, a device: never handed to a worker (#41)
                record(row)
            if ray:
                from swizzleperf.eval.apps_ray import RayMissing, run_on_ray
                try:
                    run_on_ray(jobs, ray_address, record)
                except RayMissing as exc:
                    raise AppsError(str(exc)) from None
            else:
                run_local(jobs, gpus, _devices() if devices is None else devices, record)
        finally:
            try:
                files = write_tables(options, eval_id)
            except sqlite3.DatabaseError:
                files = []   # the error in flight, or the one below, says why
        return eval_id, summarize(options, eval_id), files
    except sqlite3.DatabaseError as exc:
        # the apps are your code and run with your rights: one that writes over the record ends the
        # eval in one line, not a traceback (#41, round eight); each finished row's files stay
        raise AppsError(f"the record {Path(options.workdir) / 'swizzleperf.db'} became unusable during eval "
                        f"{shown(eval_id)} ({shown(str(exc))}): did an app write over it? The rows finished "
                        f"so far are in their folders under {Path(options.workdir) / 'apps' / eval_id}") from None


def _job(options: AppsOptions, eval_id: str, name: str) -> RowJob:
    workdir = Path(options.workdir).resolve()
    # the folder resolved, not the file: a symlinked app keeps its listed name, its row is found; an app
    # in a subfolder keeps its path as the row's name and a row folder of its own (#41)
    return RowJob(app=str(Path(options.apps_dir).resolve() / name), name=name,
                  folder=str(workdir / "apps" / eval_id / Path(name).with_suffix("")), workdir=str(workdir),
                  iterations=options.iterations, budget_s=options.row_budget_s, hw=options.hw,
                  use_ncu=options.use_ncu,
                  llm={n: getattr(options, n) for n in LLM_OPTIONS} if options.model else {})


def _devices() -> list:
    from swizzleperf.eval.workers import visible_devices
    return visible_devices()


def run_local(jobs: list, slots: int, devices: list, on_row: Callable) -> None:
    """``jobs`` on this host, ``slots`` at a time, slot ``i`` pinned to ``devices[i % len(devices)]``
    where there are devices; with more slots than devices, the workers of one GPU take it in turn for
    timing and ncu (sandbox/gpu_lock.py; the lock folder beside the rows)
    and run the rest side by side. Interrupted, the running workers are stopped before
    KeyboardInterrupt goes on."""
    free = list(range(slots))
    running: set = set()
    lock = threading.Lock()
    shared = bool(devices) and slots > len(devices) and bool(jobs)
    lock_dir = str(Path(jobs[0].folder).parent / "gpu-locks") if shared else None

    def one(job: RowJob) -> dict:
        with lock:
            slot = free.pop(0)
        pinned = RowJob(**{**asdict(job), "device": devices[slot % len(devices)] if devices else None,
                           "gpu_lock_dir": lock_dir})
        try:
            return run_row(pinned, on_start=running.add)
        finally:
            with lock:
                free.append(slot)

    pool = ThreadPoolExecutor(max_workers=slots, thread_name_prefix="app-row")
    try:
        for future in as_completed([pool.submit(one, job) for job in jobs]):
            on_row(future.result())
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        for process in list(running):
            if process.poll() is None:
                stop(process)
        raise
    pool.shutdown()


# -- the tables -------------------------------------------------------------------------------

def summarize(options: AppsOptions, eval_id: str) -> dict:
    """The eval as one object: options, counts per outcome, the share answered, the rows in the
    folder's order (an app without a row yet is ``pending``)."""
    found = {r["app"]: r for r in rows(options.workdir, eval_id).astype(object)
             .where(lambda f: f.notna(), None).to_dict("records")}
    table = [{c: found[n].get(c) for c in COLUMNS} if n in found else {**empty_row(n), "outcome": "pending"}
             for n in options.names]
    counts = {o: sum(r["outcome"] == o for r in table) for o in (*OUTCOMES, "pending")}
    ran = len(table) - counts["pending"]
    answered = sum(counts[o] for o in ANSWERED)
    return {"eval_id": eval_id, "apps_dir": options.apps_dir, "options": shown_options(options),
            "proposer": proposer_name(options.model), "apps": len(table),
            "ran": ran, "counts": counts, "answered": answered,
            "answered_share": answered / ran if ran else None,
            "over_budget": sum(1 for r in table if r["seconds"] is not None and r["seconds"] > options.row_budget_s + 1),
            "rows": table}


def write_tables(options: AppsOptions, eval_id: str) -> list:
    """``OUT.json`` and ``OUT.md`` of the eval as it stands; returns their paths."""
    summary = summarize(options, eval_id)
    out = options.out_path(eval_id)
    out.parent.mkdir(parents=True, exist_ok=True)
    json_path, md_path = out.with_name(out.name + ".json"), out.with_name(out.name + ".md")
    json_path.write_text(json.dumps(summary, indent=1, default=str))
    md_path.write_text(markdown(summary))
    return [json_path, md_path]


def markdown(summary: dict) -> str:
    """The counts, then one table per outcome (tabulate is not a dependency: the table is written here)."""
    o = summary["options"]
    share = summary["answered_share"]
    lines = [f"# swizzleperf eval --apps {summary['apps_dir']} ({summary['eval_id']})", "",
             f"{summary['ran']} of {summary['apps']} apps run, {o['iterations']} proposals each by "
             f"{shown(summary.get('proposer') or proposer_name(o.get('model')))}, a budget of "
             f"{o['row_budget_s']:.0f} s a row; answered (optimized, verified without gain, or refused with its "
             f"reason): **{summary['answered']} of {summary['ran']}"
             + (f" ({share:.0%})" if share is not None else "")
             + f"**; rows past their budget: {summary['over_budget']}.",
             "", "| outcome | apps |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in summary["counts"].items() if v]
    header = ["operator", "kernel", "grid", "programs", "waves", "time (s)", "gain", "reason"]
    for outcome in (*OUTCOMES, "pending"):
        group = [r for r in summary["rows"] if r["outcome"] == outcome]
        if not group:
            continue
        lines += ["", f"## {outcome} ({len(group)})", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(_cells(r)) + " |" for r in group]
    return "\n".join(lines) + "\n"


def _cells(r: dict) -> list:
    gain = "-"
    if r.get("speedup") is not None:
        gain = f"{r['speedup']:.3f}x ± {r['speedup_spread'] or 0:.3f}"
    elif r.get("predicted_l2_baseline") is not None:
        gain = f"L2 {r['predicted_l2_baseline']:.1%} -> {r['predicted_l2_best']:.1%} (predicted)"
    num = lambda v, f: "-" if v is None else format(v, f)   # noqa: E731
    reason = (r.get("reason") or "").replace("|", "\\|").replace("\n", " ")
    if r.get("passed_over"):
        reason += f" (passed over: {r['passed_over']})".replace("|", "\\|")
    app = shown(r["app"])   # a newline in a name: one row still
    return [app.replace("|", "\\|"), r.get("kernel") or "-", r.get("grid") or "-", num(r.get("programs"), ".0f"),
            num(r.get("waves"), ".3g"), num(r.get("seconds"), ".0f"), gain, reason]
