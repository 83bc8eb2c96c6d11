"""
All-gather + GEMM: ``C_r = all_gather(A) @ B_r`` with A sharded by rows, B by columns
=====================================================================================

Why this kernel
---------------
The input projection of a tensor- and sequence-parallel transformer layer (Megatron's
sequence parallelism, the up or QKV projection): between layers the activations are split by
tokens, rank r holding A_r [M/W, K]; the column-parallel projection needs all of them,
``A = [A_0; A_1; ...; A_{W-1}]`` [M, K], against its column shard of the weights B_r
[K, N/W], giving C_r [M, N/W]. The usual way is two stop-and-go steps, an NCCL all-gather of A
and then a matmul; but each row tile of C_r needs only one rank's rows of A, so the GEMM can
start on the local rows at once and take the others as they arrive. How the gather interleaves
with the GEMM is this kernel's overlap knob:

- ``pull``: one persistent GEMM kernel whose A tiles are loaded straight from the owning
  rank's heap (``device.translate`` of the shard's base, peer = row // (M/W)); no gather
  buffer, no flags (the Iris taxonomy's *fused sequential*: communication is the GEMM's own
  loads). Each remote A tile crosses NVLink once per column tile that needs it, num_pid_n
  times, unless the reader's caches keep it (not measured);
- ``push``: a copy kernel on the "comm" stream (``COMM_SMS`` programs) puts this rank's
  shard into every peer's gathered A [M, K] in chunks of ``BLOCK_M`` rows, each followed by a
  flag (release, system scope) in the peer's heap; the GEMM on the main stream
  (``NUM_SMS - COMM_SMS`` programs) waits (acquire, bounded) for the flag of each remote row
  tile it needs; local row tiles need no wait (*producer-consumer on two streams*);
- ``push_copy_engine``: the same protocol with the copies done by the GPU's copy engines
  (``Tensor.copy_`` into the peer's gathered A, mapped in this process) on the "comm" stream
  (``peer_copy.copy_engine_push``), ``CE_GROUPS`` copies per peer, each followed by a
  write of its group's flag by its stream (``Heap.signal_queued``, cuStreamWriteValue32); the
  GEMM has every SM (``push`` gives ``COMM_SMS`` of them to copies that finish early in the
  GEMM and then idle) and waits once per group of row tiles. Until 2026-11-26 a one-program
  kernel signalled each group, and the GEMM left it one SM: the persistent GEMM's programs stay
  resident until the end, each holding nearly all of an SM's shared memory, so with every SM
  theirs a signal kernel found no SM while the GEMM's programs waited for its flags (two H100s,
  2026-11-25: the second launch at llama70b-up-8k gave up after 2^24 polls);
- ``bulk_sync``: the same copy on all SMs, a barrier, then the GEMM without waits (no
  overlap: the reference point of the other two inside the same code).

Row tiles never straddle two ranks: each rank's M/W rows make cdiv(M/W, BLOCK_M) row tiles,
the last one masked where BLOCK_M does not divide M/W (only at the small check problem).
Every pattern but push_copy_engine ends with a device barrier: after it, no rank reads a peer's
shard or writes a peer's gathered buffer any more, so the next launch may overwrite them.
push_copy_engine instead alternates between two gathered A by the epoch's parity: this rank's
copies of launch e + 2 into a peer's gathered A of launch e come after this rank's GEMM of
launch e + 1 (the copies wait for the main stream), which waited for the peer's copies of e + 1,
which came after the peer's GEMM of e, the last reader of that buffer; the flags count epochs,
so one set serves both.

The blocked loop, in pseudo-code (push, GEMM side)::

    for tile in range(pid, num_tiles, num_programs):            # persistent
        pid_m, pid_n = swizzle(tile, num_pid_m, num_pid_n)     # the rewrite target
        pid_m = (pid_m + r * tiles_per_rank) % num_pid_m         # own rows first
        src = pid_m // tiles_per_rank                            # the rank that owns the rows
        if src == r:  a = A_r (local)
        else:         wait(flag[src, chunk] >= epoch); a = gathered rows of src
        C_r[pid_m, pid_n tile] = a[rows, :] @ B_r[:, pid_n tile]   # fp32 accumulation

and the copy side: for distance j = 1 .. W-1, for each chunk c: put rows c of A_r into rank
(r - j) % W's gathered A, then signal that rank's flag [r, c].

The tile order's effect
-----------------------
``swizzle`` orders the tiles of a *rank-relative* grid: its row 0 is this rank's first row
tile (the kernel rotates rows by ``r * tiles_per_rank``). So every order starts on local rows,
which need no communication, while the copies of the first remote shard are in flight. At
distance j rank r reads the shard of rank r + j and sends its own to rank r - j: at any time
the W ranks read from W different peers (a permutation), so no rank's NVLink ports serve
everyone at once.

Counted at ``llama70b-up-8k`` on 8 ranks with 128 x 256 tiles: C_r is [8192, 3584], 64 x 14 =
896 tiles, 8 row tiles per shard. The push GEMM runs 132 - 16 = 116 programs: its first wave
covers 116 / 14 = 8.3 row tiles, i.e. the local shard (112 tiles, no wait) plus the first
tiles of rank r + 1's. One tile is 2 * 128 * 256 * 8192 = 0.54 GFLOP, about 90 us on one SM
at 6 TFLOP/s (800 / 132), so the GEMM eats one shard (112 tiles) per ~90 us; a shard is
1024 x 8192 x 2 B = 16 MiB, which 16 SMs copy over NVLink in a comparable time (80-160 us
at 100-200 GB/s: estimated, not measured). So the local wave covers the first copy, and the
copy rate (``COMM_SMS``) sets whether the later waves wait. With N/W = 3584 the tile grid is
only 14 columns wide: row-major and ``grouped-m:8`` waves both span about 8 rows x 14
columns, so the L2 effect of the order is small here; it grows with N/W (llama8b-up-4k at 2
ranks: 28 columns).
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl
from triton.experimental import gluon
from triton.experimental.gluon import language as gl

from swizzleperf.kernels.distributed import device
from swizzleperf.kernels.distributed.peer_copy import copy_engine_group, copy_engine_push
from swizzleperf.kernels.distributed.spec import BARRIER, Baseline, DistKernelSpec, Step
from swizzleperf.kernels.distributed.tiles import (GEMM_CHECK_META, GEMM_META, GEMM_TILE_CONFIGS,
                                                   GEMM_TILE_KNOBS, WS_TILE_CONFIGS, c_block,
                                                   gemm_constraints, gemm_launch, num_sms, operands,
                                                   tma_supported, ws_config, ws_gemm_error)
from swizzleperf.kernels.schedule import ws_gemm
from swizzleperf.kernels.schedule.persistent_gemm import (cdiv, data_parallel_tiles, mainloop, store_tile,
                                                          stream_k_fixup, stream_k_range,
                                                          stream_k_segment)

#: The patterns, the default first: ``push`` (``pull`` until 2026-11-25, which measured 4x slower
#: than every other pattern: 13.3 ms at llama70b-up-8k on two H100s where the others took 4.2-4.4,
#: bench/results/dist_optimize_h100x2/ at commit 2f3ed18). With the grouped-m:8 order and the tuned GEMM configurations
#: push was within 5 % of the best pattern at the three bench problems there and never lost to
#: torch + NCCL (1.02-1.08x, bench/results/dist_gemm_h100x2.md), where push_copy_engine, best at two
#: of them, took 0.66x at llama8b-up-4k.
PATTERNS = ("push", "push_copy_engine", "bulk_sync", "pull")
_PULL, _WAIT, _GATHERED = 0, 1, 2  # where the GEMM finds remote rows of A (SOURCE)


@triton.jit
def swizzle(pid, num_pid_m, num_pid_n):
    """Map tile index ``pid`` to the tile ``(pid_m, pid_n)`` of the rank-relative grid: groups of 8 tile
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
def _gemm_piece(a, b, flags, errors, flag_kind, heap_bases, rank, epoch, max_spins, flag_group,
                acquired, tile, k_lo, k_hi, tiles_per_rank, num_pid_m, num_pid_n, rows_per_rank,
                N_local, K, stride_am, stride_ak, stride_bk, stride_bn,
                BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                SOURCE: tl.constexpr, USE_TMA: tl.constexpr, DOT_IN_FP32: tl.constexpr):
    """K steps ``k_lo .. k_hi`` of tile index ``tile``:
    ``(accumulator, src, chunk, pid_n, acquired)``.

    ``swizzle`` maps the index to the rank-relative tile; its row tile is row tile ``chunk`` of
    rank ``src``'s rows. Remote rows are read after their flag (SOURCE 1), from ``src``'s heap
    (SOURCE 0: ``a`` is the gathered A's pointer, translated) or from the local gathered A
    (SOURCE 1, 2; own rows always: this rank's shard lives there). One flag covers
    ``flag_group`` consecutive row tiles of a source (the first one's flag); ``acquired`` is the
    index of the flag this program acquired last, not waited for again.
    """
    pid_m, pid_n = swizzle(tile, num_pid_m, num_pid_n)
    pid_m = (pid_m + rank * tiles_per_rank) % num_pid_m  # rank-relative -> global row tile
    src = pid_m // tiles_per_rank                         # the rank that owns these rows
    chunk = pid_m - src * tiles_per_rank                  # row tile inside src's rows
    if SOURCE == 1:
        flag = src * tiles_per_rank + chunk - chunk % flag_group
        if src != rank and flag != acquired:
            device.wait(flags + flag, epoch, errors, flag_kind, flag, src, max_spins)
            if USE_TMA:   # the rows are then read through the descriptor
                device.fence_async_reads()
            acquired = flag
    accumulator = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    if USE_TMA:  # a: descriptor of the gathered A [M, K]; rows past src's are masked at the store
        accumulator = mainloop(a, b, src * rows_per_rank + chunk * BLOCK_M, pid_n * BLOCK_N,
                               k_lo, k_hi, rows_per_rank, N_local, K, stride_am, stride_ak,
                               stride_bk, stride_bn, accumulator, BLOCK_M, BLOCK_N, BLOCK_K,
                               USE_TMA, DOT_IN_FP32)
    else:        # a: pointer to the gathered A; rows wrap inside src's rows
        a_rows = a + src * rows_per_rank * stride_am
        if SOURCE == 0:
            a_rows = device.translate(a_rows, rank, src, heap_bases)   # src's own rows, remote
        accumulator = mainloop(a_rows, b, chunk * BLOCK_M, pid_n * BLOCK_N, k_lo, k_hi,
                               rows_per_rank, N_local, K, stride_am, stride_ak, stride_bk,
                               stride_bn, accumulator, BLOCK_M, BLOCK_N, BLOCK_K, USE_TMA,
                               DOT_IN_FP32)
    return accumulator, src, chunk, pid_n, acquired


