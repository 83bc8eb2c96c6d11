"""
GEMM + all-scatter: ``C = A @ B`` with B sharded by columns, C replicated on every rank
=====================================================================================

Why this kernel
---------------
The column-parallel linear layer of tensor parallelism: every rank holds the activations
A [M, K] and its column shard B_r [K, N/W] of the weights; it computes its block
``C[:, r*N/W : (r+1)*N/W] = A @ B_r`` and every rank needs all of C [M, N]. The usual way is
two stop-and-go steps, a matmul and then an NCCL all-gather; the tiles of C could instead go
to the peers as soon as they are computed, so that communication hides behind compute. How
communication interleaves with compute is this kernel's overlap knob, in the four patterns of
the Iris taxonomy:

- ``bulk_sync``: a persistent GEMM writes the local block, then a scatter kernel copies it
  to every peer (two launches, one stream: no overlap, but no flags either);
- ``producer_consumer``: the GEMM on ``NUM_SMS - COMM_SMS`` programs signals a flag per tile;
  a scatter kernel on a second stream (``COMM_SMS`` programs) waits for each flag and copies
  the tile to the peers while the GEMM goes on;
- ``fused_sequential``: one kernel; each program stores its finished tile into every rank's
  C directly (the remote stores follow the tile's compute in the same program);
- ``workgroup_specialized``: one kernel of ``NUM_SMS`` programs; the first
  ``NUM_SMS - COMM_SMS`` compute tiles and signal flags, the others wait on the flags and copy.
  All programs are resident at once (the grid is the SM count), so a waiting program never
  blocks a producer from starting.

Every pattern ends with a device barrier: after it, every rank's C is complete.

The blocked loop, in pseudo-code (fused_sequential)::

    for tile in range(pid, num_tiles, num_programs):          # persistent
        pid_m, pid_n = swizzle(tile, num_pid_m, num_pid_n)   # the rewrite target
        acc = A[pid_m tile, :] @ B_r[:, pid_n tile]            # fp32
        for i in range(W): store(C tile at column block r, acc, peer=(r + i) % W)
    barrier()

The tile order's effect
-----------------------
``swizzle`` decides which tiles the resident programs compute together: the L2 reuse of A and
B_r as in kernels/gemm.py, and, here, the order in which finished tiles reach the scatter
programs: a row-major order finishes whole rows of C first. Destinations are staggered
(rank r sends to r+1 first, then r+2, ...), so that W ranks do not all write to one peer's
NVLink ports at once.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl
from triton.experimental import gluon
from triton.experimental.gluon import language as gl

from swizzleperf.kernels.distributed import device
from swizzleperf.kernels.distributed.spec import BARRIER, Baseline, DistKernelSpec, Step
from swizzleperf.kernels.distributed.tiles import (GEMM_CHECK_META, GEMM_META, GEMM_TILE_CONFIGS,
                                                   GEMM_TILE_KNOBS, WS_TILE_CONFIGS, c_block,
                                                   gemm_constraints, gemm_launch, num_sms, operands,
                                                   tile_pointers, tma_supported, ws_config,
                                                   ws_gemm_error)
from swizzleperf.kernels.schedule import ws_gemm
from swizzleperf.kernels.schedule.persistent_gemm import (cdiv, data_parallel_tiles, mainloop, store_tile,
                                                          stream_k_fixup, stream_k_range,
                                                          stream_k_segment)

PATTERNS = ("bulk_sync", "producer_consumer", "fused_sequential", "workgroup_specialized")
_LOCAL, _SIGNAL, _EVERY_RANK = 0, 1, 2  # what the GEMM worker does with a finished tile


@triton.jit
def swizzle(pid, num_pid_m, num_pid_n):
    """Map tile index ``pid`` to the tile ``(pid_m, pid_n)`` of the local block: groups of 8 tile
    rows, column by column inside a group (the catalog's ``grouped-m:8``, Triton's GROUP_SIZE_M
    order). The default since 2026-11-25 (row-major before): on two H100s it timed at most
    row-major's at the five problems where the optimize measured both (2.878 against 3.438 ms
    at GEMM + RS llama70b-down-8k, bench/results/dist_optimize_h100x2/ at commit 2f3ed18), and the per-rank GEMM
    configurations were tuned with it (bench/results/gemm_configs_hopper.json)."""
    GROUP_SIZE_M: tl.constexpr = 8
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_SIZE_M
    group_size_m = tl.minimum(num_pid_m - first_pid_m, GROUP_SIZE_M)
    pid_m = first_pid_m + (pid % num_pid_in_group) % group_size_m
    pid_n = (pid % num_pid_in_group) // group_size_m
    return pid_m, pid_n


@triton.jit
def _finish_tile(accumulator, c, c_ptr, flags, heap_bases, rank, epoch, tile, pid_m, pid_n, M,
                 N_local, stride_cm, stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                 WORLD_SIZE: tl.constexpr, MODE: tl.constexpr, STORE_TMA: tl.constexpr,
                 SUBTILE: tl.constexpr):
    """Write a finished tile of the local block: MODE 0 locally (through C's descriptor with
    STORE_TMA), 1 locally then ``flags[tile] = epoch`` (release, GPU scope), 2 into every
    rank's C, staggered (r, r + 1, ...)."""
    if MODE == 0:
        store_tile(c, accumulator, pid_m * BLOCK_M, pid_n * BLOCK_N, M, N_local, stride_cm,
                   stride_cn, BLOCK_M, BLOCK_N, STORE_TMA, SUBTILE)
    else:
        c_ptrs, mask = tile_pointers(c_ptr + rank * N_local * stride_cn, pid_m, pid_n, M,
                                     N_local, stride_cm, stride_cn, BLOCK_M, BLOCK_N)
        value = accumulator.to(c_ptr.dtype.element_ty)
        if MODE == 2:
            for i in tl.static_range(WORLD_SIZE):
                device.store(c_ptrs, value, rank, (rank + i) % WORLD_SIZE, heap_bases, mask=mask)
        else:
            tl.store(c_ptrs, value, mask=mask)
            device.signal(flags + tile, epoch, rank, rank, heap_bases, scope="gpu")


