"""The symmetric heap on the host: one buffer per rank, allocated in the same order everywhere.

"PyTorch APIs on the host, Triton APIs on the device" (the Iris design): every rank owns one
byte buffer of the same size (its *heap*); tensors are carved out of it by a bump allocator, so a
tensor allocated n-th lies at the same offset in every rank's heap. A device function reaches a
peer's copy of a tensor by translating the local address (``device.translate``): subtract the
own heap base, add the peer's base, both read from ``heap_bases`` (int64 [world_size], on the
device).

Two ways to build heaps:

- ``Heap.create(nbytes)`` after ``torch.distributed.init_process_group``: one heap per process on
  PyTorch symmetric memory (``torch.distributed._symmetric_memory``, CUDA backend, NVLink
  multicast off). Peers' buffers are mapped into every process, so a Triton kernel dereferences
  them directly over NVLink.
- ``Heap.group(world_size, nbytes, device="cpu")``: ``world_size`` heaps in one process, for the
  CPU tests through the Triton interpreter (the translated addresses are plain host addresses).

Each heap starts with a reserved control block: the barrier signals (int32 [world_size]) and
the error record (int32 [5]) that the spin-waits of ``device.wait`` fill when a flag never comes;
``Heap.check`` turns that record into a ``SpinTimeout`` naming the rank and the flag.
"""
from __future__ import annotations

import dataclasses
import math
import os
from typing import Sequence

import torch

from swizzleperf.kernels.distributed import device
from swizzleperf.kernels.schedule.persistent_gemm import cdiv

#: Allocation alignment in bytes: a multiple of every dtype's size and of a 128-byte L2 line.
ALIGN = 256
#: Default bound of a spin-wait, in polls. One poll of a flag in the local L2 with
#: acquire/sys semantics costs about 1 us on an H200 (order of magnitude; each poll is one
#: atomic round trip), so 2**24 polls bound a lost flag to tens of seconds, far above any
#: legitimate wait in the bundled kernels (the longest producer is one GEMM, < 100 ms).
DEFAULT_MAX_SPINS = 1 << 24
#: The environment that keeps NVLink multicast off (shared/HARDWARE.md: a program that uses
#: it can put the host's GPUs out of service); set before symmetric memory is first used.
NO_MULTICAST_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
                    "NVSHMEM_DISABLE_NVLS": "1"}

#: Alignment of every heap base in bytes (``device.translate`` relies on it: the shift between
#: two heaps is then a multiple of 16 elements of up to 8 bytes).
BASE_ALIGN = 1024
_ERROR_WORDS = 5  # [code, flag kind, flag index, peer, observed value]


class HeapError(RuntimeError):
    """A heap used wrongly: out of space, allocations that differ between ranks, a foreign tensor."""


class SpinTimeout(RuntimeError):
    """A spin-wait gave up: the flag it waited for was never set (a dead or stuck peer)."""


@dataclasses.dataclass(frozen=True)
class Allocation:
    """One tensor carved from the heap: its byte offset, shape, dtype and name."""

    name: str
    offset: int
    nbytes: int
    shape: tuple
    dtype: str