@triton.jit
def _store_c(c, accumulator, src, chunk, pid_n, rows_per_rank, N_local, stride_cm, stride_cn,
             BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, STORE_TMA: tl.constexpr,
             SUBTILE: tl.constexpr):
    """Row tile ``chunk`` of rank ``src``'s rows of C_r [M, N_local], column tile ``pid_n``:
    through C's descriptor (STORE_TMA: row tiles divide every rank's rows) or masked to src's
    rows through the pointer."""
    if STORE_TMA:
        store_tile(c, accumulator, src * rows_per_rank + chunk * BLOCK_M, pid_n * BLOCK_N,
                   rows_per_rank, N_local, stride_cm, stride_cn, BLOCK_M, BLOCK_N, True, SUBTILE)
    else:
        store_tile(c + src * rows_per_rank * stride_cm, accumulator, chunk * BLOCK_M,
                   pid_n * BLOCK_N, rows_per_rank, N_local, stride_cm, stride_cn, BLOCK_M,
                   BLOCK_N, False)


@triton.jit(do_not_specialize=["epoch"])
def all_gather_gemm_gemm(a, b, c, flags, errors, flag_kind, heap_bases, workspace, sk_flags,
                         rank, epoch, max_spins, flag_group, rows_per_rank, N_local, K,
                         stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                         BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                         WORLD_SIZE: tl.constexpr, SOURCE: tl.constexpr, STREAM_K: tl.constexpr,
                         USE_TMA: tl.constexpr, STORE_TMA: tl.constexpr, SUBTILE: tl.constexpr,
                         WARP_SPECIALIZE: tl.constexpr, FLATTEN: tl.constexpr,
                         DOT_IN_FP32: tl.constexpr):
    """Persistent GEMM ``C_r [M, N_local] = A [M, K] @ B_r [K, N_local]`` (kernels/schedule/persistent_gemm.py):
    tile indices ``pid, pid + P, ...`` whole up to the last ``STREAM_K`` waves, then the
    program's share of those waves' K steps, each index through ``swizzle`` (own rows first).

    Row tiles never straddle two ranks' rows: each rank's rows_per_rank rows make
    cdiv(rows_per_rank, BLOCK_M) row tiles, the last one masked where BLOCK_M does not divide.
    ``a`` is the gathered A [M, K] (descriptor with USE_TMA, else pointer; SOURCE 0 reads each
    rank's rows from that rank's copy), ``b`` B_r [K, N_local], ``c`` C_r [M, N_local]
    (descriptor with STORE_TMA, else pointer); A and C are contiguous. With SOURCE 1 a remote
    row tile is read after the flag of its group of ``flag_group`` row tiles (``_gemm_piece``).
    """
    pid = tl.program_id(0)
    num_programs = tl.num_programs(0)
    tiles_per_rank = tl.cdiv(rows_per_rank, BLOCK_M)
    num_pid_m = WORLD_SIZE * tiles_per_rank
    num_pid_n = tl.cdiv(N_local, BLOCK_N)
    k_iters = tl.cdiv(K, BLOCK_K)
    num_dp_tiles = data_parallel_tiles(num_pid_m * num_pid_n, num_programs, STREAM_K)
    acquired = tl.full((), -1, tl.int32)
    for tile in tl.range(pid, num_dp_tiles, num_programs, flatten=FLATTEN,
                         warp_specialize=WARP_SPECIALIZE):
        accumulator, src, chunk, pid_n, acquired = _gemm_piece(
            a, b, flags, errors, flag_kind, heap_bases, rank, epoch, max_spins, flag_group,
            acquired, tile, 0, k_iters,
            tiles_per_rank, num_pid_m, num_pid_n, rows_per_rank, N_local, K, stride_am,
            stride_ak, stride_bk, stride_bn, BLOCK_M, BLOCK_N, BLOCK_K, SOURCE, USE_TMA,
            DOT_IN_FP32)
        _store_c(c, accumulator, src, chunk, pid_n, rows_per_rank, N_local, stride_cm,
                 stride_cn, BLOCK_M, BLOCK_N, STORE_TMA, SUBTILE)
    if STREAM_K > 0:
        units = (num_pid_m * num_pid_n - num_dp_tiles) * k_iters
        first, stop = stream_k_range(pid, num_programs, units)
        while stop > first:  # this program's pieces, last first
            sk_tile, start, k_lo, k_hi = stream_k_segment(stop, first, k_iters)
            accumulator, src, chunk, pid_n, acquired = _gemm_piece(
                a, b, flags, errors, flag_kind, heap_bases, rank, epoch, max_spins, flag_group,
                acquired, num_dp_tiles + sk_tile, k_lo, k_hi, tiles_per_rank, num_pid_m, num_pid_n,
                rows_per_rank, N_local, K, stride_am, stride_ak, stride_bk, stride_bn, BLOCK_M,
                BLOCK_N, BLOCK_K, SOURCE, USE_TMA, DOT_IN_FP32)
            accumulator = stream_k_fixup(accumulator, workspace, sk_flags, pid, num_programs,
                                         units, sk_tile, start, k_hi, k_iters, BLOCK_M, BLOCK_N)
            if k_hi == k_iters:
                _store_c(c, accumulator, src, chunk, pid_n, rows_per_rank, N_local, stride_cm,
                         stride_cn, BLOCK_M, BLOCK_N, STORE_TMA, SUBTILE)
            stop = start


