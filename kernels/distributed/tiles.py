"""Tile-level building blocks shared by the distributed kernels (one GEMM tile loop, one place).

Each distributed kernel module keeps its own ``swizzle`` (the rewrite target: which program
computes which tile); what a program does with a tile once it is chosen lives here.
"""
from __future__ import annotations

import functools
import os

import torch
import triton
import triton.language as tl

#: The GEMM tiles of the distributed kernels: kernels/gemm.py's, measured at 98.6 % of
#: torch.matmul at 8192^3 on an H200 (eval/results/gemm_bench_h200.md), and the small tiles
#: that the CPU interpreter runs at the ``check`` problems.
GEMM_META = {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "num_warps": 8, "num_stages": 3}
GEMM_CHECK_META = {"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 16, "num_warps": 4, "num_stages": 1}

#: The per-rank GEMM tile configurations the built-in policy searches: the default above, and
#: smaller tiles for the small per-rank shapes of 4 and 8 ranks, where 128 x 256 tiles leave the
#: last wave mostly empty (160 tiles on 132 SMs at M = 4096, N = 1280; on an H200 128 x 128 x 64
#: with 4 warps and 4 stages was the best of six data-parallel configurations there, 148.8 us
#: against 168.3 for 128 x 256 x 64: shared/HARDWARE.md, 2026-11-23).
GEMM_TILE_CONFIGS = (
    GEMM_META,
    {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "num_warps": 4, "num_stages": 4},
    {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "num_warps": 8, "num_stages": 3},
    {"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 64, "num_warps": 4, "num_stages": 4},
    {"BLOCK_M": 256, "BLOCK_N": 128, "BLOCK_K": 64, "num_warps": 8, "num_stages": 3},
)
#: Values a candidate may give the GEMM tile knobs one by one.
GEMM_TILE_KNOBS = {"BLOCK_M": (64, 128, 256), "BLOCK_N": (64, 128, 256), "BLOCK_K": (32, 64, 128),
                   "num_warps": (4, 8), "num_stages": (2, 3, 4)}
#: Shared memory one program may use on sm_90: 227 KB (CUDA C++ Programming Guide, compute
#: capability 9.0, maximum shared memory per thread block).
SM90_SHARED_BYTES = 227 * 1024


def gemm_constraints(meta: dict, itemsize: int, comm_sms: bool) -> str | None:
    """Why a GEMM configuration cannot run on sm_90, or None: its pipelined A and B tiles must fit
    the shared memory of one program; with ``comm_sms``, COMM_SMS must leave SMs to the GEMM."""
    shared = (meta["BLOCK_M"] * meta["BLOCK_K"] + meta["BLOCK_K"] * meta["BLOCK_N"]) * itemsize * meta["num_stages"]
    if shared > SM90_SHARED_BYTES:
        return (f"the tiles' shared memory must fit {SM90_SHARED_BYTES} B per program, got {shared} B "
                f"(BLOCK_M={meta['BLOCK_M']}, BLOCK_N={meta['BLOCK_N']}, BLOCK_K={meta['BLOCK_K']}, "
                f"num_stages={meta['num_stages']})")
    sms = meta.get("NUM_SMS") or num_sms()
    if comm_sms and not 0 < meta["COMM_SMS"] < sms:
        return f"COMM_SMS must be in 1..{sms - 1} (the GPU has {sms} SMs), got {meta['COMM_SMS']}"
    return None


@triton.jit
def gemm_tile(a_ptr, b_ptr, pid_m, pid_n, M, N, K,
              stride_am, stride_ak, stride_bk, stride_bn,
              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
              DOT_IN_FP32: tl.constexpr):
    """The fp32 accumulator [BLOCK_M, BLOCK_N] of ``A[tile pid_m, :] @ B[:, tile pid_n]``.

    A is [M, K] and B [K, N] (any strides, elements). Rows and columns past M / N wrap modulo
    M / N so that edge tiles load in bounds; the caller masks them at the store
    (``tile_pointers``).
    """
    offs_am = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_bn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn
    accumulator = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_K, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_K, other=0.0)
        if DOT_IN_FP32:
            a = a.to(tl.float32)
            b = b.to(tl.float32)
        accumulator = tl.dot(a, b, accumulator)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    return accumulator


@triton.jit
def tile_pointers(c_ptr, pid_m, pid_n, M, N, stride_cm, stride_cn,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """Pointers [BLOCK_M, BLOCK_N] of tile ``(pid_m, pid_n)`` of C [M, N] and its in-bounds mask."""
    offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_ptrs = c_ptr + offs_cm[:, None] * stride_cm + offs_cn[None, :] * stride_cn
    mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
    return c_ptrs, mask


def dot_in_fp32(dtype: torch.dtype) -> bool:
    """True under the Triton interpreter with bf16 inputs, where ``tl.dot`` of bf16 tiles returns
    garbage (triton 3.9, CPU, seen 2026-11-22; kernels/gemm.py): the tiles are upcast first."""
    return os.environ.get("TRITON_INTERPRET") == "1" and dtype == torch.bfloat16


@functools.lru_cache(maxsize=None)
def num_sms(device: torch.device | str | None = None) -> int:
    """Streaming multiprocessors of the CUDA device (the driver's count); 4 on a CPU, where the
    interpreter runs persistent grids of that many programs."""
    if not torch.cuda.is_available():
        return 4
    return torch.cuda.get_device_properties(device or torch.cuda.current_device()).multi_processor_count
