"""Fit the overlap model on the 2-GPU measurements, then predict the 4- and 8-GPU ones unseen.

    python -m swizzleperf.eval.validate_overlap_model fit        # -> profiling/overlap_params.json
    python -m swizzleperf.eval.validate_overlap_model validate   # -> eval/results/overlap_model_validation.md

``fit`` uses only eval/results/dist_h200_2gpu.json (H200, 2026-11-22: every kernel, problem and
pattern's time, the bulk_sync steps timed alone, torch + NCCL and its matmul alone) and the
single-GPU per-rank GEMMs of shared/HARDWARE.md; least squares on log times (relative errors),
parameters kept positive. ``validate`` predicts every row of dist_h200_4gpu.json,
dist_h200_8gpu.json and the COMM_SMS sweep at 4 GPUs (dist_h200_4gpu_comm_sms/), none of
which the fit saw, and reports per (kernel, problem, W): the error of each pattern, the Spearman
rank correlation across patterns, and whether the model's pick is within 5 % of the measured best.
"""
from __future__ import annotations

import argparse
import datetime
import json
import math
from pathlib import Path

import numpy as np

from swizzleperf import hwspecs
from swizzleperf.profiling import overlap_model

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "eval" / "results"
OUT_MD = RESULTS / "overlap_model_validation.md"

#: Initial values of the fitted parameters (seconds, bytes/s, flop/s or dimensionless).
INITIAL = {
    "gemm_eff": 0.65, "gemm_intensity_exp": 1.0, "gemm_gamma": 0.7, "gemm_launch_s": 1e-5,
    "copy_launch_s": 1e-5, "copy_message_s": 2e-7, "ce_call_s": 2e-5, "hbm_launch_s": 5e-6,
    "hbm_eff": 0.7, "barrier_s": 1.5e-5, "fused_store_factor": 1.0, "producer_consumer_s": 2e-5,
    "workgroup_specialized_s": 5e-6, "pull_eff": 0.05, "push_s": 1e-5, "rs_store_eff": 0.5,
    "reduce_sm_gain": 3.0, "rs_pc_s": 1e-5, "fd_combine_s": 5e-5, "fd_push_s": 3e-5,
    "nccl_allgather_launch_s": 1e-5, "nccl_allgather_bytes_per_s": 2e11,
    "nccl_reducescatter_launch_s": 1e-5, "nccl_reducescatter_bytes_per_s": 2e11,
    "cublas_launch_s": 1e-5, "cublas_flops": 7e14, "torch_attn_launch_s": 5e-5,
    "torch_attn_bytes_per_s": 1e12, "torch_combine_s": 1e-4,
}
#: Single-GPU per-rank GEMMs on an H200 (shared/HARDWARE.md, 2026-11-23): (M, N, K, tile, us).
HARDWARE_GEMMS = [
    (4096, 1280, 8192, {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "num_warps": 8, "num_stages": 3}, 168.3),
    (4096, 1280, 8192, {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "num_warps": 4, "num_stages": 4}, 148.8),
]
HARDWARE_CUBLAS = [(4096, 1280, 8192, 113.6), (4096, 2560, 8192, 238.0)]
_STEP = {("gemm_all_scatter", "0:gemm mode 0"): "gemm", ("gemm_all_scatter", "1:scatter"): "scatter",
         ("all_gather_gemm", "0:push"): "push", ("all_gather_gemm", "2:gemm"): "gemm",
         ("gemm_reduce_scatter", "0:gemm"): "gemm", ("gemm_reduce_scatter", "2:reduce"): "reduce",
         ("flash_decode", "0:partial"): "partial", ("flash_decode", "2:combine pull"): "combine"}


def rows(world_size: int) -> list:
    return json.loads((RESULTS / f"dist_h200_{world_size}gpu.json").read_text())["rows"]


def sweep_rows() -> list:
    out = []
    for path in sorted((RESULTS / "dist_h200_4gpu_comm_sms").glob("*.json")):
        out += json.loads(path.read_text())["rows"]
    return out


def _problem(row: dict) -> dict:
    return {k: row[k] for k in ("M", "N", "K", "B", "H", "H_kv", "D", "S") if k in row}


