"""``swizzleperf simulate`` and ``swizzleperf analyze``: the simulator and the access analysis of one
kernel and one order, without a GPU and without a run."""
from __future__ import annotations

import inspect
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
from swizzleperf.profiling import analysis, l2sim
from swizzleperf.sandbox.untrusted import read_source


class SimulateError(Exception):
    """Bad options or a swizzle that is not a permutation; one line for the user."""


def parse_meta(text: str | None) -> dict:
    """``"BLOCK_M=128,BLOCK_N=256"`` -> ``{"BLOCK_M": 128, "BLOCK_N": 256}``.

    Raises:
        SimulateError: an item is not ``NAME=INTEGER``.
    """
    meta = {}
    for item in filter(None, (text or "").split(",")):
        name, _, value = item.partition("=")
        if not name.strip() or not value.strip().lstrip("-").isdigit():
            raise SimulateError(f"--meta items must be NAME=INTEGER, got {item!r}")
        meta[name.strip()] = int(value)
    return meta


def program_order(kernel_path: Path, swizzle: str | None, swizzle_file: Path | None,
                  meta_overrides: dict, timeout_s: float = 300.0) -> tuple:
    """The default problem's program -> tile order of a kernel with its own swizzle, a catalog
    member, or the rewrite target in ``swizzle_file``; verified to be a permutation (in a worker).

    Returns ``(spec, order, swizzle label)``. Raises SimulateError."""
    spec = load_spec(kernel_path)
    source = read_source(kernel_path)
    args = target_args(source, spec.rewrite_target)
    try:
        if swizzle_file is not None:
            target, label = Path(swizzle_file).read_text(), str(swizzle_file)
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
        SimulateError: the kernel cannot be traced (the worker's reason, or the fit's)."""
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
    occupancy = spec.trace({**spec.problems[problem], **(sizes or {})}, meta).programs_per_cu if spec.trace else 1
    try:
        granule = {"granule_bytes": granule_bytes} if granule_bytes else {}
        return extend(samples, tuple(recorded["grid"]), occupancy, f"traced from {len(samples)} programs "
                      f"of {kernel_path.name} under the interpreter", coordinate_splits=coordinate_splits,
                      **granule)
    except TraceError as exc:
        raise SimulateError(f"cannot extend the trace: {exc}") from None


def kernel_trace(kernel_path: Path, spec, meta_overrides: dict, traced: bool, hardware=None):
    """The default problem's trace: the spec's access model, or the generic tracer's (``traced``,
    or no model: reuse counted per sector of ``hardware``'s L2, which fills and hits per sector:
    32 B on NVIDIA, 128 B on AMD); its reads marked as going through L1 or not by the launch's
    meta-parameters (``TileTrace.with_l1``)."""
    meta = {**spec.meta_for("default"), **meta_overrides}
    granule = hardware.l2_sector_bytes if hardware is not None else None
    if traced or spec.trace is None:
        return trace_kernel(Path(kernel_path), meta_overrides, granule_bytes=granule).with_l1(meta)
    if granule is not None and "granule_bytes" in inspect.signature(spec.trace).parameters:
        # a spec whose trace is the generic tracer's (a captured user kernel): the same granule
        return spec.trace(spec.problems["default"], meta, granule_bytes=granule).with_l1(meta)
    return spec.trace(spec.problems["default"], meta).with_l1(meta)


def load_probe(path: Path | None) -> dict | None:
    """A stored dispatch probe (``swizzleperf hw --probe``), or None. Raises SimulateError."""
    if path is None:
        return None
    from swizzleperf.profiling.dispatch_probe import ProbeError, load
    try:
        return load(Path(path))
    except ProbeError as exc:
        raise SimulateError(str(exc)) from None


def simulate_kernel(kernel_path: Path, hw: str, swizzle: str | None = None,
                    swizzle_file: Path | None = None, meta: str | None = None, traced: bool = False,
                    probe: Path | None = None) -> dict:
    """The simulator's figures for one kernel, hardware spec and order (a JSON-ready dict with
    ``l2_hit_rate`` 0..1, ``dram_bytes``, ``per_domain_hit_rate``, ``seconds`` of simulation);
    with ``probe`` (a stored dispatch probe) programs are placed as it measured."""
    overrides = parse_meta(meta)
    stored = load_probe(probe)
    spec, order, label = program_order(Path(kernel_path), swizzle, swizzle_file, overrides)
    hardware = hwspecs.load_spec(hw)
    full_meta = {**spec.meta_for("default"), **overrides}
    trace = kernel_trace(kernel_path, spec, overrides, traced, hardware)
    start = time.perf_counter()
    try:
        result = l2sim.simulate(trace, order, hardware, probe=stored)
    except ValueError as exc:
        raise SimulateError(str(exc)) from None
    return {"kernel": spec.name, "hardware": hardware.name, "swizzle": label,
            "problem": dict(spec.problems["default"]), "meta": full_meta,
            **result.to_dict(), "dram_bytes": result.dram_read_bytes + result.dram_write_bytes,
            "seconds": time.perf_counter() - start, "trace_source": trace.source}


def analyze_kernel(kernel_path: Path, hw: str, swizzle: str | None = None, meta: str | None = None,
                   traced: bool = False, probe: Path | None = None) -> str:
    """The memory-access analysis a proposer is shown, for one kernel, spec and order."""
    overrides = parse_meta(meta)
    stored = load_probe(probe)
    spec, order, _ = program_order(Path(kernel_path), swizzle, None, overrides)
    hardware = hwspecs.load_spec(hw)
    full_meta = {**spec.meta_for("default"), **overrides}
    problem = spec.problems["default"]
    trace = kernel_trace(kernel_path, spec, overrides, traced, hardware)
    try:
        figures = analysis.analyze(trace, order, spec.tile_grid(problem, full_meta), hardware, stored)
    except ValueError as exc:
        raise SimulateError(str(exc)) from None
    return analysis.render(figures, hardware, spec.rewrite_target)
