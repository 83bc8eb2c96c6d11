"""Capture one launch of a user's kernel from a run of the user's own command (issue #15), and
replay it: the ``KernelSpec`` of a generated module (agent/capture/user_kernel.py) is built from it.

How: the command runs once in a subprocess whose ``PYTHONPATH`` starts with a temporary folder
holding ``sitecustomize.py``, a copy of agent/capture/capture_hook.py (which says what it patches and
records); environment variables name the kernel and the folder the snapshot goes to. The hook
snapshots the launch with the most programs: its grid, every argument by parameter name, the
launch options and the autotuner's choice, the tensors before the launch (the inputs: data-
dependent kernels need the real index arrays) and the tensors it changed after it (the outputs,
the reference). ``swizzleperf`` itself need not be importable by the app's interpreter.

A capture folder holds ``launch.json``, ``tensors.pt`` (torch.save), ``app.log`` and, once lifted,
``lift.json``. ``spec_fields`` turns it into the fields of a KernelSpec: inputs are the captured
ones whatever the seed (fresh random inputs cannot be made for arbitrary arguments), the outputs
are poisoned before each launch as usual, the launch calls the kernel's JITFunction with the
captured grid, arguments and options (bypassing the autotuner), the reference is the captured
outputs. The agent's own process builds that spec from the folder alone (``captured_spec``), never
importing the generated module (issue #41): only the boxed workers do, and launch it.
"""
from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from swizzleperf import sandbox
from swizzleperf.agent.capture import capture_hook, cuda_on_cpu
from swizzleperf.agent.capture.interpreter_gaps import (fatal_signal, missing_construct, spinning,
                                                        traceback_frames, where_stopped)
from swizzleperf.agent.capture.lift import Launch
from swizzleperf.agent.capture.schema import CaptureError, LaunchFile, LiftFile, read, read_seen
from swizzleperf.agent.verification.load import build_captured_specs_with
from swizzleperf.agent.verification.stages import poison_value
from swizzleperf.kernels.spec import KernelLoadError, KernelSpec
from swizzleperf.sandbox.write_back import replace_file

log = logging.getLogger(__name__)

APP_TIMEOUT_S = 900.0
SYNTHETIC_OUTPUT = "swizzleperf_output"   # where a read-modify-write output is copied for the verifier
SLOW_LAUNCH_S = 10.0   # an interpreted launch this slow is said on screen
TRACE_FALLBACK = "trace_fallback.txt"     # written where the run's simulator had no access model


class AppFailedError(CaptureError):
    """The app itself failed: a non-zero exit of its own (the message quotes its last line)."""


class AppTimeoutError(CaptureError):
    """The app did not finish within the time it was given; it was stopped."""


class InterpreterGapError(CaptureError):
    """The app stopped because the installed Triton's interpreter lacks a construct it uses
    (``tl.make_block_ptr`` in 3.9): not the app's own failure; the message names the construct,
    where the app used it, the Triton versions that have it and what to install."""


class HookFailedError(CaptureError):
    """The app stopped on an error raised in our hook's code inside its process (a defect of ours)."""


@dataclass(frozen=True)
class Capture:
    """One captured launch: its folder and ``launch.json``."""

    folder: Path
    launch: dict

    @property
    def kernel_file(self) -> Path:
        return Path(self.launch["file"])

    def lift_launch(self) -> Launch:
        """What agent/capture/lift.py needs: grid, scalar values, pointer names, globals."""
        params = self.launch["params"]
        return Launch(grid=tuple(self.launch["grid"]),
                      values={p["name"]: p["value"] for p in params if p["kind"] == "scalar"},
                      pointers=frozenset(p["name"] for p in params if p["kind"] in ("tensor", "none", "tensor_descriptor")),
                      globals=dict(self.launch.get("globals", {})), line=self.launch["line"])

    def describe(self) -> str:
        """One line: which launch, its grid, the autotuner's choice."""
        tuned = self.launch.get("autotuned")
        choice = ""
        if tuned:
            settings = {**tuned["kwargs"], "num_warps": tuned["num_warps"], "num_stages": tuned["num_stages"]}
            choice = ", autotuned config " + ", ".join(f"{k}={v}" for k, v in settings.items())
            choice += f" ({tuned['choice']})" if tuned.get("choice") else ""
        grid = "x".join(map(str, self.launch["grid"]))
        return (f"captured {self.launch['kernel']} ({Path(self.launch['file']).name}:{self.launch['line']}): "
                f"launch {self.launch['launch_index']} of {self.launch['launches_seen']}, grid {grid} "
                f"({self.launch['programs']} programs), outputs "
                f"{', '.join(o['name'] for o in self.launch['outputs'])}{choice}{self._slow()}")

    def _slow(self) -> str:
        """Where one launch is slow under the interpreter: how slow (verification runs it again for
        the baseline and each candidate; the simulator's trace runs sampled programs only)."""
        wall = self.launch.get("launch_wall_s") or 0.0
        if not (self.launch.get("interpreter") and (wall >= SLOW_LAUNCH_S or self.launch.get("unreplayed"))):
            return ""
        skipped = (" (so the snapshot did not replay it to learn which outputs it fully overwrites: all start "
                   "from their captured contents, none poisoned)" if self.launch.get("unreplayed") else "")
        return (f"; one launch takes {wall:.0f} s under the interpreter{skipped}: verification launches it again "
                f"for the baseline and each candidate, the simulator traces sampled programs only")


