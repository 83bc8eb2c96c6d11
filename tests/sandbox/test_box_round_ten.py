"""The worker's box against what round ten of #41 got through: a worker wrote escape sequences into
the user's terminal (/dev/pts was writable), read and wrote the user's kernel keyring, made SysV
shared memory and message queues seen outside, and opened AF_VSOCK to the host. And the user's
``--app`` got the agent's credentials under innocent names (``LLM_K=sk-...``, ``DATABASE_URL`` with
a password, an ``Authorization: Bearer`` header in a value).

Hermetic: the box writes only beneath ``tmp_path``; the pty, the key and the IPC keys are this
test's own and removed at its end."""
import ctypes
import json
import os
import pty
import select
import subprocess
import sys
from pathlib import Path

import pytest

from swizzleperf import sandbox
from swizzleperf.sandbox import filesystem

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the box is Linux's")

HOSTILE = r'''
import ctypes, errno, json, os, socket, sys
libc = ctypes.CDLL(None, use_errno=True)
out = {}
def tried(name, call):
    try:
        result = call()
        out[name] = "done" if result is None or result >= 0 else errno.errorcode.get(ctypes.get_errno(), "?")
    except OSError as exc:
        out[name] = errno.errorcode.get(exc.errno, str(exc.errno))
def write_pty():
    fd = os.open(sys.argv[1], os.O_WRONLY | os.O_NOCTTY)
    os.write(fd, b"FROM-THE-BOX\r\n")
    os.close(fd)
tried("pty", write_pty)
number = {"x86_64": (248, 250, 29, 68), "aarch64": (217, 219, 194, 186)}[os.uname().machine]
tried("add_key", lambda: libc.syscall(number[0], b"user", b"box-key", b"x", 1, ctypes.c_int(-4)))
tried("keyctl", lambda: libc.syscall(number[1], 10, ctypes.c_int(-4), b"user", b"outside-key", 0))
tried("shmget", lambda: libc.syscall(number[2], int(sys.argv[2]), 4096, 0o1666))
tried("msgget", lambda: libc.syscall(number[3], int(sys.argv[2]) + 1, 0o1666))
tried("vsock", lambda: socket.socket(40, socket.SOCK_STREAM).close())
tried("tcp", lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM).close())
print(json.dumps(out))
'''


def _ipc_listed(key: int) -> bool:
    listed = subprocess.run(["ipcs", "-m", "-q"], capture_output=True, text=True).stdout if _has_ipcs() else ""
    return f"0x{key:08x}" in listed


def _has_ipcs() -> bool:
    return any(os.access(os.path.join(d, "ipcs"), os.X_OK) for d in os.environ.get("PATH", "").split(os.pathsep))


def test_a_worker_reaches_no_terminal_keyring_ipc_or_vsock_outside(tmp_path):
    if not sandbox.isolation()[0]:
        pytest.skip("no box here")
    master, slave = pty.openpty()
    key = 0x53570000 + os.getpid() % 0xFFFF
    try:
        (tmp_path / "cwd").mkdir()
        done = sandbox.run([sys.executable, "-c", HOSTILE, os.ttyname(slave), str(key)], tmp_path / "cwd",
                           sandbox.worker_env(TMPDIR=str(tmp_path / "cwd")), 120,
                           sandbox.worker_limits(120, interpret=True, writable=(tmp_path,)))
        assert done.returncode == 0, done.stderr[-2000:]
        out = json.loads(done.stdout.strip().splitlines()[-1])
        received = b""
        while select.select([master], [], [], 0.3)[0]:
            received += os.read(master, 1000)
        assert out["pty"] != "done" and b"FROM-THE-BOX" not in received, (out, received)
        assert out["add_key"] == out["keyctl"] == "EPERM", out
        assert out["shmget"] == out["msgget"] == "EPERM", out
        assert out["vsock"] == "EPERM" and out["tcp"] == "done", out
        assert not _ipc_listed(key)
    finally:
        os.close(master)
        os.close(slave)


def test_landlock_leaves_only_plain_and_gpu_devices_writable():
    """Under Landlock a worker writes no terminal, /dev/vsock, /dev/kvm, /dev/uinput: only the
    plain devices and the GPU's."""
    for path in filesystem._devices():
        assert path in filesystem.WRITABLE_DEVICES or path.startswith(("/dev/nvidia", "/dev/dri/", "/dev/infiniband/")), path
    assert not set(filesystem._devices()) & set(filesystem.terminal_devices())
    if os.path.exists("/dev/ptmx"):
        assert "/dev/ptmx" in filesystem.terminal_devices()


@pytest.mark.parametrize("name, value", [
    ("LLM_K", "sk-round10-agents-own-key-0123456789"),        # the agent's key under another name
    ("DATABASE_URL", "postgres://dbuser:DBPASSWORD123@db.example/x"),
    ("PIP_INDEX_URL", "https://__token__:PYPITOKEN999@pypi.example/simple"),
    ("HTTP_HEADERS", "Authorization: Bearer abcdefgh12345678")])
def test_the_app_gets_no_credential_by_its_value(monkeypatch, name, value):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-round10-agents-own-key-0123456789")
    monkeypatch.setenv(name, value)
    monkeypatch.setenv("PLAIN_SETTING", "hello")
    monkeypatch.delenv(sandbox.APP_PASS_ENV, raising=False)
    env = sandbox.app_env()
    assert name not in env and "OPENAI_API_KEY" not in env and env["PLAIN_SETTING"] == "hello"
    assert name in sandbox.withheld_from_app()
    monkeypatch.setenv(sandbox.APP_PASS_ENV, name)         # the user may pass it on by name
    assert sandbox.app_env()[name] == value