def _observations(hw) -> list:
    """(what, measured seconds, predict(params) -> seconds) of everything the fit may see."""
    obs, seen = [], set()
    for row in rows(2):
        if not row["verified"]:
            continue
        kernel, problem, pattern, meta = row["kernel"], _problem(row), row["pattern"], row["meta"]
        obs.append((f"{kernel}/{row['problem']}/{pattern}", row["time_ms"] * 1e-3,
                    lambda p, k=kernel, pr=problem, pa=pattern, m=meta:
                    overlap_model.predict(k, pr, 2, pa, m, hw, params=p).time_ms * 1e-3))
        if (kernel, row["problem"]) in seen:
            continue
        seen.add((kernel, row["problem"]))
        bulk = "bulk_sync"
        for step, ms in (row.get("bulk_sync_steps_ms") or {}).items():
            part = _STEP.get((kernel, step))
            if part:
                obs.append((f"{kernel}/{row['problem']}/{part} alone", ms * 1e-3,
                            lambda p, k=kernel, pr=problem, m=meta, part=part:
                            overlap_model.predict(k, pr, 2, bulk, m, hw, params=p).breakdown[part] * 1e-3))
        obs.append((f"{kernel}/{row['problem']}/torch+NCCL", row["baseline_ms"] * 1e-3,
                    lambda p, k=kernel, pr=problem: overlap_model.predict_baseline(k, pr, 2, hw, params=p).time_ms * 1e-3))
        if row.get("baseline_compute_ms"):
            obs.append((f"{kernel}/{row['problem']}/torch compute", row["baseline_compute_ms"] * 1e-3,
                        lambda p, k=kernel, pr=problem: overlap_model.predict_baseline(k, pr, 2, hw, params=p).compute_ms * 1e-3))
            obs.append((f"{kernel}/{row['problem']}/NCCL alone", (row["baseline_ms"] - row["baseline_compute_ms"]) * 1e-3,
                        lambda p, k=kernel, pr=problem: overlap_model.predict_baseline(k, pr, 2, hw, params=p).comm_ms * 1e-3))
    for m, n, k, tile, us in HARDWARE_GEMMS:
        obs.append((f"gemm {m}x{n}x{k} {tile['BLOCK_M']}x{tile['BLOCK_N']} (1 GPU)", us * 1e-6,
                    lambda p, m=m, n=n, k=k, t=tile: overlap_model.gemm_s(m, n, k, t, hw.compute_units, hw, p)))
    for m, n, k, us in HARDWARE_CUBLAS:
        obs.append((f"cuBLAS {m}x{n}x{k} (1 GPU)", us * 1e-6,
                    lambda p, m=m, n=n, k=k: overlap_model.cublas_s(m, n, k, p)))
    return obs


def fit() -> dict:
    """Least squares on log times over the 2-GPU observations; writes the parameter file."""
    from scipy.optimize import least_squares
    hw = hwspecs.load_spec("h200")
    obs = _observations(hw)
    names = list(INITIAL)

    def residuals(x):
        p = dict(zip(names, np.exp(x)))
        return np.array([math.log(max(f(p), 1e-9)) - math.log(t) for _, t, f in obs])

    result = least_squares(residuals, np.log([INITIAL[n] for n in names]), method="trf")
    params = dict(zip(names, (float(v) for v in np.exp(result.x))))
    errors = np.abs(np.exp(residuals(result.x)) - 1)
    params["_source"] = (f"fitted {datetime.date.today()} by `python -m swizzleperf.eval.validate_overlap_model "
                         f"fit` on eval/results/dist_h200_2gpu.json ({len(obs)} observations, H200) and the "
                         f"single-GPU GEMMs of shared/HARDWARE.md; median fit error {np.median(errors):.1%}")
    overlap_model.PARAMS_PATH.write_text(json.dumps(params, indent=1) + "\n")
    overlap_model.load_params.cache_clear()
    return params


def _spearman(a: list, b: list) -> float:
    if len(a) < 2:
        return float("nan")
    ra, rb = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
    if np.all(ra == ra[0]) or np.all(rb == rb[0]):
        return float("nan")
    return float(np.corrcoef(ra, rb)[0, 1])


def validate() -> dict:
    hw = hwspecs.load_spec("h200")
    cases, lines = [], []
    for label, world_size, data in (("4 GPUs", 4, rows(4)), ("8 GPUs", 8, rows(8)),
                                    ("4 GPUs, COMM_SMS sweep", 4, sweep_rows()), ("2 GPUs (fitted on)", 2, rows(2))):
        groups: dict = {}
        for row in data:
            if row["verified"]:
                groups.setdefault((row["kernel"], row["problem"]), []).append(row)
        for (kernel, problem), group in groups.items():
            measured = [r["time_ms"] for r in group]
            predicted = [overlap_model.predict(kernel, _problem(r), world_size, r["pattern"], r["meta"],
                                               hw).time_ms for r in group]
            pick = int(np.argmin(predicted))
            top1 = measured[pick] <= 1.05 * min(measured)
            base_m = group[0]["baseline_ms"]
            base_p = overlap_model.predict_baseline(kernel, _problem(group[0]), world_size, hw).time_ms
            names = [r["pattern"] + (f" COMM_SMS={r['meta']['COMM_SMS']}" if "sweep" in label else "") for r in group]
            cases.append({"set": label, "kernel": kernel, "problem": problem, "W": world_size,
                          "errors": [abs(p / m - 1) for p, m in zip(predicted, measured)],
                          "spearman": _spearman(measured, predicted), "top1": top1,
                          "baseline_error": abs(base_p / base_m - 1),
                          "rows": list(zip(names, measured, predicted)), "pick": names[pick],
                          "best": names[int(np.argmin(measured))], "baseline": (base_m, base_p)})
    summary = {label: _summary([c for c in cases if c["set"] == label])
               for label in ("4 GPUs", "8 GPUs", "4 GPUs, COMM_SMS sweep", "2 GPUs (fitted on)")}
    summary["unseen (4 and 8 GPUs, sweep)"] = _summary([c for c in cases if "fitted" not in c["set"]])
    OUT_MD.write_text(_markdown(cases, summary))
    return summary


