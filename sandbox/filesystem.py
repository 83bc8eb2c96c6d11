"""What a command in the box may write: only beneath its writable paths (``Limits.writable`` of
sandbox/__init__.py). Two ways, both run by the box's init before the command starts:

- **read-only mounts** (in the box's own mount namespace: Linux as root, or with unprivileged user
  namespaces): each writable path is bind-mounted onto itself, ``/dev/shm`` gets a fresh tmpfs of
  the box's own (of a bounded size where asked), ``/dev/null`` is bound over each block device and
  each character device under ``/dev`` but the plain ones and the GPU's (``covered_devices``: a
  read-only mount stops no write to a device, nor an ioctl), then every other mount the command
  can reach is remounted read-only (``MS_REMOUNT | MS_BIND | MS_RDONLY``, per mount: nothing changes outside the
  namespace), keeping the flags a user namespace may not clear (nosuid, nodev, noexec, the atime
  mode); but the box's own fresh ``/proc``, where CUDA writes its threads' names, stays writable,
  its ``sys``, ``sysrq-trigger``, ``irq``, ``bus`` and ``fs`` read-only; ``/dev/pts`` an empty
  read-only tmpfs. Writes fail with ``EROFS``; the devices left (``/dev/null``, the GPU's) still
  open for writing on a read-only mount.
- **Landlock** (Linux 5.13 or later with Landlock enabled, without any privilege): a ruleset that
  handles every kind of write (writing, truncating, creating, removing, renaming, linking) and
  allows them only beneath the writable paths, plus writing (not creating) the character devices
  ``WRITABLE_DEVICES`` and the GPU's (never a terminal, ``terminal_devices``), and where it holds
  the box alone and the kernel has ABI 5 (Linux 6.10), an ioctl on a device only on those; reading
  and executing stay allowed everywhere. Writes fail with ``EACCES``. A
  process restricted by Landlock cannot mount either, so it cannot undo the read-only mounts: the
  box adds it on top of them for a command that keeps ``CAP_SYS_ADMIN`` (a profiler).
"""
from __future__ import annotations

import ctypes
import errno
import os
import stat
import sys
from dataclasses import dataclass

# sys/mount.h
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC, _MS_REMOUNT = 1, 2, 4, 8, 32
_MS_NOSYMFOLLOW, _MS_NOATIME, _MS_NODIRATIME, _MS_BIND, _MS_REC = 256, 1024, 2048, 4096, 0x4000
_MS_RELATIME, _MS_STRICTATIME = 1 << 21, 1 << 24
#: Per-mount options of /proc/self/mountinfo that a read-only bind remount must keep (inside a user
#: namespace they are locked: leaving one out fails with EPERM). No atime option: strictatime.
_KEPT = {"nosuid": _MS_NOSUID, "nodev": _MS_NODEV, "noexec": _MS_NOEXEC, "noatime": _MS_NOATIME,
         "nodiratime": _MS_NODIRATIME, "relatime": _MS_RELATIME, "nosymfollow": _MS_NOSYMFOLLOW}
