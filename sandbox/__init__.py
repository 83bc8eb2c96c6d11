"""The box model-written code runs in: a worker subprocess with a minimal environment, its own
empty working directory, resource limits, no network and no view of other processes where the OS
allows it, a file system it can write only in its own folders, and an init of its own that ends
every process of it when its time is up, when the agent stops it and when the agent dies.

This is defence in depth behind the static check (agent/verification/candidate.py): a candidate that
got past the check still finds no API key, no proxy and no other secret in its environment, cannot
write into the directory the agent was started from by accident of a relative path, cannot dump
core, cannot open the network, cannot read another process's ``/proc`` entries (the agent's
``/proc/<pid>/environ`` held the API key its own environment lacked, issue #21), cannot write
anything outside the folders its caller names (``Limits.writable``; a verification worker: its
temporary folder): not the agent's simulation cache (a worker once wrote rows there that the agent
then loaded, issue #41), the user's kernel file, the run folder, the record
(``.swizzleperf/swizzleperf.db``), ``~`` or ``/tmp``; and is killed, with every process it
started, when the agent stops or its time is up (:func:`stop`; a process that cleared its
``PDEATHSIG`` and left the process group with ``setsid()`` outlived the agent before, #41 round
twelve). Its Triton, CUDA and torch caches are fresh ones in its scratch folder (:func:`start`):
nothing one worker compiled is loaded by another. What it prints is kept within a bound
(:class:`CappedOutput`), and in the mounts box its scratch is a tmpfs bounded in bytes and files
(``Limits.scratch``).

How (Linux): the command runs under a small init (``python -m swizzleperf.sandbox``) that
unshares a PID, a mount and a network namespace (as root; else inside a user namespace of
its own where unprivileged ones are permitted), forks the command as PID 1 of the new PID
namespace with a fresh ``/proc`` (every process of it dies with it: on ``SIGTERM``, which
:func:`stop` sends and the agent's death delivers as the init's ``PDEATHSIG``, the init kills PID 1;
without a PID namespace it forks the command as its child, stays a child subreaper, and kills every
descendant found in ``/proc``), drops what reads other
processes (``CAP_SYS_PTRACE``, ``CAP_PERFMON``, ``CAP_CHECKPOINT_RESTORE``) and what reaches past
read-only mounts from the capability bounding set (a verification worker and the user's app keep no
capability at all: an app that kept ``CAP_SYS_ADMIN`` un-mounted its fresh ``/proc``, #41 round
eleven), and sets ``no_new_privs``. A verification worker also gets a seccomp filter
(``Limits.seccomp_refusals``: no io_uring, no call through another ABI, no datagram socket pair, no
new namespace, and for an interpreted worker no ``socket(AF_UNIX)``; where the kernel has none, one
line says so, once) and a file-size limit (``Limits.file_size_bytes``). CUDA needs nothing of
another process's ``/proc`` (a fresh ``/proc`` is what a container gets). Before it starts any box
the agent makes itself non-dumpable (``PR_SET_DUMPABLE`` 0, :func:`_non_dumpable`: its ``/proc``
entries are then unreadable by a process without ``CAP_SYS_PTRACE``, which every box drops); where
no namespace is permitted, one line says so, once.

The file system (sandbox/filesystem.py): in the mount namespace, each writable folder is bound
onto itself, ``/dev/shm`` is a fresh tmpfs of the box's own (``WORKER_SHM_BYTES`` at most where
its processes share no memory), ``/dev/null`` covers each block device under ``/dev`` and every
character device but the plain ones and the GPU's, and every other mount is remounted read-only
for the box alone (writes fail with ``EROFS``; ``/dev/null`` and the GPU's devices keep working;
without ``CAP_SYS_ADMIN``, which verification workers lose, nothing remounts them; a profiler that
keeps it is held by Landlock as well, where the kernel has it).
Where no mount namespace is permitted (not root, no unprivileged user namespaces), Landlock (Linux
5.13 or later, enabled at boot; no privilege needed) allows every kind of write only beneath the
writable folders and the writing of the plain and the GPU's character devices under ``/dev``
(``EACCES`` elsewhere), and from Landlock ABI 5 (Linux 6.10) an ioctl on a device only on those.
Which way works is tried once per process (:func:`filesystem_isolation`); where
neither does, every boxed command is refused (:class:`Unboxed`: one line that says why) unless the
user allows it (``swizzleperf optimize --allow-unboxed-writes`` or ``ALLOW_UNBOXED_ENV=1``: then
one line says, once, that workers can write wherever the user can). The init never starts a
command with less than it was asked for: a failed mount or Landlock rule is exit 127.

Everything the worker (and the user's ``--app`` command, :func:`app_env`) may see of the agent's
environment is named here, in one place. The ``--app`` command is the user's own code: it runs in
the box with ``Limits(writable=None)``, the file system as it is but for the agent's own folders
(``Limits.read_only``: read-only in its mount namespace), and no capability.

The package is the trust boundary: this box (``python -m swizzleperf.sandbox`` is its init,
sandbox/__main__.py; what it lets a command write, ``filesystem``), the bounded readers of what
servers and models send (``untrusted``), the masking of credentials in everything printed or
stored (``redact``), the write-back into a user's file (``write_back``) and the worker request's
paths (``paths``). It imports nothing of the
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
import re
import resource
import signal
import stat
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from swizzleperf.sandbox import filesystem

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
#: Never passed, whatever the prefix: names that hold credentials, by a part of the name
#: (``TRITON_API_TOKEN``, ``CUDA_CREDS``, ``TORCH_HUB_COOKIE``).
SECRET_MARKERS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "PASSPHRASE", "CRED", "AUTH", "COOKIE",
                  "SESSION", "BEARER")
#: Never passed either: names with one of these as a word of the name (between ``_``, digits or
#: its ends: ``TRITON_MY_PASS``, ``CUDA_HOME_PW``, ``DB_PWD``, ``NCCL_DBPASS``; a word that begins
#: or ends with ``PASS`` counts), too short to be looked for inside words (#41's second replay).
SECRET_WORDS = ("PASS", "PW", "PWD")
#: Names that contain a marker but hold no credential: the shell's working folders, LLVM's pass
#: plugin (which Triton's compiler reads).
NOT_SECRET_NAMES = frozenset({"PWD", "OLDPWD", "LLVM_PASS_PLUGIN_PATH"})
#: Words that begin with ``PASS`` but name a list of variables passed through, not a password
#: (``TOX_TESTENV_PASSENV``, seen withheld on the GPU image of 2026-12-07). The value is still
#: checked (``_secret_value``) and any other word of the name still counts.
NOT_SECRET_WORDS = frozenset({"PASSENV", "PASSTHROUGH", "PASSTHRU"})
#: The agent's own configuration of its model endpoint: never passed to the user's app either.
AGENT_ONLY_PREFIXES = ("OPENAI_", "ANTHROPIC_", "SWIZZLEPERF_LLM_")
#: Names (comma-separated) of credential-like variables the user's ``--app`` command needs (a
#: model hub token, say): passed to the app, never to a worker.
APP_PASS_ENV = "SWIZZLEPERF_APP_ENV"
#: Set to 1 (or ``swizzleperf optimize --allow-unboxed-writes``): run boxed commands on a machine
#: where the box cannot keep them from writing outside their folders (neither read-only mounts nor
#: Landlock); without it they are refused (:class:`Unboxed`).
ALLOW_UNBOXED_ENV = "SWIZZLEPERF_ALLOW_UNBOXED_WRITES"

# linux/sched.h, linux/prctl.h, linux/capability.h, sys/mount.h
_CLONE_NEWNS, _CLONE_NEWUSER, _CLONE_NEWPID, _CLONE_NEWNET = 0x00020000, 0x10000000, 0x20000000, 0x40000000
_CLONE_NEWIPC = 0x08000000   # SysV IPC objects of the box's own (#41 round ten: shmget/msgget seen outside)
_PR_SET_PDEATHSIG, _PR_SET_DUMPABLE, _PR_CAPBSET_DROP, _PR_SET_NO_NEW_PRIVS = 1, 4, 24, 38
_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 47, 4
#: What reads another process's /proc entries even when it is non-dumpable: CAP_SYS_PTRACE, and
#: CAP_PERFMON (seen on Linux 6.18: with only SYS_PTRACE dropped a root worker still read them);
#: CAP_CHECKPOINT_RESTORE reads /proc/<pid>/map_files.
_CAPS_OTHER_PROCESSES = (19, 38, 40)
_CAP_SYS_ADMIN = 21
#: What reaches past read-only mounts (issue #41, round three: a root worker kept them): opening any
#: inode of the scratch's file system by handle through the scratch's writable mount
#: (CAP_DAC_READ_SEARCH, ``open_by_handle_at``: it appended to a file outside), making device nodes
#: (CAP_MKNOD), files the agent cannot remove afterwards (CAP_LINUX_IMMUTABLE: the agent's clean-up
#: of the worker's folder raised), kernel modules, raw I/O, BPF, the clock, reboot, the MAC policy,
#: the kernel log. Dropped for every command whose writes the box keeps to its folders.
_CAPS_PAST_THE_MOUNTS = (2, 9, 16, 17, 22, 25, 27, 32, 33, 34, 39)
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
            permits it (the agent is made non-dumpable either way: see the module docstring).
        drop_admin: drop every capability (nothing can un-mount the fresh ``/proc``):
            verification workers, and every command with ``writable`` None (the user's app); not
            under a profiler, which may need ``CAP_SYS_ADMIN`` for the GPU's counters.
        writable: the only folders (or files) the command may write, each with everything
            beneath it; the rest of the file system is read-only to it (see the module
            docstring). The first is its scratch: its caches go there (:func:`start`). None: the
            file system as it is (the user's own ``--app`` command, never model-written code), and
            no capability (as ``drop_admin``: an app run as root keeps none of root's, so reads and
            writes only what the file modes allow uid 0).
        shared_memory: its processes share memory through ``/dev/shm`` files (NCCL, gloo, torch
            multiprocessing): where Landlock keeps it to its folders, ``/dev/shm`` is one of them;
            in a mount namespace it gets a fresh ``/dev/shm`` of its own either way.
        file_size_bytes: RLIMIT_FSIZE, the largest file any of its processes may write (a write
            past it fails with ``EFBIG``: ``SIGXFSZ`` is ignored in the box; a process that
            restores the signal's default is killed by it, and where that is the command,
            :func:`run` adds one line that says so to its stderr), or None.
        seccomp_refusals: what a seccomp filter refuses with ``EPERM`` (names of
            ``SECCOMP_REFUSALS``; :func:`_seccomp_program`), none by default: ``unix_socket``, no
            ``socket(AF_UNIX, ...)``, so no connection to a unix socket bound outside the box (a
            session bus, ``docker.sock``, an ssh agent: neither the network namespace nor Landlock
            stops one); ``io_uring``, no io_uring (whose requests no filter sees); ``other_abi``, no
            call through another ABI (32-bit or x32, which would dodge the numbers checked);
            ``datagram_pair``, no ``socketpair(AF_UNIX, SOCK_DGRAM)``; a stream ``socketpair``
            still works; ``namespaces``, no new namespace (a user namespace above all; ``clone3``
            fails with ``ENOSYS``, so that libc uses ``clone``). Verification workers only: NCCL,
            gloo and ncu talk over unix sockets.
            Where the kernel has no seccomp filter, one line says so, once.
        scratch: ``(bytes, files)``: in the mounts box, the first of ``writable`` (its scratch) is a
            tmpfs of its own holding at most ``bytes`` bytes and ``files`` files and folders (a write
            past either fails with ``ENOSPC``), which starts with a copy of what the caller left in
            the folder; when the command has ended what lies at its top is put back into the
            folder (``WORKER_SCRATCH_RETURNED`` entries at most, ``bytes`` in all: regular files
            copied, a worker's ``result.json`` and mappings; links, named pipes and empty folders
            made again, which the agent's readers refuse as before) and the rest (what is inside
            folders: the caches) ends with the box. None (the default): the
            folder itself. Verification workers only (``worker_limits``); where the box has no mount
            namespace (Landlock alone) the folder itself, bounded only by the command's time.
        read_only: with ``writable`` None (the user's app): paths made read-only to the command,
            each with everything beneath it, in its mount namespace (the agent's own code, its
            interpreter's packages, its caches and record: agent/capture/capture.py's
            ``agent_owned_paths``), but for ``still_writable`` folders that lie beneath one of them
            (the capture folder): of a path and a folder that holds it, the one nearer the path wins.
            Paths that do not exist are left out. Where the box has no mount namespace nothing is
            made read-only, and one line says so, once.
        still_writable: see ``read_only``.
    """

    address_space_bytes: int | None = None
    cpu_seconds: int | None = None
    open_files: int = 4096
    isolate_network: bool = True
    isolate_processes: bool = True
    drop_admin: bool = False
    writable: tuple[str, ...] | None = ()
    shared_memory: bool = False
    file_size_bytes: int | None = None
    seccomp_refusals: tuple[str, ...] = ()
    scratch: tuple[int, int] | None = None
    read_only: tuple[str, ...] = ()
    still_writable: tuple[str, ...] = ()


