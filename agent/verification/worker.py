"""The subprocess in which a single-GPU kernel's candidate code runs:
``python -m swizzleperf.agent.verification.worker REQUEST OUT``.

REQUEST is a JSON file naming the (spliced) kernel module and the stages to run (or ``items``: a
list of ``{kernel_path, mapping_path}`` to check and map in one process); OUT is where the JSON
result is written. Model-written code never runs in the agent's process: the agent starts
this worker with a timeout and reads OUT. Stages, in the order given, stopping at the first that
fails:

- ``permutation``: evaluate the rewrite target for every program id of each named problem's grid
  (vectorised, under the Triton interpreter) and check that every logical tile is computed exactly
  once; saves the program -> tile map of the first problem to ``mapping_path`` (.npy, int64).
- ``all_grids``: the same on every small grid and a sample of larger ones (agent/verification/probe.py),
  counted where the kernel's own target at ``reference_path`` (when given) is a permutation too;
  then the proof over every grid (agent/verification/prove.py): proven, or rejected with a
  counterexample the target reproduces, or checked exhaustively up to a box and ``guard``ed
  (``details["all_grids"]``: ``proof``, ``scope``, ``guard``).
- ``compiled_permutation`` (CUDA): the sites of both through the target as Triton *compiles* it,
  each tile counted with an atomic add: what only the interpreter does cannot pass.
- ``numerics``: for each of ``numerics_problems``, outputs poisoned with NaN, fresh random inputs
  per seed, compared with the spec's reference: ``||out - ref|| / ||ref||`` within the spec's tolerance and no element left unwritten.
- ``timing`` (CUDA): median and spread of the launch time over rotating input sets, L2 flushed
  between repetitions (``triton.testing.do_bench``).
- ``run_once``: launch ``warmup + launches`` times (for ncu, which skips the warm-up launches);
  with ``nvtx_range``, each of the last ``launches`` runs inside an NVTX range of that name (for
  ncu's range replay of a kernel that is many launches per run).
- ``trace``: record the loads and stores of a few sampled programs of a real launch under the
  interpreter (profiling/tracer.py extends them to every tile).
- ``compare``: time several kernel modules (``compare_paths``) head to head at the default problem
  on the same inputs, interleaved launch by launch, so that clock steps hit all alike.

The probe needs the interpreter and the GPU stages need compiled kernels, so the agent runs the
``permutation`` stage in a worker with ``TRITON_INTERPRET=1`` and, on a GPU, the others (from
``compiled_permutation`` on) in a second worker without it.

The request loop, ``StageFailure`` and the output checks (``poison``, ``compare_output``) are
agent/verification/stages.py's, shared with the distributed kernel's worker
(agent/distributed/worker.py); ``tune_launch`` is agent/verification/tune_worker.py's.
"""
from __future__ import annotations

import itertools
import math
import sys
import time
from pathlib import Path

import numpy as np

from swizzleperf.agent.verification import probe, prove, stages
from swizzleperf.agent.verification.candidate import target_source
from swizzleperf.agent.verification.probe import Site, permutation_errors, probe_target
from swizzleperf.agent.verification.stages import NOT_REPRODUCIBLE, StageFailure, compare_output, poison
from swizzleperf.agent.verification.tune_worker import stage_tune_launch
from swizzleperf.sandbox.write_back import source_text


def main(argv: list[str]) -> int:
    return stages.main(argv, run_request)


def run_request(request: dict) -> dict:
    """Run the requested stages (``items``: the permutation of each of several kernel files);
    returns ``{"verdict", "reason", "details"}``."""
    if "items" in request:  # several kernel files, permutation only (the policy's ranking)
        common = {k: v for k, v in request.items() if k != "items"}
        items = [run_request({**common, **item, "stages": ["permutation"]}) for item in request["items"]]
        return {"verdict": "PASS", "reason": "", "details": {"items": items}}
    return stages.run_stages(request, STAGES)


def _meta(spec, problem_name: str, request: dict) -> dict:
    """Launch meta-parameters of a problem: the spec's, with ``meta_overrides`` applied to every
    problem but ``check`` (whose small tiles are chosen for the interpreter)."""
    meta = spec.meta_for(problem_name)
    return meta if problem_name == "check" else {**meta, **request.get("meta_overrides", {})}


# -- permutation --------------------------------------------------------------------------------