_SHM = "/dev/shm"
_NULL = "/dev/null"
#: Character devices of the kernel itself that a write reaches however the file system is mounted:
#: the kernel's log (a line injected from the box, #41 round nine), its memory and its ports.
#: Covered by ``/dev/null`` in a mount namespace, left out of Landlock's writable devices.
KERNEL_DEVICES = ("/dev/kmsg", "/dev/mem", "/dev/kmem", "/dev/port")
#: The majors of character devices that reach a terminal, a console or the user's input, which a
#: box's command never writes (#41 round ten: a worker wrote escape sequences into the user's
#: terminal through /dev/pts): Linux's Documentation/admin-guide/devices.txt: 4 ttyN and ttyS, 5
#: /dev/tty, /dev/console and /dev/ptmx, 7 vcs (a console's screen), 13 input, 136-143 the Unix98
#: pty slaves (/dev/pts/N), 188 USB serial, 204 low-density serial, 229 hvc; and misc 10:223,
#: /dev/uinput (a virtual keyboard).
TERMINAL_MAJORS = frozenset({4, 5, 7, 13, 188, 204, 229, *range(136, 144)})
_UINPUT = (10, 223)
_PTS = "/dev/pts"
#: The box's own ``/proc`` (fresh, of its PID namespace: only its processes) stays writable: CUDA
#: writes there (its threads' names, ``/proc/self/task/TID/comm``); read-only, ``cuInit`` failed
#: with error 304 "OS call failed" (an H100, 2026-12-06: bench/gpu_box_probe.sh, each mount made
#: read-only alone; /dev, /sys and / read-only kept CUDA working). What reaches beyond the box's own
#: processes is read-only, as container runtimes keep it: the kernel's settings and triggers.
_PROC = "/proc"
_PROC_READ_ONLY = ("/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/proc/fs")

# linux/landlock.h; the system call numbers are the same on every architecture
_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446
_CREATE_RULESET_VERSION, _RULE_PATH_BENEATH = 1, 1
_WRITE_FILE, _REMOVE_DIR, _REMOVE_FILE, _MAKE_CHAR, _MAKE_DIR = 1 << 1, 1 << 4, 1 << 5, 1 << 6, 1 << 7
_MAKE_REG, _MAKE_SOCK, _MAKE_FIFO, _MAKE_BLOCK, _MAKE_SYM = 1 << 8, 1 << 9, 1 << 10, 1 << 11, 1 << 12
_REFER, _TRUNCATE = 1 << 13, 1 << 14     # ABI 2, ABI 3
_IOCTL_DEV = 1 << 15                     # ABI 5 (Linux 6.10)
_SCOPE_ABSTRACT_UNIX_SOCKET, _SCOPE_SIGNAL = 1 << 0, 1 << 1   # ABI 6 (Linux 6.12)
_WRITES_V1 = (_WRITE_FILE | _REMOVE_DIR | _REMOVE_FILE | _MAKE_CHAR | _MAKE_DIR | _MAKE_REG | _MAKE_SOCK
              | _MAKE_FIFO | _MAKE_BLOCK | _MAKE_SYM)
#: Folders of /dev whose files are not devices (shared memory, message queues, huge pages; pts, whose
#: ttys come and go, is taken whole where it is wanted): not entered by the device walks (``_nodes``).
_NOT_DEVICES = ("shm", "mqueue", "hugepages", "pts")


# -- read-only mounts -------------------------------------------------------------------------------

@dataclass(frozen=True)
class Mount:
    """One line of /proc/self/mountinfo: its id, mount point and per-mount options."""

    id: int
    point: str
    options: tuple


def mounts() -> list:
    """This process's mounts, parents before children (/proc/self/mountinfo)."""
    with open("/proc/self/mountinfo") as handle:
        lines = handle.read().splitlines()
    fields = [line.split() for line in lines if line.strip()]
    return [Mount(int(f[0]), _unescape(f[4]), tuple(f[5].split(","))) for f in fields]


