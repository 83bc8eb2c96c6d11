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
kernel (do_bench medians, bench/results/gemm_bench_h200.md): 3.774 ms row-major, 3.393 ms grouped.

Baseline: row-major, as naive kernels are written. The hand-written expert order the optimizer
must reach is the catalog's ``grouped-m:8``.
"""
from __future__ import annotations

import numpy as np
import torch
import triton
import triton.language as tl

from swizzleperf.kernels.schedule.persistent_gemm import (data_parallel_tiles, dot_in_fp32,
                                                          mainloop, num_sms, operands,
                                                          schedule_grid, store_tile,
                                                          stream_k_buffers, stream_k_fixup,
                                                          stream_k_range, stream_k_segment,
                                                          tail_split, tma_supported)
from swizzleperf.kernels.spec import KernelSpec
from swizzleperf.kernels.trace import TileTrace, new_keys


@triton.jit
def swizzle(pid, num_pid_m, num_pid_n):
    """Map program id ``pid`` to the output tile ``(pid_m, pid_n)`` it computes (row-major)."""
    pid_m = pid // num_pid_n
    pid_n = pid % num_pid_n
    return pid_m, pid_n


@triton.jit
def _store_c(c, accumulator, pid_m, pid_n, M, N, stride_cm, stride_cn,
             BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, USE_TMA: tl.constexpr,
             SUBTILE: tl.constexpr):
    """Tile ``(pid_m, pid_n)`` of C, rounded to C's dtype."""
    store_tile(c, accumulator, pid_m * BLOCK_M, pid_n * BLOCK_N, M, N,
               stride_cm, stride_cn, BLOCK_M, BLOCK_N, USE_TMA, SUBTILE)


