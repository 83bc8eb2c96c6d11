"""Rewrite targets as the field writes them (#15): a fourth parameter (the tutorial's
GROUP_SIZE_M, passed by the kernel), verified and optimized end to end without a crash."""
from __future__ import annotations

import json
import re
from pathlib import Path

from swizzleperf.agent.loop import run
from swizzleperf.agent.verification.verify import Verdict, VerifyConfig, verify
from test_verify import TUTORIAL_GROUPED

# the tutorial's grouped order (test_verify.py), its group size a parameter the kernel passes
TUTORIAL_TARGET = TUTORIAL_GROUPED.replace("def swizzle(pid, num_pid_m, num_pid_n):",
                                           "def swizzle(pid, num_pid_m, num_pid_n, GROUP_SIZE_M):").replace(
    "    GROUP_SIZE_M: tl.constexpr = 3\n", "")


def _four_parameter_gemm(tmp_path: Path, gemm_source: str) -> Path:
    """kernels/gemm.py with the tutorial's target and the kernel passing GROUP_SIZE_M = 3 at
    every call site (the persistent loop calls it once per tile, in two loops)."""
    start = gemm_source.index("@triton.jit\ndef swizzle(")
    own = gemm_source[start:gemm_source.index("\n\n\n@triton.jit", start) + 3]
    source = gemm_source.replace(own, TUTORIAL_TARGET + "\n\n")
    source, calls = re.subn(r"swizzle\(([^()]+), num_pid_m, num_pid_n\)", r"swizzle(\1, num_pid_m, num_pid_n, 3)",
                            source)
    source = source.replace("    swizzle_args=tile_grid,", "    swizzle_args=lambda p, m: (*tile_grid(p, m), 3),")
    assert calls >= 1 and "(*tile_grid(p, m), 3)" in source
    path = tmp_path / "gemm4.py"
    path.write_text(source)
    return path


def test_a_four_parameter_target_is_verified(tmp_path, gemm_source):
    path = _four_parameter_gemm(tmp_path, gemm_source)
    result = verify(path, tmp_path / "m.npy", VerifyConfig(seeds=(2,)))
    assert result.verdict is Verdict.PASS, result.reason


def test_a_four_parameter_target_is_optimized_by_the_policy(tmp_path, gemm_source):
    path = _four_parameter_gemm(tmp_path, gemm_source)
    options = run.RunOptions(kernel=str(path), hw="mi300x", workdir=str(tmp_path / ".sp"),
                             iterations=2, plateau=10)
    outcome = run.start(options)
    report = json.loads((outcome.run_dir / "report.json").read_text())
    assert outcome.status == "finished" and report["baseline"]["verdict"] == "PASS"
    assert [a["verdict"] for a in report["attempts"]] == ["PASS", "PASS"]
    assert "GROUP_SIZE_M" in report["best"]["swizzle_source"].splitlines()[1]
