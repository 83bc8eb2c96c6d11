"""Run a Python snippet in a verification worker's box (sandbox/) and read what it printed: the box
tests' one way to try what code inside it can and cannot do."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from swizzleperf import sandbox


def run_in_box(scratch: Path, code: str, limits: sandbox.Limits, *args: str) -> subprocess.CompletedProcess:
    """``python -c code args`` boxed with ``limits``, its cwd and TMPDIR ``scratch/cwd`` (made), 120 s."""
    (scratch / "cwd").mkdir(parents=True, exist_ok=True)
    return sandbox.run([sys.executable, "-c", code, *args], scratch / "cwd",
                       sandbox.worker_env(TMPDIR=str(scratch / "cwd")), 120, limits)


def in_box(scratch: Path, code: str, *args: str, limits: sandbox.Limits | None = None,
           interpret: bool = True) -> dict:
    """The JSON object the snippet printed last, run as a verification worker (interpreted, or
    compiled with ``interpret=False``) that may write ``scratch`` only, unless ``limits`` says
    otherwise; the snippet must exit 0 (its stderr's tail is the assertion's message)."""
    limits = limits or sandbox.worker_limits(120, interpret=interpret, writable=(scratch,))
    done = run_in_box(scratch, code, limits, *args)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])
