"""
The Hopper GEMM schedule under every GEMM of the project: persistent, TMA, stream-K
===================================================================================

Why
---
The bundled GEMM (``kernels/gemm.py``) and the per-rank GEMM inside every distributed kernel
(``kernels/distributed/``) are ``C [M, N] = A [M, K] @ B [K, N]`` in bf16 / fp16 with fp32
accumulation. Written as one program per tile with pointer loads, that GEMM ran at 0.75-0.95x
of cuBLAS on an H100 at the distributed kernels' per-rank shapes (shared/HARDWARE.md,
2026-11-25), and an overlap kernel cannot beat torch + NCCL while its GEMM is slower than
cuBLAS. This module holds the three levers, as device functions that each kernel calls from
its own loop (each kernel keeps its own ``swizzle``, the optimizer's rewrite target):

1. **Tensor descriptors (TMA).** A and B tiles come in through the bulk tensor copy engine
   (``desc.load``) and, where the whole tile is the kernel's to write, C goes out the same way
   (``desc.store``). The descriptors are built on the host
   (``triton.tools.tensor_descriptor.TensorDescriptor``, triton >= 3.4; 3.6 on the GPU
   machines, 3.9 here): no ``triton.set_allocator`` is needed, as it is for descriptors made
   on the device. Out-of-bounds rows and columns load as zeros and are not stored, so ragged
   edges need no masks. Where TMA cannot be used (strides not multiples of 16 bytes, a
   pre-Hopper GPU, A read from a peer's heap) the same loop runs on pointers (``USE_TMA``
   False), rows and columns past the edge wrapped modulo M / N and masked at the store.
2. **A persistent tile loop.** ``P`` programs (the SMs given to compute: all of them, or
   ``NUM_SMS - COMM_SMS`` beside a communication kernel) walk the tile indices ``pid, pid + P,
   ...``; each index goes through ``swizzle`` once per tile, so the set of tiles computed is
   exactly the swizzle's image of ``0 .. num_tiles - 1`` (the optimizer's permutation check),
   and the tiles running at once are still indices ``w * P .. (w + 1) * P`` of wave ``w``.
   ``FLATTEN`` lets the compiler pipeline the next tile's first loads behind this tile's
   epilogue (``tl.range(..., flatten=True)``, Triton's persistent-matmul tutorial).
3. **Stream-K for the last waves.** With ``T`` tiles on ``P`` programs the last wave holds
   ``T mod P`` tiles and the other programs idle: 160 tiles of 128 x 256 on 132 SMs (M = 4096,
   N = 1280) keep 28 SMs busy in the second wave, and data-parallel ran at 0.76x of cuBLAS
   there. ``STREAM_K = s`` gives the last ``s - 1`` full waves plus the partial one to
   stream-K: their ``tiles x k_iters`` K steps are cut into ``P`` equal contiguous ranges, one
   per program; a program that ends inside a tile hands its fp32 partial accumulator over
   (``workspace`` slot ``pid``, then ``flags[pid] = 1``, release), and the program that
   computes the tile's last K step adds the partials of the lower programs that share the
   tile (acquire) and writes the tile. Each program walks its range backwards, so its
   hand-over partial is the first thing it computes and the partials it must add are the last:
   the waits are short. A program waits only on lower program ids, which start before it (in
   order, shared/HARDWARE.md), so a grid larger than the GPU or the interpreter's one program
   at a time never deadlocks. The finisher resets the flags it consumed, so the flags are
   zero again after every launch. ``STREAM_K = 3`` gives *every* tile to stream-K and launches
   all ``P`` programs even where there are fewer tiles than programs (the data-parallel
   schedules launch one program per tile at most): 64 tiles of 128 x 256 at M = 4096, N = 512
   keep 64 of 132 SMs busy data-parallel, while stream-K cuts their 64 x 64 K steps into 132
   ranges of 31 steps.

4. **A tail of narrower tiles** (``TAIL_BLOCK_N``, kernels/gemm.py only). Instead of
   splitting the last partial wave's K steps, the bottom rows of tiles are cut into tiles of
   ``BLOCK_M x TAIL_BLOCK_N`` (half as wide), each computed whole by one program, no hand-over:
   at M = 4096, N = 2560 (320 tiles of 128 x 256 on 132 SMs, 2.4 waves) 26 rows of 128 x 256
   tiles fill two waves less 4 tiles and the 6 rows left make 120 tiles of 128 x 128, so no
   program has more than 2.5 tiles' work. ``tail_rows`` chooses how many rows of tiles go to
   the tail. Measured (bench/results/wide_tile/, 2026-11-26, against cuBLAS, the tuned schedule
   without a tail in the same rounds): 0.956x against 0.929x there and 1.032x against 0.988x at
   4096 x 3584 x 4096 on an H100, 0.970x against 0.955x and 1.044x against 1.012x on an H200;
   slower where the tail is short (4096 x 1280 x 8192: 0.800x against 0.866x on the H100) or the
   rows are few (1024 x 14336 x 8192: 0.929x against 1.012x), so the tuner keeps it only where it
   wins. Excludes STREAM_K. The distributed kernels' loops have no tail.

The configuration (tiles, warps, stages, ``STREAM_K``) is chosen per shape by measurement:
``kernels/schedule/gemm_tuning.py``.

Numbers this module builds on: an H100 runs 132 SMs; one program of 128 x 256 x 64 tiles with
3 stages holds 3 * (128 * 64 + 64 * 256) * 2 B = 144 KiB of operands plus a 64 KiB epilogue
tile in shared memory (228 KiB per SM, 227 KiB per program: CUDA C++ Programming Guide, compute
capability 9.0), so one program per SM.
"""
from __future__ import annotations

