"""The command line as the tests run it: ``swizzleperf ...`` in a subprocess (``python -m
swizzleperf.agent.cli``), and the check that bad input got one clear line and no traceback."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

CLI = [sys.executable, "-m", "swizzleperf.agent.cli"]


def swizzleperf(*args, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(CLI + list(args), cwd=cwd, capture_output=True, text=True, timeout=timeout)


def assert_one_line_error(proc: subprocess.CompletedProcess, expected: str) -> None:
    """Exit status not 0, no traceback, ``expected`` in stderr, which is one line."""
    assert proc.returncode != 0
    assert "Traceback" not in proc.stdout + proc.stderr
    assert expected in proc.stderr, proc.stderr
    assert len([line for line in proc.stderr.splitlines() if line.strip()]) == 1
