"""kernels/gemm.py: numerics through the interpreter on CPU (check problem, both dtypes, a typical and
a weird shape), its access model counted by hand, and on a GPU the default problem.

Tolerance: ||C - ref|| / ||ref|| with C rounded once to the input dtype after fp32 accumulation:
about 2^-9 for bf16 and 2^-12 for fp16 relative rounding; the spec allows 5x that."""
from __future__ import annotations

import pytest

from swizzleperf.agent.verification.load import load_kernel
from swizzleperf.agent.verification.verify import Verdict, VerifyConfig, verify


@pytest.fixture(scope="module")
def spec(gemm_path):
    return load_kernel(gemm_path)[1]


def test_spec_contract(spec):
    assert spec.num_programs("check") % 8 != 0  # the check grid is not a multiple of 8
    assert spec.tile_grid(spec.problems["default"], spec.meta) == (128, 64)
    assert set(spec.dtypes) == {"bfloat16", "float16"}


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_numerics_on_cpu_at_the_check_problem(tmp_path, gemm_path, dtype):
    result = verify(gemm_path, tmp_path / "m.npy", VerifyConfig(dtype=dtype, seeds=(11, 12)))
    assert result.verdict is Verdict.PASS, result.reason
    errors = result.details["numerics"]["rel_errors"]["check"]
    assert all(0 < e < {"bfloat16": 1e-2, "float16": 2e-3}[dtype] for e in errors)


def test_a_weird_shape_through_the_interpreter(spec, launch_interpreted):
    """M = 33, N = 17, K = 70: every edge ragged, a single partial tile in N; run in a worker."""
    has_nan, rel = launch_interpreted(spec.source_path, {'M': 33, 'N': 17, 'K': 70}, 'float16')
    assert not has_nan and rel < 2e-3


def test_access_model_counted_by_hand(spec):
    # M = 100, N = 72, K = 80 with 32 x 32 x 32 tiles: 4 x 3 tiles, 3 K steps (32, 32, 16 deep).
    trace = spec.trace(spec.problems["check"], spec.check_meta)
    assert trace.keys.shape == (12, 4, 2)
    # A blocks: rows 32, 32, 32, 4 x depth 32, 32, 16 x 2 bytes; B: depth x cols 32, 32, 8.
    a = sum(r * d * 2 for r in (32, 32, 32, 4) for d in (32, 32, 16))
    b = sum(d * c * 2 for d in (32, 32, 16) for c in (32, 32, 8))
    c = 100 * 72 * 2
    assert trace.footprint_bytes() == a + b + c
    assert trace.block_bytes[~trace.block_is_write].sum() == a + b == 100 * 80 * 2 + 80 * 72 * 2
    # Tile (1, 2) (flat 5) reads A blocks of row 1 and B blocks of column 2, then writes C (1, 2).
    assert list(trace.keys[5, :3, 0]) == [3, 4, 5]
    assert list(trace.keys[5, :3, 1]) == [12 + 2, 12 + 5, 12 + 8]
    assert trace.keys[5, 3, 0] == 12 + 9 + 5 and trace.keys[5, 3, 1] == -1


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_numerics_on_gpu_at_the_default_problem(tmp_path, gemm_path, dtype):
    result = verify(gemm_path, tmp_path / "m.npy", VerifyConfig(device="cuda", dtype=dtype, seeds=(1, 2)),
                    time_it=True)
    assert result.verdict is Verdict.PASS, result.reason
    assert result.details["numerics"]["rel_errors"]["default"][0] < 1e-2
    timing = result.details["timing"]
    assert timing["time_ms"] > 0 and timing["time_spread_ms"] >= 0 and timing["repetitions"] > 10