#: A verification worker's largest file (RLIMIT_FSIZE). What a worker writes is far smaller: its
#: Triton cache (a compiled kernel, its launcher: a few MB), CUDA's and torch's caches, the mapping
#: ``.npy`` (8 bytes a tile: a few MB; agent/verification/verify.py refuses one above 1 GiB) and
#: ``result.json`` (refused above 64 MiB). It bounds each file, not their sum.
WORKER_FILE_SIZE_BYTES = 4 << 30
#: The size of the fresh ``/dev/shm`` of a box whose processes share no memory (not
#: ``Limits.shared_memory``: verification workers), and how many files it holds. A tmpfs's pages are
#: RAM that RLIMIT_AS does not count, and its default size is half the RAM (#41 round eleven: 11.8
#: GiB of a 24 GiB machine, held until the worker ends). A worker keeps nothing there but
#: multiprocessing's semaphores and small files of CUDA's: 256 MiB is four times Docker's default
#: ``--shm-size`` (64 MiB), under which CUDA runs. A box that shares memory (NCCL's transport, gloo,
#: ncu: the rank pool, the profilers) keeps the kernel's default: NCCL fails on a small one.
WORKER_SHM_BYTES = 256 << 20
WORKER_SHM_FILES = 4096
#: The size of a verification worker's scratch in the mounts box (``Limits.scratch``: a tmpfs of its
#: own), and how many files and folders it holds. A worker writes a few MB there: its Triton, CUDA and
#: torch caches (a compiled kernel and its launcher), its mapping (8 bytes a tile) and ``result.json``.
#: Without a bound a worker made 400 000 files in 10 s, each an inode of the host's disk and seconds of
#: the agent's clean-up afterwards (#41 round twelve). A tmpfs's pages are RAM that RLIMIT_AS does not
#: count: 1 GiB at most, released when the box ends.
WORKER_SCRATCH_BYTES = 1 << 30
WORKER_SCRATCH_FILES = 65536
#: How many entries at the top of a worker's tmpfs scratch are put back into its folder when it has
#: ended (``result.json``, the mappings, the agent's own: a few), in the order of their names.
WORKER_SCRATCH_RETURNED = 1024
#: What the agent keeps of a boxed command's stdout, and of its stderr (:func:`run`,
#: :func:`run_gpu_turn`): the first ``OUTPUT_HEAD_BYTES`` and the last ``OUTPUT_TAIL_BYTES``, with one
#: line between them that says where the output was cut and how many bytes were dropped; the rest is
#: read and dropped (#41 round twelve: a worker's 800 MiB of output took the agent to 3.3 GB, and to a
#: ``MemoryError`` traceback under a 3 GB cap).
OUTPUT_HEAD_BYTES = 1 << 20
OUTPUT_TAIL_BYTES = 1 << 20
#: Seconds the box's init is given, after ``SIGTERM``, to kill every process of its box and exit
#: before its whole process group gets ``SIGKILL`` (:func:`stop`); it takes milliseconds.
STOP_GRACE_S = 2.0
#: Seconds a command's output is still read once it has ended or been killed: a process that
#: escaped the box's kill (a box without a PID namespace whose init was killed first) may hold the
#: pipes open; past this they are closed and the agent goes on (#41 round twelve: it held the agent
#: in ``communicate()`` for as long as it slept).
DRAIN_S = 2.0
#: Seconds :func:`removable` walks what a boxed command left before it gives up (best effort).
CLEANUP_S = 10.0


#: What a compiled (GPU) verification worker's filter leaves out of ``SECCOMP_REFUSALS``: unix sockets
#: (CUDA's start needs them, measured below) and SysV IPC, not yet tried under CUDA on a GPU (the
#: refusals of round ten landed after the last device session; the keyring's and the socket families'
#: refusals are those of Docker's default seccomp profile, under which CUDA runs); the mounts box's IPC
#: namespace keeps its objects private there.
_COMPILED_KEEPS = ("unix_socket", "sysv_ipc")


def worker_limits(timeout_s: float, interpret: bool, writable: tuple = ()) -> Limits:
    """The limits of a verification worker: 16 GiB of address space for interpreted (CPU) workers
    (a CPU worker of the bundled kernels' check problems peaks well under 4 GiB, measured on this
    project's 24 GiB CI machine; the machine cannot give more than that anyway), CPU time twice the
    wall-clock timeout on every core plus a minute, ``writable`` (its temporary folder) the
    only place it may write, the first of them a tmpfs of ``WORKER_SCRATCH_BYTES`` and
    ``WORKER_SCRATCH_FILES`` in the mounts box (``Limits.scratch``), no file larger than
    ``WORKER_FILE_SIZE_BYTES``, and the seccomp
    filter: every refusal of ``SECCOMP_REFUSALS`` for an interpreted worker, all but
    ``_COMPILED_KEEPS`` for a compiled (GPU) one. CUDA's start needs ``socket(AF_UNIX)``: on an H100
    (2026-12-06, bench/results/gpu_round42_h100/seccomp_cuda_h100.json, bench/gpu_seccomp_cuda.py)
    ``cuInit`` returned 304 under the whole filter and under that refusal alone, and 0 under each
    other refusal alone and under none."""
    cores = os.cpu_count() or 1
    refusals = SECCOMP_REFUSALS if interpret else tuple(r for r in SECCOMP_REFUSALS if r not in _COMPILED_KEEPS)
    return Limits(address_space_bytes=16 << 30 if interpret else None,
                  cpu_seconds=int(timeout_s * 2 * cores) + 60, drop_admin=True,
                  writable=tuple(str(p) for p in writable), file_size_bytes=WORKER_FILE_SIZE_BYTES,
                  seccomp_refusals=refusals, scratch=(WORKER_SCRATCH_BYTES, WORKER_SCRATCH_FILES))


def python_command(*args: str) -> list:
    """``[sys.executable, *args]`` (``args``: ``"-m", MODULE, ...`` or ``"-c", CODE, ...``) made so that the
    interpreter never imports from its working folder: ``-P`` (Python 3.11 and later); on 3.10 the
    code first drops the working folder from ``sys.path``, then runs the module or the code.

    Every Python the tool starts runs in a folder someone else can write (the app's folder, a
    worker's scratch), and ``python -m`` or ``-c`` would put that folder first on ``sys.path``: a
    ``resource.py`` an app left there was imported by the box's init, outside the box, as root with
    every capability (#41, round thirteen). ``PYTHONPATH`` is still honoured (the agent's own).

    Raises:
        ValueError: ``args`` do not begin with ``-m`` or ``-c``.
    """
    if not args or args[0] not in ("-m", "-c") or len(args) < 2:
        raise ValueError(f"python_command takes '-m MODULE ...' or '-c CODE ...', not {args[:2]!r}")
    if sys.version_info >= (3, 11):
        return [sys.executable, "-P", *args]
    if args[0] == "-c":
        return [sys.executable, "-c", "import sys as _s; del _s.path[0]; del _s\n" + args[1], *args[2:]]
    return [sys.executable, "-c", "import sys; del sys.path[0]; import runpy; "
            "runpy.run_module(sys.argv.pop(1), run_name='__main__', alter_sys=True)", *args[1:]]


def worker_env(**overrides: str) -> dict:
    """The environment of a worker: the allowed names of this process's environment (see
    ``ENV_NAMES``, ``ENV_PREFIXES``), nothing that looks like a credential by its name or its value
    (``_secret_value``), then ``overrides``."""
    env = {k: v for k, v in os.environ.items()
           if (k in ENV_NAMES or k.startswith(ENV_PREFIXES)) and not _secret(k) and not _secret_value(v)}
    env.update(overrides)
    return env


#: A URL with userinfo (``https://user:password@host``) in a variable's value.
_USERINFO = re.compile(r"://[^/?#\s@]*@")
#: An HTTP authorization written into a value (``HTTP_HEADERS=Authorization: Bearer sk-...``).
_AUTHORIZATION = re.compile(r"\b(?:bearer|basic|token)\s+[^\s,;]{8,}", re.I)
#: A credential-named variable's value this long or longer is a secret ``redact`` masks from then on
#: (shorter ones, ``..._TOKEN_ENABLED=true``, would mask ordinary words).
MIN_ENV_SECRET_CHARS = 12


