"""kernels/layernorm.py: numerics through the interpreter on CPU (check problem, both dtypes, the
three-pass path; a weird shape on the one-tile path), the catalog's other order verified too, the
access model counted by hand, and on a GPU the default problem.

Tolerance: ||y - ref|| / ||ref|| with fp32 statistics and y rounded once to the input dtype: 1.7e-3
(bf16) and 2.1e-4 (fp16) from that rounding; the interpreter truncates bf16 (3.1e-3). The spec
allows 1e-2 and 2e-3."""
from __future__ import annotations

from pathlib import Path

import pytest

from swizzleperf.agent.verification.candidate import splice, target_args
from swizzleperf.agent.verification.load import load_kernel
from swizzleperf.agent.verification.swizzles import catalog_source
from swizzleperf.agent.verification.verify import Verdict, VerifyConfig, verify

LAYERNORM = Path(__file__).resolve().parents[2] / "kernels" / "layernorm.py"
TOLERANCE = {"bfloat16": 1e-2, "float16": 2e-3}


@pytest.fixture(scope="module")
def spec():
    return load_kernel(LAYERNORM)[1]


def test_spec_contract(spec):
    assert spec.num_programs("check") == 10  # not a multiple of 8
    assert spec.tile_grid(spec.problems["default"], spec.meta) == (32768,)
    assert spec.swizzle_args(spec.problems["default"], spec.meta) == (32768,)
    assert spec.expert is None  # no order can matter: see the module docstring
    assert dict(spec.tolerance) == TOLERANCE
    # x read and y written once (512 MiB each in bf16), w and b read once.
    assert spec.min_bytes(spec.problems["default"], "bfloat16") == 2 * (2 * 65536 * 4096 + 2 * 4096)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_numerics_on_cpu_at_the_check_problem(tmp_path, dtype):
    result = verify(LAYERNORM, tmp_path / "m.npy", VerifyConfig(dtype=dtype, seeds=(11, 12)))
    assert result.verdict is Verdict.PASS, result.reason
    errors = result.details["numerics"]["rel_errors"]["check"]
    assert all(0 < e < TOLERANCE[dtype] for e in errors)


def test_the_other_catalog_order_verifies(tmp_path):
    """The expert is None; the one other 1-D catalog order (XCD remap) must still be a correct
    permutation with the same output (what the optimizer will try)."""
    source = LAYERNORM.read_text()
    remap = catalog_source("xcd-contiguous:8", target_args(source, "swizzle"))
    path = tmp_path / "layernorm.py"
    path.write_text(splice(source, "swizzle", remap))
    result = verify(path, tmp_path / "m.npy", VerifyConfig(dtype="float16", seeds=(3,)))
    assert result.verdict is Verdict.PASS, result.reason


def test_a_weird_shape_on_the_one_tile_path(launch_interpreted):
    """M = 13, N = 100 in one 128-wide tile (ONE_TILE), 2 rows a program, the last block half
    empty; run in an interpreted worker."""
    has_nan, rel = launch_interpreted(LAYERNORM, {'M': 13, 'N': 100}, 'float16',
                                      dict(BLOCK_M=2, BLOCK_N=128, num_warps=4))
    assert not has_nan and 0 < rel < 2e-3


def test_access_model_counted_by_hand(spec):
    # M = 37, N = 50, 4 x 16 tiles: 10 row blocks (4 rows each, the last 1), 4 column blocks
    # (16, 16, 16, 2 wide); three passes of 4 steps each, up to 4 accesses a step.
    trace = spec.trace(spec.problems["check"], spec.check_meta)
    assert trace.keys.shape == (10, 12, 4)
    # x and y: 37 * 50 * 2 bytes each; w and b: 50 * 2 bytes each.
    assert trace.footprint_bytes() == 2 * 3700 + 2 * 100
    assert trace.block_bytes[trace.block_is_write].sum() == 3700
    # Blocks: x 0..39 (m * 4 + k), w 40..43, b 44..47, y 48..87.
    assert trace.block_bytes[39] == 1 * 2 * 2  # x (9, 3): one row, two columns
    last = trace.keys[9]  # row block 9: x 36..39 in passes 1 and 2, then x, w, b, y
    assert last[:8, 0].tolist() == [36, 37, 38, 39] * 2 and (last[:8, 1:] == -1).all()
    assert last[8:].tolist() == [[36 + k, 40 + k, 44 + k, 84 + k] for k in range(4)]


def test_access_model_at_the_default_problem(spec):
    # Two rows (16 KiB of bf16) a program, one tile: read x, then w, b and write y.
    trace = spec.trace(spec.problems["default"], spec.meta)
    assert trace.keys.shape == (32768, 2, 3)
    assert trace.footprint_bytes() == 2 * 65536 * 8192 + 2 * 8192
    assert trace.block_bytes[0] == 2 * 4096 * 2 and trace.block_bytes[32768] == 4096 * 2
    assert trace.keys[5].tolist() == [[5, -1, -1], [32768, 32769, 32770 + 5]]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_numerics_on_gpu_at_the_default_problem(tmp_path, dtype):
    result = verify(LAYERNORM, tmp_path / "m.npy", VerifyConfig(device="cuda", dtype=dtype, seeds=(1, 2)),
                    time_it=True)
    assert result.verdict is Verdict.PASS, result.reason
    assert result.details["numerics"]["rel_errors"]["default"][0] < TOLERANCE[dtype]
    timing = result.details["timing"]
    assert timing["time_ms"] > 0 and timing["time_spread_ms"] >= 0 and timing["repetitions"] > 10