class Heap:
    """One rank's symmetric heap (see the module docstring).

    Attributes:
        rank, world_size: this heap's rank and the number of ranks.
        heap_bases: int64 [world_size] on the heap's device; entry p is rank p's heap base
            address as this process sees it (pass it to every device function).
        max_spins: the bound of every spin-wait in kernels launched with this heap (polls).
        signals: int32 [world_size], the barrier signals (entry p last set by rank p).
        errors: int32 [5], the error record of this rank's spin-waits.
    """

    def __init__(self, buffer: torch.Tensor, heap_bases: torch.Tensor, rank: int,
                 world_size: int, *, peers: Sequence[torch.Tensor] | None = None,
                 process_group=None, max_spins: int = DEFAULT_MAX_SPINS) -> None:
        self.buffer = buffer
        self.heap_bases = heap_bases
        self.rank = rank
        self.world_size = world_size
        self.max_spins = max_spins
        self._peers = peers              # group mode: every rank's buffer, for peer views
        self._process_group = process_group
        self._offset = 0
        self.allocations: list[Allocation] = []
        self._checked = 0                # allocations already compared across ranks
        self._epoch = 0                  # barriers passed
        self._flag_kinds: list[str] = ["barrier"]
        self._flag_views: dict = {}      # signal_queued's peer views of flag arrays
        self.signals = self.zeros(world_size, dtype=torch.int32, name="barrier")
        self.errors = self.zeros(_ERROR_WORDS, dtype=torch.int32, name="errors")

    # ------------------------------------------------------------------ construction
    @classmethod
    def create(cls, nbytes: int, group=None, device: torch.device | str | None = None,
               max_spins: int = DEFAULT_MAX_SPINS) -> "Heap":
        """This process's heap on PyTorch symmetric memory; a collective over ``group``.

        Args:
            nbytes: heap size in bytes (every rank must pass the same).
            group: the process group (default: the world).
            device: the CUDA device (default: the current one).
        Raises:
            HeapError: torch.distributed is not initialised, or ranks passed different sizes.
        """
        import torch.distributed as dist
        import torch.distributed._symmetric_memory as symm_mem

        if not dist.is_initialized():
            raise HeapError("Heap.create needs torch.distributed.init_process_group first")
        for key, value in NO_MULTICAST_ENV.items():
            if os.environ.get(key, value) != value:
                raise HeapError(f"{key} must be {value} (NVLink multicast stays off), "
                                f"got {os.environ[key]}")
            os.environ[key] = value
        group = group or dist.group.WORLD
        sizes = [None] * dist.get_world_size(group)
        dist.all_gather_object(sizes, int(nbytes), group=group)
        if len(set(sizes)) != 1:
            raise HeapError(f"every rank must create a heap of the same size, got {sizes} bytes")
        device = torch.device(device) if device is not None else torch.device(
            "cuda", torch.cuda.current_device())
        buffer = symm_mem.empty(int(nbytes), dtype=torch.uint8, device=device)
        handle = symm_mem.rendezvous(buffer, group.group_name)
        _check_bases(handle.buffer_ptrs)
        bases = torch.tensor(list(handle.buffer_ptrs), dtype=torch.int64, device=device)
        heap = cls(buffer, bases, handle.rank, handle.world_size, process_group=group,
                   max_spins=max_spins)
        heap._handle = handle
        torch.cuda.synchronize(device)   # this rank's control block is zeroed ...
        dist.barrier(group=group)        # ... before any peer signals into it
        heap.barrier()
        return heap

    @classmethod
    def group(cls, world_size: int, nbytes: int, device: str = "cpu",
              max_spins: int = 1 << 12) -> list["Heap"]:
        """``world_size`` heaps in this process (CPU tests through the Triton interpreter).

        The spin bound is small by default: ranks run one after another, so a wait whose
        flag was not set by an earlier launch can never succeed.
        """
        raw = [torch.zeros(int(nbytes) + BASE_ALIGN, dtype=torch.uint8, device=device)
               for _ in range(world_size)]
        buffers = [r[(-r.data_ptr()) % BASE_ALIGN:][:int(nbytes)] for r in raw]
        bases = torch.tensor([b.data_ptr() for b in buffers], dtype=torch.int64, device=device)
        return [cls(b, bases, r, world_size, peers=buffers, max_spins=max_spins)
                for r, b in enumerate(buffers)]

    # ------------------------------------------------------------------ allocation
    def empty(self, *shape, dtype: torch.dtype = torch.float32, name: str = "") -> torch.Tensor:
        """A tensor of ``shape`` and ``dtype`` carved from the heap (content undefined).

        Raises:
            HeapError: the heap has fewer free bytes than the tensor needs.
        """
        shape = tuple(shape[0]) if len(shape) == 1 and isinstance(shape[0], (tuple, list)) \
            else tuple(int(s) for s in shape)
        itemsize = torch.empty((), dtype=dtype).element_size()
        nbytes = math.prod(shape) * itemsize
        start = cdiv(self._offset, ALIGN) * ALIGN
        if start + nbytes > self.buffer.numel():
            raise HeapError(f"rank {self.rank}: heap full: {name or 'tensor'} {list(shape)} "
                            f"{dtype} needs {nbytes} bytes at offset {start}, heap holds "
                            f"{self.buffer.numel()} bytes")
        self._offset = start + nbytes
        self.allocations.append(Allocation(name or f"t{len(self.allocations)}", start, nbytes,
                                           shape, str(dtype)))
        return self.buffer[start:start + nbytes].view(dtype).view(shape)

    def zeros(self, *shape, dtype: torch.dtype = torch.float32, name: str = "") -> torch.Tensor:
        """``empty`` filled with zeros."""
        return self.empty(*shape, dtype=dtype, name=name).zero_()

    def full(self, shape, value, dtype: torch.dtype = torch.float32, name: str = "") -> torch.Tensor:
        """``empty`` filled with ``value``."""
        return self.empty(shape, dtype=dtype, name=name).fill_(value)

    def arange(self, n: int, dtype: torch.dtype = torch.int64, name: str = "") -> torch.Tensor:
        """0, 1, ..., n - 1 in the heap."""
        out = self.empty(n, dtype=dtype, name=name)
        out.copy_(torch.arange(n, dtype=dtype, device=out.device))
        return out

    def like(self, tensor: torch.Tensor, name: str = "") -> torch.Tensor:
        """A heap copy of ``tensor`` (same shape, dtype and values)."""
        return self.empty(tuple(tensor.shape), dtype=tensor.dtype, name=name).copy_(tensor)

    def flags(self, n: int, name: str) -> tuple[torch.Tensor, int]:
        """``n`` zeroed int32 flags and their kind id (what error records name them by)."""
        self._flag_kinds.append(name)
        return self.zeros(n, dtype=torch.int32, name=name), len(self._flag_kinds) - 1

    def reset(self, mark: int) -> None:
        """Free every allocation made after the first ``mark`` ones (same on every rank)."""
        del self.allocations[mark:]
        self._offset = self.allocations[-1].offset + self.allocations[-1].nbytes
        self._checked = min(self._checked, mark)

    def owns(self, tensor: torch.Tensor) -> bool:
        """True when ``tensor``'s storage lies inside this heap."""
        start = self.buffer.data_ptr()
        return start <= tensor.data_ptr() < start + self.buffer.numel()

    def peer_view(self, tensor: torch.Tensor, peer: int) -> torch.Tensor:
        """Peer ``peer``'s copy of the heap tensor ``tensor`` (host-side, e.g. for tests).

        Raises:
            HeapError: ``tensor`` is not in this heap.
        """
        if not self.owns(tensor):
            raise HeapError(f"rank {self.rank}: tensor is not in this heap")
        offset = tensor.data_ptr() - self.buffer.data_ptr()
        nbytes = tensor.numel() * tensor.element_size()
        if self._peers is not None:
            raw = self._peers[peer]
        else:
            raw = self._handle.get_buffer(peer, (self.buffer.numel(),), torch.uint8, 0)
        return raw[offset:offset + nbytes].view(tensor.dtype).view(tensor.shape)

    def signal_queued(self, flags: torch.Tensor, index: int, value: int, peer: int) -> None:
        """Queue on the current stream a write of ``value`` to ``peer``'s copy of the int32
        flag ``flags[index]``, after everything queued before it on that stream (copy-engine
        copies included); no SM is used.

        On a GPU this is ``cuStreamWriteValue32`` through torch's symmetric memory (a system-wide
        memory fence precedes the write, CUDA driver API docs of CUstreamWriteValue_flags), so
        a peer that acquires the flag sees the copies queued before it. In group mode (CPU)
        the stream has already run them: a plain store.

        Raises:
            HeapError: ``flags`` is not an int32 tensor of this heap, or ``index`` is outside it.
        """
        if flags.dtype != torch.int32 or not 0 <= index < flags.numel():
            raise HeapError(f"rank {self.rank}: signal_queued needs an int32 heap flag and an "
                            f"index in 0..{flags.numel() - 1}, got {flags.dtype} [{index}]")
        key = (flags.data_ptr(), flags.numel(), peer)   # a view per flag array and peer, made once
        target = self._flag_views.get(key)
        if target is None:
            target = self.peer_view(flags, peer).reshape(-1)
            self._flag_views[key] = target = target.view(torch.uint32) if target.is_cuda else target
        if target.is_cuda:
            from torch._C._distributed_c10d import _SymmetricMemory
            _SymmetricMemory.stream_write_value32(target, index, value)
        else:
            target[index] = value

    # ------------------------------------------------------------------ checks and barrier
    def check_symmetric(self) -> None:
        """Compare this rank's allocations with every other rank's (a collective in process mode).

        Raises:
            HeapError: naming the first allocation that differs and the rank it differs on.
        """
        if self._peers is not None or self._checked == len(self.allocations):
            return
        import torch.distributed as dist
        mine = [(a.offset, a.nbytes, a.shape, a.dtype) for a in self.allocations]
        logs = [None] * self.world_size
        dist.all_gather_object(logs, mine, group=self._process_group)
        for peer, theirs in enumerate(logs):
            _compare_allocations(self.rank, self.allocations, peer, theirs)
        self._checked = len(self.allocations)

    def barrier(self) -> None:
        """Every rank's prior work on its current stream is complete and visible to all ranks.

        A device-side barrier: each rank sets its signal in every peer's heap (release, system
        scope), then waits until every peer's signal reached this epoch (acquire, system scope),
        at most ``max_spins`` polls. Synchronises the host.

        Raises:
            SpinTimeout: a peer did not arrive (it died or hangs), naming it.
            HeapError: the ranks' allocations differ.
        """
        if self._peers is not None:
            raise HeapError("heaps of one process: use barrier_all(heaps)")
        self.check_symmetric()
        self._epoch += 1
        device.launch_barrier(self, self._epoch, signal=True, wait=True)
        torch.cuda.synchronize(self.buffer.device)
        self.check()

    def device_barrier(self) -> None:
        """``barrier`` queued on the current stream only: no host synchronisation, no error
        check (call ``check`` after synchronising). For use inside timed launches."""
        self._epoch += 1
        device.launch_barrier(self, self._epoch, signal=True, wait=True)

    def check(self) -> None:
        """Raise the first spin-wait timeout this rank recorded, if any (synchronises).

        Raises:
            SpinTimeout: "rank R: gave up waiting for flag NAME[i] (set by rank P) after N
                polls: it holds V".
        """
        code, kind, index, peer, observed = self.errors.tolist()
        if code == 0:
            return
        self.errors.zero_()
        name = self._flag_kinds[kind] if 0 <= kind < len(self._flag_kinds) else f"kind {kind}"
        raise SpinTimeout(f"rank {self.rank}: gave up waiting for flag {name}[{index}] "
                          f"(set by rank {peer}) after {self.max_spins} polls: it holds "
                          f"{observed}; rank {peer} died, hangs, or never signals it")


