"""``swizzleperf simulate`` / ``analyze`` / ``profile KERNEL`` on a module ``optimize --app``
generated (issue #41): its spec is built from its capture's data, which needs the capture module
loaded in the CLI's process (it registers the builder with agent/verification/load.py); before,
each refused it with "nothing here builds it". The app is tests/helpers/apps/suite/matmul.py,
captured on the CPU (no GPU, nothing exported, as tests/agent/capture/test_real_operators.py's
``cpu_only``); each command runs as a user runs it, in its own process.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

CLI = [sys.executable, "-m", "swizzleperf.agent.cli"]
MATMUL = Path(__file__).resolve().parents[1] / "helpers" / "apps" / "suite" / "matmul.py"


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    """The matmul app prepared (captured, lifted, generated) on a CPU-only machine."""
    import swizzleperf.hwspecs
    from swizzleperf.agent.capture import user_kernel
    work = tmp_path_factory.mktemp("generated")
    with pytest.MonkeyPatch.context() as m:
        m.delenv("TRITON_INTERPRET", raising=False)
        m.setenv("CUDA_VISIBLE_DEVICES", "")
        m.setattr(swizzleperf.hwspecs, "detect_device", lambda: None)
        prepared = user_kernel.prepare(f"{sys.executable} {MATMUL}", "matmul_kernel", work / "work")
    return prepared.module_path


def _cli(*args, cwd):
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.update(CUDA_VISIBLE_DEVICES="", NO_COLOR="1", COLUMNS="200")
    return subprocess.run(CLI + list(args), capture_output=True, text=True, timeout=300, cwd=cwd, env=env)


def _ok(proc):
    assert proc.returncode == 0, proc.stderr
    assert "nothing here builds it" not in proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr


def test_simulate_a_generated_module(generated, tmp_path):
    proc = _cli("simulate", str(generated), "--hw", "h100", "--json", cwd=tmp_path)
    _ok(proc)
    result = json.loads(proc.stdout)
    assert result["kernel"] == "matmul_kernel" and result["source"] == "simulated:h100"
    assert 0 <= result["l2_hit_rate"] <= 1 and result["dram_bytes"] > 0
    other = _cli("simulate", str(generated), "--hw", "h100", "--swizzle", "column-major", "--json", cwd=tmp_path)
    _ok(other)
    assert json.loads(other.stdout)["swizzle"] == "column-major"


def test_analyze_a_generated_module(generated, tmp_path):
    proc = _cli("analyze", str(generated), "--hw", "h100", cwd=tmp_path)
    _ok(proc)
    assert "9 programs on a 3 x 3 tile grid" in proc.stdout


def test_profile_a_generated_module(generated, tmp_path):
    proc = _cli("profile", str(generated), "--hw", "h100", "--workdir", str(tmp_path / "w"), cwd=tmp_path)
    _ok(proc)
    assert "matmul_kernel on h100" in proc.stdout and "l2_hit_rate" in proc.stdout
