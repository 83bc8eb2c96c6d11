"""``swizzleperf simulate`` and ``swizzleperf analyze``: the simulator and the access analysis of one
kernel and one order, without a GPU and without a run."""
from __future__ import annotations

import inspect
import re
import tempfile
import time
from pathlib import Path

import numpy as np

from swizzleperf import hwspecs
from swizzleperf.agent.verification.candidate import (CandidateError, check_candidate, splice, target_args,
                                                      target_source)
from swizzleperf.agent.verification.load import load_spec
from swizzleperf.agent.verification.swizzles import catalog_source, coordinates_of
from swizzleperf.agent.verification.verify import run_worker
from swizzleperf.kernels.spec import KernelSpec
from swizzleperf.kernels.trace import TraceTooLarge, check_size
from swizzleperf.profiling import analysis, l2sim, schedule_model
from swizzleperf.sandbox.untrusted import preview, read_source


class SimulateError(Exception):
    """Bad options or a swizzle that is not a permutation; one line for the user."""


#: A meta-parameter's largest value: Triton's sizes, offsets and program ids are int32, so no tile,
#: warp count, stage count or count of SMs a launch can take is larger (and a value within it
#: cannot overflow the int64 arithmetic of an access model: a 23-digit BLOCK_M was an
#: OverflowError traceback from kernels/gemm.py's ``trace``, #41).
META_MAX = 2 ** 31 - 1
#: Meta-parameters that are extents (a tile's ``BLOCK``, ``BLOCK_M``, ``BLOCK_SIZE_N``...) or the
#: warps of a program: at least 1 (``tl.arange(0, 0)`` and a grid of ``cdiv(M, 0)`` tiles have no
#: meaning). Every other one is at least 0: flags and counts that are off at 0 (``STREAM_K``,
#: ``EPILOGUE_SUBTILE``, ``TAIL_BLOCK_N``, ``BLOCK_M_LOW``, ``FLATTEN``, ``num_stages`` on AMD).
#: No bundled kernel takes a negative meta-parameter.
_EXTENT = re.compile(r"BLOCK(_SIZE)?(_[A-Z])?|num_warps")
_INTEGER = re.compile(r"[+-]?[0-9]+")   # ASCII digits: str.isdigit() passes a "²" that int() refuses
_DIGITS_SHOWN = 12


def parse_meta(text: str | None) -> dict:
    """``"BLOCK_M=128,BLOCK_N=256"`` -> ``{"BLOCK_M": 128, "BLOCK_N": 256}``: each value an integer
    from 1 (an extent: ``BLOCK``, ``BLOCK_M``, ``BLOCK_SIZE_N``..., or ``num_warps``) or 0 (any other
    meta-parameter) to ``META_MAX``, checked before it is converted (a value of thousands of digits
    never reaches ``int()``).

    Raises:
        SimulateError: an item is not ``NAME=INTEGER`` (NAME a Python identifier, INTEGER in ASCII
            digits), or its value is outside its range; one line naming the key and the bound.
    """
    meta = {}
    for item in filter(None, (text or "").split(",")):
        name, _, value = (part.strip() for part in item.partition("="))
        if not name.isidentifier() or not _INTEGER.fullmatch(value):
            raise SimulateError(f"--meta items must be NAME=INTEGER, got {preview(item, 60)}")
        low = 1 if _EXTENT.fullmatch(name) else 0
        digits = value.lstrip("+-").lstrip("0")   # leading zeros count against int()'s digit limit too
        fits = len(digits) <= len(str(META_MAX))
        number = (-1 if value.startswith("-") else 1) * int(digits or "0") if fits else None
        if number is None or not low <= number <= META_MAX:
            got = value if len(value) <= _DIGITS_SHOWN else f"{value[:_DIGITS_SHOWN]}... ({len(digits)} digits)"
            kind = "an extent: a tile's size or the warps of a program" if low else "none is negative"
            raise SimulateError(f"--meta {name} must be an integer from {low} to {META_MAX} ({kind}), got {got}")
        meta[name] = number
    return meta


