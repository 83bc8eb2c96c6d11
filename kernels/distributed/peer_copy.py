"""Peer copy over the symmetric heap: the bandwidth a Triton kernel gets to a peer GPU, and the
copy-engine pushes of the push_copy_engine patterns (``copy_engine_push``).

``peer_copy_kernel`` copies a local heap buffer into the same buffer of another rank with
``device.put`` (loads from local HBM, stores over NVLink). Its bandwidth is compared with the
copy engine's (``torch.Tensor.copy_`` into the peer's mapped buffer), measured in the same run.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from swizzleperf.kernels.distributed import device
from swizzleperf.kernels.schedule.persistent_gemm import cdiv


@triton.jit
def peer_copy_kernel(src_ptr, dst_ptr, n_elements, rank, peer, heap_bases,
                     BLOCK: tl.constexpr):
    """Persistent copy of ``n_elements`` from local ``src_ptr`` to ``peer``'s ``dst_ptr``."""
    for start in range(tl.program_id(0) * BLOCK, n_elements, tl.num_programs(0) * BLOCK):
        offsets = start + tl.arange(0, BLOCK)
        device.put(src_ptr + offsets, dst_ptr + offsets, rank, peer, heap_bases,
                   mask=offsets < n_elements)


def peer_copy(heap, src: torch.Tensor, dst: torch.Tensor, peer: int, programs: int,
              block: int = 4096) -> None:
    """Copy heap tensor ``src`` into ``peer``'s copy of heap tensor ``dst`` (same numel)."""
    peer_copy_kernel[(programs,)](src, dst, src.numel(), heap.rank, peer, heap.heap_bases,
                                  BLOCK=block, num_warps=8)


def copy_engine_group(rows: int, meta: dict) -> int:
    """Row tiles per copy of a push_copy_engine pattern: ``CE_GROUPS`` copies of ``rows`` rows
    (a shard, an owner's rows) in row tiles of ``BLOCK_M``, one flag each (the first row tile's)."""
    return cdiv(cdiv(rows, meta["BLOCK_M"]), meta["CE_GROUPS"])


def copy_engine_push(heap, copies: list, flags: torch.Tensor, epoch: int) -> None:
    """Queue ``copies`` (``(destination, source, flag_index, peer)``: a view of ``peer``'s heap
    mapped here, a local tensor of the same shape, and the index in ``flags`` to set) on the
    current stream, in order: each a ``Tensor.copy_`` (a copy engine's) followed by
    ``flags[flag_index] = epoch`` in ``peer``'s heap written by the stream
    (``Heap.signal_queued``: no SM). One stream, so the groups land in the order the peers read
    them: on two H100s (2026-11-26, bench/results/rs_ce_parts_h100x2/) eight copies of 4 MiB
    took 139-141 us on one stream and on four, and GEMM + RS llama70b-o-4k ran 0.403-0.413 ms
    a launch on one and 0.451-0.456 on four (its first groups came later)."""
    for destination, source, flag, peer in copies:
        destination.copy_(source)
        heap.signal_queued(flags, flag, epoch, peer)
