"""
GEMM: ``C = A @ B`` with bf16 or fp16 inputs and fp32 accumulation
=================================================================

Why this kernel
---------------
A tiled GEMM reads every ``BLOCK_M x BLOCK_K`` tile of A once per column of output tiles and every
``BLOCK_K x BLOCK_N`` tile of B once per row of output tiles. Whether those re-reads come from L2 or
from DRAM depends only on *which programs run at the same time*, that is on the order in which
program ids are mapped to output tiles. That mapping is this file's rewrite target, ``swizzle``.

The blocked loop, in pseudo-code::

    for each program pid (all of one wave at once):
        pid_m, pid_n = swizzle(pid, num_pid_m, num_pid_n)
        acc = 0
        for k in range(0, K, BLOCK_K):
            acc += A[pid_m*BM : +BM, k : k+BK] @ B[k : k+BK, pid_n*BN : +BN]
        C[pid_m*BM : +BM, pid_n*BN : +BN] = acc

The swizzle's effect, counted by hand
-------------------------------------
At the default problem (M = N = 16384, K = 4096, tiles 128 x 256 x 64) the tile grid is
128 x 64 = 8192 programs, and an H100/H200 runs one wave of 132 of them at once. Row-major
(``pid_m = pid // 64``) puts a wave on about 2 rows and all 64 columns: per K step the wave needs
2 A tiles and 64 B tiles, 66 distinct tiles for 132 programs. Grouped along M with
``GROUP_SIZE_M = 8`` (the Triton tutorial's order) puts the same wave on 8 rows x 17 columns:
8 + 17 = 25 distinct tiles per K step, 2.6x fewer, so more of the wave's reads hit in L2.

Measured on an NVIDIA H200 (ncu, shared/HARDWARE.md, 2026-11-22): L2 hit rate 46.4 % row-major,
76.0 % grouped; DRAM reads 8.82 GB against 2.59 GB; 3.51 ms against 3.14 ms. With this file's
kernel (do_bench medians, eval/results/gemm_bench_h200.md): 3.774 ms row-major, 3.393 ms grouped.

Baseline: row-major, as naive kernels are written. The hand-written expert order the optimizer
must reach is the catalog's ``grouped-m:8``.
"""
from __future__ import annotations

import os

import numpy as np
import torch
import triton
import triton.language as tl

from swizzleperf.agent.spec import KernelSpec
from swizzleperf.profiling.trace import TileTrace


@triton.jit
def swizzle(pid, num_pid_m, num_pid_n):
    """Map program id ``pid`` to the output tile ``(pid_m, pid_n)`` it computes (row-major)."""
    pid_m = pid // num_pid_n
    pid_n = pid % num_pid_n
    return pid_m, pid_n


@triton.jit
def matmul_kernel(
    a_ptr, b_ptr, c_ptr,  # A [M, K], B [K, N], C [M, N]
    M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    DOT_IN_FP32: tl.constexpr,
):
    """One program computes one ``BLOCK_M x BLOCK_N`` tile of C, accumulating in fp32."""
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    pid_m, pid_n = swizzle(pid, num_pid_m, num_pid_n)

    # Rows / columns of this tile; wrapped modulo M / N so that edge tiles load in bounds
    # (their extra rows are masked at the store).
    offs_am = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_bn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak  # [BLOCK_M, BLOCK_K]
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn  # [BLOCK_K, BLOCK_N]

    accumulator = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_K, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_K, other=0.0)
        if DOT_IN_FP32:  # only under the Triton interpreter (see _dot_in_fp32)
            a = a.to(tl.float32)
            b = b.to(tl.float32)
        accumulator = tl.dot(a, b, accumulator)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk

    offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_ptrs = c_ptr + offs_cm[:, None] * stride_cm + offs_cn[None, :] * stride_cn
    c_mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
    tl.store(c_ptrs, accumulator.to(c_ptr.dtype.element_ty), mask=c_mask)


def _dot_in_fp32(dtype: torch.dtype) -> bool:
    """True under the Triton interpreter with bf16 inputs: there (triton 3.9, CPU) ``tl.dot`` of two
    bf16 tiles returns garbage (errors of 1e10, seen 2026-11-22), so the interpreter upcasts the
    tiles first. Compiled kernels never take this branch."""
    return os.environ.get("TRITON_INTERPRET") == "1" and dtype == torch.bfloat16


def launch(inputs: dict, BLOCK_M: int, BLOCK_N: int, BLOCK_K: int,
           num_warps: int = 8, num_stages: int = 3) -> None:
    """Compute ``inputs["c"] = inputs["a"] @ inputs["b"]`` (A [M, K], B [K, N], C [M, N])."""
    a, b, c = inputs["a"], inputs["b"], inputs["c"]
    M, K = a.shape
    N = b.shape[1]
    grid = (triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N),)
    matmul_kernel[grid](
        a, b, c, M, N, K,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
        BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, DOT_IN_FP32=_dot_in_fp32(a.dtype),
        num_warps=num_warps, num_stages=num_stages,
    )