def meta_names(spec) -> set:
    """The meta-parameters ``spec``'s launch takes: the names of its parameters after the inputs
    and the spec's own meta-parameters; where it takes any keyword (``**meta``, passed on to Triton:
    a kernel captured from an app), Triton's ``num_warps`` and ``num_stages`` too."""
    parameters = list(inspect.signature(spec.launch).parameters.values())[1:]
    names = {p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    if any(p.kind is p.VAR_KEYWORD for p in parameters):
        names |= {"num_warps", "num_stages"}
    return names | set(spec.meta) | set(spec.check_meta)


def launch_meta(spec, overrides: dict) -> dict:
    """The default problem's meta-parameters, ``overrides`` applied, checked before any work:
    every name one the launch takes (:func:`meta_names`: an access model ignored a misspelt one,
    ``BLOCK_Q``, and simulated as if it were not given), and the launch's programs, one access each
    at least, within the simulator's bound (kernels/trace.py's ``MAX_ACCESSES``; the worker that
    checks the order and the generic tracer's run every program id). The exact count, programs x
    accesses a program, is checked where the trace is made, before its arrays: the access model's
    ``new_keys``, the tracer's ``extend``.

    Raises:
        SimulateError: an unknown name (one line naming the known ones), too many programs, or a
            tile grid that cannot be computed."""
    known = meta_names(spec)
    unknown = [name for name in overrides if name not in known]
    if unknown:
        raise SimulateError(f"--meta {', '.join(unknown)} is not a meta-parameter of {spec.name} "
                            f"(it takes {', '.join(sorted(known))})")
    meta = {**spec.meta_for("default"), **overrides}
    try:
        check_size(spec.num_programs("default", meta), 1, at_least=True)
    except TraceTooLarge as exc:
        raise SimulateError(_too_large(spec, meta, exc)) from None
    except (ArithmeticError, ValueError) as exc:   # a tile grid divided by a meta-parameter of 0
        raise SimulateError(f"the tile grid of {spec.name} cannot be computed for meta-parameters "
                            f"{meta}: {_reason(exc)}") from None
    return meta


def _too_large(spec, meta: dict, exc: TraceTooLarge) -> str:
    """The line for a trace past the simulator's bound: the kernel, its meta-parameters, the count."""
    return f"{spec.name} with {', '.join(f'{k}={v}' for k, v in meta.items())}: {exc}"


#: Bytes of a ``--swizzle-file`` read: a rewrite target is at most candidate.MAX_SOURCE_CHARS (6 000)
#: characters, at most 4 bytes each in UTF-8 plus a carriage return a line; a file longer than this
#: is refused before it is read on.
SWIZZLE_FILE_MAX_BYTES = 64 * 1024


def program_order(kernel_path: Path, swizzle: str | None, swizzle_file: Path | None,
                  meta_overrides: dict, timeout_s: float = 300.0) -> tuple:
    """The default problem's program -> tile order of a kernel with its own swizzle, a catalog
    member, or the rewrite target in ``swizzle_file``; verified to be a permutation (in a worker).
    ``swizzle_file`` is read as the kernel file is (``read_source``): a regular file only (a named
    pipe, a device or a folder is refused without blocking), at most ``SWIZZLE_FILE_MAX_BYTES``.

    Returns ``(spec, order, swizzle label)``.

    Raises:
        SimulateError: the swizzle file cannot be read or is no rewrite target, an unknown catalog
            order, or the order is not a permutation (the worker's verdict and reason).
        KernelLoadError: ``kernel_path`` is no usable kernel module."""
    spec = load_spec(kernel_path)
    source = read_source(kernel_path)
    args = target_args(source, spec.rewrite_target)
    try:
        if swizzle_file is not None:
            target = read_source(swizzle_file, SWIZZLE_FILE_MAX_BYTES, "the swizzle file")
            label = str(swizzle_file)
            check_candidate(target, spec.rewrite_target, args)
        elif swizzle:
            own_target = target_source(source, spec.rewrite_target)
            target, label = catalog_source(swizzle, args, coordinates_of(own_target)), swizzle
        else:
            target, label = target_source(source, spec.rewrite_target), "kernel's own"
        module = splice(source, spec.rewrite_target, target)
    except (CandidateError, OSError, ValueError) as exc:
        raise SimulateError(str(exc)) from None
    with tempfile.TemporaryDirectory(prefix="swizzleperf-sim-") as folder:
        path, mapping = Path(folder) / kernel_path.name, Path(folder) / "order.npy"
        path.write_text(module)
        result = run_worker({"kernel_path": str(path), "stages": ["permutation"],
                             "problems": ["default", "check"], "mapping_path": str(mapping),
                             "meta_overrides": meta_overrides}, timeout_s, interpret=True)
        if not result.passed:
            raise SimulateError(f"{result.verdict.value}: {result.reason}")
        return spec, np.load(mapping), label


def trace_kernel(kernel_path: Path, meta_overrides: dict | None = None, timeout_s: float = 600.0,
                 problem: str = "default", sizes: dict | None = None, granule_bytes: int | None = None,
                 coordinate_splits: dict | None = None):
    """A problem's TileTrace (``sizes`` override its sizes) from the generic tracer (no hand-written
    access model):
    sampled programs recorded under the interpreter in a worker, extended by an affine fit, with
    reuse counted per ``granule_bytes`` (the target's L2 sector; the tracer's default line when None);
    ``coordinate_splits`` as profiling/tracer.py's ``extend`` takes them (merged launch axes).

    Raises:
        SimulateError: the kernel cannot be traced (the worker's reason, or the fit's), or its
            trace would pass the simulator's bound (``extend`` counts before it allocates)."""
    from swizzleperf.profiling.tracer import TraceError, extend
    spec = load_spec(kernel_path)
    result = run_worker({"kernel_path": str(kernel_path), "stages": ["trace"], "dtype": spec.dtypes[0],
                         "meta_overrides": meta_overrides or {}, "trace_problem": problem,
                         "problem_sizes": sizes or {}}, timeout_s,
                        interpret=True)
    if not result.passed:
        raise SimulateError(f"{result.verdict.value}: {result.reason}")
    recorded = result.details["trace"]
    samples = {tuple(t): a for t, a in zip(recorded["tiles"], recorded["accesses"])}
    meta = spec.meta_for(problem) if problem == "check" else {**spec.meta_for(problem), **(meta_overrides or {})}
    sized = {**spec.problems[problem], **(sizes or {})}
    occupancy = _model_trace(spec, sized, meta).programs_per_cu if spec.trace else 1
    try:
        granule = {"granule_bytes": granule_bytes} if granule_bytes else {}
        raw = recorded.get("divisors")   # the worker's: data, checked (extend drops what is no integer > 1)
        divisors = raw[:64] if isinstance(raw, list) else []
        return extend(samples, tuple(recorded["grid"]), occupancy, f"traced from {len(samples)} programs "
                      f"of {kernel_path.name} under the interpreter", coordinate_splits=coordinate_splits,
                      divisors=divisors, **granule)
    except TraceError as exc:
        raise SimulateError(f"cannot extend the trace: {exc}") from None
    except TraceTooLarge as exc:
        raise SimulateError(_too_large(spec, meta, exc)) from None


def kernel_trace(kernel_path: Path, spec, meta_overrides: dict, traced: bool, hardware=None):
    """The default problem's trace: the spec's access model, or the generic tracer's (``traced``,
    or no model: reuse counted per sector of ``hardware``'s L2, which fills and hits per sector:
    32 B on NVIDIA, 128 B on AMD); its reads marked as going through L1 or not by the launch's
    meta-parameters (``TileTrace.with_l1``).

    Raises:
        SimulateError: the trace cannot be made (the worker's reason), or the access model cannot
            be built under these meta-parameters (an overflow, a trace too large to hold)."""
    meta = {**spec.meta_for("default"), **meta_overrides}
    granule = hardware.l2_sector_bytes if hardware is not None else None
    if traced or spec.trace is None:
        return trace_kernel(Path(kernel_path), meta_overrides, granule_bytes=granule).with_l1(meta)
    if granule is not None and "granule_bytes" in inspect.signature(spec.trace).parameters:
        # a spec whose trace is the generic tracer's (a captured user kernel): the same granule
        return _model_trace(spec, spec.problems["default"], meta, granule_bytes=granule).with_l1(meta)
    return _model_trace(spec, spec.problems["default"], meta).with_l1(meta)


def _model_trace(spec, problem: dict, meta: dict, **options):
    """``spec.trace(problem, meta, **options)``, run here (a kernel's own access model).

    Raises:
        SimulateError: its trace would pass the simulator's bound (``TraceTooLarge``: the count and
            the bound), or it raised OverflowError, MemoryError, ZeroDivisionError or ValueError
            (numpy's "array is too big" among them): meta-parameters the model cannot take, named
            with the error, one line."""
    try:
        return spec.trace(problem, meta, **options)
    except TraceTooLarge as exc:
        raise SimulateError(_too_large(spec, meta, exc)) from None
    except (OverflowError, MemoryError, ZeroDivisionError, ValueError) as exc:
        raise SimulateError(f"the access model of {spec.name} cannot be built for meta-parameters "
                            f"{dict(meta)}: {_reason(exc)}") from None


def _reason(exc: BaseException) -> str:
    """``Type: message`` of an exception, its message on one line (a MemoryError may have none)."""
    text = " ".join(str(exc).split())[:300]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def schedule_for(spec, trace, hardware, meta: dict, problem: str = "default"):
    """The schedule model (``profiling.schedule_model``) the simulator times ``spec``'s programs with
    at ``problem`` under ``meta``, or None (lockstep): a model for a ``tl.dot`` kernel
    (``spec.compute == "matrix"``, with ``spec.flops``) on an NVIDIA GPU, as
    ``schedule_model.for_kernel`` says. A ``flops`` that raises is no model (one the access model
    could still simulate in lockstep)."""
    flops = getattr(spec, "flops", None)
    try:
        count = float(flops(spec.problems[problem])) if callable(flops) else None
    except (ArithmeticError, KeyError, TypeError, ValueError):
        count = None
    return schedule_model.for_kernel(hardware, count, getattr(spec, "compute", "vector"), trace, meta)


def load_probe(path: Path | None, hardware=None) -> dict | None:
    """A stored dispatch probe (``swizzleperf hw --probe``), or None; with ``hardware``, checked to
    place programs on that spec's L2 partitions (before any work, not after the simulation).

    Raises:
        SimulateError: the probe cannot be read, or its partitions are not the spec's."""
    if path is None:
        return None
    from swizzleperf.profiling.dispatch_probe import ProbeError, load
    try:
        stored = load(Path(path))
        if hardware is not None:
            l2sim.placement(1, hardware, 1, stored)
        return stored
    except (ProbeError, ValueError) as exc:
        raise SimulateError(str(exc)) from None


def _prepared(kernel_path: Path, hw: str, swizzle: str | None, swizzle_file: Path | None, meta: str | None,
              traced: bool, probe: Path | None) -> tuple:
    """What :func:`simulate_kernel` and :func:`analyze_kernel` work on, cheapest check first: the
    options (``meta``, ``hw``, ``probe``) before the kernel is loaded; a distributed kernel, and
    ``meta`` against the kernel (:func:`launch_meta`), before anything runs; the trace (an access
    model refuses one past the bound at once) before the order's worker.

    Returns ``(spec, hardware, stored probe, meta, trace, order, swizzle label)``."""
    overrides = parse_meta(meta)
    hardware = hwspecs.load_spec(hw)
    stored = load_probe(probe, hardware)
    spec = load_spec(Path(kernel_path))
    if not isinstance(spec, KernelSpec):
        raise SimulateError(f"{spec.name} is a distributed kernel (a DistKernelSpec): simulate and analyze "
                            f"take one GPU's kernel (a KernelSpec); optimize prices a distributed one")
    full_meta = launch_meta(spec, overrides)
    trace = kernel_trace(kernel_path, spec, overrides, traced, hardware)
    spec, order, label = program_order(Path(kernel_path), swizzle, swizzle_file, overrides)
    return spec, hardware, stored, full_meta, trace, order, label


def simulate_kernel(kernel_path: Path, hw: str, swizzle: str | None = None,
                    swizzle_file: Path | None = None, meta: str | None = None, traced: bool = False,
                    probe: Path | None = None) -> dict:
    """The simulator's figures for one kernel, hardware spec and order (a JSON-ready dict with
    ``l2_hit_rate`` 0..1, ``dram_bytes``, ``per_domain_hit_rate``, ``seconds`` of simulation, wall
    time, and ``cpu_seconds``, this process's processor time in it: the simulator's speed where
    other work shares the machine);
    with ``probe`` (a stored dispatch probe) programs are placed as it measured. The options
    (``meta``, ``hw``, ``probe``) are checked before the kernel is loaded, ``meta``'s names and the
    work it asks for before the kernel is run (:func:`_prepared`).

    Raises:
        SimulateError: a bad option, swizzle file or order; a trace or a simulation that cannot
            be made (one line each).
        UnknownHardwareError: ``hw`` names no spec.
        KernelLoadError: ``kernel_path`` is no usable kernel module."""
    spec, hardware, stored, full_meta, trace, order, label = _prepared(kernel_path, hw, swizzle, swizzle_file,
                                                                       meta, traced, probe)
    start, cpu = time.perf_counter(), time.process_time()
    try:
        result = l2sim.simulate(trace, order, hardware, probe=stored,
                                schedule=schedule_for(spec, trace, hardware, full_meta))
    except ValueError as exc:
        raise SimulateError(str(exc)) from None
    except (OverflowError, MemoryError) as exc:
        raise SimulateError(f"the simulation of {spec.name} cannot be run: {_reason(exc)}") from None
    return {"kernel": spec.name, "hardware": hardware.name, "swizzle": label,
            "problem": dict(spec.problems["default"]), "meta": full_meta,
            **result.to_dict(), "dram_bytes": result.dram_read_bytes + result.dram_write_bytes,
            "seconds": time.perf_counter() - start, "cpu_seconds": time.process_time() - cpu,
            "trace_source": trace.source}


def analyze_kernel(kernel_path: Path, hw: str, swizzle: str | None = None, meta: str | None = None,
                   traced: bool = False, probe: Path | None = None) -> str:
    """The memory-access analysis a proposer is shown, for one kernel, spec and order; the options
    checked first, as :func:`simulate_kernel` checks them.

    Raises:
        SimulateError, UnknownHardwareError, KernelLoadError: as :func:`simulate_kernel`."""
    spec, hardware, stored, full_meta, trace, order, _ = _prepared(kernel_path, hw, swizzle, None, meta, traced,
                                                                   probe)
    problem = spec.problems["default"]
    try:
        figures = analysis.analyze(trace, order, spec.tile_grid(problem, full_meta), hardware, stored)
    except ValueError as exc:
        raise SimulateError(str(exc)) from None
    except (OverflowError, MemoryError) as exc:
        raise SimulateError(f"the analysis of {spec.name} cannot be made: {_reason(exc)}") from None
    return analysis.render(figures, hardware, spec.rewrite_target)
