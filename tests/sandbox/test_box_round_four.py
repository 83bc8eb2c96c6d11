"""The worker's box against what was left after round four of #41: a verification worker connected
to a unix socket bound outside the box (a session bus, docker.sock, ssh-agent: network namespaces
and Landlock's scopes cover only abstract sockets), a root command opened a block device for
writing where the read-only mounts had no Landlock on top (a read-only mount does not stop a
device write), and nothing bounded the size of a file a worker wrote.

Each test is hermetic: the box writes only beneath ``tmp_path``; no block device is ever written."""
import dataclasses
import json
import logging
import os
import socket
import stat
import sys
from pathlib import Path

import pytest
from boxed import in_box, run_in_box

from swizzleperf import sandbox
from swizzleperf.agent.verification.verify import Verdict, run_worker
from swizzleperf.sandbox import filesystem

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the box is Linux's")


# -- 1. unix sockets bound outside the box, and io_uring ---------------------------------------------

SOCKETS = r'''
import ctypes, errno, json, socket, sys
out = {}
try:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(sys.argv[1])
    out["unix"] = "connected"
except OSError as exc:
    out["unix"] = errno.errorcode.get(exc.errno, str(exc.errno))
a, b = socket.socketpair()
a.sendall(b"x")
out["socketpair"] = b.recv(1).decode()
try:   # a datagram pair can sendto a named socket outside the box (/dev/log, journald)
    socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    out["datagram pair"] = "made"
except OSError as exc:
    out["datagram pair"] = errno.errorcode.get(exc.errno, str(exc.errno))
try:
    socket.socket(socket.AF_INET, socket.SOCK_STREAM).close()
    out["tcp"] = "made"
except OSError as exc:
    out["tcp"] = errno.errorcode.get(exc.errno, str(exc.errno))
libc = ctypes.CDLL(None, use_errno=True)
params = ctypes.create_string_buffer(120)          # struct io_uring_params, zeroed
fd = libc.syscall(425, 1, params)                  # io_uring_setup: the same number everywhere
out["io_uring"] = "made" if fd >= 0 else errno.errorcode.get(ctypes.get_errno(), "?")
print(json.dumps(out))
'''


@pytest.fixture
def listening(tmp_path):
    """A unix socket bound and listening outside the box (as a session bus or docker.sock is)."""
    path = tmp_path / "bus.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(8)
    yield str(path)
    server.close()


def _tcp_outside() -> str:
    try:
        socket.socket(socket.AF_INET, socket.SOCK_STREAM).close()
        return "made"
    except OSError:   # the same failure inside and out: the box changes nothing for TCP
        return "failed"


def test_a_verification_worker_cannot_connect_to_a_unix_socket_outside(tmp_path, how, listening):
    if not sandbox._seccomp()[0]:
        pytest.skip(f"no seccomp filter here: {sandbox._seccomp()[1]}")
    seen = in_box(tmp_path / "scratch", SOCKETS, listening)
    assert seen["unix"] == "EPERM" and seen["datagram pair"] == "EPERM", seen
    assert seen["socketpair"] == "x", seen                 # multiprocessing's and torch's pipes
    assert seen["tcp"] == "made" or _tcp_outside() == "failed", seen
    assert seen["io_uring"] == "EPERM", seen


def test_a_compiled_worker_keeps_its_unix_socket_and_nothing_else_of_the_filter(tmp_path, how, listening):
    """CUDA's start needs socket(AF_UNIX); a compiled (GPU) worker is refused the rest."""
    if not sandbox._seccomp()[0]:
        pytest.skip(f"no seccomp filter here: {sandbox._seccomp()[1]}")
    scratch = tmp_path / "scratch"
    seen = in_box(scratch, SOCKETS, listening, limits=sandbox.worker_limits(120, interpret=False, writable=(scratch,)))
    assert seen["unix"] == "connected" and seen["socketpair"] == "x", seen
    assert seen["datagram pair"] == "EPERM" and seen["io_uring"] == "EPERM", seen


