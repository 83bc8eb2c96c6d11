"""The box model-written code runs in: a worker subprocess with a minimal environment, its own
empty working directory, resource limits, no network and no view of other processes where the OS
allows it, in a process group of its own that dies with the agent.

This is defence in depth behind the static check (agent/verification/candidate.py): a candidate that
got past the check still finds no API key, no proxy and no other secret in its environment, cannot
write into the directory the agent was started from by accident of a relative path, cannot dump
core, cannot open the network, cannot read another process's ``/proc`` entries (the agent's
``/proc/<pid>/environ`` held the API key its own environment lacked, issue #21), and is killed with
its whole process group when the agent stops or its time is up.

How (Linux): the command runs under a small init (``python -m swizzleperf.sandbox``) that
unshares a PID, a mount and a network namespace (as root; else inside a user namespace of
its own where unprivileged ones are permitted), forks the command as PID 1 of the new PID
namespace with a fresh ``/proc`` (every process of it dies with it), drops what reads other
processes (``CAP_SYS_PTRACE``, ``CAP_PERFMON``, ``CAP_CHECKPOINT_RESTORE``) and, for verification
workers, ``CAP_SYS_ADMIN`` (no un-mounting the fresh ``/proc``) from the capability bounding set,
and sets ``no_new_privs``. CUDA needs nothing of another process's
``/proc`` (a fresh ``/proc`` is what a container gets). Where no namespace is permitted, the agent
makes itself non-dumpable (``PR_SET_DUMPABLE`` 0: its ``/proc`` entries are then unreadable by a
process without ``CAP_SYS_PTRACE``, which the box drops) and says so in one line, once.

Everything the worker (and the user's ``--app`` command, :func:`app_env`) may see of the agent's
environment is named here, in one place.

The package is the trust boundary: this box (``python -m swizzleperf.sandbox`` is its init,
sandbox/__main__.py), the bounded readers of what servers and models send (``untrusted``), the
masking of credentials in everything printed or stored (``redact``), the write-back into a
user's file (``write_back``) and the worker request's paths (``paths``). It imports nothing of the
package: profiling (whose profilers run the worker in the box) and the agent sit above it.
"""
from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import functools
import json
import logging
import os
import resource
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

#: Variables passed through by exact name: what Python, Triton, CUDA / ROCm and the C toolchain
#: Triton compiles its launcher with need to run.
ENV_NAMES = frozenset({
    "PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "TERM", "TZ",
    "PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "CONDA_PREFIX", "LD_LIBRARY_PATH", "LIBRARY_PATH",
    "CPATH", "CC", "CXX", "CUDA_HOME", "CUDA_PATH", "ROCM_PATH", "SWIZZLEPERF_TRITON36",
})
#: Prefixes passed through: Triton's, CUDA's, NCCL's, PyTorch's, the math libraries', ROCm's.
ENV_PREFIXES = ("TRITON_", "CUDA_", "NVIDIA_", "NCCL_", "NVSHMEM_", "TORCH_", "PYTORCH_", "OMP_",
                "MKL_", "OPENBLAS_", "HIP_", "HSA_", "ROCR_", "ROCM_")
#: Never passed, whatever the prefix: names that hold credentials.
SECRET_MARKERS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH")
#: The agent's own configuration of its model endpoint: never passed to the user's app either.
AGENT_ONLY_PREFIXES = ("OPENAI_", "ANTHROPIC_", "SWIZZLEPERF_LLM_")
#: Names (comma-separated) of credential-like variables the user's ``--app`` command needs (a
#: model hub token, say): passed to the app, never to a worker.
APP_PASS_ENV = "SWIZZLEPERF_APP_ENV"

