"""Fit the overlap model on the 2-GPU H200 measurements, then predict a frozen unseen set.

    python -m bench.validate_overlap_model gemm       # the GEMM tile rates for hwspecs/h200.yaml
    python -m bench.validate_overlap_model fit        # -> profiling/overlap_params.json
    python -m bench.validate_overlap_model validate   # -> bench/results/overlap_model_validation.md

``gemm`` fits the per-SM rate of each GEMM tile configuration, the fixed cost per tile and the
last-wave exponent on one H200's per-rank GEMMs at the 2-GPU shapes only (the W = 2 rows of
bench/results/rank_gemm_h200.json, made by ``python3 -m bench.gpu_rank_gemm``); they go into
hwspecs/h200.yaml by hand, with that source (``validate`` refuses a yaml that differs from it).
``--rank-gemm FILE`` fits another device's file of the same rows.

``fit`` uses only bench/results/dist_h200_2gpu.json (H200, 2026-11-22: every kernel, problem and
pattern's time, the bulk_sync steps timed alone, torch + NCCL and its matmul alone) and the
single-GPU cuBLAS times at the 2-GPU per-rank shapes; least squares on log times (relative
errors), every parameter positive. It also stores the prediction interval's half-width (the 90th
percentile of leave-one-problem-out errors on the same 2-GPU rows: GEMM constants and parameters
refitted without the problem, then the problem predicted) and the measured domain (the hardware,
world sizes, per-rank shapes and knob values of every committed H200 bench row; their sizes only,
not their times) that decides ``extrapolated``.

``validate`` predicts the frozen unseen set, which no fit, test or change of the model may use:
the 4- and 8-GPU H200 rows and the COMM_SMS sweep at 4 GPUs (``UNSEEN``; checked by hash), and
the two-H100 bench of 2026-11-25 (other hardware). It reports per (kernel, problem, W) the error
of each pattern, the Spearman rank correlation across patterns, whether the model's pick is
within 5 % of the measured best, whether the model calls ours against torch + NCCL right, the
interval's coverage and every prediction below the measured communication or GEMM alone, each
percentage with the count behind it.
"""
from __future__ import annotations

import argparse
import dataclasses
import datetime
import hashlib
import json
import math
from pathlib import Path

import numpy as np

from swizzleperf import hwspecs
from swizzleperf.profiling import overlap_model

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
OUT_MD = RESULTS / "overlap_model_validation.md"
RANK_GEMM = RESULTS / "rank_gemm_h200.json"
H100_2GPU = RESULTS / "dist_h100_2gpu_20261125.json"
FIT_HARDWARE = "h200"
FIT_WORLD_SIZE = 2
INTERVAL_QUANTILE = 90

#: The frozen unseen set: every file and its sha256 as of 2026-11-25. No fit, test or change of the
#: model may use these rows' times; ``validate`` refuses to report if one changed. (The 4- and
#: 8-GPU rows were held out of every fit, but the 2026-11-23 rebuild of the model was made after
#: reading their misses; the H100 rows were never looked at before this page.)
UNSEEN = {
    "dist_h200_4gpu.json": "e848698fc6c65b86658dbacc40bf2c04257858c39657c71de715e70fe39fc965",
    "dist_h200_8gpu.json": "7b9db02c904f4f7f9fd72b453e0b7371c68d531e5ad4eee56cb7af90e8df9085",
    "dist_h200_4gpu_comm_sms/cs8.json": "0012448504f5c948cd9449b40e7f3c0e7546568ca2571d54abec4c3285ce8113",
    "dist_h200_4gpu_comm_sms/cs24.json": "ac8c1c7429e6c79466253df53f4a168f5d311450a7380a711e5e1d1ae2f04eca",
    "dist_h200_4gpu_comm_sms/cs32.json": "41ef1db92aa6b8ca5ebf94b74f078bb55d4c0cc8754296a1f5fcf502921199e2",
    "dist_h200_4gpu_comm_sms/cs48.json": "3fd03cff22c8ba2a066f97671f8b1b5f0d462f78ea9cf9363b092a442b2fbc87",
    "dist_h100_2gpu_20261125.json": "061af7fb8d32519fd05f03e14cbd95541cdacfeb698927b3e4d141abcfd13844",
}

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
#: The bulk_sync steps timed alone that are the communication alone / the GEMM alone.
_COMM_STEP = {"gemm_all_scatter": "1:scatter", "all_gather_gemm": "0:push"}
_GEMM_STEP = {"gemm_all_scatter": "0:gemm mode 0", "all_gather_gemm": "2:gemm", "gemm_reduce_scatter": "0:gemm"}


# ------------------------------------------------------------------------------ the data
def rows(world_size: int) -> list:
    """The H200 bench rows at ``world_size`` (2: the fit's; 4 and 8: the frozen unseen set)."""
    if world_size != FIT_WORLD_SIZE:
        check_frozen()
    return json.loads((RESULTS / f"dist_h200_{world_size}gpu.json").read_text())["rows"]


def sweep_rows() -> list:
    check_frozen()
    out = []
    for path in sorted((RESULTS / "dist_h200_4gpu_comm_sms").glob("*.json")):
        out += json.loads(path.read_text())["rows"]
    return out