def _stage_permutation(module, spec, request: dict) -> dict:
    """The requested problems, then the spec's permutation-only ones (probed, never launched)."""
    real = _real_sites(module, spec, request)
    coords = _probe(module, spec, real, compiled=False)
    _raise_unless_permutations(real, coords, compiled=False)
    if request.get("mapping_path"):
        np.save(request["mapping_path"], np.ravel_multi_index(tuple(coords[0].T), real[0].grid))
    return {s.label.split()[0]: {"grid": list(s.grid), "programs": math.prod(s.grid)} for s in real}


def _stage_all_grids(module, spec, request: dict) -> dict:
    """The spec's other problems, every small grid and a sample of larger ones (agent/verification/probe.py),
    interpreted."""
    real = _real_sites(module, spec, request, every=True)
    probed = {s.label for s in _real_sites(module, spec, request)}
    summary = _check_all_grids(module, spec, request, real, compiled=False,
                               unprobed=[s for s in real if s.label not in probed])
    if request.get("prove") is False:   # a guarded kernel (agent/verification/evaluate.py): its order checked before
        return summary
    source = target_source(source_text(Path(request["kernel_path"]).read_bytes()), spec.rewrite_target)
    return {**summary, **prove.every_grid(module, spec.rewrite_target, source, real, request.get("reference_path"))}


def _stage_compiled_permutation(module, spec, request: dict) -> dict:
    """The real problems and all the grids of ``all_grids``, through the target as Triton
    compiles it (CUDA)."""
    real = _real_sites(module, spec, request, every=True)
    _raise_unless_permutations(real, _probe(module, spec, real, compiled=True), compiled=True)
    return {"problems": [s.label.split()[0] for s in real],
            "all_grids": _check_all_grids(module, spec, request, real, compiled=True)}


def _real_sites(module, spec, request: dict, every: bool = False) -> list:
    """The sites of the requested problems and the permutation-only ones (``every``: of all the
    spec's problems), once the target's text is known to be read alike by the interpreter and the
    compiler."""
    why = probe.one_definition(getattr(module, spec.rewrite_target))
    if why:
        raise StageFailure("INVALID", f"the rewrite target {spec.rewrite_target} cannot be verified: {why}")
    others = spec.problems if every else getattr(spec, "permutation_only", ())
    extra = [p for p in others if p not in request["problems"]]
    real = []
    for name in list(request["problems"]) + extra:
        problem, meta = spec.problems[name], _meta(spec, name, request)
        grid = tuple(int(g) for g in spec.tile_grid(problem, meta))
        args = tuple(int(a) for a in spec.swizzle_args(problem, meta))
        real.append(Site(grid, args, f"{name} problem ({'x'.join(map(str, grid))} tiles, {math.prod(grid)} programs)"))
    return real


def _probe(module, spec, sites: list, compiled: bool) -> list:
    try:
        return probe.probe_sites(module, spec.rewrite_target, sites, compiled=compiled)
    except probe.ProbeError as exc:
        raise StageFailure("RUNTIME_ERROR", str(exc)) from None


def _raise_unless_permutations(sites: list, coords: list, compiled: bool) -> None:
    how = "compiled by Triton (the interpreter's reading passed), " if compiled else ""
    for site, c in zip(sites, coords):
        message = permutation_errors(c, site.grid)
        if not message:
            continue
        where = (f"the {site.label}" if site.real else
                 f"{site.label} ({math.prod(site.grid)} programs), a grid the kernel may be launched with "
                 f"(every small grid and a sample of larger ones are checked, not only the kernel's problems)")
        raise StageFailure("NOT_PERMUTATION", f"swizzle {how}is not a permutation at {where}: {message}")


def _check_all_grids(module, spec, request: dict, real: list, compiled: bool, unprobed: list = ()) -> dict:
    """``unprobed`` real sites and the synthetic ones (agent/verification/probe.py), kept where the reference
    target is a permutation."""
    sites, note = probe.guarded_sites(module, spec.rewrite_target, real, request.get("reference_path"),
                                      compiled=compiled, first=unprobed)
    try:
        coords = probe.probe_sites(module, spec.rewrite_target, sites, compiled=compiled, per_site=not compiled)
    except probe.ProbeError as exc:
        raise StageFailure("RUNTIME_ERROR", str(exc)) from None
    except probe.VectorUnsupported:   # compiled, a constexpr argument: one compilation per grid is too many
        return {"sites": 0, "tiles": 0, "note": "compiled: only the real grids (the target needs "
                                                "compile-time arguments)"}
    _raise_unless_permutations(sites, coords, compiled)
    return {"sites": len(sites), "tiles": int(sum(math.prod(s.grid) for s in sites)), "note": note}


# -- numerics ------------------------------------------------------------------------------------