def _summary(cases: list) -> dict:
    errors = [e for c in cases for e in c["errors"]]
    spear = [c["spearman"] for c in cases if not math.isnan(c["spearman"])]
    return {"cases": len(cases), "patterns": len(errors), "median_error": float(np.median(errors)),
            "spearman_median": float(np.median(spear)) if spear else float("nan"),
            "spearman_ge_0.8": sum(s >= 0.8 for s in spear) / len(spear) if spear else float("nan"),
            "top1_within_5pct": sum(c["top1"] for c in cases) / len(cases),
            "baseline_median_error": float(np.median([c["baseline_error"] for c in cases]))}


def _markdown(cases: list, summary: dict) -> str:
    params = overlap_model.load_params()
    out = ["# The overlap model against measured runs (H200)", "",
           "Commands (repository root, no GPU):", "", "```",
           "python -m swizzleperf.eval.validate_overlap_model fit        # profiling/overlap_params.json",
           "python -m swizzleperf.eval.validate_overlap_model validate   # this page", "```", "",
           f"Parameters: {params['_source']}.", "",
           "Measured: CUDA events, slowest rank, median of 10 samples (eval/results/dist_h200.md). "
           "Predicted: profiling/overlap_model.py with hwspecs/h200.yaml (`simulated:h200xW`). "
           "The fit saw only the 2-GPU rows; the 4- and 8-GPU rows and the COMM_SMS sweep are "
           "predicted unseen.", "",
           "## Summary", "", "| set | cases | patterns | median abs. time error | Spearman (median) "
           "| cases with Spearman >= 0.8 | pick within 5 % of the best | torch + NCCL median error |",
           "|---|---|---|---|---|---|---|---|"]
    for label, s in summary.items():
        out.append(f"| {label} | {s['cases']} | {s['patterns']} | {s['median_error']:.1%} | "
                   f"{s['spearman_median']:.2f} | {s['spearman_ge_0.8']:.0%} | {s['top1_within_5pct']:.0%} | "
                   f"{s['baseline_median_error']:.1%} |")
    out += ["", "Targets (issue #13): median error <= 15 %, Spearman >= 0.8 across the patterns of "
            "each case, the pick within 5 % of the measured best in >= 85 % of the cases.", "",
            "## Where it misses, and why", "",
            "- Ranks within a case: the patterns of one (kernel, problem, W) are often within a few "
            "per cent of each other measured (gemm_all_scatter at 8 GPUs: 0.197-0.214 ms at "
            "iris-4096), inside the model's error, so Spearman over 2-4 patterns swings between -1 "
            "and 1 on small differences. The pick misses by 5-10 % there, not by a wide margin.",
            "- What 2 GPUs cannot show: costs that grow with the number of peers. At W = 2 every "
            "scatter goes to one peer and the copy-engine push is 4 calls that hide behind the GEMM; "
            "at W = 8 the scatter is slower per byte than the fit's rate and the copy-engine push "
            "is 28 serialised copy + signal calls (1.5 ms measured against 0.5-0.9 predicted). A "
            "per-peer cost is not identifiable from 2-GPU data; one 4-GPU run in the fit would fix "
            "both (the issue asked for a fit on 2 GPUs only, so it is not used).",
            "- GEMM + reduce-scatter's remote stores: fitted where the GEMM hides them (W = 2), "
            "their rate is too low for W = 8, where they dominate (o-4k, down-4k: bulk_sync "
            "predicted slower than producer_consumer, measured the other way).",
            "- torch + NCCL: 2-9 % median error; flash decode's torch baseline is under-predicted "
            "at 8 GPUs (its gather and torch combine grow with W more than the fit's launch cost).",
            "",
            "## Every case", "", "| set | kernel | problem | pattern: measured / predicted ms | Spearman "
            "| pick | measured best | torch + NCCL measured / predicted |", "|---|---|---|---|---|---|---|---|"]
    for c in cases:
        pats = "; ".join(f"{n}: {m:.3f} / {p:.3f}" for n, m, p in c["rows"])
        sp = "n/a" if math.isnan(c["spearman"]) else f"{c['spearman']:.2f}"
        out.append(f"| {c['set']} | {c['kernel']} | {c['problem']} | {pats} | {sp} | {c['pick']}"
                   f"{'' if c['top1'] else ' (miss)'} | {c['best']} | {c['baseline'][0]:.3f} / {c['baseline'][1]:.3f} |")
    return "\n".join(out) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=("fit", "validate"))
    args = parser.parse_args()
    if args.what == "fit":
        params = fit()
        print(params["_source"])
    else:
        for label, s in validate().items():
            print(label, {k: round(v, 3) if isinstance(v, float) else v for k, v in s.items()})


if __name__ == "__main__":
    main()