def check_frozen() -> None:
    """Raises ValueError where a file of the frozen unseen set differs from its committed hash."""
    for name, digest in UNSEEN.items():
        found = hashlib.sha256((RESULTS / name).read_bytes()).hexdigest()
        if digest is not None and found != digest:
            raise ValueError(f"the frozen unseen set changed: bench/results/{name} has sha256 {found[:12]}..., "
                             f"expected {digest[:12]}... (add new measurements as a new file, not to these)")


def _meta(row: dict) -> dict:
    """A bench row's knobs as it ran them: the knobs the kernels gained later (the persistent GEMM's
    STREAM_K, WARP_SPECIALIZE, EPILOGUE_SUBTILE...) did not exist then, so they are off, not the
    kernel's default of today."""
    defaults = overlap_model._default_meta(row["kernel"])
    return {**{k: 0 for k in defaults if k not in overlap_model.MODEL_KNOBS}, **row["meta"]}


def _problem(row: dict) -> dict:
    return {k: row[k] for k in ("M", "N", "K", "B", "H", "H_kv", "D", "S") if k in row}


def _group(row: dict) -> tuple:
    return (row["kernel"], row["problem"])


# ------------------------------------------------------------------------------ the GEMM
def gemm_fit(path: Path = RANK_GEMM, world_sizes: tuple = (FIT_WORLD_SIZE,), exclude: frozenset = frozenset()) -> dict:
    """Per-SM rate of each tile configuration, the fixed cost per tile and the last-wave exponent,
    on one GPU's per-rank GEMMs at the shapes of ``world_sizes`` (all SM counts), leaving out the
    (kernel, problem) pairs in ``exclude``: the values of hwspecs/<gpu>.yaml."""
    from scipy.optimize import least_squares
    data = [r for r in json.loads(Path(path).read_text())["rows"]
            if r["impl"] == "triton" and "median_ms" in r and r["world_size"] in world_sizes
            and (r["kernel"], r["problem"]) not in exclude]
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
            "matmul_tile_fixed_s": float(f"{math.exp(result.x[1]):.3g}"),
            "matmul_last_wave_exp": float(f"{result.x[0]:.3g}"), "rows": len(data),
            "shapes": len({(r["M"], r["N"], r["K"]) for r in data}),
            "median_error": float(np.median(errors)), "p90_error": float(np.percentile(errors, 90))}


def with_gemm(hw, gemm: dict):
    """``hw`` with the GEMM constants of a ``gemm_fit`` result."""
    return dataclasses.replace(hw, matmul_tile_rates=tuple(gemm["matmul_tile_rates"]),
                               matmul_tile_fixed_s=gemm["matmul_tile_fixed_s"],
                               matmul_last_wave_exp=gemm["matmul_last_wave_exp"])


def check_gemm_constants(hw, gemm: dict) -> None:
    """Raises ValueError where the spec's GEMM constants are not those of the fit on the 2-GPU
    shapes (the yaml must not carry constants fitted on the unseen shapes)."""
    ours = {k.split("=")[0]: float(k.split("=")[1]) for k in hw.matmul_tile_rates}
    fitted = {k.split("=")[0]: float(k.split("=")[1]) for k in gemm["matmul_tile_rates"]}
    same = ours.keys() == fitted.keys() and all(math.isclose(ours[k], fitted[k], rel_tol=2e-3) for k in ours)
    same = same and math.isclose(hw.matmul_tile_fixed_s, gemm["matmul_tile_fixed_s"], rel_tol=1e-2)
    same = same and math.isclose(hw.matmul_last_wave_exp, gemm["matmul_last_wave_exp"], rel_tol=1e-2)
    if not same:
        raise ValueError(f"hwspecs/{hw.name}.yaml's matmul_tile_* must be the fit on the {FIT_WORLD_SIZE}-GPU "
                         f"shapes (python -m bench.validate_overlap_model gemm), got {ours}, "
                         f"{hw.matmul_tile_fixed_s}, {hw.matmul_last_wave_exp}; the fit gives {gemm}")


def _tile_key(m: dict) -> str:
    return f"{m['BLOCK_M']}x{m['BLOCK_N']}x{m['BLOCK_K']}:{m['num_warps']}:{m['num_stages']}"


# ------------------------------------------------------------------------------ the fit
def _observations(hw, exclude: frozenset = frozenset()) -> list:
    """(what, measured seconds, predict(params) -> seconds, sigma) of everything the fit may see:
    the 2-GPU rows (each pattern; the bulk_sync steps alone, one launch each, so the host's launch
    cost bounds them too; torch + NCCL, its compute alone and the rest) and one GPU's cuBLAS at
    the 2-GPU per-rank shapes, leaving out the (kernel, problem) pairs in ``exclude``."""
    obs, seen = [], set()
    for row in rows(FIT_WORLD_SIZE):
        if not row["verified"] or _group(row) in exclude:
            continue
        kernel, problem, pattern, meta = row["kernel"], _problem(row), row["pattern"], _meta(row)
        obs.append((f"{kernel}/{row['problem']}/{pattern}", row["time_ms"] * 1e-3,
                    lambda p, k=kernel, pr=problem, pa=pattern, m=meta:
                    overlap_model.predict(k, pr, 2, pa, m, hw, params=p).time_ms * 1e-3,
                    _sigma(row["iqr_ms"], row["time_ms"])))
        if _group(row) in seen:
            continue
        seen.add(_group(row))
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
        if r["impl"] == "cublas" and r["world_size"] == FIT_WORLD_SIZE and (r["kernel"], r["problem"]) not in exclude:
            obs.append((f"cuBLAS {r['M']}x{r['N']}x{r['K']} (1 GPU)", r["median_ms"] * 1e-3,
                        lambda p, m=r["M"], n=r["N"], k=r["K"]: overlap_model.cublas_s(m, n, k, p),
                        _sigma(r["iqr_ms"], r["median_ms"])))
    return obs