def capture(app: str, kernel: str, captures_dir: Path, timeout_s: float = APP_TIMEOUT_S,
            cwd: Path | None = None) -> Capture:
    """Run ``app`` (a shell command) once with the hook and keep the snapshot of ``kernel``'s
    largest launch in ``captures_dir/<kernel>-<hash>/``.

    Raises:
        CaptureError: the command failed or timed out, never launched the kernel, or the launch
            cannot be replayed (an argument of a type the snapshot cannot hold, no output).
    """
    if not (kernel.isidentifier() and kernel.isascii()):
        raise CaptureError(f"--kernel must be the kernel function's name (a Python identifier), got {kernel!r}")
    captures_dir = Path(captures_dir).resolve()
    captures_dir.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".capture-", dir=captures_dir))
    try:
        run_app(app, {capture_hook.KERNEL_ENV: kernel}, work, timeout_s, cwd)
        launch = _pick_launch(app, kernel, work)
        folder = captures_dir / f"{kernel}-{_digest(launch, work)}"
        shutil.rmtree(folder, ignore_errors=True)
        (work / f"launch-{launch['pid']}.json").rename(work / "launch.json")
        (work / f"tensors-{launch['pid']}.pt").rename(work / "tensors.pt")
        launch["app"], launch["cwd"] = app, str((cwd or Path.cwd()).resolve())
        notices = sorted(work.glob(f"{cuda_on_cpu.RECORD_PREFIX}*"))
        launch["cuda_on_cpu"] = cuda_on_cpu.SCREEN_LINE if notices else None   # the file's presence, not its text
        # renamed over: the app's own launch-<pid>.json may be a link, never written through
        replace_file(work / "launch.json", json.dumps(launch, indent=1).encode())
        for stale in [*work.glob("launch-*.json"), *work.glob("tensors-*.pt"), *work.glob("seen-*.json"), *notices]:
            stale.unlink()
        work.rename(folder)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return Capture(folder, launch)


