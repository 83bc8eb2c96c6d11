"""``swizzleperf eval``: the optimizer over the bundled kernels, one run each, then one table per eval
(CSV and markdown) and its plots under ``eval/results/``. A killed eval resumes where it stopped:
finished kernels are not redone, an interrupted kernel's run continues from its checkpoint."""
from __future__ import annotations

import json
import secrets
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pandas as pd

from swizzleperf.agent import run
from swizzleperf.agent.record import RunRecord

KERNELS_DIR = Path(__file__).resolve().parent.parent / "kernels"
KERNELS = ("gemm", "elementwise", "layernorm", "softmax", "spmv", "transpose", "stencil2d",
           "black_scholes", "fdtd2d", "smith_waterman")

_SCHEMA = """CREATE TABLE IF NOT EXISTS evals (
    eval_id TEXT, kernel TEXT, run_id TEXT, status TEXT, options_json TEXT, started_at REAL,
    PRIMARY KEY (eval_id, kernel))"""


class EvalError(Exception):
    """Bad eval options or an unknown eval id; one line for the user."""


@dataclass
class EvalOptions:
    """One eval: which kernels, where, with which proposer, how long each."""

    kernels: list = field(default_factory=lambda: list(KERNELS))
    hw: str | None = None
    iterations: int = 8
    model: str | None = None
    base_url: str | None = None
    workdir: str = ".swizzleperf"
    out_dir: str = "eval/results"


def resolve_kernels(text: str) -> list:
    """``all`` or a comma-separated list of bundled kernel names. Raises EvalError."""
    names = list(KERNELS) if text == "all" else [k.strip() for k in text.split(",") if k.strip()]
    unknown = [k for k in names if not (KERNELS_DIR / f"{k}.py").exists()]
    if unknown or not names:
        raise EvalError(f"unknown kernel(s) {', '.join(unknown) or '(none)'}: known {', '.join(KERNELS)}")
    return names


def _connect(workdir: str) -> sqlite3.Connection:
    connection = RunRecord(Path(workdir)).connect()
    connection.execute(_SCHEMA)
    return connection


def run_eval(options: EvalOptions, eval_id: str | None = None,
             on_event: Callable = lambda kind, data: None) -> tuple:
    """Run (or resume, with ``eval_id``) an eval; returns ``(eval_id, table DataFrame, files)``."""
    if eval_id is None:
        eval_id = time.strftime("eval-%Y%m%d-%H%M%S-") + secrets.token_hex(2)
    else:
        options = _stored_options(options.workdir, eval_id)
    for kernel in options.kernels:
        _run_kernel(options, eval_id, kernel, on_event)
    table = summarize(options.workdir, eval_id)
    return eval_id, table, write_tables(table, Path(options.out_dir), eval_id)


def _stored_options(workdir: str, eval_id: str) -> EvalOptions:
    with _connect(workdir) as db:
        found = db.execute("SELECT options_json FROM evals WHERE eval_id = ? LIMIT 1", (eval_id,)).fetchone()
    if found is None:
        raise EvalError(f"no eval {eval_id!r} in {workdir}")
    return EvalOptions(**json.loads(found[0]))


def _run_kernel(options: EvalOptions, eval_id: str, kernel: str, on_event: Callable) -> None:
    with _connect(options.workdir) as db:
        row = db.execute("SELECT run_id, status FROM evals WHERE eval_id = ? AND kernel = ?",
                         (eval_id, kernel)).fetchone()
    if row and row[1] == "finished":
        on_event("skip", {"name": kernel})
        return
    on_event("kernel", {"name": kernel})

    def forward(kind: str, data: dict) -> None:
        if kind == "run":
            _set_row(options, eval_id, kernel, data["name"], "running")
        on_event(kind, data)

    if row:
        outcome = run.resume(row[0], workdir=options.workdir, on_event=forward)
    else:
        outcome = run.start(run.RunOptions(kernel=str(KERNELS_DIR / f"{kernel}.py"), hw=options.hw,
                                           iterations=options.iterations, model=options.model,
                                           base_url=options.base_url, workdir=options.workdir),
                            on_event=forward)
    _set_row(options, eval_id, kernel, outcome.run_id, outcome.status)


def _set_row(options: EvalOptions, eval_id: str, kernel: str, run_id: str, status: str) -> None:
    from dataclasses import asdict
    with _connect(options.workdir) as db:
        db.execute("INSERT OR REPLACE INTO evals VALUES (?, ?, ?, ?, ?, ?)",
                   (eval_id, kernel, run_id, status, json.dumps(asdict(options)), time.time()))


def summarize(workdir: str, eval_id: str) -> pd.DataFrame:
    """One row per kernel of the eval: baseline, expert and best with their sources, speedups
    (none where within the measured spread), iterations and time to the best, rejections by
    reason, tokens and cost."""
    record = RunRecord(Path(workdir))
    with _connect(workdir) as db:
        rows = db.execute("SELECT kernel, run_id FROM evals WHERE eval_id = ? ORDER BY rowid", (eval_id,)).fetchall()
    return pd.DataFrame([_kernel_row(record, kernel, run_id) for kernel, run_id in rows])


