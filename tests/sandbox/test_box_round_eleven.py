"""The box against what round eleven of #41 got through: an ``--app`` kept ``CAP_SYS_ADMIN``, un-mounted
its fresh ``/proc`` and read the agent's API key from the host's ``/proc/<agent>/environ`` (A01); a
verification worker made host loop devices through ``/dev/loop-control``, a VM through ``/dev/kvm``
and a userfaultfd through ``/dev/userfaultfd`` (an ioctl needs no write right: B11-B13), made user
namespaces (B14), and had a ``/dev/shm`` of half the machine's RAM (B19).

Hermetic: the boxes write only beneath ``tmp_path``; the agents are subprocesses with a private
HOME and a key of the test's own; every ioctl tried is one that changes nothing on the host."""
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from boxed import in_box

from swizzleperf import sandbox
from swizzleperf.sandbox import filesystem

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the box is Linux's")

_SECRET = b"sk-round11-agent-key-must-not-leak"
needs_namespaces = pytest.mark.skipif(not sandbox.isolation()[0], reason="no PID namespace permitted here")


def _agent(tmp_path: Path, code: str, *args: str) -> tuple:
    """Run ``code`` as an agent would run: a process of its own, started with the key in its
    environment (what its /proc/<pid>/environ shows) and a private HOME. Returns (its last line
    read as JSON, its stderr)."""
    (tmp_path / "home").mkdir(exist_ok=True)
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, OPENAI_API_KEY=_SECRET.decode(), HOME=str(tmp_path / "home")))
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


# -- A01: the app un-mounts its /proc and reads the agent's environ --------------------------------

#: The app of payloads/app_procleak: its capabilities, umount2("/proc", MNT_DETACH), then every
#: /proc/N/environ it can read searched for the key; written where the test reads it.
PROC_LEAK_APP = r'''
import ctypes, json, os, sys
libc = ctypes.CDLL(None, use_errno=True)
out = {"caps": {l.split(":")[0]: int(l.split()[1], 16) for l in open("/proc/self/status") if l.startswith("Cap")}}
out["umount"] = libc.umount2(b"/proc", 2)
out["found"] = []
for pid in [p for p in os.listdir("/proc") if p.isdigit()]:
    try:
        if SECRET in open(f"/proc/{pid}/environ", "rb").read():
            out["found"].append(pid)
    except OSError:
        pass
open(sys.argv[1], "w").write(json.dumps(out))
'''

#: The agent: capture's runner of the app (agent/capture/capture.py: run_with_hook), as profile
#: --app / optimize --app / eval --apps' row worker start it.
APP_AGENT = r'''
import json, sys
from pathlib import Path
from swizzleperf.agent.capture.capture import hook_environment, run_with_hook
folder = Path(sys.argv[1])
(folder / "hook").mkdir()
code = run_with_hook(sys.argv[2], hook_environment(folder / "hook"), 120, folder, folder / "app.log")
print(json.dumps({"code": code, "log": (folder / "app.log").read_text()[-2000:]}))
'''


@needs_namespaces
def test_the_app_keeps_no_capability_so_cannot_unmount_its_proc_nor_read_the_agents_key(tmp_path):
    app, seen = tmp_path / "app.py", tmp_path / "seen.json"
    app.write_text(PROC_LEAK_APP.replace("SECRET", repr(_SECRET)))
    result, _ = _agent(tmp_path, APP_AGENT, str(tmp_path), f"{sys.executable} {app} {seen}")
    assert result["code"] == 0, result["log"]
    seen = json.loads(seen.read_text())
    assert seen["found"] == [], f"the app read the agent's key from /proc/{seen['found']}/environ"
    assert seen["umount"] == -1, "the app un-mounted its fresh /proc"
    assert seen["caps"] == {"CapInh": 0, "CapPrm": 0, "CapEff": 0, "CapBnd": 0, "CapAmb": 0}, seen["caps"]


# -- A01: the agent is non-dumpable before it starts any box ----------------------------------------

DUMPABLE_AGENT = r'''
import ctypes, json, os, sys, tempfile
from pathlib import Path
from swizzleperf import sandbox
libc = ctypes.CDLL(None, use_errno=True)
before = libc.prctl(3, 0, 0, 0, 0)                        # PR_GET_DUMPABLE
if sys.argv[1] == "shield":
    sandbox.shield_from_boxes()
else:
    with tempfile.TemporaryDirectory(dir=os.environ["HOME"]) as scratch:
        done = sandbox.run([sys.executable, "-c", "pass"], Path(scratch), sandbox.worker_env(), 60,
                           sandbox.worker_limits(60, interpret=True, writable=(scratch,)))
        assert done.returncode == 0, done.stderr
print(json.dumps({"before": before, "after": libc.prctl(3, 0, 0, 0, 0)}))
'''