# linux/sched.h, linux/prctl.h, linux/capability.h, sys/mount.h
_CLONE_NEWNS, _CLONE_NEWUSER, _CLONE_NEWPID, _CLONE_NEWNET = 0x00020000, 0x10000000, 0x20000000, 0x40000000
_PR_SET_PDEATHSIG, _PR_SET_DUMPABLE, _PR_CAPBSET_DROP, _PR_SET_NO_NEW_PRIVS = 1, 4, 24, 38
#: What reads another process's /proc entries even when it is non-dumpable: CAP_SYS_PTRACE, and
#: CAP_PERFMON (seen on Linux 6.18: with only SYS_PTRACE dropped a root worker still read them);
#: CAP_CHECKPOINT_RESTORE reads /proc/<pid>/map_files.
_CAPS_OTHER_PROCESSES = (19, 38, 40)
_CAP_SYS_ADMIN = 21
_MS_NOSUID, _MS_NODEV, _MS_NOEXEC, _MS_REC, _MS_PRIVATE = 2, 4, 8, 0x4000, 1 << 18
_BOX_PREFIX = "swizzleperf-box: "

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Limits:
    """Resource limits of one worker process (``setrlimit``), applied before it starts Python.

    Attributes:
        address_space_bytes: RLIMIT_AS, or None for none. Only for workers that need no GPU: the
            CUDA driver reserves far more virtual address space than it uses.
        cpu_seconds: RLIMIT_CPU, a backstop behind the wall-clock timeout (CPU time of all the
            worker's threads), or None.
        open_files: RLIMIT_NOFILE.
        isolate_network: move the worker into a network namespace of its own (no interface but a
            down loopback) where the OS permits it; left as is where it does not.
        isolate_processes: run the command as PID 1 of a PID namespace of its own with a fresh
            ``/proc`` (no other process visible, every one of its own ended with it) where the OS
            permits it; else the agent is made non-dumpable (see the module docstring).
        drop_admin: drop ``CAP_SYS_ADMIN`` as well (nothing can un-mount the fresh ``/proc``):
            verification workers; not under a profiler, which may need it for the GPU's counters.
    """

    address_space_bytes: int | None = None
    cpu_seconds: int | None = None
    open_files: int = 4096
    isolate_network: bool = True
    isolate_processes: bool = True
    drop_admin: bool = False


def worker_limits(timeout_s: float, interpret: bool) -> Limits:
    """The limits of a verification worker: 16 GiB of address space for interpreted (CPU) workers
    (a CPU worker of the bundled kernels' check problems peaks well under 4 GiB, measured on this
    project's 24 GiB CI machine; the machine cannot give more than that anyway), CPU time twice the
    wall-clock timeout on every core plus a minute."""
    cores = os.cpu_count() or 1
    return Limits(address_space_bytes=16 << 30 if interpret else None,
                  cpu_seconds=int(timeout_s * 2 * cores) + 60, drop_admin=True)


def worker_env(**overrides: str) -> dict:
    """The environment of a worker: the allowed names of this process's environment (see
    ``ENV_NAMES``, ``ENV_PREFIXES``), nothing that looks like a credential, then ``overrides``."""
    env = {k: v for k, v in os.environ.items()
           if (k in ENV_NAMES or k.startswith(ENV_PREFIXES)) and not _secret(k)}
    env.update(overrides)
    return env


def app_env(**overrides: str) -> dict:
    """The environment of the user's own ``--app`` command: this process's environment without
    the agent's model configuration (``AGENT_ONLY_PREFIXES``) and without credential-like names
    (``SECRET_MARKERS``) except those the user lists in ``SWIZZLEPERF_APP_ENV``; then
    ``overrides``. The app runs the patched kernel, model-written code once verified."""
    wanted = {n.strip() for n in os.environ.get(APP_PASS_ENV, "").split(",") if n.strip()}
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(AGENT_ONLY_PREFIXES) and (k in wanted or not _secret(k))}
    env.update(overrides)
    return env


def withheld_from_app() -> list:
    """The names of this process's environment that :func:`app_env` leaves out, sorted (for the
    one line that says why an app that needs one failed)."""
    kept = app_env()
    return sorted(k for k in os.environ if k not in kept)


def _secret(name: str) -> bool:
    return any(marker in name.upper() for marker in SECRET_MARKERS)


