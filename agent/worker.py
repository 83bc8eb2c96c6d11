"""The subprocess in which candidate code runs: ``python -m swizzleperf.agent.worker REQUEST OUT``.

REQUEST is a JSON file naming the (spliced) kernel module and the stages to run (or ``items``: a
list of ``{kernel_path, mapping_path}`` to check and map in one process); OUT is where the JSON
result is written. Model-written code never runs in the agent's process: the agent starts
this worker with a timeout and reads OUT. Stages, in the order given, stopping at the first that
fails:

- ``permutation``: evaluate the rewrite target for every program id of each named problem's grid
  (vectorised, under the Triton interpreter) and check that every logical tile is computed exactly
  once; saves the program -> tile map of the first problem to ``mapping_path`` (.npy, int64).
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
``permutation`` stage in a worker with ``TRITON_INTERPRET=1`` and, on a GPU, the others in a second
worker without it.
"""
from __future__ import annotations

import contextlib
import itertools
import json
import math
import sys
import tempfile
import traceback
from pathlib import Path

import numpy as np

PROBE_BLOCK = 4096
MAX_LISTED = 6

_PROBE_TEMPLATE = '''\
import sys
import triton
import triton.language as tl

target = getattr(sys.modules[{module!r}], {target!r})


@triton.jit
def probe(out_ptr, G, {args}, BLOCK: tl.constexpr):
    pids = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = pids < G
    tiles = target(pids, {args})
{stores}
'''


class StageFailure(Exception):
    """A stage rejected the candidate: ``verdict`` (a Verdict value) and a one-line reason."""

    def __init__(self, verdict: str, reason: str):
        super().__init__(reason)
        self.verdict, self.reason = verdict, reason


def main(argv: list[str]) -> int:
    request = json.loads(Path(argv[0]).read_text())
    result = run_request(request)
    Path(argv[1]).write_text(json.dumps(result))
    return 0


def run_request(request: dict) -> dict:
    """Run the requested stages; returns ``{"verdict", "reason", "details"}``."""
    from swizzleperf.agent.spec import KernelLoadError, load_kernel
    if "items" in request:  # several kernel files, permutation only (the policy's ranking)
        common = {k: v for k, v in request.items() if k != "items"}
        items = [run_request({**common, **item, "stages": ["permutation"]}) for item in request["items"]]
        return {"verdict": "PASS", "reason": "", "details": {"items": items}}
    details: dict = {}
    try:
        module, spec = load_kernel(request["kernel_path"])
    except KernelLoadError as exc:
        return {"verdict": "COMPILE_ERROR", "reason": str(exc), "details": details}
    stages = {"permutation": _stage_permutation, "numerics": _stage_numerics,
              "timing": _stage_timing, "run_once": _stage_run_once, "compare": _stage_compare,
              "trace": _stage_trace}
    if "tune_launch" in request["stages"]:  # launch configurations against the library: agent/tune_worker.py
        from swizzleperf.agent.tune_worker import stage_tune_launch
        stages["tune_launch"] = stage_tune_launch
    if any(stage.startswith("dist_") for stage in request["stages"]):
        from swizzleperf.agent import dist_worker
        stages.update(dist_permutation=dist_worker.stage_permutation,
                      dist_numerics=dist_worker.stage_numerics)
    try:
        for stage in request["stages"]:
            details[stage] = stages[stage](module, spec, request)
    except StageFailure as failure:
        return {"verdict": failure.verdict, "reason": failure.reason, "details": details}
    except Exception as exc:  # candidate code failed in a way we did not foresee: record it
        return {"verdict": _classify(exc), "reason": _one_line(exc), "details": details,
                "traceback": traceback.format_exc(limit=8)}
    return {"verdict": "PASS", "reason": "", "details": details}


def _meta(spec, problem_name: str, request: dict) -> dict:
    """Launch meta-parameters of a problem: the spec's, with ``meta_overrides`` applied to every
    problem but ``check`` (whose small tiles are chosen for the interpreter)."""
    meta = spec.meta_for(problem_name)
    return meta if problem_name == "check" else {**meta, **request.get("meta_overrides", {})}


def _classify(exc: Exception) -> str:
    name = type(exc).__name__
    return "COMPILE_ERROR" if "Compil" in name or "Unsupported" in name else "RUNTIME_ERROR"


def _one_line(exc: Exception) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:400]}"


# -- permutation --------------------------------------------------------------------------------

