"""The tile maps ``Evaluator`` loads (``.map.npy``) are read as ``verify._not_a_mapping`` reads a
worker's: a regular file only (a named pipe or a link to ``/dev/zero`` left there is refused, never
waited on or read without end), bounded in size, without pickle, a 1-D integer array. A bad file is
one recorded reason, never a hang, a memory blow-up or a traceback."""
from __future__ import annotations

import os
import signal
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from swizzleperf.agent.verification import evaluate
from swizzleperf.agent.verification.evaluate import Evaluator
from swizzleperf.agent.verification.verify import Verdict, WorkerResult

ARGS = ["pid", "num_pid_m", "num_pid_n"]
MODULE = ("import triton\nimport triton.language as tl\n\n\n@triton.jit\n"
          "def swizzle(pid, num_pid_m, num_pid_n):\n    return pid // num_pid_n, pid % num_pid_n\n")
CANDIDATE = ("@triton.jit\ndef swizzle(pid, num_pid_m, num_pid_n):\n"
             "    return pid % num_pid_m, pid // num_pid_m\n")


@pytest.fixture
def alarm():
    """A hang fails the test after 10 s instead of blocking it for ever."""
    def hung(*_):
        raise TimeoutError("blocked on the map file")
    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(10)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def _evaluator(tmp_path: Path) -> Evaluator:
    kernel = tmp_path / "kernel.py"
    kernel.write_text(MODULE)
    return Evaluator(kernel_path=kernel, module_source=MODULE, target_name="swizzle", arg_names=ARGS,
                     candidates_dir=tmp_path / "candidates", verify_config=SimpleNamespace(timeout_s=5),
                     measurer=None)


def _worker_leaving(plant):
    """A stand-in for the worker: every item PASSes, its map file planted by ``plant(path)``."""
    def run_worker(request, timeout_s, interpret, *args, **kwargs):
        for item in request["items"]:
            plant(Path(item["mapping_path"]))
        return WorkerResult(Verdict.PASS, "", {"items": [{"verdict": "PASS", "reason": ""}
                                                         for _ in request["items"]]})
    return run_worker


def test_a_fifo_in_place_of_a_map_is_refused_not_waited_on(tmp_path, monkeypatch, alarm):
    monkeypatch.setattr(evaluate, "run_worker", _worker_leaving(os.mkfifo))
    [(order, reason)] = _evaluator(tmp_path).tile_maps([CANDIDATE])
    assert order is None and "not a regular file" in reason


def test_a_link_to_dev_zero_in_place_of_a_map_is_refused(tmp_path, monkeypatch, alarm):
    monkeypatch.setattr(evaluate, "run_worker", _worker_leaving(lambda path: path.symlink_to("/dev/zero")))
    [(order, reason)] = _evaluator(tmp_path).tile_maps([CANDIDATE])
    assert order is None and "not a regular file" in reason


def test_a_map_above_the_size_limit_is_refused_before_it_is_read(tmp_path, monkeypatch, alarm):
    monkeypatch.setattr(evaluate, "run_worker", _worker_leaving(lambda path: np.save(path, np.arange(4096))))
    monkeypatch.setattr(evaluate, "MAX_MAPPING_BYTES", 1024, raising=False)
    [(order, reason)] = _evaluator(tmp_path).tile_maps([CANDIDATE])
    assert order is None and "more than 1024" in reason


def test_a_pickled_or_malformed_map_is_refused(tmp_path, monkeypatch, alarm):
    monkeypatch.setattr(evaluate, "run_worker",
                        _worker_leaving(lambda path: np.save(path, np.array([{"a": 1}], dtype=object))))
    [(order, reason)] = _evaluator(tmp_path).tile_maps([CANDIDATE])
    assert order is None and "tile map" in reason


def test_a_genuine_map_is_loaded(tmp_path, monkeypatch, alarm):
    monkeypatch.setattr(evaluate, "run_worker", _worker_leaving(lambda path: np.save(path, np.arange(12)[::-1])))
    [(order, reason)] = _evaluator(tmp_path).tile_maps([CANDIDATE])
    assert reason == "" and order.tolist() == list(range(12))[::-1]


def test_the_maps_of_earlier_attempts_are_read_checked_too(tmp_path, alarm):
    """A run record names each attempt's map: a FIFO planted there is skipped, not waited on."""
    fifo, good = tmp_path / "planted.map.npy", tmp_path / "good.map.npy"
    os.mkfifo(fifo)
    np.save(good, np.arange(6))
    tried = _evaluator(tmp_path)._tried_orders([{"iteration": 1, "name": "x", "mapping": str(fifo)},
                                                {"iteration": 2, "name": "y", "mapping": str(good)}], None)
    assert list(tried.values()) == ["attempt 2 (y)"]