def test_the_rank_pool_and_profilers_keep_their_unix_sockets(tmp_path, listening):
    """NCCL, gloo and ncu talk over unix sockets: the filter is the verification worker's alone."""
    scratch = tmp_path / "scratch"
    pool = sandbox.Limits(drop_admin=True, writable=(str(scratch),), shared_memory=True)
    assert not pool.seccomp_refusals
    assert sandbox.worker_limits(60, True).seccomp_refusals == sandbox.SECCOMP_REFUSALS
    # a compiled (GPU) worker: CUDA's start needs socket(AF_UNIX) (cuInit 304 under that refusal
    # alone on an H100, bench/results/gpu_round42_h100/seccomp_cuda_h100.json); the rest it keeps
    assert set(sandbox.worker_limits(60, False).seccomp_refusals) == set(sandbox.SECCOMP_REFUSALS) - {"unix_socket",
                                                                                                     "sysv_ipc"}
    seen = in_box(scratch, SOCKETS, listening, limits=pool)
    assert seen["unix"] == "connected" and seen["socketpair"] == "x" and seen["datagram pair"] == "made", seen


def test_without_seccomp_the_worker_runs_and_one_line_says_so_once(tmp_path, listening, monkeypatch, caplog):
    monkeypatch.setattr(sandbox, "_seccomp", lambda: (False, "forced by the test"))
    monkeypatch.setattr(sandbox._no_seccomp, "said", False)
    with caplog.at_level(logging.WARNING, logger="swizzleperf.sandbox"):
        for _ in range(2):
            seen = in_box(tmp_path / "scratch", SOCKETS, listening)
            assert seen["unix"] == "connected", seen
    said = [r.getMessage() for r in caplog.records if "seccomp" in r.getMessage()]
    assert len(said) == 1 and "forced by the test" in said[0] and "unix socket" in said[0], said


def test_the_filter_reads_the_architecture_before_the_call_number():
    """An x86_64 or aarch64 filter: a call made through another ABI (32-bit) is refused outright,
    the x32 bit is masked, socket is 41 / 198, socketpair 53 / 199 and io_uring_setup 425."""
    for machine, number, pair in (("x86_64", 41, 53), ("aarch64", 198, 199)):
        program = sandbox._seccomp_program(machine)
        assert program[0] == (0x20, 0, 0, 4)                # load the audit arch first
        assert {number, pair, 425} <= {k for _, _, _, k in program}
        for i, (code, jt, jf, _) in enumerate(program):     # every jump lands inside the program
            assert code != 0x15 or max(i + 1 + jt, i + 1 + jf) < len(program)
        assert program[-1] == (0x06, 0, 0, 0x00050000 | 1) and program[-2] == (0x06, 0, 0, 0x7fff0000)
    with pytest.raises(KeyError):
        sandbox._seccomp_program("riscv64")
    assert sandbox._seccomp_program("x86_64", ()) == [(0x20, 0, 0, 4), (0x20, 0, 0, 0), (0x54, 0, 0, 0xBFFFFFFF),
                                                      (0x06, 0, 0, 0x7fff0000), (0x06, 0, 0, 0x00050000 | 1)]
    with pytest.raises(ValueError, match="no such refusal: sockets"):
        sandbox._seccomp_program("x86_64", ("sockets",))


# -- 2. block devices under the read-only /dev ----------------------------------------------------

def _block_device() -> str | None:
    for entry in sorted(os.scandir("/dev"), key=lambda e: e.name):
        try:
            if stat.S_ISBLK(entry.stat(follow_symlinks=False).st_mode):
                return entry.path
        except OSError:
            continue
    return None


#: Opens (never writes) the block device for writing, and what the GPU's workers need of /dev: a
#: character device written, /dev/shm written.
OPEN_BLOCK = r'''
import errno, json, os, stat, sys
out = {}
try:
    fd = os.open(sys.argv[1], os.O_WRONLY)
    mode = os.fstat(fd).st_mode
    os.close(fd)                                     # nothing written
    out["block"] = "opened a block device" if stat.S_ISBLK(mode) else "not a block device"
except OSError as exc:
    out["block"] = errno.errorcode.get(exc.errno, str(exc.errno))
with open("/dev/null", "w") as null:
    null.write("x")
out["null"] = stat.S_ISCHR(os.stat("/dev/null").st_mode)
with open("/dev/shm/box-test", "w") as shm:
    shm.write("x")
out["shm"] = open("/dev/shm/box-test").read()
print(json.dumps(out))
'''


