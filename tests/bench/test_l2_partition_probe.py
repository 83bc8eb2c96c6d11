"""bench/l2_partition_probe.py's kernels under Triton's interpreter: the tests of
_l2_partition_probe_interpreted.py, run in a pytest process of their own with TRITON_INTERPRET=1
(set in this process, it would reach every later test of the same worker)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
INTERPRETED = Path(__file__).with_name("_l2_partition_probe_interpreted.py")


def test_the_probe_kernels_read_what_each_case_claims():
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-o", "addopts=", "-p", "no:cacheprovider",
                           str(INTERPRETED)], cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "TRITON_INTERPRET": "1"})
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert " passed" in done.stdout and "failed" not in done.stdout
