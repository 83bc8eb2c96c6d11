"""
Transpose: ``out = x.T`` for a large 2-D tensor
==============================================

Why this kernel
---------------
Pure data movement with a twist: a tile reads a *row-block* of x, whose rows are contiguous, and
writes a *column-block* of out, whose rows are the columns of x. Whatever the order, each byte of
x is read once and each byte of out written once, so no order can change how many bytes cross
the L2 (there is no reuse for it to catch). What an order can change is *how scattered* the
concurrent accesses are: the reads of the programs in flight at once, and the dirty lines they
leave in L2 for write-back to DRAM.

The blocked loop, in pseudo-code::

    for each program pid (all of one wave at once):
        pid_m, pid_n = swizzle(pid, num_pid_m, num_pid_n)
        tile = x[pid_m*BM : +BM, pid_n*BN : +BN]          # BM rows of x, BN contiguous elements each
        out[pid_n*BN : +BN, pid_m*BM : +BM] = tile.T      # BN rows of out, BM contiguous elements each

What a swizzle can and cannot change, counted by hand
-----------------------------------------------------
Default problem: M = N = 16384, bf16, tiles 64 x 64: a 256 x 256 tile grid, 65536 programs; x and
out are 512 MiB each. Each tile reads 64 runs of 128 B (one L2 line each) and writes 64 runs of
128 B. Tiles never share a line, so the L2 hit rate is 0 % under every order, on every GPU (and
the block-granular simulator reports exactly that): bytes read and written are fixed at 1 GiB.

What moves with the order is the *contiguity of the wave*. An H200 holds 132 x 12 = 1584
programs at once (12 per SM, by registers; see ``trace``). Counted over one wave, bf16:

- row-major (``pid_m = pid // 256``): the wave is 6.2 tile rows x 256 tile columns. Reads: 396
  rows of x, each read whole (32 KiB runs). Writes: all 16384 rows of out, each a run of
  6.2 x 128 B ~ 0.8 KiB at a 32 KiB stride: the dirty lines are scattered over all of out.
- column-major (``pid_m = pid % 256``): the mirror image: 0.8 KiB read runs over all 16384 rows
  of x; writes fill 396 rows of out whole (32 KiB runs).
- grouped-m:G: the wave is G tile rows x 1584/G tile columns: read runs of (1584/G) x 128 B,
  write runs of G x 128 B. Read and write runs are equal at G = sqrt(1584) = 40 (5 KiB each);
  column-major is grouped-m:G with G >= 256, the whole grid height.

Measured on an H200 (2026-11-22, interleaved do_bench medians, spread under 1 us), bf16 / fp32:

    row-major      292.4 / 544.6 us      grouped-m:32    295.5 / 547.1 us
    column-major   277.2 / 528.8 us      grouped-m:64    293.1 / 544.1 us
    grouped-m:16   295.8 / 547.2 us      grouped-m:128   286.8 / 540.0 us
    grouped-n:64   290.4 / 547.2 us      (1 GiB device copy: 4.25 TB/s)

The balanced groups (G = 16-64) gain nothing; the gain grows with the length of the *write* runs
once they reach whole rows of out: G = 128 (16 KiB write runs) -1.9 %, column-major (32 KiB)
-5.2 % in bf16, -2.9 % in fp32 (3.87 / 4.06 TB/s, against 3.67 / 3.94 row-major). Scattered
reads cost little (the DRAM scheduler reorders queued reads), scattered dirty lines cost more
(they leave L2 in eviction order, one by one). The mechanism is read off the timings, not from
DRAM counters: it is outside the L2 model, whose prediction is "no change" for every order.

Expert: ``column-major``: the write-contiguous end of the grouped-m family (G >= num_pid_m),
the fastest order measured in both dtypes.

Baseline: row-major, as naive kernels are written.
"""
from __future__ import annotations

import numpy as np
import torch
import triton
import triton.language as tl

from swizzleperf.kernels.spec import KernelSpec
from swizzleperf.kernels.trace import TileTrace, new_keys


@triton.jit
def swizzle(pid, num_pid_m, num_pid_n):
    """Map program id ``pid`` to the tile ``(pid_m, pid_n)`` of x it transposes (row-major)."""
    pid_m = pid // num_pid_n
    pid_n = pid % num_pid_n
    return pid_m, pid_n


@triton.jit
def transpose_kernel(
    x_ptr, out_ptr,  # x [M, N], out [N, M]
    M, N,
    stride_xm, stride_xn, stride_om, stride_on,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):
    """One program moves one ``BLOCK_M x BLOCK_N`` tile of x to its ``BLOCK_N x BLOCK_M`` place in
    out."""
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    pid_m, pid_n = swizzle(pid, num_pid_m, num_pid_n)

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)  # [BLOCK_M] rows of x = columns of out
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)  # [BLOCK_N] columns of x = rows of out
    x_ptrs = x_ptr + offs_m[:, None].to(tl.int64) * stride_xm + offs_n[None, :] * stride_xn
    x_mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)  # [BLOCK_M, BLOCK_N]
    tile = tl.load(x_ptrs, mask=x_mask)

    out_ptrs = out_ptr + offs_n[:, None].to(tl.int64) * stride_om + offs_m[None, :] * stride_on
    out_mask = (offs_n[:, None] < N) & (offs_m[None, :] < M)  # [BLOCK_N, BLOCK_M]
    tl.store(out_ptrs, tl.trans(tile), mask=out_mask)


