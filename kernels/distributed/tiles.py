"""The per-rank GEMM of the distributed kernels: its configurations and the host side of one launch.

Every GEMM of ``all_gather_gemm``, ``gemm_reduce_scatter`` and ``gemm_all_scatter`` is the
Hopper schedule of kernels/schedule/persistent_gemm.py (tensor descriptors, a persistent loop over the
SMs given to compute, stream-K for the last waves), or, where a configuration says ``WS_GEMM=1`` (AG +
GEMM and GEMM + all-scatter) or ``WS_OWN=1`` (GEMM + RS's own rows), the warp-specialized Gluon GEMM of
kernels/schedule/ws_gemm.py; each kernel module keeps its own ``swizzle`` (the rewrite target: which
tile index computes which tile, in both) and its own prologue / epilogue (waits on flags, stores to
peers, signals); what is common to the three lives here and there.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from swizzleperf.kernels.schedule.persistent_gemm import (SM90_SHARED_BYTES, STREAM_K_VALUES, config_error,
                                                 dot_in_fp32, num_sms, operands, schedule_grid,
                                                 stream_k_buffers, tma_supported)

__all__ = ["GEMM_META", "GEMM_CHECK_META", "GEMM_TILE_CONFIGS", "GEMM_TILE_KNOBS", "SM90_SHARED_BYTES",
           "GemmLaunch", "dot_in_fp32", "gemm_constraints", "gemm_launch", "num_sms", "operands",
           "WS_TILE_CONFIGS", "tile_pointers", "tma_supported", "ws_config", "ws_gemm_error"]

#: The default per-rank GEMM configuration: 128 x 256 x 64 tiles, 8 warps, 4 stages with C
#: stored in two halves (the epilogue's shared memory halved so that 4 stages fit), data-parallel.
#: It was the best configuration at 17 of 27 per-rank shapes of the benchmark problems (W = 2, 4,
#: 8) on one H100 (triton 3.6, kernels/schedule/gemm_tuning.py against cuBLAS, 2026-11-25, a first run of
#: bench/gpu_rank_gemm.sh; bench/results/rank_gemm_hopper.md has the final one).
GEMM_META = {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "num_warps": 8, "num_stages": 4,
             "EPILOGUE_SUBTILE": 1, "STREAM_K": 0, "WARP_SPECIALIZE": 0}
#: Small tiles for the CPU interpreter at the ``check`` problems; stream-K on, so that the
#: interpreter runs the hand-over of partial tiles too where the tiles do not fill the grid.
GEMM_CHECK_META = {"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 16, "num_warps": 4, "num_stages": 1,
                   "EPILOGUE_SUBTILE": 0, "STREAM_K": 1, "WARP_SPECIALIZE": 0}

#: The per-rank GEMM configurations the built-in policy searches (``DistKernelSpec.tile_configs``):
#: the winners of the first tuning run on one H100 (2026-11-25, 27 shapes): the default, the same
#: tiles with stream-K for the last wave (won 8 shapes of under ~10 waves) and for the last two
#: (won 4096 x 1280 x 8192, 160 tiles on 132 SMs), 256 x 128 (won 8192 x 896 x 14336), 128 x 128
#: (won 4096 x 512 x 4096, one wave), and the old 128 x 256 x 64 / 3 stages with a whole C tile.
#: Not WARP_SPECIALIZE: on Hopper it compiles to the same kernel (kernels/schedule/persistent_gemm.py's
#: ``warp_specialize_effective``); GEMM_TILE_KNOBS keeps it for the GPUs where it does not.
GEMM_TILE_CONFIGS = (
    GEMM_META,
    {**GEMM_META, "STREAM_K": 1},
    {**GEMM_META, "STREAM_K": 2},
    {**GEMM_META, "num_stages": 3, "EPILOGUE_SUBTILE": 0, "STREAM_K": 1},
    {**GEMM_META, "BLOCK_M": 256, "BLOCK_N": 128, "num_stages": 3, "EPILOGUE_SUBTILE": 0, "STREAM_K": 1},
    {**GEMM_META, "BLOCK_N": 128, "EPILOGUE_SUBTILE": 0},
    {**GEMM_META, "BLOCK_N": 128, "num_warps": 4, "EPILOGUE_SUBTILE": 0, "STREAM_K": 1},
)
#: Values a candidate may give the GEMM knobs one by one (STREAM_K: kernels/schedule/persistent_gemm.py's
#: ``split_tiles``; EPILOGUE_SUBTILE and WARP_SPECIALIZE 0 or 1; num_stages up to the 6 of the tuner's
#: 128 x 128 candidate, which won 4096 x 512 x 4096 on both GPUs: shared memory is checked per
#: configuration).
GEMM_TILE_KNOBS = {"BLOCK_M": (64, 128, 256), "BLOCK_N": (64, 128, 256), "BLOCK_K": (32, 64, 128),
                   "num_warps": (4, 8), "num_stages": (2, 3, 4, 5, 6), "STREAM_K": STREAM_K_VALUES,
                   "EPILOGUE_SUBTILE": (0, 1), "WARP_SPECIALIZE": (0, 1)}


def gemm_constraints(meta: dict, itemsize: int, comm_sms: bool) -> str | None:
    """Why a GEMM configuration cannot run on sm_90, or None: kernels/schedule/persistent_gemm.py's
    ``config_error`` (knobs, STREAM_K, shared memory of one program); with ``comm_sms``,
    COMM_SMS must leave SMs to the GEMM."""
    error = config_error({"STREAM_K": 0, **meta}, itemsize)
    if error:
        return error
    sms = meta.get("NUM_SMS") or num_sms()
    if comm_sms and not 0 < meta["COMM_SMS"] < sms:
        return f"COMM_SMS must be in 1..{sms - 1} (the GPU has {sms} SMs), got {meta['COMM_SMS']}"
    return None


#: The warp-specialized GEMM's configurations the built-in policy also searches where a kernel
#: has a ``WS_GEMM`` path (kernels/schedule/ws_gemm.py): 128 x 256 x 64 with 3 stages and C's whole
#: tile, and cuBLAS's 320 x 128 tile as 256 + 64 rows, 32-wide K steps in 6 stages, C in halves
#: (the best of each kind on one H100 at the per-rank shapes, 2026-11-26:
#: bench/results/ws_gemm_h100/5_tall_tiles/).
WS_TILE_CONFIGS = (
    {**GEMM_META, "WS_GEMM": 1, "num_stages": 3, "EPILOGUE_SUBTILE": 0},
    {**GEMM_META, "WS_GEMM": 1, "BLOCK_M": 256, "BLOCK_N": 128, "BLOCK_K": 32, "num_stages": 6,
     "EPILOGUE_SUBTILE": 1, "BLOCK_M_LOW": 64},
)


def ws_config(meta: dict) -> dict:
    """The warp-specialized GEMM's knobs (kernels/schedule/ws_gemm.py) for a kernel's ``meta``:
    its tiles, warps and stages, C stored in two column halves with EPILOGUE_SUBTILE, BLOCK_M_LOW
    rows of a second consumer (0 by default); tile orders are the kernels' own."""
    return {"BLOCK_M": meta["BLOCK_M"], "BLOCK_N": meta["BLOCK_N"], "BLOCK_K": meta["BLOCK_K"],
            "num_warps": meta["num_warps"], "num_stages": meta["num_stages"], "GROUP_M": 1,
            "EPILOGUE_SPLIT": 2 if meta.get("EPILOGUE_SUBTILE", 0) else 1,
            "BLOCK_M_LOW": meta.get("BLOCK_M_LOW", 0)}