def make_inputs(problem: dict, seed: int, device: str = "cpu", dtype: str = "bfloat16") -> dict:
    """Fresh A [M, K] and B [K, N] ~ N(0, 1) in ``dtype`` for ``seed``; C [M, N] uninitialised."""
    generator = torch.Generator(device=device).manual_seed(seed)
    torch_dtype = getattr(torch, dtype)
    M, N, K = problem["M"], problem["N"], problem["K"]
    a = torch.randn(M, K, generator=generator, device=device, dtype=torch.float32).to(torch_dtype)
    b = torch.randn(K, N, generator=generator, device=device, dtype=torch.float32).to(torch_dtype)
    c = torch.empty(M, N, device=device, dtype=torch_dtype)
    return {"a": a, "b": b, "c": c}


def reference(inputs: dict) -> torch.Tensor:
    """fp32 product of the upcast inputs (TF32 off: torch's default for matmul), [M, N] fp32."""
    return torch.matmul(inputs["a"].float(), inputs["b"].float())


def tile_grid(problem: dict, meta: dict) -> tuple:
    """Logical tile grid ``(num_pid_m, num_pid_n)``."""
    return (triton.cdiv(problem["M"], meta["BLOCK_M"]), triton.cdiv(problem["N"], meta["BLOCK_N"]))


def trace(problem: dict, meta: dict) -> TileTrace:
    """The access model of this kernel: tile (m, n) reads A block (m, k) and B block (k, n) at each
    step k, then writes C block (m, n). Block ids: A first (m * num_k + k), then B
    (k * num_n + n), then C (m * num_n + n). Edge blocks are counted at their clipped size.

    One program per SM: the default tile with 3 stages holds 3 * (128*64 + 64*256) * 2 B = 144 KiB
    of operands in shared memory, more than half of an SM's 228 KiB on Hopper.
    """
    M, N, K = problem["M"], problem["N"], problem["K"]
    BM, BN, BK = meta["BLOCK_M"], meta["BLOCK_N"], meta["BLOCK_K"]
    num_m, num_n, num_k = triton.cdiv(M, BM), triton.cdiv(N, BN), triton.cdiv(K, BK)
    rows = np.minimum(BM, M - np.arange(num_m) * BM)  # [num_m] rows in each tile row
    cols = np.minimum(BN, N - np.arange(num_n) * BN)  # [num_n]
    depth = np.minimum(BK, K - np.arange(num_k) * BK)  # [num_k]
    elt = 2  # bf16 / fp16 bytes
    a_bytes = (rows[:, None] * depth[None, :] * elt).ravel()
    b_bytes = (depth[:, None] * cols[None, :] * elt).ravel()
    c_bytes = (rows[:, None] * cols[None, :] * elt).ravel()
    base_b, base_c = num_m * num_k, num_m * num_k + num_k * num_n
    m = np.repeat(np.arange(num_m), num_n)  # [tiles] row-major over the tile grid
    n = np.tile(np.arange(num_n), num_m)
    k = np.arange(num_k)
    keys = np.full((num_m * num_n, num_k + 1, 2), -1, dtype=np.int64)
    keys[:, :num_k, 0] = m[:, None] * num_k + k[None, :]
    keys[:, :num_k, 1] = base_b + k[None, :] * num_n + n[:, None]
    keys[:, num_k, 0] = base_c + m * num_n + n
    block_bytes = np.concatenate([a_bytes, b_bytes, c_bytes]).astype(np.int64)
    return TileTrace.reads_then_writes(keys, block_bytes, first_write=base_c,
                                       programs_per_cu=1, source="access model in kernels/gemm.py")


SPEC = KernelSpec(
    name="gemm",
    kernel_name="matmul_kernel",
    problems={
        "default": {"M": 16384, "N": 16384, "K": 4096},
        "square8k": {"M": 8192, "N": 8192, "K": 8192},
        "llm": {"M": 4096, "N": 28672, "K": 8192},
        # 4 x 3 = 12 programs (not a multiple of 8), ragged edges in M, N and K.
        "check": {"M": 100, "N": 72, "K": 80},
    },
    # 128 x 256 x 64, 8 warps, 3 stages: 98.6 % of torch.matmul's (cuBLAS) TFLOP/s at 8192^3 bf16
    # with the grouped order, 97.5 % at the default problem, measured on an H200, 2026-11-22
    # (eval/bench_gemm.py, eval/results/gemm_bench_h200.md).
    meta={"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "num_warps": 8, "num_stages": 3},
    check_meta={"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32, "num_warps": 4, "num_stages": 1},
    make_inputs=make_inputs,
    launch=launch,
    reference=reference,
    output_name="c",
    # ||C - ref|| / ||ref||: C is rounded to the input dtype once (fp32 accumulation), so the error
    # is the dtype's rounding error, about 2^-9 * 0.85 for bf16 (1.7e-3 measured at 8192^3 on an
    # H100) and 2^-12 for fp16 (2e-4 measured on CPU); the tolerance leaves a 5x margin.
    tolerance={"bfloat16": 1e-2, "float16": 2e-3},
    tile_grid=tile_grid,
    swizzle_args=tile_grid,
    trace=trace,
    flops=lambda p: 2.0 * p["M"] * p["N"] * p["K"],
    min_bytes=lambda p, dtype: 2.0 * (p["M"] * p["K"] + p["K"] * p["N"] + p["M"] * p["N"]),
    dtypes=("bfloat16", "float16"),
    rewrite_target="swizzle",
    expert="grouped-m:8",
    output_tile=lambda p, meta: (meta["BLOCK_M"], meta["BLOCK_N"]),
)