def hook_environment(folder: Path, **variables: str) -> dict:
    """The environment of a command run with the hook: ``sitecustomize.py`` in ``folder`` first on
    ``PYTHONPATH``, the given variables set (names from agent/capture/capture_hook.py), and
    agent/capture/cuda_on_cpu.py beside it (the hook imports it)."""
    source = Path(capture_hook.__file__).read_text()
    (folder / "sitecustomize.py").write_text(source + _CHAIN)
    shutil.copyfile(cuda_on_cpu.__file__, folder / f"{capture_hook.CUDA_ON_CPU_MODULE}.py")
    env = sandbox.app_env(**variables)   # no API key or other credential of the agent's
    env.setdefault("PYTHONFAULTHANDLER", "1")   # a crash prints where (interpreter_gaps.fatal_signal reads it)
    env["PYTHONPATH"] = os.pathsep.join([str(folder)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    return env


# The hook replaces any sitecustomize the app's interpreter has: run that one too.
_CHAIN = '''

install()


def _chain_sitecustomize():
    here = os.path.dirname(os.path.abspath(__file__))
    for entry in sys.path[1:]:
        path = os.path.join(entry or ".", "sitecustomize.py")
        if os.path.abspath(entry or ".") != here and os.path.isfile(path):
            with open(path) as f:
                exec(compile(f.read(), path, "exec"), {"__name__": "sitecustomize", "__file__": path})
            return


_chain_sitecustomize()
'''


def run_with_hook(command: str, env: dict, timeout_s: float, cwd: Path | None, log: Path, stuck=None,
                  workdir: Path | None = None) -> int:
    """Run a shell command in the box (sandbox.start): as PID 1 of a PID namespace of its own with
    a fresh ``/proc`` where the OS permits it, so that it sees no process of the agent's (the
    agent's ``/proc/<pid>/environ`` holds the model's API key, issue #41) and everything it starts
    ends with it; the network and the file system as they are (the app is the user's own code),
    but for the agent's own files (``agent_owned_paths``: its code, its interpreter's packages, its
    caches, ``workdir``), read-only to it in its mount namespace (#41 round twelve: the agent imported
    modules from disk after an app had been free to rewrite them), and writable still: the capture
    folder (the hook's ``DIR_ENV``), the working folder ``cwd`` and the temporary folders. Where the OS
    permits no namespace, the app can write them (one line says so, once). ``workdir`` None: the
    folder two above ``log``'s where ``log`` lies in ``WORKDIR/captures/*``, ``WORKDIR/profiles/*`` or
    ``WORKDIR/runs/*`` (``run_app``'s capture folders, a run's folder), else none.
    Every process of the box is ended when the command exits, on timeout or on interrupt
    (``sandbox.stop``); stdout and stderr to ``log``, capped (``CappedLog``). Returns the exit code.

    The box's init is the agent's own interpreter: it starts with the agent's ``PYTHONPATH`` (the
    hook is not imported there), the command with ``env``'s.

    Raises:
        subprocess.TimeoutExpired: past ``timeout_s`` seconds.
        AppMovedAgentFilesError: once the app has ended, one of the agent's folders is no longer the
            one it was (the app moved a folder above it aside and put another in its place).
    """
    init_env = {k: v for k, v in env.items() if k != "PYTHONPATH"}
    if os.environ.get("PYTHONPATH"):
        init_env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    init_env[_APP_PYTHONPATH] = env.get("PYTHONPATH", "")
    shell = [_SH, "-c", f'if [ -n "${_APP_PYTHONPATH}" ]; then PYTHONPATH="${_APP_PYTHONPATH}"; export PYTHONPATH; '
                        f'else unset PYTHONPATH; fi; unset {_APP_PYTHONPATH}; exec {_SH} -c "$1"', "sh", command]
    workdir = workdir if workdir is not None else _workdir_of(log)
    protected = agent_owned_paths(workdir)
    own = [env.get(capture_hook.DIR_ENV), str(cwd or Path.cwd()), tempfile.gettempdir(), "/tmp", env.get("TMPDIR"),
           "/dev/shm"]
    _refuse_read_back_folders_the_app_writes(workdir, [p for p in own if p])
    if _stop_importing_from(p for p in own if p) and "PYTHONPATH" in init_env:
        init_env["PYTHONPATH"] = os.environ.get("PYTHONPATH", "")
    before = _identities(protected)
    with CappedLog(log) as out:   # an app that prints for ever: LOG_CAP_BYTES on disk (#41)
        limits = sandbox.Limits(isolate_network=False, isolate_processes=True,   # files: the agent's own limit
                                open_files=resource.getrlimit(resource.RLIMIT_NOFILE)[0],
                                writable=None,   # the user's own code: the file system as it is, but
                                read_only=tuple(protected), still_writable=tuple(p for p in own if p))
        proc = sandbox.start(shell, cwd, init_env, limits, stdout=out.fd, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL)
        out.started()
        try:
            _wait_unreaped(proc, timeout_s, stuck)
        finally:
            sandbox.stop(proc)   # every process of its box (one that left its group too)
            moved = [path for path, seen in before.items() if _identity(path) != seen]
            if moved:
                raise AppMovedAgentFilesError(
                    f"the app replaced {', '.join(moved[:3])}{', ...' if len(moved) > 3 else ''} (a folder of this "
                    f"tool's own: its code, its Python's packages, its caches or its record) with another: "
                    f"stopped; check that folder before running swizzleperf again")
        return proc.returncode


class WorkdirWritableToAppError(CaptureError):
    """The workdir, or a cache the agent reads back, is a folder the app must be able to write (its
    working folder, a temporary folder): a tie the box resolves as writable (#41 round fourteen:
    ``--workdir .`` let the app delete the runs and empty the record)."""


def _refuse_read_back_folders_the_app_writes(workdir, writable: list) -> None:
    """Raise ``WorkdirWritableToAppError`` where ``workdir``, the agent's cache folder or the
    simulation cache's is one of ``writable`` (the same folder, by its real path)."""
    from swizzleperf.profiling import l2sim
    open_to_app = {os.path.realpath(p) for p in writable}
    for what, path in (("the workdir", workdir), ("the cache folder", _cache_folder()),
                       ("the simulation cache (SWIZZLEPERF_SIM_CACHE)", l2sim.cache_dir())):
        if path is not None and os.path.realpath(path) in open_to_app:
            raise WorkdirWritableToAppError(
                f"{what} {path} is a folder the app must be able to write (its working folder or a "
                f"temporary one), so the record, runs and caches kept there would be writable to it: "
                f"give them a folder of their own (--workdir; the default is .swizzleperf)")


class AppMovedAgentFilesError(CaptureError):
    """The app moved one of the agent's own folders aside and put another in its place (a folder
    above a read-only one can be renamed): the agent stops rather than import or read from it."""


def agent_owned_paths(workdir: Path | None = None) -> list:
    """The folders the agent imports code from or reads back after the user's app has run, made
    read-only to the app (``run_with_hook``): the package's own folders (``_package_folders``) and
    its notebook's (``NOTEBOOKS``; where it is not there, the box leaves it out),
    its interpreter's prefixes and site-packages (``_interpreter_folders``), its caches
    (``$XDG_CACHE_HOME/swizzleperf``, else ``~/.cache/swizzleperf``, made here where missing so that
    the app cannot plant one; the simulation cache's folder where ``SWIZZLEPERF_SIM_CACHE`` names
    another) and ``workdir`` (the record, ``runs/``, ``captures/``) where given. Absolute paths, in
    that order, without duplicates; some may not exist (the box leaves those out)."""
    from swizzleperf.profiling import l2sim
    caches = _cache_folder()
    try:
        caches.mkdir(parents=True, exist_ok=True)
    except OSError:
        pass
    found = [*_package_folders(), str(NOTEBOOKS), *_interpreter_folders(), *_import_folders(), str(caches)]
    simulations = l2sim.cache_dir()
    if simulations is not None:
        found.append(str(simulations))
    if workdir is not None:
        found.append(str(workdir))
    out = []
    for path in found:
        path = os.path.abspath(path)
        if path != "/" and path not in out:
            out.append(path)
    return out


def _cache_folder() -> Path:
    """The agent's cache folder: ``$XDG_CACHE_HOME/swizzleperf``, else ``~/.cache/swizzleperf``."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "swizzleperf"


#: The folder of the notebook ``swizzleperf notebook`` runs, with the user's environment (eval/notebook.py's
#: ``NOTEBOOK``, a layer above: the same path, tested): read-only to the app (#41 round fourteen).
NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
#: The package's top-level folders (pyproject.toml's ``package-dir``; tests/test_layers.py's PACKAGES).
_SUBPACKAGES = ("agent", "eval", "hwspecs", "kernels", "profiling", "prompts", "sandbox")


def _package_folders() -> list:
    """The folders of this package's top-level subpackages, as Python finds them (an editable
    install's are the repository's ``agent/``, ``sandbox/``...; an installed one's lie in
    site-packages)."""
    import importlib.util
    out = []
    for name in _SUBPACKAGES:
        try:
            spec = importlib.util.find_spec(f"swizzleperf.{name}")
        except (ImportError, ValueError):
            continue
        if spec is not None:
            out += [str(p) for p in (spec.submodule_search_locations or []) if os.path.isdir(p)]
    return out


def _interpreter_folders() -> list:
    """Where this interpreter's own modules and packages lie: its prefixes (a virtual environment's
    and the Python it was made from: the standard library), its site-packages and the user's."""
    import site
    import sysconfig
    out = [sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix]
    out += [sysconfig.get_paths().get(key) for key in ("stdlib", "platstdlib", "purelib", "platlib")]
    out += list(getattr(site, "getsitepackages", lambda: [])())
    if site.ENABLE_USER_SITE:
        out.append(site.getusersitepackages())
    return [p for p in out if p]


