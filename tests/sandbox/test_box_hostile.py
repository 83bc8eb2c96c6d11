"""The worker's box against what round three of #41 left untried (tests/sandbox/test_box_filesystem.py
and test_sandbox.py hold the rest): a command in the box that is root keeps no capability (it had
appended to a file outside its scratch through ``open_by_handle_at`` on the scratch's writable
mount, made block devices and set the immutable flag), a tree it leaves 3 000 folders deep or
undeletable does not crash the agent's clean-up, without a PID namespace it cannot signal the
agent, and a result file it replaces by a named pipe or a link to the agent's terminal is a
verdict, not a hang.

Each test is hermetic: the box writes only beneath ``tmp_path``."""
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from boxed import in_box
from hang_guard import never_blocks

from swizzleperf import sandbox
from swizzleperf.agent.verification.verify import Verdict, run_worker
from swizzleperf.sandbox import filesystem

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the box is Linux's")


#: What a root command would do past the read-only mounts: open a file outside by its handle through
#: the scratch's (writable) mount, make a block device, set the immutable flag on a file of its own.
PAST_THE_MOUNTS = r'''
import ctypes, fcntl, json, os, struct, sys
victim, scratch = sys.argv[1], sys.argv[2]
libc = ctypes.CDLL(None, use_errno=True)
out = {"caps": [l.split()[1] for l in open("/proc/self/status") if l.startswith("CapEff")][0]}
class Handle(ctypes.Structure):
    _fields_ = [("handle_bytes", ctypes.c_uint), ("handle_type", ctypes.c_int), ("f_handle", ctypes.c_ubyte * 128)]
def by_handle():
    handle, mount_id = Handle(128), ctypes.c_int()
    if libc.name_to_handle_at(-100, victim.encode(), ctypes.byref(handle), ctypes.byref(mount_id), 0):
        return "no handle: " + os.strerror(ctypes.get_errno())
    fd = libc.open_by_handle_at(os.open(scratch, os.O_RDONLY), ctypes.byref(handle), os.O_WRONLY | os.O_APPEND)
    if fd < 0:
        return "denied: " + os.strerror(ctypes.get_errno())
    os.write(fd, b"written from the box by handle\n")
    return "written"
out["by_handle"] = by_handle()
try:
    os.mknod(os.path.join(scratch, "disk"), 0o600 | 0o060000, os.makedev(7, 0))
    out["mknod"] = "made"
except OSError as exc:
    out["mknod"] = "denied: " + exc.strerror
path = os.path.join(scratch, "stuck")
open(path, "w").close()
try:
    fcntl.ioctl(os.open(path, os.O_RDONLY), 0x40086602, struct.pack("l", 0x10))   # FS_IOC_SETFLAGS, immutable
    out["immutable"] = "set"
except OSError as exc:
    out["immutable"] = "denied: " + exc.strerror
print(json.dumps(out))
'''


@pytest.mark.skipif(os.geteuid() != 0, reason="the capabilities of a root worker")
def test_a_root_command_keeps_no_capability_to_reach_past_its_folders(tmp_path, how):
    victim = tmp_path / "outside.txt"
    victim.write_text("the user's file\n")
    scratch = tmp_path / "scratch"
    try:
        seen = in_box(scratch, PAST_THE_MOUNTS, str(victim), str(scratch / "cwd"))
    finally:
        stuck = scratch / "cwd" / "stuck"
        if stuck.exists():   # were it set: clear it, or nothing removes tmp_path
            subprocess.run(["chattr", "-i", str(stuck)], capture_output=True)
    assert victim.read_text() == "the user's file\n", seen
    assert seen["by_handle"].startswith(("denied", "no handle")), seen
    assert seen["mknod"].startswith("denied") and seen["immutable"].startswith("denied"), seen
    assert int(seen["caps"], 16) == 0, seen


def test_a_tree_the_box_leaves_3000_deep_is_removed_with_its_folder(tmp_path):
    """Found in round three: ``TemporaryDirectory`` (the verification worker's folder) raised
    RecursionError from ``shutil.rmtree`` on what the worker left: the agent's run crashed."""
    deep = r'''
import json, os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
for _ in range(3000):
    os.mkdir("d", dir_fd=fd)
    inner = os.open("d", os.O_RDONLY, dir_fd=fd)
    os.close(fd)
    fd = inner
os.mkdir("locked", dir_fd=fd)
os.chmod("locked", 0, dir_fd=fd)
print(json.dumps({"made": True}))
'''
    with tempfile.TemporaryDirectory(dir=tmp_path) as folder:
        assert in_box(Path(folder), deep, folder) == {"made": True}
    assert not list(tmp_path.iterdir())


