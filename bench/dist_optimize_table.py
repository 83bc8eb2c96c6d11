"""The table of the distributed optimize on W GPUs (issue #22): one row per (kernel, problem) from
the reports of ``swizzleperf optimize`` runs and the hand bench of the same session.

    python3 -m bench.dist_optimize_table --workdir OUT/ws --bench OUT/bench_*.json --out OUT/dist_optimize_h100x2

Rows: ``kernel, problem, world_size, device, best_config, best_ms, torch_nccl_ms, torch_fused_ms,
gemm_alone_ms, comm_alone_ms, hand_best_ms, spread_ms, source`` and, beside them, the hand bench's
best pattern, the perfect-overlap bound, the answer (``recommendation``: the configuration the run
recommends, the fastest that beats torch + NCCL beyond the paired spread, or torch + NCCL when none
does; ``recommended_ms`` its time) and the two checks of the issue: ``finds_hand_best`` (best_ms <=
hand_best_ms + spread_ms) and ``never_slower`` (the recommendation is not slower than torch + NCCL
beyond the spread). Every time is measured (CUDA events, the slowest
rank's, median of interleaved rounds) in the session the command ran in.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def rows_from(workdir: Path, bench_files: list) -> list:
    """One row per optimize run found under ``workdir`` (the latest run of each kernel and problem)."""
    hand = _hand_best(bench_files)
    runs = {}
    for path in sorted(workdir.glob("runs/*/report.json")):
        report = json.loads(path.read_text())
        d = report.get("distributed")
        if not d:
            continue
        runs[(report["kernel"], d["problem"])] = (path, report)
    return [_row(path, report, hand.get((report["kernel"], report["distributed"]["problem"])))
            for path, report in runs.values()]


def _hand_best(bench_files: list) -> dict:
    """(kernel, problem) -> the fastest verified pattern of the hand bench: {pattern, time_ms, iqr_ms}."""
    best = {}
    for name in bench_files:
        data = json.loads(Path(name).read_text())
        for row in data.get("rows", []):
            if not row.get("verified") or row.get("time_ms") is None:
                continue
            key = (row["kernel"], row["problem"])
            if key not in best or row["time_ms"] < best[key]["time_ms"]:
                best[key] = {"pattern": row["pattern"], "time_ms": row["time_ms"], "iqr_ms": row.get("iqr_ms"),
                             "baseline_ms": row.get("baseline_ms"), "device": data.get("device")}
    return best


def _row(path: Path, report: dict, hand: dict | None) -> dict:
    d, best = report["distributed"], report.get("best") or {}
    refs = d.get("references") or {}
    measured = report["mode"] == "measured" and best.get("time_ms") is not None
    spread = max(best.get("time_spread_ms") or 0.0, best.get("torch_nccl_spread_ms") or 0.0,
                 best.get("paired_spread_ms") or 0.0) if measured else None
    answer = d.get("answer") or {}
    row = {"kernel": report["kernel"], "problem": d["problem"], "world_size": d["world_size"],
           "device": (d.get("pool") or {}).get("device") or report.get("hardware"),
           "best_config": best.get("config"), "best_ms": best.get("time_ms"),
           "torch_nccl_ms": best.get("torch_nccl_ms") or refs.get("torch_nccl_ms"),
           "torch_fused_ms": refs.get("torch_fused_ms"), "gemm_alone_ms": refs.get("gemm_alone_ms"),
           "comm_alone_ms": refs.get("comm_alone_ms"), "comm_alone_source": refs.get("comm_alone_source", "measured"),
           "hand_best_ms": (hand or {}).get("time_ms"), "hand_best_pattern": (hand or {}).get("pattern"),
           "spread_ms": spread, "paired_gain_ms": best.get("paired_gain_ms"),
           "overlap_bound_ms": refs.get("overlap_bound_ms"), "way_to_bound": d.get("way_to_bound"),
           "way_to_bound_note": d.get("way_to_bound_note"),
           "recommendation": _recommendation(answer, best),
           "answer": answer.get("line"), "verified_at": best.get("verified_at"),
           "source": "measured" if measured else report["mode"], "report": str(path),
           "status": report.get("status"), "iterations": report.get("iterations"),
           "stop_reason": report.get("stop_reason")}
    if measured and row["hand_best_ms"] is not None:
        row["finds_hand_best"] = row["best_ms"] <= row["hand_best_ms"] + spread
    if measured and row["torch_nccl_ms"] is not None:
        chosen = _chosen(report, answer, best)
        if chosen is None:      # torch + NCCL itself
            row["never_slower"] = True
        else:
            noise = max(spread, chosen.get("time_spread_ms") or 0.0, chosen.get("paired_spread_ms") or 0.0)
            row["recommended_ms"] = chosen["time_ms"]
            row["never_slower"] = chosen["time_ms"] <= (chosen.get("torch_nccl_ms") or row["torch_nccl_ms"]) + noise
    return row


def _recommendation(answer: dict, best: dict):
    """The configuration the run recommends (agent/distributed/measured.answer), or "torch + NCCL"."""
    if answer.get("use") != "configuration":
        return "torch + NCCL"
    return answer.get("config") or best.get("config")   # runs before the answer carried its config


def _chosen(report: dict, answer: dict, best: dict) -> dict | None:
    """The figures of the recommended configuration: the best's, or the head-to-head contender
    the answer names; None when the answer is torch + NCCL."""
    if answer.get("use") != "configuration":
        return None
    if not answer.get("name") or answer["name"] == best.get("name"):
        return best
    contenders = (report.get("confirmation") or {}).get("contenders") or []
    return next((c for c in contenders if c.get("name") == answer["name"]), best)


def markdown(rows: list, command: str) -> str:
    lines = ["# The distributed optimize on two GPUs (issue #22)", "", f"`{command}`", "",
             "Every time measured in one session: CUDA events, the slowest rank's, median of interleaved rounds; "
             "± the larger interquartile range of the pair. `hand best`: bench/dist_bench.py's fastest "
             "pattern at the default knobs, same session. `bound`: max(cuBLAS GEMM alone, communication alone).", "",
             "| kernel | problem | W | device | answer | best found (ms) | torch + NCCL | torch fused | GEMM alone | "
             "comm alone | bound | hand best | finds hand best | never slower |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        config = json.dumps(r["best_config"]) if r["best_config"] else "n/a"
        answer = "torch + NCCL" if r["recommendation"] == "torch + NCCL" else f"`{json.dumps(r['recommendation'])}`"
        lines.append(f"| {r['kernel']} | {r['problem']} | {r['world_size']} | {r['device']} | {answer} | "
                     f"{_ms(r['best_ms'])} ± {_ms(r['spread_ms'])} (`{config}`) | {_ms(r['torch_nccl_ms'])} | "
                     f"{_ms(r['torch_fused_ms'])} | {_ms(r['gemm_alone_ms'])} | {_ms(r['comm_alone_ms'])} | "
                     f"{_ms(r['overlap_bound_ms'])} | {_ms(r['hand_best_ms'])} ({r['hand_best_pattern'] or 'n/a'}) | "
                     f"{_yes(r.get('finds_hand_best'))} | {_yes(r.get('never_slower'))} |")
    lines += ["", "Where each run stopped: " + "; ".join(
        f"{r['kernel']} {r['problem']}: {r.get('status') or 'n/a'} after {r.get('iterations')} iterations "
        f"({r.get('stop_reason') or 'no reason recorded'})" for r in rows) + "."]
    losses = [r for r in rows if r["recommendation"] == "torch + NCCL" and r["best_ms"]]
    if losses:
        lines += ["", f"Where we lose ({len(losses)} of {len(rows)} problems): torch + NCCL is the answer; "
                  + "; ".join(f"{r['kernel']} {r['problem']}: best found {r['best_ms']:.3f} ms against "
                              f"{r['torch_nccl_ms']:.3f}" for r in losses) + "."]
    return "\n".join(lines) + "\n"


def _ms(x) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def _yes(x) -> str:
    return "n/a" if x is None else ("yes" if x else "**no**")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--bench", nargs="*", default=[])
    parser.add_argument("--out", required=True, help="path prefix of OUT.json / OUT.md")
    parser.add_argument("--command", default="bash bench/gpu_dist_optimize.sh OUTDIR")
    args = parser.parse_args(argv)
    rows = rows_from(Path(args.workdir), args.bench)
    Path(f"{args.out}.json").write_text(json.dumps({"command": args.command, "rows": rows}, indent=1, default=str))
    text = markdown(rows, args.command)
    Path(f"{args.out}.md").write_text(text)
    print(text)
    return 0 if rows else 1


if __name__ == "__main__":
    sys.exit(main())