def _libc():
    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def _preexec(limits: Limits):
    """What the child runs between fork and exec: die with the parent, limits."""
    def apply() -> None:
        _libc().prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        _lower(resource.RLIMIT_NOFILE, limits.open_files)
        if limits.cpu_seconds is not None:
            _lower(resource.RLIMIT_CPU, limits.cpu_seconds)
        if limits.address_space_bytes is not None:
            _lower(resource.RLIMIT_AS, limits.address_space_bytes)
    return apply


def _lower(which: int, value: int) -> None:
    """Set a limit to ``value`` unless the current hard limit is already lower."""
    soft, hard = resource.getrlimit(which)
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    resource.setrlimit(which, (value, hard if hard != resource.RLIM_INFINITY else value))


def run(command: list, cwd: Path, env: dict, timeout_s: float, limits: Limits) -> subprocess.CompletedProcess:
    """Run ``command`` in the box; the whole process group is killed when ``timeout_s`` passes or
    this process is interrupted (Ctrl-C, SIGTERM turned into an exception), and the child dies with
    this process (``PR_SET_PDEATHSIG``) if it is killed outright.

    Raises:
        subprocess.TimeoutExpired: the command ran past ``timeout_s`` (it has been killed).
    """
    process = start(command, cwd, env, limits, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                    stdin=subprocess.DEVNULL, text=True)
    try:
        stdout, stderr = process.communicate(timeout=timeout_s)
    except BaseException:
        _kill_group(process)
        raise
    _kill_group(process)  # what it left behind in its group (in a PID namespace: already gone)
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)


def start(command: list, cwd: Path, env: dict, limits: Limits, **popen: object) -> subprocess.Popen:
    """``command`` started in the box (the init of this module around it, the limits, a session of
    its own, death with this process), for a caller that talks to it over pipes (``popen``:
    Popen's stdin / stdout / stderr / text); the caller ends it with its process group
    (``os.killpg(process.pid, SIGKILL)``). Processes it starts share its PID namespace."""
    processes = limits.isolate_processes and _processes_isolated()
    options = {"pid": processes, "net": limits.isolate_network, "drop_admin": limits.drop_admin}
    boxed = [sys.executable, "-m", "swizzleperf.sandbox", json.dumps(options), "--", *command]
    return subprocess.Popen(boxed, cwd=cwd, env=env, start_new_session=True, preexec_fn=_preexec(limits),
                            **popen)


