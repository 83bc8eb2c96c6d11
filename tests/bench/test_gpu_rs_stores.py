"""bench/gpu_rs_stores.py's local-store heap: every rank's base is this rank's, everything else the heap's."""
import types

import torch

from bench.gpu_rs_stores import _LocalStores


def test_the_local_store_heap_points_every_peer_at_this_rank():
    heap = types.SimpleNamespace(rank=1, world_size=3, heap_bases=torch.tensor([1024, 4096, 8192]), max_spins=7)
    local = _LocalStores(heap)
    assert local.heap_bases.tolist() == [4096, 4096, 4096] and local.heap_bases.dtype == heap.heap_bases.dtype
    assert (local.rank, local.world_size, local.max_spins) == (1, 3, 7)
    assert heap.heap_bases.tolist() == [1024, 4096, 8192]      # the real heap untouched
