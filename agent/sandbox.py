"""The box model-written code runs in: a worker subprocess with a minimal environment, its own
empty working directory, resource limits, no network where the OS allows it, in a process group
of its own that dies with the agent.

This is defence in depth behind the static check (agent/candidate.py): a candidate that got past
the check still finds no API key, no proxy and no other secret in its environment, cannot write
into the directory the agent was started from by accident of a relative path, cannot dump core,
cannot open the network (Linux, where ``unshare(CLONE_NEWNET)`` is permitted: as root or with
unprivileged user namespaces), and is killed with its whole process group when the agent stops or
its time is up. Everything the worker may see of the agent's environment is named here, in one
place.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import resource
import signal
import subprocess
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

_CLONE_NEWNET = 0x40000000  # linux/sched.h
_PR_SET_PDEATHSIG = 1        # linux/prctl.h


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
    """

    address_space_bytes: int | None = None
    cpu_seconds: int | None = None
    open_files: int = 4096
    isolate_network: bool = True


def worker_limits(timeout_s: float, interpret: bool) -> Limits:
    """The limits of a verification worker: 16 GiB of address space for interpreted (CPU) workers
    (a CPU worker of the bundled kernels' check problems peaks well under 4 GiB, measured on this
    project's 24 GiB CI machine; the machine cannot give more than that anyway), CPU time twice the
    wall-clock timeout on every core plus a minute."""
    cores = os.cpu_count() or 1
    return Limits(address_space_bytes=16 << 30 if interpret else None,
                  cpu_seconds=int(timeout_s * 2 * cores) + 60)


def worker_env(**overrides: str) -> dict:
    """The environment of a worker: the allowed names of this process's environment (see
    ``ENV_NAMES``, ``ENV_PREFIXES``), nothing that looks like a credential, then ``overrides``."""
    env = {k: v for k, v in os.environ.items()
           if (k in ENV_NAMES or k.startswith(ENV_PREFIXES))
           and not any(marker in k.upper() for marker in SECRET_MARKERS)}
    env.update(overrides)
    return env


def _preexec(limits: Limits):
    """What the child runs between fork and exec: die with the parent, limits, no network."""
    def apply() -> None:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        _lower(resource.RLIMIT_NOFILE, limits.open_files)
        if limits.cpu_seconds is not None:
            _lower(resource.RLIMIT_CPU, limits.cpu_seconds)
        if limits.address_space_bytes is not None:
            _lower(resource.RLIMIT_AS, limits.address_space_bytes)
        if limits.isolate_network:
            libc.unshare(_CLONE_NEWNET)  # fails (EPERM) where the OS does not permit it: left as is
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
    process = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
                               start_new_session=True, preexec_fn=_preexec(limits))
    try:
        stdout, stderr = process.communicate(timeout=timeout_s)
    except BaseException:
        _kill_group(process)
        raise
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)


def _kill_group(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.communicate()
