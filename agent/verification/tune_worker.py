"""The worker stage that tunes a kernel's launch configuration and times the vendor library beside
it: ``tune_launch`` (registered in agent/verification/worker.py; it runs there, in the sandboxed
worker, since the kernel module may hold model-written code).

For a kernel module whose spec declares ``launch_configs`` (kernels/gemm.py: the tile, warp,
stage and schedule configurations of kernels/schedule/gemm_tuning.py) and / or a ``library``
launch (torch.matmul, i.e. cuBLAS), at the default problem on the GPU:

1. every configuration (the spec's ``meta`` first) runs once on fresh random inputs with the
   output poisoned and must match the reference within the spec's tolerance, else it is
   dropped with its reason;
2. the survivors and the library are timed **interleaved launch by launch** (L2 flushed before
   each launch, the order rotated every round, CUDA events around each launch;
   kernels/schedule/gemm_tuning.interleaved), medians and interquartile ranges.

``request["configs"]`` (a list of meta dicts over the spec's ``meta``), where given, replaces the
search: the confirmation run of agent/verification/evaluate.py times only the configuration chosen
before and the kernel's own, in fresh rounds of a process of its own.

Returns ``{"configs": [{"meta", "time_ms", "time_spread_ms", "rel_error", "library_ratio",
"library_ratio_spread"}], "rejected": {name: reason}, "best_meta", "best_ms", "best_spread_ms",
"default_ms" and "default_spread_ms" (the spec's ``meta``; None where it failed), "library_name",
"library_ms", "library_spread_ms", "rounds"}``; ``library_ratio`` is the median over the rounds of
the library's time over this configuration's in the same round (paired), its spread the IQR of
those per-round ratios (None without a library).
"""
from __future__ import annotations

import json


def stage_tune_launch(module, spec, request: dict) -> dict:
    """The stage (module docstring); ``request["rounds"]`` rounds (default 30)."""
    import torch

    from swizzleperf.agent.verification.stages import StageFailure, compare_output, poison
    from swizzleperf.kernels.schedule.gemm_tuning import interleaved
    dtype, problem = request["dtype"], spec.problems["default"]
    chosen = request.get("configs")
    wanted = spec.launch_configs if chosen is None else chosen
    configs = [dict(spec.meta)] + [{**spec.meta, **c} for c in wanted if {**spec.meta, **c} != dict(spec.meta)]
    inputs = spec.make_inputs(problem, 3000, "cuda", dtype)
    out = inputs[spec.output_name]
    expected = spec.reference(inputs)
    passed, rejected = [], {}
    for meta in configs:
        label = json.dumps(meta, sort_keys=True)
        unwritten = poison(out)
        try:
            spec.launch(inputs, **meta)
            torch.cuda.synchronize()
            error = compare_output(out, unwritten(out), expected, spec, problem, meta, dtype,
                                   f"default problem, launch configuration {label}")
        except StageFailure as failure:
            rejected[label] = failure.reason
            continue
        except Exception as exc:  # a configuration that does not build or run here: dropped, said why
            rejected[label] = f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
            continue
        passed.append((meta, error))
    del expected
    if not passed:
        raise StageFailure("MISMATCH", f"no launch configuration passed: {rejected}")
    launches = {str(i): (lambda meta=meta: spec.launch(inputs, **meta)) for i, (meta, _) in enumerate(passed)}
    library = getattr(spec, "library", None)
    if library is not None:
        spare = {k: (v.clone() if hasattr(v, "clone") else v) for k, v in inputs.items()}
        launches["library"] = lambda: library(spare)
    timed = interleaved(launches, request.get("rounds", 30))
    rows = [{"meta": meta, "time_ms": timed[str(i)]["median_ms"], "time_spread_ms": timed[str(i)]["spread_ms"],
             "rel_error": error, **_paired(timed.get("library"), timed[str(i)])}
            for i, (meta, error) in enumerate(passed)]
    best = min(rows, key=lambda r: r["time_ms"])
    result = {"configs": rows, "rejected": rejected, "best_meta": best["meta"], "best_ms": best["time_ms"],
              "best_spread_ms": best["time_spread_ms"],
              "default_ms": rows[0]["time_ms"] if passed[0][0] == dict(spec.meta) else None,
              "default_spread_ms": rows[0]["time_spread_ms"] if passed[0][0] == dict(spec.meta) else None,
              "rounds": request.get("rounds", 30), "library_name": getattr(spec, "library_name", "") or None,
              "library_ms": None, "library_spread_ms": None}
    if library is not None:
        result.update(library_ms=timed["library"]["median_ms"], library_spread_ms=timed["library"]["spread_ms"])
    return result


def _paired(library: dict | None, this: dict) -> dict:
    """The library's time over this launch's, round by round (the same round's two launches):
    median and interquartile range of those ratios; Nones without a library."""
    import statistics
    if library is None:
        return {"library_ratio": None, "library_ratio_spread": None}
    ratios = [lib / own for lib, own in zip(library["times_ms"], this["times_ms"]) if own > 0]
    if len(ratios) < 2:
        return {"library_ratio": ratios[0] if ratios else None, "library_ratio_spread": 0.0 if ratios else None}
    q25, q50, q75 = statistics.quantiles(ratios, n=4)
    return {"library_ratio": statistics.median(ratios), "library_ratio_spread": q75 - q25}