def barrier_all(heaps: Sequence[Heap]) -> None:
    """The barrier of ``Heap.group`` heaps in one process: all ranks signal, then all wait."""
    epoch = heaps[0]._epoch + 1
    for heap in heaps:
        heap._epoch = epoch
        device.launch_barrier(heap, epoch, signal=True, wait=False)
    for heap in heaps:
        device.launch_barrier(heap, epoch, signal=False, wait=True)
    for heap in heaps:
        heap.check()


def _check_bases(bases) -> None:
    misaligned = [hex(b) for b in bases if b % BASE_ALIGN]
    if misaligned:
        raise HeapError(f"heap bases must be {BASE_ALIGN}-byte aligned, got {misaligned}")


def _compare_allocations(rank: int, mine: list[Allocation], peer: int, theirs: list) -> None:
    if len(theirs) != len(mine):
        raise HeapError(f"rank {rank} made {len(mine)} heap allocations, rank {peer} made "
                        f"{len(theirs)}: every rank must allocate the same tensors in order")
    for index, (alloc, other) in enumerate(zip(mine, theirs)):
        if (alloc.offset, alloc.nbytes, alloc.shape, alloc.dtype) != tuple(other):
            raise HeapError(f"heap allocation {index} ({alloc.name}) differs: rank {rank} has "
                            f"{list(alloc.shape)} {alloc.dtype} at byte {alloc.offset}, rank "
                            f"{peer} has {list(other[2])} {other[3]} at byte {other[0]}")
