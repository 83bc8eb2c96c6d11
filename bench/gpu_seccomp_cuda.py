"""Which refusal of the verification worker's seccomp filter keeps CUDA from starting (issue #41).

On an H100 (2026-12-06, bench/results/gpu_round42_h100/box6_h100.txt) every compiled worker under
the filter failed at its first CUDA call ("cudaGetDeviceCount ... Error 304: OS call failed"), while
the box's CUDA probe, the same box without the filter, passed; the filter has since been left to
interpreted workers. This tries ``cuInit`` and ``cuDeviceGetCount`` (the driver API, through
ctypes) in a fresh process under the whole filter, under each of its refusals alone
(``sandbox.SECCOMP_REFUSALS``) and under none, and says per variant whether CUDA started and whether
``socket(AF_UNIX)`` was refused; where ``strace`` is installed, the whole filter's run is traced
for the socket, socketpair, io_uring and memfd calls and what they returned.

    python -m bench.gpu_seccomp_cuda --out OUT.json        # on the GPU machine (bench/gpu_setup.sh first)

On a machine without a CUDA driver every variant says so (the filters are still installed and the
socket check still made: the CPU test of this script).
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

from swizzleperf import sandbox

_CHILD = r'''
import ctypes, errno, json, platform, socket, sys
from swizzleperf import sandbox
refused = tuple(json.loads(sys.argv[1]))
libc = ctypes.CDLL(None, use_errno=True)
if libc.prctl(38, 1, 0, 0, 0) != 0:                       # PR_SET_NO_NEW_PRIVS
    print(json.dumps({"error": "no_new_privs: " + errno.errorcode.get(ctypes.get_errno(), "?")})); sys.exit(0)
sandbox._seccomp_program_installed(libc, sandbox._seccomp_program(platform.machine(), refused))
out = {}
try:
    socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).close()
    out["unix_socket"] = "made"
except OSError as exc:
    out["unix_socket"] = errno.errorcode.get(exc.errno, str(exc.errno))
try:
    cuda = ctypes.CDLL("libcuda.so.1")
except OSError as exc:
    out.update(cuInit=None, why="no CUDA driver here: " + " ".join(str(exc).split()))
else:
    out["cuInit"] = cuda.cuInit(0)
    count = ctypes.c_int(-1)
    out["cuDeviceGetCount"] = cuda.cuDeviceGetCount(ctypes.byref(count)) if out["cuInit"] == 0 else None
    out["devices"] = count.value
print(json.dumps(out))
'''

#: The calls the traced run shows (what a filter like ours is known to break CUDA with: sockets,
#: io_uring, and memfd_create in another sandbox's case, NVIDIA/OpenShell#1696).
TRACED = "socket,socketpair,connect,io_uring_setup,memfd_create"


def variants() -> list:
    """``(name, refused)``: the whole filter, each refusal alone, none."""
    return ([("all", sandbox.SECCOMP_REFUSALS)] + [(name, (name,)) for name in sandbox.SECCOMP_REFUSALS]
            + [("none", ())])


def try_variant(refused: tuple, timeout_s: float = 60.0, trace: bool = False) -> dict:
    """One fresh process under the filter refusing ``refused``: ``{"unix_socket", "cuInit",
    "cuDeviceGetCount", "devices"}`` (the driver's return codes: 0 is success, 304 the OS error),
    or ``{"error"}``; with ``trace`` and strace installed, ``"trace"``: its lines for ``TRACED``."""
    command = [sys.executable, "-c", _CHILD, json.dumps(list(refused))]
    strace = shutil.which("strace") if trace else None
    if strace:
        command = [strace, "-f", "-qq", "-e", f"trace={TRACED}", *command]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return {"error": f"no answer within {timeout_s:.0f} s"}
    lines = done.stdout.strip().splitlines()
    try:
        result = json.loads(lines[-1]) if lines else {"error": "no output"}
    except ValueError:
        result = {"error": f"not JSON: {lines[-1][:200]}"}
    if done.returncode != 0 and "error" not in result:
        result["error"] = f"exit {done.returncode}: {' '.join(done.stderr.split())[-300:]}"
    if strace:
        result["trace"] = [line for line in done.stderr.splitlines() if "(" in line][-40:]
    return result


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", help="Write the results as JSON here too.")
    args = parser.parse_args(argv)
    works, why = sandbox._seccomp()
    if not works:
        print(f"no seccomp filter here: {why}")
        return 1
    results = {name: try_variant(refused, trace=name == "all") for name, refused in variants()}
    for name, result in results.items():
        print(f"{name:14} " + json.dumps({k: v for k, v in result.items() if k != "trace"}))
    for line in results["all"].get("trace", []):
        print(f"  strace: {line}")
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