def _fit_params(obs: list) -> tuple:
    """Least squares on log times (bounded, two starts): (params, median fit error)."""
    from scipy.optimize import least_squares
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
    errors = np.array([abs(f(params) / t - 1) for _, t, f, _ in obs])
    return params, float(np.median(errors))


def fit() -> dict:
    """The parameters, their leave-one-problem-out interval and the measured domain; writes the
    parameter file. Raises ValueError where hwspecs/h200.yaml's GEMM constants are not the
    2-GPU fit's."""
    gemm = gemm_fit()
    hw = hwspecs.load_spec(FIT_HARDWARE)
    check_gemm_constants(hw, gemm)
    obs = _observations(hw)
    params, error = _fit_params(obs)
    errors = cross_validate(hw)
    kernel_q = float(np.percentile([abs(e) for e in errors["kernel"]], INTERVAL_QUANTILE))
    baseline_q = float(np.percentile([abs(e) for e in errors["baseline"]], INTERVAL_QUANTILE))
    params["_source"] = (f"fitted {datetime.date.today()} by `python -m bench.validate_overlap_model "
                         f"fit` on bench/results/dist_h200_2gpu.json and one H200's cuBLAS times at the 2-GPU "
                         f"per-rank shapes (bench/results/rank_gemm_h200.json), the GEMM constants of "
                         f"hwspecs/h200.yaml fitted on the 2-GPU shapes only: {len(obs)} observations, "
                         f"median fit error {error:.1%}")
    params["_interval"] = {
        "kernel": kernel_q, "baseline": baseline_q,
        "source": (f"the {INTERVAL_QUANTILE}th percentile of |log(predicted / measured)| when each of the "
                   f"{len(errors['groups'])} 2-GPU (kernel, problem) pairs is left out of the GEMM fit and the "
                   f"parameter fit and then predicted: {len(errors['kernel'])} pattern rows, "
                   f"{len(errors['baseline'])} torch + NCCL rows; doubled where extrapolated (a rule, not "
                   f"calibrated)")}
    params["_domain"] = measured_domain()
    overlap_model.PARAMS_PATH.write_text(json.dumps(params, indent=1) + "\n")
    overlap_model.load_params.cache_clear()
    return params


def cross_validate(hw) -> dict:
    """Leave one 2-GPU (kernel, problem) out of the GEMM fit and the parameter fit, predict it:
    ``{"kernel": [log errors of its patterns], "baseline": [...], "groups": [...]}``."""
    data = [r for r in rows(FIT_WORLD_SIZE) if r["verified"]]
    groups = list(dict.fromkeys(_group(r) for r in data))
    out = {"kernel": [], "baseline": [], "groups": groups}
    for group in groups:
        held = frozenset({group})
        hw_g = with_gemm(hw, gemm_fit(exclude=held))
        params, _ = _fit_params(_observations(hw_g, exclude=held))
        for r in (r for r in data if _group(r) == group):
            t = overlap_model.predict(r["kernel"], _problem(r), 2, r["pattern"], _meta(r), hw_g, params=params)
            out["kernel"].append(math.log(t.time_ms / r["time_ms"]))
        first = next(r for r in data if _group(r) == group)
        base = overlap_model.predict_baseline(first["kernel"], _problem(first), 2, hw_g, params=params)
        out["baseline"].append(math.log(base.time_ms / first["baseline_ms"]))
    return out


def measured_domain() -> dict:
    """What was measured on the fitted hardware: the world sizes, per kernel the range of each
    per-rank ``extent`` and the values of each knob over every committed H200 bench row (sizes
    and knobs only), and the GEMM tile configurations timed on one H200."""
    data = [(w, r) for w in (2, 4, 8) for r in rows(w)] + [(4, r) for r in sweep_rows()]
    tiles = sorted({_tile_key(r["meta"]) for r in json.loads(RANK_GEMM.read_text())["rows"] if r["impl"] == "triton"})
    kernels: dict = {}
    for w, r in data:
        entry = kernels.setdefault(r["kernel"], {"knobs": {}})
        for name, value in overlap_model.extent(r["kernel"], _problem(r), w).items():
            lo, hi = entry.get(name, (value, value))
            entry[name] = [min(lo, value), max(hi, value)]
        for name, value in overlap_model.knobs(r["kernel"], r["pattern"], _meta(r)).items():
            if name == "tile":
                entry["knobs"]["tile"] = tiles
            else:
                lo, hi = entry["knobs"].get(name, (value, value))
                entry["knobs"][name] = [min(lo, value), max(hi, value)]
    pooled = [entry["knobs"]["COMM_SMS"] for entry in kernels.values() if "COMM_SMS" in entry["knobs"]]
    for entry in kernels.values():      # the SM split is one thing in every kernel: the GEMM on the
        if "COMM_SMS" in entry["knobs"]:   # rest (timed alone at 84-132), copies on these (swept)
            entry["knobs"]["COMM_SMS"] = [min(lo for lo, _ in pooled), max(hi for _, hi in pooled)]
    sizes = sorted({w for w, _ in data})
    return {"hardware": FIT_HARDWARE, "world_size": [sizes[0], sizes[-1]], "kernels": kernels,
            "source": "the sizes and knobs (not the times) of bench/results/dist_h200_{2,4,8}gpu.json and "
                      "dist_h200_4gpu_comm_sms/, and the tile configurations of rank_gemm_h200.json"}


