"""The contract between a distributed kernel module and its runners: ``DistKernelSpec``.

A distributed kernel is a sequence of *steps* per rank: Triton launches (on the rank's main
stream or on a second, "comm" stream) and device barriers. The same steps run

- on GPUs, one process per rank (``runner.run_rank``; ``torchrun ... -m
  bench.dist_bench``), the comm stream concurrent with the main one;
- on a CPU, all ranks in one process through the Triton interpreter (``runner.run_group``):
  step i of every rank, then step i + 1. So a step may wait only on flags set by earlier steps
  (of any rank) or by lower program ids of its own launch (the interpreter runs programs in id
  order); that is also what keeps it free of deadlocks on a GPU, where a launch's programs
  must all be resident when they wait on each other (the work-group-specialized pattern caps
  its grid at the SM count for this).

Flags count *epochs*: launch e sets a flag to e and waits for ``>= e``, so flags are never reset
between launches; every launch ends with a barrier, or, where a pattern leaves it out (the
push_copy_engine patterns), alternates the buffers that peers write by the epoch's parity, so
launch e + 1 never overwrites buffers that a peer still reads for launch e.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

Problem = Mapping[str, int]
Meta = Mapping[str, Any]


@dataclass(frozen=True)
class Step:
    """One step of a rank: a launch (``run``) on ``stream`` ("main" or "comm"), or a barrier.
    ``after_main``: a "comm" step that starts after everything queued on the main stream
    before it (else after what was queued before the launch began)."""

    run: Callable[[], None] | None = None
    stream: str = "main"
    barrier: bool = False
    name: str = ""
    after_main: bool = False


BARRIER = Step(barrier=True, name="barrier")


@dataclass(frozen=True)
class Baseline:
    """torch + NCCL doing what a distributed kernel does, buffers preallocated.

    ``run()`` is one timed launch (the matmul or attention plus the collective); ``result()``
    returns this rank's output in the kernel's layout (it may copy: it is never timed);
    ``compute()``, where given, runs the compute part alone (for the time breakdown).
    """

    run: Callable[[], None]
    result: Callable[[], Any]
    compute: Callable[[], None] | None = None


@dataclass(frozen=True)
class DistKernelSpec:
    """How to build, launch, check and benchmark one distributed kernel at any world size.

    Attributes:
        name: short name, e.g. ``"gemm_all_scatter"``.
        kernel_names: the ``@triton.jit`` kernels' names (what a profiler sees).
        patterns: the overlap patterns it implements; the first is the default.
        problems: named problem sizes (global sizes; shards derive from the world size);
            ``"check"`` is small enough for the Triton interpreter at world sizes 2 and 3.
        bench_problems: the problems the benchmark runs (``problems`` keys).
        meta: launch meta-parameters for real problems (tiles, ``COMM_SMS``, warps, stages).
        check_meta: meta-parameters for ``check`` under the interpreter.
        knobs: the overlap knobs a candidate may change, each with its allowed values
            (``pattern``, ``COMM_SMS``, ``swizzle`` catalog names, ...).
        make_inputs: ``(problem, rank, world_size, seed, device, dtype) -> dict`` of this rank's
            input tensors (random for the seed; rank r's inputs depend on (seed, r) only).
        heap_bytes: ``(problem, world_size, dtype) -> int``, the heap size one rank needs.
        setup: ``(heap, inputs, problem, meta) -> dict``: the rank's state; inputs copied into
            the heap where peers read them, outputs and flags allocated there.
        steps: ``(heap, state, pattern, epoch, meta) -> list[Step]``: one launch of the kernel.
        output: ``(state) -> Tensor``: this rank's result in the state.
        reference: ``(all_inputs, rank) -> Tensor``: rank ``rank``'s expected output (fp32),
            computed with torch from every rank's inputs (gathered over NCCL on GPUs).
        baseline: ``(inputs, problem, group) -> Baseline``: torch + NCCL doing the same.
        tolerance: per dtype name, the largest accepted ``||out - ref||_F / ||ref||_F``.
        flops: ``(problem, world_size) -> float``: floating-point operations per rank.
        comm_bytes: ``(problem, world_size, dtype) -> float``: bytes one rank sends to peers.
        min_bytes: ``(problem, world_size, dtype) -> float``: the fewest bytes one rank must
            read from its HBM (memory-bound kernels report GB/s against it); optional.
        dtypes: supported dtype names, the first the default.
        rewrite_target: the ``@triton.jit`` tile-order function that candidates replace.
        tile_orders: ``(problem, world_size, meta) -> [(tile grid, swizzle args), ...]``: every
            per-rank tile grid the kernel walks through the rewrite target (one entry per call
            site), with the integer arguments after the tile index; a candidate's target must be
            a permutation of each grid.
        constraints: ``(problem, world_size, pattern, meta) -> None`` when the configuration can
            run, else one line "X must be Y, got Z"; ``meta`` holds ``NUM_SMS``.
        pattern_knobs: the knobs each pattern reads (the others do not change it); a pattern
            that reads ``COMM_SMS`` gives its per-rank GEMM the other ``NUM_SMS - COMM_SMS``
            programs (``gemm_programs``).
        tile_configs: named GEMM tile configurations (dicts of tile knobs) the built-in policy
            searches; a candidate may also set the tile knobs one by one.
        check_knobs: the knobs a candidate carries to the ``check`` problem (the pattern always
            is); tile sizes and SM counts are not (the check keeps its interpreter-sized tiles).
        compute_shape: ``(problem, world_size) -> {"M", "N", "K"}``, the per-rank GEMM whose
            tile grid is the first of ``tile_orders`` (for the L2 simulator); None where the
            compute is not one GEMM.
        linear_input: the input (a key of ``make_inputs``' dict that the state holds as is) that
            the output is linear in: verification scales it on the stream between launches
            queued back to back and expects each launch's output scaled alike
            (``runner.launch_outputs``); None: no back-to-back check.
    """

    name: str
    kernel_names: tuple
    patterns: tuple
    problems: Mapping[str, Problem]
    bench_problems: tuple
    meta: Meta
    check_meta: Meta
    knobs: Mapping[str, tuple]
    make_inputs: Callable[..., dict]
    heap_bytes: Callable[..., int]
    setup: Callable[..., dict]
    steps: Callable[..., list]
    output: Callable[[dict], Any]
    reference: Callable[[list, int], Any]
    baseline: Callable[..., Baseline]
    tolerance: Mapping[str, float]
    flops: Callable[[Problem, int], float]
    comm_bytes: Callable[[Problem, int, str], float]
    dtypes: tuple = ("bfloat16",)
    min_bytes: Callable[[Problem, int, str], float] | None = None
    rewrite_target: str = "swizzle"
    expert: str | None = None
    notes: str = field(default="", compare=False)
    tile_orders: Callable[[Problem, int, Meta], list] | None = None
    constraints: Callable[[Problem, int, str, Meta], str | None] | None = None
    pattern_knobs: Mapping[str, tuple] = field(default_factory=dict)
    tile_configs: tuple = ()
    check_knobs: tuple = ()
    compute_shape: Callable[[Problem, int], dict] | None = None
    linear_input: str | None = None

    def __post_init__(self) -> None:
        if "check" not in self.problems:
            raise ValueError(f"DistKernelSpec {self.name!r}: problems must include 'check'")
        missing = [p for p in self.bench_problems if p not in self.problems]
        if missing:
            raise ValueError(f"DistKernelSpec {self.name!r}: bench problems {missing} not in "
                             f"problems {sorted(self.problems)}")

    def space(self, problem_name: str, world_size: int, num_sms: int) -> list:
        """Every configuration the built-in policy may propose at a problem and world size on a
        GPU of ``num_sms`` SMs: ``{"pattern": p, **knobs}`` over the patterns x the tile
        configurations x the values of the knobs each pattern reads (``swizzle`` excluded),
        those ``constraints`` refuses left out; the default configuration first."""
        problem = self.problems[problem_name]
        tiles = [dict(t) for t in self.tile_configs] or [{}]
        out = []
        for pattern in self.patterns:
            names = [k for k in self.pattern_knobs.get(pattern, ()) if k != "swizzle"]
            for tile in tiles:
                for values in itertools.product(*(self.knobs[k] for k in names)):
                    config = {**tile, **dict(zip(names, values))}
                    meta = {**self.meta_for(problem_name, config), "NUM_SMS": num_sms}
                    if self.constraints is None or self.constraints(problem, world_size, pattern, meta) is None:
                        out.append({"pattern": pattern, **config})
        defaults = {k for t in tiles for k in t} | set(self.pattern_knobs.get(self.patterns[0], ()))
        default = {"pattern": self.patterns[0], **{k: v for k, v in self.meta.items() if k in defaults}}
        out.sort(key=lambda c: c != default)
        return out

    def gemm_programs(self, pattern: str, meta: Meta) -> int:
        """Programs a pattern's per-rank GEMM runs on: ``NUM_SMS - COMM_SMS`` where the pattern
        reads ``COMM_SMS`` (its communication keeps those SMs: all-gather + GEMM push, GEMM +
        all-scatter producer_consumer and workgroup_specialized, GEMM + RS producer_consumer),
        else ``NUM_SMS``."""
        if "COMM_SMS" in self.pattern_knobs.get(pattern, ()):
            return meta["NUM_SMS"] - meta["COMM_SMS"]
        return meta["NUM_SMS"]

    def meta_for(self, problem_name: str, overrides: Meta | None = None) -> dict:
        """Launch meta-parameters of a named problem, with ``overrides`` applied."""
        meta = dict(self.check_meta if problem_name == "check" else self.meta)
        meta.update(overrides or {})
        return meta