@triton.jit
def matmul_kernel(
    a, b, c,  # A [M, K], B [K, N], C [M, N]: tensor descriptors with USE_TMA, else pointers
    b_tail, c_tail,  # B and C again, descriptors of TAIL_BLOCK_N wide blocks (with a tail)
    workspace, flags,  # stream-K hand-over: fp32 [P, BLOCK_M * BLOCK_N], int32 [P] zeros
    M, N, K, tail_pid_m,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    STREAM_K: tl.constexpr, TAIL_BLOCK_N: tl.constexpr, USE_TMA: tl.constexpr,
    FLATTEN: tl.constexpr, EPILOGUE_SUBTILE: tl.constexpr, WARP_SPECIALIZE: tl.constexpr,
    DOT_IN_FP32: tl.constexpr,
):
    """Persistent: program ``pid`` of ``P`` computes tiles ``pid, pid + P, ...`` whole, up to the
    last ``STREAM_K`` waves, then its share of those waves' K steps; with ``TAIL_BLOCK_N``, the
    bottom ``tail_pid_m`` rows of tiles are BLOCK_M x TAIL_BLOCK_N tiles instead, computed whole
    after the others, tail tile ``j`` by program ``P - 1 - j mod P``
    (kernels/schedule/persistent_gemm.py)."""
    pid = tl.program_id(axis=0)
    num_programs = tl.num_programs(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    if TAIL_BLOCK_N > 0:
        num_pid_m -= tail_pid_m   # the rows of whole BLOCK_N wide tiles, above the tail
    num_pid_n = tl.cdiv(N, BLOCK_N)
    k_iters = tl.cdiv(K, BLOCK_K)
    num_dp_tiles = data_parallel_tiles(num_pid_m * num_pid_n, num_programs, STREAM_K)
    for tile in tl.range(pid, num_dp_tiles, num_programs, flatten=FLATTEN,
                         warp_specialize=WARP_SPECIALIZE):
        pid_m, pid_n = swizzle(tile, num_pid_m, num_pid_n)
        accumulator = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        accumulator = mainloop(a, b, pid_m * BLOCK_M, pid_n * BLOCK_N, 0, k_iters, M, N, K,
                               stride_am, stride_ak, stride_bk, stride_bn, accumulator,
                               BLOCK_M, BLOCK_N, BLOCK_K, USE_TMA, DOT_IN_FP32)
        _store_c(c, accumulator, pid_m, pid_n, M, N, stride_cm, stride_cn, BLOCK_M, BLOCK_N, USE_TMA,
                 EPILOGUE_SUBTILE)
    if STREAM_K > 0:
        units = (num_pid_m * num_pid_n - num_dp_tiles) * k_iters
        first, stop = stream_k_range(pid, num_programs, units)
        while stop > first:  # this program's pieces, last first
            sk_tile, start, k_lo, k_hi = stream_k_segment(stop, first, k_iters)
            pid_m, pid_n = swizzle(num_dp_tiles + sk_tile, num_pid_m, num_pid_n)
            accumulator = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
            accumulator = mainloop(a, b, pid_m * BLOCK_M, pid_n * BLOCK_N, k_lo, k_hi, M, N, K,
                                   stride_am, stride_ak, stride_bk, stride_bn, accumulator,
                                   BLOCK_M, BLOCK_N, BLOCK_K, USE_TMA, DOT_IN_FP32)
            accumulator = stream_k_fixup(accumulator, workspace, flags, pid, num_programs, units,
                                         sk_tile, start, k_hi, k_iters, BLOCK_M, BLOCK_N)
            if k_hi == k_iters:
                _store_c(c, accumulator, pid_m, pid_n, M, N, stride_cm, stride_cn, BLOCK_M,
                         BLOCK_N, USE_TMA, EPILOGUE_SUBTILE)
            stop = start
    if TAIL_BLOCK_N > 0:
        tail_pid_n = tl.cdiv(N, TAIL_BLOCK_N)
        for tile in tl.range(num_programs - 1 - pid, tail_pid_m * tail_pid_n, num_programs,
                             flatten=FLATTEN):
            pid_m, pid_n = swizzle(tile, tail_pid_m, tail_pid_n)
            accumulator = tl.zeros((BLOCK_M, TAIL_BLOCK_N), dtype=tl.float32)
            accumulator = mainloop(a, b_tail, (num_pid_m + pid_m) * BLOCK_M, pid_n * TAIL_BLOCK_N,
                                   0, k_iters, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                                   accumulator, BLOCK_M, TAIL_BLOCK_N, BLOCK_K, USE_TMA, DOT_IN_FP32)
            _store_c(c_tail, accumulator, num_pid_m + pid_m, pid_n, M, N, stride_cm, stride_cn,
                     BLOCK_M, TAIL_BLOCK_N, USE_TMA, 0)


def launch(inputs: dict, BLOCK_M: int, BLOCK_N: int, BLOCK_K: int, num_warps: int = 8,
           num_stages: int = 3, STREAM_K: int = 0, NUM_SMS: int | None = None,
           EPILOGUE_SUBTILE: int = 0, FLATTEN: bool = True, WARP_SPECIALIZE: bool = False,
           TAIL_BLOCK_N: int = 0, TMA: bool | None = None) -> None:
    """Compute ``inputs["c"] = inputs["a"] @ inputs["b"]`` (A [M, K], B [K, N], C [M, N]).

    ``NUM_SMS`` programs (default: the GPU's SM count; one per tile under the interpreter), at
    most one per tile except with ``STREAM_K`` 3; ``STREAM_K`` (0, 1, 2, 3) as
    kernels/schedule/persistent_gemm.py's ``split_tiles`` and ``schedule_grid``. Tensor
    descriptors on a GPU where ``tma_supported`` says so (``TMA=True`` asks for them under the
    interpreter too, ``TMA=False`` forces pointers), else pointers;
    ``EPILOGUE_SUBTILE`` stores C in two halves (TMA only); ``FLATTEN`` and ``WARP_SPECIALIZE``
    are ``tl.range``'s options for the persistent loop; ``TAIL_BLOCK_N`` (0: none) cuts the
    bottom rows of tiles, as many as ``tail_split`` says, into BLOCK_M x TAIL_BLOCK_N tiles.
    Raises ValueError for a STREAM_K outside 0-3 or a TAIL_BLOCK_N with STREAM_K.
    """
    a, b, c = inputs["a"], inputs["b"], inputs["c"]
    M, K = a.shape
    N = b.shape[1]
    num_tiles = triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N)
    # Under the interpreter (CPU tensors) programs run one at a time, so a persistent grid gains
    # nothing there: one program per tile unless NUM_SMS asks otherwise, which also keeps each
    # program's accesses one tile's for the generic tracer (profiling/tracer.py, which samples
    # programs and sees pointer loads); the persistent, stream-K and TMA paths run there when
    # asked for (NUM_SMS, TMA=True), as tests/kernels/test_gemm.py does.
    on_gpu = a.device.type == "cuda"
    programs = schedule_grid(num_tiles, NUM_SMS or (num_sms(a.device) if on_gpu else num_tiles),
                             STREAM_K)   # a bad STREAM_K: one clear error
    if TAIL_BLOCK_N and STREAM_K:
        raise ValueError(f"TAIL_BLOCK_N={TAIL_BLOCK_N} (a tail of narrower tiles) excludes STREAM_K={STREAM_K}")
    use_tma = (on_gpu if TMA is None else TMA) and tma_supported(a, b, c)
    workspace, flags = stream_k_buffers(a.device, programs, BLOCK_M, BLOCK_N)
    tail = TAIL_BLOCK_N or BLOCK_N   # without a tail the tail's operands are B's and C's again
    rows = tail_split(M, N, BLOCK_M, BLOCK_N, TAIL_BLOCK_N, programs)
    matmul_kernel[(programs,)](
        operands(a, [BLOCK_M, BLOCK_K], use_tma), operands(b, [BLOCK_K, BLOCK_N], use_tma),
        operands(c, [BLOCK_M, BLOCK_N // (2 if EPILOGUE_SUBTILE else 1)], use_tma),
        operands(b, [BLOCK_K, tail], use_tma), operands(c, [BLOCK_M, tail], use_tma),
        workspace, flags, M, N, K, rows,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
        BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, STREAM_K=STREAM_K,
        TAIL_BLOCK_N=TAIL_BLOCK_N, USE_TMA=use_tma, FLATTEN=bool(FLATTEN), EPILOGUE_SUBTILE=int(EPILOGUE_SUBTILE),
        WARP_SPECIALIZE=bool(WARP_SPECIALIZE), DOT_IN_FP32=dot_in_fp32(a.dtype),
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
    Tiles of BLOCK_M x BLOCK_N throughout: a tail of narrower tiles (``TAIL_BLOCK_N``, a launch
    configuration that measured runs time) is not modelled.

    One program per SM: the default tile with 3 stages holds 3 * (128*64 + 64*256) * 2 B = 144 KiB
    of operands in shared memory, more than half of an SM's 228 KiB on Hopper.
    """
    M, N, K = problem["M"], problem["N"], problem["K"]
    BM, BN, BK = meta["BLOCK_M"], meta["BLOCK_N"], meta["BLOCK_K"]
    num_m, num_n, num_k = triton.cdiv(M, BM), triton.cdiv(N, BN), triton.cdiv(K, BK)
    keys = new_keys(num_m * num_n, num_k + 1, 2)  # [tiles, steps, 2]: checked before any array
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
    # 128 x 256 x 64, 8 warps, 4 stages with C stored in two halves (the epilogue's shared memory
    # halved so that 4 stages fit), data-parallel: the best of 21 configurations at this problem on
    # one H100 (triton 3.6, 2026-11-25, bench/gpu_rank_gemm.sh's first run: 1.02x torch.matmul).
    meta={"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "num_warps": 8, "num_stages": 4,
          "EPILOGUE_SUBTILE": 1},
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
    compute="matrix",                      # tl.dot: the dtype's dense matrix peak is its compute roof
    dtypes=("bfloat16", "float16"),
    rewrite_target="swizzle",
    expert="grouped-m:8",
    output_tile=lambda p, meta: (meta["BLOCK_M"], meta["BLOCK_N"]),
    # Tuned in measured mode for the best order (agent/verification/tune_worker.py): the leaders of the first
    # tuning run at the per-rank shapes (kernels/schedule/gemm_tuning.py), stream-K for the last
    # wave, and the other tile shapes that won a shape there (not WARP_SPECIALIZE: the same kernel
    # on Hopper, persistent_gemm.warp_specialize_effective); and the winners
    # at this default problem, stream-K for the last two waves (140 tiles): on an H100 with 4 stages and
    # C in halves (1.028x torch.matmul), on an H200 with 3 stages and C whole (1.031x;
    # bench/results/rank_gemm_hopper.md, 2026-11-25 and -26).
    launch_configs=(
        {"STREAM_K": 2},
        {"num_stages": 3, "EPILOGUE_SUBTILE": 0, "STREAM_K": 2},
        {"STREAM_K": 1},
        {"num_stages": 3, "EPILOGUE_SUBTILE": 0},
        {"BLOCK_M": 256, "BLOCK_N": 128, "num_stages": 3, "EPILOGUE_SUBTILE": 0},
        # a tail of 128 x 128 tiles where the last wave is partial (launch leaves it out where no
        # split ends sooner): 1.03x cuBLAS at 4096 x 3584 x 4096 on an H100, where the tuned
        # stream-K was at 0.988x; 1.04x on an H200 (bench/results/wide_tile/)
        {"TAIL_BLOCK_N": 128},
    ),
    library=lambda inputs: torch.matmul(inputs["a"], inputs["b"], out=inputs["c"]),
    library_name="torch.matmul (cuBLAS)",
)