def _import_folders() -> list:
    """The folders this process imports modules from, and hands to the boxes' inits and workers: each
    folder on ``sys.path`` (``""``: the working folder) and on ``PYTHONPATH`` (a folder another
    editable install's ``.pth`` adds, the user's ``PYTHONPATH=...``), absolute and real. A module an
    app planted in one (a ``resource.py``, a ``json.py``) would run in the agent at its next import,
    or in the init of its next box, outside the box (#41, round thirteen)."""
    out = []
    for entry in [*sys.path, *os.environ.get("PYTHONPATH", "").split(os.pathsep)]:
        if not isinstance(entry, str):
            continue
        path = os.path.realpath(entry or os.getcwd())   # an empty entry: the working folder, as Python reads it
        if os.path.isdir(path) and path not in out:
            out.append(path)
    return out


def _stop_importing_from(writable) -> list:
    """Of this process's import folders (``_import_folders``), those the app is left free to write (one
    of ``writable``, the app's own folders: its working folder, the temporary ones) are dropped from
    ``sys.path`` and from ``PYTHONPATH`` (the inits' and the workers'), with one line: a module the
    app leaves there must not be imported by the agent after. Returns the folders dropped."""
    writable = {os.path.realpath(p) for p in writable}
    dropped = [p for p in _import_folders() if p in writable]
    if not dropped:
        return []
    sys.path[:] = [e for e in sys.path if not isinstance(e, str) or os.path.realpath(e or os.getcwd()) not in dropped]
    if os.environ.get("PYTHONPATH"):
        kept = [e for e in os.environ["PYTHONPATH"].split(os.pathsep) if os.path.realpath(e or os.getcwd()) not in dropped]
        os.environ["PYTHONPATH"] = os.pathsep.join(kept)
    log.warning("capture: the app may write %s (a folder Python imports from here): swizzleperf imports "
                "nothing from it from now on, in this run", ", ".join(dropped))
    return dropped


def _workdir_of(log: Path) -> Path | None:
    """The workdir ``log`` lies in, where it lies in ``WORKDIR/{captures,profiles,runs}/*/``."""
    folder = Path(log).resolve().parent
    return folder.parent.parent if folder.parent.name in ("captures", "profiles", "runs") else None


def _identity(path: str) -> tuple | None:
    try:
        found = os.stat(path)
    except OSError:
        return None
    return found.st_dev, found.st_ino


def _identities(paths: list) -> dict:
    """``{path: (device, inode)}`` of those of ``paths`` that exist."""
    return {path: seen for path in paths if (seen := _identity(path)) is not None}


_SH = "/bin/sh"
_APP_PYTHONPATH = "SWIZZLEPERF_APP_PYTHONPATH"   # the app's PYTHONPATH (the hook's folder first), past the init


def _wait_unreaped(proc: subprocess.Popen, timeout_s: float, stuck=None) -> None:
    """Wait for ``proc`` to exit without reaping it: until the group is ended, its id (``proc``'s
    pid) cannot go to another process. ``stuck()``, asked every few seconds where given, ends the
    wait early as a timeout (a program spinning for one the interpreter will never run).

    Raises:
        subprocess.TimeoutExpired: past ``timeout_s``, or stuck (its ``timeout`` the seconds waited).
    """
    started = time.monotonic()
    asked = started
    while os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT | os.WNOHANG) is None:
        now = time.monotonic()
        if now - started > timeout_s:
            raise subprocess.TimeoutExpired(proc.args, timeout_s)
        if stuck is not None and now - asked > 5.0:
            asked = now
            if stuck():
                raise subprocess.TimeoutExpired(proc.args, now - started)
        time.sleep(0.02)


#: CUDA's errors of a kernel that are reported at a later call, not at its launch (the CUDA runtime
#: API's cudaErrorIllegalAddress, cudaErrorAssert, cudaErrorMisalignedAddress, cudaErrorLaunchFailure,
#: cudaErrorIllegalInstruction), as torch prints them.
ASYNC_CUDA_ERRORS = ("an illegal memory access was encountered", "device-side assert triggered",
                     "misaligned address", "unspecified launch failure", "an illegal instruction was encountered")


def async_cuda_error(log_text: str) -> str | None:
    """The asynchronous CUDA error a log reports, if any (``ASYNC_CUDA_ERRORS``): where it surfaces
    is the first synchronisation after the faulting kernel, not the code at fault."""
    return next((e for e in ASYNC_CUDA_ERRORS if e in log_text), None)


#: What one log of an app's output (``app.log``, an ``eval --apps`` row's ``worker.log``) keeps on
#: disk (#41): its first LOG_HEAD_BYTES and its latest output, never more than LOG_TAIL_BYTES of it
#: (at least half of that once output was dropped), with one line between them saying how many bytes
#: were dropped there. The reasons are read from the last 64 KiB (``log_tail``), always kept.
LOG_HEAD_BYTES = 1 << 20
LOG_TAIL_BYTES = 3 << 20
LOG_CAP_BYTES = LOG_HEAD_BYTES + LOG_TAIL_BYTES   # + the one line that says what was dropped
LOG_DRAIN_S = 2.0   # after the process ended: how long a descendant holding its output open is read