def _stage_numerics(module, spec, request: dict) -> dict:
    """Each problem of ``numerics_problems``: all seeds at ``check``, the first one elsewhere."""
    import torch
    device, dtype = request["device"], request["dtype"]
    summary = {"dtype": dtype, "device": device, "tolerance": spec.tolerance[dtype], "rel_errors": {}}
    for name in request["numerics_problems"]:
        problem, meta = spec.problems[name], _meta(spec, name, request)
        seeds = request["seeds"] if name == "check" else request["seeds"][:1]
        errors = []
        for seed in seeds:
            inputs = spec.make_inputs(problem, seed, device, dtype)
            out = inputs[spec.output_name]
            unwritten = poison(out)
            spec.launch(inputs, **meta)
            if device != "cpu":
                torch.cuda.synchronize()
            try:
                expected = spec.reference(inputs)
                errors.append(compare_output(out, unwritten(out), expected, spec, problem, meta, dtype,
                                             f"{name} problem, seed {seed}"))
            except StageFailure as failure:
                if failure.verdict == "MISMATCH" and "still poisoned" not in failure.reason:
                    _raise_if_not_reproducible(spec, problem, seed, device, dtype, meta, inputs, failure)
                raise
            del inputs, out, expected
        summary["rel_errors"][name] = errors
    return summary


def _raise_if_not_reproducible(spec, problem, seed, device, dtype, meta, first: dict, failure) -> None:
    """After a mismatch: the same launch on the same inputs once more (allocated anew, elsewhere);
    where a tensor then ends otherwise than after the first run, the mismatch says so: the kernel's
    output is not a function of its inputs (``NOT_REPRODUCIBLE``), not a wrong order."""
    import torch
    again = spec.make_inputs(problem, seed, device, dtype)
    poison(again[spec.output_name])
    spec.launch(again, **meta)
    if device != "cpu":
        torch.cuda.synchronize()
    for name, tensor in again.items():
        if not isinstance(tensor, torch.Tensor) or name not in first or tensor.shape != first[name].shape:
            continue
        a, b = first[name].double().flatten(), tensor.double().flatten()
        both_nan = torch.isnan(a) & torch.isnan(b)
        a, b = torch.where(both_nan, 0.0, a), torch.where(both_nan, 0.0, b)
        rel = float(torch.linalg.vector_norm(a - b) / torch.linalg.vector_norm(a).clamp_min(1e-30))
        if not rel <= spec.tolerance[dtype]:
            raise StageFailure("MISMATCH", f"{failure.reason}; a second run of the same launch on the same "
                                           f"inputs leaves {name} otherwise (relative error {rel:.1e} between the "
                                           f"two runs): {NOT_REPRODUCIBLE}")


def _stage_bounds(module, spec, request: dict) -> dict:
    """Under the interpreter: the ``check`` problem's launch (first seed, on the CPU) with every
    access checked against its tensors (agent/verification/bounds.py); MISMATCH naming the first
    access outside them. Run after a numerics failure (agent/verification/verify.py): a kernel that
    reaches outside its tensors fails for that reason, whatever the order."""
    from swizzleperf.agent.verification.bounds import checked_accesses, outside_finding
    problem, meta = spec.problems["check"], _meta(spec, "check", request)
    inputs = spec.make_inputs(problem, request["seeds"][0], "cpu", request["dtype"])
    poison(inputs[spec.output_name])
    try:
        with checked_accesses():
            spec.launch(inputs, **meta)
    except Exception as exc:
        found = outside_finding(exc)
        if found is None:
            raise
        raise StageFailure("MISMATCH", found) from None
    return {"outside": None}


# -- timing and profiling ---------------------------------------------------------------------

def _stage_timing(module, spec, request: dict) -> dict:
    """Median launch time over rotating input sets, L2 flushed before each repetition."""
    import triton
    name, dtype = request["timing_problem"], request["dtype"]
    problem, meta = spec.problems[name], _meta(spec, name, request)
    sets = [spec.make_inputs(problem, 1000 + i, "cuda", dtype) for i in range(request.get("input_sets", 3))]
    rotation = itertools.cycle(sets)
    times = np.asarray(triton.testing.do_bench(lambda: spec.launch(next(rotation), **meta),
                                               warmup=request.get("warmup_ms", 100),
                                               rep=request.get("rep_ms", 1000), return_mode="all"))
    median = float(np.median(times))
    q25, q75 = (float(q) for q in np.quantile(times, [0.25, 0.75]))
    return {"time_ms": median, "time_spread_ms": q75 - q25, "q25_ms": q25, "q75_ms": q75,
            "repetitions": int(times.size), "input_sets": len(sets),
            "tflops": spec.flops(problem) / (median * 1e-3) / 1e12,
            "gbps": spec.min_bytes(problem, dtype) / (median * 1e-3) / 1e9}