def _secret_value(value: str) -> bool:
    """Whether a value holds a credential whatever its name: a URL with userinfo
    (``TORCH_HUB_URL=https://u:pw@hub``, #41 round nine), an HTTP authorization, or a secret
    ``redact`` knows (the agent's own API key under another name, ``LLM_K=sk-...``, #41 round ten:
    every credential-named value of this process's environment is known, see ``_know_env_secrets``)."""
    from swizzleperf.sandbox.redact import holds_secret
    _know_env_secrets()
    return bool(_USERINFO.search(value)) or bool(_AUTHORIZATION.search(value)) or holds_secret(value)


def _know_env_secrets() -> None:
    """Have ``redact`` know the values of this process's credential-named variables
    (``OPENAI_API_KEY`` and every ``_secret`` name) of ``MIN_ENV_SECRET_CHARS`` or more, without
    whitespace: masked in every output, and a copy under an innocent name withheld from workers and
    the app."""
    from swizzleperf.sandbox.redact import remember
    for name, value in os.environ.items():
        if (_secret(name) and len(value) >= MIN_ENV_SECRET_CHARS and not any(c.isspace() for c in value)
                and (name, value) not in _KNOWN_ENV and not _a_folder_path(value)):
            _KNOWN_ENV.add((name, value))
            remember(value)


_KNOWN_ENV: set = set()


def app_env(**overrides: str) -> dict:
    """The environment of the user's own ``--app`` command: this process's environment without
    the agent's model configuration (``AGENT_ONLY_PREFIXES``) and without credentials, by name
    (``SECRET_MARKERS``) or by value (``_secret_value``: ``DATABASE_URL=postgres://u:pw@db``, the
    agent's key under another name; #41 round ten) except those the user lists in
    ``SWIZZLEPERF_APP_ENV``; then
    ``overrides``. The app runs the patched kernel, model-written code once verified."""
    wanted = {n.strip() for n in os.environ.get(APP_PASS_ENV, "").split(",") if n.strip()}
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(AGENT_ONLY_PREFIXES)
           and (k in wanted or not ((_secret(k) and not _a_folder(v)) or _secret_value(v)))}
    env.update(overrides)
    return env


def _a_folder(value: str) -> bool:
    """Whether ``value`` is the absolute path of an existing folder: a variable whose name looks
    like a credential's but holds one (``TIKTOKEN_CACHE_DIR``, seen withheld on the GPU image of
    2026-12-07) names a place, not a secret, and the app reaches that folder anyway."""
    return _a_folder_path(value) and not _secret_value(value)


def _a_folder_path(value: str) -> bool:
    """``value`` is an absolute path of an existing folder (its text alone: :func:`_a_folder`)."""
    try:
        return value.startswith("/") and len(value) < 4096 and "\n" not in value and os.path.isdir(value)
    except (OSError, ValueError):   # an embedded NUL
        return False


def withheld_from_app() -> list:
    """The names of this process's environment that :func:`app_env` leaves out, sorted (for the
    one line that says why an app that needs one failed)."""
    kept = app_env()
    return sorted(k for k in os.environ if k not in kept)


def _secret(name: str) -> bool:
    """Whether the variable ``name`` looks like a credential (``SECRET_MARKERS``, ``SECRET_WORDS``)."""
    if name in NOT_SECRET_NAMES:
        return False
    upper = name.upper()
    if any(marker in upper for marker in SECRET_MARKERS):
        return True
    return any(word not in NOT_SECRET_WORDS and (word in SECRET_WORDS or word.startswith("PASS")
                                                  or word.endswith("PASS"))
               for word in re.split(r"[^A-Z]+", upper))


def _libc():
    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def _preexec(limits: Limits):
    """What the child (the box's init) runs between fork and exec: ``SIGTERM`` when this process
    dies (the init's handler then kills every process of its box, :func:`box_main`; a command that
    cleared its own ``PDEATHSIG`` outlived the agent before, #41 round twelve), limits."""
    def apply() -> None:
        _libc().prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        _lower(resource.RLIMIT_NOFILE, limits.open_files)
        if limits.cpu_seconds is not None:
            _lower(resource.RLIMIT_CPU, limits.cpu_seconds)
        if limits.address_space_bytes is not None:
            _lower(resource.RLIMIT_AS, limits.address_space_bytes)
        if limits.file_size_bytes is not None:
            _lower(resource.RLIMIT_FSIZE, limits.file_size_bytes)
    return apply


def _lower(which: int, value: int) -> None:
    """Set a limit to ``value`` unless the current hard limit is already lower."""
    soft, hard = resource.getrlimit(which)
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    resource.setrlimit(which, (value, hard if hard != resource.RLIM_INFINITY else value))


class CappedOutput:
    """A command's output held in memory within a bound: its first ``head`` bytes and its last
    ``tail`` bytes (``OUTPUT_HEAD_BYTES``, ``OUTPUT_TAIL_BYTES``); what lies between is counted and
    dropped. Memory: ``head`` plus at most twice ``tail`` bytes, whatever the command prints."""

    def __init__(self, head: int = OUTPUT_HEAD_BYTES, tail: int = OUTPUT_TAIL_BYTES):
        self.head_bytes, self.tail_bytes = head, tail
        self.head, self.tail = bytearray(), bytearray()
        self.received = 0

    def write(self, data: bytes) -> None:
        """``data`` appended: into the head while it has room, then into the tail (its oldest bytes
        dropped once it holds twice ``tail`` bytes)."""
        self.received += len(data)
        room = self.head_bytes - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if len(data) >= self.tail_bytes:
            self.tail[:] = data[len(data) - self.tail_bytes:]
        elif data:
            self.tail += data
            if len(self.tail) > 2 * self.tail_bytes:
                del self.tail[:len(self.tail) - self.tail_bytes]

    @property
    def dropped(self) -> int:
        """How many bytes of the output are not kept."""
        return self.received - len(self.head) - min(len(self.tail), self.tail_bytes)

    def text(self) -> str:
        """What is kept, as text (``subprocess``'s ``text=True``: the locale's encoding, bytes that
        do not decode replaced, ``\\r\\n`` and ``\\r`` read as ``\\n``); where bytes were dropped, one
        line between the head and the tail says so: ``[swizzleperf-box: output cut at N bytes: ...]``."""
        tail = bytes(self.tail[max(0, len(self.tail) - self.tail_bytes):])
        if not self.dropped:
            return _text(bytes(self.head) + tail)
        return (_text(bytes(self.head)) + f"\n[{_BOX_PREFIX}output cut at {len(self.head)} bytes: {self.dropped} of "
                f"its {self.received} bytes dropped here; the first {self.head_bytes} and the last "
                f"{self.tail_bytes} kept]\n" + _text(tail))


def _text(data: bytes) -> str:
    import locale
    text = data.decode(locale.getpreferredencoding(False), errors="replace")
    return text.replace("\r\n", "\n").replace("\r", "\n")


def pump(read_fd: int, write, stop, chunk: int = 1 << 16) -> None:
    """Read ``read_fd`` until its end of file or until ``stop`` (a ``threading.Event``) is set,
    looked at every 0.1 s, handing each piece read (at most ``chunk`` bytes) to ``write``: the one
    reader of a command's output pipe (:func:`run`, :func:`run_gpu_turn`, the app's log,
    agent/capture/capture.py's ``CappedLog``). It never waits on a pipe for more than 0.1 s past
    ``stop``, so a process that holds the pipe open cannot hold its reader."""
    import select
    poll = select.poll()
    poll.register(read_fd, select.POLLIN | select.POLLHUP)
    while not stop.is_set():
        if not poll.poll(100):
            continue
        data = os.read(read_fd, chunk)
        if not data:
            return
        write(data)


class _Readers:
    """A thread per output pipe of ``process`` (:func:`pump`), each handing what it reads to its
    ``write``; :meth:`finish` waits for their end of file for at most ``DRAIN_S``, then stops them
    and closes the pipes (a process outside the box's kill may hold them open)."""

    def __init__(self, pipes: dict):
        import threading
        self.stop = threading.Event()
        self.pipes = list(pipes)
        self.threads = [threading.Thread(target=pump, args=(pipe.fileno(), write, self.stop), daemon=True)
                        for pipe, write in pipes.items()]
        for thread in self.threads:
            thread.start()

    def ended(self) -> bool:
        return not any(thread.is_alive() for thread in self.threads)

    def finish(self, drain_s: float | None = None) -> None:
        """Wait for the pipes' end of file, ``drain_s`` seconds at most (``DRAIN_S``); then stop
        reading and close them."""
        deadline = time.monotonic() + (DRAIN_S if drain_s is None else drain_s)
        for thread in self.threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        self.stop.set()
        for thread in self.threads:
            thread.join()
        for pipe in self.pipes:
            with contextlib.suppress(OSError):
                pipe.close()


def run(command: list, cwd: Path, env: dict, timeout_s: float, limits: Limits) -> subprocess.CompletedProcess:
    """Run ``command`` in the box; every process of the box is killed when ``timeout_s`` passes
    or this process is interrupted (Ctrl-C, SIGTERM turned into an exception): :func:`stop`; and when
    this process dies outright, the box's init kills them. Its stdout and stderr come back as text,
    each kept within ``OUTPUT_HEAD_BYTES`` + ``OUTPUT_TAIL_BYTES`` (:class:`CappedOutput`: a line
    ``[swizzleperf-box: output cut at N bytes: ...]`` where bytes were dropped); what is still
    printed ``DRAIN_S`` seconds after the box ended is not waited for.

    Raises:
        subprocess.TimeoutExpired: the command ran past ``timeout_s`` seconds (it has been killed).
        Unboxed: see :func:`start`.
    """
    process = start(command, cwd, env, limits, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                    stdin=subprocess.DEVNULL)   # bytes, decoded once kept: they need not be UTF-8
    out, err = CappedOutput(), CappedOutput()
    readers = None
    try:
        try:
            readers = _Readers({process.stdout: out.write, process.stderr: err.write})
            process.wait(timeout=timeout_s)
        finally:
            stop(process)   # what it left behind (in a PID namespace: already gone)
            if readers is not None:
                readers.finish()
    finally:
        removable(limits.writable)
    return subprocess.CompletedProcess(command, process.returncode, out.text(),
                                       err.text() + _why_killed(process, limits))


#: The line a worker prints on its stdout when it needs the GPU alone (:func:`run_gpu_turn`); the
#: answer on its stdin is one line, written once this process holds the GPU's lock.
GPU_TURN_ASK = "swizzleperf-worker: the GPU alone, please"


