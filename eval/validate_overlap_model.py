"""Fit the overlap model on the 2-GPU measurements, then predict the 4- and 8-GPU ones unseen.

    python -m swizzleperf.eval.validate_overlap_model gemm       # the GEMM tile rates for hwspecs/h200.yaml
    python -m swizzleperf.eval.validate_overlap_model fit        # -> profiling/overlap_params.json
    python -m swizzleperf.eval.validate_overlap_model validate   # -> eval/results/overlap_model_validation.md

``gemm`` fits the per-SM rate of each GEMM tile configuration, the fixed cost per tile and the
last-wave exponent on one H200's per-rank GEMMs (eval/results/rank_gemm_h200.json, made by
``python3 eval/gpu_rank_gemm.py``); they go into hwspecs/h200.yaml by hand, with that source.
``fit`` uses only eval/results/dist_h200_2gpu.json (H200, 2026-11-22: every kernel, problem and
pattern's time, the bulk_sync steps timed alone, torch + NCCL and its matmul alone) and the
single-GPU cuBLAS times of rank_gemm_h200.json; least squares on log times (relative errors),
every parameter positive. ``validate`` predicts every row of dist_h200_4gpu.json,
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
RANK_GEMM = RESULTS / "rank_gemm_h200.json"

#: Initial values of the fitted parameters (seconds, bytes/s, FLOP/s or dimensionless) and
#: their bounds (low, high): physical ranges, so that the fit cannot trade one part for another
#: beyond what the hardware allows.
INITIAL = {
    "launch_s": (3e-5, 5e-6, 1e-4), "barrier_launch_s": (2e-5, 1e-6, 1e-4), "stream_s": (1e-5, 1e-7, 1e-4), "ce_call_s": (3e-5, 1e-6, 2e-4),
    "barrier_s": (1e-5, 1e-6, 1e-4), "copy_launch_s": (5e-6, 1e-7, 5e-5),
    "store_stall": (0.3, 0.01, 1.0), "pull_eff": (0.6, 0.05, 1.0), "hbm_eff": (0.8, 0.3, 1.0),
    "hbm_program_bytes_per_s": (2e10, 1e9, 1e11), "fd_partial_s": (1e-5, 1e-7, 1e-4),
    "fd_combine_s": (2e-5, 1e-7, 2e-4), "fd_push_s": (1e-5, 1e-7, 2e-4),
    "cublas_launch_s": (5e-6, 1e-7, 5e-5), "cublas_flops": (7e14, 3e14, 9.894e14),
    "nccl_allgather_launch_s": (2e-5, 1e-6, 2e-4), "nccl_allgather_bytes_per_s": (2.5e11, 5e10, 4.788e11),
    "nccl_reducescatter_launch_s": (2e-5, 1e-6, 2e-4), "nccl_reducescatter_bytes_per_s": (2e11, 5e10, 4.788e11),
    "torch_attn_launch_s": (5e-5, 1e-6, 5e-4), "torch_attn_bytes_per_s": (1.5e12, 1e11, 4.8e12),
    "torch_combine_s": (1e-4, 1e-6, 1e-3),
}
_STEP = {("gemm_all_scatter", "0:gemm mode 0"): ("gemm",), ("gemm_all_scatter", "1:scatter"): ("scatter",),
         ("all_gather_gemm", "0:push"): ("push",), ("all_gather_gemm", "2:gemm"): ("gemm",),
         ("gemm_reduce_scatter", "0:gemm"): ("gemm", "tail"), ("gemm_reduce_scatter", "2:reduce"): ("reduce",),
         ("flash_decode", "0:partial"): ("partial",), ("flash_decode", "2:combine pull"): ("combine",)}


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
    """(what, measured seconds, predict(params) -> seconds) of everything the fit may see: the
    2-GPU rows (each pattern; the bulk_sync steps alone, one launch each, so the host's launch
    cost bounds them too; torch + NCCL, its compute alone and the rest) and one GPU's cuBLAS."""
    obs, seen = [], set()
    for row in rows(2):
        if not row["verified"]:
            continue
        kernel, problem, pattern, meta = row["kernel"], _problem(row), row["pattern"], row["meta"]
        obs.append((f"{kernel}/{row['problem']}/{pattern}", row["time_ms"] * 1e-3,
                    lambda p, k=kernel, pr=problem, pa=pattern, m=meta:
                    overlap_model.predict(k, pr, 2, pa, m, hw, params=p).time_ms * 1e-3,
                    _sigma(row["iqr_ms"], row["time_ms"])))
        if (kernel, row["problem"]) in seen:
            continue
        seen.add((kernel, row["problem"]))
        for step, ms in (row.get("bulk_sync_steps_ms") or {}).items():
            parts = _STEP.get((kernel, step))
            if parts:
                obs.append((f"{kernel}/{row['problem']}/{step} alone", ms * 1e-3,
                            lambda p, k=kernel, pr=problem, m=meta, parts=parts: max(p["launch_s"], sum(
                                overlap_model.predict(k, pr, 2, "bulk_sync", m, hw, params=p).breakdown[x]
                                for x in parts) * 1e-3), 0.05))
        base = lambda p, k=kernel, pr=problem: overlap_model.predict_baseline(k, pr, 2, hw, params=p)
        obs.append((f"{kernel}/{row['problem']}/torch+NCCL", row["baseline_ms"] * 1e-3,
                    lambda p, b=base: b(p).time_ms * 1e-3, _sigma(row["baseline_iqr_ms"], row["baseline_ms"])))
        if row.get("baseline_compute_ms"):
            obs.append((f"{kernel}/{row['problem']}/torch compute", row["baseline_compute_ms"] * 1e-3,
                        lambda p, b=base: b(p).compute_ms * 1e-3, 0.05))
            obs.append((f"{kernel}/{row['problem']}/NCCL (the rest)",
                        (row["baseline_ms"] - row["baseline_compute_ms"]) * 1e-3,
                        lambda p, b=base: b(p).comm_ms * 1e-3, 0.05))
    for r in json.loads(RANK_GEMM.read_text())["rows"]:
        if r["impl"] == "cublas" and r["world_size"] == 2:   # one GPU; the W = 2 shapes only
            obs.append((f"cuBLAS {r['M']}x{r['N']}x{r['K']} (1 GPU)", r["median_ms"] * 1e-3,
                        lambda p, m=r["M"], n=r["N"], k=r["K"]: overlap_model.cublas_s(m, n, k, p),
                        _sigma(r["iqr_ms"], r["median_ms"])))
    return obs


