"""Loading and plotting the reflection history of a run, for notebooks/reflection_history.ipynb and
for scripts: the objective per iteration (what the run ranked by: measured time, else a distributed
run's predicted time, else the L2 hit rate), each candidate's verdict, reason, source and diff, the
lessons, the simulator's error, tokens and cost.

A run is read from the SQLite record when there is one (read only: nothing is created), else from
its run folder (``report.json`` and ``transcript.jsonl``: the committed runs under bench/results/
keep only those).

What is read is data only, checked before use (#41): report.json and each transcript line against
the models below, within byte and depth bounds, fences found in one linear pass; a run whose files
do not fit is one line (``HistoryError``), and ``load_runs`` loads the others of a workdir.
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Annotated

import pandas as pd
import pydantic

from swizzleperf.agent.loop.record import DB_NAME, RunRecord
from swizzleperf.agent.proposers.llm import code_blocks
from swizzleperf.sandbox import untrusted


#: Bytes of a run folder's report.json and transcript.jsonl read (a long LLM run's transcript is a
#: few MB: every prompt is in it); beyond, the run is one line, not loaded.
MAX_REPORT_BYTES = 64 << 20
MAX_TRANSCRIPT_BYTES = 256 << 20
_Number = Annotated[float, pydantic.Field(strict=True, allow_inf_nan=False)] | None
_Iteration = Annotated[int, pydantic.Field(strict=True, ge=0, lt=1 << 31)]


class HistoryError(ValueError):
    """A run that cannot be loaded (its report or transcript not of the shape a run writes); one
    line naming the file and what is wrong."""


class _Entry(pydantic.BaseModel):
    """What is read of a report.json entry (baseline, expert, best, an attempt); the rest kept."""
    model_config = pydantic.ConfigDict(extra="allow", strict=True)
    iteration: _Iteration | None = None
    name: str | None = None
    verdict: str | None = None
    reason: str | None = None
    lesson: str | None = None
    source: str | None = None
    swizzle_source: str | None = None
    time_source: str | None = None
    predicted_source: str | None = None
    l2_hit_rate: _Number = None
    time_ms: _Number = None
    time_spread_ms: _Number = None
    dram_bytes: _Number = None
    predicted_l2_hit_rate: _Number = None
    predicted_time_ms: _Number = None


class _Attempt(_Entry):
    iteration: _Iteration
    name: str


class _Report(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="allow", strict=True)
    run_id: str | None = None
    kernel: str | None = None
    hardware: str | None = None
    mode: str | None = None
    proposer: str | None = None
    status: str | None = None
    stop_reason: str | None = None
    baseline: _Entry | None = None
    expert: _Entry | None = None
    best: _Entry | None = None
    attempts: list[_Attempt] = []


class _Message(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="allow", strict=True)
    content: str | None = None


class _Request(pydantic.BaseModel):
    """A transcript.jsonl line: what is read of it, the rest kept."""
    model_config = pydantic.ConfigDict(extra="allow", strict=True)
    iteration: _Iteration
    outcome: str | None = None
    rejected: str | None = None
    reply: str | None = None
    messages: list[_Message] | None = None
    prompt_tokens: Annotated[int, pydantic.Field(strict=True, ge=0, lt=1 << 40)] | None = None
    completion_tokens: Annotated[int, pydantic.Field(strict=True, ge=0, lt=1 << 40)] | None = None


def located(path: str | None, start: Path | None = None, folder: bool = False) -> str | None:
    """``path`` as given where it is absolute or exists from ``start`` (the current directory);
    else the first folder above ``start`` where it exists, joined to it: a path written from the
    repository's root (``bench/results/...``) works from ``notebooks/``, where Jupyter starts the
    notebook. Without ``folder``, a plain name (no separator: a run id) is returned as it is."""
    if not path or (not folder and os.sep not in path and "/" not in path):
        return path
    given = Path(path).expanduser()
    start = (start or Path.cwd()).resolve()
    if given.is_absolute() or (start / given).exists():
        return str(given)
    for folder in start.parents:
        if (folder / given).exists():
            return str(folder / given)
    return str(given)


def find_workdir(start: Path | None = None) -> Path:
    """The run record's folder: ``.swizzleperf`` in ``start`` (the current directory) or the
    nearest folder above it that has one (Jupyter starts a notebook in ``notebooks/``).

    Raises:
        FileNotFoundError: no ``.swizzleperf/swizzleperf.db`` there or above.
    """
    start = (start or Path.cwd()).resolve()
    for folder in (start, *start.parents):
        if (folder / ".swizzleperf" / DB_NAME).exists():
            return folder / ".swizzleperf"
    raise FileNotFoundError(f"no .swizzleperf/{DB_NAME} in {start} or above it: run swizzleperf "
                            f"optimize first, or set SWIZZLEPERF_WORKDIR (a workdir, or a run folder)")


def load_run(run_id: str | None = None, workdir: str | None = None) -> tuple:
    """``(run as dict, iterations DataFrame)`` of ``run_id`` (the latest run by default) from the
    record in ``workdir`` (by default: found by :func:`find_workdir`); where ``workdir`` has no
    record, from its ``runs/RUN_ID/`` folder; ``run_id`` (or ``workdir``) may also be a run folder
    itself. The record is only read: no file is created beside it.

    Raises:
        FileNotFoundError: no record and no run folder there.
        UnknownRunError: no such run in the record (``UnusableRunError``: its row is damaged).
        HistoryError: the run folder's report.json or transcript.jsonl is not a run's (one line).
    """
    run_id, workdir = located(run_id), located(workdir, folder=True)
    folder = run_folder(run_id, workdir)
    if folder is not None:
        run, iterations = _from_folder(folder)
    else:
        record = RunRecord(Path(workdir or find_workdir()))
        run_id = run_id or record.latest_run_id()
        if run_id is None:
            raise FileNotFoundError(f"no run recorded under {record.root}: run swizzleperf optimize first")
        run, iterations = record.run(run_id), record.iterations(run_id)
    for column in _NUMERIC & set(iterations.columns):   # a record's column may hold text (#41)
        iterations[column] = pd.to_numeric(iterations[column], errors="coerce")
    iterations["objective"], run["objective"] = _objective(iterations)
    iterations["best_so_far"] = _best_so_far(iterations, run["objective"])
    return run, iterations


_NUMERIC = {"l2_hit_rate", "time_ms", "time_spread_ms", "dram_bytes", "predicted_l2_hit_rate",
            "predicted_dram_bytes", "predicted_time_ms", "prompt_tokens", "completion_tokens", "cost_usd",
            "is_best", "iteration"}


def load_runs(workdir: str) -> tuple[dict, list]:
    """Every run folder under ``workdir/runs/`` that has a report.json: ``({run_id: (run,
    iterations)}, [one line per run that could not be loaded])``."""
    loaded, failed = {}, []
    for report in sorted((Path(workdir) / "runs").glob("*/report.json")):
        try:
            loaded[report.parent.name] = load_run(str(report.parent))
        except (HistoryError, OSError) as exc:
            failed.append(f"{report.parent.name}: {' '.join(str(exc).split())[:300]}")
    return loaded, failed


def run_folder(run_id: str | None, workdir: str | None) -> Path | None:
    """The run folder to read where there is no record: ``run_id`` or ``workdir`` when it is one
    (it holds ``report.json``), else ``workdir/runs/<run_id or the latest>``; None where
    ``workdir`` (or the one found) has a record.

    Raises:
        FileNotFoundError: neither a record nor such a folder.
    """
    for candidate in (run_id, workdir):
        if candidate and (Path(candidate) / "report.json").exists():
            return Path(candidate)
    if workdir is None or (Path(workdir) / DB_NAME).exists():
        return None
    runs = Path(workdir) / "runs"
    found = [runs / run_id] if run_id else sorted(runs.glob("*/report.json"))
    found = [f.parent if f.name == "report.json" else f for f in found]
    if not found or not (found[-1] / "report.json").exists():
        raise FileNotFoundError(f"no {DB_NAME} and no run folder {'runs/' + run_id if run_id else 'under runs/'} "
                                f"with a report.json in {workdir}")
    return found[-1]


def _from_folder(folder: Path) -> tuple:
    """The run and its iterations from ``report.json`` (baseline, expert, attempts; the best's
    source) and ``transcript.jsonl`` (each candidate's source, as the model wrote it, and its tokens)."""
    path = folder / "report.json"
    try:
        report = untrusted.load_json_checked(path, _Report, str(path), MAX_REPORT_BYTES).model_dump()
    except untrusted.UntrustedInput as exc:
        raise HistoryError(str(exc)) from None
    requests = read_transcript(folder)
    sources = accepted_sources(requests) if not requests.empty else {}
    tokens = requests.groupby("iteration")[["prompt_tokens", "completion_tokens"]].sum() if not requests.empty else None
    l2_source = (report.get("baseline") or {}).get("source")
    rows = []
    for kind in ("baseline", "expert"):
        entry = report.get(kind)
        if entry:
            rows.append({**_row(entry, kind, l2_source), "iteration": entry.get("iteration", 0),
                         "candidate_source": entry.get("swizzle_source", "")})
    best = report.get("best") or {}
    for attempt in report.get("attempts", []):
        i = attempt["iteration"]
        row = {**_row(attempt, "candidate", l2_source),
               "candidate_source": sources.get(i) or (best.get("swizzle_source", "") if best.get("iteration") == i
                                                      and best.get("name") == attempt["name"] else ""),
               "is_best": int(best.get("iteration") == i and best.get("name") == attempt["name"])}
        if tokens is not None and i in tokens.index:
            row.update(prompt_tokens=int(tokens.loc[i, "prompt_tokens"]),
                       completion_tokens=int(tokens.loc[i, "completion_tokens"]))
        rows.append(row)
    columns = ["kind", "iteration", "name", "verdict", "reason", "lesson", "l2_hit_rate", "l2_source", "time_ms",
               "time_spread_ms", "time_source", "dram_bytes", "predicted_l2_hit_rate", "predicted_source",
               "predicted_time_ms", "candidate_source", "diff", "prompt_tokens", "completion_tokens", "cost_usd",
               "is_best", "metrics_json"]
    frame = pd.DataFrame(rows, columns=columns)   # a report of no entry: text columns stay text (#41)
    frame[["prompt_tokens", "completion_tokens", "cost_usd", "is_best"]] = frame[
        ["prompt_tokens", "completion_tokens", "cost_usd", "is_best"]].fillna(0)
    frame["diff"] = frame["diff"].astype(object).fillna("")
    run = {k: report.get(k) for k in ("run_id", "kernel", "hardware", "mode", "proposer", "status", "stop_reason")}
    run.update(run_dir=str(folder), source=f"{folder}/report.json (no record)")
    return run, frame


def _row(entry: dict, kind: str, l2_source: str | None) -> dict:
    """One iterations row from a report entry (``predicted_*`` of a simulated run are its figures)."""
    row = {"kind": kind, **{k: entry.get(k) for k in (
        "iteration", "name", "verdict", "reason", "lesson", "l2_hit_rate", "time_ms", "time_spread_ms",
        "time_source", "dram_bytes", "predicted_l2_hit_rate", "predicted_source", "predicted_time_ms")}}
    row["l2_source"] = entry.get("source") or (l2_source if entry.get("l2_hit_rate") is not None else None)
    if row["predicted_l2_hit_rate"] is None and str(row["l2_source"] or "").startswith("simulated"):
        row["predicted_l2_hit_rate"], row["predicted_source"] = row["l2_hit_rate"], row["l2_source"]
    return row


def read_transcript(folder: Path) -> pd.DataFrame:
    """The requests of a run folder's ``transcript.jsonl`` (one row each; empty without one).

    Raises:
        HistoryError: the file is over ``MAX_TRANSCRIPT_BYTES``, or a line is not a request.
    """
    path = Path(folder) / "transcript.jsonl"
    if not path.exists():
        return pd.DataFrame()
    rows = []
    try:
        text = untrusted.read_bounded(path, MAX_TRANSCRIPT_BYTES, str(path)).decode("utf-8", errors="replace")
        for number, line in enumerate(text.splitlines(), 1):
            if line.strip():
                rows.append(untrusted.load_json_checked(line, _Request, f"{path}, line {number}",
                                                        MAX_TRANSCRIPT_BYTES).model_dump())
    except untrusted.UntrustedInput as exc:
        raise HistoryError(str(exc)) from None
    return pd.DataFrame(rows)


def accepted_sources(requests: pd.DataFrame) -> dict:
    """Iteration -> the source of the rewrite target in the reply the run took (the last request of
    the iteration that was answered and not sent back), as the model wrote it ('' when none)."""
    out = {}
    for iteration, group in requests.groupby("iteration"):
        taken = group[(group.outcome == "ok") & (group.rejected.fillna("") == "")]
        if len(taken):
            row = taken.iloc[-1]
            out[int(iteration)] = function_source(row.reply, _target_name(row.messages))
    return out


def function_source(reply: str, target: str) -> str:
    """The last fenced code block of ``reply`` that defines ``target`` (its text), else ''; the
    fences found in one pass over the lines (the proposer's ``code_blocks``: a reply of unclosed
    fences costs what any other does)."""
    defining = [b.body for b in code_blocks(reply or "") if _defines(b.body, target)]
    return defining[-1] if defining else ""


def _defines(body: str, target: str) -> bool:
    return re.search(rf"\bdef\s+{re.escape(target)}\b", body) is not None


def _target_name(messages) -> str:
    """The rewrite target the system prompt names (``swizzle`` when it names none)."""
    text = (messages or [{}])[0].get("content") or ""
    found = re.search(r"the `@triton\.jit` function `(\w+)`", text)
    return found.group(1) if found else "swizzle"


def _objective(it: pd.DataFrame) -> tuple:
    """``(values per row, what they are)``: what the run ranked its attempts by. Measured time (ms)
    where a GPU measured it; a distributed run's predicted time (the overlap model's, from the
    attempt's metrics) where nothing was measured; else the L2 hit rate. NaN for rejections."""
    if it.time_ms.notna().any():
        return it.time_ms, "time (ms, measured)"
    predicted = _metric(it, "predicted_time_ms")
    if predicted.notna().any():
        return predicted, "time (ms, predicted)"
    return it.l2_hit_rate, "L2 hit rate"


def _metric(it: pd.DataFrame, name: str) -> pd.Series:
    """A metric from its column, else from each row's ``metrics_json`` (NaN where absent)."""
    if name in it and it[name].notna().any():
        return pd.to_numeric(it[name], errors="coerce")
    if "metrics_json" not in it:
        return pd.Series(float("nan"), index=it.index)
    return pd.to_numeric(it.metrics_json.map(lambda text: _metrics(text).get(name)), errors="coerce")


def _metrics(text) -> dict:
    """An attempt's ``metrics_json`` as a dict; {} where absent or not a JSON object of bounded
    size and depth."""
    try:
        data = untrusted.loads(text, "metrics_json", max_chars=1 << 20) if isinstance(text, str) and text else {}
    except untrusted.UntrustedInput:
        return {}
    return data if isinstance(data, dict) else {}


def _best_so_far(it: pd.DataFrame, objective: str) -> pd.Series:
    values = it.objective.where(it.verdict == "PASS")
    return values.cummin() if objective.startswith("time") else values.cummax()


def summary(it: pd.DataFrame) -> pd.DataFrame:
    """One line per attempt: what it was, its verdict and reason, its figures, its roof (profiling/
    roof.py's one line, from the record's metrics: "% of roof" measured, "not measured" simulated)
    and the lesson."""
    columns = ["kind", "iteration", "name", "verdict", "l2_hit_rate", "l2_source", "predicted_l2_hit_rate",
               "time_ms", "time_spread_ms", "reason", "lesson"]
    roof = [_roof_line(m) for m in it.get("metrics_json", pd.Series([None] * len(it), index=it.index))]
    return it[columns].assign(roof=roof)


def _roof_line(metrics_json) -> str:
    """The roof line kept in an attempt's metrics, or '' (none recorded, or not JSON)."""
    roof = _metrics(metrics_json).get("roof")
    line = roof.get("line", "") if isinstance(roof, dict) else ""
    return line if isinstance(line, str) else ""


def prediction_error(it: pd.DataFrame) -> pd.DataFrame:
    """Predicted against measured L2 hit rate (percentage points) where both exist."""
    measured = it[(it.verdict == "PASS") & it.l2_source.fillna("").str.startswith("measured")]
    out = measured[["kind", "iteration", "name", "l2_hit_rate", "predicted_l2_hit_rate"]].copy()
    out["error_points"] = (out.predicted_l2_hit_rate - out.l2_hit_rate) * 100
    return out


def rejections(it: pd.DataFrame) -> pd.Series:
    """Candidates per verdict."""
    return it[it.kind == "candidate"].verdict.value_counts()


def spend(it: pd.DataFrame) -> pd.DataFrame:
    """Tokens and cost per iteration and in all."""
    c = it[it.kind == "candidate"][["iteration", "name", "prompt_tokens", "completion_tokens", "cost_usd"]]
    total = pd.DataFrame([{"iteration": "all", "name": "", **c[["prompt_tokens", "completion_tokens", "cost_usd"]].sum()}])
    return pd.concat([c, total], ignore_index=True)


def transcript(run: dict, workdir: str | None = None) -> pd.DataFrame:
    """Every request the run made to its LLM, in order: iteration, request number, outcome,
    finish reason, seconds, tokens and their source (``server`` or how they were estimated), the
    reply's first 200 characters and the prompt's size in characters. Empty for a run without an
    LLM. Read from the record, or from the run folder's ``transcript.jsonl`` for a run loaded
    from its folder."""
    if run.get("source", "").endswith("(no record)"):
        frame = read_transcript(Path(run["run_dir"]))
        if frame.empty:
            return frame
        frame["prompt_chars"] = frame.messages.map(lambda ms: sum(len(m.get("content") or "") for m in ms or []))
    else:
        frame = RunRecord(Path(located(workdir, folder=True) or str(find_workdir()))).requests(run["run_id"])
        if frame.empty:
            return frame
        frame["prompt_chars"] = frame.messages_json.map(_prompt_chars)
    frame["reply_start"] = frame.reply.str.slice(0, 200)
    return frame[["iteration", "n", "outcome", "finish_reason", "seconds", "prompt_tokens", "completion_tokens",
                  "tokens_source", "max_tokens", "prompt_chars", "reply_start"]]


def _prompt_chars(text) -> int:
    """Characters of the prompt's messages stored as ``messages_json`` (0 where not a list of them)."""
    try:
        messages = untrusted.loads(text, "messages_json") if isinstance(text, str) else []
    except untrusted.UntrustedInput:
        return 0
    return sum(len(m.get("content")) for m in messages if isinstance(m, dict) and isinstance(m.get("content"), str)) \
        if isinstance(messages, list) else 0


def plot_metric(it: pd.DataFrame, objective: str | None = None, ax=None):
    """The objective per iteration (``run["objective"]``: measured time, a distributed run's
    predicted time, or the L2 hit rate), best so far, the baseline; the simulator's predicted L2
    hit rate beside measured ones."""
    import matplotlib.pyplot as plt
    objective = objective or _objective(it)[1]
    ax = ax or plt.subplots(figsize=(7, 3.5))[1]
    cand = it[it.kind == "candidate"]
    scale = 1 if objective.startswith("time") else 100
    ax.plot(cand.iteration, cand.objective * scale, "o", label=objective)
    ax.plot(cand.iteration, cand.best_so_far * scale, "-", label="best so far")
    ax.set_ylabel("ms" if scale == 1 else "%")
    if scale == 100 and (cand.l2_source.fillna("") != cand.predicted_source.fillna("")).any():
        ax.plot(cand.iteration, cand.predicted_l2_hit_rate * 100, "x", label="predicted L2 hit rate (%)")
    base = it[it.kind == "baseline"]
    if len(base) and pd.notna(base.objective.iloc[0]):
        ax.axhline(float(base.objective.iloc[0]) * scale, ls=":", color="grey", label="baseline")
    ax.set_xlabel("iteration")
    ax.legend()
    return ax