@triton.jit
def _ws_order(tile, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
    """The warp-specialized GEMM's tile order: ``swizzle`` (GROUP_M unused), rotated by the
    kernel to start at this rank's rows (``ws_gemm.rotated``), as the Triton GEMM's."""
    return swizzle(tile, num_pid_m, num_pid_n)


@gluon.jit
def _wait_rows(row, rows_in_tile, args):
    """The load warp's wait before a tile of A rows ``row .. row + rows_in_tile - 1`` (the
    gathered A's; clipped at M): for every other rank whose rows they include, the flags of the
    copy groups that hold them (a group of ``per_group`` row tiles of ``flag_rows`` rows, its
    first tile's flag: ``flags[src * chunks + first]``), acquire, bounded (``device.wait``); then
    the proxy fence, since the rows are read through TMA. A tile may span two ranks' rows (a
    320-row tile where a rank has 512). ``args``: ``(flags, errors, flag_kind, rank, epoch,
    max_spins, rows_per_rank, flag_rows, per_group, M)``."""
    flags, errors, flag_kind, rank, epoch, max_spins, rows_per_rank, flag_rows, per_group, M = args
    chunks = gl.cdiv(rows_per_rank, flag_rows)
    last = gl.minimum(row + rows_in_tile, M) - 1
    for src in range(row // rows_per_rank, last // rows_per_rank + 1):
        if src != rank:
            first = (gl.maximum(row - src * rows_per_rank, 0) // flag_rows) // per_group * per_group
            stop = gl.minimum(last - src * rows_per_rank, rows_per_rank - 1) // flag_rows + 1
            for group in range(first, stop, per_group):
                flag = src * chunks + group
                device.wait(flags + flag, epoch, errors, flag_kind, flag, src, max_spins)
    device.fence_async_reads()


@gluon.jit(do_not_specialize=["epoch"])
def all_gather_gemm_ws(a_desc, b_desc, c_desc, a_low_desc, c_low_desc, flags, errors, flag_kind,
                       rank, epoch, max_spins, rows_per_rank, flag_rows, per_group, M, N_local, K,
                       WAIT: gl.constexpr, num_stages: gl.constexpr, BLOCK_M_LOW: gl.constexpr,
                       num_warps: gl.constexpr):
    """``C_r [M, N_local] = A [M, K] @ B_r [K, N_local]`` warp-specialized (``WS_GEMM=1``,
    kernels/schedule/ws_gemm.py): a load warp streams the gathered A and B_r through a ring of
    ``num_stages`` stages, tiles of BLOCK_M (+ BLOCK_M_LOW, a second consumer's) rows over all M
    rows in ``swizzle`` order starting at the tile of this rank's first row; C through TMA. With
    WAIT (push_copy_engine) the load warp waits for the flags of the peers' rows a tile needs
    (``_wait_rows``) before its loads, while the consumers compute what is loaded; without
    (bulk_sync) A is complete at launch. Descriptors: ``a_desc`` / ``a_low_desc`` the gathered A
    [M, K], ``b_desc`` B_r, ``c_desc`` / ``c_low_desc`` C_r."""
    TILE_M: gl.constexpr = a_desc.block_type.shape[0] + BLOCK_M_LOW
    first_pid_m = (rank * rows_per_rank) // TILE_M
    wait_rows: gl.constexpr = _wait_rows if WAIT else None
    ws_gemm.gemm_partitions(a_desc, b_desc, c_desc, a_low_desc, c_low_desc, M, N_local, K,
                            gl.constexpr(_ws_order), 1, num_stages, BLOCK_M_LOW, num_warps,
                            first_pid_m, wait_rows,
                            (flags, errors, flag_kind, rank, epoch, max_spins, rows_per_rank,
                             flag_rows, per_group, M), gl.constexpr(ws_gemm.store_c), (c_desc, ),
                            (c_low_desc, ))


@triton.jit(do_not_specialize=["epoch"])
def all_gather_gemm_push(a_ptr, gathered_ptr, flags, heap_bases, rank, epoch, rows_per_rank, K,
                         stride_am, stride_ak,
                         BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr,
                         WORLD_SIZE: tl.constexpr, SIGNAL: tl.constexpr):
    """Put this rank's shard A_r [rows_per_rank, K] into rows ``r * rows_per_rank ...`` of every
    peer's gathered A [M, K], in chunks of ``BLOCK_M`` rows (the GEMM's row tiles): peer r - 1
    first, then r - 2, ... With SIGNAL, each chunk is followed by ``flags[r, chunk] = epoch``
    in the peer's heap."""
    chunks = tl.cdiv(rows_per_rank, BLOCK_M)
    offs_m = tl.arange(0, BLOCK_M)
    offs_k = tl.arange(0, BLOCK_K)
    for item in range(tl.program_id(0), (WORLD_SIZE - 1) * chunks, tl.num_programs(0)):
        distance = 1 + item // chunks
        chunk = item % chunks
        peer = (rank - distance + WORLD_SIZE) % WORLD_SIZE
        rows = chunk * BLOCK_M + offs_m                                        # [BLOCK_M]
        src = a_ptr + rows[:, None] * stride_am + offs_k[None, :] * stride_ak  # [BLOCK_M, BLOCK_K]
        dst = device.translate(gathered_ptr, rank, peer, heap_bases) \
            + (rank * rows_per_rank + rows)[:, None] * stride_am + offs_k[None, :] * stride_ak
        for k in range(0, tl.cdiv(K, BLOCK_K)):
            mask = (rows[:, None] < rows_per_rank) & (offs_k[None, :] < K - k * BLOCK_K)
            tl.store(dst, tl.load(src, mask=mask), mask=mask)
            src += BLOCK_K * stride_ak
            dst += BLOCK_K * stride_ak
        if SIGNAL:  # release after a CTA barrier: all threads' stores before it are visible
            device.signal(flags + rank * chunks + chunk, epoch, rank, peer, heap_bases)


def _push_copy_engine(heap, state: dict, epoch: int, meta: dict) -> Step:
    """Copy-engine pushes of this rank's shard into every peer's gathered A of this epoch's
    parity, peer r - 1 first, each group's flag written by the stream after its copy
    (``peer_copy.copy_engine_push``: no kernel, no SM)."""
    a = state["a"]
    rows, block_m, rank, world = a.shape[0], meta["BLOCK_M"], heap.rank, heap.world_size
    chunks, per_group = cdiv(rows, block_m), copy_engine_group(rows, meta)
    key = ("copies", epoch % 2, block_m, per_group)
    if key not in state:   # the copies' views, made once per state (host time counts per launch)
        copies = []
        for distance in range(1, world):
            peer = (rank - distance) % world
            rows_there = heap.peer_view(state["gathered_pair"], peer)[epoch % 2,
                                                                      rank * rows:(rank + 1) * rows]
            for first in range(0, chunks, per_group):
                start, stop = first * block_m, min(rows, (first + per_group) * block_m)
                copies.append((rows_there[start:stop], a[start:stop], rank * chunks + first, peer))
        state[key] = copies
    return Step(lambda: copy_engine_push(heap, state[key], state["flags"], epoch),
                stream="comm", name="push (copy engine)")


# ----------------------------------------------------------------------------------- host side
def make_inputs(problem: dict, rank: int, world_size: int, seed: int, device: str = "cpu",
                dtype: str = "bfloat16") -> dict:
    """A_r [M/W, K] (rank r's rows of the activations) and B_r [K, N/W] (its weight columns),
    ~ N(0, 1), depending on (seed, rank) only.

    Raises:
        ValueError: M or N is not a multiple of the world size.
    """
    M, N, K = problem["M"], problem["N"], problem["K"]
    if M % world_size or N % world_size:
        raise ValueError(f"M and N must be multiples of the world size {world_size}, "
                         f"got M={M}, N={N}")
    torch_dtype = getattr(torch, dtype)
    own = torch.Generator(device=device).manual_seed(seed * 1009 + rank + 1)
    a = torch.randn(M // world_size, K, generator=own, device=device).to(torch_dtype)
    b = torch.randn(K, N // world_size, generator=own, device=device).to(torch_dtype)
    return {"a": a, "b": b}


def heap_bytes(problem: dict, world_size: int, dtype: str) -> int:
    """Two gathered A [M, K] (this rank's shard is their rows r * M/W ..), one flag per row tile
    (at most W * cdiv(M/W, 16): BLOCK_M >= 16) and 1 MiB for the control block and alignment.
    B_r and C_r stay outside the heap."""
    M, K = problem["M"], problem["K"]
    itemsize = getattr(torch, dtype).itemsize
    flags = world_size * cdiv(M // world_size, 16)
    return 2 * M * K * itemsize + 4 * flags + (1 << 20)


def setup(heap, inputs: dict, problem: dict, meta: dict) -> dict:
    """Two gathered A [M, K] in the heap (``gathered_pair``; ``gathered`` is the first, the one
    every pattern but push_copy_engine uses) with this rank's shard A_r copied into their rows
    ``r * M/W ..`` (``a`` is the first one's: peers push into, and pull from, the same rows of
    every heap), one flag per (source rank, row tile), C_r [M, N/W] outside the heap (no peer
    touches it)."""
    rows, K = inputs["a"].shape
    M = rows * heap.world_size
    gathered_pair = heap.empty(2, M, K, dtype=inputs["a"].dtype, name="a_gathered")
    for gathered in gathered_pair:
        gathered[heap.rank * rows:(heap.rank + 1) * rows].copy_(inputs["a"])
    gathered = gathered_pair[0]
    a = gathered[heap.rank * rows:(heap.rank + 1) * rows]
    flags, kind = heap.flags(heap.world_size * cdiv(rows, meta["BLOCK_M"]),
                             "a_chunk_ready")
    c = torch.empty(M, inputs["b"].shape[1], dtype=a.dtype, device=a.device)
    return {"a": a, "gathered": gathered, "gathered_pair": gathered_pair, "b": inputs["b"], "c": c,
            "flags": flags, "flag_kind": kind}


def steps(heap, state: dict, pattern: str, epoch: int, meta: dict) -> list:
    """One launch of ``pattern`` (see the module docstring) for this rank.

    Raises:
        ValueError: an unknown pattern, or COMM_SMS that leaves no program for the GEMM.
    """
    a, gathered, b, c = state["a"], state["gathered"], state["b"], state["c"]
    rows, K = a.shape
    n_local = b.shape[1]
    sms = meta.get("NUM_SMS") or num_sms(c.device)
    comm_sms = meta["COMM_SMS"]
    if not 0 < comm_sms < sms:
        raise ValueError(f"COMM_SMS must be in 1..{sms - 1} (the GPU has {sms} SMs), got {comm_sms}")
    world, block_m = heap.world_size, meta["BLOCK_M"]
    num_tiles = world * cdiv(rows, block_m) * cdiv(n_local, meta["BLOCK_N"])
    chunks = (world - 1) * cdiv(rows, block_m)
    load_tma = tma_supported(gathered, b)
    store_tma = load_tma and tma_supported(c) and rows % block_m == 0

    def gemm(programs: int, source: int, flag_group: int = 1, gathered=gathered) -> Step:
        if (meta.get("WS_GEMM", 0) and source != _PULL and load_tma and tma_supported(c)
                and ws_gemm.runs_here()):
            return gemm_ws(programs, source == _WAIT, flag_group, gathered)
        use_tma = load_tma and source != _PULL        # peers' rows: pointers, translated
        run = gemm_launch(num_tiles, programs, meta, c.device, use_tma, store_tma and use_tma,
                          a.dtype, flags=source == _WAIT)
        a_arg = operands(gathered, [block_m, meta["BLOCK_K"]], use_tma)
        b_arg = operands(b, [meta["BLOCK_K"], meta["BLOCK_N"]], use_tma)
        c_arg = operands(c, c_block(meta, store_tma and use_tma), store_tma and use_tma)
        return Step(lambda: all_gather_gemm_gemm[run.grid](
            a_arg, b_arg, c_arg, state["flags"], heap.errors, state["flag_kind"], heap.heap_bases,
            run.workspace, run.sk_flags, heap.rank, epoch, heap.max_spins, flag_group, rows,
            n_local, K,
            a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
            WORLD_SIZE=world, SOURCE=source,
            STORE_TMA=store_tma and use_tma, **run.kwargs), name="gemm")

    def gemm_ws(programs: int, wait: bool, flag_group: int, gathered: torch.Tensor) -> Step:
        """The GEMM through the warp-specialized Gluon kernel (``WS_GEMM``, Hopper), over the
        gathered A ``gathered``; with ``wait`` its load warp waits for the peers' rows."""
        ws_meta = ws_config(meta)
        key = ("ws descriptors", gathered.data_ptr(), tuple(sorted(ws_meta.items())))
        if key not in state:   # made once per state and buffer (host time counts per launch)
            a_desc, b_desc, c_desc, a_low, c_low = ws_gemm.descriptors(gathered, b, c, ws_meta)
            state[key] = (a_desc, b_desc, c_desc, a_low, c_low)
        tile_m = ws_meta["BLOCK_M"] + ws_meta["BLOCK_M_LOW"]
        grid = (min(programs, cdiv(world * rows, tile_m) * cdiv(n_local, ws_meta["BLOCK_N"])),)
        return Step(lambda: all_gather_gemm_ws[grid](
            *state[key], state["flags"], heap.errors, state["flag_kind"], heap.rank, epoch,
            heap.max_spins, rows, block_m, flag_group, world * rows, n_local, K, WAIT=wait,
            num_stages=ws_meta["num_stages"], BLOCK_M_LOW=ws_meta["BLOCK_M_LOW"],
            num_warps=ws_meta["num_warps"], maxnreg=ws_gemm.maxnreg(ws_meta)),
            name="gemm (warp-specialized)")

    def push(programs: int, signal: bool, stream: str) -> Step:
        grid = (max(1, min(programs, chunks)),)
        return Step(lambda: all_gather_gemm_push[grid](
            a, gathered, state["flags"], heap.heap_bases, heap.rank, epoch, rows, K,
            a.stride(0), a.stride(1), BLOCK_M=block_m, BLOCK_K=meta["BLOCK_K"],
            WORLD_SIZE=world, SIGNAL=signal, num_warps=4), stream=stream, name="push")

    if pattern == "pull":
        return [gemm(sms, _PULL), BARRIER]
    if pattern == "push":   # the CPU runner runs the push of every rank before any GEMM
        return [push(comm_sms, True, "comm"), gemm(sms - comm_sms, _WAIT), BARRIER]
    if pattern == "push_copy_engine":   # every SM: the copies and their flags use none; no
        # barrier: the gathered A alternates (module docstring)
        return [_push_copy_engine(heap, state, epoch, meta),
                gemm(sms, _WAIT, copy_engine_group(rows, meta), state["gathered_pair"][epoch % 2])]
    if pattern == "bulk_sync":
        return [push(sms, False, "main"), BARRIER, gemm(sms, _GATHERED), BARRIER]
    raise ValueError(f"pattern must be one of {PATTERNS}, got {pattern!r}")


def output(state: dict) -> torch.Tensor:
    """This rank's C_r [M, N/W]."""
    return state["c"]


def reference(all_inputs: list, rank: int) -> torch.Tensor:
    """fp32 ``[A_0; A_1; ...; A_{W-1}] @ B_rank``, [M, N/W]."""
    a = torch.cat([inputs["a"].float() for inputs in all_inputs], dim=0)
    return a @ all_inputs[rank]["b"].float()


def baseline(inputs: dict, problem: dict, group=None) -> Baseline:
    """torch + NCCL: ``all_gather_into_tensor`` into a preallocated A [M, K], then
    ``torch.matmul`` into a preallocated C_r [M, N/W]."""
    import torch.distributed as dist
    a, b = inputs["a"], inputs["b"]
    world = dist.get_world_size(group)
    gathered = torch.empty(world * a.shape[0], a.shape[1], dtype=a.dtype, device=a.device)
    c = torch.empty(gathered.shape[0], b.shape[1], dtype=a.dtype, device=a.device)

    def run() -> None:
        dist.all_gather_into_tensor(gathered, a.contiguous(), group=group)
        torch.matmul(gathered, b, out=c)

    return Baseline(run, lambda: c, compute=lambda: torch.matmul(gathered, b, out=c))


def tile_orders(problem: dict, world_size: int, meta: dict) -> list:
    """The GEMM's rank-relative tile grid [W * cdiv(M/W, BLOCK_M), cdiv(N/W, BLOCK_N)] (row
    tiles never straddle two ranks' rows; own rows first)."""
    rows = cdiv(problem["M"] // world_size, meta["BLOCK_M"])
    grid = (world_size * rows, cdiv(problem["N"] // world_size, meta["BLOCK_N"]))
    return [(grid, grid)]


def constraints(problem: dict, world_size: int, pattern: str, meta: dict) -> str | None:
    """M and N must split evenly over the ranks, the tiles fit one program's shared memory,
    COMM_SMS leave SMs to the GEMM, and with WS_GEMM the warp-specialized GEMM's configuration
    build (``tiles.ws_gemm_error``). push_copy_engine and bulk_sync run it (its 320-row tile
    included); push and pull run the Triton GEMM with the same tiles."""
    if problem["M"] % world_size or problem["N"] % world_size:
        return (f"M and N must be multiples of the world size {world_size}, got M={problem['M']}, "
                f"N={problem['N']}")
    return ws_gemm_error(meta) or gemm_constraints(meta, 2, comm_sms=True)


SPEC = DistKernelSpec(
    name="all_gather_gemm",
    kernel_names=("all_gather_gemm_gemm", "all_gather_gemm_push"),
    patterns=PATTERNS,
    problems={
        # W = 2: 24 rows per rank (a full and a half row tile), 24 columns (a full and a
        # half column tile); W = 3: 16 rows, 16 columns; K = 40 leaves a ragged K step. Any
        # W dividing 48 works (W = 4, 8 on GPUs: 12 and 6 rows, one masked row tile each).
        "check": {"M": 48, "N": 48, "K": 40},
        # Llama-3-70B MLP up projection (hidden 8192 -> intermediate 28672), 8192 tokens of a
        # sequence-parallel layer.
        "llama70b-up-8k": {"M": 8192, "N": 28672, "K": 8192},
        # Llama-3-70B QKV projection (hidden 8192 -> 64 + 2 x 8 heads of 128), 4096 tokens.
        "llama70b-qkv-4k": {"M": 4096, "N": 10240, "K": 8192},
        # Llama-3-8B MLP up projection (hidden 4096 -> 14336), 4096 tokens: the small one.
        "llama8b-up-4k": {"M": 4096, "N": 14336, "K": 4096},
    },
    bench_problems=("llama70b-up-8k", "llama70b-qkv-4k", "llama8b-up-4k"),
    # CE_GROUPS=1: one copy and one flag per peer. On two H200s (2026-11-26,
    # bench/results/ag_ce_groups_h200x2/) push_copy_engine ran at the same GPU time with 1 and 4
    # groups at the three bench problems (within 0.3 %), and queueing a launch took the host
    # 0.26-0.46 ms with 1 against 0.35-0.64 with 4: at llama8b-up-4k more than the GPUs' 0.33.
    meta={**GEMM_META, "COMM_SMS": 16, "CE_GROUPS": 1, "WS_GEMM": 0, "BLOCK_M_LOW": 0},
    check_meta={**GEMM_CHECK_META, "COMM_SMS": 1, "CE_GROUPS": 2},
    knobs={"pattern": PATTERNS, "COMM_SMS": (8, 16, 32), "CE_GROUPS": (1, 2, 4, 8),
           **GEMM_TILE_KNOBS, "WS_GEMM": (0, 1), "BLOCK_M_LOW": (0, 64),
           "swizzle": ("row-major", "column-major", "grouped-m:8")},
    tile_orders=tile_orders,
    constraints=constraints,
    pattern_knobs={"push": ("COMM_SMS",), "push_copy_engine": ("CE_GROUPS",)},
    tile_configs=GEMM_TILE_CONFIGS + WS_TILE_CONFIGS,
    compute_shape=lambda p, w: {"M": p["M"], "N": p["N"] // w, "K": p["K"]},
    make_inputs=make_inputs,
    linear_input="b",
    heap_bytes=heap_bytes,
    setup=setup,
    steps=steps,
    output=output,
    reference=reference,
    baseline=baseline,
    # fp32 accumulation; C is rounded once to the input dtype (unit roundoff 2^-8 for bf16,
    # 2^-11 for fp16; the Frobenius error of rounding is about a third of it, ~1.6e-3 and 2e-4),
    # so 1e-2 / 2e-3 leave a margin of several x and still catch a wrong or missing tile
    # (error ~1) or a row tile read from the wrong rank (error ~1.4).
    tolerance={"bfloat16": 1e-2, "float16": 2e-3, "float32": 1e-4},
    flops=lambda p, w: 2.0 * p["M"] * (p["N"] // w) * p["K"],
    # the shard goes to (or is read by) each of the W - 1 peers once
    comm_bytes=lambda p, w, dtype: (w - 1) * (p["M"] // w) * p["K"] * getattr(torch, dtype).itemsize,
    dtypes=("bfloat16", "float16"),
    expert="grouped-m:8",
)