def _unescape(text: str) -> str:
    r"""mountinfo writes space, tab, newline and backslash in octal (``\040``)."""
    out, i = [], 0
    while i < len(text):
        if text[i] == "\\" and text[i + 1:i + 4].isdigit():
            out.append(chr(int(text[i + 1:i + 4], 8)))
            i += 4
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def read_only_except(libc, writable: list, shm: list | None = None) -> None:
    """In a mount namespace of the caller's own (``/`` already private): ``writable`` bound onto
    themselves, a fresh ``/dev/shm`` (of ``shm``'s ``[bytes, files]`` at most, or of the kernel's
    default size, half the RAM), ``/dev/null`` bound over every device under ``/dev`` but the
    plain ones and the GPU's (``covered_devices``: a read-only mount stops no write to a device,
    nor an ioctl through a descriptor opened read-only), every other reachable mount remounted
    read-only.

    Raises:
        OSError: a mount failed, or a reachable mount is still writable afterwards (the command must
            not run then).
    """
    before = {m.id for m in mounts()}
    for path in writable:
        _mount(libc, path, path, None, _MS_BIND | _MS_REC, f"binding {path}")
    if os.path.isdir(_SHM) and not any(_beneath(_SHM, path) for path in writable):
        size = f",size={shm[0]},nr_inodes={shm[1]}" if shm else ""
        _mount(libc, "tmpfs", _SHM, "tmpfs", _MS_NOSUID | _MS_NODEV, f"a fresh {_SHM}", f"mode=1777{size}".encode())
    for path in covered_devices():
        _mount(libc, _NULL, path, None, _MS_BIND, f"covering the device {path}")
    if os.path.isdir(_PTS):   # no pty of the host's, empty and read-only: its own stdio are pipes
        _mount(libc, "tmpfs", _PTS, "tmpfs", _MS_RDONLY | _MS_NOSUID | _MS_NODEV | _MS_NOEXEC,
               f"an empty {_PTS}", b"size=4k,mode=0555")
    for path in _PROC_READ_ONLY:   # bound onto themselves first: remounted read-only below, /proc left
        if os.path.lexists(path):
            _mount(libc, path, path, None, _MS_BIND, f"binding {path}")
    table = {m.id: m for m in mounts()}
    for mount in _reachable(table):
        if mount.point == _PROC or "ro" in mount.options or (mount.id not in before and mount.point not in _PROC_READ_ONLY):
            continue
        _read_only(libc, mount)
    table = {m.id: m for m in mounts()}
    left = [m.point for m in _reachable(table) if (m.id in before and m.point != _PROC or m.point in _PROC_READ_ONLY)
            and "ro" not in m.options]
    if left:
        raise OSError(errno.EPERM, f"still writable after the read-only remount: {', '.join(left[:5])}")


def _read_only(libc, mount: "Mount") -> None:
    flags = _MS_REMOUNT | _MS_BIND | _MS_RDONLY | sum(_KEPT.get(o, 0) for o in set(mount.options))
    if not {"noatime", "relatime"} & set(mount.options):
        flags |= _MS_STRICTATIME
    _mount(libc, None, mount.point, None, flags, f"remounting {mount.point} read-only")


def _reachable(table: dict) -> list:
    """The mounts a path leads to: each mount point's top-most mount (one hidden under another
    mount, or under a path no longer there, is reached by no path and left alone)."""
    seen, out = set(), []
    for mount in table.values():
        if mount.point in seen:
            continue
        seen.add(mount.point)
        top = _mount_id(mount.point)
        if top in table and table[top].point == mount.point:
            out.append(table[top])
    return out


def covered_devices() -> list:
    """What the mounts box covers with ``/dev/null``: every block device under ``/dev`` (a disk,
    a loop device: root opened the disk for writing) and every character device that is not
    allowed (``WRITABLE_DEVICES``, the GPU's): the kernel's own (``KERNEL_DEVICES``), terminals
    (``terminal_devices``), and every control device, whose ioctls need no more than a descriptor
    opened read-only (#41 round eleven: ``/dev/loop-control`` made and removed the host's loop
    devices, ``/dev/kvm`` a VM, ``/dev/userfaultfd`` a userfaultfd). An allow-list: a node a new
    driver adds is covered too. Sorted."""
    terminals = set(terminal_devices(pts=False))
    chars = [path for path in _nodes("/dev", stat.S_ISCHR, kept_folders=()) if not _allowed(path, terminals)]
    return sorted(block_devices() + chars)


def block_devices(root: str = "/dev") -> list:
    """The block devices beneath ``root`` (the disks, their partitions, loop devices; links not
    followed, nor the folders of files that are not devices: ``shm``, ``mqueue``, ``hugepages``,
    ``pts``), sorted."""
    return sorted(_nodes(root, stat.S_ISBLK, kept_folders=()))