def _sigma(iqr_ms: float, ms: float) -> float:
    """A measurement's relative spread (IQR / 1.35, a normal's sigma), at least 3 %: the weight
    of its residual is 1 / this, so that a noisy sample (bulk_sync at iris-4096: IQR 2.5 ms on
    0.16) does not pull the fit as a steady one does."""
    return max(0.03, iqr_ms / ms / 1.35)


# ------------------------------------------------------------------------------ validation
def spearman(a: list, b: list) -> float:
    """Spearman's rank correlation of two lists (scipy's: tied values share their average rank, as
    the two patterns the model prices alike do), rounded to 9 digits so that an exact 0.8 is not
    0.7999999999999999; NaN for fewer than two items or a constant list."""
    from scipy.stats import spearmanr
    if len(a) < 2 or len(set(a)) < 2 or len(set(b)) < 2:
        return float("nan")
    return round(float(spearmanr(a, b).statistic), 9)


def _case(label: str, world_size: int, group: list, hw, sweep: bool = False) -> dict:
    """One (kernel, problem, W) of H200 bench rows: every pattern measured and predicted."""
    kernel, problem = group[0]["kernel"], group[0]["problem"]
    measured = [r["time_ms"] for r in group]
    preds = [overlap_model.predict(kernel, _problem(r), world_size, r["pattern"], _meta(r), hw) for r in group]
    predicted = [p.time_ms for p in preds]
    pick = int(np.argmin(predicted))
    base = overlap_model.predict_baseline(kernel, _problem(group[0]), world_size, hw)
    base_m = group[0]["baseline_ms"]
    steps = group[0].get("bulk_sync_steps_ms") or {}
    alone = [steps[s] for s in (_COMM_STEP.get(kernel), _GEMM_STEP.get(kernel)) if s in steps]
    names = [r["pattern"] + (f" COMM_SMS={r['meta']['COMM_SMS']}" if sweep else "") for r in group]
    return {"set": label, "kernel": kernel, "problem": problem, "W": world_size,
            "errors": [abs(p / m - 1) for p, m in zip(predicted, measured)],
            "covered": [p.interval_ms[0] <= m <= p.interval_ms[1] for p, m in zip(preds, measured)],
            "below_alone": [p < max(alone) for p in predicted] if alone else [],
            "extrapolated": [p.extrapolated for p in preds],
            "spearman": spearman(measured, predicted), "top1": measured[pick] <= 1.05 * min(measured),
            "versus_torch": (min(measured) < base_m) == (predicted[pick] < base.time_ms),
            "baseline_error": abs(base.time_ms / base_m - 1),
            "baseline_covered": base.interval_ms[0] <= base_m <= base.interval_ms[1],
            "rows": list(zip(names, measured, predicted, [p.interval_ms for p in preds])),
            "pick": names[pick], "best": names[int(np.argmin(measured))], "baseline": (base_m, base.time_ms),
            "alone": max(alone) if alone else None}


def h200_cases(hw) -> list:
    cases = []
    for label, world_size, data, sweep in (("4 GPUs", 4, rows(4), False), ("8 GPUs", 8, rows(8), False),
                                           ("4 GPUs, COMM_SMS sweep", 4, sweep_rows(), True),
                                           ("2 GPUs (fitted on)", 2, rows(2), False)):
        groups: dict = {}
        for row in data:
            if row["verified"]:
                groups.setdefault(_group(row), []).append(row)
        cases += [_case(label, world_size, g, hw, sweep) for g in groups.values()]
    return cases


