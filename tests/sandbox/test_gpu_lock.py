"""sandbox/gpu_lock.py: workers sharing one GPU take its exclusive phases in turn; without the
variable nothing is locked."""
from __future__ import annotations

import subprocess
import sys
import textwrap
import time

import pytest

from swizzleperf import sandbox
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


# -- sandbox.run_gpu_turn: a boxed worker compiles beside the others, asks for the GPU to time ----

TURN = textwrap.dedent("""
    import sys, time
    side = time.monotonic(); time.sleep(0.5); side_end = time.monotonic()
    print(ASK, flush=True)
    sys.stdin.readline()
    turn = time.monotonic(); time.sleep(0.5)
    print("spans", side, side_end, turn, time.monotonic(), flush=True)
""")


def _turn(tmp_path, code: str, timeout_s: float = 60):
    command = [sys.executable, "-c", f"ASK = {sandbox.GPU_TURN_ASK!r}\n{code}"]
    work = tmp_path / f"w{time.monotonic_ns()}"
    work.mkdir()
    return sandbox.run_gpu_turn(command, work, sandbox.worker_env(), timeout_s,
                                sandbox.worker_limits(timeout_s, True, (work,)))


def test_workers_compile_side_by_side_and_time_one_at_a_time(tmp_path, monkeypatch):
    from concurrent.futures import ThreadPoolExecutor
    monkeypatch.setenv(gpu_lock.GPU_LOCK_ENV, str(tmp_path / "locks"))
    with ThreadPoolExecutor(3) as pool:
        results = list(pool.map(lambda _: _turn(tmp_path, TURN), range(3)))
    spans = []
    for result in results:
        assert result.returncode == 0, result.stderr
        assert sandbox.GPU_TURN_ASK not in result.stdout   # the ask is the agent's, not the worker's output
        spans.append(tuple(float(x) for x in result.stdout.split()[1:]))
    sides = sorted((s, e) for s, e, _, _ in spans)
    assert sides[1][0] < sides[0][1] and sides[2][0] < sides[0][1], sides   # side by side
    turns = sorted((s, e) for _, _, s, e in spans)
    for (_, end), (start, _) in zip(turns, turns[1:]):
        assert start >= end - 0.01, turns   # one at a time


def test_a_worker_that_never_asks_never_waits_for_the_gpu(tmp_path, monkeypatch):
    monkeypatch.setenv(gpu_lock.GPU_LOCK_ENV, str(tmp_path / "locks"))
    with gpu_lock.exclusive():   # another worker times meanwhile
        result = _turn(tmp_path, "print('checked')", timeout_s=20)
    assert result.returncode == 0 and result.stdout.strip() == "checked"


def test_the_wait_for_the_gpu_is_not_the_workers_time_and_the_lock_ends_with_it(tmp_path, monkeypatch):
    import threading
    monkeypatch.setenv(gpu_lock.GPU_LOCK_ENV, str(tmp_path / "locks"))
    taken, release = threading.Event(), threading.Event()

    def other_worker():
        with gpu_lock.exclusive():
            taken.set()
            release.wait(10)
    holder = threading.Thread(target=other_worker)
    holder.start()
    taken.wait(10)
    threading.Timer(3.0, release.set).start()   # the other worker times for 3 s, longer than this one's limit
    result = _turn(tmp_path, "import sys\nprint(ASK, flush=True)\nsys.stdin.readline()\nprint('timed')", timeout_s=2.5)
    holder.join()
    assert result.returncode == 0 and "timed" in result.stdout
    # a worker that hangs in its turn is killed at its limit, and the GPU is free again at once
    with pytest.raises(subprocess.TimeoutExpired):
        _turn(tmp_path, "import sys, time\nprint(ASK, flush=True)\nsys.stdin.readline()\ntime.sleep(60)",
              timeout_s=2)
    start = time.monotonic()
    with gpu_lock.exclusive():
        assert time.monotonic() - start < 1.0


def test_a_worker_that_prints_bytes_that_are_not_text_still_takes_its_turn(tmp_path, monkeypatch):
    monkeypatch.setenv(gpu_lock.GPU_LOCK_ENV, str(tmp_path / "locks"))
    code = ("import sys\nsys.stdout.buffer.write(b'\\xff\\xfe garbage\\n'); sys.stdout.flush()\n"
            "print(ASK, flush=True)\nsys.stdin.readline()\nprint('timed')")
    result = _turn(tmp_path, code, timeout_s=20)
    assert result.returncode == 0 and "timed" in result.stdout