@needs_namespaces
@pytest.mark.parametrize("start", ["worker", "shield"])
def test_the_agent_is_non_dumpable_once_it_starts_a_box_even_with_namespaces(tmp_path, start):
    """Where the box had a PID namespace the agent was left dumpable. Non-dumpable, its /proc
    entries need CAP_SYS_PTRACE (on Linux 6.18 also CAP_SYS_ADMIN or CAP_PERFMON), which every box
    drops but a profiler's: defence in depth behind the fresh /proc. The line about a missing
    namespace is not said."""
    result, stderr = _agent(tmp_path, DUMPABLE_AGENT, start)
    assert result == {"before": 1, "after": 0}, result
    assert "no PID namespace" not in stderr, stderr


# -- B11-B13: control devices opened read-only and driven by ioctl ----------------------------------

#: Ioctls that reach the device's driver and change nothing: KVM_GET_API_VERSION, USERFAULTFD_IOC_NEW
#: (a new descriptor, closed), LOOP_CTL_REMOVE of a loop device no machine has (ENODEV where it
#: reaches the driver), TUNGETFEATURES. And what must keep working: reading /dev/urandom, an ioctl
#: on /dev/null reaching its driver (ENOTTY, not EACCES).
DEVICES = r'''
import errno, fcntl, json, os, sys, termios
null = os.stat("/dev/null").st_rdev
out = {"covered": {}, "ioctl": {}}
for path in sys.argv[1:]:
    try:
        out["covered"][path] = os.stat(path).st_rdev == null
    except OSError as exc:
        out["covered"][path] = errno.errorcode.get(exc.errno, "?")
probes = {"/dev/kvm": (0xAE00, 0), "/dev/userfaultfd": (0xAA00, os.O_CLOEXEC),
          "/dev/loop-control": (0x4C81, 1048575), "/dev/net/tun": (0x800454CF, bytes(4))}
for path, (request, arg) in probes.items():
    if not os.path.exists(path):
        continue
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as exc:
        out["ioctl"][path] = "open: " + errno.errorcode.get(exc.errno, "?")
        continue
    try:
        made = fcntl.ioctl(fd, request, arg)
        out["ioctl"][path] = "reached the driver"
        if path == "/dev/userfaultfd":
            os.close(made)
    except OSError as exc:
        out["ioctl"][path] = errno.errorcode.get(exc.errno, "?")
    finally:
        os.close(fd)
out["urandom"] = len(open("/dev/urandom", "rb").read(16))
with open("/dev/null", "rb") as handle:
    try:
        fcntl.ioctl(handle.fileno(), termios.TCGETS, bytes(64))
        out["null_ioctl"] = "done"
    except OSError as exc:
        out["null_ioctl"] = errno.errorcode.get(exc.errno, "?")
print(json.dumps(out))
'''


def _not_allowed_character_devices() -> list:
    """This machine's character devices under /dev (not in shm, pts, mqueue, hugepages) that are
    neither the plain ones nor the GPU's."""
    allowed = {"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/kfd"}
    found, folders = [], ["/dev"]
    while folders:
        folder = folders.pop()
        for entry in os.scandir(folder):
            mode = entry.stat(follow_symlinks=False).st_mode
            if stat.S_ISDIR(mode) and entry.path not in ("/dev/shm", "/dev/pts", "/dev/mqueue", "/dev/hugepages"):
                folders.append(entry.path)
            elif (stat.S_ISCHR(mode) and entry.path not in allowed
                  and not entry.path.startswith(("/dev/nvidia", "/dev/dri/", "/dev/infiniband/"))):
                found.append(entry.path)
    return sorted(found)


def test_a_worker_drives_no_control_device_by_ioctl(tmp_path, how):
    if how == "landlock" and filesystem.landlock_abi() < 5:
        pytest.skip("Landlock before ABI 5 (Linux 6.10) has no right for a device's ioctls")
    devices = _not_allowed_character_devices()
    if not {"/dev/kvm", "/dev/userfaultfd", "/dev/loop-control", "/dev/net/tun"} & set(devices):
        pytest.skip("none of the control devices tried here")
    seen = in_box(tmp_path / "scratch", DEVICES, *devices)
    for path, outcome in seen["ioctl"].items():
        assert outcome in ("ENOTTY", "EACCES") or outcome.startswith("open: "), (path, outcome)
    if how == "mounts":   # every device not allowed is /dev/null in the box
        assert [p for p, covered in seen["covered"].items() if covered is False] == [], seen["covered"]
    assert seen["urandom"] == 16 and seen["null_ioctl"] == "ENOTTY", seen


