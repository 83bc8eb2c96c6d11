"""Several workers on one GPU: what must have the GPU alone takes it one at a time.

``swizzleperf eval --apps DIR --gpus N`` with more workers than GPUs (``--gpus 12`` on one H100)
runs the CPU-bound parts of its rows side by side: the app's runs (its kernel trace too: its
times then say the GPU was shared), the lift, the compiles, the permutation and numerics checks
and the proof. Timing and the profiler (ncu) read the GPU's clock and counters, and another
process's kernels on the same GPU would be in them: those phases wrap themselves in :func:`exclusive`, an advisory ``flock`` on one file per GPU in the
folder named by ``GPU_LOCK_ENV``. Without that variable (one worker per GPU, the default)
:func:`exclusive` does nothing.

The lock is taken by the agent's side (the process that starts the worker box), never inside the
box: candidate code cannot hold or release it. A verification worker compiles and checks its
kernel side by side with the others and asks for the GPU only for its timing stages
(sandbox.run_gpu_turn): the lock is held for seconds, not for the worker's compile.
"""
from __future__ import annotations

import fcntl
import os
import re
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

GPU_LOCK_ENV = "SWIZZLEPERF_GPU_LOCK_DIR"


def lock_path(folder: str | os.PathLike, devices: str | None) -> Path:
    """The lock file of the GPU(s) ``devices`` (a ``CUDA_VISIBLE_DEVICES`` value; None or empty:
    every GPU of the host, one lock)."""
    name = re.sub(r"[^A-Za-z0-9-]+", "_", devices or "") or "all"
    return Path(folder) / f"gpu-{name}.lock"


def shared() -> bool:
    """Whether this process shares its GPU with other workers (``GPU_LOCK_ENV`` is set)."""
    return bool(os.environ.get(GPU_LOCK_ENV))


@contextmanager
def exclusive() -> Iterator[bool]:
    """Hold this process's GPU alone for the ``with`` block, where ``GPU_LOCK_ENV`` names a lock
    folder (created if missing); yields whether a lock was taken. Blocks until the GPU is free:
    the callers' own time limits start after it (a waiting row spends its wall-clock budget).

    Raises:
        OSError: the lock folder cannot be created or its file opened (one line from the caller).
    """
    folder = os.environ.get(GPU_LOCK_ENV)
    if not folder:
        yield False
        return
    Path(folder).mkdir(parents=True, exist_ok=True)
    with open(lock_path(folder, os.environ.get("CUDA_VISIBLE_DEVICES")), "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