class _TurnAsks:
    """The stdout of a :func:`run_gpu_turn` command on its way to ``out``: the first line that is
    ``GPU_TURN_ASK`` (ended by ``\\n`` or ``\\r\\n``) is left out and ``on_ask()`` called; every
    other byte goes on. At most the ask's length is held back, whatever the line's length."""

    def __init__(self, out, on_ask):
        self.out, self.on_ask = out, on_ask
        self.ask = GPU_TURN_ASK.encode()
        self.held = bytearray()
        self.maybe = True      # the line so far may be the ask (its bytes are held)
        self.asked = False

    def write(self, data: bytes) -> None:
        if self.asked:
            self.out(data)
            return
        while data:
            cut = data.find(b"\n")
            piece, data = (data, b"") if cut < 0 else (data[:cut + 1], data[cut + 1:])
            if not self.maybe:
                self.out(piece)
            else:
                self.held += piece
                line = bytes(self.held)
                if line in (self.ask + b"\n", self.ask + b"\r\n"):
                    self.held.clear()
                    self.asked = True
                    self.on_ask()
                    if data:
                        self.out(data)
                    return
                if line.endswith(b"\n") or not (self.ask + b"\r\n").startswith(line):
                    self.out(line)
                    self.held.clear()
                    self.maybe = False
            if piece.endswith(b"\n"):
                self.maybe = True

    def close(self) -> None:
        """Its end of file: what is held goes on."""
        if self.held:
            self.out(bytes(self.held))
            self.held.clear()


def run_gpu_turn(command: list, cwd: Path, env: dict, timeout_s: float, limits: Limits) -> subprocess.CompletedProcess:
    """:func:`run`, for a command that shares its GPU with other workers (sandbox/gpu_lock.py): it
    compiles and checks side by side with them, then prints ``GPU_TURN_ASK`` where it needs the GPU
    alone (timing); this process takes the GPU's lock, answers one line on its stdin, and holds the
    lock until the command has ended. The lock is taken and released here, never inside the box:
    code in the box can ask early (it then only holds the GPU longer, within its timeout) but can
    neither keep the lock past its end nor take it from another worker. The time spent waiting for
    the lock is added to ``timeout_s``. Its output is kept as :func:`run` keeps it (the ask left
    out).

    Raises:
        subprocess.TimeoutExpired: the command ran past ``timeout_s`` seconds (it has been killed).
        Unboxed: see :func:`start`.
    """
    import queue
    from swizzleperf.sandbox import gpu_lock
    process = start(command, cwd, env, limits, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                    stdin=subprocess.PIPE)   # bytes that are not UTF-8: no hang
    events: queue.Queue = queue.Queue()
    out, err = CappedOutput(), CappedOutput()
    asks = _TurnAsks(out.write, lambda: events.put("ask"))
    deadline, holding, readers = time.monotonic() + timeout_s, False, None
    with contextlib.ExitStack() as held:
        try:
            try:
                readers = _Readers({process.stdout: asks.write, process.stderr: err.write})
                while not holding:   # until it asks, or ends
                    try:
                        events.get(timeout=min(0.1, max(0.0, deadline - time.monotonic())))
                    except queue.Empty:
                        if process.poll() is not None:   # it ended without asking
                            break
                        if time.monotonic() >= deadline:
                            raise subprocess.TimeoutExpired(command, timeout_s) from None
                        continue
                    asked = time.monotonic()
                    held.enter_context(gpu_lock.exclusive())
                    holding, deadline = True, deadline + time.monotonic() - asked
                    try:
                        process.stdin.write(b"go\n")
                        process.stdin.flush()
                    except OSError:   # it ended meanwhile
                        pass
                try:
                    process.wait(timeout=max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    raise subprocess.TimeoutExpired(command, timeout_s) from None
            finally:
                stop(process)   # its box; in a PID namespace: already gone
                if readers is not None:
                    readers.finish()
                asks.close()
                with contextlib.suppress(OSError):
                    process.stdin.close()
        finally:
            removable(limits.writable)
    return subprocess.CompletedProcess(command, process.returncode, out.text(),
                                       err.text() + _why_killed(process, limits))


def _why_killed(process: subprocess.Popen, limits: Limits) -> str:
    """The line that says why a command ended by ``SIGXFSZ`` (code that restored the signal's
    default wrote up to its file-size limit; the box ignores the signal, so a write past the limit
    is otherwise an ``EFBIG`` error, and the PID 1 of a PID namespace is never killed by it), or ""."""
    if process.returncode != -signal.SIGXFSZ:
        return ""
    limit = f" ({limits.file_size_bytes} bytes)" if limits.file_size_bytes is not None else ""
    return f"\n{_BOX_PREFIX}killed by SIGXFSZ: it wrote a file up to the box's file-size limit{limit}\n"


def start(command: list, cwd: Path, env: dict, limits: Limits, **popen: object) -> subprocess.Popen:
    """``command`` started in the box (the init of this module around it, the limits, a session of
    its own, death with this process), for a caller that talks to it over pipes (``popen``:
    Popen's stdin / stdout / stderr / text); the caller ends it, and every process of its box, with
    :func:`stop` (not with its process group alone: a process of the box can leave the group).
    Processes it starts share its PID namespace and its
    read-only file system. ``env`` gets the caches of Triton, CUDA and torch pointed into
    ``limits.writable[0]`` (``.cache``): a fresh one per command, never one that another
    command's code could have written.

    Raises:
        Unboxed: the box cannot keep the command from writing outside ``limits.writable`` on this
            machine, and the user did not allow that (``ALLOW_UNBOXED_ENV``).
    """
    _non_dumpable()   # before any box: what a box could uncover of /proc shows nothing of this process
    processes = limits.isolate_processes and _processes_isolated()
    fs = "none" if limits.writable is None else _filesystem_for(processes)
    writable = [os.path.realpath(p) for p in limits.writable or ()]
    if limits.shared_memory and fs == "landlock" and os.path.isdir("/dev/shm"):
        writable.append("/dev/shm")
    refusals = list(limits.seccomp_refusals)
    if fs == "landlock":   # Landlock alone: no right for metadata, none for truncate before ABI 3
        refusals += ["metadata"] + (["path_truncate"] if filesystem.landlock_abi() < 3 else [])
    # the user's app (writable None) keeps no capability either: nothing else keeps it from
    # un-mounting its fresh /proc (#41 round eleven)
    options = {"pid": processes, "net": limits.isolate_network,
               "drop_admin": limits.drop_admin or limits.writable is None,
               "fs": fs, "writable": writable, "landlock": filesystem.landlock_abi() > 0,
               "seccomp": refusals if refusals and _seccomp_for_workers() else [],
               "shm": None if limits.shared_memory else [WORKER_SHM_BYTES, WORKER_SHM_FILES]}
    if (fs == "mounts" and limits.scratch and writable   # not where the tmpfs would hide another writable path
            and not any(filesystem._beneath(p, writable[0]) for p in writable[1:])):
        options["scratch"] = [*limits.scratch, WORKER_SCRATCH_RETURNED]
    if limits.writable is None and limits.read_only:
        if processes:
            options["read_only"] = [os.path.realpath(p) for p in limits.read_only if os.path.lexists(p)]
            options["still_writable"] = [os.path.realpath(p) for p in limits.still_writable if os.path.lexists(p)]
        else:
            _no_read_only(limits.read_only)
    boxed = [*python_command("-m", "swizzleperf.sandbox", json.dumps(options)), "--", *command]
    return subprocess.Popen(boxed, cwd=cwd, env={**env, **_cache_env(writable)}, start_new_session=True,
                            preexec_fn=_preexec(limits), **popen)


def _no_read_only(paths: tuple) -> None:
    """One line, once: the box has no mount namespace, so it cannot make ``paths`` read-only."""
    if _no_read_only.said:
        return
    _no_read_only.said = True
    log.warning("sandbox: no mount namespace for the app here (no PID namespace permitted): it can write "
                "what your user can, the tool's own files too (%s)", ", ".join(map(str, paths[:3])) + (
                    ", ..." if len(paths) > 3 else ""))


_no_read_only.said = False


def _cache_env(writable: list) -> dict:
    """Where Triton, CUDA and torch keep their caches: beneath the first writable path (created
    here), so that they work on a read-only file system and nothing one command compiled is
    loaded by another (a shared Triton cache would let a candidate replace the baseline's
    binary)."""
    if not writable:
        return {}
    caches = Path(writable[0]) / ".cache"
    caches.mkdir(exist_ok=True)
    return {"TRITON_HOME": str(caches), "TRITON_CACHE_DIR": str(caches / "triton"),
            "CUDA_CACHE_PATH": str(caches / "nv"), "XDG_CACHE_HOME": str(caches),
            "TORCHINDUCTOR_CACHE_DIR": str(caches / "torchinductor")}


#: How deep a folder a boxed command leaves may nest below its writable path: the caches Triton
#: and torch write there nest 4 levels; shutil.rmtree (Python before 3.13) recurses once a level,
#: so a tree of 3 000 nested folders raised RecursionError in the caller's clean-up (round three).
MAX_LEFT_DEPTH = 12


def removable(writable: tuple | None, seconds: float | None = None) -> None:
    """What a boxed command left beneath ``writable`` made removable by ``shutil.rmtree`` (and so
    by ``tempfile.TemporaryDirectory``): folders nested deeper than ``MAX_LEFT_DEPTH`` are moved up
    to the top (renamed, never followed: a link stays a link), folders it made unreadable readable
    again. Iterative; best effort (what cannot be moved is left), and for at most ``seconds``
    (``CLEANUP_S`` by default): a command boxed without a tmpfs scratch (``Limits.scratch``) can
    leave any number of files, which its caller's ``rmtree`` then removes."""
    deadline = time.monotonic() + (CLEANUP_S if seconds is None else seconds)
    for top in writable or ():
        top = os.path.realpath(top)
        if not os.path.isdir(top):
            continue
        stack, moved = [(top, 0)], 0
        while stack:
            if time.monotonic() > deadline:
                log.warning("sandbox: the clean-up of %s stopped after %.0f s: what a boxed command left "
                            "there may not all be removable", top, CLEANUP_S if seconds is None else seconds)
                return
            folder, depth = stack.pop()
            for entry in _entries(folder):
                if not entry.is_dir(follow_symlinks=False):
                    continue
                if depth + 1 < MAX_LEFT_DEPTH:
                    stack.append((entry.path, depth + 1))
                    continue
                moved += 1
                target = os.path.join(top, f".nested-{moved}")
                with contextlib.suppress(OSError):
                    os.rename(entry.path, target)
                    stack.append((target, 1))


def _entries(folder: str) -> list:
    for attempt in range(2):
        try:
            return list(os.scandir(folder))
        except PermissionError:
            if attempt == 0:
                with contextlib.suppress(OSError):
                    os.chmod(folder, 0o700)
        except OSError:
            break
    return []


def stop(process: subprocess.Popen, grace_s: float | None = None) -> None:
    """End a command started by :func:`start` and every process of its box, and reap it: ``SIGTERM``
    to the box's init, which kills PID 1 of its PID namespace (the kernel then kills every other
    process of the namespace) or, without a namespace, every process descended from it (set-sid or
    not), and exits; after at most ``grace_s`` seconds (``STOP_GRACE_S``) ``SIGKILL`` to its whole
    process group. A process of the box that clears its ``PDEATHSIG`` and leaves the group with
    ``setsid()`` outlived a ``SIGKILL`` of the group alone (#41 round twelve). Nothing is raised for
    a command already ended."""
    try:
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=STOP_GRACE_S if grace_s is None else grace_s)
    finally:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        process.wait()


