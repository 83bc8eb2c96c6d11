"""The box against a file's metadata (issue #41, the outside replay of round four): Landlock has no
right for a file's mode, owner, times or extended attributes, so a command kept to its folders by
Landlock alone (no read-only mounts: no user namespaces, as on distributions that restrict them)
made the user's kernel file mode 0777, reset its times and set an attribute on it. Either way the
box keeps them, a file outside keeps its mode, times and attributes.

Hermetic: the box writes only beneath ``tmp_path``."""
import json
import os
import sys

import pytest

from swizzleperf import sandbox

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the box is Linux's")

METADATA = r'''
import json, os, sys
victim = sys.argv[1]
out = {}
for what, call in (("chmod", lambda: os.chmod(victim, 0o4777)), ("utime", lambda: os.utime(victim, (0, 0))),
                   ("xattr", lambda: os.setxattr(victim, "user.box", b"1")),
                   ("fchmod", lambda: os.fchmod(os.open(victim, os.O_RDONLY), 0o777)),
                   ("truncate", lambda: os.truncate(victim, 0))):
    try:
        call()
        out[what] = "done"
    except OSError as exc:
        out[what] = "denied: " + exc.strerror
print(json.dumps(out))
'''


def test_a_command_in_the_box_changes_no_metadata_outside(tmp_path, how):
    victim = tmp_path / "gemm.py"
    victim.write_text("the user's kernel\n")
    victim.chmod(0o644)
    os.utime(victim, (1_000_000, 1_000_000))
    scratch = tmp_path / "scratch"
    (scratch / "cwd").mkdir(parents=True)
    done = sandbox.run([sys.executable, "-c", METADATA, str(victim)], scratch / "cwd",
                       sandbox.worker_env(TMPDIR=str(scratch / "cwd")), 120,
                       sandbox.worker_limits(120, interpret=True, writable=(scratch,)))
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert all(v.startswith("denied") for v in seen.values()), seen
    assert victim.stat().st_mode & 0o7777 == 0o644, seen
    assert victim.stat().st_mtime == 1_000_000, seen
    assert victim.read_text() == "the user's kernel\n"
    try:
        assert "user.box" not in os.listxattr(victim), seen
    except OSError:   # a file system without extended attributes
        pass


def test_landlock_alone_adds_the_metadata_refusals_to_the_filter():
    for machine in ("x86_64", "aarch64"):
        plain = sandbox._seccomp_program(machine, ())
        program = sandbox._seccomp_program(machine, sandbox.LANDLOCK_ALONE_REFUSALS)
        numbers = {k for op, _, _, k in program if op == 0x15}
        assert set(sandbox._METADATA_CALLS[machine]) | {sandbox._TRUNCATE_CALL[machine]} <= numbers
        assert len(program) > len(plain)