import functools
import os

import torch
import triton
import triton.language as tl

#: The schedule's launch knobs every configuration gives. Optional: EPILOGUE_SUBTILE (C stored
#: in two halves, ``store_tile``), WARP_SPECIALIZE (``tl.range``'s option for the persistent
#: loop, where it has an effect: ``warp_specialize_effective``) and TAIL_BLOCK_N (kernels/gemm.py:
#: ``tail_rows``), 0 when absent; FLATTEN (``tl.range``'s other option), the kernel's default
#: when absent.
SCHEDULE_KNOBS = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "num_warps", "num_stages", "STREAM_K")
#: Whether device code may use inline PTX (``stream_k_fixup``'s hand-over, the distributed kernels'
#: proxy fence): not under the Triton interpreter, which cannot run it, nor on ROCm.
INLINE_PTX = os.environ.get("TRITON_INTERPRET") != "1" and torch.version.hip is None

#: Values of STREAM_K: 0 data-parallel (every tile whole, in waves of P); 1 the partial last
#: wave stream-K; 2 the partial wave and one full wave before it stream-K; 3 every tile
#: stream-K, on all P programs even where there are fewer tiles (``schedule_grid``).
STREAM_K_VALUES = (0, 1, 2, 3)
#: The STREAM_K value that gives every tile to stream-K.
ALL_STREAM_K = 3


