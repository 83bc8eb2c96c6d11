"""Running a ``DistKernelSpec``: all ranks in one process (CPU, Triton interpreter) or one rank per
process on GPUs, with verification against the torch reference and event timing.
"""
from __future__ import annotations

import contextlib
import itertools
import math
import statistics
from dataclasses import dataclass
from typing import Callable, Sequence

import torch

from swizzleperf.kernels.distributed.heap import Heap, SpinTimeout, barrier_all
from swizzleperf.kernels.distributed.spec import DistKernelSpec, Step


@dataclass
class RankCheck:
    """One rank's verification: the relative error of its output against the reference."""

    rank: int
    error: float
    tolerance: float
    message: str = ""

    @property
    def ok(self) -> bool:
        return not self.message and self.error <= self.tolerance


def relative_error(output: torch.Tensor, expected: torch.Tensor) -> float:
    """``||output - expected||_F / ||expected||_F`` in fp64; ``inf`` where the output holds NaN
    (a poisoned element that was never written) or the shapes differ."""
    if tuple(output.shape) != tuple(expected.shape):
        return math.inf
    output, expected = output.double(), expected.double().to(output.device)
    if torch.isnan(output).any():
        return math.inf
    return float(torch.linalg.vector_norm(output - expected) /
                 torch.linalg.vector_norm(expected).clamp_min(1e-30))


def poison(tensor: torch.Tensor) -> None:
    """Fill an output with NaN (floats) or the most negative integer, so unwritten parts show."""
    if tensor.dtype.is_floating_point:
        tensor.fill_(float("nan"))
    else:
        tensor.fill_(torch.iinfo(tensor.dtype).min)


# --------------------------------------------------------------------------- one process (CPU)
def run_group(spec: DistKernelSpec, world_size: int, pattern: str | None = None,
              problem_name: str = "check", meta: dict | None = None, seed: int = 0,
              dtype: str | None = None, launches: int = 2,
              device: str = "cpu") -> list[RankCheck]:
    """All ``world_size`` ranks of one kernel in this process, ``launches`` launches in a row
    (the second proves that epoch-counted flags and buffers are reusable); returns each rank's
    check of the last launch. Steps run rank by rank: step i of every rank, then step i + 1.

    Raises:
        ValueError: an unknown pattern, or ranks with different step lists.
        SpinTimeout: a wait whose flag no earlier step set (a bug in the kernel's steps).
    """
    pattern = pattern or spec.patterns[0]
    if pattern not in spec.patterns:
        raise ValueError(f"{spec.name}: pattern must be one of {spec.patterns}, got {pattern!r}")
    dtype = dtype or spec.dtypes[0]
    problem = spec.problems[problem_name]
    meta = spec.meta_for(problem_name, meta)
    heaps = Heap.group(world_size, spec.heap_bytes(problem, world_size, dtype), device=device)
    inputs = [spec.make_inputs(problem, r, world_size, seed, device, dtype)
              for r in range(world_size)]
    states = [spec.setup(h, x, problem, meta) for h, x in zip(heaps, inputs)]
    for epoch in range(1, launches + 1):
        try:
            _launch_group(spec, heaps, states, pattern, epoch, meta)
        except SpinTimeout as exc:  # say which launch: flags count epochs
            raise SpinTimeout(f"{exc} (waiting for epoch {epoch}, launch {epoch} of {launches})") from None
    tolerance = spec.tolerance[dtype]
    return [RankCheck(r, relative_error(spec.output(s), spec.reference(inputs, r)), tolerance)
            for r, s in enumerate(states)]


def _launch_group(spec: DistKernelSpec, heaps: list, states: list, pattern: str, epoch: int,
                  meta: dict) -> None:
    """One launch of every rank, step by step (see ``run_group``)."""
    for state in states:
        poison(spec.output(state))
    steps = [spec.steps(h, s, pattern, epoch, meta) for h, s in zip(heaps, states)]
    if len({len(s) for s in steps}) != 1:
        raise ValueError(f"{spec.name}/{pattern}: ranks have different numbers of steps")
    for index in range(len(steps[0])):
        if steps[0][index].barrier:
            barrier_all(heaps)
            continue
        for rank_steps in steps:
            rank_steps[index].run()
    for heap in heaps:
        heap.check()