@pytest.mark.parametrize("landlock", [False, True], ids=["without-landlock", "with-landlock"])
def test_a_root_command_cannot_open_a_block_device_for_writing(tmp_path, monkeypatch, landlock):
    if sandbox.filesystem_isolation()[0] != "mounts":
        pytest.skip(f"no read-only mounts here: {sandbox.filesystem_isolation()[1]}")
    if os.geteuid() != 0:
        pytest.skip("only root owns the block devices")
    device = _block_device()
    if device is None:
        pytest.skip("no block device under /dev")
    if not landlock:   # a kernel without Landlock: the read-only mounts alone
        monkeypatch.setattr(filesystem, "landlock_abi", lambda: 0)
    elif filesystem.landlock_abi() < 1:
        pytest.skip("no Landlock in this kernel")
    seen = in_box(tmp_path / "scratch", OPEN_BLOCK, device)
    assert seen["block"] in ("not a block device", "EACCES", "EPERM", "EROFS", "ENXIO"), seen
    assert seen["null"] is True and seen["shm"] == "x", seen


def test_the_box_says_which_block_devices_it_covers(tmp_path):
    made = tmp_path / "dev"
    (made / "shm").mkdir(parents=True)
    (made / "null").write_text("")
    assert filesystem.block_devices(str(made)) == []
    device = _block_device()
    if device is not None:
        assert device in filesystem.block_devices()
        assert all(stat.S_ISBLK(os.stat(p).st_mode) for p in filesystem.block_devices())


# -- 3. the size of a file a worker writes --------------------------------------------------------

WRITE_PAST = r'''
import errno, json, os, signal, sys
if sys.argv[2] == "default":   # as code that restores SIGXFSZ's default would: killed, not an error
    signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
out = {}
try:
    with open(sys.argv[1], "wb") as handle:
        for _ in range(4):
            handle.write(b"\0" * (512 << 10))
            handle.flush()
    out["write"] = "written"
except OSError as exc:
    out["write"] = errno.errorcode.get(exc.errno, str(exc.errno))
out["size"] = os.path.getsize(sys.argv[1])
print(json.dumps(out))
'''

MIB = 1 << 20


def _small(scratch: Path) -> sandbox.Limits:
    return dataclasses.replace(sandbox.worker_limits(120, interpret=True, writable=(scratch,)), file_size_bytes=MIB)


def test_a_worker_has_a_file_size_limit():
    assert sandbox.worker_limits(60, True).file_size_bytes == sandbox.WORKER_FILE_SIZE_BYTES == 4 << 30
    assert sandbox.Limits().file_size_bytes is None   # profilers, the pool, the user's app: none


@pytest.mark.parametrize("disposition", ["ignored", "default"])
def test_a_write_past_the_limit_fails_with_efbig(tmp_path, how, disposition):
    """SIGXFSZ is ignored in the box; restored to its default by the command, it still kills no PID 1
    of a PID namespace (the kernel spares it): the write fails either way."""
    scratch = tmp_path / "scratch"
    seen = in_box(scratch, WRITE_PAST, str(scratch / "cwd" / "big"), disposition, limits=_small(scratch))
    assert seen == {"write": "EFBIG", "size": MIB}, seen


def test_a_command_killed_by_the_limit_says_why_in_one_line(tmp_path, monkeypatch):
    """Without a PID namespace (Landlock alone), code that restores SIGXFSZ's default is killed by
    its write past the limit: the last line of its stderr says so."""
    if not sandbox._landlock()[0]:
        pytest.skip(f"no Landlock here: {sandbox._landlock()[1]}")
    monkeypatch.setattr(sandbox, "filesystem_isolation", lambda: ("landlock", "forced by the test"))
    monkeypatch.setattr(sandbox, "_processes_isolated", lambda: False)
    scratch = tmp_path / "scratch"
    done = run_in_box(scratch, WRITE_PAST, _small(scratch), str(scratch / "cwd" / "big"), "default")
    assert done.returncode == -25 and done.stdout == "", done
    last = done.stderr.strip().splitlines()[-1]
    assert "file-size limit" in last and str(MIB) in last, done.stderr[-2000:]


def test_a_worker_whose_code_writes_past_the_limit_is_a_crash_naming_it(tmp_path, monkeypatch):
    module = tmp_path / "filling_kernel.py"
    module.write_text("import os\nwith open(os.path.join(os.environ['TMPDIR'], 'filler'), 'wb') as f:\n"
                      "    for _ in range(4):\n        f.write(b'\\0' * (512 << 10))\n")
    small = sandbox.worker_limits

    def worker_limits(*args, **kwargs):
        return dataclasses.replace(small(*args, **kwargs), file_size_bytes=MIB)
    monkeypatch.setattr(sandbox, "worker_limits", worker_limits)
    result = run_worker({"kernel_path": str(module), "stages": ["permutation"]}, 60, interpret=True)
    assert result.verdict in (Verdict.CRASH, Verdict.COMPILE_ERROR) and "File too large" in result.reason, result
