"""kernels/elementwise.py: numerics through the interpreter on CPU (check problem, every dtype), the
catalog's 1-D alternative order verified too, its access model counted by hand, and on a GPU the
default problem.

Tolerance: ||y - ref|| / ||ref|| with y computed in fp32 from exactly upcast inputs and rounded
once to the output dtype: ~2^-9 relative for bf16 (3.3e-3 under the interpreter, which truncates
to bf16), ~2^-12 for fp16, ~1e-7 for fp32; the spec allows 3-100x that."""
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

PATH = Path(__file__).resolve().parents[2] / "kernels" / "elementwise.py"


@pytest.fixture(scope="module")
def spec():
    return load_kernel(PATH)[1]


def test_spec_contract(spec):
    assert spec.num_programs("check") == 15  # 37 * 100 = 3700 elements in blocks of 256
    assert spec.num_programs("check") % 8 != 0
    assert spec.tile_grid(spec.problems["default"], spec.meta) == (131072,)
    assert spec.swizzle_args(spec.problems["default"], spec.meta) == (131072,)  # num_pids
    assert spec.expert is None  # no order can matter (module docstring)
    assert spec.min_bytes(spec.problems["default"], "float32") == 4 * (2 * 8192 * 16384 + 2 * 16384)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_numerics_on_cpu_at_the_check_problem(tmp_path, dtype):
    result = verify(PATH, tmp_path / "m.npy", VerifyConfig(dtype=dtype, seeds=(11, 12)))
    assert result.verdict is Verdict.PASS, result.reason
    errors = result.details["numerics"]["rel_errors"]["check"]
    assert all(0 < e < {"float32": 1e-5, "bfloat16": 1e-2, "float16": 2e-3}[dtype] for e in errors)


def test_the_chiplet_remap_verifies_too(tmp_path):
    """No expert here; the catalog's only other 1-D order (xcd-contiguous:8, 15 programs: a
    remainder of 7) must still be a permutation that computes the same y."""
    source = PATH.read_text()
    target = catalog_source("xcd-contiguous:8", target_args(source, "swizzle"))
    path = tmp_path / "elementwise.py"
    path.write_text(splice(source, "swizzle", target))
    result = verify(path, tmp_path / "m.npy", VerifyConfig(dtype="float32", seeds=(3,)))
    assert result.verdict is Verdict.PASS, result.reason
    order = np.load(tmp_path / "m.npy")  # the default problem's program -> block map
    # program 1 runs on XCD 1, whose contiguous eighth of the 131072 blocks starts at 16384
    assert sorted(order.tolist()) == list(range(131072)) and order[1] == 16384


def test_access_model_counted_by_hand(spec):
    # check: 3700 elements, blocks of 256: 14 full blocks and one of 116; N = 100 <= 256, so one
    # column chunk (100 elements of scale, 100 of bias), read by all 15 blocks.
    trace = spec.trace(spec.problems["check"], spec.check_meta)
    assert trace.keys.shape == (15, 1, 8)
    assert trace.footprint_bytes() == 4 * (2 * 3700 + 2 * 100)
    assert list(trace.keys[14, 0]) == [14, 15, -1, -1, 16, -1, -1, 17 + 14]
    assert trace.block_bytes[14] == 116 * 4 and trace.block_bytes[15] == 100 * 4
    assert trace.block_is_write.sum() == 15 and trace.block_is_write[17:].all()


def test_column_chunks_of_blocks_that_cross_rows(spec):
    # M = 3, N = 10, BLOCK = 4: chunks of columns [0-3], [4-7], [8-9]; 8 blocks of the 30 elements:
    # block 2 = columns 8, 9 | 0, 1 (chunks 2 and 0), block 3 = columns 2-5 (chunks 0, 1),
    # block 7 = columns 8, 9 (the last, 2 elements).
    trace = spec.trace({"M": 3, "N": 10}, {"BLOCK": 4})
    scale_chunks = [sorted(int(k) - 8 for k in keys if k >= 0) for keys in trace.keys[:, 0, 1:4]]
    assert scale_chunks == [[0], [1], [0, 2], [0, 1], [1, 2], [0], [1], [2]]
    assert list(trace.block_bytes[8:11]) == [16, 16, 8]  # scale chunks: 4, 4, 2 columns
    # the default problem's shape (BLOCK divides N): block t reads chunk t % 4 only
    trace = spec.trace({"M": 4, "N": 16384}, {"BLOCK": 4096})
    assert list(trace.keys[:, 0, 1]) == [16 + t % 4 for t in range(16)]
    assert (trace.keys[:, 0, 2:4] == -1).all()


def test_every_order_gives_the_same_hits(spec):
    """Two H200 L2 partitions or eight MI300X XCDs: the scale / bias chunk misses are all an order
    moves. M = 1024, N = 16384, BLOCK = 4096: 4096 blocks, 192 MiB read, 2/3 of it scale / bias;
    at most 8 domains x 8 chunks x 16 KiB = 1 MiB of those miss, so every order hits 0.661-0.667."""
    problem, meta = {"M": 1024, "N": 16384}, {"BLOCK": 4096}
    trace = spec.trace(problem, meta)
    rng = np.random.default_rng(0)
    for hw in ("h200", "mi300x"):
        rates = [l2sim.simulate(trace, order, load_spec(hw)).l2_hit_rate
                 for order in (np.arange(4096), rng.permutation(4096))]
        assert all(0.661 < r < 2 / 3 for r in rates) and abs(rates[0] - rates[1]) < 0.006


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_numerics_on_gpu_at_the_default_problem(tmp_path, dtype):
    result = verify(PATH, tmp_path / "m.npy", VerifyConfig(device="cuda", dtype=dtype, seeds=(1, 2)),
                    time_it=True)
    assert result.verdict is Verdict.PASS, result.reason
    assert result.details["numerics"]["rel_errors"]["default"][0] < {"float32": 1e-5, "bfloat16": 1e-2}[dtype]
    timing = result.details["timing"]
    assert timing["time_ms"] > 0 and timing["time_spread_ms"] >= 0 and timing["repetitions"] > 10
    rel = result.details["numerics"]["rel_errors"]["default"][0]
    print(f"elementwise {dtype}: {timing['time_ms'] * 1e3:.1f} us, {timing['gbps']:.0f} GB/s, rel error {rel:.2e}")