# -- process isolation: what this OS permits, and the init that sets it up -------------------------

_PROBE_CHILD = "import os; print(os.getpid(), os.readlink('/proc/self'))"


def _processes_isolated() -> bool:
    """Whether a PID namespace with a fresh ``/proc`` works here. This process is made
    non-dumpable first (:func:`_non_dumpable`), whatever the answer; where there is none, one line
    says so (once per process)."""
    _non_dumpable()
    isolated, why = isolation()
    if not isolated:
        _protect_agent(why)
    return isolated


def shield_from_boxes() -> bool:
    """Call in a process that starts workers whose boxes run an app or model-written code while it
    holds what they must not read (an eval's main process: the LLM's key in its environment). This
    process is made non-dumpable (:func:`_non_dumpable`: its ``/proc`` entries, ``environ`` among
    them, unreadable to every box, with or without a PID namespace); where the boxes get no PID
    namespace of their own, one line says so, once. Returns whether the boxes are isolated."""
    return _processes_isolated()


@functools.lru_cache(maxsize=1)
def isolation() -> tuple:
    """``(True, "")`` when the box can give a command a PID namespace and a fresh ``/proc`` on
    this machine, else ``(False, why)``; tried once per process (a run of the init around a
    one-line Python command, about 0.1 s)."""
    if not sys.platform.startswith("linux"):
        return False, f"no PID namespaces on {sys.platform}"
    seen, why = _probe({"pid": True, "net": False, "drop_admin": True}, _PROBE_CHILD)
    if seen == ["1", "1"]:
        return True, ""
    return False, why or f"the probe saw pid and /proc/self {seen}"


# -- the file system: what this OS permits ---------------------------------------------------------

#: The probe of a read-only file system: write into the first folder, try the second.
_PROBE_WRITES = ("import os, sys\nopen(os.path.join(sys.argv[1], 'ok'), 'w').close()\ntry:\n"
                 "    open(os.path.join(sys.argv[2], 'no'), 'w').close(); print('written')\n"
                 "except OSError:\n    print('denied')")


class Unboxed(OSError):
    """The box cannot keep a command from writing outside its writable paths on this machine
    (neither read-only mounts nor Landlock) and the user did not allow that; the message says
    why, and how to allow it, in one line."""


def allow_unboxed_writes() -> None:
    """Run boxed commands where the box cannot make the file system read-only for them (the
    user's explicit choice, ``--allow-unboxed-writes``): sets ``ALLOW_UNBOXED_ENV`` for this
    process and those it starts."""
    os.environ[ALLOW_UNBOXED_ENV] = "1"


def write_refusal() -> str:
    """The one line that refuses model-written code on this machine, or "" where the box keeps a
    worker to its folders (or the user allowed it not to)."""
    try:
        _filesystem_for(isolation()[0])
    except Unboxed as exc:
        return str(exc)
    return ""


@functools.lru_cache(maxsize=1)
def filesystem_isolation() -> tuple:
    """How the box keeps a command's writes to its writable paths here, and why not a better way:
    ``("mounts", "")`` (read-only mounts in the mount namespace of its PID namespace),
    ``("landlock", why)`` or ``("none", why)``. Each tried once per process by running the init
    around a command that writes into one folder and tries another (about 0.1 s)."""
    if not sys.platform.startswith("linux"):
        return "none", f"no mount namespaces or Landlock on {sys.platform}"
    pid, why = isolation()
    if pid:
        works, why = _writes_probe("mounts")
        if works:
            works, why = _cuda_in_box("mounts")
        if works:
            return "mounts", ""
    landlock, why_not = _landlock()
    if landlock:
        landlock, why_not = _cuda_in_box("landlock")
    if landlock:
        return "landlock", f"no read-only mounts: {why}"
    return "none", f"no read-only mounts ({why}) and no Landlock ({why_not})"


#: The probe of CUDA in the box: the driver API through ctypes (no torch: about 0.3 s), its
#: ``cuInit`` and device count printed as ``CODE COUNT`` ("nolib" without the driver).
_PROBE_CUDA = ("import ctypes\ntry:\n    cuda = ctypes.CDLL('libcuda.so.1')\nexcept OSError:\n    print('nolib')\n"
               "    raise SystemExit\nn = ctypes.c_int(0)\nr = cuda.cuInit(0)\n"
               "r = r or cuda.cuDeviceGetCount(ctypes.byref(n))\nprint(r, n.value)")