def test_the_box_covers_every_character_device_but_the_plain_and_the_gpus():
    """The cover is an allow-list: a device /dev gains (a new driver's control node) is covered
    without a change here; the plain ones and the GPU's are left for the command."""
    real = _not_allowed_character_devices()
    covered = filesystem.covered_devices()
    assert set(real) <= set(covered), sorted(set(real) - set(covered))
    assert not {"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"} & set(covered)
    assert not [p for p in covered if p.startswith(("/dev/nvidia", "/dev/dri/", "/dev/infiniband/"))]
    assert set(filesystem.block_devices()) <= set(covered)


# -- B14: user namespaces ---------------------------------------------------------------------------

#: unshare and clone with a namespace flag, clone3; then what a worker's Python and libraries do:
#: threads, fork, subprocess (vfork / clone), posix_spawn (glibc tries clone3 first).
NAMESPACES = r'''
import concurrent.futures, ctypes, errno, json, os, subprocess, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
clone, unshare = {"x86_64": (56, 272), "aarch64": (220, 97)}[os.uname().machine]
def call(*args):   # in a child of its own: one unshare that worked changes nothing of the next
    pid = os.fork()
    if pid == 0:
        made = libc.syscall(*[ctypes.c_long(a) for a in args])
        if made > 0 and args[0] == clone:
            os.waitpid(made, 0)
        os._exit(0 if made >= 0 else ctypes.get_errno())   # a clone's child (0) exits at once
    code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    return "done" if code == 0 else errno.errorcode.get(code, str(code))
out = {"unshare_user": call(unshare, 0x10000000), "unshare_user_net": call(unshare, 0x50000000),
       "clone_user": call(clone, 0x10000000 | 17, 0, 0, 0, 0), "clone3": call(435, 0, 0),
       "unshare_files": call(unshare, 0x400)}                 # CLONE_FILES: no namespace
with concurrent.futures.ThreadPoolExecutor(4) as pool:
    out["threads"] = sum(pool.map(lambda i: i, range(8)))
pid = os.fork()
if pid == 0:
    os._exit(7)
out["fork"] = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
done = subprocess.run([sys.executable, "-c", "print(6 * 7)"], capture_output=True, text=True)
out["subprocess"] = done.stdout.strip()
spawned = os.posix_spawn(sys.executable, [sys.executable, "-c", "raise SystemExit(5)"], dict(os.environ))
out["posix_spawn"] = os.waitstatus_to_exitcode(os.waitpid(spawned, 0)[1])
print(json.dumps(out))
'''


@pytest.mark.parametrize("interpret", [True, False], ids=["interpreted", "compiled"])
def test_a_worker_makes_no_namespace_but_threads_forks_and_spawns(tmp_path, how, interpret):
    works, why = sandbox._seccomp()
    if not works:
        pytest.skip(f"no seccomp here: {why}")
    seen = in_box(tmp_path / "scratch", NAMESPACES, interpret=interpret)
    assert seen["unshare_user"] == seen["unshare_user_net"] == seen["clone_user"] == "EPERM", seen
    assert seen["clone3"] == "ENOSYS", seen          # so that libc falls back to clone
    assert seen["unshare_files"] == "done", seen
    assert (seen["threads"], seen["fork"], seen["subprocess"], seen["posix_spawn"]) == (28, 7, "42", 5), seen


def test_the_namespace_refusal_is_in_both_filters_and_every_jump_lands_inside():
    for machine, clone, unshare in (("x86_64", 56, 272), ("aarch64", 220, 97)):
        program = sandbox._seccomp_program(machine, ("namespaces",))
        assert {clone, unshare, 435} <= {k for op, _, _, k in program if op == 0x15}
        assert (0x06, 0, 0, 0x00050000 | 38) in program                     # ENOSYS: clone3
        for i, (code, jt, jf, _) in enumerate(program):
            assert code not in (0x15, 0x45) or max(i + 1 + jt, i + 1 + jf) < len(program)
    assert "namespaces" in sandbox.worker_limits(60, interpret=False).seccomp_refusals


# -- B19: the box's /dev/shm ------------------------------------------------------------------------

SHM = ("import json, os; s = os.statvfs('/dev/shm'); "
       "print(json.dumps({'bytes': s.f_blocks * s.f_frsize, 'inodes': s.f_files}))")


def test_a_workers_dev_shm_is_small(tmp_path):
    if sandbox.filesystem_isolation()[0] != "mounts":
        pytest.skip(f"no mount namespace here: {sandbox.filesystem_isolation()[1]}")
    seen = in_box(tmp_path / "scratch", SHM)
    assert seen["bytes"] <= 1 << 30, f"/dev/shm holds {seen['bytes'] >> 20} MiB of RAM that RLIMIT_AS does not count"
    assert (seen["bytes"], seen["inodes"]) == (sandbox.WORKER_SHM_BYTES, sandbox.WORKER_SHM_FILES), seen
