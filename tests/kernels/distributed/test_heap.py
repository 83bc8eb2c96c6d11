"""kernels/distributed/heap.py and device.py on CPU: allocation (host only, in this process) and every
device function through the Triton interpreter with several heaps in one process (in a worker
with ``TRITON_INTERPRET=1``, the convention of tests/kernels). Data movement is checked for
exact equality; atomics against their sequential result."""
from __future__ import annotations

import pytest
from _interpreted import interpret
import torch

from swizzleperf.kernels.distributed.heap import (ALIGN, BASE_ALIGN, Allocation, Heap, HeapError,
                                           _compare_allocations)


PRELUDE = ("import json, torch, triton, triton.language as tl\n"
           "from swizzleperf.kernels.distributed import device\n"
           "from swizzleperf.kernels.distributed.heap import Heap, SpinTimeout, barrier_all\n")


def _interpret(body: str) -> object:
    """``body`` after PRELUDE's imports, under the Triton interpreter in a fresh process."""
    return interpret(PRELUDE + body)


def test_allocations_are_aligned_symmetric_and_bounded():
    heaps = Heap.group(2, 1 << 16)
    assert all(h.buffer.data_ptr() % BASE_ALIGN == 0 for h in heaps)
    a = [h.empty(3, 5, dtype=torch.float16, name="a") for h in heaps]
    b = [h.zeros(7, dtype=torch.int64, name="b") for h in heaps]
    for h, x, y in zip(heaps, a, b):
        assert (x.data_ptr() - h.buffer.data_ptr()) % ALIGN == 0
        assert (y.data_ptr() - h.buffer.data_ptr()) % ALIGN == 0
        assert y.data_ptr() - h.buffer.data_ptr() == b[0].data_ptr() - heaps[0].buffer.data_ptr()
    assert torch.equal(heaps[0].arange(5), torch.arange(5))
    assert heaps[0].full((2, 2), 3.0).eq(3.0).all()
    mark = len(heaps[0].allocations)
    heaps[0].empty(100, name="scratch")
    heaps[0].reset(mark)
    again = heaps[0].empty(100, name="scratch")
    assert again.data_ptr() - heaps[0].buffer.data_ptr() == heaps[0].allocations[-1].offset
    with pytest.raises(HeapError, match="heap full: big"):
        heaps[0].empty(1 << 20, name="big")


def test_peer_view_is_the_peer_copy():
    heaps = Heap.group(3, 1 << 14)
    xs = [h.zeros(4, name="x") for h in heaps]
    xs[2].fill_(7.0)
    assert heaps[0].peer_view(xs[0], 2).eq(7.0).all()
    with pytest.raises(HeapError, match="not in this heap"):
        heaps[0].peer_view(torch.zeros(4), 1)


def test_signal_queued_writes_the_peer_flag():
    """Group mode (CPU): the write lands in the peer's copy of the flag, nowhere else."""
    heaps = Heap.group(2, 1 << 14)
    flags = [h.flags(3, "ready")[0] for h in heaps]
    heaps[0].signal_queued(flags[0], 2, 7, 1)
    assert flags[1].tolist() == [0, 0, 7] and flags[0].tolist() == [0, 0, 0]
    with pytest.raises(HeapError, match=r"index in 0..2, got torch.int32 \[3\]"):
        heaps[0].signal_queued(flags[0], 3, 7, 1)
    with pytest.raises(HeapError, match="int32 heap flag"):
        heaps[0].signal_queued(heaps[0].zeros(3, dtype=torch.int64), 0, 7, 1)


def test_ranks_with_different_allocations_are_named():
    mine = [Allocation("c", 256, 64, (4, 8), "torch.float16")]
    _compare_allocations(0, mine, 1, [(256, 64, (4, 8), "torch.float16")])
    with pytest.raises(HeapError, match=r"allocation 0 \(c\) differs: rank 0 has \[4, 8\] "
                                        r"torch.float16 at byte 256, rank 1 has \[8, 4\]"):
        _compare_allocations(0, mine, 1, [(256, 64, (8, 4), "torch.float16")])
    with pytest.raises(HeapError, match="rank 0 made 1 heap allocations, rank 2 made 0"):
        _compare_allocations(0, mine, 2, [])


def test_device_functions_mirror_tl_on_a_peer():
    out = _interpret('''
heaps = Heap.group(3, 1 << 16)
x = [h.empty(64, dtype=torch.float32, name="x") for h in heaps]
y = [h.zeros(64, dtype=torch.float32, name="y") for h in heaps]
n = [h.zeros(8, dtype=torch.int32, name="n") for h in heaps]
for r, t in enumerate(x):
    t.copy_(torch.arange(64.0) + 100 * r)

@triton.jit
def kernel(x, y, n, bases, rank, peer, N: tl.constexpr):
    o = tl.arange(0, N)
    remote = device.load(x + o, rank, peer, bases)                # peer's x
    device.store(y + o, remote + 1, rank, peer, bases, mask=o < 32)  # peer's y[:32]
    device.get(x + o, y + o + 0, rank, peer, bases, mask=o >= 32)  # local y[32:] <- peer x
    device.put(x + o, x + o, rank, (peer + 1) % 3, bases, mask=o < 4)  # next x[:4] <- local
    device.atomic_add(n + 0, 5, rank, peer, bases)
    device.atomic_xchg(n + 1, 9, rank, peer, bases, sem="release", scope="sys")
    device.atomic_cas(n + 2, 0, 3, rank, peer, bases, sem="acq_rel", scope="gpu")
    device.atomic_max(n + 3, 11, rank, peer, bases)
    device.atomic_min(n + 4, -2, rank, peer, bases)

kernel[(1,)](x[0], y[0], n[0], heaps[0].heap_bases, 0, 1, N=64)
print(json.dumps({"y0": y[0].tolist(), "y1": y[1].tolist(), "x2": x[2][:6].tolist(),
                  "n1": n[1].tolist(), "n0": n[0].tolist()}))
''')
    peer_x = [100.0 + i for i in range(64)]
    assert out["y1"] == [v + 1 for v in peer_x[:32]] + [0.0] * 32
    assert out["y0"] == [0.0] * 32 + peer_x[32:]
    assert out["x2"] == [0.0, 1.0, 2.0, 3.0, 204.0, 205.0]
    assert out["n1"] == [5, 9, 3, 11, -2, 0, 0, 0] and out["n0"] == [0] * 8


def test_barrier_and_a_flag_that_never_comes():
    out = _interpret('''
heaps = Heap.group(3, 1 << 16)
barrier_all(heaps)
barrier_all(heaps)
flags, kind = heaps[1].flags(4, "tile_ready")

@triton.jit
def waiter(flags, errors, kind, max_spins):
    device.wait(flags + 2, 1, errors, kind, 2, 0, max_spins)

waiter[(1,)](flags, heaps[1].errors, kind, heaps[1].max_spins)
try:
    heaps[1].check()
    message = "no error"
except SpinTimeout as exc:
    message = str(exc)
print(json.dumps({"signals": [h.signals.tolist() for h in heaps], "message": message}))
''')
    assert out["signals"] == [[2, 2, 2]] * 3
    assert out["message"].startswith("rank 1: gave up waiting for flag tile_ready[2] (set by rank "
                                     "0) after 4096 polls: it holds 0")