def _stage_run_once(module, spec, request: dict) -> dict:
    import torch
    name, dtype = request["timing_problem"], request["dtype"]
    problem, meta = spec.problems[name], _meta(spec, name, request)
    inputs = spec.make_inputs(problem, 7, "cuda", dtype)
    warmup, launches, nvtx_range = request.get("warmup", 2), request.get("launches", 1), request.get("nvtx_range")
    for i in range(warmup + launches):
        profiled = nvtx_range and i >= warmup  # one NVTX range per profiled run (all its kernel launches)
        if profiled:
            torch.cuda.synchronize()
            torch.cuda.nvtx.range_push(nvtx_range)
        spec.launch(inputs, **meta)
        if profiled:
            torch.cuda.synchronize()
            torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()
    return {"launches": warmup + launches}


def _stage_compare(module, spec, request: dict) -> dict:
    """Head-to-head timing of ``compare_paths`` at the default problem, on the same input sets.

    Interleaved launch by launch: each *round* times one launch of every module (CUDA events,
    L2 flushed before each launch), the modules in rotated order so that each takes every place
    equally often, and the rounds repeat for about ``budget_ms`` in all. Per module: the median
    launch time, its interquartile range, and the per-round times (``round_medians_ms``), so that
    two modules compare round by round.

    Why not a do_bench of each module in turn: on an H200 (2026-11-23,
    bench/results/timing_integrity/before_h200.json) the GEMM's time stepped between clock levels (3.28,
    3.39, 3.43, 3.46 ms) every second or so, and a module timed for 200 ms inside one step took
    that step's time: five copies of one module came out 3.39-3.46 ms, up to 2 % apart, with the
    later-listed copies slower. Launches a few ms apart share the clock level, so their paired
    differences cancel it.
    """
    import torch
    from swizzleperf.agent.verification.load import load_kernel
    dtype, problem, meta = request["dtype"], spec.problems["default"], _meta(spec, "default", request)
    specs = [load_kernel(path)[1] for path in request["compare_paths"]]
    sets = [spec.make_inputs(problem, 2000 + i, "cuda", dtype) for i in range(2)]
    flush = torch.empty(256 << 20, dtype=torch.int8, device="cuda")   # > every GPU's L2
    launches = [(lambda s=s, k=k: s.launch(sets[k % 2], **meta)) for s in specs for k in range(2)]
    for launch in launches:  # compile, load and warm every module on both input sets
        launch()
    torch.cuda.synchronize()
    n = len(specs)
    rounds = _compare_rounds(specs[0], sets[0], meta, flush, n, request)
    times = np.zeros((rounds, n))
    for r in range(rounds):
        order = [(r + j) % n for j in range(n)]
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in order]
        for i, (start, end) in zip(order, events):
            flush.zero_()
            start.record()
            specs[i].launch(sets[r % 2], **meta)
            end.record()
        torch.cuda.synchronize()
        for i, (start, end) in zip(order, events):
            times[r, i] = start.elapsed_time(end)
    q25, q50, q75 = np.quantile(times, [0.25, 0.5, 0.75], axis=0)
    return {"time_ms": q50.tolist(), "time_spread_ms": (q75 - q25).tolist(), "rounds": rounds,
            "round_medians_ms": times.T.tolist()}


def _compare_rounds(spec, inputs, meta, flush, n: int, request: dict) -> int:
    """Rounds that fill ``budget_ms`` (2 s per module by default), between 20 and 1000."""
    import torch
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    flush.zero_()
    start.record()
    for _ in range(3):
        spec.launch(inputs, **meta)
    end.record()
    torch.cuda.synchronize()
    per_launch = max(start.elapsed_time(end) / 3, 1e-3)
    budget = request.get("budget_ms", 2000.0 * n)
    return int(min(1000, max(request.get("rounds", 20), budget / (per_launch * n))))