def _mount_id(path: str) -> int | None:
    """The id of the mount ``path`` is on (``mnt_id`` of an O_PATH descriptor's fdinfo), or None."""
    try:
        fd = os.open(path, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        with open(f"/proc/self/fdinfo/{fd}") as handle:
            for line in handle:
                if line.startswith("mnt_id:"):
                    return int(line.split()[1])
    finally:
        os.close(fd)
    return None


def _mount(libc, source, target: str, fstype, flags: int, what: str, data: bytes | None = None) -> None:
    encode = (lambda s: None if s is None else os.fsencode(s))
    if libc.mount(encode(source), encode(target), encode(fstype), ctypes.c_ulong(flags), data) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _beneath(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


# -- Landlock ---------------------------------------------------------------------------------------

class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _syscall():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc.syscall


def landlock_abi() -> int:
    """The Landlock ABI version this kernel offers (1 on Linux 5.13 ...), 0 where none (not Linux,
    not built in, or not enabled at boot)."""
    if not sys.platform.startswith("linux"):
        return 0
    version = _syscall()(_SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION))
    return max(int(version), 0)


def restrict_writes(writable: list, files_beneath: tuple = (), scoped: bool = False,
                    device_ioctls: bool = False) -> None:
    """Restrict this process, and everything it starts, by Landlock: no write of any kind but
    beneath ``writable`` (and writing the character devices under ``/dev`` a command may use,
    ``_devices``, and writing the existing files beneath ``files_beneath``: the process's own
    ``/proc`` entries, where CUDA names its threads). Needs ``no_new_privs`` (or CAP_SYS_ADMIN).
    With ``scoped`` (where the kernel has Landlock's scopes, ABI 6: Linux 6.12), no signal to a
    process outside the restricted ones and no connection to an abstract unix socket one of them
    did not bind: where the box has no PID namespace, candidate code could otherwise stop or kill
    the agent. With ``device_ioctls`` (where the kernel has the right, ABI 5: Linux 6.10), no ioctl
    on a device opened afterwards but on those devices (the GPU's driver is driven by ioctls): where
    Landlock alone holds the box, no device is covered, and an ioctl needs no write right (#41
    round eleven: ``/dev/loop-control`` opened read-only made the host's loop devices). The common
    ioctls of any file (``FIONREAD``, ``FIOCLEX``...) stay allowed.

    Raises:
        OSError: no Landlock here, or a rule or the restriction failed.
    """
    abi = landlock_abi()
    if abi < 1:
        raise OSError(errno.ENOSYS, "no Landlock in this kernel")
    handled = (_WRITES_V1 | (_REFER if abi >= 2 else 0) | (_TRUNCATE if abi >= 3 else 0)
               | (_IOCTL_DEV if device_ioctls and abi >= 5 else 0))
    file_rights = handled & (_WRITE_FILE | _TRUNCATE)
    syscall = _syscall()
    if scoped and abi >= 6:   # struct landlock_ruleset_attr: handled fs, handled net, scoped
        attr = (ctypes.c_uint64 * 3)(handled, 0, _SCOPE_ABSTRACT_UNIX_SOCKET | _SCOPE_SIGNAL)
    else:                     # its first field only
        attr = (ctypes.c_uint64 * 1)(handled)
    ruleset = syscall(_SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(ctypes.sizeof(attr)),
                      ctypes.c_uint32(0))
    if ruleset < 0:
        raise _errno("creating a Landlock ruleset")
    try:
        for path in writable:
            _allow(syscall, ruleset, path, handled if os.path.isdir(path) else file_rights)
        for path in _devices():
            _allow(syscall, ruleset, path, handled & (_WRITE_FILE | _TRUNCATE | _IOCTL_DEV))
        for path in files_beneath:
            _allow(syscall, ruleset, path, file_rights)
        if syscall(_SYS_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0)) != 0:
            raise _errno("restricting by Landlock")
    finally:
        os.close(ruleset)


