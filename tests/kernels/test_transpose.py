"""kernels/transpose.py: bit-exact numerics through the interpreter on CPU (check problem, every
dtype), the expert order (column-major) verified too, its access model counted by hand (no block
shared by two programs: 0 % simulated L2 hits under every order), and on a GPU the default problem.

Tolerance: 0.0. A transpose copies every element bit for bit; any difference is a bug."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from swizzleperf.agent.verification.candidate import splice, target_args
from swizzleperf.agent.verification.load import load_kernel
from swizzleperf.agent.verification.swizzles import catalog_source
from swizzleperf.agent.verification.verify import Verdict, VerifyConfig, verify
from swizzleperf.hwspecs import load_spec
from swizzleperf.profiling import l2sim

PATH = Path(__file__).resolve().parents[2] / "kernels" / "transpose.py"


@pytest.fixture(scope="module")
def spec():
    return load_kernel(PATH)[1]


def test_spec_contract(spec):
    assert spec.tile_grid(spec.problems["check"], spec.check_meta) == (4, 3)  # 12 programs
    assert spec.num_programs("check") % 8 != 0
    assert spec.tile_grid(spec.problems["default"], spec.meta) == (256, 256)
    assert set(spec.tolerance.values()) == {0.0} and spec.expert == "column-major"


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32"])
def test_numerics_on_cpu_at_the_check_problem(tmp_path, dtype):
    result = verify(PATH, tmp_path / "m.npy", VerifyConfig(dtype=dtype, seeds=(11, 12)))
    assert result.verdict is Verdict.PASS, result.reason
    assert result.details["numerics"]["rel_errors"]["check"] == [0.0, 0.0]


def test_the_expert_order_verifies_too(tmp_path):
    source = PATH.read_text()
    target = catalog_source(load_kernel(PATH)[1].expert, target_args(source, "swizzle"))
    path = tmp_path / "transpose.py"
    path.write_text(splice(source, "swizzle", target))
    result = verify(path, tmp_path / "m.npy", VerifyConfig(dtype="bfloat16", seeds=(3,)))
    assert result.verdict is Verdict.PASS, result.reason
    # column-major at the default problem: program p < 256 takes tile (p, 0), p = 256 tile (0, 1)
    order = np.load(tmp_path / "m.npy")
    assert list(order[:3]) == [0, 256, 512] and order[256] == 1


def test_access_model_counted_by_hand(spec):
    # M = 100, N = 72 with 32 x 32 tiles: tile rows of 32, 32, 32, 4 rows; columns 32, 32, 8.
    trace = spec.trace(spec.problems["check"], spec.check_meta)
    assert trace.keys.shape == (12, 1, 2)
    assert trace.footprint_bytes() == 2 * 100 * 72 * 2  # x read once, out written once (bf16)
    assert trace.block_bytes[~trace.block_is_write].sum() == 100 * 72 * 2
    # tile (3, 2) (flat 11): x block 11 (4 x 8 elements), out block (2, 3) = 12 + 2 * 4 + 3 = 23
    assert list(trace.keys[11, 0]) == [11, 23]
    assert trace.block_bytes[11] == trace.block_bytes[23] == 4 * 8 * 2
    # tile (1, 2) (flat 5) writes out block (2, 1) = 12 + 9
    assert list(trace.keys[5, 0]) == [5, 21]
    assert np.bincount(trace.keys.ravel()).max() == 1  # no block touched twice


@pytest.mark.parametrize("hw", ["h200", "mi300x"])
def test_no_order_changes_the_simulated_traffic(spec, hw):
    """1024 x 2048 with 64 x 64 tiles (16 x 32 tiles): 0 % hits, the same DRAM bytes, row-major,
    column-major or random: the order's effect on a transpose lies outside the L2 model."""
    trace = spec.trace({"M": 1024, "N": 2048}, spec.meta)
    p = np.arange(512)
    for order in (p, (p % 16) * 32 + p // 16, np.random.default_rng(0).permutation(512)):
        result = l2sim.simulate(trace, order, load_spec(hw))
        assert result.l2_hit_rate == 0.0 and result.dram_write_bytes == 1024 * 2048 * 2


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_numerics_on_gpu_at_the_default_problem(tmp_path, dtype):
    result = verify(PATH, tmp_path / "m.npy", VerifyConfig(device="cuda", dtype=dtype, seeds=(1, 2)),
                    time_it=True)
    assert result.verdict is Verdict.PASS, result.reason
    assert result.details["numerics"]["rel_errors"]["default"] == [0.0]
    timing = result.details["timing"]
    assert timing["time_ms"] > 0 and timing["time_spread_ms"] >= 0 and timing["repetitions"] > 10
    print(f"transpose {dtype}: {timing['time_ms'] * 1e3:.1f} us, {timing['gbps']:.0f} GB/s")
