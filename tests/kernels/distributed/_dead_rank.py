"""Run under torchrun by test_multigpu.py: a rank that dies, and a flag that never comes, must end
the survivors' waits in bounded time with an error naming the rank and the flag.

Rank W-1 leaves (exit status 0, so torchrun does not kill the others) right after the heap is
built; every other rank then (1) waits in a kernel for a flag rank W-1 should set, and (2) enters
a barrier. Each prints one line per check, "OK <seconds> <message>" or "FAIL <reason>".
"""
import os
import sys
import time

import torch
import torch.distributed as dist
import triton

from swizzleperf.kernels.distributed import device
from swizzleperf.kernels.distributed.heap import Heap, SpinTimeout


@triton.jit
def _wait_for_peer(flags, errors, kind, peer, max_spins):
    device.wait(flags + 3, 1, errors, kind, 3, peer, max_spins)


def _say(line: str) -> None:
    """One write of the whole line: the ranks share torchrun's stdout, and print's separate
    write of the newline (unbuffered, PYTHONUNBUFFERED) let two ranks' lines run together."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def main() -> int:
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local_rank))
    heap = Heap.create(1 << 20, max_spins=1 << 20)
    flags, kind = heap.flags(8, "tile_ready")
    heap.check_symmetric()
    dead = heap.world_size - 1
    torch.cuda.synchronize()
    if heap.rank == dead:
        sys.stdout.flush()
        os._exit(0)
    status = 0
    for name, action in (("flag", lambda: (_wait_for_peer[(1,)](flags, heap.errors, kind, dead,
                                                                  heap.max_spins),
                                            torch.cuda.synchronize(), heap.check())),
                         ("barrier", heap.barrier)):
        started = time.time()
        try:
            action()
            _say(f"FAIL {name}: no error")
            status = 1
        except SpinTimeout as exc:
            _say(f"OK {time.time() - started:.2f} {exc}")
    sys.stdout.flush()
    os._exit(status)  # NCCL would wait for the dead rank at teardown


if __name__ == "__main__":
    sys.exit(main())
