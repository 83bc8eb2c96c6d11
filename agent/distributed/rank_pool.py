"""A pool of W rank processes that the optimizer starts itself (no torchrun for the user), keeps
for the run, and replaces when a rank hangs or dies.

    agent process ── stdin/stdout JSON lines ──► supervisor (sandboxed) ── pipes ──► rank 0 .. W-1

The supervisor (``python -m swizzleperf.agent.distributed.rank_pool serve SETTINGS``) is started in
the box of sandbox/__init__.py (minimal environment, limits, its own process group that dies with
the agent, a network namespace of its own where the OS permits: its loopback is brought up there so
that the ranks, and nothing else, can talk). It spawns the W rank processes
(agent/distributed/rank_worker.py): one GPU each with NCCL and the symmetric heap, or CPU processes
under the Triton interpreter with gloo and shared-memory heaps (the CPU tests). It forwards each
request to every rank and answers with one combined result:

- every rank PASS: rank 0's figures (timings are gathered over the ranks already) and every
  rank's verification;
- a verdict every rank agrees on (MISMATCH): that verdict, naming the ranks;
- a rank that answers with a fatal failure (an exception, a spin-wait that gave up), dies, or does
  not answer within the deadline: RUNTIME_ERROR / DEADLOCK naming the rank, and ``broken``: the
  pool is killed (its whole process group) and the next request starts a fresh one.

The agent side is ``RankPool``. The command-line launcher of one configuration (what a
distributed run's report says to run next) is agent/distributed/__main__.py
(``python -m swizzleperf.agent.distributed run ...``).
"""
from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from swizzleperf import sandbox
from swizzleperf.sandbox.write_back import replace_file

#: Seconds the ranks may take to start (import torch and Triton, the process group, the heap).
START_TIMEOUT_S = 300.0
#: Seconds the agent waits beyond a request's deadline before it kills an unanswering supervisor.
GRACE_S = 30.0
_PROTOCOL = "@@rankpool "   # prefix of the supervisor's protocol lines on its stdout


class PoolError(RuntimeError):
    """The pool could not start (the message says why, in one line)."""