def _stage_permutation(module, spec, request: dict) -> dict:
    """The requested problems, then the spec's permutation-only ones (probed, never launched)."""
    summary = {}
    extra = [p for p in getattr(spec, "permutation_only", ()) if p not in request["problems"]]
    for i, name in enumerate(list(request["problems"]) + extra):
        problem, meta = spec.problems[name], _meta(spec, name, request)
        grid = tuple(int(g) for g in spec.tile_grid(problem, meta))
        coords = probe_target(module, spec, tuple(int(a) for a in spec.swizzle_args(problem, meta)),
                              math.prod(grid), len(grid))
        problem_text = f"{name} problem ({'x'.join(map(str, grid))} tiles, {math.prod(grid)} programs)"
        message = permutation_errors(coords, grid)
        if message:
            raise StageFailure("NOT_PERMUTATION", f"swizzle is not a permutation at the "
                                                  f"{problem_text}: {message}")
        if i == 0 and request.get("mapping_path"):
            np.save(request["mapping_path"], np.ravel_multi_index(tuple(coords.T), grid))
        summary[name] = {"grid": list(grid), "programs": math.prod(grid)}
    return summary


def probe_target(module, spec, args: tuple, num_programs: int, ndim: int) -> np.ndarray:
    """Evaluate the rewrite target on program ids 0..num_programs-1 (interpreter, vectorised).

    Returns int64 ``[num_programs, ndim]`` tile coordinates.
    """
    import torch
    names = ", ".join(f"a{i}" for i in range(len(args)))
    stores = "\n".join(f"    tl.store(out_ptr + pids * {ndim} + {d}, tiles{f'[{d}]' if ndim > 1 else ''}, "
                       f"mask=mask)" for d in range(ndim))
    text = _PROBE_TEMPLATE.format(module=module.__name__, target=spec.rewrite_target,
                                  args=names, stores=stores)
    with tempfile.TemporaryDirectory() as folder, _elementwise_min_max(getattr(module, spec.rewrite_target)):
        path = Path(folder) / "swizzleperf_probe.py"
        path.write_text(text)
        from swizzleperf.agent.spec import _import_file
        probe_module = _import_file(path)
        out = torch.full((num_programs * ndim,), -1, dtype=torch.int64)
        grid = (math.ceil(num_programs / PROBE_BLOCK),)
        probe_module.probe[grid](out, num_programs, *args, BLOCK=PROBE_BLOCK)
    return out.numpy().reshape(num_programs, ndim)


@contextlib.contextmanager
def _elementwise_min_max(target):
    """Python's ``min`` / ``max`` inside the target as the compiler reads them while the probe
    runs. Compiled, Triton's code generator turns the builtins into ``tl.minimum`` /
    ``tl.maximum``, elementwise; the interpreter calls the builtins themselves, which on the
    probe's vector of program ids compare whole vectors and return one argument (the Triton
    tutorial's ``min(num_pid_m - first_pid_m, GROUP_SIZE_M)`` then looked like no permutation).
    Only the target's own module globals change, and only for the probe."""
    import functools

    namespace = target.fn.__globals__
    saved = {name: namespace[name] for name in ("min", "max") if name in namespace}

    def elementwise(op_name: str):
        def apply(*args):
            values = list(args[0]) if len(args) == 1 else list(args)
            # looked up at call time: the interpreter patches triton.language for each launch
            return functools.reduce(getattr(sys.modules["triton.language"], op_name), values)
        return apply
    namespace.update(min=elementwise("minimum"), max=elementwise("maximum"))
    try:
        yield
    finally:
        for name in ("min", "max"):
            namespace.pop(name, None)
        namespace.update(saved)


def permutation_errors(coords: np.ndarray, grid: tuple) -> str:
    """'' when ``coords`` ([programs, ndim]) hits every tile of ``grid`` exactly once, else what
    went wrong: tiles never computed, tiles computed several times, programs out of range."""
    grid_arr = np.asarray(grid)
    in_range = np.all((coords >= 0) & (coords < grid_arr), axis=1)
    flat = np.ravel_multi_index(tuple(coords[in_range].T), grid)
    counts = np.bincount(flat, minlength=math.prod(grid))
    parts = []
    missing = np.flatnonzero(counts == 0)
    if missing.size:
        parts.append(f"{_tiles(missing, grid)} never computed")
    repeated = np.flatnonzero(counts > 1)
    if repeated.size:
        listed = ", ".join(f"{_coord(t, grid)} {counts[t]} times" for t in repeated[:MAX_LISTED])
        more = f" and {repeated.size - MAX_LISTED} more" if repeated.size > MAX_LISTED else ""
        parts.append(f"{repeated.size} tile(s) computed more than once: {listed}{more}")
    bad = np.flatnonzero(~in_range)
    if bad.size:
        listed = ", ".join(f"program {p} -> {tuple(int(c) for c in coords[p])}" for p in bad[:MAX_LISTED])
        parts.append(f"{bad.size} program(s) map outside the grid: {listed}")
    return "; ".join(parts)


def _coord(flat_index: int, grid: tuple) -> str:
    return "(" + ",".join(str(int(c)) for c in np.unravel_index(flat_index, grid)) + ")"


