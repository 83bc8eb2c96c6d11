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


#: Streams that push_copy_engine's copies go out on, round robin: a copy followed by its flag
#: write (whose system-wide fence waits for the copy's stores to land) leaves a copy engine idle
#: between copies on one stream. Two H100s, 2026-11-26: 32 MiB in eight copies on one stream
#: took 141 us (227 GB/s), where one copy of 1 GiB runs at 392 GB/s
#: (eval/results/rs_ce_parts_h100x2/, eval/results/dist_gemm_h100x2.md).
COPY_STREAMS = 4


def copy_engine_push(heap, copies: list, flags: torch.Tensor, epoch: int, streams: list) -> None:
    """Queue ``copies`` (``(destination, source, flag_index, peer)``: a view of ``peer``'s heap
    mapped here, a local tensor of the same shape, and the index in ``flags`` to set) on the copy
    engines: each a ``Tensor.copy_`` followed by ``flags[flag_index] = epoch`` in ``peer``'s heap
    written by the stream (``Heap.signal_queued``), round robin over ``streams`` (CUDA streams,
    each first waiting for the current stream, which then waits for all of them). With no
    streams (CPU) they run in order on the current one."""
    if not streams:
        for destination, source, flag, peer in copies:
            destination.copy_(source)
            heap.signal_queued(flags, flag, epoch, peer)
        return
    current = torch.cuda.current_stream()
    used = streams[:len(copies)]
    for stream in used:
        stream.wait_stream(current)
    for index, (destination, source, flag, peer) in enumerate(copies):
        with torch.cuda.stream(used[index % len(used)]):
            destination.copy_(source)
            heap.signal_queued(flags, flag, epoch, peer)
    for stream in used:
        current.wait_stream(stream)


def copy_streams(state: dict, device: torch.device) -> list:
    """The state's copy streams (``COPY_STREAMS`` CUDA streams on a GPU, made once; none on CPU)."""
    if "copy_streams" not in state:
        state["copy_streams"] = ([torch.cuda.Stream(device) for _ in range(COPY_STREAMS)]
                                 if device.type == "cuda" else [])
    return state["copy_streams"]
