"""
LayerNorm forward: ``y = (x - mean) / sqrt(var + eps) * w + b`` over the rows of x
===================================================================================

Why this kernel
---------------
Row-wise normalisation is the other half of a transformer layer's memory traffic: every
activation row ``x[i, :]`` (``N`` = the hidden size) is read once, its mean and variance taken in
fp32, and the normalised row written once, scaled by the weight ``w`` and shifted by the bias
``b`` that all rows share. It is the clean counter-example to GEMM: the program -> row-block
mapping (this file's rewrite target, ``swizzle``) has almost nothing to work with, and the
optimizer should find that out rather than invent a gain.

The blocked loop, in pseudo-code (one program per block of ``BLOCK_M`` rows; when the whole row
fits in one ``BLOCK_N`` tile, ``ONE_TILE``, the three passes read the registers, not memory)::

    for each program pid:
        tile = swizzle(pid, num_pids)                    # num_pids = cdiv(M, BLOCK_M)
        rows = tile*BM : +BM
        mean = sum_k x[rows, k:k+BN] / N                 # pass 1, fp32
        var  = sum_k (x[rows, k:k+BN] - mean)^2 / N      # pass 2, fp32 (two-pass: no cancellation)
        for k in range(0, N, BLOCK_N):                   # pass 3
            y[rows, k:k+BN] = (x[rows, k:k+BN] - mean) * rstd * w[k:k+BN] + b[k:k+BN]

What a swizzle can and cannot change, counted by hand
-----------------------------------------------------
At the default problem (M = 65536, N = 4096, bf16; ``BLOCK_M = 2``, ``BLOCK_N = 4096``) the grid
is 32768 programs. Each reads its two rows once (16 KiB), w and b (8 KiB each), and writes its
rows (16 KiB). Rows are disjoint and 8 KiB is a whole number of 128 B lines, so no two programs share a
single line of x or y: the 512 MiB of x are compulsory DRAM reads and the 512 MiB of y compulsory
writes, whatever the order. The only shared data are w and b, 16 KiB together: after the first
program on an L2 domain has read them they hit there for everyone else, under *any* order (on an
MI300X they are fetched once per XCD, 8 x 16 KiB = 128 KiB against 1 GiB moved: 0.01 %). So the
read hit rate is fixed near 1/2 (w and b hit, x misses) by the data, not by the order: the
simulator gives 50.0 % on an MI300X and an H200 for the identity and ``xcd-contiguous:8`` alike.

What the order cannot change: the row reads (no reuse), the write stream, w/b reuse. What it
could change in principle: when a row is not a whole number of lines (N * elt % 128 != 0), rows
``i`` and ``i+1`` share one line at their boundary; round-robin dispatch over 8 XCDs puts them on
different L2s, ``xcd-contiguous`` on the same one. That is one line per row, 1.5 % of the row at
N = 4096 were it unaligned, and exactly 0 at the default problem. Hence **expert = None**: no
order can matter here, and a claimed gain is noise. Cross-row-block *time* locality (DRAM pages,
prefetchers) is outside the L2 model and outside what a swizzle is meant to change.

Measured on an NVIDIA H200 (triton 3.6, do_bench median, L2 flushed, 2026-11-22): 259 us for
bf16 and fp16 at the default problem, 4.15 TB/s of the 1.07 GB that must move (2 rows, 8 warps;
1 row and 8 warps: 298 us; 1 row and 4 warps: 264 us; 4 rows: 276 us).

Baseline: the identity (program p normalises row block p), as naive code is written.
"""
from __future__ import annotations

import numpy as np
import torch
import triton
import triton.language as tl

from swizzleperf.kernels.spec import KernelSpec
from swizzleperf.kernels.trace import TileTrace, new_keys

EPS = 1e-5  # the usual LayerNorm epsilon (torch.nn.LayerNorm's default)


@triton.jit
def swizzle(pid, num_pids):
    """Map program id ``pid`` to the row block ``tile`` it normalises (identity)."""
    tile = pid
    return tile


