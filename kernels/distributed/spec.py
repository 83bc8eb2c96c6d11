"""The contract between a distributed kernel module and its runners: ``DistKernelSpec``.

A distributed kernel is a sequence of *steps* per rank: Triton launches (on the rank's main
stream or on a second, "comm" stream) and device barriers. The same steps run

- on GPUs, one process per rank (``runner.run_rank``; ``torchrun ... -m
  swizzleperf.kernels.distributed.bench``), the comm stream concurrent with the main one;
- on a CPU, all ranks in one process through the Triton interpreter (``runner.run_group``):
  step i of every rank, then step i + 1. So a step may wait only on flags set by earlier steps
  (of any rank) or by lower program ids of its own launch (the interpreter runs programs in id
  order); that is also what keeps it free of deadlocks on a GPU, where a launch's programs
  must all be resident when they wait on each other (the work-group-specialized pattern caps
  its grid at the SM count for this).

Flags count *epochs*: launch e sets a flag to e and waits for ``>= e``, so flags are never reset
between launches; every launch ends with a barrier, so launch e + 1 never overwrites buffers
that a peer still reads for launch e.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

Problem = Mapping[str, int]
Meta = Mapping[str, Any]


@dataclass(frozen=True)
class Step:
    """One step of a rank: a launch (``run``) on ``stream`` ("main" or "comm"), or a barrier."""

    run: Callable[[], None] | None = None
    stream: str = "main"
    barrier: bool = False
    name: str = ""


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

    def __post_init__(self) -> None:
        if "check" not in self.problems:
            raise ValueError(f"DistKernelSpec {self.name!r}: problems must include 'check'")
        missing = [p for p in self.bench_problems if p not in self.problems]
        if missing:
            raise ValueError(f"DistKernelSpec {self.name!r}: bench problems {missing} not in "
                             f"problems {sorted(self.problems)}")

    def meta_for(self, problem_name: str, overrides: Meta | None = None) -> dict:
        """Launch meta-parameters of a named problem, with ``overrides`` applied."""
        meta = dict(self.check_meta if problem_name == "check" else self.meta)
        meta.update(overrides or {})
        return meta
