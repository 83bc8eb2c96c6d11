"""
GEMM + reduce-scatter: ``out_d = (sum_r A_r @ B_r)[rows of d]`` with K sharded over the ranks
=============================================================================================

Why this kernel
---------------
The row-parallel output projection of tensor parallelism (the MLP down projection or the
attention output projection, with sequence parallelism after it): rank r holds A_r [M, K/W]
(its slice of the hidden features) and B_r [K/W, N] (its rows of the weights); the layer's
output is the sum of the W partial products ``sum_r A_r @ B_r`` [M, N], and rank d keeps
only its rows ``d*M/W .. (d+1)*M/W``, [M/W, N]. The usual way is a matmul into a [M, N]
partial and an NCCL reduce-scatter; but every tile of the partial has one owner, so a tile can
go to its owner as soon as it is computed and the owner can sum a tile as soon as all W
partials of it have arrived. Patterns:

- ``bulk_sync``: a persistent GEMM stores each partial tile into its owner's staging buffer,
  slot [r] (``device.store``); a barrier; a reduce kernel on every rank sums its W slots
  (no overlap of the sum, but the stores to peers overlap the GEMM's compute already);
- ``producer_consumer``: the GEMM on ``NUM_SMS - COMM_SMS`` programs also sets a flag per
  (tile, source rank) in the owner's heap after each store (release, system scope); the
  reduce kernel on the "comm" stream (``COMM_SMS`` programs) waits (acquire, bounded) for the
  W flags of each of its tiles and sums it while the GEMM goes on;
- ``epilogue_reduce``: no reduce kernel. The GEMM on every SM deals the rows out to owners in
  whole blocks, this rank's own rows last (all of owner r + 1's row tiles, then r + 2's, ...,
  then r's), hands the other owners' tiles over as producer_consumer does, and sums a tile of
  its own rows in the epilogue of the GEMM that computed its own partial: after the W - 1 flags
  (acquire, bounded), the peers' slots of the local staging are added to the accumulator,
  which still holds the rank's own partial in fp32 (never rounded to the staging's dtype nor
  stored), and the sum goes to the output (TMA where row tiles divide the rows). Every peer
  computes its tiles for this rank in its earlier blocks, so with the catalog's orders (monotone
  in the row inside a column) each wait is for a tile the peer computed earlier in its own
  sequence, long done at W = 2: no cycle of waits, and rarely a wait at all. A hand-over's flag
  is set one tile late, after the next tile's main loop (``_whole_tile``): the release then
  finds the stores to the peer landed instead of stalling on them. An order that puts a rank's
  own rows before the others' makes its waits long, and a wait past its bound is a DEADLOCK
  verdict, not a hang. (The one-process CPU runner, whose ranks run one after another, runs it
  in two launches: every rank's tiles of the other owners, then every rank's own.)
- ``push_copy_engine``: no SM stores to a peer. Persistent GEMMs of the other owners' rows
  (owner r + 1 first) store their partials into a local outbox [W * M/W, N] (TMA), in ``SLICES``
  launches of row tiles; after each, the copy engines (``Tensor.copy_`` into the owner's staging,
  mapped here, on the "comm" stream) take that slice's rows in groups (``CE_GROUPS`` over all
  the rows), each group's flag written by the stream after its copy (``Heap.signal_queued``),
  while the next slice, and last a persistent GEMM of the rank's own rows, run. An own tile
  waits for its group's flags from the W - 1 peers after its main loop and adds their partials
  in its epilogue, as epilogue_reduce does (``SUM_IN_EPILOGUE=0``: waits before its main loop and
  starts its accumulator from them), loading them through a descriptor of the staging where C
  is stored through one (``SUM_TMA``, after a proxy fence: ``device.fence_async_reads``). On two
  H100s (2026-11-26, bench/results/rs_ce_parts_h100x2/) one slice left the own rows waiting for
  the copies at llama70b-o-4k, and the own rows took ~10 % over cuBLAS's share either way; with
  two copy groups the epilogue's sum made the launch ~1 % faster (bench/results/rs_prefetch_h100x2/):
  a tile of the group copied last waits at the end of its main loop instead of before it; the
  descriptor loads another 1-2 us a launch (bench/results/rs_sum_tma_h100x2/). What the own rows
  cost over the other rows is their loop, not their sums: on one H100 under ncu they took what
  the other rows' GEMM takes with its loop not flattened (bench/results/rs_own_rows_ncu_h100/);
  a loop that waits on flags cannot be flattened (3x slower), and a launch per copy group with
  the wait before a flattened loop was slower still (bench/results/rs_sum_tma_h100x2/). With
  ``WS_OWN`` (the default where Gluon runs: Hopper) the own rows are a warp-specialized Gluon
  kernel instead (``gemm_reduce_scatter_own_ws``, kernels/schedule/ws_gemm.py): a load warp runs
  ahead across tiles while the consumers' epilogue waits for the flags and sums, so the wait no
  longer drains the loads; the own rows alone 4 us faster at o-4k, the launch ~2 us
  (bench/results/rs_ws_own_h100x2/). The load warp also loads the first peer's partial of a tile
  into the epilogue's shared memory once it has issued the tile's last loads, while the
  consumers still work through the ring (1.5-2 us a launch at o-4k, 0-1 us at down-4k:
  ``5_prefetch_partial/``; issued earlier in the tile, its wait for the flags stalled the tile's
  own loads where copies came late, SLICES=1: ``6_prefetch_after_last_step_h200x2/``). Its
  copies are (W - 1) / W of the partial, one after another on one stream: at W = 4 on four
  H100s (bench/results/dist_gemm_h100x4/) they outlasted the GEMM at llama70b-o-4k and
  llama8b-down-4k, where bulk_sync was faster (0.287 against 0.366 ms at o-4k); copies to the
  peers on a stream each were no faster.

Row tiles never straddle two owners: each owner's M/W rows make cdiv(M/W, BLOCK_M) row tiles,
the last one masked where BLOCK_M does not divide M/W (only at the small check problem).
Every pattern but push_copy_engine ends with a device barrier: after it no rank stores into a
peer's staging any more and every owner has read its slots, so the next launch may overwrite
them. push_copy_engine instead alternates between two stagings by the epoch's parity: a peer's
copies of launch e + 2 into the staging of launch e come after its own-rows GEMM of launch e + 1
(stream order), which waited for this rank's copies of e + 1, which came after this rank's
own-rows GEMM of e, the last reader of that staging; the flags count epochs, so one set serves
both stagings. (Its outbox is rewritten only after its copies: the launch ends with the main
stream waiting for them.)

The staging buffer [W, M/W, N] is in the input dtype, not fp32: the stores to peers are the
kernel's whole communication, (W-1)/W * M * N elements per rank, and fp32 would double them.
The cost is one rounding of each partial (relative 1.7e-3 RMS in bf16); W independent
partials with that error sum to a relative error of about the same size, the size of the
final rounding of the output (2.4e-3 in all, counted with torch at W = 2 and 8), while the
sum itself is accumulated in fp32 (NCCL's bf16 reduce-scatter rounds after every hop of its
ring instead).

The blocked loop, in pseudo-code::

    # GEMM, rank r
    for tile in range(pid, num_tiles, num_programs):           # persistent
        pid_m, pid_n = swizzle(tile, num_pid_m, num_pid_n)    # the rewrite target
        owner = (pid_m + r + 1) % W                            # rounds of W row tiles: one
        local_m = pid_m // W                                   # per owner, r + 1 first
        staging[owner][r][local_m, pid_n tile] = A_r[owner's rows, :][local_m tile] @ B_r[:, pid_n tile]
        signal(flag[owner][local_m, pid_n, r])                # producer_consumer only
    # reduce, rank d: for each of its tiles, in swizzle order over its [M/W, N] block
    for i in range(W): wait(flag[(d - 1 - i) % W])            # producer_consumer only
    out[tile] = sum over i of staging[(d - 1 - i) % W][tile]  # fp32, this order

The tile order's effect
-----------------------
``swizzle`` orders the tiles of a *rank-relative* grid of W * cdiv(M/W, BLOCK_M) rows, and the
kernel deals its rows out in rounds: rank-relative row p is row tile p // W of owner
(p + r + 1) % W. So

1. at any time the W ranks store to different owners: the j-th row of a round goes from rank r
   to owner r + 1 + j, a permutation, so no owner's NVLink ports take W - 1 writers while the
   others idle (as they would if every rank started at owner 0);
2. every rank computes row tile t of every owner in the same round t, so an owner's tiles of
   round t are complete about when round t ends, and in ``producer_consumer`` its reduce
   programs sum round t while the GEMM computes round t + 1: the sum is pipelined behind the
   GEMM. Whole owners in turn (all of owner r + 1's rows, then r + 2's, ...) would give 1 but
   not 2: a tile is complete only when its owner has computed its own partial, so with blocks
   every tile would complete in the last 1/W of the GEMM and the sum would trail it;
3. each round ends with the rank's own rows: its last stores are local.

The reduce adds the slots in arrival order (source d - 1 first, its own slot last): a fixed
order per rank, so the result is deterministic and the same in bulk_sync and producer_consumer,
bit for bit (epilogue_reduce starts from its own partial unrounded: deterministic too, and
closer to the fp32 sum).

Counted at ``llama70b-down-8k`` on 8 ranks with 128 x 256 tiles: the partial is [8192, 8192],
64 x 32 = 2048 tiles, a round is 8 row tiles (256 tiles). The GEMM is 2 * 8192 * 8192 * 3584 =
481 GFLOP per rank, ~0.6 ms at ~800 TFLOP/s; the reduce reads 8 slots of 1024 x 8192 x 2 B
(128 MiB) and writes 16 MiB: spread over the GEMM that is ~240 GB/s of local HBM traffic,
within reach of COMM_SMS = 16 SMs; after the GEMM it would be a tail of roughly 150-250 us
(estimates, not measured). The producer_consumer GEMM's 116 programs of a wave cover
116 / 32 = 3.6 row tiles, so a rank writes to ~4 owners at a time. Row-major reads 3.6 A row
blocks and 32 B column blocks per K step (36 distinct), ``grouped-m:8`` 8 rows x 14.5 columns
(22.5, one whole round per group at W = 8): the catalog's order saves L2 traffic here.
"""
from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import fence_async_shared, mbarrier, tma