# --------------------------------------------------------------------------- one rank per process
class StepRunner:
    """Runs a rank's steps on its main stream and a second "comm" stream (GPUs).

    Comm-stream launches start after everything queued on the main stream before the launch
    began (``Step.after_main``: before the step), and the main stream waits for them before
    each barrier and at the end, so the two streams overlap only inside one launch of the
    kernel.
    """

    def __init__(self, heap: Heap) -> None:
        self.heap = heap
        self.main = torch.cuda.current_stream()
        self.comm = torch.cuda.Stream()

    def __call__(self, steps: Sequence[Step]) -> None:
        self.comm.wait_stream(self.main)
        for step in steps:
            if step.barrier:
                self.main.wait_stream(self.comm)
                self.heap.device_barrier()
            elif step.stream == "comm":
                if step.after_main:
                    self.comm.wait_stream(self.main)
                with torch.cuda.stream(self.comm):
                    step.run()
            else:
                step.run()
        self.main.wait_stream(self.comm)


def start_torchrun_rank() -> int:
    """This process as one rank under torchrun: NVLink multicast off (``heap.NO_MULTICAST_ENV``,
    before any symmetric memory is made), GPU ``LOCAL_RANK`` made current, NCCL's default process
    group started on it. Returns the local rank.

    Raises:
        RuntimeError: no CUDA GPU, or not started by torchrun (no ``LOCAL_RANK``).
    """
    import os

    import torch.distributed as dist
    from swizzleperf.kernels.distributed.heap import NO_MULTICAST_ENV
    for key, value in NO_MULTICAST_ENV.items():
        os.environ.setdefault(key, value)
    if not torch.cuda.is_available() or "LOCAL_RANK" not in os.environ:
        raise RuntimeError("needs CUDA GPUs and torchrun")
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local_rank))
    return local_rank


def gather_inputs(inputs: dict, world_size: int, group=None) -> list[dict]:
    """Every rank's input tensors, gathered over NCCL (a collective)."""
    import torch.distributed as dist
    gathered = [dict() for _ in range(world_size)]
    for key, tensor in inputs.items():
        parts = [torch.empty_like(tensor) for _ in range(world_size)]
        dist.all_gather(parts, tensor.contiguous(), group=group)
        for rank, part in enumerate(parts):
            gathered[rank][key] = part
    return gathered


@contextlib.contextmanager
def rank_state(spec: DistKernelSpec, heap: Heap, problem: dict, meta: dict, seed: int,
               dtype: str):
    """This rank's inputs and kernel state for one problem, ``(inputs, state)``: allocated on the
    heap (checked symmetric across ranks, a collective) and freed again on leaving."""
    inputs = spec.make_inputs(problem, heap.rank, heap.world_size, seed, heap.buffer.device, dtype)
    mark = len(heap.allocations)
    state = spec.setup(heap, inputs, problem, meta)
    heap.check_symmetric()
    try:
        yield inputs, state
    finally:
        heap.reset(mark)


def launcher(spec: DistKernelSpec, heap: Heap, state: dict, pattern: str, meta: dict,
             step: int | None = None) -> Callable[[], None]:
    """A callable that runs one launch of ``pattern`` per call, epochs 1, 2, ...; with ``step``,
    only that step of each launch's list (a part of the kernel timed alone)."""
    run_steps = StepRunner(heap)
    epochs = itertools.count(1)

    def launch() -> None:
        steps = spec.steps(heap, state, pattern, next(epochs), meta)
        run_steps(steps if step is None else [steps[step]])
    return launch


#: The factors ``launch_outputs`` scales the spec's linear input by before each launch queued back
#: to back: powers of two (exact in every float dtype), signs alternating, so a launch that reads
#: a buffer of the launch before or after it, or leaves an element unwritten, is off by a factor
#: of 2 at least; their product is 1 (the input ends as it began).
BACK_TO_BACK = (-2.0, 0.5, -4.0, 0.25)