def _kernel_row(record: RunRecord, kernel: str, run_id: str) -> dict:
    meta = record.run(run_id)
    report = json.loads((Path(meta["run_dir"]) / "report.json").read_text())
    iterations = record.iterations(run_id)
    out = {"kernel": kernel, "hardware": report["hardware"], "mode": report["mode"], "run_id": run_id}
    for label in ("baseline", "expert", "best"):
        f = report.get(label) or {}
        out.update({f"{label}_name": f.get("name"), f"{label}_time_ms": f.get("time_ms"),
                    f"{label}_time_spread_ms": f.get("time_spread_ms"), f"{label}_l2_hit_rate": f.get("l2_hit_rate"),
                    f"{label}_dram_bytes": f.get("dram_bytes"), f"{label}_source": f.get("source")})
    best = report.get("best") or {}
    for other in ("baseline", "expert"):
        speedup = best.get(f"speedup_vs_{other}")
        real = best.get(f"beyond_noise_vs_{other}")
        out[f"speedup_vs_{other}"] = speedup if real else (1.0 if speedup is not None else None)
        out[f"l2_gain_vs_{other}"] = best.get(f"l2_gain_vs_{other}")
    candidates = iterations[iterations.kind == "candidate"]
    best_row = iterations[iterations.is_best == 1]
    out["iterations"] = int(report["iterations"])
    out["iteration_of_best"] = int(best_row.iteration.iloc[0]) if len(best_row) and best_row.kind.iloc[0] == "candidate" else 0
    out["seconds_to_best"] = (float(best_row.created_at.iloc[0]) - meta["started_at"]) if len(best_row) else None
    out["rejected"] = "; ".join(f"{v}: {n}" for v, n in candidates[candidates.verdict != "PASS"].verdict.value_counts().items())
    out["tokens"] = int(candidates.prompt_tokens.sum() + candidates.completion_tokens.sum())
    out["cost_usd"] = float(candidates.cost_usd.sum())
    out["verdict"] = _verdict(out)
    return out


def _verdict(row: dict) -> str:
    """The honest one-word outcome: a speedup only beyond the measured spread."""
    if row.get("best_time_ms") is not None:
        s = row.get("speedup_vs_baseline")
        return "faster" if s and s > 1.0 else "no change"
    gain = row.get("l2_gain_vs_baseline") or 0.0
    return "higher predicted L2 hit rate" if gain >= 1e-3 else "no change"


def write_tables(table: pd.DataFrame, out_dir: Path, eval_id: str) -> list:
    """CSV, markdown and PNG plots of one eval; returns the paths written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    csv, md = out_dir / f"{eval_id}.csv", out_dir / f"{eval_id}.md"
    table.to_csv(csv, index=False)
    md.write_text(_markdown(table))
    return [csv, md, *_plots(table, out_dir, eval_id)]


def _fmt(value, kind: str) -> str:
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return "n/a"
    return {"pct": f"{value:.1%}", "ms": f"{value:.3f}", "x": f"{value:.2f}x", "gb": f"{value / 1e9:.2f}"}[kind]


def _markdown(table: pd.DataFrame) -> str:
    lines = ["| kernel | mode | baseline L2 | expert L2 | best (order) L2 | baseline ms | expert ms | best ms "
             "| vs baseline | vs expert | iter. of best | rejected | verdict |", "|" + "---|" * 13]
    for r in table.to_dict("records"):
        lines.append(f"| {r['kernel']} | {r['mode']} | {_fmt(r['baseline_l2_hit_rate'], 'pct')} "
                     f"| {_fmt(r['expert_l2_hit_rate'], 'pct')} | {r['best_name']}: {_fmt(r['best_l2_hit_rate'], 'pct')} "
                     f"| {_fmt(r['baseline_time_ms'], 'ms')} | {_fmt(r['expert_time_ms'], 'ms')} "
                     f"| {_fmt(r['best_time_ms'], 'ms')} | {_fmt(r['speedup_vs_baseline'], 'x')} "
                     f"| {_fmt(r['speedup_vs_expert'], 'x')} | {r['iteration_of_best']} | {r['rejected'] or 'none'} "
                     f"| {r['verdict']} |")
    sources = ", ".join(sorted({s for s in table.best_source.dropna()}))
    return "\n".join(lines) + f"\n\nL2 figures: {sources}; a speedup within the measured spread is shown as 1.00x.\n"


def _plots(table: pd.DataFrame, out_dir: Path, eval_id: str) -> list:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(max(6, 1.1 * len(table)), 3.5))
    width = 0.27
    for i, label in enumerate(("baseline", "expert", "best")):
        values = table[f"{label}_l2_hit_rate"].astype(float).fillna(0.0) * 100
        ax.bar([x + (i - 1) * width for x in range(len(table))], values, width, label=label)
    ax.set_xticks(range(len(table)), table.kernel, rotation=30, ha="right")
    ax.set_ylabel("L2 hit rate (%)")
    ax.set_title(f"{eval_id}: L2 hit rate ({', '.join(sorted(set(table.best_source.dropna())))})")
    ax.legend()
    fig.tight_layout()
    path = out_dir / f"{eval_id}_l2.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return [path]