def ws_gemm_error(meta: dict) -> str | None:
    """Why ``meta``'s WS_GEMM / BLOCK_M_LOW cannot run, or None: a second consumer's rows
    (BLOCK_M_LOW) only with WS_GEMM, and a configuration the Gluon kernel builds
    (``ws_gemm.config_error``: shared memory, warps, tiles). A pattern without a warp-specialized
    path ignores WS_GEMM and BLOCK_M_LOW and runs the Triton GEMM with the same tiles (so a
    per-shape configuration with WS_GEMM, bench/results/gemm_configs_hopper.json, can be every
    pattern's default), which ``gemm_constraints`` checks."""
    from swizzleperf.kernels.schedule import ws_gemm
    low = meta.get("BLOCK_M_LOW", 0)
    if not meta.get("WS_GEMM", 0):
        return f"BLOCK_M_LOW must be 0 without WS_GEMM, got {low}" if low else None
    error = ws_gemm.config_error(ws_config(meta))
    return f"WS_GEMM: {error}" if error else None


@dataclass(frozen=True)
class GemmLaunch:
    """The host side of one persistent GEMM launch: the grid, the stream-K buffers, and the
    constexpr keywords the kernels take (``kwargs``: tiles, STREAM_K and the other schedule
    switches, warps, stages)."""

    grid: tuple
    workspace: torch.Tensor
    sk_flags: torch.Tensor
    kwargs: dict


