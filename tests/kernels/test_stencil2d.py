"""kernels/stencil2d.py: numerics through the interpreter on CPU (check problem, the kernel's own order
and the expert order), a weird shape, its access model counted by hand, and on a GPU the default problem.

Tolerance: ||out - ref|| / ||ref|| against a float64 reference: five fp32 inputs, four additions and
two multiplications rounded to fp32 (2^-24 relative each), a few 1e-8; the spec allows 1e-6."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from swizzleperf.agent.verification.candidate import splice, target_args
from swizzleperf.agent.verification.load import load_kernel
from swizzleperf.agent.verification.swizzles import catalog_source
from swizzleperf.agent.verification.verify import Verdict, VerifyConfig, verify

STENCIL = Path(__file__).resolve().parents[2] / "kernels" / "stencil2d.py"


@pytest.fixture(scope="module")
def spec():
    return load_kernel(STENCIL)[1]


def test_spec_contract(spec):
    assert spec.num_programs("check") % 8 != 0  # 3 x 4 = 12 programs
    assert spec.tile_grid(spec.problems["default"], spec.meta) == (512, 128)
    assert spec.min_bytes(spec.problems["default"], "float32") == 2 * 2**30  # x read, out written
    assert spec.dtypes == ("float32",) and spec.expert == "xcd-grouped-m:8:8"


def test_numerics_on_cpu_at_the_check_problem(tmp_path):
    result = verify(STENCIL, tmp_path / "m.npy", VerifyConfig(dtype="float32", seeds=(11, 12)))
    assert result.verdict is Verdict.PASS, result.reason
    assert all(0 < e < 1e-6 for e in result.details["numerics"]["rel_errors"]["check"])


def test_the_expert_order_passes_too(tmp_path, spec):
    source = STENCIL.read_text()
    expert = catalog_source(spec.expert, target_args(source, "swizzle"))
    path = tmp_path / "stencil2d.py"
    path.write_text(splice(source, "swizzle", expert))
    result = verify(path, tmp_path / "m.npy", VerifyConfig(dtype="float32", seeds=(3,)))
    assert result.verdict is Verdict.PASS, result.reason
    order = np.load(tmp_path / "m.npy")  # the default problem's program -> tile map
    assert sorted(order.tolist()) == list(range(512 * 128)) and order[1] != 1  # not row-major


def test_a_weird_shape_through_the_interpreter(spec, launch_interpreted):
    """M = 33, N = 17 with 16 x 16 tiles: a one-row and a one-column edge tile; run in a worker."""
    has_nan, rel = launch_interpreted(STENCIL, {'M': 33, 'N': 17}, 'float32')
    assert not has_nan and rel < 1e-6


def test_access_model_counted_by_hand(spec):
    # M = 40, N = 56 with 16 x 16 tiles: 3 x 4 tiles, rows 16, 16, 8 and columns 16, 16, 16, 8.
    # Each tile of x in 3 x 3 parts: rows (1, h - 2, 1) x columns (8, w - 16, 8) (an 8-wide tile:
    # (8, 0, 0)); 32 B sectors = 8 fp32.
    trace = spec.trace(spec.problems["check"], spec.check_meta)
    assert trace.keys.shape == (12, 1, 22)  # 9 own parts, 4 x 3 halo parts, 1 write
    assert trace.footprint_bytes() == 2 * 40 * 56 * 4  # x and out, once each
    keys = trace.keys[:, 0, :]
    read = keys[(keys >= 0) & ~trace.block_is_write[np.maximum(keys, 0)]]
    # Halo bytes: rows above (2 tile rows read the bottom row of the one above: 2 x 56 x 4 = 448),
    # the same below (448); sector columns left (3 tile columns x 40 rows x 32 B = 3840), right (3840).
    assert trace.block_bytes[read].sum() == 40 * 56 * 4 + 448 + 448 + 3840 + 3840
    # Tile (1, 2) (flat 6): own parts 54..62 (the middle column parts of a 16-wide tile are empty),
    # the bottom row of tile (0, 2), the top row of (2, 2), the right sector column of (1, 1) and the
    # left one of (1, 3); then out's tile 6, after x's 12 x 9 parts.
    assert keys[6, :9].tolist() == [54, -1, 56, 57, -1, 59, 60, -1, 62]
    assert keys[6, 9:21].tolist() == [24, -1, 26, 90, -1, 92, 47, 50, 53, 63, 66, 69]
    assert keys[6, 21] == 108 + 6 and trace.block_is_write[108:].all() and not trace.block_is_write[:108].any()
    assert trace.block_bytes[47] == 1 * 8 * 4 and trace.block_bytes[50] == 14 * 8 * 4
    # Tile (0, 0) has no neighbour above or to the left.
    assert keys[0, 9:12].tolist() == [-1, -1, -1] and keys[0, 15:18].tolist() == [-1, -1, -1]


@pytest.mark.gpu
def test_numerics_on_gpu_at_the_default_problem(tmp_path):
    result = verify(STENCIL, tmp_path / "m.npy", VerifyConfig(device="cuda", dtype="float32", seeds=(1, 2)),
                    time_it=True)
    assert result.verdict is Verdict.PASS, result.reason
    assert result.details["numerics"]["rel_errors"]["default"][0] < 1e-6
    timing = result.details["timing"]
    assert timing["time_ms"] > 0.1 and timing["time_spread_ms"] >= 0 and timing["repetitions"] > 10
