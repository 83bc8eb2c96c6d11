"""Block pointers on a CPU (agent/capture/cuda_on_cpu.py's ``interpreter_block_pointers``): the kernels
of _block_pointers_interpreted.py under the installed Triton (3.9 has none: emulated) and under
Triton 3.6 (native), each in a pytest process of its own, with the same expectations."""
from __future__ import annotations

from pathlib import Path

import pytest

from interpreted import run_interpreted
from triton36 import SKIP_REASON, TRITON36, env_with_triton36

INTERPRETED = Path(__file__).with_name("_block_pointers_interpreted.py")


def _passed(done) -> None:
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert " passed" in done.stdout and "failed" not in done.stdout and "skipped" not in done.stdout


def test_block_pointers_under_the_installed_triton():
    _passed(run_interpreted(INTERPRETED))


@pytest.mark.skipif(TRITON36 is None, reason=SKIP_REASON)
def test_the_same_kernels_under_triton_36_where_they_are_native():
    _passed(run_interpreted(INTERPRETED, env=env_with_triton36()))
