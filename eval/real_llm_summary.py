"""One table of the runs in a record, for the real-model results (#14): per run, the proposer,
its iterations and verdicts, how many verified candidates differ from every earlier order (tile
maps compared), the best order found against the baseline and the expert, and what the model cost
in requests, tokens (with how many were the server's own counts) and time.

    python -m swizzleperf.eval.real_llm_summary WORKDIR [--out summary.md]
"""
from __future__ import annotations

import argparse
import hashlib
from pathlib import Path

import numpy as np

from swizzleperf.agent.record import RunRecord


def summarise(workdir: Path) -> str:
    record = RunRecord(workdir)
    with record.connect() as db:
        runs = db.execute("SELECT run_id, kernel, proposer, status, started_at, finished_at, run_dir FROM runs "
                          "ORDER BY started_at").fetchall()
    lines = ["| run | kernel | proposer | status | iterations | verdicts | verified and new | best (L2) | "
             "baseline (L2) | expert (L2) | requests | prompt / completion tokens (server's) | minutes |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for run_id, kernel, proposer, status, started, finished, run_dir in runs:
        it = record.iterations(run_id)
        requests = record.requests(run_id)
        candidates = it[it.kind == "candidate"]
        verdicts = candidates.verdict.value_counts().to_dict()
        new = _verified_and_new(it, workdir / run_dir if not Path(run_dir).is_absolute() else Path(run_dir))
        best = it[it.is_best == 1]
        base, expert = it[it.kind == "baseline"], it[it.kind == "expert"]
        server = requests.tokens_source.str.startswith("server").sum() if not requests.empty else 0
        sent = (requests.tokens_source != "none: not sent").sum() if not requests.empty else 0
        tokens = (f"{int(requests.prompt_tokens.sum())} / {int(requests.completion_tokens.sum())} "
                  f"({server} of {sent} sent requests)") if not requests.empty else "-"
        lines.append(
            f"| {run_id} | {kernel} | {proposer.split(' at ')[0]} | {status} | {len(candidates)} | "
            f"{', '.join(f'{k} {v}' for k, v in verdicts.items())} | {new} of {len(candidates)} | "
            f"{_l2(best)} | {_l2(base)} | {_l2(expert)} | {len(requests)} | {tokens} | "
            f"{((finished or started) - started) / 60:.1f} |")
    return "\n".join(lines) + "\n"


def _verified_and_new(it, run_dir: Path) -> int:
    """Candidates that passed verification with a tile map no earlier attempt (baseline and
    expert included) had."""
    seen, new = set(), 0
    for row in it.itertuples():
        found = sorted((run_dir / "candidates").glob(f"{row.kind}{row.iteration:03d}-*.map.npy"))
        path = found[0] if found else None
        if row.verdict != "PASS" or path is None:
            continue
        digest = hashlib.sha1(np.load(path).tobytes()).hexdigest()
        if row.kind == "candidate" and digest not in seen:
            new += 1
        seen.add(digest)
    return new


def _l2(rows) -> str:
    if rows.empty or rows.l2_hit_rate.isna().all():
        return "-"
    row = rows.iloc[0]
    return f"{row['name']} {row.l2_hit_rate:.1%}"


def main(argv: list | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workdir", type=Path)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    text = summarise(args.workdir)
    print(text)
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