@functools.lru_cache(maxsize=1)
def _cuda_outside() -> list | None:
    """What :data:`_PROBE_CUDA` prints outside the box (None: it could not run)."""
    try:
        done = subprocess.run(python_command("-c", _PROBE_CUDA), capture_output=True, text=True, timeout=60,
                              env=worker_env(), stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.split() if done.returncode == 0 else None


def _cuda_in_box(how: str) -> tuple:
    """``(True, "")`` where CUDA starts in the box made ``how`` ("mounts", "landlock") as it does
    outside it, or where there is no CUDA GPU to start; else ``(False, why)``. (On an H100, 2026-12-06,
    every verification worker boxed with read-only mounts failed at its first CUDA call with
    "cudaGetDeviceCount ... Error 304: OS call failed", while the same code outside the box ran:
    a box that keeps the GPU away is no box for a GPU worker.)"""
    outside = _cuda_outside()
    if not outside or outside[0] != "0" or outside[1:] == ["0"]:
        return True, ""   # no driver, no GPU, or CUDA fails outside too: nothing the box takes away
    with tempfile.TemporaryDirectory(prefix="swizzleperf-probe-") as folder:
        options = {"pid": how == "mounts", "net": True, "drop_admin": True, "fs": how,
                   "writable": [os.path.realpath(folder)]}
        seen, why = _probe(options, _PROBE_CUDA)
    if seen == outside:
        return True, ""
    return False, (f"CUDA does not start in the box made by {how} (cuInit / cuDeviceGetCount gave "
                   f"{' '.join(seen) if seen else why or 'no answer'}; outside it {' '.join(outside)})")


@functools.lru_cache(maxsize=1)
def _landlock() -> tuple:
    """``(True, "")`` where Landlock restricts a command's writes here, else ``(False, why)``."""
    abi = filesystem.landlock_abi()
    if abi < 1:
        return False, "not in this kernel: Linux 5.13 or later with Landlock enabled"
    return _writes_probe("landlock")


def _filesystem_for(processes: bool) -> str:
    """"mounts", "landlock" or "none" for a command with (``processes``) or without a PID
    namespace; "none" only where the user allowed it (one line says so, once).

    Raises:
        Unboxed: neither works here, and the user did not allow that.
    """
    how, why = filesystem_isolation()
    if how == "mounts" and not processes:   # its mount namespace comes with the PID namespace
        landlock, why_not = _landlock()
        how, why = ("landlock", "") if landlock else ("none", f"no PID namespace for it, no Landlock ({why_not})")
    if how != "none":
        return how
    if os.environ.get(ALLOW_UNBOXED_ENV) != "1":
        raise Unboxed(f"refused to run model-written code: the worker's box cannot make the file system "
                      f"read-only here ({why}), so the code could write anywhere you can; run as root or "
                      f"with user namespaces, or on Linux 5.13+ with Landlock, or allow it with "
                      f"--allow-unboxed-writes ({ALLOW_UNBOXED_ENV}=1)")
    if not _filesystem_for.said:
        _filesystem_for.said = True
        log.warning("sandbox: workers can write wherever this user can (%s); allowed by %s", why,
                    ALLOW_UNBOXED_ENV)
    return "none"


_filesystem_for.said = False


def _writes_probe(how: str) -> tuple:
    """``(True, "")`` where the init's ``how`` ("mounts", "landlock") lets a command write into its
    writable folder and nowhere else, else ``(False, why)``."""
    with tempfile.TemporaryDirectory(prefix="swizzleperf-probe-") as folder:
        allowed, denied = Path(folder, "writable"), Path(folder, "other")
        allowed.mkdir()
        denied.mkdir()
        options = {"pid": how == "mounts", "net": False, "drop_admin": True, "fs": how,
                   "writable": [os.path.realpath(allowed)]}
        seen, why = _probe(options, _PROBE_WRITES, str(allowed), str(denied))
        if seen == ["denied"] and (allowed / "ok").exists():
            return True, ""
    return False, why or f"the probe's command saw {seen}"


def _probe(options: dict, code: str, *args: str) -> tuple:
    """Run the init with ``options`` around ``python -c code args``: ``(the words it printed, or
    None where it failed; the init's first reason, or "")``."""
    try:
        done = subprocess.run([*python_command("-m", "swizzleperf.sandbox", json.dumps(options)), "--",
                               *python_command("-c", code, *args)], capture_output=True, text=True,
                              timeout=60, env=worker_env(), stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"the box's init could not run ({exc})"
    reasons = [line[len(_BOX_PREFIX):].strip() for line in done.stderr.splitlines() if line.startswith(_BOX_PREFIX)]
    return (done.stdout.split() if done.returncode == 0 else None), (reasons[0] if reasons else "")


def _non_dumpable() -> None:
    """This process non-dumpable (``PR_SET_DUMPABLE`` 0; Linux, once), before it starts any box,
    with a PID namespace for the boxes or not: its ``/proc/<pid>`` entries (``environ`` with the API
    key, ``mem``) are then owned by root and unreadable to a process of the same user without
    ``CAP_SYS_PTRACE`` (on Linux 6.18 ``CAP_SYS_ADMIN`` and ``CAP_PERFMON`` read them too), which
    every box drops but a profiler's (``CAP_SYS_ADMIN``): defence in depth for a box that sees the
    host's ``/proc`` (#41 round eleven: an app that kept ``CAP_SYS_ADMIN`` un-mounted its fresh one;
    its capabilities are gone since). Children it starts are dumpable again once they exec. What it
    costs: no core dump of this process; a debugger or profiler of the same user (gdb, py-spy)
    attaches only with ``CAP_SYS_PTRACE``; run as a user other than root, this process can no longer
    read its own ``/proc/self/environ``, ``auxv``, ``io`` or ``mem`` (its ``status``, ``maps``,
    ``fd`` and ``fdinfo`` stay readable)."""
    if _non_dumpable.done or not sys.platform.startswith("linux"):
        return
    _non_dumpable.done = True
    _libc().prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)


_non_dumpable.done = False


def _protect_agent(why: str) -> None:
    """Where boxes get no PID namespace (``why``): this process non-dumpable, and one line that says
    so, once."""
    _non_dumpable()
    if _protect_agent.done:
        return
    _protect_agent.done = True
    log.warning("sandbox: no PID namespace for workers here (%s): they can see this user's other "
                "processes; the agent's own /proc entries are unreadable to them (non-dumpable agent, "
                "CAP_SYS_PTRACE and CAP_PERFMON dropped in workers)", why)


_protect_agent.done = False


# -- seccomp: no unix socket of a verification worker's own making, no io_uring --------------------

# linux/prctl.h, linux/seccomp.h, linux/filter.h, linux/audit.h
_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, _SECCOMP_GET_ACTION_AVAIL = 22, 2, 2
_SECCOMP_RET_ALLOW, _SECCOMP_RET_ERRNO = 0x7fff0000, 0x00050000
_BPF_LD_W_ABS, _BPF_JEQ_K, _BPF_AND_K, _BPF_RET_K, _BPF_JSET_K = 0x20, 0x15, 0x54, 0x06, 0x45
#: Per machine: its audit arch, the mask of a call's number (x86_64: the x32 bit cleared, so that
#: x32's socket is 41 too), the number of ``socket``, that of ``seccomp`` (the check of
#: :func:`_seccomp`) and that of ``socketpair``. ``io_uring_setup`` is 425 on both.
_SECCOMP_ARCHES = {"x86_64": (0xC000003E, 0xBFFFFFFF, 41, 317, 53),
                   "aarch64": (0xC00000B7, 0xFFFFFFFF, 198, 277, 199)}
_SYS_IO_URING_SETUP, _AF_UNIX, _SOCK_STREAM, _SOCK_TYPE_MASK = 425, 1, 1, 0xF
#: The socket families a worker may open (``socket_family``): unix (unless ``unix_socket``), IPv4,
#: IPv6 (the box's own network namespace has no route out) and netlink; not AF_VSOCK (the host
#: answered from inside the box, #41 round ten), AF_PACKET, AF_ALG, AF_BLUETOOTH...
_AF_INET, _AF_INET6, _AF_NETLINK = 2, 10, 16
#: Per machine, the calls of ``keyring`` (add_key, request_key, keyctl: the user's kernel keyring
#: was read and written from inside the box, #41 round ten) and of ``sysv_ipc`` (shmget, semget,
#: msgget: where the box has no IPC namespace of its own, Landlock alone, objects outside).
_KEYRING_CALLS = {"x86_64": (248, 249, 250), "aarch64": (217, 218, 219)}
_SYSV_IPC_CALLS = {"x86_64": (29, 64, 68), "aarch64": (194, 190, 186)}
#: Per machine, ``clone`` and ``unshare`` (``namespaces``: refused with a namespace flag in their
#: first argument) and ``clone3`` (435 on both: refused outright with ``ENOSYS``, so that glibc's
#: threads and ``posix_spawn`` fall back to ``clone``; its flags are in memory no filter reads).
_NAMESPACE_CALLS = {"x86_64": (56, 272), "aarch64": (220, 97)}
_SYS_CLONE3 = 435
#: The namespace flags (linux/sched.h): CLONE_NEWTIME (unshare's only: in clone's low byte, the exit
#: signal, no valid signal sets it), NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET.
#: Docker's default profile refuses the same (clone's mask 0x7E020000, unshare, clone3 with ENOSYS).
_NAMESPACE_FLAGS = 0x00000080 | _CLONE_NEWNS | 0x02000000 | 0x04000000 | _CLONE_NEWIPC | _CLONE_NEWUSER \
    | _CLONE_NEWPID | _CLONE_NEWNET


#: What the worker's filter refuses, each by name (``_seccomp_program``'s ``refused``): a call through
#: another ABI, ``io_uring_setup``, ``socket(AF_UNIX)``, a ``socketpair`` that is not a stream pair.
SECCOMP_REFUSALS = ("other_abi", "io_uring", "unix_socket", "datagram_pair", "socket_family", "keyring", "sysv_ipc",
                    "namespaces")
#: What the filter refuses besides where Landlock alone keeps a command to its folders (no read-only
#: mounts): Landlock has no right for a file's metadata, so a command restricted by it alone still
#: changed the mode, times and extended attributes of any file its user owns (issue #41, round four:
#: ``chmod 0777`` of the user's kernel file from a verification worker; a set-user-ID bit is a mode
#: too): ``metadata``, every chmod, chown, utime and set/remove-xattr call; ``path_truncate``,
#: ``truncate(path)``, which Landlock handles only from ABI 3 (Linux 6.2).
LANDLOCK_ALONE_REFUSALS = ("metadata", "path_truncate")
#: The calls of ``metadata`` and of ``path_truncate`` per machine (aarch64 has only the *at forms).
_METADATA_CALLS = {
    "x86_64": (90, 91, 92, 93, 94, 132, 188, 189, 190, 197, 198, 199, 235, 260, 261, 268, 280, 452, 463, 466),
    "aarch64": (5, 6, 7, 14, 15, 16, 52, 53, 54, 55, 88, 452, 463, 466),
}
_TRUNCATE_CALL = {"x86_64": 76, "aarch64": 45}


def _seccomp_program(machine: str, refused: tuple = SECCOMP_REFUSALS) -> list:
    """The filter of a verification worker, as ``(code, jt, jf, k)`` BPF instructions over
    ``struct seccomp_data`` (the call's number at 0, its audit arch at 4, its arguments from 16),
    refusing with ``EPERM`` what ``refused`` names (``SECCOMP_REFUSALS``, all by default;
    bench/gpu_seccomp_cuda.py tries CUDA's start under each alone): ``other_abi``, a call through
    another ABI than ``machine``'s own (a 32-bit call, ``int 0x80``, numbers ``socket`` otherwise
    and passes ``socketcall``'s arguments where no filter sees them; a 64-bit worker makes none);
    ``io_uring``, ``io_uring_setup`` (whose requests no filter sees); ``unix_socket``, ``socket``
    where its domain is ``AF_UNIX``; ``socket_family``, ``socket`` of any other family than unix,
    IPv4, IPv6 and netlink (AF_VSOCK reaches the host); ``keyring``, add_key, request_key and keyctl
    (the user's kernel keyring); ``sysv_ipc``, shmget, semget and msgget; ``namespaces``, ``unshare``
    and ``clone`` with a namespace flag (a user namespace, #41 round eleven: a large kernel surface a
    worker never needs; ``_NAMESPACE_FLAGS``), and ``clone3`` with ``ENOSYS`` (libc then falls back
    to ``clone``: threads, fork and spawn work as before); ``datagram_pair``,
    ``socketpair`` (``AF_UNIX`` alone on Linux)
    but for a stream pair (a datagram one can still ``sendto`` a named socket outside the box:
    ``/dev/log``, journald; multiprocessing and torch take stream pairs). Everything else is
    allowed.

    Raises:
        KeyError: no filter for ``machine`` (only x86_64 and aarch64).
        ValueError: an unknown name in ``refused``.
    """
    arch, mask, socket_call, _, socketpair_call = _SECCOMP_ARCHES[machine]
    known = SECCOMP_REFUSALS + LANDLOCK_ALONE_REFUSALS
    unknown = set(refused) - set(known)
    if unknown:
        raise ValueError(f"no such refusal: {', '.join(sorted(unknown))} (known: {', '.join(known)})")
    # instructions with jumps to labels ("allow", "deny", or a label set by ("label", name)): resolved below
    code = [(_BPF_LD_W_ABS, None, None, 4)]                                       # the audit arch
    if "other_abi" in refused:
        code += [(_BPF_JEQ_K, "number", "deny", arch), ("label", "number")]
    code += [(_BPF_LD_W_ABS, None, None, 0), (_BPF_AND_K, None, None, mask)]      # the call's number
    if "io_uring" in refused:
        code += [(_BPF_JEQ_K, "deny", None, _SYS_IO_URING_SETUP)]
    if "metadata" in refused:
        code += [(_BPF_JEQ_K, "deny", None, number) for number in _METADATA_CALLS[machine]]
    if "path_truncate" in refused:
        code += [(_BPF_JEQ_K, "deny", None, _TRUNCATE_CALL[machine])]
    if "keyring" in refused:
        code += [(_BPF_JEQ_K, "deny", None, number) for number in _KEYRING_CALLS[machine]]
    if "sysv_ipc" in refused:
        code += [(_BPF_JEQ_K, "deny", None, number) for number in _SYSV_IPC_CALLS[machine]]
    if "namespaces" in refused:
        clone, unshare = _NAMESPACE_CALLS[machine]
        code += [(_BPF_JEQ_K, None, "not_clone3", _SYS_CLONE3),
                 (_BPF_RET_K, None, None, _SECCOMP_RET_ERRNO | errno.ENOSYS), ("label", "not_clone3"),
                 (_BPF_JEQ_K, "flags", None, clone), (_BPF_JEQ_K, None, "not_namespaces", unshare),
                 ("label", "flags"), (_BPF_LD_W_ABS, None, None, 16),           # its flags (args[0]'s low half)
                 (_BPF_JSET_K, "deny", "allow", _NAMESPACE_FLAGS), ("label", "not_namespaces")]
    if "unix_socket" in refused or "socket_family" in refused:
        code += [(_BPF_JEQ_K, None, "not_socket", socket_call),
                 (_BPF_LD_W_ABS, None, None, 16)]                                 # its domain (args[0]'s low half)
        if "unix_socket" in refused:
            code += [(_BPF_JEQ_K, "deny", None, _AF_UNIX)]
        if "socket_family" in refused:
            code += [(_BPF_JEQ_K, "allow", None, family) for family in (_AF_UNIX, _AF_INET, _AF_INET6, _AF_NETLINK)]
            code += [(_BPF_RET_K, None, None, _SECCOMP_RET_ERRNO | errno.EPERM)]
        else:
            code += [(_BPF_RET_K, None, None, _SECCOMP_RET_ALLOW)]
        code += [("label", "not_socket")]
    if "datagram_pair" in refused:
        code += [(_BPF_JEQ_K, None, "allow", socketpair_call),
                 (_BPF_LD_W_ABS, None, None, 24),                                 # its type (args[1]'s low half)
                 (_BPF_AND_K, None, None, _SOCK_TYPE_MASK),                       # without NONBLOCK, CLOEXEC
                 (_BPF_JEQ_K, "allow", "deny", _SOCK_STREAM)]
    code += [("label", "allow"), (_BPF_RET_K, None, None, _SECCOMP_RET_ALLOW),
             ("label", "deny"), (_BPF_RET_K, None, None, _SECCOMP_RET_ERRNO | errno.EPERM)]
    program, labels = [], {}
    for item in code:
        if item[0] == "label":
            labels[item[1]] = len(program)
        else:
            program.append(item)

    def offset(i: int, target) -> int:   # None: the next instruction
        return 0 if target is None else labels[target] - i - 1
    return [(op, offset(i, jt), offset(i, jf), k) for i, (op, jt, jf, k) in enumerate(program)]


def _seccomp_program_installed(libc, program: list) -> None:
    """This process, and all it starts, under ``program`` (``_seccomp_program``'s instructions;
    needs ``no_new_privs``).

    Raises:
        OSError: the filter was not installed.
    """
    filters = (_SockFilter * len(program))(*program)
    fprog = _SockFprog(len(program), filters)
    if libc.prctl(_PR_SET_SECCOMP, ctypes.c_ulong(_SECCOMP_MODE_FILTER), ctypes.byref(fprog),
                  ctypes.c_ulong(0), ctypes.c_ulong(0)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"installing the seccomp filter: {os.strerror(err)}")


@functools.lru_cache(maxsize=1)
def _seccomp() -> tuple:
    """``(True, "")`` where the box can install its seccomp filter here (x86_64 or aarch64, a
    kernel with seccomp filters and their ``ERRNO`` action: Linux 4.14 or later), else
    ``(False, why)``. Asked of the kernel once per process (``SECCOMP_GET_ACTION_AVAIL``)."""
    import platform
    machine = platform.machine()
    if not sys.platform.startswith("linux"):
        return False, f"no seccomp on {sys.platform}"
    if machine not in _SECCOMP_ARCHES:
        return False, f"no filter for {machine}, only for {' and '.join(_SECCOMP_ARCHES)}"
    syscall = _libc().syscall
    syscall.restype = ctypes.c_long
    action = ctypes.c_uint32(_SECCOMP_RET_ERRNO)
    if syscall(ctypes.c_long(_SECCOMP_ARCHES[machine][3]), ctypes.c_uint(_SECCOMP_GET_ACTION_AVAIL),
               ctypes.c_uint(0), ctypes.byref(action)) != 0:
        return False, (f"not in this kernel ({os.strerror(ctypes.get_errno())}): seccomp filters need Linux "
                       f"4.14 or later built with CONFIG_SECCOMP_FILTER")
    return True, ""


def _seccomp_for_workers() -> bool:
    """Whether a verification worker gets the filter here; where not, one line says so, once."""
    works, why = _seccomp()
    if not works:
        _no_seccomp(why)
    return works


def _no_seccomp(why: str) -> None:
    if _no_seccomp.said:
        return
    _no_seccomp.said = True
    log.warning("sandbox: no seccomp filter for workers here (%s): candidate code can connect to a unix "
                "socket bound outside the box (a session bus, docker.sock, an ssh agent) and use io_uring", why)


_no_seccomp.said = False


class _SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


def _install_seccomp(libc, refused: tuple = SECCOMP_REFUSALS) -> None:
    """This process, and all it starts, under :func:`_seccomp_program` refusing ``refused``
    (needs ``no_new_privs``).

    Raises:
        OSError: the filter was not installed (the command must not run without it).
    """
    import platform
    _seccomp_program_installed(libc, _seccomp_program(platform.machine(), refused))


def box_main(argv: list) -> int:
    """The init: ``python -m swizzleperf.sandbox OPTIONS -- COMMAND...`` (OPTIONS: JSON with
    ``pid``, ``net``, ``drop_admin``, and ``fs``: "mounts" (only with ``pid``), "landlock" or
    "none", with ``writable``, the absolute paths COMMAND may write; ``landlock``: false where the
    agent saw no Landlock (then none over the mounts either; default true); ``seccomp``: the
    refusals of the worker's filter, :func:`_seccomp_program`; ``shm``: ``[bytes, files]`` of the
    fresh ``/dev/shm``, or null for the kernel's default; ``scratch``: ``[bytes, files, returned]``
    of a tmpfs over the first writable path (``Limits.scratch``), or absent; ``read_only`` and
    ``still_writable``: with ``fs`` "none", the paths made read-only, and the folders beneath them
    kept writable, ``Limits.read_only``). Namespaces as permitted, the file system as ``fs`` says,
    then COMMAND as PID 1 of the new PID namespace (without one: as this process's child, this
    process a child subreaper, so that every process COMMAND starts stays its descendant); exits as
    COMMAND does (killed by a signal: the same signal). On ``SIGTERM`` (:func:`stop`; the agent's death,
    its ``PDEATHSIG``) it kills PID 1 of its namespace, and so every process of it, or without a
    namespace every descendant; without a namespace it kills the descendants COMMAND left when
    COMMAND ends as well. What it cannot set up as asked, it does not run COMMAND without (exit
    127). Lines it writes on stderr begin with ``swizzleperf-box:``."""
    options, command = json.loads(argv[0]), argv[argv.index("--") + 1:]
    libc = _libc()
    flags = (_CLONE_NEWPID | _CLONE_NEWNS | _CLONE_NEWIPC if options["pid"] else 0) | (_CLONE_NEWNET if options["net"] else 0)
    entered = _unshare(libc, flags) if flags else ""
    if options["pid"] and entered == "":
        _say(f"no namespaces: unshare failed ({os.strerror(ctypes.get_errno()) or 'not permitted'})")
    namespace = bool(flags & _CLONE_NEWPID) and entered != ""
    mounts = options.get("fs") == "mounts"
    if mounts and not namespace:
        _say(f"cannot start {command[0]} in the box: no read-only mounts without a mount namespace")
        return 127
    if not namespace:   # the orphans of COMMAND's processes become this process's children, not init's
        libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    scratch = options.get("scratch") if mounts and options.get("writable") else None
    try:
        host_scratch = _scratch_under(libc, options["writable"][0]) if scratch else None
    except OSError as exc:
        _say(f"cannot start {command[0]} in the box: {exc.strerror or exc}")
        return 127
    state = {"child": None, "stopped": False}

    def end_box(signum, frame) -> None:   # SIGTERM: the whole box, now
        state["stopped"] = True
        if state["child"] is not None:
            _end_box(state["child"], namespace)
    signal.signal(signal.SIGTERM, end_box)
    child = os.fork()
    if child == 0:
        try:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            if namespace:
                _fresh_proc(libc)
                if scratch:
                    _scratch_tmpfs(libc, options["writable"][0], host_scratch, scratch[0], scratch[1])
                if mounts:
                    filesystem.read_only_except(libc, options["writable"], options.get("shm"))
                elif options.get("read_only"):
                    _read_only_beneath(libc, options["read_only"], options.get("still_writable", []))
                _enter_cwd_again()
            _harden(libc, options)
            os.execvp(command[0], command)
        except BaseException as exc:  # nothing may run outside the box: say why and stop
            _say(f"cannot start {command[0]} in the box: {getattr(exc, 'strerror', None) or exc}")
            os._exit(127)
    state["child"] = child
    if state["stopped"]:
        _end_box(child, namespace)
    try:
        _, status = os.waitpid(child, 0)
    except ChildProcessError:   # reaped by the SIGTERM handler's kill (no namespace)
        status = _REAPED[child]
    if not namespace:   # what COMMAND left running (with a namespace the kernel killed it with PID 1)
        _kill_descendants()
    elif host_scratch is not None and not state["stopped"]:
        _return_files(options["writable"][0], host_scratch, scratch[0], scratch[2])
    if os.WIFSIGNALED(status):  # end as it ended
        with contextlib.suppress(OSError, ValueError):  # SIGKILL and SIGSTOP keep their action
            signal.signal(os.WTERMSIG(status), signal.SIG_DFL)
        os.kill(os.getpid(), os.WTERMSIG(status))
    return os.waitstatus_to_exitcode(status)


_PR_SET_CHILD_SUBREAPER = 36
#: The exit statuses of the children the init reaped while killing descendants, by pid.
_REAPED: dict = {}
#: How many times the init looks for its descendants to kill (each time it kills those it found).
_KILL_ROUNDS = 200


def _end_box(child: int, namespace: bool) -> None:
    """Every process of the box killed: PID 1 of its namespace (``child``; the kernel then kills the
    rest), or without a namespace every descendant of this process."""
    if namespace:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signal.SIGKILL)
    else:
        _kill_descendants()