from swizzleperf.kernels.distributed import device
from swizzleperf.kernels.distributed.peer_copy import copy_engine_group, copy_engine_push
from swizzleperf.kernels.distributed.spec import BARRIER, Baseline, DistKernelSpec, Step
from swizzleperf.kernels.distributed.tiles import (GEMM_CHECK_META, GEMM_META, GEMM_TILE_CONFIGS,
                                                   GEMM_TILE_KNOBS, c_block, gemm_constraints,
                                                   gemm_launch, num_sms, operands, tile_pointers,
                                                   tma_supported)
from swizzleperf.kernels.schedule import ws_gemm
from swizzleperf.kernels.schedule.persistent_gemm import (cdiv, column_halves, data_parallel_tiles,
                                                          mainloop, store_tile,
                                                          stream_k_fixup, stream_k_range,
                                                          stream_k_segment)

PATTERNS = ("bulk_sync", "producer_consumer", "epilogue_reduce", "push_copy_engine")


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
def _tile_of(tile, rank, num_pid_m, num_pid_n, tiles_per_rank, WORLD_SIZE: tl.constexpr,
             BLOCKS: tl.constexpr):
    """Tile index ``tile`` through ``swizzle``: ``(owner, local_m, pid_n)``. ``swizzle``'s row p is
    row tile p // W of owner (p + r + 1) % W (rounds, module docstring), or with BLOCKS row tile
    p % tiles_per_rank of owner (p // tiles_per_rank + r + 1) % W (whole owners in turn, this
    rank's own last: epilogue_reduce)."""
    pid_m, pid_n = swizzle(tile, num_pid_m, num_pid_n)
    if BLOCKS:
        owner = (pid_m // tiles_per_rank + rank + 1) % WORLD_SIZE
        local_m = pid_m % tiles_per_rank
    else:
        owner = (pid_m + rank + 1) % WORLD_SIZE         # rounds of W row tiles, one
        local_m = pid_m // WORLD_SIZE                   # per owner, owner r + 1 first
    return owner, local_m, pid_n


@triton.jit
def _gemm_piece(a, b, owner, local_m, pid_n, k_lo, k_hi, rows_per_rank, N, K_local,
                stride_am, stride_ak, stride_bk, stride_bn,
                BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                USE_TMA: tl.constexpr, DOT_IN_FP32: tl.constexpr):
    """K steps ``k_lo .. k_hi`` of the partial tile ``(local_m, pid_n)`` of ``owner``'s rows:
    the fp32 accumulator."""
    return _accumulate(tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32), a, b, owner, local_m, pid_n,
                       k_lo, k_hi, rows_per_rank, N, K_local, stride_am, stride_ak, stride_bk,
                       stride_bn, BLOCK_M, BLOCK_N, BLOCK_K, USE_TMA, DOT_IN_FP32)


@triton.jit
def _accumulate(accumulator, a, b, owner, local_m, pid_n, k_lo, k_hi, rows_per_rank, N, K_local,
                stride_am, stride_ak, stride_bk, stride_bn,
                BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                USE_TMA: tl.constexpr, DOT_IN_FP32: tl.constexpr):
    """``accumulator`` (fp32) plus K steps ``k_lo .. k_hi`` of the partial tile ``(local_m,
    pid_n)`` of ``owner``'s rows."""
    if USE_TMA:  # a: descriptor of A_r [M, K_local]; rows past the owner's are masked at the store
        accumulator = mainloop(a, b, owner * rows_per_rank + local_m * BLOCK_M, pid_n * BLOCK_N,
                               k_lo, k_hi, rows_per_rank, N, K_local, stride_am, stride_ak,
                               stride_bk, stride_bn, accumulator, BLOCK_M, BLOCK_N, BLOCK_K,
                               USE_TMA, DOT_IN_FP32)
    else:        # a: pointer to A_r; rows wrap inside the owner's rows
        accumulator = mainloop(a + owner * rows_per_rank * stride_am, b, local_m * BLOCK_M,
                               pid_n * BLOCK_N, k_lo, k_hi, rows_per_rank, N, K_local, stride_am,
                               stride_ak, stride_bk, stride_bn, accumulator, BLOCK_M, BLOCK_N,
                               BLOCK_K, USE_TMA, DOT_IN_FP32)
    return accumulator


@triton.jit
def _in_phase(owner, rank, PHASE: tl.constexpr):
    """Whether a tile of ``owner`` is computed in launch phase PHASE (1 or 2; module docstring's
    ``epilogue_reduce``): the other owners' tiles in phase 1, the rank's own in phase 2."""
    return (owner == rank) == (PHASE == 2)


@triton.jit
def _hand_over(accumulator, staging_ptr, flags, heap_bases, rank, epoch, owner, local_m, pid_n,
               num_pid_n, rows_per_rank, N, stride_sw, stride_sm, stride_sn,
               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, WORLD_SIZE: tl.constexpr,
               SIGNAL: tl.constexpr):
    """Store the partial tile into slot [r] of the owner's staging (in the input dtype); with
    SIGNAL, then ``flags[local tile, r] = epoch`` in the owner's heap (release after a CTA
    barrier: all threads' stores before it are visible)."""
    slot = staging_ptr + rank * stride_sw                    # this rank's slot, in every heap
    s_ptrs, mask = tile_pointers(slot, local_m, pid_n, rows_per_rank, N, stride_sm, stride_sn,
                                 BLOCK_M, BLOCK_N)
    device.store(s_ptrs, accumulator.to(staging_ptr.dtype.element_ty), rank, owner, heap_bases,
                 mask=mask)
    if SIGNAL:
        device.signal(flags + (local_m * num_pid_n + pid_n) * WORLD_SIZE + rank, epoch, rank,
                      owner, heap_bases)


@triton.jit
def _arrival_source(rank, i, WORLD_SIZE: tl.constexpr):
    """The rank whose slot of the staging is summed i-th: r - 1, r - 2, ..., the rank itself
    last (a fixed order per rank: the sums are deterministic)."""
    return (rank + 2 * WORLD_SIZE - 1 - i) % WORLD_SIZE


@triton.jit
def _wait_sources(flags, flag, errors, flag_kind, rank, epoch, max_spins, WORLD_SIZE: tl.constexpr,
                  SLOTS: tl.constexpr):
    """Wait (acquire, bounded) for the flags ``flags[flag + source]`` of the first SLOTS sources
    in arrival order: r - 1, r - 2, ..., the rank itself last."""
    for i in tl.static_range(SLOTS):
        source = _arrival_source(rank, i, WORLD_SIZE)
        device.wait(flags + flag + source, epoch, errors, flag_kind, flag + source, source,
                    max_spins)


@triton.jit
def _add_slots(accumulator, s_ptrs, mask, flags, flag, errors, flag_kind, rank, epoch, max_spins,
               stride_sw, WORLD_SIZE: tl.constexpr, SLOTS: tl.constexpr, WAIT: tl.constexpr):
    """``accumulator`` (fp32) plus the first SLOTS slots of one tile of the local staging
    (``s_ptrs``, ``mask``: the tile in slot 0), in arrival order: source r - 1, r - 2, ..., the
    rank's own last (a fixed order per rank, so the sums are deterministic). With WAIT, after the
    sources' flags ``flags[flag + source]`` (the tile's W flags from index ``flag``; acquire, bounded), every flag first, so that the loads
    are then in flight together."""
    if WAIT:
        _wait_sources(flags, flag, errors, flag_kind, rank, epoch, max_spins, WORLD_SIZE, SLOTS)
    for i in tl.static_range(SLOTS):
        source = _arrival_source(rank, i, WORLD_SIZE)
        partial = tl.load(s_ptrs + source * stride_sw, mask=mask, other=0.0)
        accumulator += partial.to(tl.float32)
    return accumulator


@triton.jit
def _finish(accumulator, staging_ptr, out, flags, errors, flag_kind, heap_bases, rank, epoch,
            max_spins, owner, local_m, pid_n, num_pid_n, rows_per_rank, N, stride_sw, stride_sm,
            stride_sn, stride_om, stride_on,
            BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, WORLD_SIZE: tl.constexpr,
            SIGNAL: tl.constexpr, EPILOGUE_REDUCE: tl.constexpr, STORE_TMA: tl.constexpr,
            SUBTILE: tl.constexpr):
    """A finished partial tile: handed over to its owner (``_hand_over``), or, with
    EPILOGUE_REDUCE and a tile of this rank's own rows, summed here: after the flags of the
    W - 1 peers' partials of the tile (acquire), their slots of the local staging are added to
    the accumulator (this rank's own partial, still fp32; slots r - 1, r - 2, ...) and the sum
    goes to ``out`` [rows_per_rank, N] (descriptor with STORE_TMA, else pointer)."""
    if EPILOGUE_REDUCE:
        if owner == rank:
            flag = (local_m * num_pid_n + pid_n) * WORLD_SIZE
            s_ptrs, mask = tile_pointers(staging_ptr, local_m, pid_n, rows_per_rank, N, stride_sm,
                                         stride_sn, BLOCK_M, BLOCK_N)
            accumulator = _add_slots(accumulator, s_ptrs, mask, flags, flag, errors, flag_kind, rank,
                                     epoch, max_spins, stride_sw, WORLD_SIZE, WORLD_SIZE - 1, True)
            store_tile(out, accumulator, local_m * BLOCK_M, pid_n * BLOCK_N, rows_per_rank, N,
                       stride_om, stride_on, BLOCK_M, BLOCK_N, STORE_TMA, SUBTILE)
        else:   # SIGNAL off: the data-parallel loop sets the flag one tile late (_whole_tile)
            _hand_over(accumulator, staging_ptr, flags, heap_bases, rank, epoch, owner, local_m,
                       pid_n, num_pid_n, rows_per_rank, N, stride_sw, stride_sm, stride_sn,
                       BLOCK_M, BLOCK_N, WORLD_SIZE, SIGNAL)
    else:
        _hand_over(accumulator, staging_ptr, flags, heap_bases, rank, epoch, owner, local_m,
                   pid_n, num_pid_n, rows_per_rank, N, stride_sw, stride_sm, stride_sn,
                   BLOCK_M, BLOCK_N, WORLD_SIZE, SIGNAL)