def _stage_trace(module, spec, request: dict) -> dict:
    """Record the accesses of sampled tiles' programs at a real problem (profiling/tracer.py)."""
    from swizzleperf.profiling.tracer import (MERGE_GAP_BYTES, TraceError, check_tiles, digit_splits, digit_tiles,
                                              every_tile, fits_on_samples, record_samples, sample_tiles,
                                              whole_grid_affordable)
    name = request.get("trace_problem", "default")
    problem, meta = {**spec.problems[name], **request.get("problem_sizes", {})}, _meta(spec, name, request)
    grid = tuple(int(g) for g in spec.tile_grid(problem, meta))
    coords = probe_target(module, spec, tuple(int(a) for a in spec.swizzle_args(problem, meta)),
                          math.prod(grid), len(grid))
    pid_of_tile = np.empty(math.prod(grid), dtype=np.int64)
    pid_of_tile[np.ravel_multi_index(tuple(coords.T), grid)] = np.arange(math.prod(grid))
    tiles, divisors, spent = sample_tiles(grid), set(), [0.0]

    def traced(more: list) -> list:
        began = time.monotonic()
        recorded = record_samples(spec, module, problem, meta, request["dtype"],
                                  [int(pid_of_tile[np.ravel_multi_index(t, grid)]) for t in more], divisors)
        spent[0] += time.monotonic() - began
        return recorded
    try:
        accesses = traced(tiles)
        # a kernel that divides by a scalar dividing an axis may split a program id into digits: where the
        # plain fit fails, 8 tiles at random more, then the tiles at the edges of the digits that fit them
        # (profiling/tracer.py's extend, "Digits of a program id")
        usable = sorted(d for d in divisors if 1 < d and any(g % d == 0 and d < g for g in grid))[-64:]
        fits, splits = fits_on_samples(dict(zip(map(tuple, tiles), accesses)), grid), None
        if usable and not fits:
            extra = check_tiles(grid, tiles)
            tiles, accesses = tiles + extra, accesses + traced(extra)
            splits = digit_splits(dict(zip(map(tuple, tiles), accesses)), grid, usable)
            edges = [t for t in digit_tiles(grid, splits) if t not in set(tiles)] if splits else []
            tiles, accesses = tiles + edges, accesses + (traced(edges) if edges else [])
        # no fit at all (addresses that depend on the data, steps that differ by tile): a small launch is
        # recorded whole and read as recorded (profiling/tracer.py's extend, WHOLE_GRID_*)
        if (not fits and not splits and not fits_on_samples(dict(zip(map(tuple, tiles), accesses)), grid, MERGE_GAP_BYTES)
                and whole_grid_affordable(grid, len(tiles), sum(map(len, accesses)), spent[0])):
            taken = set(tiles)
            rest = [t for t in every_tile(grid) if t not in taken]
            more = _record_rest(traced, rest, sum(map(len, accesses)))
            if more is not None:
                tiles, accesses = tiles + rest, accesses + more
        divisors = sorted(d for d in divisors if 1 < d and any(g % d == 0 and d < g for g in grid))[-64:]
    except TraceError as exc:
        raise StageFailure("RUNTIME_ERROR", f"cannot trace: {exc}") from None
    return {"grid": list(grid), "tiles": [list(t) for t in tiles], "accesses": accesses, "divisors": divisors}


#: Programs recorded at a time when a launch is recorded whole (each call starts the launch anew).
WHOLE_GRID_CHUNK = 256


def _record_rest(traced, rest: list, recorded: int) -> list | None:
    """The accesses of the programs of tiles ``rest`` (``traced`` records a list of tiles), in chunks of
    WHOLE_GRID_CHUNK, or None where the samples' pace misled: the accesses in all (``recorded`` so far
    and the rest's) pass 1.5 times WHOLE_GRID_MAX_ACCESSES, or recording the rest passes 1.5 times
    WHOLE_GRID_BUDGET_S (programs whose data make them longer than the sampled ones); the trace is
    then refused as it was before the rest was recorded."""
    from swizzleperf.profiling.tracer import WHOLE_GRID_BUDGET_S, WHOLE_GRID_MAX_ACCESSES
    more, began = [], time.monotonic()
    for k in range(0, len(rest), WHOLE_GRID_CHUNK):
        chunk = traced(rest[k:k + WHOLE_GRID_CHUNK])
        more, recorded = more + chunk, recorded + sum(map(len, chunk))
        if recorded > 1.5 * WHOLE_GRID_MAX_ACCESSES or time.monotonic() - began > 1.5 * WHOLE_GRID_BUDGET_S:
            return None
    return more


#: The stages this worker runs (the module docstring), by request name; ``tune_launch`` is
#: agent/verification/tune_worker.py's.
STAGES = {"permutation": _stage_permutation, "all_grids": _stage_all_grids,
          "compiled_permutation": _stage_compiled_permutation, "numerics": _stage_numerics,
          "timing": _stage_timing, "run_once": _stage_run_once, "compare": _stage_compare,
          "trace": _stage_trace, "tune_launch": stage_tune_launch, "bounds": _stage_bounds}


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
