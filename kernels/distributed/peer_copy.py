"""Peer copy over the symmetric heap: the bandwidth a Triton kernel gets to a peer GPU.

``peer_copy_kernel`` copies a local heap buffer into the same buffer of another rank with
``device.put`` (loads from local HBM, stores over NVLink). Its bandwidth is compared with the
copy engine's (``torch.Tensor.copy_`` into the peer's mapped buffer), measured in the same run.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from swizzleperf.kernels.distributed import device


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