@triton.jit(do_not_specialize=["epoch"])
def gemm_reduce_scatter_gemm(a, b, staging_ptr, out, flags, errors, flag_kind, heap_bases,
                             workspace, sk_flags, rank, epoch, max_spins, rows_per_rank, N,
                             K_local, stride_am, stride_ak, stride_bk, stride_bn, stride_sw,
                             stride_sm, stride_sn, stride_om, stride_on,
                             BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                             BLOCK_K: tl.constexpr, WORLD_SIZE: tl.constexpr,
                             SIGNAL: tl.constexpr, SK_SIGNAL: tl.constexpr,
                             EPILOGUE_REDUCE: tl.constexpr, PHASE: tl.constexpr,
                             STREAM_K: tl.constexpr, USE_TMA: tl.constexpr,
                             STORE_TMA: tl.constexpr, SUBTILE: tl.constexpr,
                             WARP_SPECIALIZE: tl.constexpr, FLATTEN: tl.constexpr,
                             DOT_IN_FP32: tl.constexpr):
    """Persistent GEMM of the partial ``A_r [M, K_local] @ B_r [K_local, N]``
    (kernels/schedule/persistent_gemm.py: tile indices ``pid, pid + P, ...`` whole up to the last
    ``STREAM_K`` waves, then this program's share of those waves' K steps): each finished tile goes to
    slot [r] of its owner's staging [W, rows_per_rank, N]; with SIGNAL, then
    ``flags[local tile, r] = epoch`` in the owner's heap (SK_SIGNAL: the stream-K tiles'). With
    EPILOGUE_REDUCE the rows go to owners in whole blocks, this rank's own last (``_tile_of``),
    the hand-overs' flags are set one tile late in the data-parallel loop (``_whole_tile``) and
    at once for stream-K tiles (SK_SIGNAL), and the tiles of this rank's own rows are summed in
    the epilogue and written to ``out`` [rows_per_rank, N] (``_finish``); PHASE 0 computes every
    tile, PHASE 1 only the other owners' and PHASE 2 only this rank's (the one-process runner's
    two steps).

    Row tiles never straddle two owners: each owner's rows_per_rank rows make
    cdiv(rows_per_rank, BLOCK_M) row tiles, the last one masked where BLOCK_M does not divide.
    ``a``, ``b``: descriptors of A_r and B_r with USE_TMA, else pointers; ``out``: descriptor
    with STORE_TMA, else pointer.
    """
    pid = tl.program_id(0)
    num_programs = tl.num_programs(0)
    tiles_per_rank = tl.cdiv(rows_per_rank, BLOCK_M)
    num_pid_m = WORLD_SIZE * tiles_per_rank
    num_pid_n = tl.cdiv(N, BLOCK_N)
    k_iters = tl.cdiv(K_local, BLOCK_K)
    num_dp_tiles = data_parallel_tiles(num_pid_m * num_pid_n, num_programs, STREAM_K)
    pending = tl.full((), -1, tl.int32)      # epilogue_reduce: the flag one tile late (_whole_tile)
    pending_owner = tl.full((), 0, tl.int32)
    for tile in tl.range(pid, num_dp_tiles, num_programs, flatten=FLATTEN,
                         warp_specialize=WARP_SPECIALIZE):
        owner, local_m, pid_n = _tile_of(tile, rank, num_pid_m, num_pid_n, tiles_per_rank,
                                         WORLD_SIZE, EPILOGUE_REDUCE)
        if PHASE == 0:   # compiled: the loop body as it was, no branch around it
            pending, pending_owner = _whole_tile(
                a, b, staging_ptr, out, flags, errors, flag_kind, heap_bases, rank, epoch, max_spins,
                owner, local_m, pid_n, num_pid_n, k_iters, rows_per_rank, N, K_local, stride_am,
                stride_ak, stride_bk, stride_bn, stride_sw, stride_sm, stride_sn, stride_om,
                stride_on, pending, pending_owner, BLOCK_M, BLOCK_N, BLOCK_K, WORLD_SIZE, SIGNAL,
                EPILOGUE_REDUCE, USE_TMA, STORE_TMA, SUBTILE, DOT_IN_FP32)
        else:
            if _in_phase(owner, rank, PHASE):
                pending, pending_owner = _whole_tile(
                    a, b, staging_ptr, out, flags, errors, flag_kind, heap_bases, rank, epoch,
                    max_spins, owner, local_m, pid_n, num_pid_n, k_iters, rows_per_rank, N, K_local,
                    stride_am, stride_ak, stride_bk, stride_bn, stride_sw, stride_sm, stride_sn,
                    stride_om, stride_on, pending, pending_owner, BLOCK_M, BLOCK_N, BLOCK_K,
                    WORLD_SIZE, SIGNAL, EPILOGUE_REDUCE, USE_TMA, STORE_TMA, SUBTILE, DOT_IN_FP32)
    if EPILOGUE_REDUCE:   # the last hand-over's flag
        if pending >= 0:
            device.signal(flags + pending, epoch, rank, pending_owner, heap_bases)
    if STREAM_K > 0:
        units = (num_pid_m * num_pid_n - num_dp_tiles) * k_iters
        first, stop = stream_k_range(pid, num_programs, units)
        while stop > first:  # this program's pieces, last first
            sk_tile, start, k_lo, k_hi = stream_k_segment(stop, first, k_iters)
            owner, local_m, pid_n = _tile_of(num_dp_tiles + sk_tile, rank, num_pid_m, num_pid_n,
                                             tiles_per_rank, WORLD_SIZE, EPILOGUE_REDUCE)
            if PHASE == 0:
                _stream_k_piece(a, b, staging_ptr, out, flags, errors, flag_kind, heap_bases, rank,
                                epoch, max_spins, workspace, sk_flags, pid, num_programs, units,
                                sk_tile, start, k_lo, k_hi, owner, local_m, pid_n, num_pid_n,
                                k_iters, rows_per_rank, N, K_local, stride_am, stride_ak, stride_bk,
                                stride_bn, stride_sw, stride_sm, stride_sn, stride_om, stride_on,
                                BLOCK_M, BLOCK_N, BLOCK_K, WORLD_SIZE, SK_SIGNAL, EPILOGUE_REDUCE,
                                USE_TMA, STORE_TMA, SUBTILE, DOT_IN_FP32)
            else:   # all of a tile's pieces or none, so that its hand-overs still pair up
                if _in_phase(owner, rank, PHASE):
                    _stream_k_piece(a, b, staging_ptr, out, flags, errors, flag_kind, heap_bases,
                                    rank, epoch, max_spins, workspace, sk_flags, pid, num_programs,
                                    units, sk_tile, start, k_lo, k_hi, owner, local_m, pid_n,
                                    num_pid_n, k_iters, rows_per_rank, N, K_local, stride_am,
                                    stride_ak, stride_bk, stride_bn, stride_sw, stride_sm,
                                    stride_sn, stride_om, stride_on, BLOCK_M, BLOCK_N, BLOCK_K,
                                    WORLD_SIZE, SK_SIGNAL, EPILOGUE_REDUCE, USE_TMA, STORE_TMA,
                                    SUBTILE, DOT_IN_FP32)
            stop = start


@triton.jit
def _stream_k_piece(a, b, staging_ptr, out, flags, errors, flag_kind, heap_bases, rank, epoch,
                    max_spins, workspace, sk_flags, pid, num_programs, units, sk_tile, start,
                    k_lo, k_hi, owner, local_m, pid_n, num_pid_n, k_iters, rows_per_rank, N,
                    K_local, stride_am, stride_ak, stride_bk, stride_bn, stride_sw, stride_sm,
                    stride_sn, stride_om, stride_on, BLOCK_M: tl.constexpr,
                    BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, WORLD_SIZE: tl.constexpr,
                    SIGNAL: tl.constexpr, EPILOGUE_REDUCE: tl.constexpr, USE_TMA: tl.constexpr,
                    STORE_TMA: tl.constexpr, SUBTILE: tl.constexpr, DOT_IN_FP32: tl.constexpr):
    """K steps ``k_lo .. k_hi`` of a stream-K tile, joined with the tile's other pieces
    (``stream_k_fixup``); the piece with the last K step finishes the tile (``_finish``)."""
    accumulator = _gemm_piece(a, b, owner, local_m, pid_n, k_lo, k_hi, rows_per_rank, N, K_local,
                              stride_am, stride_ak, stride_bk, stride_bn, BLOCK_M, BLOCK_N, BLOCK_K,
                              USE_TMA, DOT_IN_FP32)
    accumulator = stream_k_fixup(accumulator, workspace, sk_flags, pid, num_programs, units,
                                 sk_tile, start, k_hi, k_iters, BLOCK_M, BLOCK_N)
    if k_hi == k_iters:
        _finish(accumulator, staging_ptr, out, flags, errors, flag_kind, heap_bases, rank, epoch,
                max_spins, owner, local_m, pid_n, num_pid_n, rows_per_rank, N, stride_sw,
                stride_sm, stride_sn, stride_om, stride_on, BLOCK_M, BLOCK_N, WORLD_SIZE, SIGNAL,
                EPILOGUE_REDUCE, STORE_TMA, SUBTILE)