def test_the_deepest_folders_move_up_and_links_stay_links(tmp_path):
    top = tmp_path / "top"
    chain = top
    for _ in range(sandbox.MAX_LEFT_DEPTH + 3):
        chain = chain / "d"
    chain.mkdir(parents=True)
    (chain / "leaf.txt").write_text("kept")
    outside = tmp_path / "outside"
    outside.mkdir()
    (top / "d" / "link").symlink_to(outside)
    sandbox.removable((str(top),))
    depths = [len(p.relative_to(top).parts) for p in top.rglob("*")]
    assert max(depths) <= sandbox.MAX_LEFT_DEPTH + 1
    assert [p.read_text() for p in top.rglob("leaf.txt")] == ["kept"]
    assert (top / "d" / "link").is_symlink() and list(outside.iterdir()) == []


SIGNAL_THE_AGENT = r'''
import json, os, sys
try:
    os.kill(int(sys.argv[1]), 0)
    print(json.dumps("signalled"))
except OSError as exc:
    print(json.dumps(type(exc).__name__))
'''


def test_without_a_pid_namespace_the_box_cannot_signal_the_agent(tmp_path, monkeypatch):
    """Under Landlock alone (no namespaces for this user), candidate code saw the agent's PID and
    could stop or kill it (SIGSTOP: the run hung). Landlock's scopes (Linux 6.12) keep signals in."""
    if filesystem.landlock_abi() < 6:
        pytest.skip("no Landlock scopes in this kernel (ABI 6, Linux 6.12)")
    monkeypatch.setattr(sandbox, "filesystem_isolation", lambda: ("landlock", "forced by the test"))
    monkeypatch.setattr(sandbox, "_processes_isolated", lambda: False)
    seen = in_box(tmp_path / "scratch", SIGNAL_THE_AGENT, str(os.getpid()))
    assert seen == "PermissionError", seen


@pytest.mark.parametrize("swap", ["os.mkfifo(path)", "os.symlink('/proc/self/fd/0', path)",
                                  "os.mkdir(path)"])
def test_a_result_file_swapped_for_a_pipe_or_a_terminal_is_a_crash_not_a_hang(tmp_path, swap):
    """The worker's result.json lies in the folder its code may write; a named pipe there (or a link
    to the agent's stdin) blocked the agent's read of it for ever."""
    module = tmp_path / "swapping_kernel.py"
    module.write_text("import atexit, os, sys\n"
                      "def swap():\n    path = sys.argv[2]\n    os.unlink(path)\n"
                      f"    {swap}\natexit.register(swap)\n")
    with never_blocks(120, "the agent hung reading the worker's result"):
        result = run_worker({"kernel_path": str(module), "stages": ["permutation"]}, 60, interpret=True)
    assert result.verdict is Verdict.CRASH, result
    assert ("symbolic link" if "symlink" in swap else "not a regular file") in result.reason, result


def test_a_result_file_linked_to_a_file_of_the_agents_is_not_read(tmp_path):
    """#41 round thirteen (R21): the worker's code left result.json a link to a regular file it cannot
    write but the agent can read (its ``/proc/<pid>/environ``, a credentials file): the agent followed
    it, and what it read went into the verdict's reason, so into the record and the transcript."""
    secret = tmp_path / "credentials.json"
    secret.write_text('{"verdict": "PASS", "reason": "sk-not-for-the-record", "details": {}}')
    module = tmp_path / "linking_kernel.py"
    module.write_text("import atexit, os, sys\n"
                      "def swap():\n    path = sys.argv[2]\n    os.unlink(path)\n"
                      f"    os.symlink({str(secret)!r}, path)\natexit.register(swap)\n")
    result = run_worker({"kernel_path": str(module), "stages": ["permutation"]}, 60, interpret=True)
    assert result.verdict is Verdict.CRASH and "symbolic link" in result.reason, result
    assert "sk-not-for-the-record" not in result.reason + json.dumps(result.details, default=str)
