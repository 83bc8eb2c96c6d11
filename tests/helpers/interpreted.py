"""A test file of Triton kernels run under the interpreter in a pytest process of its own:
TRITON_INTERPRET must be set before triton is imported, and set inside a pytest worker it would turn
every later compile test of that worker into the interpreter's."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_interpreted(path: Path, timeout_s: float = 600, env: dict | None = None) -> subprocess.CompletedProcess:
    """``pytest -q path`` with TRITON_INTERPRET=1, from the repository root, in ``env`` (default this
    process's environment); its output captured."""
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-o", "addopts=", "-p", "no:cacheprovider", str(path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=timeout_s,
                          env={**(os.environ if env is None else env), "TRITON_INTERPRET": "1"})