def fit() -> dict:
    """Least squares on log times over the 2-GPU observations; writes the parameter file."""
    from scipy.optimize import least_squares
    hw = hwspecs.load_spec("h200")
    obs = _observations(hw)
    names = list(INITIAL)
    lows, highs = (np.log([INITIAL[n][i] for n in names]) for i in (1, 2))

    def residuals(x):
        p = dict(zip(names, np.exp(x)))
        return np.array([(math.log(max(f(p), 1e-9)) - math.log(t)) / sigma for _, t, f, sigma in obs])

    best = None
    for start in (np.log([INITIAL[n][0] for n in names]), (lows + highs) / 2):
        result = least_squares(residuals, start, bounds=(lows, highs), method="trf", diff_step=1e-3)
        if best is None or result.cost < best.cost:
            best = result
    params = dict(zip(names, (float(v) for v in np.exp(best.x))))
    p = dict(zip(names, np.exp(best.x)))
    errors = np.array([abs(f(p) / t - 1) for _, t, f, _ in obs])
    params["_source"] = (f"fitted {datetime.date.today()} by `python -m swizzleperf.eval.validate_overlap_model "
                         f"fit` on eval/results/dist_h200_2gpu.json and one H200's cuBLAS times at the 2-GPU "
                         f"per-rank shapes (eval/results/rank_gemm_h200.json): {len(obs)} observations, "
                         f"median fit error {np.median(errors):.1%}")
    overlap_model.PARAMS_PATH.write_text(json.dumps(params, indent=1) + "\n")
    overlap_model.load_params.cache_clear()
    return params


