"""sandbox/gpu_lock.py: workers sharing one GPU take its exclusive phases in turn; without the
variable nothing is locked."""
from __future__ import annotations

import subprocess
import sys
import textwrap

from swizzleperf.sandbox import gpu_lock

HOLD = textwrap.dedent("""
    import sys, time
    from swizzleperf.sandbox import gpu_lock
    with gpu_lock.exclusive() as locked:
        start = time.monotonic()
        time.sleep(0.6)
        print(locked, start, time.monotonic())
""")


def _spans(env: dict, count: int = 3) -> list:
    procs = [subprocess.Popen([sys.executable, "-c", HOLD], env=env, stdout=subprocess.PIPE, text=True)
             for _ in range(count)]
    out = [p.communicate(timeout=60)[0].split() for p in procs]
    return sorted((o[0] == "True", float(o[1]), float(o[2])) for o in out)


def test_processes_of_one_gpu_hold_it_one_at_a_time(tmp_path, monkeypatch):
    env = {**__import__("os").environ, gpu_lock.GPU_LOCK_ENV: str(tmp_path / "locks"), "CUDA_VISIBLE_DEVICES": "0"}
    spans = _spans(env)
    assert all(locked for locked, _, _ in spans)
    for (_, _, end), (_, start, _) in zip(spans, spans[1:]):
        assert start >= end - 0.01, spans   # no two inside the block at once


def test_two_gpus_do_not_wait_for_each_other(tmp_path):
    import os
    base = {**os.environ, gpu_lock.GPU_LOCK_ENV: str(tmp_path / "locks")}
    procs = [subprocess.Popen([sys.executable, "-c", HOLD], env={**base, "CUDA_VISIBLE_DEVICES": d},
                              stdout=subprocess.PIPE, text=True) for d in ("0", "1")]
    spans = sorted(tuple(map(float, p.communicate(timeout=60)[0].split()[1:])) for p in procs)
    assert spans[1][0] < spans[0][1], spans   # they overlap


def test_without_the_variable_nothing_is_locked(monkeypatch, tmp_path):
    monkeypatch.delenv(gpu_lock.GPU_LOCK_ENV, raising=False)
    with gpu_lock.exclusive() as locked:
        assert locked is False
    assert not list(tmp_path.iterdir())


def test_the_lock_file_names_the_devices(tmp_path):
    assert gpu_lock.lock_path(tmp_path, "0").name == "gpu-0.lock"
    assert gpu_lock.lock_path(tmp_path, "2,3").name == "gpu-2_3.lock"
    assert gpu_lock.lock_path(tmp_path, None).name == "gpu-all.lock"
    assert gpu_lock.lock_path(tmp_path, "../x").parent == tmp_path