def gemm_launch(num_tiles: int, programs: int, meta: dict, device, use_tma: bool,
                store_tma: bool, dtype: torch.dtype, flags: bool = False) -> GemmLaunch:
    """``programs`` programs at most (one per tile at most, except with STREAM_K 3: every tile
    stream-K on all ``programs``), the last ``STREAM_K`` waves stream-K (``split_tiles``,
    ``schedule_grid``); A and B through descriptors with ``use_tma``, C with
    ``store_tma`` (EPILOGUE_SUBTILE applies only then).

    ``flags``: the loop waits on or signals a flag per tile (a CTA barrier and a system-scope
    acquire or release in every iteration). Such a loop is neither flattened nor
    warp-specialized by default (WARP_SPECIALIZE is ignored there; ``FLATTEN`` in ``meta``
    overrides the first). Measured on two H100s (triton 3.6, 2026-11-25,
    bench/results/dist_gemm_h100x2*.json): GEMM + RS producer_consumer at llama70b-o-4k, W = 2,
    took 1.474 ms with the loop flattened (FLATTEN=1) and 0.528 ms without, where bulk_sync
    (no flags, flattened) took 0.466 ms.
    """
    grid = schedule_grid(num_tiles, programs, meta.get("STREAM_K", 0))   # a bad STREAM_K: one error
    workspace, sk_flags = stream_k_buffers(device, grid, meta["BLOCK_M"], meta["BLOCK_N"])
    kwargs = dict(BLOCK_M=meta["BLOCK_M"], BLOCK_N=meta["BLOCK_N"], BLOCK_K=meta["BLOCK_K"],
                  STREAM_K=meta.get("STREAM_K", 0), USE_TMA=use_tma,
                  SUBTILE=int(bool(meta.get("EPILOGUE_SUBTILE", 0)) and store_tma),
                  WARP_SPECIALIZE=bool(meta.get("WARP_SPECIALIZE", 0)) and not flags,
                  FLATTEN=bool(meta.get("FLATTEN", not flags)),
                  DOT_IN_FP32=dot_in_fp32(dtype), num_warps=meta["num_warps"],
                  num_stages=meta["num_stages"])
    return GemmLaunch((grid,), workspace, sk_flags, kwargs)


def c_block(meta: dict, use_tma: bool) -> list:
    """The block shape of C's descriptor: [BLOCK_M, BLOCK_N], or half as wide with EPILOGUE_SUBTILE."""
    return [meta["BLOCK_M"], meta["BLOCK_N"] // (2 if meta.get("EPILOGUE_SUBTILE") and use_tma else 1)]


@triton.jit
def tile_pointers(c_ptr, pid_m, pid_n, M, N, stride_cm, stride_cn,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """Pointers [BLOCK_M, BLOCK_N] of tile ``(pid_m, pid_n)`` of C [M, N] and its in-bounds mask."""
    offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_ptrs = c_ptr + offs_cm[:, None] * stride_cm + offs_cn[None, :] * stride_cn
    mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
    return c_ptrs, mask