def launch(inputs: dict, BLOCK_M: int, BLOCK_N: int, num_warps: int = 4, num_stages: int = 1) -> None:
    """Compute ``inputs["out"] = inputs["x"].T`` (x [M, N], out [N, M])."""
    x, out = inputs["x"], inputs["out"]
    M, N = x.shape
    grid = (triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N),)
    transpose_kernel[grid](
        x, out, M, N, x.stride(0), x.stride(1), out.stride(0), out.stride(1),
        BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, num_warps=num_warps, num_stages=num_stages,
    )


def make_inputs(problem: dict, seed: int, device: str = "cpu", dtype: str = "bfloat16") -> dict:
    """Fresh x [M, N] ~ N(0, 1) in ``dtype`` for ``seed``; out [N, M] uninitialised."""
    generator = torch.Generator(device=device).manual_seed(seed)
    torch_dtype = getattr(torch, dtype)
    M, N = problem["M"], problem["N"]
    x = torch.randn(M, N, generator=generator, device=device, dtype=torch.float32).to(torch_dtype)
    out = torch.empty(N, M, device=device, dtype=torch_dtype)
    return {"x": x, "out": out}


def reference(inputs: dict) -> torch.Tensor:
    """``x.T`` itself, [N, M] in the input dtype (data movement: bit-exact is the only right answer)."""
    return inputs["x"].t().contiguous()


def tile_grid(problem: dict, meta: dict) -> tuple:
    """Logical tile grid ``(num_pid_m, num_pid_n)`` over x."""
    return (triton.cdiv(problem["M"], meta["BLOCK_M"]), triton.cdiv(problem["N"], meta["BLOCK_N"]))


def trace(problem: dict, meta: dict) -> TileTrace:
    """The access model of this kernel: tile (m, n) reads x block (m, n) and writes out block
    (n, m); one step. Block ids: x blocks first (m * num_n + n), then out blocks in out's own
    row-major tile numbering (num_m * num_n + n * num_m + m). Bytes at the default dtype (bf16,
    2 bytes); edge blocks at their clipped size. No block is touched by two tiles.

    programs_per_cu = 12: a program is 4 warps (128 threads) of 38 registers (allocated as 40) and
    exchanges its tile through 8 KiB of shared memory (bf16, triton 3.6 on an H200); 64K registers
    per SM / (128 x 40) = 12.8, so 12 programs (threads would allow 16, shared memory 27).
    """
    M, N = problem["M"], problem["N"]
    BM, BN = meta["BLOCK_M"], meta["BLOCK_N"]
    num_m, num_n = triton.cdiv(M, BM), triton.cdiv(N, BN)
    keys = new_keys(num_m * num_n, 1, 2)
    rows = np.minimum(BM, M - np.arange(num_m) * BM)  # [num_m] rows of x in each tile row
    cols = np.minimum(BN, N - np.arange(num_n) * BN)  # [num_n]
    elt = 2
    x_bytes = (rows[:, None] * cols[None, :] * elt).ravel()      # x blocks, (m, n) row-major
    out_bytes = (cols[:, None] * rows[None, :] * elt).ravel()    # out blocks, (n, m) row-major
    m = np.repeat(np.arange(num_m), num_n)  # [tiles] row-major over the tile grid
    n = np.tile(np.arange(num_n), num_m)
    keys[:, 0, 0] = m * num_n + n
    keys[:, 0, 1] = num_m * num_n + n * num_m + m
    block_bytes = np.concatenate([x_bytes, out_bytes]).astype(np.int64)
    return TileTrace.reads_then_writes(keys, block_bytes, first_write=num_m * num_n,
                                       programs_per_cu=16, source="access model in kernels/transpose.py")


SPEC = KernelSpec(
    name="transpose",
    kernel_name="transpose_kernel",
    problems={
        # x and out 512 MiB each in bf16 (1.07 GB moved, ~18x an H200's 60 MB L2).
        "default": {"M": 16384, "N": 16384},
        "tall": {"M": 65536, "N": 4096},
        # 4 x 3 = 12 programs (not a multiple of 8) with 32 x 32 tiles; M != N so that a swapped
        # stride or bound shows, and ragged edges in both dimensions.
        "check": {"M": 100, "N": 72},
    },
    # 64 x 64, 4 warps: 3.7 TB/s in bf16 and 3.9 TB/s in fp32 row-major on an H200 (86 % and 93 % of
    # a plain device copy's 4.25 TB/s), 2026-11-22.
    meta={"BLOCK_M": 64, "BLOCK_N": 64, "num_warps": 4, "num_stages": 1},
    check_meta={"BLOCK_M": 32, "BLOCK_N": 32, "num_warps": 4, "num_stages": 1},
    make_inputs=make_inputs,
    launch=launch,
    reference=reference,
    output_name="out",
    # Pure data movement: every element is copied bit for bit, so exact equality (0.0) is the only
    # correct result in every dtype.
    tolerance={"bfloat16": 0.0, "float16": 0.0, "float32": 0.0},
    tile_grid=tile_grid,
    swizzle_args=tile_grid,
    trace=trace,
    flops=lambda p: 0.0,
    min_bytes=lambda p, dtype: getattr(torch, dtype).itemsize * 2.0 * p["M"] * p["N"],
    dtypes=("bfloat16", "float16", "float32"),
    rewrite_target="swizzle",
    # column-major: a wave of 1584 programs writes 396 whole rows of out (32 KiB runs) instead of
    # 0.8 KiB runs scattered over all of out (row-major): 5.2 % faster in bf16, 2.9 % in fp32 on an
    # H200, the best of the catalog's orders measured (module docstring). Invisible to the L2 model.
    expert="column-major",
    # None: out [N, M] is tiled like the *transposed* grid (tile (m, n) writes out block (n, m)),
    # and the verifier maps unwritten elements onto the grid's own axes.
    output_tile=None,
)