@triton.jit
def layernorm_kernel(
    x_ptr, w_ptr, b_ptr, y_ptr,  # x [M, N], w [N], b [N], y [M, N]
    M, N, stride_xm, stride_ym, eps,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, ONE_TILE: tl.constexpr,
):
    """One program normalises ``BLOCK_M`` rows; statistics in fp32."""
    pid = tl.program_id(axis=0)
    num_pids = tl.cdiv(M, BLOCK_M)
    tile = swizzle(pid, num_pids)

    offs_m = tile * BLOCK_M + tl.arange(0, BLOCK_M)  # [BLOCK_M]
    # Rows past M (last block) are wrapped to valid rows for the loads and masked at the store.
    rows = (offs_m % M).to(tl.int64)
    offs_n = tl.arange(0, BLOCK_N)
    x_rows = x_ptr + rows[:, None] * stride_xm  # [BLOCK_M, 1]
    y_rows = y_ptr + offs_m.to(tl.int64)[:, None] * stride_ym
    row_mask = offs_m[:, None] < M

    if ONE_TILE:  # the whole row in registers: one read of x, one write of y
        col_mask = offs_n[None, :] < N
        x = tl.load(x_rows + offs_n[None, :], mask=col_mask, other=0.0).to(tl.float32)
        mean = tl.sum(x, axis=1) / N
        diff = tl.where(col_mask, x - mean[:, None], 0.0)
        rstd = 1.0 / tl.sqrt(tl.sum(diff * diff, axis=1) / N + eps)
        w = tl.load(w_ptr + offs_n, mask=offs_n < N, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + offs_n, mask=offs_n < N, other=0.0).to(tl.float32)
        y = diff * rstd[:, None] * w[None, :] + b[None, :]
        tl.store(y_rows + offs_n[None, :], y.to(y_ptr.dtype.element_ty), mask=row_mask & col_mask)
    else:  # three passes over column blocks (the second and third re-read x, mostly from L2)
        num_k = tl.cdiv(N, BLOCK_N)
        total = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k in range(0, num_k):
            cols = k * BLOCK_N + offs_n
            total += tl.load(x_rows + cols[None, :], mask=cols[None, :] < N, other=0.0).to(tl.float32)
        mean = tl.sum(total, axis=1) / N
        squares = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k in range(0, num_k):
            cols = k * BLOCK_N + offs_n
            col_mask = cols[None, :] < N
            x = tl.load(x_rows + cols[None, :], mask=col_mask, other=0.0).to(tl.float32)
            diff = tl.where(col_mask, x - mean[:, None], 0.0)
            squares += diff * diff
        rstd = 1.0 / tl.sqrt(tl.sum(squares, axis=1) / N + eps)
        for k in range(0, num_k):
            cols = k * BLOCK_N + offs_n
            col_mask = cols[None, :] < N
            x = tl.load(x_rows + cols[None, :], mask=col_mask, other=0.0).to(tl.float32)
            w = tl.load(w_ptr + cols, mask=cols < N, other=0.0).to(tl.float32)
            b = tl.load(b_ptr + cols, mask=cols < N, other=0.0).to(tl.float32)
            y = (x - mean[:, None]) * rstd[:, None] * w[None, :] + b[None, :]
            tl.store(y_rows + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=row_mask & col_mask)


def launch(inputs: dict, BLOCK_M: int, BLOCK_N: int, num_warps: int = 8, num_stages: int = 1) -> None:
    """Compute ``inputs["y"] = layer_norm(inputs["x"]) * w + b`` (x, y [M, N]; w, b [N])."""
    x, w, b, y = inputs["x"], inputs["w"], inputs["b"], inputs["y"]
    M, N = x.shape
    grid = (triton.cdiv(M, BLOCK_M),)
    layernorm_kernel[grid](
        x, w, b, y, M, N, x.stride(0), y.stride(0), EPS,
        BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, ONE_TILE=BLOCK_N >= N,
        num_warps=num_warps, num_stages=num_stages,
    )


def make_inputs(problem: dict, seed: int, device: str = "cpu", dtype: str = "bfloat16") -> dict:
    """Fresh x [M, N] (rows with their own offset and scale, as activations have), w [N] near 1,
    b [N] near 0, in ``dtype`` for ``seed``; y [M, N] uninitialised."""
    generator = torch.Generator(device=device).manual_seed(seed)
    torch_dtype = getattr(torch, dtype)
    M, N = problem["M"], problem["N"]

    def randn(*shape):
        return torch.randn(*shape, generator=generator, device=device, dtype=torch.float32)

    offset, scale = 4.0 * randn(M, 1), 0.5 + randn(M, 1).abs()  # [M, 1]: mean ~ +-4, std 0.5..3
    x = (offset + scale * randn(M, N)).to(torch_dtype)
    w = (1.0 + 0.1 * randn(N)).to(torch_dtype)
    b = (0.1 * randn(N)).to(torch_dtype)
    y = torch.empty(M, N, device=device, dtype=torch_dtype)
    return {"x": x, "w": w, "b": b, "y": y}


def reference(inputs: dict) -> torch.Tensor:
    """float64 LayerNorm of the upcast inputs, [M, N] float64."""
    x, w, b = inputs["x"].double(), inputs["w"].double(), inputs["b"].double()
    return torch.nn.functional.layer_norm(x, (x.shape[1],), w, b, eps=EPS)


def tile_grid(problem: dict, meta: dict) -> tuple:
    """Logical tile grid ``(num_pids,)``: one row block of ``BLOCK_M`` rows per program."""
    return (triton.cdiv(problem["M"], meta["BLOCK_M"]),)