def _kill_group(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    process.communicate()


# -- process isolation: what this OS permits, and the init that sets it up -------------------------

_PROBE_CHILD = "import os; print(os.getpid(), os.readlink('/proc/self'))"


def _processes_isolated() -> bool:
    """Whether a PID namespace with a fresh ``/proc`` works here; where not, the agent is made
    non-dumpable and one line says so (both once per process)."""
    isolated, why = isolation()
    if not isolated:
        _protect_agent(why)
    return isolated


@functools.lru_cache(maxsize=1)
def isolation() -> tuple:
    """``(True, "")`` when the box can give a command a PID namespace and a fresh ``/proc`` on
    this machine, else ``(False, why)``; tried once per process (a run of the init around a
    one-line Python command, about 0.1 s)."""
    if not sys.platform.startswith("linux"):
        return False, f"no PID namespaces on {sys.platform}"
    options = json.dumps({"pid": True, "net": False, "drop_admin": True})
    try:
        done = subprocess.run([sys.executable, "-m", "swizzleperf.sandbox", options, "--",
                               sys.executable, "-c", _PROBE_CHILD], capture_output=True, text=True,
                              timeout=60, env=worker_env(), stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"the box's init could not run ({exc})"
    reasons = [line[len(_BOX_PREFIX):].strip() for line in done.stderr.splitlines() if line.startswith(_BOX_PREFIX)]
    if done.returncode == 0 and done.stdout.split() == ["1", "1"]:
        return True, ""
    return False, reasons[0] if reasons else f"the probe saw pid and /proc/self {done.stdout.split()}"


def _protect_agent(why: str) -> None:
    if _protect_agent.done:
        return
    _protect_agent.done = True
    _libc().prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
    log.warning("sandbox: no PID namespace for workers here (%s): they can see this user's other "
                "processes; the agent's own /proc entries are unreadable to them (non-dumpable agent, "
                "CAP_SYS_PTRACE and CAP_PERFMON dropped in workers)", why)


_protect_agent.done = False


def box_main(argv: list) -> int:
    """The init: ``python -m swizzleperf.sandbox OPTIONS -- COMMAND...`` (OPTIONS: JSON with
    ``pid``, ``net``, ``drop_admin``). Namespaces as permitted, then COMMAND as PID 1 of the new
    PID namespace (or in place, without one); exits as COMMAND does (killed by a signal: the same
    signal). Lines it writes on stderr begin with ``swizzleperf-box:``."""
    options, command = json.loads(argv[0]), argv[argv.index("--") + 1:]
    libc = _libc()
    flags = (_CLONE_NEWPID | _CLONE_NEWNS if options["pid"] else 0) | (_CLONE_NEWNET if options["net"] else 0)
    entered = _unshare(libc, flags) if flags else ""
    if options["pid"] and entered == "":
        _say(f"no namespaces: unshare failed ({os.strerror(ctypes.get_errno()) or 'not permitted'})")
    if not (flags & _CLONE_NEWPID) or entered == "":
        _harden(libc, options)
        os.execvp(command[0], command)
    child = os.fork()
    if child == 0:
        try:
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            _fresh_proc(libc)
            _harden(libc, options)
            os.execvp(command[0], command)
        except BaseException as exc:  # nothing may run outside the box: say why and stop
            _say(f"cannot start {command[0]} in the box: {exc}")
            os._exit(127)
    _, status = os.waitpid(child, 0)
    if os.WIFSIGNALED(status):  # end as it ended
        with contextlib.suppress(OSError, ValueError):  # SIGKILL and SIGSTOP keep their action
            signal.signal(os.WTERMSIG(status), signal.SIG_DFL)
        os.kill(os.getpid(), os.WTERMSIG(status))
    return os.waitstatus_to_exitcode(status)


def _unshare(libc, flags: int) -> str:
    """Enter the namespaces ``flags``: as they are (root), else inside a new user namespace mapping
    only this user (unprivileged user namespaces). Returns "root", "user" or "" (not permitted)."""
    if libc.unshare(flags) == 0:
        return "root"
    uid, gid = os.getuid(), os.getgid()
    if libc.unshare(flags | _CLONE_NEWUSER) != 0:
        return ""
    for path, text in (("/proc/self/setgroups", "deny"), ("/proc/self/uid_map", f"{uid} {uid} 1"),
                       ("/proc/self/gid_map", f"{gid} {gid} 1")):
        try:
            Path(path).write_text(text)
        except OSError as exc:
            if not (path.endswith("setgroups") and exc.errno == errno.ENOENT):
                _say(f"user namespace without a mapping ({path}: {exc.strerror})")
    return "user"


def _fresh_proc(libc) -> None:
    """In the new mount namespace: nothing propagates back (private), then a ``/proc`` of the new
    PID namespace over the old one.

    Raises:
        OSError: a mount failed (the command must not run with the old ``/proc``).
    """
    none = ctypes.c_char_p(None)
    if libc.mount(b"none", b"/", none, _MS_REC | _MS_PRIVATE, none) != 0:
        raise OSError(ctypes.get_errno(), f"making / private: {os.strerror(ctypes.get_errno())}")
    if libc.mount(b"proc", b"/proc", b"proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, none) != 0:
        raise OSError(ctypes.get_errno(), f"mounting /proc: {os.strerror(ctypes.get_errno())}")


def _harden(libc, options: dict) -> None:
    """Drop what would read other processes (and, with ``drop_admin``, what would un-mount the
    fresh ``/proc``) from the bounding set: gone after exec; no privileges gained by exec either.
    Each step where permitted (without CAP_SETPCAP the bounding set is left as it is)."""
    for cap in _CAPS_OTHER_PROCESSES + ((_CAP_SYS_ADMIN,) if options.get("drop_admin") else ()):
        libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0)
    libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)


def _say(text: str) -> None:
    sys.stderr.write(_BOX_PREFIX + text + "\n")
    sys.stderr.flush()

