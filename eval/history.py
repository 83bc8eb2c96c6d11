"""Loading and plotting the reflection history of a run, for notebooks/reflection_history.ipynb and
for scripts: the metric per iteration (measured and predicted, best so far), each candidate's
verdict, reason, source and diff, the lessons, the simulator's error, tokens and cost."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from swizzleperf.agent.record import RunRecord


def find_workdir(start: Path | None = None) -> Path:
    """The run record's folder: ``.swizzleperf`` in ``start`` (the current directory) or the
    nearest folder above it that has one (Jupyter starts a notebook in ``notebooks/``).

    Raises:
        FileNotFoundError: no ``.swizzleperf/swizzleperf.db`` there or above.
    """
    start = (start or Path.cwd()).resolve()
    for folder in (start, *start.parents):
        if (folder / ".swizzleperf" / "swizzleperf.db").exists():
            return folder / ".swizzleperf"
    raise FileNotFoundError(f"no .swizzleperf/swizzleperf.db in {start} or above it: run swizzleperf "
                            f"optimize first, or set SWIZZLEPERF_WORKDIR")


def load_run(run_id: str | None = None, workdir: str | None = None) -> tuple:
    """``(run row as dict, iterations DataFrame)`` of ``run_id``, the latest run by default, from
    the record in ``workdir`` (by default: found by :func:`find_workdir`).

    Raises:
        FileNotFoundError: no run record under ``workdir``.
        UnknownRunError: no such run.
    """
    workdir = workdir or str(find_workdir())
    record = RunRecord(Path(workdir))
    run_id = run_id or record.latest_run_id()
    if run_id is None:
        raise FileNotFoundError(f"no run recorded under {workdir}: run swizzleperf optimize first")
    iterations = record.iterations(run_id)
    iterations["objective"] = _objective(iterations)
    iterations["best_so_far"] = _best_so_far(iterations)
    return record.run(run_id), iterations


def _objective(it: pd.DataFrame) -> pd.Series:
    """Time (ms) where measured, else the L2 hit rate, per row (NaN for rejected candidates)."""
    return it.time_ms.where(it.time_ms.notna(), it.l2_hit_rate)


def _best_so_far(it: pd.DataFrame) -> pd.Series:
    measured = it.time_ms.notna().any()
    values = it.objective.where(it.verdict == "PASS")
    return values.cummin() if measured else values.cummax()


def summary(it: pd.DataFrame) -> pd.DataFrame:
    """One line per attempt: what it was, its verdict and reason, its figures and the lesson."""
    columns = ["kind", "iteration", "name", "verdict", "l2_hit_rate", "l2_source", "predicted_l2_hit_rate",
               "time_ms", "time_spread_ms", "reason", "lesson"]
    return it[columns]


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
    reply's first 200 characters and the prompt's size in characters. Empty for a run without an LLM."""
    record = RunRecord(Path(workdir or str(find_workdir())))
    frame = record.requests(run["run_id"])
    if frame.empty:
        return frame
    frame["prompt_chars"] = frame.messages_json.map(lambda text: sum(len(m.get("content") or "")
                                                                     for m in json.loads(text)))
    frame["reply_start"] = frame.reply.str.slice(0, 200)
    return frame[["iteration", "n", "outcome", "finish_reason", "seconds", "prompt_tokens", "completion_tokens",
                  "tokens_source", "max_tokens", "prompt_chars", "reply_start"]]


def plot_metric(it: pd.DataFrame, ax=None):
    """The objective per iteration (measured and predicted L2 hit rate, or time), best so far."""
    import matplotlib.pyplot as plt
    ax = ax or plt.subplots(figsize=(7, 3.5))[1]
    cand = it[it.kind == "candidate"]
    if it.time_ms.notna().any():
        ax.plot(cand.iteration, cand.time_ms, "o", label="time (measured)")
        ax.plot(cand.iteration, cand.best_so_far, "-", label="best so far")
        ax.set_ylabel("ms")
    else:
        ax.plot(cand.iteration, cand.l2_hit_rate * 100, "o", label="L2 hit rate")
        ax.plot(cand.iteration, cand.best_so_far * 100, "-", label="best so far")
        ax.set_ylabel("%")
    if (cand.l2_source.fillna("") != cand.predicted_source.fillna("")).any():
        ax.plot(cand.iteration, cand.predicted_l2_hit_rate * 100, "x", label="predicted L2 hit rate (%)")
    base = it[it.kind == "baseline"]
    if len(base):
        ax.axhline(float(base.objective.iloc[0]) * (1 if it.time_ms.notna().any() else 100), ls=":",
                   color="grey", label="baseline")
    ax.set_xlabel("iteration")
    ax.legend()
    return ax