# ------------------------------------------------------------------------------ device functions
@triton.jit
def mainloop(a, b, row, col, k_lo, k_hi, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
             accumulator, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
             USE_TMA: tl.constexpr, DOT_IN_FP32: tl.constexpr):
    """``accumulator + A[row : row + BLOCK_M, k_lo*BK : k_hi*BK] @ B[k_lo*BK : k_hi*BK, col :
    col + BLOCK_N]`` in fp32, [BLOCK_M, BLOCK_N].

    With ``USE_TMA``, ``a`` and ``b`` are tensor descriptors of A [M, K] (block [BLOCK_M,
    BLOCK_K]) and B [K, N] (block [BLOCK_K, BLOCK_N]); out-of-bounds elements load as zero.
    Without, they are pointers to A [M, K] and B [K, N] with the given strides; rows past M and
    columns past N wrap modulo M / N (in bounds; the caller masks them at the store) and the K
    edge is masked. ``row`` / ``col`` are element offsets. ``DOT_IN_FP32`` (the interpreter's
    bf16, see ``dot_in_fp32``) upcasts the tiles before ``tl.dot``.
    """
    if USE_TMA:
        for k in range(k_lo, k_hi):
            a_tile = a.load([row, k * BLOCK_K])
            b_tile = b.load([k * BLOCK_K, col])
            if DOT_IN_FP32:
                a_tile = a_tile.to(tl.float32)
                b_tile = b_tile.to(tl.float32)
            accumulator = tl.dot(a_tile, b_tile, accumulator)
    else:
        offs_am = (row + tl.arange(0, BLOCK_M)) % M
        offs_bn = (col + tl.arange(0, BLOCK_N)) % N
        offs_k = tl.arange(0, BLOCK_K)
        a_ptrs = a + offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak  # [BLOCK_M, BLOCK_K]
        b_ptrs = b + offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn  # [BLOCK_K, BLOCK_N]
        for k in range(k_lo, k_hi):
            a_tile = tl.load(a_ptrs + k * BLOCK_K * stride_ak,
                             mask=offs_k[None, :] < K - k * BLOCK_K, other=0.0)
            b_tile = tl.load(b_ptrs + k * BLOCK_K * stride_bk,
                             mask=offs_k[:, None] < K - k * BLOCK_K, other=0.0)
            if DOT_IN_FP32:
                a_tile = a_tile.to(tl.float32)
                b_tile = b_tile.to(tl.float32)
            accumulator = tl.dot(a_tile, b_tile, accumulator)
    return accumulator