@triton.jit
def _whole_tile(a, b, staging_ptr, out, flags, errors, flag_kind, heap_bases, rank, epoch,
                max_spins, owner, local_m, pid_n, num_pid_n, k_iters, rows_per_rank, N, K_local,
                stride_am, stride_ak, stride_bk, stride_bn, stride_sw, stride_sm, stride_sn,
                stride_om, stride_on, pending, pending_owner, BLOCK_M: tl.constexpr,
                BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, WORLD_SIZE: tl.constexpr,
                SIGNAL: tl.constexpr, EPILOGUE_REDUCE: tl.constexpr, USE_TMA: tl.constexpr,
                STORE_TMA: tl.constexpr, SUBTILE: tl.constexpr, DOT_IN_FP32: tl.constexpr):
    """One data-parallel tile: every K step, then ``_finish``; returns ``(pending,
    pending_owner)``. With EPILOGUE_REDUCE a hand-over's flag is set one tile late: ``pending``
    (the flag's index, -1 for none) is signalled after the next tile's K steps, before its
    epilogue, when the earlier tile's stores to the peer have had a whole main loop to land, so
    the release does not stall on them (a release orders every store before it). Two H200s,
    2026-11-26, llama70b-o-4k: 0.485 ms with each flag set at once (bulk_sync 0.433 in the same
    bench), 0.475 one tile late (bulk_sync 0.442 in the same bench;
    bench/results/dist_gemm_h200x2_epilogue_reduce.md): a little, not the gap to bulk_sync."""
    accumulator = _gemm_piece(a, b, owner, local_m, pid_n, 0, k_iters, rows_per_rank, N, K_local,
                              stride_am, stride_ak, stride_bk, stride_bn, BLOCK_M, BLOCK_N, BLOCK_K,
                              USE_TMA, DOT_IN_FP32)
    if EPILOGUE_REDUCE:
        if pending >= 0:
            device.signal(flags + pending, epoch, rank, pending_owner, heap_bases)
        pending = tl.where(owner == rank, -1, (local_m * num_pid_n + pid_n) * WORLD_SIZE + rank)
        pending_owner = owner
    _finish(accumulator, staging_ptr, out, flags, errors, flag_kind, heap_bases, rank, epoch,
            max_spins, owner, local_m, pid_n, num_pid_n, rows_per_rank, N, stride_sw, stride_sm,
            stride_sn, stride_om, stride_on, BLOCK_M, BLOCK_N, WORLD_SIZE, SIGNAL,
            EPILOGUE_REDUCE, STORE_TMA, SUBTILE)
    return pending, pending_owner


