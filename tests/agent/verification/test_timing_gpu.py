"""The head-to-head timing on a GPU (#12.4): the same module twice must come out 1.00x within
the spread of the paired comparison, whatever its place in the list."""

import pytest

from swizzleperf.agent.verification import lessons
from swizzleperf.agent.verification.candidate import splice
from swizzleperf.agent.verification.swizzles import catalog_source
from swizzleperf.agent.verification.verify import run_worker

pytestmark = pytest.mark.gpu


def test_a_a_comparison_is_one(tmp_path, gemm_source):
    paths = []
    for i in range(3):
        path = tmp_path / f"copy{i}_gemm.py"
        path.write_text(splice(gemm_source, "swizzle",
                               catalog_source("grouped-m:8", ["pid", "num_pid_m", "num_pid_n"])))
        paths.append(str(path))
    result = run_worker({"kernel_path": paths[0], "compare_paths": paths, "stages": ["compare"],
                         "dtype": "bfloat16"}, 600, interpret=False)
    assert result.passed, result.reason
    out = result.details["compare"]
    attempts = [{"metrics": {"time_ms": t, "time_spread_ms": s, "rounds_ms": r}}
                for t, s, r in zip(out["time_ms"], out["time_spread_ms"], out["round_medians_ms"])]
    for a in attempts[1:]:
        ratio = attempts[0]["metrics"]["time_ms"] / a["metrics"]["time_ms"]
        assert abs(ratio - 1.0) < 0.005, f"A/A ratio {ratio:.4f} (times {out['time_ms']})"
        assert not lessons.beyond_noise(a, attempts[0], "measured")
        assert not lessons.beyond_noise(attempts[0], a, "measured")
