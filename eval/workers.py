"""``swizzleperf eval --gpus N``: an eval's kernels spread over N worker processes of one machine.

One worker process per kernel (``swizzleperf eval-worker EVAL_ID KERNEL``), at most N at a time,
the longest kernels first. On a machine with GPUs each worker is pinned to one of them with
CUDA_VISIBLE_DEVICES, so its timings and ncu see exactly one device; without CUDA (a simulated
eval) the workers share the CPU. The workers share the eval's one record, ``WORKDIR/swizzleperf.db``:
each writes its own run, its own iterations and its kernel's row of the ``evals`` table, in short
transactions that SQLite serialises (WAL journal, 30 s busy timeout: ``agent/loop/record.py``). A worker
that dies leaves its kernel failed (or interrupted) with a one-line reason, and the others go on.
"""
from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from swizzleperf import sandbox
from swizzleperf.eval.evals_table import kernel_status, set_status

# Expected share of an eval's time per kernel, to start the longest first (others: 1). gemm
# compiles and times the largest problem (155 s alone on an H200, README); every timing of
# smith_waterman is 383 launches; the 2-D kernels have the most candidate orders; a 1-D kernel on
# an H200 (hashed dispatch: no XCD remap to try) has little more than its baseline to measure.
EXPECTED_COST = {"gemm": 6, "smith_waterman": 5, "stencil2d": 4, "fdtd2d": 4, "transpose": 4, "spmv": 2}
#: The environment variable through which an eval hands its LLM endpoint, credentials included, to
#: its worker processes (the record keeps it redacted).
BASE_URL_VARIABLE = "SWIZZLEPERF_EVAL_BASE_URL"
STOP_GRACE_S = 30.0
POLL_S = 0.2


@dataclass
class Worker:
    kernel: str
    where: str
    process: subprocess.Popen
    log: Path
    offset: int  # where this attempt's output starts in the log
    started: float


def visible_devices() -> list[str]:
    """The CUDA devices this process may use, as CUDA_VISIBLE_DEVICES entries: that variable's own
    list where it is set, else ``0 .. device_count - 1``; none without CUDA."""
    import torch
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if "CUDA_VISIBLE_DEVICES" in os.environ:
        return [d.strip() for d in os.environ["CUDA_VISIBLE_DEVICES"].split(",") if d.strip()][:count]
    return [str(i) for i in range(count)]


def worker_command(workdir: str, eval_id: str, kernel: str) -> list[str]:
    """The command line of the worker that runs ``kernel`` of the eval."""
    return sandbox.python_command("-m", "swizzleperf.agent.cli", "eval-worker", eval_id, kernel, "--workdir", workdir)


def run_workers(workdir: str, eval_id: str, kernels: list, slots: int,
                on_event: Callable = lambda kind, data: None, devices: list | None = None,
                base_url: str | None = None) -> None:
    """Run ``kernels`` of the registered eval in at most ``slots`` workers at once, longest first,
    worker ``i`` on ``devices[i]`` (default: the visible GPUs; none: no pinning); returns when every
    worker has exited. ``base_url``, the LLM endpoint with its credentials (the record keeps it
    redacted), reaches the workers in their environment. Interrupted (KeyboardInterrupt), it stops
    the workers, then re-raises."""
    devices = visible_devices() if devices is None else devices
    queue = sorted(kernels, key=lambda k: -EXPECTED_COST.get(k, 1))
    folder = Path(workdir) / "evals" / eval_id
    folder.mkdir(parents=True, exist_ok=True)
    running: dict[int, Worker] = {}
    try:
        while queue or running:
            for slot in range(slots):
                if slot not in running and queue:
                    running[slot] = _start(workdir, eval_id, queue.pop(0), slot, devices, folder, base_url)
                    _event(on_event, f"{running[slot].kernel}: started on {running[slot].where} "
                                     f"(log {running[slot].log})", running)
            for slot, worker in list(running.items()):
                if worker.process.poll() is not None:
                    del running[slot]
                    _event(on_event, _finish(workdir, eval_id, worker), running)
            time.sleep(POLL_S)
    except BaseException:  # interrupted, or a defect here: no worker outlives the eval
        _stop(list(running.values()))
        raise


def _start(workdir: str, eval_id: str, kernel: str, slot: int, devices: list, folder: Path,
           base_url: str | None = None) -> Worker:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    if base_url:
        env[BASE_URL_VARIABLE] = base_url
    where = f"worker {slot} (CPU)"
    if devices:
        where = f"GPU {devices[slot % len(devices)]}"
        env["CUDA_VISIBLE_DEVICES"] = devices[slot % len(devices)]
        # ncu serialises profiling across all its instances through $TMPDIR/nsight-compute-lock;
        # each worker profiles only its own GPU, so each gets its own TMPDIR (and lock).
        tmp = folder / f"tmp-{slot}"
        tmp.mkdir(exist_ok=True)
        env["TMPDIR"] = str(tmp.resolve())
    log = folder / f"{kernel}.log"
    set_status(workdir, eval_id, kernel, "running")  # a failure recorded by an earlier attempt is gone
    with log.open("a") as handle:
        handle.write(f"== {time.strftime('%Y-%m-%d %H:%M:%S')} {kernel} on {where}\n")
        handle.flush()
        offset = handle.tell()
        # Its own session: a terminal's Ctrl-C reaches this process only, which stops the workers in order.
        process = subprocess.Popen(worker_command(workdir, eval_id, kernel), stdout=handle,
                                   stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                   start_new_session=True)
    return Worker(kernel, where, process, log, offset, time.time())


def _finish(workdir: str, eval_id: str, worker: Worker) -> str:
    """Record how a worker ended, where it could not; returns the line to show."""
    code = worker.process.returncode
    status, reason = kernel_status(workdir, eval_id, worker.kernel)
    if status not in ("finished", "failed"):  # it died before recording its end
        ended = (f"killed by {signal.Signals(-code).name}" if code < 0 and -code in signal.valid_signals()
                 else f"exit code {code}")
        status = "interrupted" if code in (130, -signal.SIGINT) else "failed"
        reason = f"{last_line(worker.log, worker.offset)} (worker {ended}; log {worker.log})"
        set_status(workdir, eval_id, worker.kernel, status, reason=reason)
    took = f"{worker.kernel}: {status} after {time.time() - worker.started:.0f} s on {worker.where}"
    return took + (f": {reason}" if reason else "")


def last_line(log: Path, offset: int = 0) -> str:
    """The last non-empty line written to ``log`` after ``offset``, at most 200 characters."""
    with log.open("rb") as handle:
        handle.seek(offset)
        text = handle.read().decode(errors="replace")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:200] if lines else "(no output)"


def _stop(workers: list) -> None:
    """SIGTERM to each running worker (it ends its run as on Ctrl-C: report written, resumable);
    after STOP_GRACE_S, SIGKILL to the process group of any still running (its verification and
    ncu subprocesses with it)."""
    for worker in workers:
        if worker.process.poll() is None:
            worker.process.terminate()
    deadline = time.time() + STOP_GRACE_S
    while time.time() < deadline and any(w.process.poll() is None for w in workers):
        time.sleep(POLL_S)
    for worker in workers:
        if worker.process.poll() is None:
            os.killpg(worker.process.pid, signal.SIGKILL)
            worker.process.wait()


def _event(on_event: Callable, line: str, running: dict) -> None:
    on_event("worker", {"name": line, "running": [f"{w.kernel} ({w.where})" for w in running.values()]})