@triton.jit
def _phase_tile(tile, rank, grid_m, num_pid_n, row_lo, slice_rows, WORLD_SIZE: tl.constexpr,
                OWN: tl.constexpr):
    """Tile index ``tile`` of a push_copy_engine launch through ``swizzle``: ``(owner, local_m,
    pid_n)``. OWN=0: the grid of a slice of the other owners' rows [(W - 1) * slice_rows,
    num_pid_n], its row p row tile row_lo + p % slice_rows of owner (p // slice_rows + r + 1) % W
    (owner r + 1 first); OWN=1: the grid of this rank's rows [tiles_per_rank, num_pid_n]."""
    pid_m, pid_n = swizzle(tile, grid_m, num_pid_n)
    if OWN:
        owner = rank
        local_m = pid_m
    else:
        owner = (pid_m // slice_rows + rank + 1) % WORLD_SIZE
        local_m = row_lo + pid_m % slice_rows
    return owner, local_m, pid_n


@triton.jit
def _acquire_group(flags, errors, flag_kind, rank, epoch, max_spins, flag_group, acquired, local_m,
                   WORLD_SIZE: tl.constexpr, ASYNC_READS: tl.constexpr = False):
    """``(the first flag index of own row tile local_m's group of flag_group row tiles,
    acquired)``: the W - 1 peers' flags of that group waited for (acquire, bounded) unless
    ``acquired``, the group this program acquired last (-1 for none), is that group already
    (the peers' copies of a whole group land before its flags, so one acquire serves every tile
    of the group). ASYNC_READS: the partials are then read through a descriptor
    (``device.fence_async_reads`` after the wait)."""
    flag = (local_m - local_m % flag_group) * WORLD_SIZE
    if flag != acquired:
        _wait_sources(flags, flag, errors, flag_kind, rank, epoch, max_spins, WORLD_SIZE,
                      WORLD_SIZE - 1)
        if ASYNC_READS:
            device.fence_async_reads()
        acquired = flag
    return flag, acquired


@triton.jit
def _store_sum_tma(c, slots, accumulator, flags, errors, flag_kind, rank, epoch, max_spins,
                   flag_group, acquired, local_m, pid_n, rows_per_rank,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, WORLD_SIZE: tl.constexpr,
                   SUBTILE: tl.constexpr):
    """Own tile ``(local_m, pid_n)``: ``accumulator`` plus the W - 1 peers' partials, loaded
    through ``slots`` (the descriptor of the local staging seen as [W * rows_per_rank, N], block
    that of ``c``) after the group's flags (``_acquire_group``), stored through ``c`` (out's
    descriptor); with SUBTILE in two halves, each summed and stored (the same sums as ``_slots``,
    in the same order: bit for bit). Row tiles divide the rows (the caller's condition for
    STORE_TMA). Returns ``acquired``."""
    _, acquired = _acquire_group(flags, errors, flag_kind, rank, epoch, max_spins, flag_group,
                                 acquired, local_m, WORLD_SIZE, True)
    row = local_m * BLOCK_M
    col = pid_n * BLOCK_N
    if SUBTILE:
        left, right = column_halves(accumulator, BLOCK_M, BLOCK_N)
        for i in tl.static_range(WORLD_SIZE - 1):
            source = _arrival_source(rank, i, WORLD_SIZE)
            left += slots.load([source * rows_per_rank + row, col]).to(tl.float32)
            right += slots.load([source * rows_per_rank + row, col + BLOCK_N // 2]).to(tl.float32)
        c.store([row, col], left.to(c.dtype))
        c.store([row, col + BLOCK_N // 2], right.to(c.dtype))
    else:
        for i in tl.static_range(WORLD_SIZE - 1):
            source = _arrival_source(rank, i, WORLD_SIZE)
            accumulator += slots.load([source * rows_per_rank + row, col]).to(tl.float32)
        c.store([row, col], accumulator.to(c.dtype))
    return acquired


@triton.jit
def _slots(accumulator, staging_ptr, flags, errors, flag_kind, rank, epoch, max_spins, flag_group,
           acquired, local_m, pid_n, rows_per_rank, N, stride_sw, stride_sm, stride_sn,
           BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, WORLD_SIZE: tl.constexpr):
    """``(accumulator plus the W - 1 peers' partials of own tile (local_m, pid_n), acquired)``:
    the partials from the local staging (slots r - 1, r - 2, ...), after the peers' flags of the
    tile's group of ``flag_group`` row tiles (acquire, bounded) unless this program acquired
    them already: ``acquired`` is the first flag index of the group it acquired last, -1 for
    none (the peers' copies of a whole group land before its flags, so one acquire serves
    every tile of the group)."""
    flag, acquired = _acquire_group(flags, errors, flag_kind, rank, epoch, max_spins,
                                    flag_group, acquired, local_m, WORLD_SIZE)
    s_ptrs, mask = tile_pointers(staging_ptr, local_m, pid_n, rows_per_rank, N, stride_sm,
                                 stride_sn, BLOCK_M, BLOCK_N)
    accumulator = _add_slots(accumulator, s_ptrs, mask, flags, flag, errors, flag_kind, rank,
                             epoch, max_spins, stride_sw, WORLD_SIZE, WORLD_SIZE - 1, False)
    return accumulator, acquired


@triton.jit
def _phase_piece(a, b, staging_ptr, flags, errors, flag_kind, rank, epoch, max_spins, flag_group,
                 acquired, owner, local_m, pid_n, k_lo, k_hi, rows_per_rank, N, K_local, stride_am,
                 stride_ak, stride_bk, stride_bn, stride_sw, stride_sm, stride_sn,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                 WORLD_SIZE: tl.constexpr, OWN: tl.constexpr, SUM_IN_EPILOGUE: tl.constexpr,
                 USE_TMA: tl.constexpr, DOT_IN_FP32: tl.constexpr):
    """K steps ``k_lo .. k_hi`` of a push_copy_engine tile: ``(the fp32 accumulator,
    acquired)`` (``_slots``). Of an own tile without SUM_IN_EPILOGUE, the piece with K step 0
    starts from the peers' partials instead of zeros: their loads go out before the main
    loop's, not after it."""
    accumulator = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    if OWN and not SUM_IN_EPILOGUE:
        if k_lo == 0:
            accumulator, acquired = _slots(accumulator, staging_ptr, flags, errors, flag_kind,
                                           rank, epoch, max_spins, flag_group, acquired, local_m,
                                           pid_n, rows_per_rank, N, stride_sw, stride_sm,
                                           stride_sn, BLOCK_M, BLOCK_N, WORLD_SIZE)
    accumulator = _accumulate(accumulator, a, b, owner, local_m, pid_n, k_lo, k_hi, rows_per_rank,
                              N, K_local, stride_am, stride_ak, stride_bk, stride_bn, BLOCK_M,
                              BLOCK_N, BLOCK_K, USE_TMA, DOT_IN_FP32)
    return accumulator, acquired


@triton.jit
def _phase_finish(accumulator, c, staging_ptr, flags, errors, flag_kind, rank, epoch, max_spins,
                  flag_group, acquired, owner, local_m, pid_n, rows_per_rank, N, stride_sw, stride_sm,
                  stride_sn, stride_cm, stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  WORLD_SIZE: tl.constexpr, OWN: tl.constexpr, SUM_IN_EPILOGUE: tl.constexpr,
                  STORE_TMA: tl.constexpr, SUBTILE: tl.constexpr, SUM_TMA: tl.constexpr):
    """A finished tile of a push_copy_engine launch. OWN=0: the partial goes to this rank's
    outbox ``c`` [W * rows_per_rank, N] at the owner's rows (local; the copy engines take it to
    the owner). OWN=1: the sum goes to ``c`` = out [rows_per_rank, N], with SUM_IN_EPILOGUE
    after adding the peers' slots here (``_slots``; with SUM_TMA ``staging_ptr`` is the
    staging's descriptor and the slots come through it, ``_store_sum_tma``). Returns
    ``acquired`` (``_slots``)."""
    if OWN and SUM_TMA:
        acquired = _store_sum_tma(c, staging_ptr, accumulator, flags, errors, flag_kind, rank,
                                  epoch, max_spins, flag_group, acquired, local_m, pid_n,
                                  rows_per_rank, BLOCK_M, BLOCK_N, WORLD_SIZE, SUBTILE)
    elif OWN:
        if SUM_IN_EPILOGUE:
            accumulator, acquired = _slots(accumulator, staging_ptr, flags, errors, flag_kind,
                                           rank, epoch, max_spins, flag_group, acquired, local_m,
                                           pid_n, rows_per_rank, N, stride_sw, stride_sm,
                                           stride_sn, BLOCK_M, BLOCK_N, WORLD_SIZE)
        store_tile(c, accumulator, local_m * BLOCK_M, pid_n * BLOCK_N, rows_per_rank, N,
                   stride_cm, stride_cn, BLOCK_M, BLOCK_N, STORE_TMA, SUBTILE)
    elif STORE_TMA:   # row tiles divide the rows: a tile never crosses into the next owner's
        store_tile(c, accumulator, owner * rows_per_rank + local_m * BLOCK_M, pid_n * BLOCK_N,
                   rows_per_rank, N, stride_cm, stride_cn, BLOCK_M, BLOCK_N, True, SUBTILE)
    else:
        store_tile(c + owner * rows_per_rank * stride_cm, accumulator, local_m * BLOCK_M,
                   pid_n * BLOCK_N, rows_per_rank, N, stride_cm, stride_cn, BLOCK_M, BLOCK_N,
                   False)
    return acquired


@triton.jit(do_not_specialize=["epoch"])
def gemm_reduce_scatter_phase(a, b, c, staging_ptr, flags, errors, flag_kind, workspace,
                              sk_flags, rank, epoch, max_spins, flag_group, row_lo, slice_rows,
                              rows_per_rank, N, K_local, stride_am, stride_ak, stride_bk,
                              stride_bn, stride_sw, stride_sm, stride_sn, stride_cm, stride_cn,
                              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                              BLOCK_K: tl.constexpr, WORLD_SIZE: tl.constexpr,
                              OWN: tl.constexpr, SUM_IN_EPILOGUE: tl.constexpr,
                              STREAM_K: tl.constexpr, USE_TMA: tl.constexpr,
                              STORE_TMA: tl.constexpr, SUBTILE: tl.constexpr,
                              WARP_SPECIALIZE: tl.constexpr, FLATTEN: tl.constexpr,
                              DOT_IN_FP32: tl.constexpr, SUM_TMA: tl.constexpr = False):
    """One of push_copy_engine's persistent GEMMs of the partial ``A_r @ B_r``
    (kernels/schedule/persistent_gemm.py's schedule): OWN=0 row tiles ``row_lo .. row_lo +
    slice_rows`` of the other owners' rows, into this rank's outbox ``c`` [W * rows_per_rank, N];
    OWN=1 this rank's own rows, each tile summed with the peers' partials (first, or in the
    epilogue with SUM_IN_EPILOGUE: ``_phase_piece``, ``_phase_finish``) and written to ``c`` =
    out [rows_per_rank, N]. ``a``, ``b``, ``c``: descriptors with USE_TMA / STORE_TMA, else
    pointers; ``staging_ptr`` the local staging [W, rows_per_rank, N] (OWN=1 reads it), or with
    SUM_TMA (OWN=1, SUM_IN_EPILOGUE, STORE_TMA) its descriptor as [W * rows_per_rank, N] with
    C's block."""
    pid = tl.program_id(0)
    num_programs = tl.num_programs(0)
    tiles_per_rank = tl.cdiv(rows_per_rank, BLOCK_M)
    if OWN:
        grid_m = tiles_per_rank
    else:
        grid_m = (WORLD_SIZE - 1) * slice_rows
    num_pid_n = tl.cdiv(N, BLOCK_N)
    k_iters = tl.cdiv(K_local, BLOCK_K)
    num_dp_tiles = data_parallel_tiles(grid_m * num_pid_n, num_programs, STREAM_K)
    acquired = tl.full((), -1, tl.int32)
    for tile in tl.range(pid, num_dp_tiles, num_programs, flatten=FLATTEN,
                         warp_specialize=WARP_SPECIALIZE):
        owner, local_m, pid_n = _phase_tile(tile, rank, grid_m, num_pid_n, row_lo, slice_rows,
                                            WORLD_SIZE, OWN)
        accumulator, acquired = _phase_piece(a, b, staging_ptr, flags, errors, flag_kind, rank,
                                             epoch, max_spins, flag_group, acquired, owner,
                                             local_m, pid_n, 0, k_iters, rows_per_rank, N,
                                             K_local, stride_am, stride_ak, stride_bk, stride_bn,
                                             stride_sw, stride_sm, stride_sn, BLOCK_M, BLOCK_N,
                                             BLOCK_K, WORLD_SIZE, OWN, SUM_IN_EPILOGUE, USE_TMA,
                                             DOT_IN_FP32)
        acquired = _phase_finish(accumulator, c, staging_ptr, flags, errors, flag_kind, rank,
                                 epoch, max_spins, flag_group, acquired, owner, local_m, pid_n,
                                 rows_per_rank, N, stride_sw, stride_sm, stride_sn, stride_cm,
                                 stride_cn, BLOCK_M, BLOCK_N, WORLD_SIZE, OWN, SUM_IN_EPILOGUE,
                                 STORE_TMA, SUBTILE, SUM_TMA)
    if STREAM_K > 0:
        units = (grid_m * num_pid_n - num_dp_tiles) * k_iters
        first, stop = stream_k_range(pid, num_programs, units)
        while stop > first:  # this program's pieces, last first
            sk_tile, start, k_lo, k_hi = stream_k_segment(stop, first, k_iters)
            owner, local_m, pid_n = _phase_tile(num_dp_tiles + sk_tile, rank, grid_m, num_pid_n,
                                                row_lo, slice_rows, WORLD_SIZE, OWN)
            accumulator, acquired = _phase_piece(
                a, b, staging_ptr, flags, errors, flag_kind, rank, epoch, max_spins, flag_group,
                acquired, owner, local_m, pid_n, k_lo, k_hi, rows_per_rank, N, K_local, stride_am,
                stride_ak, stride_bk, stride_bn, stride_sw, stride_sm, stride_sn, BLOCK_M, BLOCK_N,
                BLOCK_K, WORLD_SIZE, OWN, SUM_IN_EPILOGUE, USE_TMA, DOT_IN_FP32)
            accumulator = stream_k_fixup(accumulator, workspace, sk_flags, pid, num_programs,
                                         units, sk_tile, start, k_hi, k_iters, BLOCK_M, BLOCK_N)
            if k_hi == k_iters:
                acquired = _phase_finish(accumulator, c, staging_ptr, flags, errors, flag_kind,
                                         rank, epoch, max_spins, flag_group, acquired, owner,
                                         local_m, pid_n, rows_per_rank, N, stride_sw, stride_sm,
                                         stride_sn, stride_cm, stride_cn, BLOCK_M, BLOCK_N,
                                         WORLD_SIZE, OWN, SUM_IN_EPILOGUE, STORE_TMA, SUBTILE,
                                         SUM_TMA)
            stop = start


@triton.jit(do_not_specialize=["epoch"])
def gemm_reduce_scatter_reduce(staging_ptr, out_ptr, flags, errors, flag_kind, rank, epoch,
                               max_spins, rows_per_rank, N, stride_sw, stride_sm, stride_sn,
                               stride_om, stride_on,
                               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                               WORLD_SIZE: tl.constexpr, WAIT: tl.constexpr):
    """Persistent sum of the W slots of the local staging [W, rows_per_rank, N] into out
    [rows_per_rank, N], fp32 accumulation, slots in arrival order (r - 1, r - 2, ..., r); with
    WAIT, each tile after its W flags (tile, source)."""
    num_pid_m = tl.cdiv(rows_per_rank, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    for tile in range(tl.program_id(0), num_pid_m * num_pid_n, tl.num_programs(0)):
        pid_m, pid_n = swizzle(tile, num_pid_m, num_pid_n)
        flag = (pid_m * num_pid_n + pid_n) * WORLD_SIZE
        s_ptrs, mask = tile_pointers(staging_ptr, pid_m, pid_n, rows_per_rank, N, stride_sm,
                                     stride_sn, BLOCK_M, BLOCK_N)
        accumulator = _add_slots(tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32), s_ptrs, mask,
                                 flags, flag, errors, flag_kind, rank, epoch, max_spins, stride_sw,
                                 WORLD_SIZE, WORLD_SIZE, WAIT)
        o_ptrs, o_mask = tile_pointers(out_ptr, pid_m, pid_n, rows_per_rank, N, stride_om,
                                       stride_on, BLOCK_M, BLOCK_N)
        tl.store(o_ptrs, accumulator.to(out_ptr.dtype.element_ty), mask=o_mask)


@triton.jit
def _own_order(tile, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
    """The own rows' tile order for the warp-specialized kernel: ``swizzle`` (GROUP_M unused)."""
    return swizzle(tile, num_pid_m, num_pid_n)


@gluon.jit
def _prefetch_partial(row, col, count, args):
    """The load warp's half of an own tile's sum (``ws_gemm.load_partition``'s ``PREFETCH``,
    after the tile's last loads): once the consumers have released ``c_smem`` (``c_free``'s phase
    ``count``: the previous tile's store has read it, ``_release_c``) and the first peer in arrival
    order (r - 1) has flagged the tile's copy group (acquire, bounded, then the proxy fence), its
    partial of the tile comes through TMA into ``c_smem``, its bytes counted by ``part_ready``. So
    the first partial's read overlaps the end of the main loop (the ring's stages) instead of
    following it. ``args``: ``(slots, c_smem, c_free, part_ready, flags, errors,
    flag_kind, epoch, max_spins, flag_group, rows_per_rank, first_source, world_size)``."""
    slots, c_smem, c_free, part_ready, flags, errors, flag_kind, epoch, max_spins, flag_group, \
        rows_per_rank, first_source, world_size = args
    BLOCK_M: gl.constexpr = slots.block_type.shape[0]
    local_m = row // BLOCK_M
    flag = (local_m - local_m % flag_group) * world_size + first_source
    mbarrier.wait(c_free, count & 1)
    device.wait(flags + flag, epoch, errors, flag_kind, flag, first_source, max_spins)
    device.fence_async_reads()
    mbarrier.expect(part_ready, slots.block_type.nbytes)
    ws_gemm.tma_load(slots, [first_source * rows_per_rank + row, col], part_ready, c_smem)


@gluon.jit
def _release_c(args):
    """The consumers' release of ``c_smem`` early in a tile's main loop (``ws_gemm.mma_partition``'s
    ``STARTED``): the previous tile's TMA store has read it (``store_wait``), every consumer thread
    has passed that, then one arrival on ``c_free`` lets ``_prefetch_partial`` load into it."""
    c_free = args[3]   # _sum_partials's epilogue_args: (c_desc, slots, part_bar, c_free, ...)
    tma.store_wait(0)
    ws_gemm.thread_barrier()
    mbarrier.arrive(c_free)


@gluon.jit
def _sum_partials(acc, row, col, c_smem, state, args, WORLD_SIZE: gl.constexpr):
    """ws_gemm's epilogue for an own tile at ``(row, col)`` of out: the first peer's partial
    (r - 1's), loaded into ``c_smem`` at the end of the main loop (``_prefetch_partial``), is
    added once ``part_ready`` has its bytes; with W > 2 the other W - 2 peers' partials then come in
    through ``slots`` (the staging as [W * rows_per_rank, N], C's block) one at a time into
    ``c_smem``, after the group's flags (``_acquire_group``, then the proxy fence), and are added
    in arrival order (the sums of ``_store_sum_tma``, in the same order); the sum goes out
    through ``c_desc`` from ``c_smem``. ``state``: ``(acquired, partial loads so far,
    tiles so far)`` (the phases of the mbarriers ``part_bar`` and ``part_ready``)."""
    c_desc, slots, part_bar, c_free, part_ready, flags, errors, flag_kind, rank, epoch, \
        max_spins, flag_group, rows_per_rank = args
    acquired, loads, count = state
    BLOCK_M: gl.constexpr = acc.shape[0]
    mbarrier.wait(part_ready, count & 1)
    acc = acc + c_smem.load(acc.type.layout).to(gl.float32)
    ws_gemm.thread_barrier()   # every thread has read c_smem before it is written again
    if WORLD_SIZE > 2:
        _, acquired = _acquire_group(flags, errors, flag_kind, rank, epoch, max_spins, flag_group,
                                     acquired, row // BLOCK_M, WORLD_SIZE, True)
        fence_async_shared()
        for i in gl.static_range(1, WORLD_SIZE - 1):
            source = _arrival_source(rank, i, WORLD_SIZE)
            mbarrier.expect(part_bar, slots.block_type.nbytes)
            ws_gemm.tma_load(slots, [source * rows_per_rank + row, col], part_bar, c_smem)
            mbarrier.wait(part_bar, loads & 1)
            loads += 1
            acc = acc + c_smem.load(acc.type.layout).to(gl.float32)
            ws_gemm.thread_barrier()   # every thread has read c_smem before the next copy lands in it
            fence_async_shared()
    c_smem.store(acc.to(c_desc.dtype))
    fence_async_shared()
    ws_gemm.tma_store(c_desc, [row, col], c_smem)
    return acquired, loads, count + 1


@gluon.jit(do_not_specialize=["epoch"])
def gemm_reduce_scatter_own_ws(a_desc, b_desc, c_desc, slots, flags, errors, flag_kind, rank,
                               epoch, max_spins, flag_group, rows_per_rank, N, K_local,
                               WORLD_SIZE: gl.constexpr, num_stages: gl.constexpr,
                               num_warps: gl.constexpr):
    """push_copy_engine's GEMM of this rank's own rows, warp-specialized (``WS_OWN=1``,
    kernels/schedule/ws_gemm.py): a load warp streams A_r's own rows [rank * rows_per_rank :
    + rows_per_rank, K_local] and B_r through a ring of ``num_stages`` stages, across tiles, and
    after each tile's last loads also the first peer's partial of the tile into the epilogue's
    shared memory (``_prefetch_partial``, once the tile's copy group is flagged); the consumers'
    epilogue adds it and the other peers' partials (``_sum_partials``) into out [rows_per_rank,
    N]. Gluon descriptors: ``a_desc`` A_r (block [BLOCK_M, BLOCK_K]), ``b_desc`` B_r ([BLOCK_K,
    BLOCK_N]), ``c_desc`` out and ``slots`` the staging of the epoch's parity as [W *
    rows_per_rank, N] ([BLOCK_M, BLOCK_N]). Row tiles divide rows_per_rank (the host's
    condition)."""
    num_pid_m = gl.cdiv(rows_per_rank, a_desc.block_type.shape[0])
    num_pid_n = gl.cdiv(N, b_desc.block_type.shape[1])
    a_ring, b_ring, ready, empty = ws_gemm.allocate_ring(a_desc, b_desc, num_stages)
    c_smem = gl.allocate_shared_memory(c_desc.dtype, c_desc.block_type.shape, c_desc.layout)
    # part_bar: the consumers' own partial loads (W > 2); c_free: c_smem released for the next
    # prefetch; part_ready: the prefetched partial's bytes
    part_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    c_free = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    part_ready = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(part_bar, count=1)
    mbarrier.init(c_free, count=1)
    mbarrier.init(part_ready, count=1)
    epilogue_args = (c_desc, slots, part_bar, c_free, part_ready, flags, errors, flag_kind, rank,
                     epoch, max_spins, flag_group, rows_per_rank)
    prefetch_args = (slots, c_smem, c_free, part_ready, flags, errors, flag_kind, epoch, max_spins,
                     flag_group, rows_per_rank, _arrival_source(rank, 0, WORLD_SIZE), WORLD_SIZE)
    gl.warp_specialize([
        (ws_gemm.mma_partition, (a_ring, b_ring, ready, empty, c_smem, num_pid_m, num_pid_n,
                                 K_local, gl.constexpr(_own_order), 1, gl.constexpr(_sum_partials),
                                 epilogue_args, WORLD_SIZE,
                                 (gl.to_tensor(-1), gl.to_tensor(0), gl.to_tensor(0)), num_warps,
                                 a_desc.block_type.shape[0], 0, 0, gl.constexpr(_release_c))),
        (ws_gemm.load_partition, (a_desc, b_desc, a_ring, b_ring, ready, empty,
                                  rank * rows_per_rank, num_pid_m, num_pid_n, K_local,
                                  gl.constexpr(_own_order), 1, a_desc, a_ring, 0, 0, None, 0,
                                  gl.constexpr(_prefetch_partial), prefetch_args)),
    ], [1], [ws_gemm.LOAD_WARP_REGISTERS])


# ----------------------------------------------------------------------------------- host side
def copy_engine_slices(rows: int, meta: dict) -> list:
    """push_copy_engine's slices of the other owners' rows, ``[(first row tile, end), ...]``:
    ``SLICES`` GEMM launches (at most one per copy group), each followed by the copies of its
    groups, which then overlap the next slice's GEMM."""
    row_tiles, group = cdiv(rows, meta["BLOCK_M"]), copy_engine_group(rows, meta)
    groups = cdiv(row_tiles, group)
    count = max(1, min(meta.get("SLICES", 1), groups))
    return [(j * groups // count * group, min(row_tiles, (j + 1) * groups // count * group))
            for j in range(count)]


def _push_copy_engine(heap, state: dict, epoch: int, meta: dict, row_lo: int, row_hi: int) -> Step:
    """After the GEMM of row tiles ``row_lo .. row_hi`` of the other owners' rows (main
    stream), the copy engines take them from this rank's outbox to slot [r] of each owner's
    staging of this epoch's parity, owner r + 1 first, in groups of row tiles, each group's flag
    written by the stream after its copy (``peer_copy.copy_engine_push``: no SM)."""
    rank, world = heap.rank, heap.world_size
    rows, block_m = state["staging"].shape[1], meta["BLOCK_M"]
    group = copy_engine_group(rows, meta)
    key = ("copies", epoch % 2, block_m, group, row_lo, row_hi)
    if key not in state:   # the copies' views, made once per state (host time counts per launch)
        outbox, copies = state["outbox"], []
        for distance in range(1, world):
            owner = (rank + distance) % world
            slot = heap.peer_view(state["staging_pair"], owner)[epoch % 2, rank]
            for first in range(row_lo, row_hi, group):
                start, stop = first * block_m, min(rows, (first + group) * block_m)
                copies.append((slot[start:stop], outbox[owner * rows + start:owner * rows + stop],
                               first * world + rank, owner))
        state[key] = copies
    return Step(lambda: copy_engine_push(heap, state[key], state["flags"], epoch),
                stream="comm", after_main=True, name="push (copy engine)")


def make_inputs(problem: dict, rank: int, world_size: int, seed: int, device: str = "cpu",
                dtype: str = "bfloat16") -> dict:
    """A_r [M, K/W] (rank r's feature slice of the activations) and B_r [K/W, N] (its rows of
    the weights), ~ N(0, 1), depending on (seed, rank) only.

    Raises:
        ValueError: M or K is not a multiple of the world size.
    """
    M, N, K = problem["M"], problem["N"], problem["K"]
    if M % world_size or K % world_size:
        raise ValueError(f"M and K must be multiples of the world size {world_size}, "
                         f"got M={M}, K={K}")
    torch_dtype = getattr(torch, dtype)
    own = torch.Generator(device=device).manual_seed(seed * 1009 + rank + 1)
    a = torch.randn(M, K // world_size, generator=own, device=device).to(torch_dtype)
    b = torch.randn(K // world_size, N, generator=own, device=device).to(torch_dtype)
    return {"a": a, "b": b}


def heap_bytes(problem: dict, world_size: int, dtype: str) -> int:
    """Two stagings [W, M/W, N] in the input dtype, one flag per (16 x 16 tile, source) (the
    smallest tiles) and 1 MiB for the control block and alignment. A_r, B_r and the output
    stay outside (no peer reads them)."""
    M, N = problem["M"], problem["N"]
    itemsize = getattr(torch, dtype).itemsize
    tiles = cdiv(M // world_size, 16) * cdiv(N, 16)
    return 2 * M * N * itemsize + 4 * tiles * world_size + (1 << 20)


def setup(heap, inputs: dict, problem: dict, meta: dict) -> dict:
    """Two stagings [W, M/W, N] (``staging_pair``; ``staging`` is the first, the one every pattern
    but push_copy_engine uses) and one flag per (output tile, source rank) in the heap; the
    output [M/W, N] outside."""
    world = heap.world_size
    a, b = inputs["a"], inputs["b"]
    rows, N = a.shape[0] // world, b.shape[1]
    staging_pair = heap.empty(2, world, rows, N, dtype=a.dtype, name="staging")
    tiles = cdiv(rows, meta["BLOCK_M"]) * cdiv(N, meta["BLOCK_N"])
    flags, kind = heap.flags(tiles * world, "partial_tile_ready")
    out = torch.empty(rows, N, dtype=a.dtype, device=a.device)
    return {"a": a, "b": b, "staging": staging_pair[0], "staging_pair": staging_pair, "out": out,
            "flags": flags, "flag_kind": kind}


def steps(heap, state: dict, pattern: str, epoch: int, meta: dict) -> list:
    """One launch of ``pattern`` (see the module docstring) for this rank. What does not change
    from launch to launch (descriptors, grids, the copies' views) is made once per state and
    ``meta`` (``_plan``): the host queues a launch sooner.

    Raises:
        ValueError: an unknown pattern, or COMM_SMS that leaves no program for the GEMM.
    """
    key = ("plan", pattern, tuple(sorted(meta.items())))
    try:
        plan = state.get(key)
    except TypeError:   # a meta value that cannot be a key: planned for this launch only
        return _plan(heap, state, pattern, meta)(epoch)
    if plan is None:
        plan = state[key] = _plan(heap, state, pattern, meta)
    return plan(epoch)


def _plan(heap, state: dict, pattern: str, meta: dict):
    """``steps``'s launches of ``pattern`` with ``meta``: a function of the epoch to the steps."""
    a, b, staging, out = state["a"], state["b"], state["staging"], state["out"]
    K_local = a.shape[1]
    world, (rows, N) = heap.world_size, out.shape
    sms = meta.get("NUM_SMS") or num_sms(out.device)
    comm_sms = meta["COMM_SMS"]
    if not 0 < comm_sms < sms:
        raise ValueError(f"COMM_SMS must be in 1..{sms - 1} (the GPU has {sms} SMs), got {comm_sms}")
    tiles = dict(BLOCK_M=meta["BLOCK_M"], BLOCK_N=meta["BLOCK_N"])
    out_tiles = cdiv(rows, meta["BLOCK_M"]) * cdiv(N, meta["BLOCK_N"])
    staging_strides = (staging.stride(0), staging.stride(1), staging.stride(2))

    use_tma = tma_supported(a, b)
    a_arg = operands(a, [meta["BLOCK_M"], meta["BLOCK_K"]], use_tma)
    b_arg = operands(b, [meta["BLOCK_K"], meta["BLOCK_N"]], use_tma)

    def gemm(programs: int, signal: bool, epilogue_reduce: bool = False, phase: int = 0):
        # the sums of epilogue_reduce go to out through its descriptor where row tiles divide it
        store_tma = epilogue_reduce and use_tma and tma_supported(out) and rows % meta["BLOCK_M"] == 0
        run = gemm_launch(world * out_tiles, programs, meta, out.device, use_tma, store_tma, a.dtype,
                          flags=signal or epilogue_reduce)
        out_arg = operands(out, c_block(meta, store_tma), store_tma)
        return lambda epoch: Step(lambda: gemm_reduce_scatter_gemm[run.grid](
            a_arg, b_arg, staging, out_arg, state["flags"], heap.errors, state["flag_kind"],
            heap.heap_bases, run.workspace, run.sk_flags, heap.rank, epoch, heap.max_spins, rows,
            N, K_local, a.stride(0), a.stride(1), b.stride(0), b.stride(1), *staging_strides,
            out.stride(0), out.stride(1), WORLD_SIZE=world, SIGNAL=signal,
            SK_SIGNAL=signal or epilogue_reduce, EPILOGUE_REDUCE=epilogue_reduce, PHASE=phase,
            STORE_TMA=store_tma, **run.kwargs),
            name="gemm" if not phase else f"gemm (phase {phase})")

    def phase(programs: int, own: bool, flag_group: int = 1, row_lo: int = 0, slice_rows: int = 0):
        """push_copy_engine's GEMM of a slice of the other owners' rows into the outbox, or of
        its own rows summed with the peers' partials from the staging of the epoch's parity
        (``gemm_reduce_scatter_phase``)."""
        target = out if own else state.setdefault(
            "outbox", torch.empty(world * rows, N, dtype=a.dtype, device=a.device))
        store_tma = use_tma and tma_supported(target) and rows % meta["BLOCK_M"] == 0
        grid_m = cdiv(rows, meta["BLOCK_M"]) if own else (world - 1) * slice_rows
        run = gemm_launch(grid_m * cdiv(N, meta["BLOCK_N"]), programs, meta, out.device,
                          use_tma, store_tma, a.dtype, flags=own)
        target_arg = operands(target, c_block(meta, store_tma), store_tma)
        sum_in_epilogue = bool(meta.get("SUM_IN_EPILOGUE", 1))
        # the own tiles' sums read the staging of the epoch's parity: through a descriptor each
        # with SUM_TMA, where out's stores go through one
        slots = [s.view(world * rows, N) for s in state["staging_pair"]]
        sum_tma = (own and sum_in_epilogue and store_tma and bool(meta.get("SUM_TMA", 0))
                   and tma_supported(*slots))
        sources = ([operands(s, c_block(meta, True), True) for s in slots] if sum_tma
                   else list(state["staging_pair"]) if own else [staging, staging])
        if sum_tma and meta.get("WS_OWN", 0) and ws_gemm.runs_here():
            return own_rows_ws(programs, flag_group, slots)
        return lambda epoch: Step(lambda: gemm_reduce_scatter_phase[run.grid](
            a_arg, b_arg, target_arg, sources[epoch % 2],
            state["flags"], heap.errors, state["flag_kind"], run.workspace, run.sk_flags,
            heap.rank, epoch, heap.max_spins, flag_group, row_lo, max(1, slice_rows), rows, N,
            K_local, a.stride(0), a.stride(1), b.stride(0), b.stride(1), *staging_strides,
            target.stride(0), target.stride(1), WORLD_SIZE=world, OWN=own,
            SUM_IN_EPILOGUE=sum_in_epilogue, STORE_TMA=store_tma, SUM_TMA=sum_tma, **run.kwargs),
            name="gemm (own rows)" if own else
            f"gemm (other owners' row tiles {row_lo}..{row_lo + slice_rows - 1})")

    def own_rows_ws(programs: int, flag_group: int, slots: list):
        """push_copy_engine's own rows through the warp-specialized kernel (``WS_OWN``,
        ``gemm_reduce_scatter_own_ws``), ``WS_STAGES`` stages (3 by default: 128 x 256 x 64
        tiles and C's whole tile fit sm_90's shared memory)."""
        ws_meta = {"BLOCK_M": meta["BLOCK_M"], "BLOCK_N": meta["BLOCK_N"], "BLOCK_K": meta["BLOCK_K"],
                   "num_warps": meta.get("num_warps", 8), "num_stages": meta.get("WS_STAGES", 3),
                   "GROUP_M": 1}
        error = ws_gemm.config_error(ws_meta, a.element_size())
        if error:
            raise ValueError(f"WS_OWN: {error}")
        bm, bn, bk = ws_meta["BLOCK_M"], ws_meta["BLOCK_N"], ws_meta["BLOCK_K"]
        descs = (ws_gemm.descriptor(a, [bm, bk]), ws_gemm.descriptor(b, [bk, bn]),
                 ws_gemm.descriptor(out, [bm, bn]))
        slot_descs = [ws_gemm.descriptor(s, [bm, bn]) for s in slots]
        grid = (min(programs, out_tiles),)
        return lambda epoch: Step(lambda: gemm_reduce_scatter_own_ws[grid](
            *descs, slot_descs[epoch % 2], state["flags"], heap.errors, state["flag_kind"],
            heap.rank, epoch, heap.max_spins, flag_group, rows, N, K_local, WORLD_SIZE=world,
            num_stages=ws_meta["num_stages"], num_warps=ws_meta["num_warps"],
            maxnreg=ws_gemm.maxnreg(ws_meta)), name="gemm (own rows, warp-specialized)")

    # 16 fp32 accumulator elements per thread and up to W loads of as many in flight: 128 x 256
    # tiles take 16 warps (98 registers in sm_90 code from triton 3.6; 4 warps spill).
    reduce_warps = max(4, min(16, meta["BLOCK_M"] * meta["BLOCK_N"] // 2048))

    def reduce(programs: int, wait: bool, stream: str):
        grid = (min(programs, out_tiles),)
        return lambda epoch: Step(lambda: gemm_reduce_scatter_reduce[grid](
            staging, out, state["flags"], heap.errors, state["flag_kind"], heap.rank, epoch,
            heap.max_spins, rows, N, *staging_strides, out.stride(0), out.stride(1),
            WORLD_SIZE=world, WAIT=wait, num_warps=reduce_warps, **tiles), stream=stream, name="reduce")

    barrier = lambda epoch: BARRIER  # noqa: E731
    if pattern == "bulk_sync":
        plan = [gemm(sms, False), barrier, reduce(sms, False, "main"), barrier]
    elif pattern == "producer_consumer":  # the CPU runner runs every rank's GEMM before any reduce
        plan = [gemm(sms - comm_sms, True), reduce(comm_sms, True, "comm"), barrier]
    elif pattern == "push_copy_engine":   # no barrier: the staging alternates (module docstring)
        plan = []
        for row_lo, row_hi in copy_engine_slices(rows, meta):
            plan += [phase(sms, False, row_lo=row_lo, slice_rows=row_hi - row_lo),
                     functools.partial(_push_copy_engine, heap, state, meta=meta, row_lo=row_lo,
                                       row_hi=row_hi)]
        plan.append(phase(sms, True, copy_engine_group(rows, meta)))
    elif pattern == "epilogue_reduce":
        if meta.get("STREAM_K", 0) >= 2:
            raise ValueError(_EPILOGUE_REDUCE_STREAM_K)
        if out.device.type == "cpu":  # the interpreter runs one rank's programs at a time: the
            # peers' tiles of every rank first, then each rank's own tiles (the same epilogues)
            plan = [gemm(sms, False, True, 1), gemm(sms, False, True, 2), barrier]
        else:
            plan = [gemm(sms, False, True), barrier]
    else:
        raise ValueError(f"pattern must be one of {PATTERNS}, got {pattern!r}")
    return lambda epoch: [make(epoch) for make in plan]


def output(state: dict) -> torch.Tensor:
    """This rank's rows of the sum, [M/W, N]."""
    return state["out"]


def reference(all_inputs: list, rank: int) -> torch.Tensor:
    """fp32 ``sum_r A_r[rows of rank] @ B_r``, [M/W, N]."""
    rows = all_inputs[0]["a"].shape[0] // len(all_inputs)
    own = slice(rank * rows, (rank + 1) * rows)
    return sum(x["a"][own].float() @ x["b"].float() for x in all_inputs)


def baseline(inputs: dict, problem: dict, group=None) -> Baseline:
    """torch + NCCL: ``torch.matmul`` into a preallocated partial [M, N], then
    ``reduce_scatter_tensor`` into a preallocated [M/W, N] (NCCL sums in the input dtype)."""
    import torch.distributed as dist
    a, b = inputs["a"], inputs["b"]
    world = dist.get_world_size(group)
    partial = torch.empty(a.shape[0], b.shape[1], dtype=a.dtype, device=a.device)
    out = torch.empty(a.shape[0] // world, b.shape[1], dtype=a.dtype, device=a.device)

    def run() -> None:
        torch.matmul(a, b, out=partial)
        dist.reduce_scatter_tensor(out, partial, group=group)

    return Baseline(run, lambda: out, compute=lambda: torch.matmul(a, b, out=partial))


def tile_orders(problem: dict, world_size: int, meta: dict) -> list:
    """The grids the kernels walk through ``swizzle``: the GEMM's of W rounds of row tiles
    [W * cdiv(M/W, BLOCK_M), cdiv(N, BLOCK_N)], the reduce's (and push_copy_engine's own-rows
    GEMM's) of the rank's own rows [cdiv(M/W, BLOCK_M), cdiv(N, BLOCK_N)], and push_copy_engine's
    GEMMs of slices of the other owners' rows [(W - 1) * slice rows, cdiv(N, BLOCK_N)]
    (``copy_engine_slices``)."""
    rows = cdiv(problem["M"] // world_size, meta["BLOCK_M"])
    cols = cdiv(problem["N"], meta["BLOCK_N"])
    grids = [(world_size * rows, cols), (rows, cols)]
    for lo, hi in copy_engine_slices(problem["M"] // world_size, {"CE_GROUPS": 1, **meta}):
        if ((world_size - 1) * (hi - lo), cols) not in grids:
            grids.append(((world_size - 1) * (hi - lo), cols))
    return [(grid, grid) for grid in grids]


def constraints(problem: dict, world_size: int, pattern: str, meta: dict) -> str | None:
    """M and K must split evenly over the ranks, the tiles fit one program's shared memory, and
    COMM_SMS leave SMs to the GEMM."""
    if problem["M"] % world_size or problem["K"] % world_size:
        return (f"M and K must be multiples of the world size {world_size}, got M={problem['M']}, "
                f"K={problem['K']}")
    if pattern == "epilogue_reduce" and meta.get("STREAM_K", 0) >= 2:
        return _EPILOGUE_REDUCE_STREAM_K
    return gemm_constraints(meta, 2, comm_sms=True)


#: Why epilogue_reduce takes no STREAM_K=2 or 3: a program's stream-K range can then span more
#: than one tile, so it can hold the last pieces of two tiles, its own rows' (which waits for the peer's
#: partial) and before it, in its backward order, a peer's; the peer's same program holds the
#: mirror pair, and each waits for what the other does next. STREAM_K=1 keeps every range under
#: one tile (fewer stream-K tiles than programs), so a program finishes at most one tile there.
_EPILOGUE_REDUCE_STREAM_K = ("epilogue_reduce takes STREAM_K 0 or 1: with 2 or 3 a program can finish two "
                             "stream-K tiles and wait for a peer program that waits for it")


SPEC = DistKernelSpec(
    name="gemm_reduce_scatter",
    kernel_names=("gemm_reduce_scatter_gemm", "gemm_reduce_scatter_reduce",
                  "gemm_reduce_scatter_phase"),
    patterns=PATTERNS,
    problems={
        # W = 2: 24 output rows per owner (a full and a half row tile), K/W = 24 (a ragged K
        # step); W = 3: 16 rows, K/W = 16; N = 40 leaves a ragged column tile. Any W dividing
        # 48 works (W = 4, 8 on GPUs: 12 and 6 rows, one masked row tile per owner).
        "check": {"M": 48, "N": 40, "K": 48},
        # Llama-3-70B MLP down projection (intermediate 28672 -> hidden 8192), 8192 tokens.
        "llama70b-down-8k": {"M": 8192, "N": 8192, "K": 28672},
        # Llama-3-70B attention output projection (64 heads x 128 -> 8192), 4096 tokens.
        "llama70b-o-4k": {"M": 4096, "N": 8192, "K": 8192},
        # Llama-3-8B MLP down projection (14336 -> 4096), 4096 tokens: the small one.
        "llama8b-down-4k": {"M": 4096, "N": 4096, "K": 14336},
    },
    bench_problems=("llama70b-down-8k", "llama70b-o-4k", "llama8b-down-4k"),
    # push_copy_engine: two slices, a copy per slice and owner (CE_GROUPS=2). On two H100s
    # (2026-11-26, bench/results/rs_ce_parts_h100x2/, bench/results/dist_optimize_h100x2_ce/) one slice
    # left the own rows waiting for the copies at llama70b-o-4k (0.403-0.475 ms against 0.386-0.388
    # with two), four cost a launch more (0.405-0.450); 2, 4 and 8 groups ran within 0.5 % of each
    # other, and every copy is host time (eight: ~0.5 ms to queue a launch of ~0.33-0.39).
    # The peers' partials summed in the own tiles' epilogue: on two H100s (2026-11-26,
    # bench/results/rs_prefetch_h100x2/) 0.381 against 0.385 ms first at llama70b-o-4k, 0.319
    # against 0.322 at llama8b-down-4k (the own rows alone: 0.193 against 0.195 and 0.160
    # against 0.162); prefetching them into L2 a main loop ahead made both slower (0.386, 0.323),
    # at the evict-last priority too (own rows 0.1949 against 0.1934 ms at o-4k, the sums' loads
    # evict-first or not; bench/results/rs_sum_tma_h100x2/2_prefetch_evict_last/, knob since removed).
    # Loaded through the staging's descriptor (SUM_TMA), the launch was 1.1-2.1 us faster at both
    # in three leases of two H100s (2026-11-26, the same folder; e.g. 0.3774 against 0.3794 ms at
    # o-4k, 0.3173 against 0.3181 at down-4k).
    # The own rows through the warp-specialized Gluon kernel (WS_OWN, where a Hopper GPU runs
    # Gluon; the Triton loop elsewhere): on two H100s (2026-11-26, bench/results/rs_ws_own_h100x2/),
    # alternating in one lease, 0.368 against 0.370-0.371 ms at o-4k (86 % of the way against
    # 84 %) and 0.311 against 0.312-0.313 at down-4k (85 % against 83 %).
    meta={**GEMM_META, "COMM_SMS": 16, "CE_GROUPS": 2, "SLICES": 2, "SUM_IN_EPILOGUE": 1,
          "SUM_TMA": 1, "WS_OWN": 1},
    check_meta={**GEMM_CHECK_META, "COMM_SMS": 1, "CE_GROUPS": 2, "SLICES": 2,
                "SUM_IN_EPILOGUE": 1, "SUM_TMA": 1},
    knobs={"pattern": PATTERNS, "COMM_SMS": (8, 16, 32), "CE_GROUPS": (1, 2, 4, 8, 16),
           "SLICES": (1, 2, 4), "SUM_IN_EPILOGUE": (0, 1), "SUM_TMA": (0, 1), "WS_OWN": (0, 1),
           **GEMM_TILE_KNOBS, "swizzle": ("row-major", "column-major", "grouped-m:8")},
    tile_orders=tile_orders,
    constraints=constraints,
    pattern_knobs={"producer_consumer": ("COMM_SMS",),
                   "push_copy_engine": ("CE_GROUPS", "SLICES", "SUM_IN_EPILOGUE", "SUM_TMA",
                                        "WS_OWN")},
    tile_configs=GEMM_TILE_CONFIGS,
    compute_shape=lambda p, w: {"M": p["M"], "N": p["N"], "K": p["K"] // w},
    make_inputs=make_inputs,
    linear_input="b",
    heap_bytes=heap_bytes,
    setup=setup,
    steps=steps,
    output=output,
    reference=reference,
    baseline=baseline,
    # fp32 accumulation of the product and of the sum; two roundings to the input dtype: each
    # partial in the staging (W independent errors of relative size ~u/3 whose sum is again
    # ~u/3 of the total) and the output; u = 2^-8 for bf16, 2^-11 for fp16, so about 2.3e-3
    # and 3e-4 in all (5e-3 in bf16 under the interpreter, which truncates to bf16).
    # 1e-2 / 2e-3 still catch a missing slot (error ~1/sqrt(W)) or a misplaced tile.
    tolerance={"bfloat16": 1e-2, "float16": 2e-3, "float32": 1e-4},
    flops=lambda p, w: 2.0 * p["M"] * p["N"] * (p["K"] // w),
    # the partial's rows of the W - 1 other owners, in the input dtype
    comm_bytes=lambda p, w, dtype: (w - 1) * (p["M"] // w) * p["N"] * getattr(torch, dtype).itemsize,
    dtypes=("bfloat16", "float16"),
    expert="grouped-m:8",
)