def _allow(syscall, ruleset: int, path: str, access: int) -> None:
    fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    try:
        rule = _PathBeneath(access, fd)
        if syscall(_SYS_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(_RULE_PATH_BENEATH),
                   ctypes.byref(rule), ctypes.c_uint32(0)) != 0:
            raise _errno(f"a Landlock rule for {path}")
    finally:
        os.close(fd)


#: The character devices a box's command may use: write under Landlock (and drive by ioctl, ABI 5),
#: and find uncovered in the mounts box (``covered_devices``): the plain ones, and the GPU's
#: (NVIDIA: /dev/nvidiactl, /dev/nvidiaN, /dev/nvidia-uvm*, /dev/nvidia-caps/*; AMD: /dev/kfd,
#: /dev/dri/*; NCCL's /dev/infiniband/*). Never a terminal (``terminal_devices``), a kernel device
#: (``KERNEL_DEVICES``), /dev/vsock, /dev/kvm, /dev/uinput... (#41 round ten), /dev/loop-control,
#: /dev/userfaultfd, /dev/fuse... (round eleven).
WRITABLE_DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/kfd")
_GPU_DEVICE_PREFIXES = ("/dev/nvidia", "/dev/dri/", "/dev/infiniband/")   # NCCL opens the RDMA devices


def _devices() -> list:
    """The character devices under /dev a box's command may write (``WRITABLE_DEVICES``, the GPU's
    by prefix), none of them a terminal."""
    terminals = set(terminal_devices(pts=False))
    return [path for path in _nodes("/dev", stat.S_ISCHR, kept_folders=()) if _allowed(path, terminals)]


def _allowed(path: str, terminals: set) -> bool:
    """Whether a box's command may use the character device ``path`` (write it, drive it by
    ioctl): ``WRITABLE_DEVICES`` and the GPU's, never a terminal or a kernel device."""
    return ((path in WRITABLE_DEVICES or path.startswith(_GPU_DEVICE_PREFIXES))
            and path not in KERNEL_DEVICES and path not in terminals)


def terminal_devices(root: str = "/dev", pts: bool = True) -> list:
    """The character devices under ``root`` that reach a terminal, a console or the user's input
    (``TERMINAL_MAJORS``, /dev/uinput), links not followed; /dev/pts's entered only with ``pts``."""
    def is_terminal(path: str) -> bool:
        try:
            device = os.stat(path, follow_symlinks=False).st_rdev
        except OSError:
            return False
        return os.major(device) in TERMINAL_MAJORS or (os.major(device), os.minor(device)) == _UINPUT
    found = [p for p in _nodes(root, stat.S_ISCHR, kept_folders=()) if is_terminal(p)]
    if pts and root == "/dev" and os.path.isdir(_PTS):
        found += [p for p in _nodes(_PTS, stat.S_ISCHR, kept_folders=()) if is_terminal(p)]
    return found


def _nodes(root: str, is_kind, kept_folders: tuple) -> list:
    """The nodes beneath ``root`` whose mode passes ``is_kind`` (links not followed; the folders
    ``_NOT_DEVICES`` not entered), and ``kept_folders`` themselves where found."""
    skipped = {os.path.join(root, name) for name in _NOT_DEVICES}
    found, folders = [], [root]
    while folders:
        folder = folders.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            try:
                mode = entry.stat(follow_symlinks=False).st_mode
            except OSError:
                continue
            if is_kind(mode):
                found.append(entry.path)
            elif stat.S_ISDIR(mode) and entry.path in kept_folders:
                found.append(entry.path)
            elif stat.S_ISDIR(mode) and entry.path not in skipped:
                folders.append(entry.path)
    return found


def _errno(what: str) -> OSError:
    err = ctypes.get_errno()
    return OSError(err, f"{what}: {os.strerror(err)}")