@triton.jit
def _gemm_worker(a, b, c, c_ptr, flags, heap_bases, workspace, sk_flags, rank, epoch, worker,
                 num_workers, M, N_local, K, stride_am, stride_ak, stride_bk, stride_bn,
                 stride_cm, stride_cn,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                 WORLD_SIZE: tl.constexpr, MODE: tl.constexpr, STREAM_K: tl.constexpr,
                 USE_TMA: tl.constexpr, STORE_TMA: tl.constexpr, SUBTILE: tl.constexpr,
                 WARP_SPECIALIZE: tl.constexpr, FLATTEN: tl.constexpr,
                 DOT_IN_FP32: tl.constexpr):
    """Worker ``worker`` of ``num_workers`` of the persistent GEMM of the local block
    (kernels/schedule/persistent_gemm.py): tile indices ``worker, worker + num_workers, ...`` below
    whole up to the last ``STREAM_K`` waves, then its share of those waves' K steps, in
    ``swizzle`` order.
    ``a``, ``b``: descriptors of A and B_r with USE_TMA, else pointers; ``c``: the local block
    of C (descriptor with STORE_TMA, else pointer), ``c_ptr``: C [M, N] in the heap."""
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N_local, BLOCK_N)
    k_iters = tl.cdiv(K, BLOCK_K)
    num_dp_tiles = data_parallel_tiles(num_pid_m * num_pid_n, num_workers, STREAM_K)
    for tile in tl.range(worker, num_dp_tiles, num_workers, flatten=FLATTEN,
                         warp_specialize=WARP_SPECIALIZE):
        pid_m, pid_n = swizzle(tile, num_pid_m, num_pid_n)
        accumulator = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        accumulator = mainloop(a, b, pid_m * BLOCK_M, pid_n * BLOCK_N, 0, k_iters, M, N_local, K,
                               stride_am, stride_ak, stride_bk, stride_bn, accumulator, BLOCK_M,
                               BLOCK_N, BLOCK_K, USE_TMA, DOT_IN_FP32)
        _finish_tile(accumulator, c, c_ptr, flags, heap_bases, rank, epoch, tile, pid_m, pid_n,
                     M, N_local, stride_cm, stride_cn, BLOCK_M, BLOCK_N, WORLD_SIZE, MODE,
                     STORE_TMA, SUBTILE)
    if STREAM_K > 0:
        units = (num_pid_m * num_pid_n - num_dp_tiles) * k_iters
        first, stop = stream_k_range(worker, num_workers, units)
        while stop > first:  # this worker's pieces, last first
            sk_tile, start, k_lo, k_hi = stream_k_segment(stop, first, k_iters)
            pid_m, pid_n = swizzle(num_dp_tiles + sk_tile, num_pid_m, num_pid_n)
            accumulator = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
            accumulator = mainloop(a, b, pid_m * BLOCK_M, pid_n * BLOCK_N, k_lo, k_hi, M,
                                   N_local, K, stride_am, stride_ak, stride_bk, stride_bn,
                                   accumulator, BLOCK_M, BLOCK_N, BLOCK_K, USE_TMA, DOT_IN_FP32)
            accumulator = stream_k_fixup(accumulator, workspace, sk_flags, worker, num_workers,
                                         units, sk_tile, start, k_hi, k_iters, BLOCK_M, BLOCK_N)
            if k_hi == k_iters:
                _finish_tile(accumulator, c, c_ptr, flags, heap_bases, rank, epoch,
                             num_dp_tiles + sk_tile, pid_m, pid_n, M, N_local, stride_cm,
                             stride_cn, BLOCK_M, BLOCK_N, WORLD_SIZE, MODE, STORE_TMA, SUBTILE)
            stop = start