def launch_outputs(spec: DistKernelSpec, heap: Heap, state: dict, inputs: dict,
                   launch: Callable[[], None], launches: int, sync: Callable[[], None],
                   phase: Callable[[str], None] = lambda text: None,
                   back_to_back: bool | None = None) -> list:
    """This rank's outputs to check, ``[(output, scale)]``: the last of ``launches`` launches,
    each with the output poisoned before it and the ranks synchronised around it (scale 1);
    then, on a GPU and where the spec names a ``linear_input``, each of ``len(BACK_TO_BACK)``
    launches queued back to back as they are timed, that input scaled on the stream before each
    (the output copied on the stream after it; its scale is the product so far). Every rank
    scales alike, so a launch that reads what a peer's later launch wrote, or what its earlier
    one left, shows as a wrong scale: the races of a hand-over without a barrier. ``phase``
    hears what runs; ``back_to_back`` forces the second part on or off (default: on a GPU).

    Raises:
        SpinTimeout: a wait gave up (``Heap.check``).
    """
    for index in range(launches):
        poison(spec.output(state))
        heap.barrier()
        phase(f"launch {index + 1} of {launches}")
        launch()
        sync()
        heap.check()
    outputs = [(spec.output(state).clone(), 1.0)]
    linear = inputs.get(spec.linear_input) if spec.linear_input else None
    if linear is not None and (linear.is_cuda if back_to_back is None else back_to_back):
        heap.barrier()
        phase(f"{len(BACK_TO_BACK)} launches back to back")
        scale = 1.0
        for factor in BACK_TO_BACK:
            linear.mul_(factor)
            scale *= factor
            launch()
            outputs.append((spec.output(state).clone(), scale))
        sync()
        heap.check()
    return outputs


def verify_rank(spec: DistKernelSpec, heap: Heap, problem_name: str, pattern: str, meta: dict,
                seed: int, dtype: str, group=None, launches: int = 2) -> tuple[RankCheck, RankCheck]:
    """Verify this rank's outputs (``launch_outputs``: ``launches`` synchronised launches, then
    launches back to back with the linear input scaled) and the torch + NCCL baseline's, all
    against the reference of the gathered inputs (a collective). The kernel's error is the worst
    of its outputs'.

    Returns:
        ``(kernel check, baseline check)`` of this rank; a spin-wait timeout becomes a failed
        check whose message names the rank and the flag.
    """
    problem = spec.problems[problem_name]
    tolerance = spec.tolerance[dtype]
    with rank_state(spec, heap, problem, meta, seed, dtype) as (inputs, state):
        launch = launcher(spec, heap, state, pattern, meta)
        message, outputs = "", []
        try:
            outputs = launch_outputs(spec, heap, state, inputs, launch, launches, torch.cuda.synchronize)
        except SpinTimeout as exc:
            message = str(exc)
        expected = spec.reference(gather_inputs(inputs, heap.world_size, group), heap.rank)
        error = max(relative_error(output, scale * expected)
                    for output, scale in outputs or [(spec.output(state), 1.0)])
        kernel = RankCheck(heap.rank, error, tolerance, message)
        torch_nccl = spec.baseline(inputs, problem, group)
        torch_nccl.run()
        baseline = RankCheck(heap.rank, relative_error(torch_nccl.result(), expected), tolerance)
        heap.barrier()
    return kernel, baseline


def time_rank(launch: Callable[[], None], heap: Heap, iterations: int = 20,
              warmup: int = 5, group=None, launches_per_sample: int = 10) -> dict:
    """Per-launch time of a collective operation in ms, measured with CUDA events.

    A sample is ``launches_per_sample`` launches queued back to back between two events,
    after a barrier that aligns the ranks (host synchronised): as with ``do_bench``, the
    host's launch overhead overlaps the GPU work instead of being timed, the same for the
    kernels and for the torch + NCCL baseline (both synchronise the ranks inside every launch:
    a device barrier, a collective). A sample's time is the slowest rank's. Returns
    ``{"median_ms", "iqr_ms", "samples"}`` over ``iterations`` samples, after ``warmup``
    untimed launches.
    """
    import torch.distributed as dist
    for _ in range(warmup):
        launch()
    times = []
    for _ in range(iterations):
        heap.barrier()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(launches_per_sample):
            launch()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / launches_per_sample)
    heap.barrier()
    local = torch.tensor(times, device=heap.buffer.device)
    everyone = [torch.empty_like(local) for _ in range(heap.world_size)]
    dist.all_gather(everyone, local, group=group)
    slowest = torch.stack(everyone).max(dim=0).values.tolist()
    quartiles = statistics.quantiles(slowest, n=4) if len(slowest) > 1 else [slowest[0]] * 3
    return {"median_ms": statistics.median(slowest), "iqr_ms": quartiles[2] - quartiles[0],
            "samples": len(slowest)}