def h100_cases() -> list:
    """The two-H100 bench (2026-11-25): per problem, the measured best pattern (its name not
    recorded) against the model's best over the bench's patterns at the bench's knobs (those of
    the same bench on H200s), and torch + NCCL; pull where it was measured."""
    check_frozen()
    data = json.loads(H100_2GPU.read_text())
    hw = hwspecs.load_spec(data["hwspec"])
    w = data["world_size"]
    bench = rows(FIT_WORLD_SIZE)    # the same bench's patterns and default knobs, on H200s
    metas = {_group(r): _meta(r) for r in bench}
    cases = []
    for r in data["rows"]:
        patterns = list(dict.fromkeys(b["pattern"] for b in bench if _group(b) == _group(r)))
        preds = {pa: overlap_model.predict(r["kernel"], _problem(r), w, pa, metas[_group(r)], hw) for pa in patterns}
        pick = min(preds, key=lambda pa: preds[pa].time_ms)
        best = preds[pick]
        base = overlap_model.predict_baseline(r["kernel"], _problem(r), w, hw)
        cases.append({"set": "2 H100s (other hardware)", "kernel": r["kernel"], "problem": r["problem"], "W": w,
                      "best_ms": r["best_pattern_ms"], "pick": pick, "pick_ms": best.time_ms,
                      "pick_interval": best.interval_ms, "why": best.extrapolated_why,
                      "error": abs(best.time_ms / r["best_pattern_ms"] - 1),
                      "covered": best.interval_ms[0] <= r["best_pattern_ms"] <= best.interval_ms[1],
                      "baseline": (r["baseline_ms"], base.time_ms), "baseline_interval": base.interval_ms,
                      "baseline_error": abs(base.time_ms / r["baseline_ms"] - 1),
                      "baseline_covered": base.interval_ms[0] <= r["baseline_ms"] <= base.interval_ms[1],
                      "versus_torch": (r["best_pattern_ms"] < r["baseline_ms"]) == (best.time_ms < base.time_ms),
                      "extrapolated": best.extrapolated})
    for r in data["patterns"]:
        p = overlap_model.predict(r["kernel"], _problem(r), w, r["pattern"], metas[_group(r)], hw)
        cases.append({"set": "2 H100s, one pattern", "kernel": r["kernel"], "problem": r["problem"], "W": w,
                      "pattern": r["pattern"], "measured": r["time_ms"], "predicted": p.time_ms,
                      "interval": p.interval_ms, "error": abs(p.time_ms / r["time_ms"] - 1),
                      "covered": p.interval_ms[0] <= r["time_ms"] <= p.interval_ms[1]})
    return cases


def validate() -> dict:
    """Predict every set; write the page; return the summary per set."""
    hw = hwspecs.load_spec(FIT_HARDWARE)
    check_gemm_constants(hw, gemm_fit())
    cases = h200_cases(hw)
    labels = ("4 GPUs", "8 GPUs", "4 GPUs, COMM_SMS sweep", "2 GPUs (fitted on)")
    summary = {label: summarise([c for c in cases if c["set"] == label]) for label in labels}
    summary["unseen H200 (4 and 8 GPUs, sweep)"] = summarise([c for c in cases if "fitted" not in c["set"]])
    h100 = h100_cases()
    OUT_MD.write_text(_markdown(cases, summary, h100, summarise_h100(h100)))
    return summary


def _count(flags: list) -> dict:
    flags = list(flags)
    return {"n": sum(bool(f) for f in flags), "of": len(flags)}


def summarise(cases: list) -> dict:
    """Medians and counts over cases (``{"n", "of"}`` for every share)."""
    errors = [e for c in cases for e in c["errors"]]
    spear = [c["spearman"] for c in cases if not math.isnan(c["spearman"])]
    return {"cases": len(cases), "patterns": len(errors), "median_error": float(np.median(errors)),
            "spearman_median": float(np.median(spear)) if spear else float("nan"),
            "spearman_ge_0.8": _count(s >= 0.8 for s in spear),
            "two_patterns": sum(len(c["errors"]) == 2 for c in cases),
            "top1_within_5pct": _count(c["top1"] for c in cases),
            "versus_torch": _count(c["versus_torch"] for c in cases),
            "covered": _count(f for c in cases for f in c["covered"]),
            "below_alone": _count(f for c in cases for f in c["below_alone"]),
            "extrapolated": _count(f for c in cases for f in c["extrapolated"]),
            "baseline_median_error": float(np.median([c["baseline_error"] for c in cases])),
            "baseline_covered": _count(c["baseline_covered"] for c in cases)}


def summarise_h100(cases: list) -> dict:
    best = [c for c in cases if "pick" in c]
    return {"cases": len(best), "median_error": float(np.median([c["error"] for c in best])),
            "covered": _count(c["covered"] for c in best),
            "versus_torch": _count(c["versus_torch"] for c in best),
            "baseline_median_error": float(np.median([c["baseline_error"] for c in best])),
            "baseline_covered": _count(c["baseline_covered"] for c in best),
            "extrapolated": _count(c["extrapolated"] for c in best)}


def share(count: dict) -> str:
    """``"21 of 29 (72 %)"``."""
    if not count["of"]:
        return "none of 0"
    return f"{count['n']} of {count['of']} ({count['n'] / count['of']:.0%})".replace("%)", " %)")


# ------------------------------------------------------------------------------ the page
_SUMMARY_HEAD = ("| set | cases (with 2 patterns) | patterns | median abs. time error | Spearman (median) | "
                 "cases with Spearman >= 0.8 | pick within 5 % of the best | ours vs torch + NCCL called right | "
                 "measured inside the interval | predicted below the measured comm. or GEMM alone | "
                 "torch + NCCL median error | torch + NCCL inside its interval |")