def trace(problem: dict, meta: dict) -> TileTrace:
    """The access model of this kernel at 2 bytes per element (bf16 / fp16).

    Block ids: x blocks (m * num_k + k), then w blocks (k), then b blocks (k), then y blocks
    (m * num_k + k); a block is ``BLOCK_M x BLOCK_N`` (w, b: ``BLOCK_N``), edges at their clipped
    size. ``ONE_TILE`` (num_k == 1): step 0 reads x (m, 0); step 1 reads w, b and writes y (m, 0).
    Otherwise ``3 num_k`` steps: x (m, k) for every k (mean), again (variance), then x (m, k),
    w (k), b (k) and the write of y (m, k).

    Four programs per SM: the default program (2 rows, 8 warps) takes 63 registers a thread
    (triton 3.6 on an H200), so 65536 registers hold four of its 256 threads' worth.
    """
    M, N = problem["M"], problem["N"]
    BM, BN = meta["BLOCK_M"], meta["BLOCK_N"]
    num_m, num_k = triton.cdiv(M, BM), triton.cdiv(N, BN)
    keys = new_keys(num_m, 2, 3) if num_k == 1 else new_keys(num_m, 3 * num_k, 4)
    rows = np.minimum(BM, M - np.arange(num_m) * BM)  # [num_m]
    cols = np.minimum(BN, N - np.arange(num_k) * BN)  # [num_k]
    elt = 2
    x_bytes = (rows[:, None] * cols[None, :] * elt).ravel()
    base_w, base_b, base_y = num_m * num_k, num_m * num_k + num_k, num_m * num_k + 2 * num_k
    m, k = np.arange(num_m)[:, None], np.arange(num_k)[None, :]
    x_ids = m * num_k + k  # [num_m, num_k]
    if num_k == 1:
        keys[:, 0, 0] = x_ids[:, 0]
        keys[:, 1, 0], keys[:, 1, 1], keys[:, 1, 2] = base_w, base_b, base_y + x_ids[:, 0]
    else:
        keys[:, :num_k, 0] = x_ids
        keys[:, num_k:2 * num_k, 0] = x_ids
        keys[:, 2 * num_k:, 0] = x_ids
        keys[:, 2 * num_k:, 1] = base_w + k
        keys[:, 2 * num_k:, 2] = base_b + k
        keys[:, 2 * num_k:, 3] = base_y + x_ids
    block_bytes = np.concatenate([x_bytes, cols * elt, cols * elt, x_bytes]).astype(np.int64)
    return TileTrace.reads_then_writes(keys, block_bytes, first_write=base_y,
                                       programs_per_cu=4, source="access model in kernels/layernorm.py")


SPEC = KernelSpec(
    name="layernorm",
    kernel_name="layernorm_kernel",
    problems={
        # x and y 512 MiB each in bf16: 1 GiB moved, 17x an H200's 60 MB L2.
        "default": {"M": 65536, "N": 4096},
        "wide": {"M": 16384, "N": 16384},
        # 10 programs of 4 rows (not a multiple of 8), ragged in M and N, 4 column blocks of 16.
        "check": {"M": 37, "N": 50},
    },
    # Two rows per program, the whole 4096-wide rows in one tile: x read once from DRAM. The
    # fastest of five settings on an H200 (module docstring).
    meta={"BLOCK_M": 2, "BLOCK_N": 4096, "num_warps": 8, "num_stages": 1},
    check_meta={"BLOCK_M": 4, "BLOCK_N": 16, "num_warps": 4, "num_stages": 1},
    make_inputs=make_inputs,
    launch=launch,
    reference=reference,
    output_name="y",
    # ||y - ref|| / ||ref||: the fp32 statistics are exact to ~1e-6 relative; y is rounded once to
    # the input dtype: 1.7e-3 (bf16) and 2.1e-4 (fp16) from that rounding alone (float64 reference
    # rounded, measured on CPU). The interpreter's fp32 -> bf16 cast truncates instead of rounding
    # to nearest, which doubles it: 3.1e-3 measured at the check problem. 3x / 10x margin.
    tolerance={"bfloat16": 1e-2, "float16": 2e-3},
    tile_grid=tile_grid,
    swizzle_args=tile_grid,
    trace=trace,
    # mean (1 add), variance (sub, mul, add), normalise (sub, mul, mul, add): 8 per element.
    flops=lambda p: 8.0 * p["M"] * p["N"],
    min_bytes=lambda p, dtype: float(getattr(torch, dtype).itemsize * (2 * p["M"] * p["N"] + 2 * p["N"])),
    dtypes=("bfloat16", "float16"),
    rewrite_target="swizzle",
    # None: rows are read once and never shared; w and b (16 KiB) hit in every L2 under any
    # order; at the default problem no line straddles two rows (module docstring, counted).
    expert=None,
    output_tile=None,  # y [M, N] is tiled by rows only: a 1-D grid over a 2-D output
)
