"""
A warp-specialized persistent GEMM for Hopper, written in Gluon
================================================================

Why
---
``persistent_gemm`` is Triton's persistent loop: the same warps issue the TMA loads, wait for
them, run ``wgmma`` and write the epilogue. On Hopper, Triton 3.6 and 3.9 do not
warp-specialize that loop (``tl.range(..., warp_specialize=True)`` builds the same PTX for
sm_90: ``persistent_gemm.warp_specialize_effective``), and that GEMM stayed at 0.87-0.99x of
cuBLAS at several per-rank shapes (bench/results/rank_gemm_hopper.md). cuBLAS's Hopper kernels
(``nvjet_sm90_*``) give the loads to a producer warp and the math to consumer warp groups.

Gluon (``triton.experimental.gluon``, in triton 3.6 and newer) lets a kernel say which warps do
what. This one does, for ``C [M, N] = A [M, K] @ B [K, N]`` in bf16 / fp16, fp32 accumulation:

- **A load partition**: one warp (``worker_num_regs`` 40 registers a thread), walking the same
  tiles as the consumers. For each K step it waits until a stage of the shared-memory ring is
  empty, then issues the TMA loads of the A and B tiles into it; the copies' completion
  (bytes counted by an mbarrier) marks the stage ready.
- **The default partition** (``num_warps`` warps, 4 or 8: one or two warp groups of 64 rows of
  wgmma each): for each K step it waits for the stage, issues ``wgmma`` asynchronously, keeps one
  in flight and releases the stage of the previous one. At the tile's end it waits for the
  last ``wgmma``, rounds the fp32 accumulator to C's dtype into shared memory and stores it with
  TMA; meanwhile the load warp is already filling the ring with the next tile's first stages.
- **Persistent, grouped tile order**: ``P`` programs (at most one per SM) walk tiles ``pid, pid +
  P, ...``; ``tile_coordinates`` maps a tile index to its ``(pid_m, pid_n)`` in groups of
  ``GROUP_M`` rows (Triton's matmul tutorial order): tiles running at once share A and B tiles
  in L2.

- **A second consumer** (``BLOCK_M_LOW`` 64): a tile of BLOCK_M + 64 rows, its last 64 computed
  by another partition of 4 warps from the same B tiles: cuBLAS's 320 x 128 tile (``nvjet_sm90_tst_
  320x128``) as 256 + 64, since Triton's blocks are powers of two. At N = 1280 that is 130 tiles, one
  wave on 132 SMs, where 128 x 256 tiles make 160.

The partitions (``load_partition``, ``mma_partition``) take the tile order, its rotation
(``rotated``: a rank-relative order over a fixed grid), a wait before each tile's loads and the
epilogue as compile-time functions, so other kernels reuse them with their own
(``gemm_partitions`` is the body with C stored through TMA): GEMM + RS push_copy_engine's own rows
(kernels/distributed/gemm_reduce_scatter.py, ``WS_OWN``) add the peers' partials in the epilogue,
the first loaded by the load warp after the tile's last loads (``PREFETCH`` / ``STARTED``);
AG + GEMM (``WS_GEMM``) waits in the load warp for the peers' rows of A; GEMM + all-scatter
producer_consumer releases a flag per tile once its store has completed. ``ws_matmul_kernel`` is
the plain GEMM (``tile_coordinates``, ``store_c``).

The same source compiles under triton 3.6 and 3.9: the TMA copies were renamed between them
(``async_copy_global_to_shared`` / ``async_copy_shared_to_global`` in 3.6, ``async_load`` /
``async_store`` in 3.9, where the old names raise), and ``tma_load`` / ``tma_store`` pick
whichever the installed Triton has.

Gluon kernels do not run under the Triton interpreter: on the CPU this module is compiled for
sm_90 (``compile_for_hopper``) and its tile order run (``tile_coordinates`` is plain Triton);
numerics are checked on a GPU (tests/kernels/schedule/test_ws_gemm.py, marked ``gpu``).

Measured (bench/results/ws_gemm_h100/, one H100, triton 3.6, 2026-11-26, against cuBLAS and the
tuned Triton persistent GEMM in the same interleaved rounds, 28 shapes): 128 x 256 x 64 tiles,
8 consumer warps, 3 stages come within 1-2 % of the Triton GEMM at the data-parallel shapes
(0.97-1.03x of cuBLAS) and reach 0.988x, 0.993x and 0.959x at 8192 x 896 x 14336 in three runs,
where the Triton GEMM is at 0.924x, 0.927x and 0.919x (its slow mode: bench/results/bimodal_896/).
This kernel is data-parallel only: at 4096 x 1280 x 8192 (160 tiles of 128 x 256 on 132 SMs) it is
at 0.65-0.67x, where the Triton GEMM's stream-K schedule is at 0.86-0.88x; with the 320-row tile (32-wide
K steps, 6 stages) it is at 0.972-0.980x there and 0.976-0.985x at 4096 x 2560 x 8192
(bench/results/ws_gemm_h100/5_tall_tiles/, bench/results/rank_gemm_hopper.md). A fourth stage (C
stored in halves to make room) gained nothing.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, mbarrier, tma,
                                                               warpgroup_mma, warpgroup_mma_wait)

from swizzleperf.kernels.schedule import persistent_gemm

# triton 3.6 names the TMA copies async_copy_global_to_shared / async_copy_shared_to_global;
# 3.9 renamed them async_load / async_store and the old names raise RuntimeError.
tma_load = getattr(tma, "async_load", None) or tma.async_copy_global_to_shared
tma_store = getattr(tma, "async_store", None) or tma.async_copy_shared_to_global
# A barrier of the partition's threads: gl.thread_barrier in 3.6, gl.barrier in 3.9.
thread_barrier = getattr(gl, "thread_barrier", None) or gl.barrier

#: Registers a thread of the load warp keeps (``setmaxnreg``): it holds a few scalars. The
#: consumers get what is left of the kernel's ``maxnreg`` budget (Gluon's warp_specialize).
LOAD_WARP_REGISTERS = gl.constexpr(40)

#: The second consumer partition's warps (one warp group: 64 rows of wgmma at a time) and
#: registers a thread (``BLOCK_M_LOW`` rows of fp32 accumulator, 64 registers at 64 x 128, plus
#: addresses and loop state).
LOW_WARPS = gl.constexpr(4)
LOW_CONSUMER_REGISTERS = gl.constexpr(104)

#: The knobs of one configuration, all required by ``matmul`` (``BLOCK_M_LOW`` and
#: ``EPILOGUE_SPLIT`` are optional, 0 and 1 by default).
KNOBS = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "num_warps", "num_stages", "GROUP_M")


@triton.jit
def tile_coordinates(tile, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
    """``(pid_m, pid_n)`` of tile index ``tile`` of a ``num_pid_m x num_pid_n`` grid of tiles:
    groups of ``GROUP_M`` rows of tiles, column by column inside a group (Triton's matmul
    tutorial order). A ``triton.jit`` function (Gluon kernels call it), so the interpreter can
    check on the CPU that it is a permutation."""
    tiles_in_group = GROUP_M * num_pid_n
    group = tile // tiles_in_group
    first_m = group * GROUP_M
    rows = tl.minimum(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + (tile % tiles_in_group) % rows
    pid_n = (tile % tiles_in_group) // rows
    return pid_m, pid_n


@triton.jit
def rotated(ORDER: tl.constexpr, tile, num_pid_m, num_pid_n, GROUP_M: tl.constexpr, first_pid_m):
    """``ORDER``'s tile ``(pid_m, pid_n)`` with its row tile moved ``first_pid_m`` row tiles on,
    cyclically: a rank-relative order (all-gather + GEMM's: own rows first) over a fixed grid."""
    pid_m, pid_n = ORDER(tile, num_pid_m, num_pid_n, GROUP_M)
    return (pid_m + first_pid_m) % num_pid_m, pid_n


@gluon.jit
def load_partition(a_desc, b_desc, a_ring, b_ring, ready, empty, a_row0, num_pid_m, num_pid_n, K,
                   ORDER: gl.constexpr, GROUP_M: gl.constexpr, low_desc, low_ring,
                   BLOCK_M_LOW: gl.constexpr, first_pid_m, WAIT: gl.constexpr, wait_args,
                   PREFETCH: gl.constexpr = None, prefetch_args=0):
    """The producer: the TMA loads of every K step of this program's tiles into the ring of
    stages (``ready[s]`` counts the bytes in, ``empty[s]`` is the consumers' release). Tile
    ``tile`` is ``ORDER(tile, num_pid_m, num_pid_n, GROUP_M)``; its A rows start at ``a_row0 +
    pid_m * (BLOCK_M + BLOCK_M_LOW)``. With ``BLOCK_M_LOW`` > 0 the tile's last BLOCK_M_LOW rows of
    A go through ``low_desc`` into ``low_ring`` (the second consumer's); with 0 those two are not
    used (pass ``a_desc``, ``a_ring``). ``first_pid_m``: the order's row tiles are rotated to
    start there (``rotated``). ``WAIT``: None, or called as ``WAIT(row, TILE_M, wait_args)``
    before the loads of each tile whose A rows start at ``row`` (a wait for the rows to have
    arrived: the consumers go on with the stages already loaded). ``PREFETCH``: None, or called
    as ``PREFETCH(row, col, count, prefetch_args)`` once a tile, ``count`` its index among this
    program's tiles, ``(row, col)`` its first element in C (A's row less ``a_row0``), after the
    loads of its last K step (a load for the tile's epilogue, issued while the consumers still
    have the ring's stages to work on: a wait in it holds up no load of the tile's own;
    ``mma_partition``'s ``STARTED`` is the other half)."""
    BLOCK_M: gl.constexpr = a_desc.block_type.shape[0]
    BLOCK_K: gl.constexpr = a_desc.block_type.shape[1]
    BLOCK_N: gl.constexpr = b_desc.block_type.shape[1]
    STAGES: gl.constexpr = a_ring.shape[0]
    TILE_M: gl.constexpr = BLOCK_M + BLOCK_M_LOW
    STAGE_BYTES: gl.constexpr = (a_desc.block_type.nbytes + b_desc.block_type.nbytes
                                 + (low_desc.block_type.nbytes if BLOCK_M_LOW > 0 else 0))
    k_iters = gl.cdiv(K, BLOCK_K)
    step = 0
    count = 0
    for tile in range(gl.program_id(0), num_pid_m * num_pid_n, gl.num_programs(0)):
        pid_m, pid_n = rotated(ORDER, tile, num_pid_m, num_pid_n, GROUP_M, first_pid_m)
        row = a_row0 + pid_m * TILE_M
        if WAIT is not None:
            WAIT(row, TILE_M, wait_args)
        for k in range(k_iters):
            stage = step % STAGES
            # An mbarrier starts in phase 0 with phase "-1" complete: the first pass over the
            # ring waits on parity 1 and goes through.
            mbarrier.wait(empty.index(stage), ((step // STAGES) & 1) ^ 1)
            mbarrier.expect(ready.index(stage), STAGE_BYTES)
            tma_load(a_desc, [row, k * BLOCK_K], ready.index(stage), a_ring.index(stage))
            if BLOCK_M_LOW > 0:
                tma_load(low_desc, [row + BLOCK_M, k * BLOCK_K], ready.index(stage), low_ring.index(stage))
            tma_load(b_desc, [k * BLOCK_K, pid_n * BLOCK_N], ready.index(stage), b_ring.index(stage))
            step += 1
            if PREFETCH is not None:
                if k == k_iters - 1:
                    PREFETCH(pid_m * TILE_M, pid_n * BLOCK_N, count, prefetch_args)
        count += 1


@gluon.jit
def mma_partition(a_ring, b_ring, ready, empty, c_smem, num_pid_m, num_pid_n, K, ORDER: gl.constexpr,
                  GROUP_M: gl.constexpr, EPILOGUE: gl.constexpr, epilogue_args,
                  EPILOGUE_CONST: gl.constexpr, state, num_warps: gl.constexpr,
                  TILE_M: gl.constexpr, ROW_OFFSET: gl.constexpr, first_pid_m,
                  STARTED: gl.constexpr = None):
    """A consumer: for each tile, wgmma over the ring (one in flight, the stage before it
    released), then ``state = EPILOGUE(acc, row, col, c_smem, state, epilogue_args,
    EPILOGUE_CONST)`` with the fp32 accumulator [BLOCK_M, BLOCK_N] in wgmma's layout, ``(row,
    col)`` its first element in C (``pid_m * TILE_M + ROW_OFFSET``, ``pid_n * BLOCK_N``: a tile of
    TILE_M rows may be computed by two consumers, the second from ROW_OFFSET on); ``c_smem`` is
    the epilogue's shared memory, ``state`` a value carried from tile to tile,
    ``EPILOGUE_CONST`` a compile-time value (a tuple's constants arrive as tensors). Tiles in
    ``rotated`` order, as ``load_partition``'s. ``STARTED``: None, or called as
    ``STARTED(epilogue_args)`` once a tile, after its K step ``min(1, k_iters - 1)`` has been
    issued and the stage before it released (where the previous tile's epilogue has had a K
    step's time to finish: ``load_partition``'s ``PREFETCH`` waits for it)."""
    BLOCK_M: gl.constexpr = a_ring.shape[1]
    BLOCK_K: gl.constexpr = a_ring.shape[2]
    BLOCK_N: gl.constexpr = b_ring.shape[2]
    STAGES: gl.constexpr = a_ring.shape[0]
    acc_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                         instr_shape=[16, BLOCK_N, 16])
    k_iters = gl.cdiv(K, BLOCK_K)
    step = 0
    for tile in range(gl.program_id(0), num_pid_m * num_pid_n, gl.num_programs(0)):
        pid_m, pid_n = rotated(ORDER, tile, num_pid_m, num_pid_n, GROUP_M, first_pid_m)
        acc = gl.zeros((BLOCK_M, BLOCK_N), dtype=gl.float32, layout=acc_layout)
        for k in range(k_iters):
            stage = step % STAGES
            mbarrier.wait(ready.index(stage), (step // STAGES) & 1)
            acc = warpgroup_mma(a_ring.index(stage), b_ring.index(stage), acc, is_async=True)
            # At most one wgmma in flight: the previous step's has read its stage, free it.
            acc = warpgroup_mma_wait(1, deps=(acc, a_ring.index(stage), b_ring.index(stage)))[0]
            mbarrier.arrive(empty.index((step + STAGES - 1) % STAGES), pred=k > 0)
            step += 1
            if STARTED is not None:
                if k == gl.minimum(1, k_iters - 1):
                    STARTED(epilogue_args)
        acc = warpgroup_mma_wait(0, deps=(acc, ))
        mbarrier.arrive(empty.index((step + STAGES - 1) % STAGES))
        state = EPILOGUE(acc, pid_m * TILE_M + ROW_OFFSET, pid_n * BLOCK_N, c_smem, state, epilogue_args,
                         EPILOGUE_CONST)
    tma.store_wait(0)


@gluon.jit
def store_c(acc, row, col, c_smem, state, epilogue_args, UNUSED: gl.constexpr):
    """The plain epilogue: the tile rounded to C's dtype and stored through TMA, in
    ``EPILOGUE_SPLIT`` column pieces through ``c_smem`` ([BLOCK_M, BLOCK_N / EPILOGUE_SPLIT]).
    ``epilogue_args``: ``(c_desc, )``."""
    c_desc = epilogue_args[0]
    BLOCK_M: gl.constexpr = acc.shape[0]
    BLOCK_N: gl.constexpr = acc.shape[1]
    EPILOGUE_SPLIT: gl.constexpr = BLOCK_N // c_desc.block_type.shape[1]
    # The previous tile's TMA store has long finished reading c_smem; make sure.
    tma.store_wait(0)
    if EPILOGUE_SPLIT == 2:
        left, right = acc.reshape([BLOCK_M, 2, BLOCK_N // 2]).permute(0, 2, 1).split()
        c_smem.store(left.to(c_desc.dtype))
        fence_async_shared()
        tma_store(c_desc, [row, col], c_smem)
        tma.store_wait(0)
        c_smem.store(right.to(c_desc.dtype))
        fence_async_shared()
        tma_store(c_desc, [row, col + BLOCK_N // 2], c_smem)
    else:
        c_smem.store(acc.to(c_desc.dtype))
        fence_async_shared()
        tma_store(c_desc, [row, col], c_smem)
    return state


@gluon.jit
def allocate_ring(a_desc, b_desc, num_stages: gl.constexpr, consumers: gl.constexpr = 1):
    """``(a_ring, b_ring, ready, empty)``: ``num_stages`` stages of A and B tiles in shared
    memory and their two mbarriers each, initialised (``ready`` count 1, ``empty`` count
    ``consumers``: every consumer partition releases each stage)."""
    a_ring = gl.allocate_shared_memory(a_desc.dtype, [num_stages] + a_desc.block_type.shape, a_desc.layout)
    b_ring = gl.allocate_shared_memory(b_desc.dtype, [num_stages] + b_desc.block_type.shape, b_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [num_stages, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [num_stages, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(num_stages):
        mbarrier.init(ready.index(i), count=1)
        mbarrier.init(empty.index(i), count=consumers)
    return a_ring, b_ring, ready, empty


@gluon.jit
def gemm_partitions(a_desc, b_desc, c_desc, low_desc, c_low_desc, M, N, K, ORDER: gl.constexpr,
                    GROUP_M: gl.constexpr, num_stages: gl.constexpr, BLOCK_M_LOW: gl.constexpr,
                    num_warps: gl.constexpr, first_pid_m, WAIT: gl.constexpr, wait_args,
                    EPILOGUE: gl.constexpr, epilogue_args, low_epilogue_args):
    """The shared memory and the partitions of ``C = A @ B``: tiles in ``ORDER`` rotated by
    ``first_pid_m`` row tiles, the load warp calling ``WAIT`` before each tile's loads where it
    is not None (``load_partition``), each consumer's tile through ``EPILOGUE`` (``mma_partition``;
    ``store_c`` stores it through TMA) with ``epilogue_args``, the second consumer's (BLOCK_M_LOW
    > 0) with ``low_epilogue_args``; the epilogues' shared memory is C's block of ``c_desc`` /
    ``c_low_desc``. The body of ``ws_matmul_kernel``, and of other kernels' GEMMs that differ in
    their tile order, in what A's rows wait for and in their epilogue. Descriptors as
    ``ws_matmul_kernel``'s."""
    TILE_M: gl.constexpr = a_desc.block_type.shape[0] + BLOCK_M_LOW
    num_pid_m = gl.cdiv(M, TILE_M)
    num_pid_n = gl.cdiv(N, b_desc.block_type.shape[1])
    a_ring, b_ring, ready, empty = allocate_ring(a_desc, b_desc, num_stages, 1 + (BLOCK_M_LOW > 0))
    c_smem = gl.allocate_shared_memory(c_desc.dtype, c_desc.block_type.shape, c_desc.layout)
    if BLOCK_M_LOW > 0:
        low_ring = gl.allocate_shared_memory(low_desc.dtype, [num_stages] + low_desc.block_type.shape,
                                             low_desc.layout)
        c_low_smem = gl.allocate_shared_memory(c_low_desc.dtype, c_low_desc.block_type.shape,
                                               c_low_desc.layout)
        gl.warp_specialize([
            (mma_partition, (a_ring, b_ring, ready, empty, c_smem, num_pid_m, num_pid_n, K, ORDER, GROUP_M,
                             EPILOGUE, epilogue_args, 0, gl.to_tensor(0), num_warps, TILE_M, 0, first_pid_m)),
            (mma_partition, (low_ring, b_ring, ready, empty, c_low_smem, num_pid_m, num_pid_n, K, ORDER,
                             GROUP_M, EPILOGUE, low_epilogue_args, 0, gl.to_tensor(0), LOW_WARPS,
                             TILE_M, TILE_M - BLOCK_M_LOW, first_pid_m)),
            (load_partition, (a_desc, b_desc, a_ring, b_ring, ready, empty, 0, num_pid_m, num_pid_n, K,
                              ORDER, GROUP_M, low_desc, low_ring, BLOCK_M_LOW, first_pid_m, WAIT, wait_args)),
        ], [LOW_WARPS, 1], [LOW_CONSUMER_REGISTERS, LOAD_WARP_REGISTERS])
    else:
        gl.warp_specialize([
            (mma_partition, (a_ring, b_ring, ready, empty, c_smem, num_pid_m, num_pid_n, K, ORDER, GROUP_M,
                             EPILOGUE, epilogue_args, 0, gl.to_tensor(0), num_warps, TILE_M, 0, first_pid_m)),
            (load_partition, (a_desc, b_desc, a_ring, b_ring, ready, empty, 0, num_pid_m, num_pid_n, K,
                              ORDER, GROUP_M, a_desc, a_ring, 0, first_pid_m, WAIT, wait_args)),
        ], [1], [LOAD_WARP_REGISTERS])


@gluon.jit
def ws_matmul_kernel(a_desc, b_desc, c_desc, low_desc, c_low_desc, M, N, K, GROUP_M: gl.constexpr,
                     num_stages: gl.constexpr, BLOCK_M_LOW: gl.constexpr, num_warps: gl.constexpr):
    """C = A @ B. ``a_desc`` A [M, K] (block [BLOCK_M, BLOCK_K]), ``b_desc`` B [K, N] (block
    [BLOCK_K, BLOCK_N]), ``c_desc`` C [M, N] (block [BLOCK_M, BLOCK_N / EPILOGUE_SPLIT]): Gluon
    tensor descriptors with NVMMA shared layouts. With ``BLOCK_M_LOW`` > 0 a tile is BLOCK_M +
    BLOCK_M_LOW rows; a second consumer partition of 4 warps computes its last BLOCK_M_LOW rows
    from the same B tiles, through ``low_desc`` (A, block [BLOCK_M_LOW, BLOCK_K]) and
    ``c_low_desc`` (C, block [BLOCK_M_LOW, BLOCK_N / EPILOGUE_SPLIT]); with 0 those two are
    ``a_desc`` and ``c_desc`` again, unused. Tiles in ``tile_coordinates`` order. Grid: at most
    one program per SM, at most one per tile."""
    gemm_partitions(a_desc, b_desc, c_desc, low_desc, c_low_desc, M, N, K, gl.constexpr(tile_coordinates),
                    GROUP_M, num_stages, BLOCK_M_LOW, num_warps, 0, None, 0, gl.constexpr(store_c), (c_desc, ),
                    (c_low_desc, ))


def _gl_dtype(dtype: torch.dtype):
    return {torch.bfloat16: gl.bfloat16, torch.float16: gl.float16}[dtype]


def descriptor(tensor: torch.Tensor, block: list):
    """A Gluon tensor descriptor of a 2-D bf16 / fp16 tensor, block ``block``, in the NVMMA shared
    layout wgmma and TMA share (the widest swizzle the block's rows allow)."""
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor
    layout = gl.NVMMASharedLayout.get_default_for(list(block), _gl_dtype(tensor.dtype))
    return TensorDescriptor(tensor, list(tensor.shape), list(tensor.stride()), list(block), layout)


def descriptors(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, meta: dict) -> tuple:
    """The Gluon tensor descriptors ``(a, b, c, a_low, c_low)`` of A [M, K], B [K, N] and C [M, N]
    for a configuration; ``a_low`` / ``c_low`` are the second consumer's blocks of A and C
    (``BLOCK_M_LOW`` rows), or ``a`` / ``c`` again where it has none."""
    bm, bn, bk = meta["BLOCK_M"], meta["BLOCK_N"], meta["BLOCK_K"]
    split = meta.get("EPILOGUE_SPLIT", 1)
    a_desc, c_desc = descriptor(a, [bm, bk]), descriptor(c, [bm, bn // split])
    low = meta.get("BLOCK_M_LOW", 0)
    a_low, c_low = ((descriptor(a, [low, bk]), descriptor(c, [low, bn // split])) if low
                    else (a_desc, c_desc))
    return a_desc, descriptor(b, [bk, bn]), c_desc, a_low, c_low


def shared_bytes(meta: dict, itemsize: int = 2) -> int:
    """Shared memory of a configuration (bytes): what the Triton schedule's count gives for the
    ring of A and B stages and C's tile (halved with EPILOGUE_SPLIT 2), the second consumer's A
    stages and C block where ``BLOCK_M_LOW`` > 0, plus two mbarriers a stage."""
    halves = {"EPILOGUE_SUBTILE": meta.get("EPILOGUE_SPLIT", 1) == 2}
    low = meta.get("BLOCK_M_LOW", 0)
    low_bytes = low * (meta["num_stages"] * meta["BLOCK_K"] + meta["BLOCK_N"] // meta.get("EPILOGUE_SPLIT", 1))
    return (persistent_gemm.shared_bytes({**meta, **halves}, itemsize) + low_bytes * itemsize
            + 16 * meta["num_stages"])


def config_error(meta: dict, itemsize: int = 2) -> str | None:
    """Why a configuration cannot build, or None. Each wgmma warp group covers 64 rows, so
    BLOCK_M is 64 per warp group (``num_warps`` 4 or 8); BLOCK_N at most 256 (wgmma's N)."""
    missing = [k for k in KNOBS if k not in meta]
    if missing:
        return f"missing knobs {missing}"
    if meta["num_warps"] not in (4, 8):
        return "num_warps must be 4 or 8 (one or two warp groups)"
    if meta["BLOCK_M"] % (16 * meta["num_warps"]) or meta["BLOCK_M"] < 16 * meta["num_warps"]:
        return f"BLOCK_M {meta['BLOCK_M']} is not a multiple of {16 * meta['num_warps']}"
    if not (8 <= meta["BLOCK_N"] <= 256):
        return f"BLOCK_N {meta['BLOCK_N']} outside wgmma's 8..256"
    if meta.get("EPILOGUE_SPLIT", 1) not in (1, 2):
        return "EPILOGUE_SPLIT must be 1 or 2"
    if meta["num_stages"] < 2:
        return "num_stages must be 2 or more"
    if meta.get("BLOCK_M_LOW", 0) not in (0, 64):
        return "BLOCK_M_LOW must be 0 or 64 (one warp group of wgmma)"
    if meta.get("BLOCK_M_LOW", 0) and meta["BLOCK_N"] > 128:
        # 64 x BLOCK_N fp32 in 4 warps: 64 registers a thread at 128 columns, within
        # LOW_CONSUMER_REGISTERS; 128 at 256 columns is not (ptxas fails)
        return f"BLOCK_M_LOW needs BLOCK_N <= 128 (the second consumer's registers), got {meta['BLOCK_N']}"
    used = shared_bytes(meta, itemsize)
    if used > persistent_gemm.SM90_SHARED_BYTES:
        return f"{used} B of shared memory > {persistent_gemm.SM90_SHARED_BYTES}"
    return None


def maxnreg(meta: dict) -> int:
    """The kernel's register cap a thread (a multiple of 8, at most 255): the register file
    (65536 32-bit registers an SM, CUDA C++ Programming Guide, compute capability 9.0) shared by
    ``num_warps`` consumer warps, the second consumer's 4 where ``BLOCK_M_LOW`` > 0, and the
    load warp's warp group (4 warps: registers are reallocated by warp group)."""
    warps = meta["num_warps"] + 4 + (LOW_WARPS.value if meta.get("BLOCK_M_LOW", 0) else 0)
    return min(255, 65536 // (warps * 32)) // 8 * 8


def compile_for_hopper(meta: dict, M: int, N: int, K: int, dtype: torch.dtype = torch.bfloat16):
    """Compile ``ws_matmul_kernel`` for sm_90 on any machine (no GPU needed): Triton's code
    generation, then ptxas. Returns Triton's compiled kernel (``.asm["ptx"]``,
    ``.metadata.shared`` in bytes). Raises ValueError where ``config_error`` refuses the
    configuration, and Triton's CompilationError where the kernel does not build."""
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource
    from triton.runtime.jit import mangle_type
    error = config_error(meta, torch.tensor([], dtype=dtype).element_size())
    if error:
        raise ValueError(error)
    a, b, c = (torch.empty(shape, dtype=dtype) for shape in ((M, K), (K, N), (M, N)))
    descs = dict(zip(("a_desc", "b_desc", "c_desc", "low_desc", "c_low_desc"), descriptors(a, b, c, meta)))
    constexprs = {"GROUP_M": meta["GROUP_M"], "num_stages": meta["num_stages"],
                  "BLOCK_M_LOW": meta.get("BLOCK_M_LOW", 0), "num_warps": meta["num_warps"]}
    signature = {**{k: mangle_type(v) for k, v in descs.items()}, "M": "i32", "N": "i32", "K": "i32",
                 **{k: "constexpr" for k in constexprs}}
    return triton.compile(GluonASTSource(fn=ws_matmul_kernel, signature=signature, constexprs=constexprs),
                          target=GPUTarget("cuda", 90, 32),
                          options={"num_warps": meta["num_warps"], "maxnreg": maxnreg(meta)})


def runs_here() -> bool:
    """Whether Gluon kernels can launch here: a CUDA GPU of compute capability 9.x (Hopper), not
    the interpreter (which does not run Gluon) nor ROCm (``persistent_gemm.INLINE_PTX``)."""
    return (persistent_gemm.INLINE_PTX and torch.cuda.is_available()
            and torch.cuda.get_device_capability()[0] == 9)


def matmul(a: torch.Tensor, b: torch.Tensor, meta: dict, c: torch.Tensor | None = None,
           programs: int | None = None) -> torch.Tensor:
    """``C = A @ B`` on a Hopper GPU: A [M, K], B [K, N] bf16 or fp16 (row-major, 16-byte aligned
    rows), C [M, N] of the same dtype (allocated when not given). ``programs``: the persistent
    grid (default: the SMs, at most one per tile). Raises ValueError for a configuration
    ``config_error`` refuses, operands of other dtypes or shapes, or rows TMA cannot address
    (not 16-byte aligned: K or N not a multiple of 8 for 2-byte dtypes)."""
    error = config_error(meta, a.element_size())
    if error:
        raise ValueError(error)
    if a.dtype not in (torch.bfloat16, torch.float16) or b.dtype != a.dtype:
        raise ValueError(f"A and B must both be bf16 or fp16, got {a.dtype} and {b.dtype}")
    if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(f"shapes {tuple(a.shape)} @ {tuple(b.shape)} do not multiply")
    M, K = a.shape
    N = b.shape[1]
    if c is None:
        c = torch.empty((M, N), dtype=a.dtype, device=a.device)
    for name, tensor in (("A", a), ("B", b), ("C", c)):
        # TMA's rule (CUDA driver API, cuTensorMapEncodeTiled): rows 16-byte aligned, unit stride.
        if tensor.stride(1) != 1 or (tensor.stride(0) * tensor.element_size()) % 16 or tensor.data_ptr() % 16:
            raise ValueError(f"{name} {tuple(tensor.shape)} with strides {tensor.stride()}: TMA needs "
                             "row-major rows starting at 16-byte aligned addresses")
    a_desc, b_desc, c_desc, low_desc, c_low_desc = descriptors(a, b, c, meta)
    low = meta.get("BLOCK_M_LOW", 0)
    tiles = triton.cdiv(M, meta["BLOCK_M"] + low) * triton.cdiv(N, meta["BLOCK_N"])
    grid = min(programs or persistent_gemm.num_sms(a.device), tiles)
    ws_matmul_kernel[(grid, )](a_desc, b_desc, c_desc, low_desc, c_low_desc, M, N, K, meta["GROUP_M"],
                               meta["num_stages"], low, num_warps=meta["num_warps"], maxnreg=maxnreg(meta))
    return c