def _kill_descendants() -> None:
    """``SIGKILL`` to every process descended from this one (a child subreaper: an orphan of its
    tree is its child), looked for in ``/proc`` again until none is left (a process forked meanwhile
    is found the next time), and the children reaped. Each is signalled through a pidfd opened before
    its parent is checked once more, so that a pid reused meanwhile is never signalled."""
    me = os.getpid()
    for _ in range(_KILL_ROUNDS):
        _reap_children()
        tree = _descendants(me)
        if not tree:
            return
        members = set(tree) | {me}
        for pid in tree:
            _kill_descendant(pid, members)
        time.sleep(0.005)


def _descendants(root: int) -> dict:
    """``{pid: parent}`` of the live (not zombie) processes descended from ``root`` (``/proc``)."""
    parents, children = {}, {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        found = _stat(int(entry))
        if found:
            state, parent = found
            parents[int(entry)] = (state, parent)
            children.setdefault(parent, []).append(int(entry))
    out, stack = {}, [root]
    while stack:
        for pid in children.get(stack.pop(), ()):
            if pid not in out and pid != root:
                if parents[pid][0] != "Z":
                    out[pid] = parents[pid][1]
                stack.append(pid)
    return out


def _stat(pid: int) -> tuple | None:
    """``(state, parent pid)`` of ``pid`` (``/proc/PID/stat``), or None where it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            fields = handle.read().rsplit(b")", 1)[1].split()
        return fields[0].decode(), int(fields[1])
    except (OSError, IndexError, ValueError):
        return None


def _kill_descendant(pid: int, tree) -> None:
    try:
        handle = os.pidfd_open(pid)
    except (OSError, AttributeError):   # gone; or no pidfd (Linux before 5.3): by pid, checked just before
        found = _stat(pid)
        if found and found[1] in tree:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        return
    try:
        found = _stat(pid)
        if found and found[1] in tree:   # still the process found: its parent is of the tree
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(handle, signal.SIGKILL)
    finally:
        os.close(handle)


def _reap_children() -> None:
    """Every child that has ended reaped (its status kept in ``_REAPED``)."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        _REAPED[pid] = status


def _enter_cwd_again() -> None:
    """The working folder entered again by its path: the mounts made over it since (the scratch's
    tmpfs, a writable folder bound onto itself, a read-only one) are then where the command works (a
    working folder kept from before stays on the mount it was on: the read-only root)."""
    with contextlib.suppress(OSError):
        os.chdir(os.getcwd())


def _scratch_under(libc, path: str) -> int:
    """A descriptor of the folder ``path`` that stays writable to this process once the box's file
    system is read-only and a tmpfs covers the folder: ``/`` made private in this mount namespace
    (nothing propagates out), the folder bound onto itself (a mount of its own, which the tmpfs then
    hides from the box and the read-only remount leaves alone), opened.

    Raises:
        OSError: a mount or the open failed.
    """
    none = ctypes.c_char_p(None)
    if libc.mount(b"none", b"/", none, _MS_REC | _MS_PRIVATE, none) != 0:
        raise OSError(ctypes.get_errno(), f"making / private: {os.strerror(ctypes.get_errno())}")
    filesystem._mount(libc, path, path, None, filesystem._MS_BIND, f"binding {path}")
    return os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)