@triton.jit
def column_halves(tile, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """``(tile[:, :BLOCK_N / 2], tile[:, BLOCK_N / 2:])`` of a [BLOCK_M, BLOCK_N] tile, each
    element staying in the thread that holds it (reshape, permute, split)."""
    return tl.split(tl.permute(tl.reshape(tile, (BLOCK_M, 2, BLOCK_N // 2)), (0, 2, 1)))


@triton.jit
def store_tile(c, accumulator, row, col, M, N, stride_cm, stride_cn,
               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, USE_TMA: tl.constexpr,
               SUBTILE: tl.constexpr = 0):
    """Round ``accumulator`` [BLOCK_M, BLOCK_N] to C's dtype and write it at ``C[row :, col :]``
    of C [M, N], clipped to C: through the descriptor ``c`` with ``USE_TMA`` (block [BLOCK_M,
    BLOCK_N], or [BLOCK_M, BLOCK_N / 2] in two stores with ``SUBTILE``, which halves the
    epilogue's shared memory: Triton's persistent-matmul tutorial), else through the pointer
    ``c`` with masks."""
    if USE_TMA:
        if SUBTILE:
            left, right = column_halves(accumulator, BLOCK_M, BLOCK_N)
            c.store([row, col], left.to(c.dtype))
            c.store([row, col + BLOCK_N // 2], right.to(c.dtype))
        else:
            c.store([row, col], accumulator.to(c.dtype))
    else:
        offs_cm = row + tl.arange(0, BLOCK_M)
        offs_cn = col + tl.arange(0, BLOCK_N)
        mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
        tl.store(c + offs_cm[:, None] * stride_cm + offs_cn[None, :] * stride_cn,
                 accumulator.to(c.dtype.element_ty), mask=mask)


@triton.jit
def data_parallel_tiles(num_tiles, num_programs, STREAM_K: tl.constexpr):
    """The tiles computed whole, in waves of ``num_programs`` (the first ones in tile order);
    the rest are stream-K. The device twin of ``split_tiles`` (its docstring says how STREAM_K
    splits)."""
    num_dp_tiles = num_tiles
    if STREAM_K == 3:   # ALL_STREAM_K
        num_dp_tiles = 0
    elif STREAM_K > 0:
        tail = num_tiles % num_programs
        if tail > 0:
            num_dp_tiles = num_tiles - tail
            if STREAM_K == 2:
                if num_dp_tiles >= num_programs:
                    num_dp_tiles -= num_programs
    return num_dp_tiles


@triton.jit
def stream_k_range(pid, num_programs, units):
    """``(first, stop)``: the stream-K K steps ``[first, stop)`` of program ``pid`` out of
    ``units`` (stream-K tiles x K steps per tile), cut into ``min(num_programs, units)`` equal
    contiguous ranges (programs past that get none), each at least one step long; empty for
    every program when ``units`` is 0."""
    workers = tl.maximum(tl.minimum(num_programs, units), 1)
    first = tl.minimum(pid, workers) * units // workers
    stop = tl.minimum(pid + 1, workers) * units // workers
    return first, stop


@triton.jit
def stream_k_segment(stop, first, k_iters):
    """The last piece ``[start, stop)`` of a range ``[first, stop)`` of stream-K steps that lies
    in one tile: ``(tile, start, k_lo, k_hi)``, ``tile`` counted from the first stream-K tile,
    ``k_lo .. k_hi`` the tile's K steps it covers."""
    tile = (stop - 1) // k_iters
    start = tl.maximum(first, tile * k_iters)
    return tile, start, start - tile * k_iters, stop - tile * k_iters


@triton.jit
def slot_offsets(BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """Where each element of a [BLOCK_M, BLOCK_N] tile goes in its stream-K workspace slot: int32
    offsets [BLOCK_M, BLOCK_N], a bijection onto ``0 .. BLOCK_M * BLOCK_N - 1`` (BLOCK_M a
    multiple of 16, BLOCK_N of 8).

    The order is the MMA accumulator's (Hopper's wgmma and Ampere's mma alike, PTX ISA
    "Matrix Fragments"): each warp holds 16 rows, and lane ``4 g + t`` holds columns ``8 j + 2 t``
    and ``8 j + 2 t + 1`` of rows ``g`` and ``g + 8`` for every ``j``. Element (row, col) goes to
    ``(register * BLOCK_M / 16 + row // 16) * 32 + lane``, so the 32 lanes of a warp write or
    read one register's elements at 32 consecutive floats. The hand-over only needs the producer
    and the consumer to agree, so any bijection is correct; this one makes the accesses whole
    128-byte lines where the accumulator is laid out as assumed. (``tl.dot`` needs tiles of 16
    or more a side, powers of two, so every GEMM tile qualifies.)"""
    tl.static_assert(BLOCK_M % 16 == 0 and BLOCK_N % 8 == 0,
                     "slot_offsets needs BLOCK_M a multiple of 16 and BLOCK_N of 8")
    row = tl.arange(0, BLOCK_M)[:, None]
    col = tl.arange(0, BLOCK_N)[None, :]
    lane = (row % 8) * 4 + (col % 8) // 2
    register = (col // 8) * 4 + ((row % 16) // 8) * 2 + col % 2
    return (register * (BLOCK_M // 16) + row // 16) * 32 + lane


if INLINE_PTX:
    @triton.jit
    def _slot_store(pointers, values):
        """``*pointers = values`` element by element, in the values' own register layout (PTX
        ``st.global.f32``): ``tl.store`` would first move a whole accumulator through shared
        memory into a layout of its choosing."""
        # addresses as int64: triton 3.6 refuses a pointer beside a float among the operands
        tl.inline_asm_elementwise("st.global.f32 [$1], $2;\n\tmov.u32 $0, 0;", "=r,l,f",
                                  [pointers.to(tl.int64, bitcast=True), values], dtype=tl.int32,
                                  is_pure=False, pack=1)

    @triton.jit
    def _slot_load(pointers):
        """``*pointers``, fp32, in the layout the caller's use gives it (PTX ``ld.global.f32``)."""
        return tl.inline_asm_elementwise("ld.global.f32 $0, [$1];", "=f,l",
                                         [pointers.to(tl.int64, bitcast=True)],
                                         dtype=tl.float32, is_pure=False, pack=1)
else:
    @triton.jit
    def _slot_store(pointers, values):
        """``*pointers = values`` (the interpreter and non-NVIDIA GPUs: no inline PTX)."""
        tl.store(pointers, values)

    @triton.jit
    def _slot_load(pointers):
        """``*pointers``."""
        return tl.load(pointers)


@triton.jit
def stream_k_owner(step, num_programs, units):
    """The program whose stream-K range (``stream_k_range``) holds K step ``step`` of ``units``
    (``units`` > 0)."""
    workers = tl.minimum(num_programs, units)
    return ((step + 1) * workers - 1) // units


@triton.jit
def wait_for_flag(flag):
    """Spin until ``*flag`` is non-zero (acquire, GPU scope): a hand-over flag, which the lower
    program that sets it always reaches (no bound needed)."""
    ready = tl.atomic_add(flag, 0, sem="acquire", scope="gpu")
    while ready == 0:
        ready = tl.atomic_add(flag, 0, sem="acquire", scope="gpu")


@triton.jit
def stream_k_fixup(accumulator, workspace, flags, pid, num_programs, units, tile, start, k_hi,
                   k_iters, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """Join the pieces of a stream-K tile; returns the accumulator.

    A piece that stops before the tile's last K step (``k_hi < k_iters``) is handed over: the
    accumulator goes to ``workspace`` slot ``pid`` (fp32 [num_programs, BLOCK_M * BLOCK_N], in
    ``slot_offsets``' order), then ``flags[pid] = 1`` (release, after a CTA barrier). The piece
    with the last K step adds the slots of the lower programs whose ranges cover the tile's
    earlier steps, each after its flag (acquire), and clears those flags; the caller writes the
    tile when ``k_hi == k_iters``. Each program hands over at most one piece (its range's last),
    so one slot per program suffices.

    Measured on an H200 (bench/results/stream_k_cost/, 2026-11-26): with the slot
    row-major through ``tl.store`` / ``tl.load``, the hand-over took 11.5 us of a 44 us launch at
    4096 x 512 x 4096 and of a 129 us launch at 4096 x 1280 x 8192 (128 x 256 tiles, every tile
    stream-K), against the same launches with it left out; in ``slot_offsets``' order through
    inline PTX it takes 8.2 and 8.7 us there (H100: 8.1 and 10.6). At 4096 x 1280 x 8192 the
    stores alone with the flag cost 4.4 us and the flags and the wait alone 1.0; ncu saw the
    hand-over add 54 MB of DRAM traffic and drop the L2 hit rate from 78.6 to 71.2 %. Tried and
    not kept: the flag set one piece later (0.2-0.9 us), the moves in column quarters (0-2 us),
    an L2 evict_last hint on the stores with the read slots discarded (mixed, within 1 us but at
    one shape).
    """
    offsets = slot_offsets(BLOCK_M, BLOCK_N)
    if k_hi < k_iters:
        _slot_store(workspace + pid * (BLOCK_M * BLOCK_N) + offsets, accumulator)
        tl.debug_barrier()
        tl.atomic_xchg(flags + pid, 1, sem="release", scope="gpu")
    else:
        tile_first = tile * k_iters
        if start > tile_first:
            for p in range(stream_k_owner(tile_first, num_programs, units), pid):
                wait_for_flag(flags + p)
                tl.debug_barrier()
                accumulator += _slot_load(workspace + p * (BLOCK_M * BLOCK_N) + offsets)
                tl.atomic_xchg(flags + p, 0, sem="relaxed", scope="gpu")
    return accumulator


# ------------------------------------------------------------------------------------ host side
def dot_in_fp32(dtype: torch.dtype) -> bool:
    """True under the Triton interpreter with bf16 inputs, where ``tl.dot`` of bf16 tiles returns
    garbage (triton 3.9, CPU, errors of 1e10 seen 2026-11-22): the tiles are upcast first.
    Compiled kernels never take this branch."""
    return os.environ.get("TRITON_INTERPRET") == "1" and dtype == torch.bfloat16


@functools.lru_cache(maxsize=None)
def num_sms(device: torch.device | str | None = None) -> int:
    """Streaming multiprocessors of the CUDA device (the driver's count); 4 without CUDA, where
    the interpreter runs persistent grids of that many programs."""
    if not torch.cuda.is_available() or torch.device(device or "cuda").type != "cuda":
        return 4
    return torch.cuda.get_device_properties(device or torch.cuda.current_device()).multi_processor_count


@functools.lru_cache(maxsize=None)
def _capability(index: int) -> tuple:
    return torch.cuda.get_device_capability(index)


def warp_specialize_effective() -> bool:
    """Whether ``tl.range(..., warp_specialize=True)`` changes the compiled kernel on the current
    device: on a CUDA GPU of compute capability 10 or more (Blackwell), not on Hopper, ROCm, or
    under the interpreter.

    Compiled here on 2026-11-26 (bench/results/wide_tile/README.md): under triton 3.6 and 3.9 the
    option gives byte-identical PTX for sm_90, both for kernels/gemm.py's persistent loop and for
    a minimal TMA matmul loop, and a 12-warp kernel with ``setmaxnreg`` (a producer warp group)
    for sm_100. On Hopper a configuration with it is the same kernel as one without, so timing
    both only measures noise."""
    if os.environ.get("TRITON_INTERPRET") == "1" or torch.version.hip is not None:
        return False
    return torch.cuda.is_available() and _capability(torch.cuda.current_device())[0] >= 10


def tma_aligned(*tensors: torch.Tensor) -> bool:
    """Whether each of these tensors is 2-D with a unit inner stride and a 16-byte aligned base
    and outer stride (the tensor-map rules of cuTensorMapEncodeTiled, CUDA Driver API)."""
    return all(t.dim() == 2 and t.stride(1) == 1 and t.data_ptr() % 16 == 0
               and (t.stride(0) * t.element_size()) % 16 == 0 for t in tensors)


def tma_supported(*tensors: torch.Tensor) -> bool:
    """Whether tensor descriptors can carry these 2-D tensors: under the interpreter (triton
    3.9's runs them), or on a CUDA GPU of compute capability >= 9.0 (the bulk tensor copy
    engine). Each needs a unit inner stride, a 16-byte aligned base and outer stride (the
    tensor-map rules of cuTensorMapEncodeTiled, CUDA Driver API)."""
    if not tma_aligned(*tensors):
        return False
    if os.environ.get("TRITON_INTERPRET") == "1":
        return True
    device = tensors[0].device
    return device.type == "cuda" and _capability(device.index or 0)[0] >= 9


def descriptor(tensor: torch.Tensor, block_shape: list):
    """A host-side tensor descriptor of a 2-D tensor with the given block shape."""
    from triton.tools.tensor_descriptor import TensorDescriptor
    return TensorDescriptor.from_tensor(tensor, list(block_shape))


def operands(tensor: torch.Tensor, block_shape: list, use_tma: bool):
    """What the kernels take for an operand: its descriptor with ``use_tma``, else the tensor."""
    return descriptor(tensor, block_shape) if use_tma else tensor


def cdiv(a: int, b: int) -> int:
    """``ceil(a / b)`` of two host integers. Host code calls this, not ``triton.cdiv``, which goes
    through Triton's constexpr-function wrapper: profiled on two H100s' host (2026-11-26,
    bench/results/host_profile_h100x2/), 16 such calls took ~80 us of the ~0.6 ms it took to
    queue one launch of GEMM + RS push_copy_engine."""
    return -(-a // b)


def split_tiles(num_tiles: int, programs: int, stream_k: int) -> int:
    """Tiles computed data-parallel (the first ones in tile order); the rest are stream-K.

    ``stream_k`` 0: all; 1: all but the partial last wave (``num_tiles mod programs`` tiles;
    none when the waves are full); 2: also one full wave before it, where there is one; 3:
    none. Raises ValueError for another ``stream_k`` or programs < 1.
    """
    _check_stream_k(stream_k)
    if programs < 1:
        raise ValueError(f"programs must be >= 1, got {programs}")
    if stream_k == ALL_STREAM_K:
        return 0
    tail = num_tiles % programs
    if stream_k == 0 or tail == 0:
        return num_tiles
    if stream_k == 2 and num_tiles >= programs + tail:
        tail += programs
    return num_tiles - tail


def _check_stream_k(stream_k: int) -> None:
    if stream_k not in STREAM_K_VALUES:
        raise ValueError(f"STREAM_K must be one of {STREAM_K_VALUES}, got {stream_k}")


def schedule_grid(num_tiles: int, programs: int, stream_k: int) -> int:
    """Programs to launch for ``num_tiles`` tiles on ``programs`` SMs: one per tile at most
    (a program without a tile would idle), except with ``stream_k`` 3, where every program takes
    a share of the K steps (``STREAM_K_VALUES``). At least 1. Raises ValueError for another
    ``stream_k``."""
    _check_stream_k(stream_k)
    if stream_k == ALL_STREAM_K:
        return max(1, programs)
    return max(1, min(programs, num_tiles))


#: A tail tile's throughput against a whole tile's, for ``tail_rows``' count of when a launch
#: ends: 128 x 128 tiles beside 128 x 256 ones on one H100 (bench/results/wide_tile/, 2026-11-26:
#: 4096 x 2560 x 8192 took 0.2289 ms where 2.5 tile times of the 128 x 256 tiles, 0.0874 ms each
#: at 4096 x 5120 x 8192, would take 0.2186: the 120 tail tiles ran at 0.81 of the whole tiles'
#: rate). An estimate from one shape, used only to choose the split; the tuner measures.
TAIL_EFFICIENCY = 0.8


@functools.lru_cache(maxsize=4096)
def tail_rows(num_pid_m: int, num_pid_n: int, tail_pid_n: int, programs: int,
              width: float) -> int:
    """Rows of tiles to give to the tail (``TAIL_BLOCK_N``), at the bottom of the tile grid: the
    number that ends the launch soonest, 0 where no tail ends it sooner than data-parallel.

    ``num_pid_m x num_pid_n`` tiles of BLOCK_M x BLOCK_N; a tail row holds ``tail_pid_n`` tiles,
    each ``width`` (TAIL_BLOCK_N / BLOCK_N) of a whole tile's work, done at ``TAIL_EFFICIENCY``
    of the whole tiles' rate. The whole tiles go round-robin
    (program ``p`` takes tiles ``p, p + programs, ...``) and the tail tiles from the last program
    down (tail tile ``j`` to program ``programs - 1 - j mod programs``), so the programs short of
    a whole tile take tail tiles first. The end of the launch is counted as the busiest program's
    time in whole-tile units; a tie goes to fewer tail rows (the wider tiles run faster).
    Cached: every launch asks, and the count takes milliseconds of Python for thousands of tiles
    (a first GPU run timed those milliseconds into the launches)."""
    def finish(rows: int) -> float:
        whole, tail = (num_pid_m - rows) * num_pid_n, rows * tail_pid_n
        busiest = 0.0
        for p in range(programs):
            mine = whole // programs + (p < whole % programs)
            q = programs - 1 - p
            busiest = max(busiest, mine + width / TAIL_EFFICIENCY * (tail // programs + (q < tail % programs)))
        return busiest
    best = min(range(num_pid_m + 1), key=lambda rows: (finish(rows), rows))
    return best if finish(best) < finish(0) else 0


def tail_split(M: int, N: int, block_m: int, block_n: int, tail_block_n: int, programs: int) -> int:
    """``tail_rows`` for an M x N output in BLOCK_M x BLOCK_N tiles with a tail ``tail_block_n``
    wide on ``programs`` programs; 0 without a tail (``tail_block_n`` 0)."""
    if not tail_block_n:
        return 0
    return tail_rows(cdiv(M, block_m), cdiv(N, block_n), cdiv(N, tail_block_n),
                     programs, tail_block_n / block_n)


_BUFFERS: dict = {}


def stream_k_buffers(device: torch.device, programs: int, block_m: int, block_n: int) -> tuple:
    """``(workspace, flags)`` for stream-K on ``device``: fp32 [programs, block_m * block_n] and
    int32 [programs] zeros, allocated once per device, current stream and size (the flags are
    zero again after every launch: ``stream_k_fixup``). Launches on one stream run one after
    another, so they share the buffers; another stream gets its own.
    """
    device = torch.device(device)
    stream = torch.cuda.current_stream(device).cuda_stream if device.type == "cuda" else 0
    key = (str(device), stream, programs, block_m * block_n)
    if key not in _BUFFERS:
        _BUFFERS[key] = (torch.empty(programs, block_m * block_n, dtype=torch.float32, device=device),
                         torch.zeros(programs, dtype=torch.int32, device=device))
    return _BUFFERS[key]


def shared_bytes(meta: dict, itemsize: int) -> int:
    """Shared memory one program of the schedule needs: the pipelined A and B tiles
    (``num_stages`` deep) and the C tile of the TMA epilogue (half of it with
    EPILOGUE_SUBTILE)."""
    operand = (meta["BLOCK_M"] * meta["BLOCK_K"] + meta["BLOCK_K"] * meta["BLOCK_N"]) * itemsize
    epilogue = meta["BLOCK_M"] * meta["BLOCK_N"] * itemsize // (2 if meta.get("EPILOGUE_SUBTILE") else 1)
    return operand * meta["num_stages"] + epilogue


#: Shared memory one program may use on sm_90: 227 KB (CUDA C++ Programming Guide, compute
#: capability 9.0, maximum shared memory per thread block).
SM90_SHARED_BYTES = 227 * 1024


def config_error(meta: dict, itemsize: int = 2) -> str | None:
    """Why a schedule configuration cannot run on sm_90, or None: known knobs, allowed
    STREAM_K and TAIL_BLOCK_N (not both), the tiles' shared memory (``shared_bytes``) within one
    program's 227 KB, and no WARP_SPECIALIZE where it compiles to the same kernel as without
    (``warp_specialize_effective``)."""
    missing = [k for k in SCHEDULE_KNOBS if k not in meta]
    if missing:
        return f"a GEMM configuration must give {list(SCHEDULE_KNOBS)}, missing {missing}"
    if meta["STREAM_K"] not in STREAM_K_VALUES:
        return f"STREAM_K must be one of {STREAM_K_VALUES}, got {meta['STREAM_K']}"
    shared = shared_bytes(meta, itemsize)
    if shared > SM90_SHARED_BYTES:
        return (f"the tiles' shared memory must fit {SM90_SHARED_BYTES} B per program, got {shared} B "
                f"(BLOCK_M={meta['BLOCK_M']}, BLOCK_N={meta['BLOCK_N']}, BLOCK_K={meta['BLOCK_K']}, "
                f"num_stages={meta['num_stages']})")
    tail = meta.get("TAIL_BLOCK_N", 0)
    if tail and (tail < 16 or tail & (tail - 1) or tail >= meta["BLOCK_N"]):
        return (f"TAIL_BLOCK_N must be 0 (no tail) or a power of two from 16 to less than BLOCK_N "
                f"({meta['BLOCK_N']}), got {tail}")
    if tail and meta["STREAM_K"]:
        return f"TAIL_BLOCK_N={tail} (a tail of narrower tiles) excludes STREAM_K={meta['STREAM_K']}"
    if meta.get("WARP_SPECIALIZE") and not warp_specialize_effective():
        return ("WARP_SPECIALIZE=1 compiles to the same kernel as WARP_SPECIALIZE=0 here (Triton "
                "warp-specializes this loop from compute capability 10, not on Hopper, ROCm or the "
                "interpreter): leave it out")
    return None
