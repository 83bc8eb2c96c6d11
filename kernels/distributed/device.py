"""Device functions of the symmetric heap: ``tl.*`` with a peer rank.

Each function takes a ``pointer`` into the *calling* rank's heap (a tensor carved from
``Heap``) and acts on the same position in ``peer``'s heap, found by ``translate``: the address
minus the caller's heap base plus the peer's, the bases read from ``heap_bases`` (int64
[world_size], ``Heap.heap_bases``). ``peer == rank`` is the local heap. Keywords mirror
``tl.load`` / ``tl.store`` / ``tl.atomic_*`` (``mask``, ``other``, ``sem``, ``scope``): with
``scope="sys"`` an atomic is ordered for every GPU of the node, which is what a flag read by a
peer over NVLink needs.

A pointer that is not in the caller's heap translates to an address outside the peer's heap:
the access is undefined (an illegal-address fault on a GPU). Host code keeps every tensor that
device functions touch in the heap (``Heap.empty`` and friends).

Spin-waits (``wait``) are bounded: after ``max_spins`` polls they give up, write an error
record (``Heap.errors``) naming the flag and the peer expected to set it, and return; the host
raises it as ``SpinTimeout`` (``Heap.check``). No launch waits forever on a dead peer.
"""
from __future__ import annotations

import triton
import triton.language as tl

from swizzleperf.kernels.schedule.persistent_gemm import INLINE_PTX

#: Error record codes written by ``wait`` (word 0 of ``Heap.errors``).
SPIN_TIMEOUT = tl.constexpr(1)


@triton.jit
def translate(pointer, rank, peer, heap_bases):
    """``pointer`` (any shape, into rank ``rank``'s heap) as an address in ``peer``'s heap.

    The shift is added to the pointer as a whole number of elements, hinted a multiple of 16
    (heap bases are 1024-byte aligned, checked by ``Heap``), so the compiler keeps the
    pointer's contiguity and alignment and vectorises the access: with a byte-wise integer
    round trip instead, every remote store of a bf16 tile became a 2-byte store (seen in
    the PTX for sm_90, 2026-11-22) and the all-scatter ran 7x slower.
    """
    from_base = tl.load(heap_bases + rank)
    to_base = tl.load(heap_bases + peer)
    delta = (to_base - from_base) // (pointer.dtype.element_ty.primitive_bitwidth // 8)
    return pointer + tl.multiple_of(delta, 16)


@triton.jit
def load(pointer, rank, peer, heap_bases, mask=tl.constexpr(None), other=tl.constexpr(None),
         cache_modifier: tl.constexpr = tl.constexpr(""), volatile: tl.constexpr = tl.constexpr(False)):
    """``tl.load`` of ``pointer``'s position in ``peer``'s heap."""
    return tl.load(translate(pointer, rank, peer, heap_bases), mask=mask, other=other,
                   cache_modifier=cache_modifier, volatile=volatile)


@triton.jit
def store(pointer, value, rank, peer, heap_bases, mask=tl.constexpr(None), cache_modifier: tl.constexpr = tl.constexpr("")):
    """``tl.store`` of ``value`` at ``pointer``'s position in ``peer``'s heap."""
    tl.store(translate(pointer, rank, peer, heap_bases), value, mask=mask,
             cache_modifier=cache_modifier)


@triton.jit
def get(src_pointer, dst_pointer, rank, peer, heap_bases, mask=tl.constexpr(None)):
    """Copy ``peer``'s values at ``src_pointer``'s position to the local ``dst_pointer``."""
    values = tl.load(translate(src_pointer, rank, peer, heap_bases), mask=mask)
    tl.store(dst_pointer, values, mask=mask)


@triton.jit
def put(src_pointer, dst_pointer, rank, peer, heap_bases, mask=tl.constexpr(None)):
    """Copy the local values at ``src_pointer`` to ``dst_pointer``'s position in ``peer``'s heap."""
    values = tl.load(src_pointer, mask=mask)
    tl.store(translate(dst_pointer, rank, peer, heap_bases), values, mask=mask)


@triton.jit
def atomic_add(pointer, value, rank, peer, heap_bases, mask=tl.constexpr(None),
               sem: tl.constexpr = tl.constexpr(None), scope: tl.constexpr = tl.constexpr(None)):
    """``tl.atomic_add`` at ``pointer``'s position in ``peer``'s heap; returns the old value."""
    return tl.atomic_add(translate(pointer, rank, peer, heap_bases), value, mask=mask,
                         sem=sem, scope=scope)


@triton.jit
def atomic_cas(pointer, compare, value, rank, peer, heap_bases,
               sem: tl.constexpr = tl.constexpr(None), scope: tl.constexpr = tl.constexpr(None)):
    """``tl.atomic_cas`` at ``pointer``'s position in ``peer``'s heap; returns the old value."""
    return tl.atomic_cas(translate(pointer, rank, peer, heap_bases), compare, value,
                         sem=sem, scope=scope)


@triton.jit
def atomic_xchg(pointer, value, rank, peer, heap_bases, mask=tl.constexpr(None),
                sem: tl.constexpr = tl.constexpr(None), scope: tl.constexpr = tl.constexpr(None)):
    """``tl.atomic_xchg`` at ``pointer``'s position in ``peer``'s heap; returns the old value."""
    return tl.atomic_xchg(translate(pointer, rank, peer, heap_bases), value, mask=mask,
                          sem=sem, scope=scope)