def _scratch_tmpfs(libc, path: str, host: int, size: int, files: int) -> None:
    """A tmpfs of ``size`` bytes and ``files`` inodes over ``path`` (in the box's mount namespace),
    holding a copy of what the folder held (``host``: a descriptor of the folder, opened before):
    the agent's own files (a worker's request, its empty folders).

    Raises:
        OSError: the mount or the copy failed (the command must not run then).
    """
    mode = stat.S_IMODE(os.fstat(host).st_mode)
    filesystem._mount(libc, "tmpfs", path, "tmpfs", filesystem._MS_NOSUID | filesystem._MS_NODEV,
                      f"a tmpfs of its own at {path}", f"mode={mode:o},size={size},nr_inodes={files}".encode())
    stack = [(host, path)]
    try:
        while stack:
            source, target = stack.pop()
            for entry in os.scandir(source):
                there = os.path.join(target, entry.name)
                found = entry.stat(follow_symlinks=False)
                if entry.is_symlink():
                    os.symlink(os.readlink(entry.name, dir_fd=source), there)
                elif entry.is_dir(follow_symlinks=False):
                    os.mkdir(there, stat.S_IMODE(found.st_mode) | 0o700)
                    stack.append((os.open(entry.name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                                          dir_fd=source), there))
                elif entry.is_file(follow_symlinks=False):
                    _copy_file(os.open(entry.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=source),
                               os.open(there, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC,
                                       stat.S_IMODE(found.st_mode)), found.st_size)
            if source != host:
                os.close(source)
    finally:
        for source, _ in stack:
            if source != host:
                os.close(source)


def _copy_file(source: int, target: int, size: int) -> None:
    """``size`` bytes of ``source`` into ``target`` (descriptors, both closed here)."""
    try:
        done = 0
        while done < size:
            sent = os.sendfile(target, source, done, min(size - done, 1 << 30))
            if not sent:
                break
            done += sent
    finally:
        os.close(source)
        os.close(target)


def _return_files(path: str, host: int, most_bytes: int, most_files: int) -> None:
    """After the command (and every process of its box) has ended: what lies at the top of the
    tmpfs at ``path`` put into the folder under it (``host``), in the order of the names,
    ``most_files`` entries and ``most_bytes`` bytes in all at most (one line says how many were
    left): a regular file copied, a link made again (never followed), a folder made again empty, a
    named pipe made again; what is inside a folder, and anything else, ends with the box. A name the
    folder already holds (the agent's own: the request, the working folder) is left as it is, but a
    regular file, which is copied over. Best effort: what cannot be put there is left."""
    try:
        box = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return
    returned = total = left = 0
    try:
        for name in sorted(os.listdir(box)):
            try:
                found = os.stat(name, dir_fd=box, follow_symlinks=False)
            except OSError:
                continue
            if returned >= most_files or (stat.S_ISREG(found.st_mode) and total + found.st_size > most_bytes):
                left += 1
                continue
            try:
                if stat.S_ISREG(found.st_mode):
                    source = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=box)
                    try:
                        target = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC,
                                         0o600, dir_fd=host)
                    except OSError:
                        os.close(source)
                        raise
                    _copy_file(source, target, found.st_size)
                    total += found.st_size
                elif stat.S_ISLNK(found.st_mode):
                    os.symlink(os.readlink(name, dir_fd=box), name, dir_fd=host)
                elif stat.S_ISDIR(found.st_mode):
                    os.mkdir(name, 0o700, dir_fd=host)
                elif stat.S_ISFIFO(found.st_mode):
                    os.mkfifo(name, 0o600, dir_fd=host)
                else:
                    continue
                returned += 1
            except OSError:
                continue
    finally:
        os.close(box)
    if left:
        _say(f"{left} entries at the top of its scratch not returned: {most_files} entries and {most_bytes} "
             f"bytes at most are")


def _read_only_beneath(libc, paths: list, still_writable: list) -> None:
    """In a mount namespace of the caller's own (``/`` already private): each of ``paths`` bound
    onto itself and remounted read-only with every mount beneath it, but for ``still_writable``
    folders beneath them (bound onto themselves first, so that the copies the bind of a path above
    them takes along are theirs): of a path and a folder that holds it, the one nearer wins; a tie,
    the writable folder. The rest of the file system stays as it is (the user's app).

    Raises:
        OSError: a mount failed, or one of ``paths`` is still writable afterwards (the command must
            not run then).
    """
    paths = [p for p in paths if os.path.lexists(p) and p != "/"]
    inside = [w for w in still_writable if os.path.isdir(w) and any(filesystem._beneath(w, p) for p in paths)]
    for path in inside:
        filesystem._mount(libc, path, path, None, filesystem._MS_BIND | filesystem._MS_REC, f"binding {path}")
    for path in paths:
        filesystem._mount(libc, path, path, None, filesystem._MS_BIND | filesystem._MS_REC, f"binding {path}")

    def read_only(point: str) -> bool:
        ro = max((len(p) for p in paths if filesystem._beneath(point, p)), default=-1)
        rw = max((len(w) for w in inside if filesystem._beneath(point, w)), default=-1)
        return ro > rw
    table = {m.id: m for m in filesystem.mounts()}
    for mount in filesystem._reachable(table):
        if read_only(mount.point) and "ro" not in mount.options:
            filesystem._read_only(libc, mount)
    left = [p for p in paths if read_only(p) and not os.statvfs(p).f_flag & os.ST_RDONLY]
    if left:
        raise OSError(errno.EPERM, f"still writable after the read-only remount: {', '.join(left[:5])}")


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
    """Drop what would read other processes (and, with ``drop_admin``, every capability: a
    verification worker needs none; else, where the file system is boxed, what reaches past
    read-only mounts, ``_CAPS_PAST_THE_MOUNTS``) from the bounding set, and the inheritable and
    ambient sets: gone after exec; no privileges gained by exec either. Each step where permitted
    (without CAP_SETPCAP the bounding set is left as it is). ``SIGXFSZ`` ignored (a write past
    RLIMIT_FSIZE fails with ``EFBIG``). Then, with ``fs`` "landlock", Landlock; with "mounts",
    Landlock as well where the kernel has it (no remount); with ``seccomp``, the seccomp filter.

    Raises:
        OSError: Landlock or the seccomp filter was asked for and could not be set up.
    """
    fs = options.get("fs", "none")
    caps = _CAPS_OTHER_PROCESSES + ((_CAP_SYS_ADMIN,) if options.get("drop_admin") else ())
    if fs != "none":
        caps += _CAPS_PAST_THE_MOUNTS
    if options.get("drop_admin"):   # a verification worker needs no capability at all, nor the app
        caps = tuple(range(_last_cap() + 1))
    for cap in caps:
        libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0)
    # root's exec grants the bounding set and the inheritable set: the latter cleared, ambient too
    libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    _clear_inheritable(libc)
    libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    # a write past RLIMIT_FSIZE fails with EFBIG instead of killing the command (exec keeps this)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    if fs == "landlock":   # /proc is the host's: only this process's own entries (it execs in place)
        filesystem.restrict_writes(options["writable"], (os.path.realpath("/proc/self"),),
                                   scoped=bool(options.get("drop_admin")), device_ioctls=True)
    elif fs == "mounts" and options.get("landlock", True) and filesystem.landlock_abi():
        # Landlock over the mounts as well: a profiler keeps CAP_SYS_ADMIN (it could remount), and
        # a block device made after the init covered those of /dev with /dev/null stays writable
        # on a read-only mount to whoever owns it (root)
        own = ["/dev/shm"] if os.path.isdir("/dev/shm") else []   # the box's fresh one
        # and its fresh /proc (its kernel settings read-only mounts): CUDA names its threads there,
        # in every process of the box (ncu's target is ncu's child)
        filesystem.restrict_writes(options["writable"] + own, ("/proc",), scoped=bool(options.get("drop_admin")))
    if options.get("seccomp"):
        _install_seccomp(libc, tuple(options["seccomp"]))
    if options.get("drop_admin"):   # none left to exec with either (exec would grant none: no bounding set)
        _clear_inheritable(libc, everything=True)


def _clear_inheritable(libc, everything: bool = False) -> None:
    """The inheritable set cleared; with ``everything``, the effective and permitted sets too.

    Raises:
        OSError: ``everything`` asked for and a capability is left.
    """
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)   # _LINUX_CAPABILITY_VERSION_3, this process
    data = (ctypes.c_uint32 * 6)()                  # effective, permitted, inheritable; twice
    cleared = range(6) if everything else (2, 5)
    if libc.capget(header, data) == 0 and any(data[i] for i in cleared):
        for i in cleared:
            data[i] = 0
        libc.capset(header, data)
    if everything and (libc.capget(header, data) != 0 or any(data)):
        raise OSError(errno.EPERM, "capabilities left after dropping them all")


def _last_cap() -> int:
    try:
        return int(Path("/proc/sys/kernel/cap_last_cap").read_text())
    except (OSError, ValueError):
        return 40


def _say(text: str) -> None:
    sys.stderr.write(_BOX_PREFIX + text + "\n")
    sys.stderr.flush()