def _tiles(flat: np.ndarray, grid: tuple) -> str:
    listed = ", ".join(_coord(t, grid) for t in flat[:MAX_LISTED])
    more = f" and {flat.size - MAX_LISTED} more" if flat.size > MAX_LISTED else ""
    return f"{flat.size} tile(s) {listed}{more}"


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
            expected = spec.reference(inputs)
            errors.append(compare_output(out, unwritten(out), expected, spec, problem, meta, dtype,
                                   f"{name} problem, seed {seed}"))
            del inputs, out, expected
        summary["rel_errors"][name] = errors
    return summary


def poison(out):
    """Fill ``out`` with a value no kernel writes (NaN; the most negative integer for integer
    outputs) and return the function that finds the elements still holding it."""
    import torch
    if out.dtype.is_floating_point:
        out.fill_(float("nan"))
        return torch.isnan
    sentinel = torch.iinfo(out.dtype).min
    out.fill_(sentinel)
    return lambda t: t == sentinel


def compare_output(out, unwritten, expected, spec, problem, meta, dtype: str, where: str) -> float:
    """``||out - ref|| / ||ref||`` (float64), after checking that nothing is left unwritten
    (``unwritten``: the boolean mask ``poison`` returned, applied to ``out``).

    Raises:
        StageFailure: MISMATCH, naming the unwritten tiles or the error against the tolerance.
    """
    import torch
    if bool(unwritten.any()):
        raise StageFailure("MISMATCH", f"output never written (still poisoned) at "
                                       f"{int(unwritten.sum())} elements, {where}: "
                                       f"{_unwritten_tiles(unwritten, spec, problem, meta)}")
    diff = torch.linalg.vector_norm((out.double() - expected.double()).flatten())
    rel = float(diff / torch.linalg.vector_norm(expected.double().flatten()).clamp_min(1e-30))
    tol = spec.tolerance[dtype]
    if not rel <= tol:
        raise StageFailure("MISMATCH", f"output differs from the reference: relative error "
                                       f"{rel:.3e} > tolerance {tol:.1e} ({where}, {dtype})")
    return rel


def _unwritten_tiles(unwritten, spec, problem, meta) -> str:
    """Name the logical tiles holding unwritten elements, when the spec says how the output is
    tiled; otherwise the first unwritten index."""
    grid = spec.tile_grid(problem, meta)
    if spec.output_tile is None or unwritten.dim() != len(grid):
        return f"first at index {tuple(int(i) for i in unwritten.nonzero()[0])}"
    tile = tuple(spec.output_tile(problem, meta))
    idx = unwritten.nonzero().cpu().numpy() // np.asarray(tile)
    flat = np.unique(np.ravel_multi_index(tuple(idx.T), grid))
    return f"{_tiles(flat, grid)} (tiles of {'x'.join(map(str, tile))} elements)"


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
    eval/results/timing_integrity_h200.json) the GEMM's time stepped between clock levels (3.28,
    3.39, 3.43, 3.46 ms) every second or so, and a module timed for 200 ms inside one step took
    that step's time: five copies of one module came out 3.39-3.46 ms, up to 2 % apart, with the
    later-listed copies slower. Launches a few ms apart share the clock level, so their paired
    differences cancel it.
    """
    import torch
    from swizzleperf.agent.spec import load_kernel
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
    from swizzleperf.profiling.tracer import TraceError, record_samples, sample_tiles
    name = request.get("trace_problem", "default")
    problem, meta = {**spec.problems[name], **request.get("problem_sizes", {})}, _meta(spec, name, request)
    grid = tuple(int(g) for g in spec.tile_grid(problem, meta))
    coords = probe_target(module, spec, tuple(int(a) for a in spec.swizzle_args(problem, meta)),
                          math.prod(grid), len(grid))
    pid_of_tile = np.empty(math.prod(grid), dtype=np.int64)
    pid_of_tile[np.ravel_multi_index(tuple(coords.T), grid)] = np.arange(math.prod(grid))
    tiles = sample_tiles(grid)
    pids = [int(pid_of_tile[np.ravel_multi_index(t, grid)]) for t in tiles]
    try:
        accesses = record_samples(spec, module, problem, meta, request["dtype"], pids)
    except TraceError as exc:
        raise StageFailure("RUNTIME_ERROR", f"cannot trace: {exc}") from None
    return {"grid": list(grid), "tiles": [list(t) for t in tiles], "accesses": accesses}


if __name__ == "__main__":
    # run as the package's module, not as __main__: stage modules (agent/dist_worker.py) raise
    # the package's StageFailure, which __main__'s own copy of the class would not catch
    from swizzleperf.agent import worker
    sys.exit(worker.main(sys.argv[1:]))
