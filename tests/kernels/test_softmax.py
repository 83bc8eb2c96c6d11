"""kernels/softmax.py: numerics through the interpreter on CPU (check problem, three dtypes, the
two-pass online path; a weird shape on the one-tile path; rows offset by up to 100, where exp
without the max subtraction overflows), the catalog's other order verified too, the access model
counted by hand, and on a GPU the default problem.

Tolerance: ||y - ref|| / ||ref|| with fp32 arithmetic and y rounded once to the input dtype: 1.6e-3
(bf16; the interpreter truncates, 3.7e-3) and 2.2e-4 (fp16) from that rounding, 7.6e-8 in fp32.
The spec allows 1e-2, 2e-3 and 1e-5."""
from __future__ import annotations

from pathlib import Path

import pytest

from swizzleperf.agent.verification.candidate import splice, target_args
from swizzleperf.agent.verification.load import load_kernel
from swizzleperf.agent.verification.swizzles import catalog_source
from swizzleperf.agent.verification.verify import Verdict, VerifyConfig, verify

SOFTMAX = Path(__file__).resolve().parents[2] / "kernels" / "softmax.py"
TOLERANCE = {"bfloat16": 1e-2, "float16": 2e-3, "float32": 1e-5}


@pytest.fixture(scope="module")
def spec():
    return load_kernel(SOFTMAX)[1]


def test_spec_contract(spec):
    assert spec.num_programs("check") == 11  # not a multiple of 8
    assert spec.tile_grid(spec.problems["default"], spec.meta) == (32768,)
    assert spec.swizzle_args(spec.problems["default"], spec.meta) == (32768,)
    assert spec.expert is None  # no cross-program reuse: see the module docstring
    assert dict(spec.tolerance) == TOLERANCE
    assert spec.min_bytes(spec.problems["default"], "float32") == 4 * 2 * 32768 * 8192


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32"])
def test_numerics_on_cpu_at_the_check_problem(tmp_path, dtype):
    result = verify(SOFTMAX, tmp_path / "m.npy", VerifyConfig(dtype=dtype, seeds=(11, 12)))
    assert result.verdict is Verdict.PASS, result.reason
    errors = result.details["numerics"]["rel_errors"]["check"]
    assert all(0 < e < TOLERANCE[dtype] for e in errors)


def test_the_other_catalog_order_verifies(tmp_path):
    """The expert is None; the one other 1-D catalog order (XCD remap) must still be a correct
    permutation with the same output (what the optimizer will try)."""
    source = SOFTMAX.read_text()
    remap = catalog_source("xcd-contiguous:8", target_args(source, "swizzle"))
    path = tmp_path / "softmax.py"
    path.write_text(splice(source, "swizzle", remap))
    result = verify(path, tmp_path / "m.npy", VerifyConfig(dtype="float32", seeds=(3,)))
    assert result.verdict is Verdict.PASS, result.reason


def test_a_weird_shape_on_the_one_tile_path(spec, launch_interpreted):
    """M = 13, N = 100 in one 128-wide tile (ONE_TILE), 2 rows a program, the last block half
    empty, fp16 (offsets up to 100 are within its range); run in an interpreted worker."""
    p = {'M': 13, 'N': 100}
    has_nan, rel = launch_interpreted(SOFTMAX, p, 'float16', dict(BLOCK_M=2, BLOCK_N=128, num_warps=4))
    x_max = float(spec.make_inputs(p, 5, 'cpu', 'float16')['x'].float().max())
    assert not has_nan and 0 < rel < 2e-3
    assert x_max > 89  # exp(x) alone would overflow fp32 on that row: the max subtraction matters


def test_access_model_counted_by_hand(spec):
    # M = 21, N = 70, 2 x 32 tiles: 11 row blocks (2 rows each, the last 1), 3 column blocks
    # (32, 32, 6 wide); pass 1 reads 3 blocks, pass 2 reads and writes 3.
    trace = spec.trace(spec.problems["check"], spec.check_meta)
    assert trace.keys.shape == (11, 6, 2)
    # x and y: 21 * 70 * 2 bytes each, nothing else.
    assert trace.footprint_bytes() == 2 * 2940
    assert trace.block_bytes[trace.block_is_write].sum() == 2940
    # Blocks: x 0..32 (m * 3 + k), y 33..65.
    assert trace.block_bytes[32] == 1 * 6 * 2  # x (10, 2): one row, six columns
    assert trace.keys[10].tolist() == [[30, -1], [31, -1], [32, -1], [30, 63], [31, 64], [32, 65]]
    # No block is read by two programs: no order can create reuse.
    reads = trace.keys[trace.keys >= 0]
    reads = reads[~trace.block_is_write[reads]]
    assert len(set(reads.tolist())) == 33 and reads.size == 2 * 33


def test_access_model_at_the_default_problem(spec):
    # One 8192-wide row (16 KiB of bf16) a program, one tile: read x, write y.
    trace = spec.trace(spec.problems["default"], spec.meta)
    assert trace.keys.shape == (32768, 2, 1)
    assert trace.footprint_bytes() == 2 * 32768 * 16384
    assert trace.keys[7, :, 0].tolist() == [7, 32768 + 7]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32"])
def test_numerics_on_gpu_at_the_default_problem(tmp_path, dtype):
    result = verify(SOFTMAX, tmp_path / "m.npy", VerifyConfig(device="cuda", dtype=dtype, seeds=(1, 2)),
                    time_it=True)
    assert result.verdict is Verdict.PASS, result.reason
    assert result.details["numerics"]["rel_errors"]["default"][0] < TOLERANCE[dtype]
    timing = result.details["timing"]
    assert timing["time_ms"] > 0 and timing["time_spread_ms"] >= 0 and timing["repetitions"] > 10