def _markdown(cases: list, summary: dict, h100: list, h100_summary: dict) -> str:
    params = overlap_model.load_params()
    gemm = gemm_fit()
    out = ["# The overlap model against measured runs (H200; two H100s)", "",
           "Commands (repository root, no GPU; the first was run once on a lent nvidia-h200):", "", "```",
           "git worktree add /tmp/at-e87559a e87559a    # the kernels and script as they were (since rewritten)",
           "cd /tmp/at-e87559a && pip install -e . && python3 -m bench.gpu_rank_gemm --out rank_gemm_h200.json",
           "                                             # one H200, 2026-11-23; then, back in this checkout:",
           "python -m bench.validate_overlap_model gemm       # tile rates -> hwspecs/h200.yaml",
           "python -m bench.validate_overlap_model fit        # profiling/overlap_params.json",
           "python -m bench.validate_overlap_model validate   # this page", "```", "",
           f"Parameters: {params['_source']}.", "",
           f"The per-rank GEMM (hwspecs/h200.yaml `matmul_tile_*`): {gemm['rows']} single-GPU runs of the "
           f"distributed kernels' persistent GEMM at the {gemm['shapes']} per-rank shapes of the 2-GPU bench "
           f"problems (5 tile configurations, 84-132 programs) fit waves x (fixed + FLOPs / per-SM rate) with "
           f"{gemm['median_error']:.1%} median error ({gemm['p90_error']:.1%} at the 90th percentile). The 4- "
           f"and 8-GPU per-rank shapes of the same file are not in this fit (until 2026-11-25 they were: the "
           f"figures published before then are withdrawn). The distributed kernels' GEMM has since been "
           f"replaced by a tuned persistent TMA kernel (new knobs STREAM_K, WARP_SPECIALIZE, EPILOGUE_SUBTILE; "
           f"4 stages by default): the constants describe the kernel these rows measured, a prediction for "
           f"a configuration of the new kernel says it is extrapolated, and `predict(..., measured_gemm=True)` "
           f"scales the GEMM to bench/results/rank_gemm_hopper.json where that H100 measured the shape. Every "
           f"figure on this page is for the kernels as they were measured (the later knobs off).", "",
           f"Interval: {params['_interval']['source']}: q = {params['_interval']['kernel']:.3f} for our "
           f"kernels (x {math.exp(params['_interval']['kernel']):.2f} either way), "
           f"{params['_interval']['baseline']:.3f} for torch + NCCL. Lower bound: the communication alone at "
           f"the fastest peer copy the spec gives, or the GEMM alone on every SM, whichever is longer.", "",
           "Measured: CUDA events, slowest rank, median of 10 samples (bench/results/dist_h200.md; the H100 "
           "figures as shared/HARDWARE.md quotes them, bench/results/dist_h100_2gpu_20261125.json). Predicted: "
           "profiling/overlap_model.py with hwspecs/<gpu>.yaml (`simulated:<gpu>xW`).", "",
           "**The frozen unseen set** (`UNSEEN` in bench/validate_overlap_model.py, checked by sha256 before "
           "every use): the 4- and 8-GPU H200 rows, the COMM_SMS sweep at 4 GPUs and the two-H100 bench. "
           "No fit, test or change of the model uses their times. The 4- and 8-GPU rows were never fitted on, "
           "but the model's rebuild of 2026-11-23 (commit e87559a) was made after reading their misses, so "
           "they are not a clean test of that rebuild; the H100 rows had not been compared with the model "
           "before this page.", "",
           "## Summary (H200)", "", _SUMMARY_HEAD, "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for label, s in summary.items():
        out.append(f"| {label} | {s['cases']} ({s['two_patterns']}) | {s['patterns']} | {s['median_error']:.1%} | "
                   f"{s['spearman_median']:.2f} | {share(s['spearman_ge_0.8'])} | {share(s['top1_within_5pct'])} | "
                   f"{share(s['versus_torch'])} | {share(s['covered'])} | {share(s['below_alone'])} | "
                   f"{s['baseline_median_error']:.1%} | {share(s['baseline_covered'])} |")
    out += ["", "Targets (issue #13): median error <= 15 %, Spearman >= 0.8 across the patterns of each "
            "case, the pick within 5 % of the measured best in >= 85 % of the cases. A case is one "
            "(kernel, problem, W); its patterns are the rows Spearman ranks (a case of two patterns has "
            "Spearman +1 or -1 only). \"Ours vs torch + NCCL called right\": the model's pick is predicted "
            "faster than torch + NCCL exactly where the measured best is measured faster. \"Below the "
            "measured alone\": a pattern predicted faster than the bulk_sync step that does only its "
            "communication (the scatter, the push) or only its GEMM, timed alone in the same run; counted "
            "over the patterns of the cases that have those steps.", ""]
    out += _h100_section(h100, h100_summary)
    out += ["", "## How it prices a launch", "", _PRICING, "", "## Where it misses, and why", ""]
    out += _MISSES
    out += ["", "## Every case", "", "| set | kernel | problem | pattern: measured / predicted [interval] ms | "
            "Spearman | pick | measured best | torch + NCCL measured / predicted |", "|---|---|---|---|---|---|---|---|"]
    for c in cases:
        pats = "; ".join(f"{n}: {m:.3f} / {p:.3f} [{i[0]:.3f}, {i[1]:.3f}]" for n, m, p, i in c["rows"])
        sp = "n/a" if math.isnan(c["spearman"]) else f"{c['spearman']:.2f}"
        out.append(f"| {c['set']} | {c['kernel']} | {c['problem']} | {pats} | {sp} | {c['pick']}"
                   f"{'' if c['top1'] else ' (miss)'} | {c['best']} | {c['baseline'][0]:.3f} / {c['baseline'][1]:.3f} |")
    return "\n".join(out) + "\n"


def _h100_section(cases: list, s: dict) -> list:
    best = [c for c in cases if "pick" in c]
    out = ["## Two H100s (2026-11-25): hardware the model was not fitted on", "",
           "hwspecs/h100.yaml carries the H200's GEMM constants and the H200's interconnect figures scaled "
           "by the link ratio; the host, NCCL and cuBLAS parameters are the H200 fit's. Every prediction "
           "here is therefore flagged extrapolated (" + share(s["extrapolated"]) + " problems), with the "
           "doubled interval.", "",
           "What these figures cover: at W = 2, three all_gather_gemm and three gemm_reduce_scatter problems: "
           "the time of our best pattern against the model's best over the kernel's patterns (default meta), "
           "and torch + NCCL; pull at one problem. What they do not cover: which pattern won (not recorded, "
           "so no pick or Spearman figure), the other patterns, gemm_all_scatter and flash_decode, W > 2 on "
           "H100s, any spread (a single median each), and the GEMM alone.", "",
           f"Over the {s['cases']} problems: median error {s['median_error']:.1%} on our best, "
           f"{s['baseline_median_error']:.1%} on torch + NCCL; measured inside the interval "
           f"{share(s['covered'])} (ours), {share(s['baseline_covered'])} (torch + NCCL); ours vs torch + NCCL "
           f"called right {share(s['versus_torch'])}.", "",
           "| kernel | problem | our best measured / model's pick predicted [interval] ms | torch + NCCL "
           "measured / predicted [interval] ms | ours vs torch, measured / predicted |", "|---|---|---|---|---|"]
    for c in best:
        verdict = lambda ours, torch: "ours faster" if ours < torch else "torch faster"
        out.append(f"| {c['kernel']} | {c['problem']} | {c['best_ms']:.3f} / {c['pick']} {c['pick_ms']:.3f} "
                   f"[{c['pick_interval'][0]:.3f}, {c['pick_interval'][1]:.3f}] | {c['baseline'][0]:.3f} / "
                   f"{c['baseline'][1]:.3f} [{c['baseline_interval'][0]:.3f}, {c['baseline_interval'][1]:.3f}] | "
                   f"{verdict(c['best_ms'], c['baseline'][0])} / {verdict(c['pick_ms'], c['baseline'][1])} |")
    for c in (c for c in cases if "pattern" in c):
        out.append(f"| {c['kernel']} | {c['problem']} | {c['pattern']}: {c['measured']:.3f} / {c['predicted']:.3f} "
                   f"[{c['interval'][0]:.3f}, {c['interval'][1]:.3f}] | | |")
    if best:
        out += ["", f"Extrapolated because: {best[0]['why']}.", "", _H100_READING]
    return out


_H100_READING = (
    "Where it is wrong: at llama70b-up-8k and llama8b-up-4k the model has our all_gather_gemm (its pick, "
    "push_copy_engine) faster than torch + NCCL, and it is measured slower (3.651 vs 3.054, 0.456 vs "
    "0.436 ms). torch + NCCL takes the same time on the H100s as on the H200s (3.054 against 3.037 ms "
    "at llama70b-up-8k), ours 9 % more (3.651 against 3.351): hwspecs/h100.yaml's GEMM rates are the "
    "H200's, and the bundled Triton GEMM reaches a smaller share of cuBLAS on an H100 "
    "(shared/HARDWARE.md: 0.75-0.81x at 8192x14336x8192). A per-rank GEMM timed on an H100 would give "
    "h100.yaml its own rates (`gemm --rank-gemm FILE`).")


_PRICING = (
    "The later of two clocks: the GPU's schedule of the pattern (GEMM waves at the measured per-SM tile "
    "rate on the SMs the pattern gives it; SM copies at the measured Triton put curve 387 GB/s x P / "
    "(P + 11.2) on the programs that copy; copy-engine copies at 392 GB/s; a GEMM that stores its tiles to "
    "peers hides one wave's stores behind the next wave's compute; a GEMM that waits for gathered rows "
    "takes them as they arrive; the reduce and decode at a fitted share of HBM), and the host's enqueue "
    "cost (a fitted cost per kernel launch, barrier, second-stream launch and copy-engine copy), never "
    "below the lower bound (communication alone, GEMM alone).")

_MISSES = [
    "- **Against the figures published before 2026-11-25** (GEMM constants fitted on every per-rank "
    "shape, the 4- and 8-GPU ones included; Spearman >= 0.8 counted with a float comparison that "
    "dropped exact 0.8s): 7.6 % median error, pick within 5 % in 86 %, Spearman >= 0.8 in 62 %. With the "
    "GEMM fitted on the 2-GPU shapes only: 8.2 %, 24 of 29 (83 %, below the 85 % target) and 20 of 29 "
    "(69 %); ties now share their average rank (scipy), ranked by position as before it is 21 of 29.",
    "- **The SM scatter slows down with the number of peers, which 2 GPUs cannot show.** The scatter "
    "alone moves 320-340 GB/s per rank at W = 2, 250-270 at W = 4 and about 220 at W = 8 "
    "(bench/results/dist_h200.md), while the model's copy rate is the one-to-one Triton put (357 GB/s "
    "on 132 programs) at every W. So the all-SM patterns of gemm_all_scatter (bulk_sync, "
    "fused_sequential) are predicted 13-33 % fast at 8 GPUs, and fused_sequential comes out below the "
    "measured scatter alone at iris-4096 and llama70b-qkv-4k. The lower bound cannot catch this: it is "
    "the communication at the spec's fastest copy, which the fan-out does not reach. This is the main "
    "reason why ours vs torch + NCCL is called right in only 6 of 13 cases at 8 GPUs: the model has "
    "our gemm_all_scatter faster than torch + NCCL at all four problems, and it is measured slower at "
    "all four (best 0.197 / 0.379 / 0.395 / 0.298 ms against 0.169 / 0.353 / 0.376 / 0.288). The "
    "cause of the fan-out penalty (NVSwitch port contention, or the strided 512-byte rows of a tile) "
    "is not established; a peer-copy benchmark with W - 1 destinations would give the model a rate per "
    "W without looking at these rows.",
    "- **all_gather_gemm's push** is predicted 13-30 % fast at llama70b-qkv-4k and llama8b-up-4k (4 and "
    "8 GPUs), and so called faster than torch + NCCL at qkv-4k (4 and 8 GPUs) and 8b-up-4k (8), where "
    "it is measured slower or tied (0.432 vs 0.426, 0.380 vs 0.338, 0.239 vs 0.231 ms): the copies of W - 1 shards on 16 "
    "programs feed a GEMM that the model lets take each block the moment it lands, with no cost for "
    "the waits.",
    "- **Near ties**: the other wrong calls against torch + NCCL are within 2 % measured "
    "(gemm_reduce_scatter llama70b-down-8k at 4 GPUs 1.728 vs 1.710, llama8b-down-4k at 8 GPUs 0.222 vs "
    "0.219; the sweep's iris-8192x3584x14336 0.487 vs 0.482), as are many pattern pairs within one "
    "case; their Spearman swings on noise.",
    "- **The interval** is as wide as the 2-GPU errors left out one problem at a time: measured times "
    "fall inside it in 38 of 40 patterns at 2 GPUs (in-sample), 34 of 40 at 4, 18 of 24 in the sweep, "
    "but 23 of 40 at 8 GPUs, where the fan-out above is beyond anything the 2-GPU rows show. Read it "
    "as the model's error where it was fitted, not as a guarantee at W = 8.",
    "- **workgroup_specialized and producer_consumer** run the same GPU schedule in the model (the "
    "GEMM on 132 - COMM_SMS programs, the scatter on COMM_SMS) and differ only in host cost. Measured, "
    "they tie at 4 GPUs, ws wins at 2 and pc at 8 by up to 8 %: not explained. In the COMM_SMS sweep "
    "the model's best split is 24, 8 and 32 SMs at llama70b-up-1k, iris-8192x3584x14336 and "
    "llama70b-qkv-4k, the measured one 8, 24 and 24 (the three best measured within 2.5-5.5 % of each "
    "other); "
    "Spearman >= 0.8 in none of its 3 cases.",
    "- **push_copy_engine at 4 and 8 GPUs** is host-bound ((W - 1) x 4 copies, each with a signal "
    "launch): predicted 0.59 / 1.22 ms, measured 0.76-0.80 / 1.50-1.57. The cost per copy is fitted "
    "where it barely shows (W = 2: four copies behind a GEMM); the ranking (slowest but pull) holds.",
    "- **The GEMM of the largest problems** is predicted about 9 % below the bench's GEMM step timed "
    "alone (all_gather_gemm llama70b-up-8k: 2.94 against 3.23 ms measured at 2 GPUs; gemm_reduce_scatter "
    "llama70b-down-8k, whose step includes the stores): the per-rank GEMM timed alone on one GPU "
    "(rank_gemm_h200.json) is faster than the same GEMM inside the distributed kernel. This is the fit "
    "set's own miss (3 of its 34 patterns below the measured alone).",
    "- **flash decode at 4 GPUs, batch 1**: bulk_sync measured 0.114 ms, half its 2- and 8-GPU times "
    "(0.227, 0.231) and faster than fused_push (0.162 ± 0.033), against every other case; the model, "
    "bounded by the host's four launches there, predicts 0.22. Likely a faster host on that run; not "
    "modelled. At llama3-405b-b32-32k on 8 GPUs bulk_sync is measured 0.368 against 0.223 predicted.",
    "- **torch + NCCL**: 2.0 % median error at 4 GPUs, 8.4 % at 8 (inside its interval in 27 of 29 "
    "unseen cases); flash decode's torch baseline is under-predicted at 8 GPUs (0.349 against 0.927 ms "
    "at batch 1: its gather and torch combine grow with W).",
]


def main(argv: list | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=("gemm", "fit", "validate"))
    parser.add_argument("--rank-gemm", type=Path, default=RANK_GEMM,
                        help="gemm: a device's per-rank GEMM file (rows as bench/gpu_rank_gemm.py writes them)")
    args = parser.parse_args(argv)
    if args.what == "gemm":
        print(json.dumps(gemm_fit(args.rank_gemm), indent=1))
    elif args.what == "fit":
        print(fit()["_source"])
    else:
        for label, s in validate().items():
            print(label, {k: round(v, 3) if isinstance(v, float) else v for k, v in s.items()})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