@triton.jit
def _scatter_worker(c_ptr, flags, errors, flag_kind, heap_bases, rank, epoch, max_spins,
                    worker, num_workers, M, N_local, stride_cm, stride_cn,
                    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, WORLD_SIZE: tl.constexpr,
                    WAIT: tl.constexpr):
    """Copy tiles ``worker, worker + num_workers, ...`` of the local block to every peer, in
    the GEMM's order, each after its flag when ``WAIT``."""
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N_local, BLOCK_N)
    c_block = c_ptr + rank * N_local * stride_cn
    for tile in range(worker, num_pid_m * num_pid_n, num_workers):
        if WAIT:
            device.wait(flags + tile, epoch, errors, flag_kind, tile, rank, max_spins,
                        scope="gpu")
        pid_m, pid_n = swizzle(tile, num_pid_m, num_pid_n)
        c_ptrs, mask = tile_pointers(c_block, pid_m, pid_n, M, N_local, stride_cm, stride_cn,
                                     BLOCK_M, BLOCK_N)
        for i in tl.static_range(1, WORLD_SIZE):
            device.put(c_ptrs, c_ptrs, rank, (rank + i) % WORLD_SIZE, heap_bases, mask=mask)


@triton.jit(do_not_specialize=["epoch"])
def gemm_all_scatter_gemm(a, b, c, c_ptr, flags, heap_bases, workspace, sk_flags, rank, epoch,
                          M, N_local, K, stride_am, stride_ak, stride_bk, stride_bn,
                          stride_cm, stride_cn,
                          BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                          WORLD_SIZE: tl.constexpr, MODE: tl.constexpr, STREAM_K: tl.constexpr,
                          USE_TMA: tl.constexpr, STORE_TMA: tl.constexpr, SUBTILE: tl.constexpr,
                          WARP_SPECIALIZE: tl.constexpr, FLATTEN: tl.constexpr,
                          DOT_IN_FP32: tl.constexpr):
    """Persistent GEMM of the local block; MODE 0 local only, 1 local + flag, 2 every rank."""
    _gemm_worker(a, b, c, c_ptr, flags, heap_bases, workspace, sk_flags, rank, epoch,
                 tl.program_id(0), tl.num_programs(0), M, N_local, K, stride_am, stride_ak,
                 stride_bk, stride_bn, stride_cm, stride_cn, BLOCK_M, BLOCK_N,
                 BLOCK_K, WORLD_SIZE, MODE, STREAM_K, USE_TMA, STORE_TMA, SUBTILE,
                 WARP_SPECIALIZE, FLATTEN, DOT_IN_FP32)