def _sigma(iqr_ms: float, ms: float) -> float:
    """A measurement's relative spread (IQR / 1.35, a normal's sigma), at least 3 %: the weight
    of its residual is 1 / this, so that a noisy sample (bulk_sync at iris-4096: IQR 2.5 ms on
    0.16) does not pull the fit as a steady one does."""
    return max(0.03, iqr_ms / ms / 1.35)


def gemm_fit() -> dict:
    """Per-SM rate of each tile configuration, the fixed cost per tile and the last-wave exponent,
    on one H200's per-rank GEMMs (all W, all SM counts): the values of hwspecs/h200.yaml."""
    from scipy.optimize import least_squares
    data = [r for r in json.loads(RANK_GEMM.read_text())["rows"] if r["impl"] == "triton" and "median_ms" in r]
    keys = sorted({_tile_key(r["meta"]) for r in data})

    def residuals(x):
        exponent, fixed = x[0], math.exp(x[1])
        rates = dict(zip(keys, np.exp(x[2:])))
        out = []
        for r in data:
            m = r["meta"]
            full, rest = divmod(r["tiles"], r["programs"])
            waves = full + ((rest / r["programs"]) ** exponent if rest else 0)
            tile = fixed + 2 * m["BLOCK_M"] * m["BLOCK_N"] * r["K"] / rates[_tile_key(m)]
            out.append(math.log(waves * tile / (r["median_ms"] * 1e-3)))
        return out

    result = least_squares(residuals, [0.5, math.log(3e-6)] + [math.log(5e12)] * len(keys))
    errors = np.abs(np.exp(result.fun) - 1)
    return {"matmul_tile_rates": [f"{k}={math.exp(v):.3e}" for k, v in zip(keys, result.x[2:])],
            "matmul_tile_fixed_s": float(math.exp(result.x[1])),
            "matmul_last_wave_exp": float(result.x[0]), "rows": len(data),
            "median_error": float(np.median(errors)), "p90_error": float(np.percentile(errors, 90))}


