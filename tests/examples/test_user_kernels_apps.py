"""The hand-written user kernels under ``examples/user_kernels/`` each ship a tiny app that
checks its result against torch. Run every app the way a user would -- as a script, in its own
process, under the Triton interpreter on the CPU -- once from the repository root and (for one of
them) from inside its own folder, and require exit code 0."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
USER_KERNELS = ROOT / "examples" / "user_kernels"
APPS = sorted(p.parent.name for p in USER_KERNELS.glob("*/app.py"))
EXPECTED = {"tutorial_gemm", "transpose_2d", "stencil_2d", "row_norm", "persistent_streamk_gemm",
            "grouped_gemm_2d", "softmax", "attention_fwd", "cross_entropy", "csr_spmv", "batched_gemm_3d"}


def _run_app(name: str, cwd: Path) -> subprocess.CompletedProcess:
    app = USER_KERNELS / name / "app.py"
    # Interpreter on the CPU (float32 path of each app), whatever GPUs the machine has.
    env = dict(os.environ, TRITON_INTERPRET="1", CUDA_VISIBLE_DEVICES="")
    return subprocess.run([sys.executable, str(app.relative_to(cwd)) if cwd == ROOT else "app.py"],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def test_all_expected_apps_present():
    assert EXPECTED <= set(APPS), f"missing apps: {sorted(EXPECTED - set(APPS))}"
    for name in APPS:
        assert (USER_KERNELS / name / "kernel.py").is_file(), name


@pytest.mark.parametrize("name", APPS)
def test_app_runs_from_repo_root(name):
    done = _run_app(name, ROOT)
    assert done.returncode == 0, f"{name}: rc={done.returncode}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    assert "OK" in done.stdout, done.stdout


def test_app_runs_from_its_own_folder():
    done = _run_app("transpose_2d", USER_KERNELS / "transpose_2d")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "OK" in done.stdout, done.stdout


def test_user_kernels_do_not_use_swizzleperf():
    """They stand for code written outside this project: plain triton + torch only."""
    for path in USER_KERNELS.glob("*/*.py"):
        text = path.read_text()
        assert "swizzleperf" not in text, path
        assert "KernelSpec" not in text, path