class CappedLog:
    """A process's stdout and stderr written to ``path``, capped (``LOG_CAP_BYTES``): pass ``fd``
    to Popen as ``stdout``, call ``started()`` once it is started; leaving the ``with`` reads what is
    left and closes the log. A thread reads the pipe as the process writes it (it never waits on a
    full pipe) and writes the head, then the tail; when the tail outgrows LOG_TAIL_BYTES its last
    half is moved up behind the head and the line saying how many bytes were dropped. The log is
    never read whole; memory holds the latest ``RECENT_BYTES`` of output (and half the tail while
    it is moved).

    Where a write fails (the disk is full, #41: the log had stopped there, and the reason read
    from its end was old output), the tail is given up, its blocks freed, and the latest output is
    written from memory behind the head and the line saying what was dropped and why, as much of
    it as fits; while writes keep failing each new piece of output is tried so, and once more when
    the log is closed: the log ends with the latest output wherever the disk takes it."""

    #: The latest output held in memory: what ``log_tail`` reads the reasons from.
    RECENT_BYTES = 1 << 16
    #: The least of that latest output tried behind the head after a failed write.
    LEAST_RECENT_BYTES = 256

    def __init__(self, path: Path, head: int = LOG_HEAD_BYTES, tail: int = LOG_TAIL_BYTES):
        self.head, self.tail = head, tail
        replace_file(path, b"")   # a new empty file: a link or a pipe planted at a run folder's log replaced (#41)
        self.file = open(path, "r+b", buffering=0)
        self.read_fd, self.fd = os.pipe()
        self.kept_head = self.tail_at = self.tail_len = self.dropped = self.received = 0
        self.recent = bytearray()
        self.failed: str | None = None   # why a write failed, once one did
        self.stale = False               # the file lacks the latest output: written anew on the next write
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._pump, name=f"log {Path(path).name}", daemon=True)

    def __enter__(self) -> "CappedLog":
        self.thread.start()
        return self

    def started(self) -> None:
        """The process holds the pipe's write end: this process's copy is closed (its end is EOF)."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def __exit__(self, *exc) -> None:
        self.started()
        self.thread.join(LOG_DRAIN_S)   # a descendant of the process may hold the pipe open: not for ever
        self.stop.set()
        self.thread.join()
        os.close(self.read_fd)
        if self.stale:
            self._rewrite()
        self.file.close()

    def _pump(self) -> None:
        sandbox.pump(self.read_fd, self.write, self.stop)   # the one reader of a command's output pipe

    def dropped_line(self) -> bytes:
        """The line between the head and the tail: how many bytes of output were left out there."""
        why = f" (writing this log failed: {self.failed})" if self.failed else ""
        return (f"\n[swizzleperf: {self.dropped} bytes of output dropped here{why}; this log keeps the first "
                f"{self.head} bytes and the last, {self.head + self.tail} bytes at most]\n").encode()

    def write(self, data: bytes) -> None:
        """``data`` appended to the log, within its cap; a failed write (``OSError``) handled as the
        class docstring says, never raised (the output is still read, so the process goes on)."""
        self.received += len(data)
        self.recent += data[-self.RECENT_BYTES:]
        del self.recent[:-self.RECENT_BYTES]
        if self.stale:
            self._rewrite()
            return
        try:
            self._append(data)
        except OSError as exc:   # the disk is full, say
            self.failed = exc.strerror or type(exc).__name__
            self._rewrite()

    def _append(self, data: bytes) -> None:
        if self.kept_head < self.head:
            first = data[:self.head - self.kept_head]
            self._put(self.kept_head, first)
            self.kept_head += len(first)
            self.tail_at = self.kept_head
            data = data[len(first):]
        if not data:
            return
        if self.tail_len + len(data) <= self.tail:
            self._put(self.tail_at + self.tail_len, data)
            self.tail_len += len(data)
            return
        keep = max(0, self.tail // 2 - len(data))   # of the tail so far; then the new data
        self.file.seek(self.tail_at + self.tail_len - keep)
        kept = self.file.read(keep) if keep else b""
        data = data[-self.tail:]
        self.dropped = self.received - self.kept_head - len(kept) - len(data)
        line = self.dropped_line()
        self._put(self.head, line + kept + data)
        self.file.truncate()
        self.tail_at, self.tail_len = self.head + len(line), len(kept) + len(data)

    def _rewrite(self) -> None:
        """After a failed write: the file cut back to the head (what of it was written), then the
        line saying what was dropped and as much of the latest output as the disk takes, a quarter
        as much at each try; where none fits, the head alone, ``stale`` until a write succeeds."""
        self.head = self.kept_head
        size = min(len(self.recent), self.received - self.kept_head, self.tail)
        while True:
            self.dropped = self.received - self.kept_head - size
            line = self.dropped_line()
            try:
                self.file.truncate(self.head)
                self._put(self.head, line + bytes(self.recent[len(self.recent) - size:]))
            except OSError:
                if size > self.LEAST_RECENT_BYTES:
                    size = max(self.LEAST_RECENT_BYTES, size // 4)
                    continue
                try:
                    self.file.truncate(self.head)
                except OSError:
                    pass
                self.tail_at, self.tail_len, self.stale = self.head, 0, True
                self.dropped = self.received - self.kept_head
                return
            self.tail_at, self.tail_len, self.stale = self.head + len(line), size, False
            return

    def _put(self, at: int, data: bytes) -> None:
        """``data`` written whole at ``at`` (a short write, as on a full disk, goes on, then raises)."""
        self.file.seek(at)
        view = memoryview(data)
        while view:
            written = self.file.write(view)
            if not written:
                raise OSError("the log's write wrote nothing")
            view = view[written:]


def log_tail(log: Path, limit: int = 65536) -> str:
    """The last ``limit`` bytes of ``log`` as text: an app may print gigabytes, never read whole (#41)."""
    with open(log, "rb") as f:
        f.seek(max(0, f.seek(0, os.SEEK_END) - limit))
        return f.read().decode(errors="replace")


def last_line(log: Path) -> str:
    lines = [line.strip() for line in log_tail(log).splitlines() if line.strip()]
    return lines[-1][:300] if lines else "(no output)"


def interpreter_variables() -> dict:
    """``{"TRITON_INTERPRET": "1"}`` where no GPU is detected and the caller's environment does not
    set ``TRITON_INTERPRET`` itself (then it is respected), else ``{}``: the user's app (and every
    process it starts) runs its kernels through Triton's interpreter on a CPU-only machine, as the
    README's CPU command promises, with nothing exported."""
    if os.environ.get("TRITON_INTERPRET") is not None:
        return {}
    from swizzleperf.hwspecs import detect_device
    return {} if detect_device() is not None else {"TRITON_INTERPRET": "1"}


def run_app(app: str, variables: dict, work: Path, timeout_s: float, cwd: Path | None,
            command: str | None = None) -> None:
    """Run ``app`` once with the hook, switched on by ``variables`` (capture_hook's names; its
    folder is ``work``), the interpreter where no GPU is; ``command`` (the app wrapped in a tracer)
    runs in its place where given. Output in ``work/app.log``.

    Raises:
        CaptureError: the app failed or timed out (one line).
    """
    hook_dir = work / "hook"
    hook_dir.mkdir()
    env = hook_environment(hook_dir, **variables, **{capture_hook.DIR_ENV: str(work)}, **interpreter_variables())
    log = work / "app.log"
    try:
        code = run_with_hook(command or app, env, timeout_s, cwd, log, stuck=lambda: spinning(work))
    except subprocess.TimeoutExpired:
        where, spin = where_stopped(work)
        if spin:
            raise InterpreterGapError(f"`{app}` cannot finish under Triton's interpreter: {spin}") from None
        raise AppTimeoutError(f"`{app}` did not finish within {timeout_s:.0f} s; it was stopped"
                              f"{f' ({where})' if where else ''} (its output: {log})") from None
    finally:
        shutil.rmtree(hook_dir, ignore_errors=True)
    if code != 0:
        last = last_line(log)
        frame = _hook_frame(log, hook_dir)
        tail = log_tail(log)
        if frame and (fault := async_cuda_error(tail)):
            raise AppFailedError(f"`{app}` failed (exit code {code}): CUDA error '{fault}' from a kernel it "
                                 f"launched, reported at the next synchronisation, which was swizzleperf's "
                                 f"hook's ({frame}); with CUDA_LAUNCH_BLOCKING=1 the app stops at the kernel")
        if frame:
            raise HookFailedError(f"`{app}` stopped on an error in swizzleperf's hook inside it ({frame}): {last}")
        gap = missing_construct(log_tail(log), _triton_version())
        if gap:
            raise InterpreterGapError(f"`{app}` cannot run here (exit code {code}): {gap}")
        crash = fatal_signal(log_tail(log), str(hook_dir))
        if crash:
            raise AppFailedError(f"`{app}` failed (exit code {code}): {crash}")
        hint = ("; no GPU driver: on a CPU-only machine leave TRITON_INTERPRET unset (or set it to 1) and the "
                "app's kernels run through Triton's interpreter" if "active drivers" in last else "")
        withheld = [n for n in sandbox.withheld_from_app() if not n.startswith(sandbox.AGENT_ONLY_PREFIXES)]
        if withheld and not hint:
            hint = (f"; it ran without {', '.join(withheld[:4])}{' ...' if len(withheld) > 4 else ''} "
                    f"(credential-like variables are withheld from the app: list the ones it needs in "
                    f"{sandbox.APP_PASS_ENV}=NAME,NAME)")
        raise AppFailedError(f"`{app}` failed (exit code {code}): {last}{hint}")


def _hook_frame(log: Path, hook_dir: Path) -> str | None:
    """The innermost frame of the app's last traceback where it is in the hook's folder (the error
    was raised by our code in the app's process), as ``file:line``; else None."""
    frames = traceback_frames(log_tail(log))
    if frames and Path(frames[-1][0]).parent == hook_dir:
        return f"{Path(frames[-1][0]).name}:{frames[-1][1]}"
    return None


def _triton_version() -> str | None:
    from importlib import metadata
    try:
        return metadata.version("triton")
    except metadata.PackageNotFoundError:
        return None


def _pick_launch(app: str, kernel: str, work: Path) -> dict:
    """The captured launch with the most programs over the app's processes; refusals as one line."""
    launches = [read(p, LaunchFile) for p in sorted(work.glob("launch-*.json"))]
    seen: dict = {}
    for path in sorted(work.glob("seen-*.json")):
        for name, count in read_seen(path).items():
            seen[name] = seen.get(name, 0) + count
    if not launches and seen.get(kernel):   # every launch raised, and the app caught it
        gap = missing_construct(log_tail(work / "app.log"), _triton_version())
        raise CaptureError(f"every launch of {kernel} by `{app}` ({seen[kernel]}) raised and the app caught it"
                           + (f": {gap}" if gap else " (run it without the tool to see the error)"))
    if not launches:
        others = ", ".join(f"{n} ({c}x)" for n, c in sorted(seen.items()) if n != kernel)
        raise CaptureError(f"`{app}` never launched a Triton kernel named {kernel!r}"
                           + (f"; it launched {others}" if others else "; it launched no Triton kernel"))
    strange = [l["kernel"] for l in launches if l["kernel"] != kernel]
    if strange:
        raise CaptureError(f"a capture file of `{app}` names kernel {strange[0]!r}, not {kernel!r}: not one the hook wrote")
    launch = max(launches, key=lambda l: l["programs"])
    launch["launches_seen"] = seen.get(kernel, launch["launch_index"])
    bad = [f"{p['name']} ({p['type']})" for p in launch["params"] if p["kind"] == "unsupported"]
    if bad:
        raise CaptureError(f"cannot replay {kernel}: argument {bad[0]} is of a type the snapshot cannot "
                           f"hold (tensors, host tensor descriptors, numbers, strings, None and tl dtypes can be)")
    if not launch["outputs"]:
        raise CaptureError(f"the captured launch of {kernel} changed none of its tensor arguments: nothing "
                           f"to compare a reordered kernel against")
    return launch


def _digest(launch: dict, work: Path) -> str:
    text = json.dumps({k: v for k, v in launch.items() if k not in ("pid", "launch_index")}, sort_keys=True)
    source = Path(launch["file"]).read_bytes() if Path(launch["file"]).exists() else b""
    return hashlib.sha1(text.encode() + source).hexdigest()[:8]


def load(folder: Path) -> Capture:
    """A capture folder written by :func:`capture`."""
    return Capture(Path(folder), read(Path(folder) / "launch.json", LaunchFile))


# -- replay: the KernelSpec fields of a generated module (runs in worker processes) ---------------

@functools.lru_cache(maxsize=4)
def _tensors(folder: str) -> dict:
    import torch
    return torch.load(Path(folder) / "tensors.pt", map_location="cpu", weights_only=True)


def _jit_function(kernel):
    """The JITFunction (or InterpretedFunction) under ``@triton.autotune`` / ``@triton.heuristics``."""
    while type(kernel).__name__ in ("Autotuner", "Heuristics"):
        kernel = kernel.fn
    return kernel


def _value(param: dict):
    if param["kind"] == "none":
        return None
    if param["kind"] == "tl_dtype":
        import triton.language as tl
        return tl.dtype(param["value"])
    return param["value"]


def _argument(param: dict, inputs: dict):
    """A captured launch's argument over the replay's tensors."""
    if param["kind"] == "tensor":
        return inputs[param["name"]]
    if param["kind"] == "tensor_descriptor":
        from swizzleperf.agent.capture.capture_hook import rebuilt_descriptor
        return rebuilt_descriptor(param["descriptor"], inputs[param["base"]])
    return _value(param)


@build_captured_specs_with
def captured_spec(folder: str, target: str) -> KernelSpec:
    """The KernelSpec of the module generated from the capture in ``folder`` (rewrite target
    ``target``), from its files alone: what the agent's own process loads (agent/verification/load.py's
    ``load_spec``), the module never imported there. Its launch is the workers' (they import it).

    Raises:
        KernelLoadError: a capture file that does not fit its schema, or fields no KernelSpec takes (one line).
    """
    try:
        return KernelSpec(**spec_fields(None, folder), rewrite_target=target)
    except (CaptureError, ValueError, StopIteration) as exc:
        raise KernelLoadError(f"the capture in {folder} gives no KernelSpec: {exc}") from None


def spec_fields(kernel, folder: str | Path) -> dict:
    """Every KernelSpec field but ``rewrite_target`` for the captured launch in ``folder`` (which
    also holds the lift's ``lift.json``); ``kernel`` is the module's kernel object (autotuned or not),
    None in the agent's own process (``captured_spec``), which never launches it.

    Problems: ``default`` and ``check`` are the captured launch (numerics run there: the only
    inputs there are), ``probe`` (when the lift found one) is permutation-only: the target is
    probed there, the kernel never launched.
    """
    folder = str(Path(folder).resolve())
    launch = read(Path(folder) / "launch.json", LaunchFile)
    lifted = read(Path(folder) / "lift.json", LiftFile)
    params = launch["params"]
    tensors = [p for p in params if p["kind"] == "tensor"] + launch.get("descriptor_bases", [])
    roles = {o["name"]: o for o in launch["outputs"]}
    overwritten = [o["name"] for o in launch["outputs"] if o.get("write_only") and not o.get("holds_poison")]
    primary = next(iter(overwritten), None)
    output_name = primary or SYNTHETIC_OUTPUT
    source_output = primary or launch["outputs"][0]["name"]
    poisoned = overwritten[1:]   # the others start from the captured contents (added into, skipped blocks)
    secondary = [n for n in roles if n != source_output]
    args = lifted["arg_names"][1:]
    problems = {"default": dict(zip(args, lifted["arg_values"])), "check": dict(zip(args, lifted["arg_values"]))}
    if lifted.get("probe_values"):
        problems["probe"] = dict(zip(args, lifted["probe_values"]))
    options = dict(launch.get("options", {}))
    meta = {k: options.pop(k) for k in ("num_warps", "num_stages") if k in options}
    dtype = next(p["dtype"] for p in tensors if p["name"] == source_output)

    def make_inputs(problem: dict, seed: int = 0, device: str = "cpu", dtype_name: str = "") -> dict:
        """The captured tensors (whatever the seed), on ``device``; write-only outputs poisoned."""
        import torch
        from swizzleperf.agent.capture.capture_hook import _poison, _view
        stored = _tensors(folder)
        buffers: dict = {}
        inputs = {}
        for p in tensors:
            place = (p["storage"], p["byte_offset"], getattr(torch, p["dtype"]), tuple(p["shape"]), tuple(p["stride"]))
            inputs[p["name"]] = _view(stored["storages"], place, device, buffers)
        for name in poisoned:
            _poison(inputs[name])
        if primary is None:
            inputs[SYNTHETIC_OUTPUT] = torch.empty_like(inputs[source_output])
        return inputs

    def launch_fn(inputs: dict, **run_meta) -> None:
        """The captured launch: its grid, arguments and options, the autotuner bypassed."""
        if kernel is None:
            raise KernelLoadError(f"the agent's own process never launches the captured {launch['kernel']}: "
                                  f"a worker imports the generated module and launches it")
        values = [_argument(p, inputs) for p in params]
        _jit_function(kernel)[tuple(launch["grid"])](*values, **options, **run_meta)
        if primary is None:   # elements equal to the captured ones (a NaN it left or wrote included) as the reference's
            out = inputs[source_output]
            expected = _tensors(folder)["outputs"][source_output].to(out.device)
            inputs[SYNTHETIC_OUTPUT].copy_(torch_where_equal(out, expected, _without_poison(expected)))

    def reference(inputs: dict):
        """The captured output; the launch's other outputs are checked here against theirs."""
        stored = _tensors(folder)["outputs"]
        device = inputs[output_name].device
        for name in secondary:
            _check_secondary(name, inputs[name], stored[name].to(device), lifted["tolerance"])
        expected = stored[source_output].to(device)
        return expected if primary is not None else _without_poison(expected)

    total_bytes = float(sum(launch["storage_bytes"]))   # without loading the snapshot (the agent's process)
    extents = lifted["extents"]
    splits = {int(k): int(v) for k, v in (lifted.get("coordinate_splits") or {}).items()}
    module_path = Path(folder) / Path(launch["file"]).name

    def trace(problem: dict, meta: dict, granule_bytes: int | None = None):
        """The generic tracer's trace of the captured launch (a worker), reuse counted per
        ``granule_bytes`` (the target L2's sector: agent/verification/simulate.py's kernel_trace passes it;
        the tracer's 128 B line where None); where it cannot extend the samples, a trace without
        reuse, which says so in its source."""
        from swizzleperf.agent.verification.simulate import SimulateError, trace_kernel
        grid = tuple(problem[n] for n in extents)
        if folder in _TRACING:   # trace_kernel asks the spec for the occupancy: one program per SM / CU
            return no_reuse_trace(grid, total_bytes, "occupancy only")
        _TRACING.add(folder)
        marker = Path(folder) / TRACE_FALLBACK
        marker.unlink(missing_ok=True)
        try:
            return trace_kernel(module_path, granule_bytes=granule_bytes, coordinate_splits=splits)
        except SimulateError as exc:
            why = (f"no access model: the tracer could not extend the captured launch's samples ({exc}); "
                   f"every order predicts the same here, only measured timing tells orders apart")
            replace_file(marker, why.encode())
            return no_reuse_trace(grid, total_bytes, why)
        finally:
            _TRACING.discard(folder)
    return dict(
        name=launch["kernel"], kernel_name=launch["kernel"], problems=problems, meta=meta, check_meta=meta,
        make_inputs=make_inputs, launch=launch_fn, reference=reference, output_name=output_name,
        tolerance={dtype: lifted["tolerance"]}, dtypes=(dtype,),
        tile_grid=lambda p, m: tuple(p[n] for n in extents),
        swizzle_args=lambda p, m: tuple(p[n] for n in args),
        flops=lambda p: 0.0,                        # unknown for an arbitrary kernel
        min_bytes=lambda p, d: total_bytes,         # the captured tensors' footprint, read or written once
        permutation_only=("probe",) if "probe" in problems else (), trace=trace,
    )


_TRACING: set = set()


def no_reuse_trace(grid: tuple, total_bytes: float, source: str):
    """A TileTrace in which every tile reads a block of its own (``total_bytes`` shared out): no
    order is better than another for the simulator."""
    import numpy as np
    from swizzleperf.kernels.trace import TileTrace
    tiles = int(np.prod(grid))
    return TileTrace(keys=np.arange(tiles, dtype=np.int64).reshape(tiles, 1, 1),
                     block_bytes=np.full(tiles, max(1, int(total_bytes) // tiles), dtype=np.int64),
                     block_is_write=np.zeros(tiles, dtype=bool), programs_per_cu=1, source=source)


def _check_secondary(name: str, out, expected, tolerance: float) -> None:
    """A further output of the launch against the captured one (MISMATCH when it differs)."""
    import torch
    from swizzleperf.agent.verification.stages import StageFailure
    if out.shape != expected.shape:
        raise StageFailure("MISMATCH", f"output {name} has shape {tuple(out.shape)}, captured {tuple(expected.shape)}")
    if tolerance == 0:
        same = bool((out.contiguous().reshape(-1).view(torch.uint8)
                     == expected.contiguous().reshape(-1).view(torch.uint8)).all())
        if not same:
            raise StageFailure("MISMATCH", f"output {name} differs from the captured launch's (bitwise)")
        return
    clean = _without_poison(expected).double()
    out = torch_where_equal(out, expected, clean).double()   # a NaN left or written where the capture has one
    diff = torch.linalg.vector_norm((out - clean).flatten())
    rel = float(diff / torch.linalg.vector_norm(clean.flatten()).clamp_min(1e-30))
    if not rel <= tolerance:
        raise StageFailure("MISMATCH", f"output {name} differs from the captured launch's: relative error "
                                       f"{rel:.3e} > tolerance {tolerance:.1e}")


def torch_where_equal(out, expected, value):
    """``out`` with ``value`` wherever its bits equal ``expected``'s (element by element)."""
    import torch
    ints = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
    if out.shape != expected.shape or out.element_size() not in ints or out.dtype != expected.dtype:
        return out
    same = out.contiguous().view(ints[out.element_size()]) == expected.contiguous().view(ints[out.element_size()])
    return torch.where(same, value.to(out.dtype), out)


def _without_poison(t):
    """``t`` with the verifier's poison values (NaN; stages.poison_value for integers) as 0: a captured output
    may hold them (the kernel wrote a NaN, or left an element that held one), and the verifier
    would read them as never written."""
    import torch
    if t.dtype.is_floating_point:
        return torch.nan_to_num(t, nan=0.0, posinf=float("inf"), neginf=float("-inf"))
    if t.dtype == torch.bool or t.dtype.is_complex:
        return t
    return torch.where(t == poison_value(t.dtype), torch.zeros_like(t), t)