@triton.jit
def atomic_min(pointer, value, rank, peer, heap_bases, mask=tl.constexpr(None),
               sem: tl.constexpr = tl.constexpr(None), scope: tl.constexpr = tl.constexpr(None)):
    """``tl.atomic_min`` at ``pointer``'s position in ``peer``'s heap; returns the old value."""
    return tl.atomic_min(translate(pointer, rank, peer, heap_bases), value, mask=mask,
                         sem=sem, scope=scope)


@triton.jit
def atomic_max(pointer, value, rank, peer, heap_bases, mask=tl.constexpr(None),
               sem: tl.constexpr = tl.constexpr(None), scope: tl.constexpr = tl.constexpr(None)):
    """``tl.atomic_max`` at ``pointer``'s position in ``peer``'s heap; returns the old value."""
    return tl.atomic_max(translate(pointer, rank, peer, heap_bases), value, mask=mask,
                         sem=sem, scope=scope)


@triton.jit
def signal(flag_pointer, value, rank, peer, heap_bases, scope: tl.constexpr = tl.constexpr("sys")):
    """Set ``peer``'s copy of the int32 flag to ``value`` with release semantics: every store
    this program made before it (all its threads: a CTA barrier comes first) is visible to
    whoever acquires the flag."""
    tl.debug_barrier()
    tl.atomic_xchg(translate(flag_pointer, rank, peer, heap_bases), value, sem="release",
                   scope=scope)


@triton.jit
def wait(flag_pointer, expected, errors, kind, index, peer, max_spins,
         scope: tl.constexpr = tl.constexpr("sys")):
    """Spin until the local int32 flag at ``flag_pointer`` holds at least ``expected`` (acquire).

    Gives up after ``max_spins`` polls: the first give-up of the launch writes ``[SPIN_TIMEOUT,
    kind, index, peer, observed]`` to ``errors`` (``Heap.errors``; ``kind`` and ``index`` name the
    flag, ``peer`` the rank that should have set it). Once a wait of the rank has given up,
    later waits give up at once (within 1024 polls), so a kernel with many flags on a dead
    peer still ends after about one bound. Returns the last value read.
    """
    value = tl.atomic_add(flag_pointer, 0, sem="acquire", scope=scope)
    if value < expected:   # a flag already set costs one load, not two
        # a wait of this rank gave up already (a dead peer): don't spend another bound here
        gave_up = tl.load(errors, volatile=True)
        spins = 0
        while (value < expected) & (spins < max_spins) & (gave_up == 0):
            value = tl.atomic_add(flag_pointer, 0, sem="acquire", scope=scope)
            spins += 1
            if spins % 1024 == 0:
                gave_up = tl.load(errors, volatile=True)
        if value < expected:
            if tl.atomic_cas(errors, 0, SPIN_TIMEOUT) == 0:
                tl.store(errors + 1, kind)
                tl.store(errors + 2, index)
                tl.store(errors + 3, peer)
                tl.store(errors + 4, value)
    tl.debug_barrier()  # every thread of the program reads after the acquire
    return value


if INLINE_PTX:
    @triton.jit
    def fence_async_reads():
        """Order this thread's earlier generic-proxy accesses, an acquire of a flag among them,
        before its later async-proxy ones (PTX ``fence.proxy.async.global``, sm_90): a tensor
        descriptor (TMA) load after ``wait`` then sees what the flag's release published. The
        PTX memory model orders the two proxies only through such a fence."""
        tl.inline_asm_elementwise("fence.proxy.async.global;\n\tmov.u32 $0, 0;", "=r", [],
                                  dtype=tl.int32, is_pure=False, pack=1)

    @triton.jit
    def bulk_stores_done():
        """Wait until this thread's bulk (TMA) stores have completed, their writes performed
        (PTX ``cp.async.bulk.wait_group 0``, not the ``.read`` form that only frees the shared
        memory), then order them before its later generic-proxy accesses (``fence.proxy.async
        .global``): a ``signal`` after it publishes what the stores wrote."""
        tl.inline_asm_elementwise("cp.async.bulk.wait_group 0;\n\tfence.proxy.async.global;\n\tmov.u32 $0, 0;",
                                  "=r", [], dtype=tl.int32, is_pure=False, pack=1)
else:
    @triton.jit
    def fence_async_reads():
        """Nothing: the interpreter has no proxies, and ROCm's loads are all one kind."""
        pass

    @triton.jit
    def bulk_stores_done():
        """Nothing: no bulk stores without inline PTX (the interpreter, ROCm)."""
        pass


@triton.jit(do_not_specialize=["epoch"])
def _barrier_kernel(signals, errors, heap_bases, rank, epoch, max_spins,
                    WORLD_SIZE: tl.constexpr, SIGNAL: tl.constexpr, WAIT: tl.constexpr):
    """Set this rank's entry of every peer's barrier signals to ``epoch``, then wait for every
    peer's entry of ours to reach it (kind 0 = "barrier" in the error record)."""
    if SIGNAL:
        for peer in tl.static_range(WORLD_SIZE):
            signal(signals + rank, epoch, rank, peer, heap_bases)
    if WAIT:
        for peer in tl.static_range(WORLD_SIZE):
            wait(signals + peer, epoch, errors, 0, peer, peer, max_spins)


def launch_barrier(heap, epoch: int, signal: bool, wait: bool) -> None:
    """Launch the barrier kernel on ``heap``'s device and current stream (asynchronous)."""
    _barrier_kernel[(1,)](heap.signals, heap.errors, heap.heap_bases, heap.rank, epoch,
                          heap.max_spins, WORLD_SIZE=heap.world_size, SIGNAL=signal, WAIT=wait,
                          num_warps=1)
