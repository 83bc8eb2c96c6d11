"""The verifier's interpreted worker under Triton 3.6, the GPU machines' image (with NumPy 2.4 or
later): kernels/gemm.py's persistent loop ``tl.range(pid, n, num_programs)`` failed its numerics
there ("only 0-dimensional arrays can be converted to Python scalars", an H100 machine,
2026-12-06) while Triton 3.9 passed. Run in a subprocess with 3.6 first on PYTHONPATH."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
from triton36 import SKIP_REASON, TRITON36, env_with_triton36

SCRIPT = """
import json, sys, triton
from pathlib import Path
from swizzleperf.agent.verification.verify import VerifyConfig, verify
result = verify(Path(sys.argv[1]), Path(sys.argv[2]), VerifyConfig(seeds=(1,)))
print(json.dumps({"version": triton.__version__, "verdict": result.verdict.value, "reason": result.reason}))
"""


@pytest.mark.skipif(TRITON36 is None, reason=SKIP_REASON)
def test_the_bundled_gemm_verifies_under_triton36(tmp_path, gemm_path):
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(gemm_path), str(tmp_path / "m.npy")],
                          env=env_with_triton36(), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen["version"].startswith("3.6"), f"{TRITON36} does not hold Triton 3.6"
    assert seen["verdict"] == "PASS", seen["reason"]