@dataclass
class RankPool:
    """W rank processes for one run (see the module docstring).

    Attributes:
        world_size: W, the ranks.
        device: ``"cuda"`` (one GPU per rank, NCCL) or ``"cpu"`` (the Triton interpreter, gloo).
        heap_bytes: each rank's symmetric heap in bytes.
        folder: where the pool's files go (the store, the heaps on CPU, each rank's log).
        max_spins: the bound of every spin-wait (None: the heap's default).
        isolate_network: a network namespace of its own for the supervisor and ranks, where the OS
            permits (their loopback is brought up in it).
        starts: how many times a pool was started (a replaced pool counts again).
    """

    world_size: int
    device: str
    heap_bytes: int
    folder: Path
    max_spins: int | None = None
    isolate_network: bool = True
    starts: int = 0
    device_name: str = ""
    note: str = ""
    start_seconds: list = field(default_factory=list)   # from ``begin`` to ready, per start
    _process: subprocess.Popen | None = field(default=None, repr=False)
    _lines: queue.Queue | None = field(default=None, repr=False)
    _starting: tuple | None = field(default=None, repr=False)   # (folder, monotonic time) until ready

    @property
    def alive(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def start(self) -> dict:
        """Start the supervisor and its ranks and wait for them (``begin``, then ``ready``);
        returns the supervisor's ``ready`` message.

        Raises:
            PoolError: a rank failed to start or the pool did not come up in time.
        """
        self.begin()
        return self.ready()

    def begin(self) -> None:
        """Start the supervisor and its ranks without waiting for them: they import torch and
        Triton and set up their process group while the caller does other work; ``ready`` (or the
        next ``request``) waits. Started from the caller's thread: the ranks die with it
        (``PR_SET_PDEATHSIG`` follows the thread that started a process)."""
        self.close()
        self.starts += 1
        folder = Path(self.folder) / f"pool{self.starts}"
        folder.mkdir(parents=True, exist_ok=True)
        settings = {"world_size": self.world_size, "device": self.device, "heap_bytes": int(self.heap_bytes),
                    "folder": str(folder.resolve()), "max_spins": self.max_spins}
        replace_file(folder / "settings.json", json.dumps(settings).encode("utf-8"))   # a link there replaced (#41)
        env = sandbox.worker_env(PYTHONUNBUFFERED="1", PYTHONDONTWRITEBYTECODE="1", TMPDIR=str(folder.resolve()),
                                 TRITON_INTERPRET="1" if self.device == "cpu" else "0",
                                 NCCL_NVLS_ENABLE="0", TORCH_SYMM_MEM_DISABLE_MULTICAST="1",
                                 NVSHMEM_DISABLE_NVLS="1")
        if self.isolate_network:
            env.update(NCCL_SOCKET_IFNAME="lo", GLOO_SOCKET_IFNAME="lo")
        # as verification workers, without their memory and CPU-time limits (CUDA reserves far more
        # address space than it uses; the pool lives for the run); outside the namespaces on retry;
        # writing only into the pool's folder (the store, the heaps, the logs) and shared memory
        limits = sandbox.Limits(address_space_bytes=None, cpu_seconds=None, isolate_network=self.isolate_network,
                                isolate_processes=self.isolate_network, drop_admin=True,
                                writable=(str(folder),), shared_memory=True)
        command = sandbox.python_command("-m", "swizzleperf.agent.distributed.rank_pool", "serve",
                                          str(folder / "settings.json"))
        replace_file(folder / "supervisor.log", b"")   # a new empty log, then appended to: a link or pipe replaced
        with open(folder / "supervisor.log", "a") as log:
            try:
                self._process = sandbox.start(command, folder, env, limits, stdin=subprocess.PIPE,
                                              stdout=subprocess.PIPE, stderr=log, text=True,
                                              errors="replace")   # a line that is not UTF-8 stops no reader
            except sandbox.Unboxed as exc:
                raise PoolError(str(exc)) from None
        self._lines = queue.Queue()
        threading.Thread(target=_read_lines, args=(self._process.stdout, self._lines), daemon=True).start()
        self._starting = (folder, time.monotonic())

    def ready(self) -> dict:
        """Wait for the ranks started by ``begin``; returns the supervisor's ``ready`` message
        (``{}`` where they were ready already). Where the ranks cannot start inside the box's
        namespaces (NCCL or gloo find no interface, a handle exchange is refused), they are
        started once more outside them (limits, environment and process group kept), and
        ``note`` says so.

        Raises:
            PoolError: a rank failed to start or the pool did not come up in time.
        """
        if self._starting is None:
            return {}
        try:
            return self._await_ready()
        except PoolError as first:
            if not self.isolate_network:
                raise
            self.isolate_network = False
            self.begin()
            ready = self._await_ready()
            self.note = (f"the ranks run outside the box's namespaces (limits and environment kept): in "
                         f"them they did not start ({first})")
            return ready

    def _await_ready(self) -> dict:
        folder, began = self._starting
        self._starting = None
        ready = self._receive(START_TIMEOUT_S + GRACE_S)
        if ready is None or ready.get("event") != "ready":
            reason = (ready or {}).get("reason") or f"no answer within {START_TIMEOUT_S:.0f} s"
            self.close()
            raise PoolError(f"the {self.world_size} rank processes ({self.device}) did not start: {reason} "
                            f"(logs in {folder})")
        self.start_seconds.append(time.monotonic() - began)
        self.device_name = ready.get("device", "")
        return ready

    def request(self, body: dict, timeout_s: float) -> dict:
        """Send ``body`` to every rank; the combined answer (module docstring). A broken pool is
        closed here (the next request starts a fresh one). Never raises for the candidate's
        faults; raises PoolError only when a fresh pool cannot start."""
        if self._starting is not None:
            self.ready()
        elif not self.alive:
            self.start()
        self._process.stdin.write(json.dumps({**body, "deadline_s": timeout_s}) + "\n")
        self._process.stdin.flush()
        answer = self._receive(timeout_s + GRACE_S)
        if answer is None:
            answer = {"verdict": "DEADLOCK", "broken": True,
                      "reason": f"the rank pool did not answer within {timeout_s + GRACE_S:.0f} s"}
        if answer.get("broken"):
            self.close()
        return answer

    def close(self) -> None:
        """Stop the supervisor and every rank (every process of its box: :func:`sandbox.stop`)."""
        self._starting = None
        if self._process is None:
            return
        process, self._process = self._process, None
        sandbox.stop(process)   # the box's init ends its PID namespace: a rank that left the group dies too
        for stream in (process.stdin, process.stdout):
            try:
                stream.close()
            except OSError:
                pass

    def _receive(self, timeout_s: float) -> dict | None:
        try:
            return self._lines.get(timeout=timeout_s)
        except queue.Empty:
            return None

    def __enter__(self) -> "RankPool":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _read_lines(stream, lines: queue.Queue) -> None:
    """The supervisor's protocol messages (it runs in the box, beside the ranks' code): a line that
    is not a JSON object is a broken pool, said in one line, never an exception in this thread."""
    for line in stream:
        if line.startswith(_PROTOCOL):
            try:
                message = json.loads(line[len(_PROTOCOL):])
            except ValueError as exc:
                message = exc
            if not isinstance(message, dict):
                message = {"event": "failed", "verdict": "CRASH", "broken": True,
                           "reason": f"the rank pool's supervisor wrote a message that is not a JSON object "
                                     f"({line[len(_PROTOCOL):][:80].strip()!r})"}
            lines.put(message)


# --------------------------------------------------------------------------- the supervisor
def serve(settings_path: str) -> int:
    """The supervisor's main loop (in the box): start the ranks, then forward requests."""
    import multiprocessing
    from multiprocessing.connection import wait
    from swizzleperf.agent.distributed import rank_worker

    settings = json.loads(Path(settings_path).read_text())
    world = settings["world_size"]
    _loopback_up()
    context = multiprocessing.get_context("spawn")
    conns, procs = [], []
    for rank in range(world):
        parent, child = context.Pipe()
        process = context.Process(target=rank_worker.rank_main, args=(rank, settings, child), daemon=True)
        process.start()
        child.close()
        conns.append(parent)
        procs.append(process)
    folder = Path(settings["folder"])
    started = _collect(conns, procs, START_TIMEOUT_S, folder, wait, starting=True)
    if started.get("verdict") != "PASS":
        _say({"event": "failed", "reason": started["reason"]})
        return 1
    _say({"event": "ready", "device": started["answers"][0].get("device", ""), "world_size": world})
    for line in sys.stdin:
        request = json.loads(line)
        for conn in conns:
            conn.send(request)
        answer = _collect(conns, procs, float(request.get("deadline_s", 600)), folder, wait)
        _say(_combine(answer))
        if answer.get("broken"):
            return 1
    for conn in conns:
        try:
            conn.send({"op": "stop"})
        except OSError:
            pass
    return 0


def _collect(conns: list, procs: list, deadline_s: float, folder: Path, wait, starting: bool = False) -> dict:
    """Every rank's answer, or the first fatal one, a dead rank, or the deadline passed."""
    answers, pending, phases = {}, set(range(len(conns))), {}
    stop = time.monotonic() + deadline_s
    by_object = {id(c): r for r, c in enumerate(conns)} | {id(p.sentinel): r for r, p in enumerate(procs)}
    while pending:
        left = stop - time.monotonic()
        if left <= 0:
            return _hang(sorted(pending), phases, deadline_s, starting)
        ready = wait([conns[r] for r in pending] + [procs[r].sentinel for r in pending], timeout=min(left, 1.0))
        for item in ready:
            rank = by_object.get(id(item))
            if rank is None or rank not in pending:
                continue
            if item is conns[rank] and conns[rank].poll():
                try:
                    answer = conns[rank].recv()
                except EOFError:
                    continue
                if answer.get("event") == "phase":
                    phases[rank] = answer
                    continue
                if answer.get("event") == "failed" or answer.get("fatal"):
                    return {"verdict": answer.get("verdict", "RUNTIME_ERROR"), "broken": True, "ranks": [rank],
                            "reason": answer.get("reason") or f"rank {rank} failed"}
                answers[rank] = answer
                pending.discard(rank)
            elif not procs[rank].is_alive():
                code = procs[rank].exitcode
                how = f"signal {-code}" if code is not None and code < 0 else f"exit code {code}"
                return {"verdict": "RUNTIME_ERROR", "broken": True, "ranks": [rank],
                        "reason": f"rank {rank} died ({how}): {_last_line(folder / f'rank{rank}.log')}"}
    return {"verdict": "PASS", "answers": [answers[r] for r in range(len(conns))]}


def _hang(pending: list, phases: dict, deadline_s: float, starting: bool) -> dict:
    """The DEADLOCK of ranks that did not answer in time, blamed on those not waiting for their
    peers (the others wait for them), each with what it was last doing."""
    stuck = [r for r in pending if not phases.get(r, {}).get("waiting")] or pending
    waiting = [r for r in pending if r not in stuck]
    last = "; ".join(f"rank {r}: {phases[r]['text']}" for r in pending if r in phases)
    names = ", ".join(str(r) for r in stuck)
    reason = (f"rank(s) {names} did not {'start' if starting else 'finish'} within {deadline_s:.0f} s (a hang: "
              f"a wait on a peer that never comes, or a loop without end)"
              + (f"; rank(s) {', '.join(map(str, waiting))} waited for them" if waiting else "")
              + (f"; last seen: {last}" if last else ""))
    return {"verdict": "DEADLOCK", "broken": True, "ranks": stuck, "reason": reason}


def _combine(collected: dict) -> dict:
    """One answer for the agent from every rank's (see the module docstring)."""
    if "answers" not in collected:
        return collected
    answers = collected["answers"]
    failed = [a for a in answers if a.get("verdict") != "PASS"]
    if failed:
        return {"verdict": failed[0]["verdict"], "reason": failed[0]["reason"], "broken": False,
                "ranks": [a["rank"] for a in failed]}
    first = answers[0]
    return {**{k: v for k, v in first.items() if k not in ("rank", "fatal")}, "broken": False,
            "seconds": max(a.get("seconds", 0.0) for a in answers)}


def _say(message: dict) -> None:
    sys.stdout.write(_PROTOCOL + json.dumps(message, default=float) + "\n")
    sys.stdout.flush()


def _loopback_up() -> None:
    """Bring the loopback interface up (in a fresh network namespace it is down); left as is where
    it is up already or the process may not change it."""
    import fcntl
    import socket
    import struct
    siocgifflags, siocsifflags, iff_up = 0x8913, 0x8914, 0x1
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            request = struct.pack("16sh14s", b"lo", 0, b"")
            flags = struct.unpack("16sh14s", fcntl.ioctl(sock, siocgifflags, request))[1]
            if not flags & iff_up:
                fcntl.ioctl(sock, siocsifflags, struct.pack("16sh14s", b"lo", flags | iff_up, b""))
    except OSError as exc:
        print(f"rank pool: loopback left as it is: {exc}", file=sys.stderr)


def _last_line(path: Path) -> str:
    try:
        lines = [line.strip() for line in path.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return "(no log)"
    return lines[-1][:400] if lines else "(nothing in its log)"


# --------------------------------------------------------------------------- command line
def main(argv: list[str]) -> int:
    """``serve SETTINGS``: the supervisor (``RankPool.begin`` starts it in the box)."""
    if argv[:1] == ["serve"] and len(argv) == 2:
        return serve(argv[1])
    print("usage: python -m swizzleperf.agent.distributed.rank_pool serve SETTINGS (started by the "
          "optimizer; to run one configuration: python -m swizzleperf.agent.distributed run --help)",
          file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
