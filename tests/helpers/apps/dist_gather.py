"""A toy distributed kernel for the rank pool's tests: every rank's vector gathered, doubled.

Rank r holds x_r [N / W] (fp32); every rank's output is ``2 * [x_0; x_1; ...]`` [N]. Two patterns:

- ``push``: one kernel puts x_r into slot r of every rank's gathered buffer and sets a flag per
  block in that rank's heap; a second one waits for each block's flag, then doubles it into the
  output (producer-consumer through flags, with bounded waits);
- ``bulk_sync``: the same put without flags, a barrier, then the doubling.

The module-level ``*_RANK`` switches make one rank misbehave (the tests set them by rewriting the
copy of this file they hand to the pool): hang in its setup, die in a launch, skip its signals, compute a
wrong result. Small enough for the Triton interpreter in a few seconds at W = 2.
"""
from __future__ import annotations

import os
import time

import torch
import triton
import triton.language as tl

from swizzleperf.kernels.distributed import device
from swizzleperf.kernels.distributed.spec import BARRIER, Baseline, DistKernelSpec, Step

HANG_RANK = None      # this rank sleeps for an hour in its setup (its peers wait in a collective)
EXIT_RANK = None      # this rank's process exits (code 3) inside a launch
SILENT_RANK = None    # this rank never signals its blocks (its peers' waits give up)
WRONG_RANK = None     # this rank's output is tripled instead of doubled

PATTERNS = ("push", "bulk_sync")


@triton.jit
def swizzle(pid, num_blocks):
    """Block ``pid`` of the rank's vector (the identity order)."""
    return pid


@triton.jit(do_not_specialize=["epoch"])
def gather_push(x_ptr, gathered_ptr, flags, heap_bases, rank, epoch, n,
                SIGNAL: tl.constexpr, WORLD_SIZE: tl.constexpr, BLOCK: tl.constexpr):
    """Put block ``swizzle(pid)`` of x_r [n] into slot ``rank`` of every peer's gathered
    [W * n]; with SIGNAL, then set that peer's flag [rank, block] to ``epoch``."""
    blocks = tl.num_programs(0)
    block = swizzle(tl.program_id(0), blocks)
    offs = block * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    values = tl.load(x_ptr + offs, mask=mask)
    for peer in tl.static_range(WORLD_SIZE):
        device.store(gathered_ptr + rank * n + offs, values, rank, peer, heap_bases, mask=mask)
        if SIGNAL:
            device.signal(flags + rank * blocks + block, epoch, rank, peer, heap_bases)


@triton.jit(do_not_specialize=["epoch"])
def gather_scale(gathered_ptr, out_ptr, flags, errors, flag_kind, epoch, max_spins, n, scale,
                 WAIT: tl.constexpr, WORLD_SIZE: tl.constexpr, BLOCK: tl.constexpr):
    """out[src * n + block] = scale * gathered[src * n + block] for every source rank, after
    waiting (WAIT) for the block's flag from that source."""
    blocks = tl.num_programs(0)
    block = swizzle(tl.program_id(0), blocks)
    offs = block * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    for src in tl.static_range(WORLD_SIZE):
        if WAIT:
            device.wait(flags + src * blocks + block, epoch, errors, flag_kind, src * blocks + block,
                        src, max_spins)
        values = tl.load(gathered_ptr + src * n + offs, mask=mask)
        tl.store(out_ptr + src * n + offs, values * scale, mask=mask)