@triton.jit(do_not_specialize=["epoch"])
def gemm_all_scatter_scatter(c_ptr, flags, errors, flag_kind, heap_bases, rank, epoch,
                             max_spins, M, N_local, stride_cm, stride_cn,
                             BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                             WORLD_SIZE: tl.constexpr, WAIT: tl.constexpr):
    """Persistent scatter of the local block of C to every peer."""
    _scatter_worker(c_ptr, flags, errors, flag_kind, heap_bases, rank, epoch, max_spins,
                    tl.program_id(0), tl.num_programs(0), M, N_local, stride_cm, stride_cn,
                    BLOCK_M, BLOCK_N, WORLD_SIZE, WAIT)


@triton.jit(do_not_specialize=["epoch"])
def gemm_all_scatter_specialized(a, b, c_ptr, flags, errors, flag_kind, heap_bases, rank, epoch,
                                 max_spins, workspace, sk_flags, gemm_programs,
                                 M, N_local, K, stride_am, stride_ak, stride_bk, stride_bn,
                                 stride_cm, stride_cn,
                                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                                 BLOCK_K: tl.constexpr, WORLD_SIZE: tl.constexpr,
                                 STREAM_K: tl.constexpr, USE_TMA: tl.constexpr,
                                 WARP_SPECIALIZE: tl.constexpr, FLATTEN: tl.constexpr,
                                 DOT_IN_FP32: tl.constexpr):
    """Programs ``< gemm_programs`` compute and signal tiles; the rest wait and scatter them."""
    pid = tl.program_id(0)
    if pid < gemm_programs:
        _gemm_worker(a, b, c_ptr, c_ptr, flags, heap_bases, workspace, sk_flags, rank, epoch, pid,
                     gemm_programs, M, N_local, K, stride_am, stride_ak, stride_bk, stride_bn,
                     stride_cm, stride_cn, BLOCK_M, BLOCK_N, BLOCK_K, WORLD_SIZE,
                     1, STREAM_K, USE_TMA, False, 0, WARP_SPECIALIZE, FLATTEN, DOT_IN_FP32)
    else:
        _scatter_worker(c_ptr, flags, errors, flag_kind, heap_bases, rank, epoch, max_spins,
                        pid - gemm_programs, tl.num_programs(0) - gemm_programs, M, N_local,
                        stride_cm, stride_cn, BLOCK_M, BLOCK_N, WORLD_SIZE, True)