def _tile_key(m: dict) -> str:
    return f"{m['BLOCK_M']}x{m['BLOCK_N']}x{m['BLOCK_K']}:{m['num_warps']}:{m['num_stages']}"


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
    gemm = gemm_fit()
    out = ["# The overlap model against measured runs (H200)", "",
           "Commands (repository root, no GPU; the first was run once on a lent nvidia-h200):", "", "```",
           "python3 eval/gpu_rank_gemm.py --out rank_gemm_h200.json          # one H200, 2026-11-23",
           "python -m swizzleperf.eval.validate_overlap_model gemm       # tile rates -> hwspecs/h200.yaml",
           "python -m swizzleperf.eval.validate_overlap_model fit        # profiling/overlap_params.json",
           "python -m swizzleperf.eval.validate_overlap_model validate   # this page", "```", "",
           f"Parameters: {params['_source']}.", "",
           f"The per-rank GEMM (hwspecs/h200.yaml `matmul_tile_*`): {gemm['rows']} single-GPU runs of the "
           f"distributed kernels' persistent GEMM (5 tile configurations, the per-rank shapes of every bench "
           f"problem at W = 2, 4, 8, and 84-132 programs) fit waves x (fixed + FLOPs / per-SM rate) with "
           f"{gemm['median_error']:.1%} median error ({gemm['p90_error']:.1%} at the 90th percentile).", "",
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
            "each case, the pick within 5 % of the measured best in >= 85 % of the cases. Read "
            "per case, Spearman >= 0.8 holds in the share of cases in its column (the median case "
            "is at the figure beside it).", "",
            "## How it prices a launch", "",
            "The later of two clocks: the GPU's schedule of the pattern (GEMM waves at the measured "
            "per-SM tile rate on the SMs the pattern gives it; SM copies at the measured Triton put "
            "curve 387 GB/s x P / (P + 11.2) on the programs that copy; copy-engine copies at 392 GB/s; "
            "a GEMM that stores its tiles to peers hides one wave's stores behind the next wave's "
            "compute; a GEMM that waits for gathered rows takes them as they arrive; the reduce and "
            "decode at a fitted share of HBM), and the host's enqueue cost (a fitted cost per kernel "
            "launch, barrier, second-stream launch and copy-engine copy): one launch of a bundled "
            "kernel costs the host ~73 us, which bounds the small problems and the copy-engine "
            "pattern's (W - 1) x CE_GROUPS copies.", "",
            "## Where it misses, and why", "",
            "- **The SM scatter slows down with the number of peers, which 2 GPUs cannot show.** The "
            "scatter alone moves 320-340 GB/s per rank at W = 2, 250-270 at W = 4 and 220 at W = 8 "
            "(eval/results/dist_h200.md), while the one-to-one Triton put the model uses is 357 GB/s "
            "at every W. So every pattern that copies with all SMs (bulk_sync, fused_sequential, the "
            "reduce-scatter's stores) is predicted 10-25 % fast at 8 GPUs, while the 16-SM scatter of "
            "producer_consumer is limited by its programs either way and predicted about right. At "
            "llama70b-qkv-4k on 8 GPUs this turns the pick: fused_sequential predicted 0.345 ms "
            "(measured 0.454), producer_consumer measured best (0.395). The cause of the fan-out "
            "penalty (NVSwitch port contention of every rank writing to every other at once, or the "
            "strided 512-byte rows of a tile) is not established; a peer-copy benchmark with W - 1 "
            "destinations would give the model its rate per W.",
            "- **workgroup_specialized and producer_consumer** run the same GPU schedule in the model "
            "(116 GEMM programs, 16 copying) and differ only in host cost (one launch against two on "
            "two streams). Measured, they tie at 4 GPUs, ws wins at 2 and pc at 8 by up to 8 %: not "
            "explained, so the COMM_SMS sweep's Spearman (pairs of equal predictions) stays below 0.8.",
            "- **Near ties**: many cases have patterns within 2-5 % of each other measured (the "
            "COMM_SMS sweep: 0.295-0.326 ms at llama70b-up-1k), inside the model's error; their "
            "Spearman swings on noise, while the pick stays within 5 % (100 % in the sweep).",
            "- **flash decode at 4 GPUs, batch 1**: bulk_sync measured 0.114 ms, half its 2- and "
            "8-GPU times (0.227, 0.231) and faster than fused_push (0.162 ± 0.033), against every other "
            "case; the model, bounded by the host's four launches there, predicts 0.22. Likely a "
            "faster host on that run; not modelled.",
            "- **gemm_reduce_scatter at llama8b-down-4k, 8 GPUs**: bulk_sync 0.222 vs producer_consumer "
            "0.234 measured; the model has them 0.223 / 0.206 (the stores' fan-out penalty above, and "
            "the reduce programs' share of HBM at 16 SMs).",
            "- **push_copy_engine at 4 and 8 GPUs** is host-bound ((W - 1) x 4 copies, each with a "
            "signal launch: ~41 us each in the fit): predicted 0.61 / 1.27 ms, measured 0.76-0.80 / "
            "1.50-1.57. The cost per copy is fitted where it barely shows (W = 2: four copies behind a "
            "GEMM), so it comes out low; the ranking (it is the slowest but pull) holds.",
            "- **torch + NCCL**: 2-3 % median error at 2 and 4 GPUs, 8 % at 8; flash decode's torch "
            "baseline is under-predicted at 8 GPUs (its gather and torch combine grow with W).",
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
    parser.add_argument("what", choices=("gemm", "fit", "validate"))
    args = parser.parse_args()
    if args.what == "gemm":
        print(json.dumps(gemm_fit(), indent=1))
    elif args.what == "fit":
        params = fit()
        print(params["_source"])
    else:
        for label, s in validate().items():
            print(label, {k: round(v, 3) if isinstance(v, float) else v for k, v in s.items()})


if __name__ == "__main__":
    main()