def make_inputs(problem: dict, rank: int, world_size: int, seed: int, device: str = "cpu",
                dtype: str = "float32") -> dict:
    """x_r [N / W] ~ N(0, 1) for (seed, rank). Raises ValueError: N not a multiple of W."""
    if problem["N"] % world_size:
        raise ValueError(f"N must be a multiple of the world size {world_size}, got N={problem['N']}")
    own = torch.Generator(device=device).manual_seed(seed * 1009 + rank + 1)
    return {"x": torch.randn(problem["N"] // world_size, generator=own, device=device).to(getattr(torch, dtype))}


def heap_bytes(problem: dict, world_size: int, dtype: str) -> int:
    """x_r, the gathered [N], a flag per (rank, block of >= 8) and 1 MiB of control block."""
    n = problem["N"]
    return 4 * (n // world_size + n) + 4 * world_size * triton.cdiv(n, 8) + (1 << 20)


def setup(heap, inputs: dict, problem: dict, meta: dict) -> dict:
    if heap.rank == HANG_RANK:
        time.sleep(3600)
    x = heap.like(inputs["x"], name="x")
    n = x.numel()
    gathered = heap.zeros(heap.world_size * n, dtype=x.dtype, name="gathered")
    flags, kind = heap.flags(heap.world_size * triton.cdiv(n, meta["BLOCK"]), "block_ready")
    out = torch.empty(heap.world_size * n, dtype=x.dtype, device=x.device)
    return {"x": x, "gathered": gathered, "flags": flags, "flag_kind": kind, "out": out}


def steps(heap, state: dict, pattern: str, epoch: int, meta: dict) -> list:
    x, gathered, out = state["x"], state["gathered"], state["out"]
    n, world, block = x.numel(), heap.world_size, meta["BLOCK"]
    grid = (triton.cdiv(n, block),)
    signal = pattern == "push" and heap.rank != SILENT_RANK
    scale = 3.0 if heap.rank == WRONG_RANK else 2.0

    def push() -> None:
        if heap.rank == EXIT_RANK:
            os._exit(3)
        gather_push[grid](x, gathered, state["flags"], heap.heap_bases, heap.rank, epoch, n,
                          SIGNAL=signal, WORLD_SIZE=world, BLOCK=block, num_warps=meta["num_warps"])

    def double(wait: bool):
        return lambda: gather_scale[grid](gathered, out, state["flags"], heap.errors, state["flag_kind"],
                                          epoch, heap.max_spins, n, scale, WAIT=wait, WORLD_SIZE=world,
                                          BLOCK=block, num_warps=meta["num_warps"])

    if pattern == "push":
        return [Step(push, stream="comm", name="push"), Step(double(True), name="scale"), BARRIER]
    if pattern == "bulk_sync":
        return [Step(push, name="push"), BARRIER, Step(double(False), name="scale"), BARRIER]
    raise ValueError(f"pattern must be one of {PATTERNS}, got {pattern!r}")


def reference(all_inputs: list, rank: int) -> torch.Tensor:
    return 2.0 * torch.cat([inputs["x"].float() for inputs in all_inputs])


def baseline(inputs: dict, problem: dict, group=None) -> Baseline:
    """torch + the process group's all_gather, then the doubling."""
    import torch.distributed as dist
    x = inputs["x"]
    world = dist.get_world_size(group)
    parts = [torch.empty_like(x) for _ in range(world)]
    out = torch.empty(world * x.numel(), dtype=x.dtype, device=x.device)

    def run() -> None:
        dist.all_gather(parts, x, group=group)
        torch.mul(torch.cat(parts), 2.0, out=out)

    return Baseline(run, lambda: out, compute=lambda: torch.mul(out, 1.0, out=out))


def tile_orders(problem: dict, world_size: int, meta: dict) -> list:
    blocks = triton.cdiv(problem["N"] // world_size, meta["BLOCK"])
    return [((blocks,), (blocks,))]


SPEC = DistKernelSpec(
    name="dist_gather",
    kernel_names=("gather_push", "gather_scale"),
    patterns=PATTERNS,
    problems={"check": {"N": 40}, "small": {"N": 96}},
    bench_problems=("small",),
    meta={"BLOCK": 32, "num_warps": 4},
    check_meta={"BLOCK": 8, "num_warps": 4},
    knobs={"pattern": PATTERNS, "BLOCK": (8, 16, 32)},
    make_inputs=make_inputs,
    heap_bytes=heap_bytes,
    setup=setup,
    steps=steps,
    output=lambda state: state["out"],
    reference=reference,
    baseline=baseline,
    tolerance={"float32": 1e-6},
    flops=lambda p, w: float(p["N"]),
    comm_bytes=lambda p, w, dtype: 4.0 * (w - 1) * p["N"] / w,
    dtypes=("float32",),
    tile_orders=tile_orders,
)