@triton.jit
def _ws_order(tile, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
    """The warp-specialized GEMM's tile order: ``swizzle`` (GROUP_M unused), as the scatter's."""
    return swizzle(tile, num_pid_m, num_pid_n)


@gluon.jit
def _ws_store_signal(acc, row, col, c_smem, tiles_done, args, UNUSED: gl.constexpr):
    """ws_gemm's epilogue for producer_consumer: the tile stored through TMA (``ws_gemm.store_c``:
    ``c_desc``, the local block), then, once the store has completed (``device.bulk_stores_done``:
    its writes performed, then the proxy fence), its flag released (``device.signal``: GPU scope,
    after a barrier of the partition). The tile index is the loop's, ``program_id + tiles_done *
    num_programs``. ``args``: ``(c_desc, flags, heap_bases, rank, epoch)``; returns
    ``tiles_done + 1``."""
    c_desc, flags, heap_bases, rank, epoch = args
    ws_gemm.store_c(acc, row, col, c_smem, 0, (c_desc, ), 0)
    device.bulk_stores_done()
    tile = gl.program_id(0) + tiles_done * gl.num_programs(0)
    device.signal(flags + tile, epoch, rank, rank, heap_bases, scope="gpu")
    return tiles_done + 1


@gluon.jit(do_not_specialize=["epoch"])
def gemm_all_scatter_gemm_ws(a_desc, b_desc, c_desc, a_low_desc, c_low_desc, flags,
                             heap_bases, rank, epoch, M, N_local, K,
                             SIGNAL: gl.constexpr, num_stages: gl.constexpr,
                             BLOCK_M_LOW: gl.constexpr, num_warps: gl.constexpr):
    """The local block's GEMM, warp-specialized (``WS_GEMM=1``, kernels/schedule/ws_gemm.py): a
    load warp streams A [M, K] and B_r [K, N_local] through a ring of ``num_stages`` stages
    while the consumers compute tiles in ``swizzle`` order. SIGNAL 0 (bulk_sync): C's tiles go
    out through ``c_desc`` (the local block, TMA), and with ``BLOCK_M_LOW`` > 0 a tile is
    BLOCK_M + BLOCK_M_LOW rows, the last ones by a second consumer (``a_low_desc``,
    ``c_low_desc``); SIGNAL 1 (producer_consumer): each tile through ``c_desc`` too, and its
    flag once the store has completed (``_ws_store_signal``), BLOCK_M_LOW 0."""
    if SIGNAL:
        ws_gemm.gemm_partitions(a_desc, b_desc, c_desc, a_low_desc, c_low_desc, M, N_local, K,
                                gl.constexpr(_ws_order), 1, num_stages, 0, num_warps, 0, None, 0,
                                gl.constexpr(_ws_store_signal), (c_desc, flags, heap_bases, rank, epoch), 0)
    else:
        ws_gemm.gemm_partitions(a_desc, b_desc, c_desc, a_low_desc, c_low_desc, M, N_local, K,
                                gl.constexpr(_ws_order), 1, num_stages, BLOCK_M_LOW, num_warps, 0, None, 0,
                                gl.constexpr(ws_gemm.store_c), (c_desc, ), (c_low_desc, ))


# ----------------------------------------------------------------------------------- host side
def make_inputs(problem: dict, rank: int, world_size: int, seed: int, device: str = "cpu",
                dtype: str = "bfloat16") -> dict:
    """A [M, K] (the same on every rank) and B_r [K, N/W] (rank r's shard), ~ N(0, 1).

    Raises:
        ValueError: N is not a multiple of the world size.
    """
    M, N, K = problem["M"], problem["N"], problem["K"]
    if N % world_size:
        raise ValueError(f"N must be a multiple of the world size {world_size}, got {N}")
    torch_dtype = getattr(torch, dtype)
    shared = torch.Generator(device=device).manual_seed(seed)
    own = torch.Generator(device=device).manual_seed(seed * 1009 + rank + 1)
    a = torch.randn(M, K, generator=shared, device=device).to(torch_dtype)
    b = torch.randn(K, N // world_size, generator=own, device=device).to(torch_dtype)
    return {"a": a, "b": b}


def heap_bytes(problem: dict, world_size: int, dtype: str) -> int:
    """C [M, N] plus one flag per tile (at most one per 16x16 elements) and the control block."""
    itemsize = getattr(torch, dtype).itemsize
    tiles = cdiv(problem["M"], 16) * cdiv(problem["N"], 16)
    return problem["M"] * problem["N"] * itemsize + 4 * tiles + (1 << 20)


def setup(heap, inputs: dict, problem: dict, meta: dict) -> dict:
    """C [M, N] in the heap (every rank's block lands there) and the tile flags."""
    M, N = problem["M"], problem["N"]
    n_local = inputs["b"].shape[1]
    num_tiles = cdiv(M, meta["BLOCK_M"]) * cdiv(n_local, meta["BLOCK_N"])
    c = heap.empty(M, N, dtype=inputs["a"].dtype, name="c")
    flags, kind = heap.flags(num_tiles, "tile_ready")
    return {"a": inputs["a"], "b": inputs["b"], "c": c, "flags": flags, "flag_kind": kind,
            "num_tiles": num_tiles}


def steps(heap, state: dict, pattern: str, epoch: int, meta: dict) -> list:
    """One launch of ``pattern`` (see the module docstring) for this rank.

    Raises:
        ValueError: an unknown pattern, or COMM_SMS that leaves no program for the GEMM.
    """
    a, b, c = state["a"], state["b"], state["c"]
    M, K = a.shape
    n_local = b.shape[1]
    sms = meta.get("NUM_SMS") or num_sms(c.device)
    comm_sms = meta["COMM_SMS"]
    if not 0 < comm_sms < sms:
        raise ValueError(f"COMM_SMS must be in 1..{sms - 1} (the GPU has {sms} SMs), got {comm_sms}")
    tiles = dict(BLOCK_M=meta["BLOCK_M"], BLOCK_N=meta["BLOCK_N"])
    shape = (M, n_local, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
             c.stride(0), c.stride(1))
    flag_args = (state["flags"], heap.errors, state["flag_kind"], heap.heap_bases, heap.rank,
                 epoch, heap.max_spins)
    use_tma = tma_supported(a, b)
    a_arg = operands(a, [meta["BLOCK_M"], meta["BLOCK_K"]], use_tma)
    b_arg = operands(b, [meta["BLOCK_K"], meta["BLOCK_N"]], use_tma)
    local = c[:, heap.rank * n_local:(heap.rank + 1) * n_local]     # this rank's block of C

    def gemm(programs: int, mode: int) -> Step:
        if (meta.get("WS_GEMM", 0) and mode != _EVERY_RANK and use_tma and tma_supported(local)
                and not (mode == _SIGNAL and meta.get("BLOCK_M_LOW", 0)) and ws_gemm.runs_here()):
            return gemm_ws(programs, mode)
        store_tma = mode == _LOCAL and use_tma and tma_supported(local)  # no flag after a TMA store
        run = gemm_launch(state["num_tiles"], programs, meta, c.device, use_tma, store_tma, a.dtype,
                          flags=mode == _SIGNAL)
        c_arg = operands(local, c_block(meta, store_tma), store_tma)
        return Step(lambda: gemm_all_scatter_gemm[run.grid](
            a_arg, b_arg, c_arg, c, state["flags"], heap.heap_bases, run.workspace, run.sk_flags,
            heap.rank, epoch, *shape, WORLD_SIZE=heap.world_size, MODE=mode,
            STORE_TMA=store_tma, **run.kwargs), name=f"gemm mode {mode}")

    def gemm_ws(programs: int, mode: int) -> Step:
        """The local block's GEMM through the warp-specialized Gluon kernel (``WS_GEMM``, Hopper):
        TMA stores, and in producer_consumer a flag per tile after its store."""
        ws_meta = ws_config(meta)
        descs = ws_gemm.descriptors(a, b, local, ws_meta)
        tile_m = ws_meta["BLOCK_M"] + ws_meta["BLOCK_M_LOW"]
        grid = (min(programs, cdiv(M, tile_m) * cdiv(n_local, ws_meta["BLOCK_N"])),)
        return Step(lambda: gemm_all_scatter_gemm_ws[grid](
            *descs, state["flags"], heap.heap_bases, heap.rank, epoch, M, n_local, K,
            SIGNAL=mode == _SIGNAL, num_stages=ws_meta["num_stages"],
            BLOCK_M_LOW=ws_meta["BLOCK_M_LOW"], num_warps=ws_meta["num_warps"],
            maxnreg=ws_gemm.maxnreg(ws_meta)), name=f"gemm mode {mode} (warp-specialized)")

    def scatter(programs: int, wait: bool, stream: str) -> Step:
        grid = (min(programs, state["num_tiles"]),)
        return Step(lambda: gemm_all_scatter_scatter[grid](
            c, *flag_args, M, n_local, c.stride(0), c.stride(1), WORLD_SIZE=heap.world_size,
            WAIT=wait, num_warps=4, **tiles), stream=stream, name="scatter")

    if pattern == "bulk_sync":
        return [gemm(sms, _LOCAL), scatter(sms, False, "main"), BARRIER]
    if pattern == "producer_consumer":
        return [gemm(sms - comm_sms, _SIGNAL), scatter(comm_sms, True, "comm"), BARRIER]
    if pattern == "fused_sequential":
        return [gemm(sms, _EVERY_RANK), BARRIER]
    if pattern == "workgroup_specialized":
        run = gemm_launch(state["num_tiles"], sms - comm_sms, meta, c.device, use_tma, False, a.dtype,
                          flags=True)
        kwargs = {k: v for k, v in run.kwargs.items() if k != "SUBTILE"}
        return [Step(lambda: gemm_all_scatter_specialized[(sms,)](   # GEMM: the first run.grid
            a_arg, b_arg, c, *flag_args, run.workspace, run.sk_flags, run.grid[0], *shape,
            WORLD_SIZE=heap.world_size, **kwargs),
            name="specialized"), BARRIER]
    raise ValueError(f"pattern must be one of {PATTERNS}, got {pattern!r}")


def output(state: dict) -> torch.Tensor:
    """This rank's C [M, N]."""
    return state["c"]


def reference(all_inputs: list, rank: int) -> torch.Tensor:
    """fp32 ``A @ [B_0 | B_1 | ... | B_{W-1}]``, [M, N] (the same on every rank)."""
    a = all_inputs[rank]["a"].float()
    return torch.cat([a @ inputs["b"].float() for inputs in all_inputs], dim=1)


def baseline(inputs: dict, problem: dict, group=None) -> Baseline:
    """torch + NCCL: ``torch.matmul`` into a buffer, then ``all_gather_into_tensor``.

    NCCL writes the gathered blocks stacked by rows, [W * M, N/W]; turning that into [M, N]
    would cost one more copy, which the timed ``run`` leaves out (``result`` does it, untimed).
    """
    import torch.distributed as dist
    a, b = inputs["a"], inputs["b"]
    world = dist.get_world_size(group)
    local = torch.empty(a.shape[0], b.shape[1], dtype=a.dtype, device=a.device)
    gathered = torch.empty(world * a.shape[0], b.shape[1], dtype=a.dtype, device=a.device)

    def run() -> None:
        torch.matmul(a, b, out=local)
        dist.all_gather_into_tensor(gathered, local, group=group)

    return Baseline(run, lambda: torch.cat(gathered.chunk(world, dim=0), dim=1),
                    compute=lambda: torch.matmul(a, b, out=local))


def tile_orders(problem: dict, world_size: int, meta: dict) -> list:
    """The local block's tile grid [cdiv(M, BLOCK_M), cdiv(N/W, BLOCK_N)], walked by ``swizzle``
    in the GEMM and, in the same order, by the scatter."""
    grid = (cdiv(problem["M"], meta["BLOCK_M"]),
            cdiv(problem["N"] // world_size, meta["BLOCK_N"]))
    return [(grid, grid)]


def constraints(problem: dict, world_size: int, pattern: str, meta: dict) -> str | None:
    """The tiles must fit one program's shared memory, COMM_SMS must leave SMs to the GEMM, N
    must split evenly over the ranks, and workgroup_specialized takes no stream-K; with WS_GEMM
    the warp-specialized GEMM's configuration must build (``tiles.ws_gemm_error``). It serves
    bulk_sync, and producer_consumer without a second consumer's rows (the scatter's flags are per
    BLOCK_M x BLOCK_N tile); elsewhere the Triton GEMM runs with the same tiles."""
    if problem["N"] % world_size:
        return f"N must be a multiple of the world size {world_size}, got {problem['N']}"
    if pattern == "workgroup_specialized" and meta.get("STREAM_K", 0):
        # triton 3.6 (the GPU machines') does not build it: "PassManager::run failed" after an LLVM
        # assertion (SmallVector index), every tile configuration with STREAM_K 1 or 2
        # (compile_check --space under 3.6, 2026-11-26); 3.9 builds it, never run on a GPU
        return f"STREAM_K must be 0 with pattern workgroup_specialized (triton 3.6 does not build it), got {meta['STREAM_K']}"
    return ws_gemm_error(meta) or gemm_constraints(meta, 2, comm_sms=True)


SPEC = DistKernelSpec(
    name="gemm_all_scatter",
    kernel_names=("gemm_all_scatter_gemm", "gemm_all_scatter_scatter",
                  "gemm_all_scatter_specialized"),
    patterns=PATTERNS,
    problems={
        "check": {"M": 40, "N": 96, "K": 32},
        # Iris README's example (examples/07_gemm_all_scatter): M = N = K = 4096.
        "iris-4096": {"M": 4096, "N": 4096, "K": 4096},
        # the Iris paper's GEMM + all-scatter shape (8 x MI300X): M 8192, N 3584, K 14336.
        "iris-8192x3584x14336": {"M": 8192, "N": 3584, "K": 14336},
        # Llama-3-70B QKV projection (hidden 8192 -> 64 + 2 x 8 heads of 128), 4096 tokens.
        "llama70b-qkv-4k": {"M": 4096, "N": 10240, "K": 8192},
        # a decode-sized batch (1024 tokens) through Llama-3-70B's up projection (N 28672).
        "llama70b-up-1k": {"M": 1024, "N": 28672, "K": 8192},
    },
    bench_problems=("iris-4096", "iris-8192x3584x14336", "llama70b-qkv-4k", "llama70b-up-1k"),
    meta={**GEMM_META, "COMM_SMS": 16, "WS_GEMM": 0, "BLOCK_M_LOW": 0},
    # STREAM_K 0 at the check problem: workgroup_specialized refuses stream-K (``constraints``),
    # and every pattern verifies there (bench --verify-only, the measured optimize's check, which
    # carries a candidate's pattern, not its tiles); the interpreter tests run stream-K explicitly
    check_meta={**GEMM_CHECK_META, "COMM_SMS": 1, "STREAM_K": 0},
    knobs={"pattern": PATTERNS, "COMM_SMS": (8, 16, 32), **GEMM_TILE_KNOBS, "WS_GEMM": (0, 1),
           "BLOCK_M_LOW": (0, 64), "swizzle": ("row-major", "column-major", "grouped-m:8")},
    tile_orders=tile_orders,
    constraints=constraints,
    pattern_knobs={"producer_consumer": ("COMM_SMS",), "workgroup_specialized": ("COMM_SMS",)},
    tile_configs=GEMM_TILE_CONFIGS + WS_TILE_CONFIGS,
    compute_shape=lambda p, w: {"M": p["M"], "N": p["N"] // w, "K": p["K"]},
    make_inputs=make_inputs,
    # no back-to-back check: peers write this rank's C, so a copy of C after launch e races with
    # the peers' launch e + 1 (a barrier between them would hide what the check looks for)
    linear_input=None,
    heap_bytes=heap_bytes,
    setup=setup,
    steps=steps,
    output=output,
    reference=reference,
    baseline=baseline,
    # fp32 accumulation; the output is rounded once to the input dtype (2^-9 relative for
    # bf16, 2^-12 for fp16), so the Frobenius error is about half an ulp: 1e-2 / 2e-3 leave
    # a margin of several x and still catch a wrong or missing tile (error ~1).
    tolerance={"bfloat16": 1e-2, "float16": 2e-3, "float32": 1e-4},
    flops=lambda p, w: 2.0 * p["M"] * (p["N"] // w) * p["K"],
    comm_bytes=lambda p, w, dtype: (w - 1) * p["M"] * (p["N"] // w) * getattr(torch, dtype).itemsize,
    dtypes=("bfloat16", "float16"),
    expert="grouped-m:8",
)
