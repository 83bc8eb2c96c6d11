"""kernels/black_scholes.py, the science control: numerics through the interpreter on CPU (check
problem), the catalog's 1-D alternative order verified too, its access model counted by hand (no
block shared by two programs, so the simulated L2 hit rate is 0 under every order), and on a GPU
the default problem.

Tolerance: ||out - ref|| / ||ref|| against float64 on the same float32 inputs: fp32 arithmetic
through log, exp, sqrt and erf, ~1e-7 measured on CPU; the spec allows 1e-5."""
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

PATH = Path(__file__).resolve().parents[2] / "kernels" / "black_scholes.py"


@pytest.fixture(scope="module")
def spec():
    return load_kernel(PATH)[1]


def test_spec_contract(spec):
    assert spec.num_programs("check") == 9  # 1100 options in blocks of 128
    assert spec.tile_grid(spec.problems["default"], spec.meta) == (32768,)
    assert spec.dtypes == ("float32",) and spec.expert is None
    assert spec.min_bytes(spec.problems["default"], "float32") == 7 * 4 * 2**25


def test_numerics_on_cpu_at_the_check_problem(tmp_path):
    result = verify(PATH, tmp_path / "m.npy", VerifyConfig(dtype="float32", seeds=(11, 12)))
    assert result.verdict is Verdict.PASS, result.reason
    assert all(0 < e < 1e-5 for e in result.details["numerics"]["rel_errors"]["check"])


def test_reference_is_put_call_parity_consistent(spec):
    """call - put = S - K exp(-rT) for every option, in float64 (checks the reference itself)."""
    import torch
    x = spec.make_inputs({"N": 1000}, 4)
    call, put = spec.reference(x)
    parity = x["S"].double() - x["K"].double() * torch.exp(-x["r"].double() * x["T"].double())
    assert torch.allclose(call - put, parity, rtol=0, atol=1e-12)
    # prices are >= 0, up to the cancellation of two near-equal terms (-5e-16 seen for a deep
    # in-the-money put)
    assert bool((call >= -1e-12).all()) and bool((put >= -1e-12).all())


def test_the_chiplet_remap_verifies_too(tmp_path):
    """No expert (the control); the catalog's other 1-D order, xcd-contiguous:8 (9 programs: a
    remainder of 1), must still be a permutation with the same prices."""
    source = PATH.read_text()
    target = catalog_source("xcd-contiguous:8", target_args(source, "swizzle"))
    path = tmp_path / "black_scholes.py"
    path.write_text(splice(source, "swizzle", target))
    result = verify(path, tmp_path / "m.npy", VerifyConfig(dtype="float32", seeds=(3,)))
    assert result.verdict is Verdict.PASS, result.reason


def test_access_model_counted_by_hand(spec):
    # check: 1100 options, blocks of 128: 8 full blocks and one of 76; 7 arrays of 4-byte elements.
    trace = spec.trace(spec.problems["check"], spec.check_meta)
    assert trace.keys.shape == (9, 1, 7)
    assert trace.footprint_bytes() == 7 * 1100 * 4
    assert list(trace.keys[8, 0]) == [8, 17, 26, 35, 44, 53, 62]  # block 8 of S, K, T, r, sigma, call, put
    assert trace.block_bytes[8] == 76 * 4 and trace.block_bytes[0] == 128 * 4
    assert trace.block_is_write.sum() == 2 * 9 and trace.block_is_write[45:].all()
    # no block is touched by two programs
    assert np.bincount(trace.keys.ravel()).max() == 1


@pytest.mark.parametrize("hw", ["h200", "mi300x"])
def test_no_order_can_hit(spec, hw):
    """The control: 0 % L2 hits under the identity, the chiplet remap and a random order alike.
    N = 2^20, BLOCK = 4096: 256 blocks."""
    trace = spec.trace({"N": 1 << 20}, {"BLOCK": 4096})
    base, rem = divmod(256, 8)
    p = np.arange(256)
    xcd_contiguous = (p % 8) * base + np.minimum(p % 8, rem) + p // 8
    for order in (p, xcd_contiguous, np.random.default_rng(0).permutation(256)):
        result = l2sim.simulate(trace, order, load_spec(hw))
        assert result.l2_hit_rate == 0.0 and result.dram_read_bytes == 5 * 4 * 2**20


@pytest.mark.gpu
def test_numerics_on_gpu_at_the_default_problem(tmp_path):
    result = verify(PATH, tmp_path / "m.npy", VerifyConfig(device="cuda", dtype="float32", seeds=(1, 2)),
                    time_it=True)
    assert result.verdict is Verdict.PASS, result.reason
    assert result.details["numerics"]["rel_errors"]["default"][0] < 1e-5
    timing = result.details["timing"]
    assert timing["time_ms"] > 0 and timing["time_spread_ms"] >= 0 and timing["repetitions"] > 10
    rel = result.details["numerics"]["rel_errors"]["default"][0]
    print(f"black_scholes: {timing['time_ms'] * 1e3:.1f} us, {timing['gbps']:.0f} GB/s, rel error {rel:.2e}")
