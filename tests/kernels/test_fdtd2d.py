"""kernels/fdtd2d.py: numerics of the fused time step through the interpreter on CPU (check problem,
the kernel's own order and the expert order), a weird shape, its access model counted by hand, and on
a GPU the default problem.

Tolerance: ||out - ref|| / ||ref|| over the three new fields against PolyBench's sweeps in float64:
a few fp32 additions and multiplications of O(1) values per element (2^-24 relative each), about
1e-7; the spec allows 1e-6."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from swizzleperf.agent.verification.candidate import splice, target_args
from swizzleperf.agent.verification.load import load_kernel
from swizzleperf.agent.verification.swizzles import catalog_source
from swizzleperf.agent.verification.verify import Verdict, VerifyConfig, verify

FDTD = Path(__file__).resolve().parents[2] / "kernels" / "fdtd2d.py"


@pytest.fixture(scope="module")
def spec():
    return load_kernel(FDTD)[1]


def test_spec_contract(spec):
    assert spec.num_programs("check") % 8 != 0  # 3 x 4 = 12 programs
    assert spec.tile_grid(spec.problems["default"], spec.meta) == (512, 64)
    assert spec.min_bytes(spec.problems["default"], "float32") == 6 * 2**28  # 3 fields in, 3 out
    assert spec.dtypes == ("float32",) and spec.expert == "xcd-grouped-m:8:8"


def test_numerics_on_cpu_at_the_check_problem(tmp_path):
    result = verify(FDTD, tmp_path / "m.npy", VerifyConfig(dtype="float32", seeds=(11, 12)))
    assert result.verdict is Verdict.PASS, result.reason
    assert all(0 < e < 1e-6 for e in result.details["numerics"]["rel_errors"]["check"])


def test_the_expert_order_passes_too(tmp_path, spec):
    source = FDTD.read_text()
    path = tmp_path / "fdtd2d.py"
    path.write_text(splice(source, "swizzle", catalog_source(spec.expert, target_args(source, "swizzle"))))
    result = verify(path, tmp_path / "m.npy", VerifyConfig(dtype="float32", seeds=(3,)))
    assert result.verdict is Verdict.PASS, result.reason
    order = np.load(tmp_path / "m.npy")
    assert sorted(order.tolist()) == list(range(512 * 64)) and order[1] != 1  # not row-major


def test_a_weird_shape_through_the_interpreter(spec, launch_interpreted):
    """NX = 33, NY = 17 with 16 x 16 tiles: a one-row and a one-column edge tile; run in a worker."""
    has_nan, rel = launch_interpreted(FDTD, {'NX': 33, 'NY': 17}, 'float32')
    assert not has_nan and rel < 1e-6


def test_access_model_counted_by_hand(spec):
    # NX = 40, NY = 56 with 16 x 16 tiles: 3 x 4 tiles (rows 16, 16, 8; columns 16, 16, 16, 8), each
    # field's tile in 3 x 3 parts as in stencil2d (12 x 9 = 108 parts a field: ex 0.., ey 108..,
    # hz 216..), then out's 3 x 12 tiles from 324 (field-major).
    trace = spec.trace(spec.problems["check"], spec.check_meta)
    assert trace.keys.shape == (12, 1, 48)  # hz 9 + 12 halo, ex 9 + 3, ey 9 + 3, 3 writes
    assert trace.footprint_bytes() == 6 * 40 * 56 * 4  # three fields read, three written, once each
    keys = trace.keys[:, 0, :]
    read = keys[(keys >= 0) & ~trace.block_is_write[np.maximum(keys, 0)]]
    # Own tiles 3 x 8960 B; hz's halos as the stencil's (rows 448 + 448, sector columns 3840 + 3840);
    # ex's right sector columns (3 tile columns x 40 rows x 32 B = 3840); ey's lower rows (448).
    assert trace.block_bytes[read].sum() == 3 * 8960 + (448 + 448 + 3840 + 3840) + 3840 + 448
    # Tile (1, 2) (flat 6): ex's right halo = the left sector column of ex's tile (1, 3) (parts 63,
    # 66, 69); ey's lower halo = the top row of ey's tile (2, 2) (108 + 90, empty middle, 108 + 92);
    # writes out's tile 6 of each field.
    assert keys[6, :9].tolist() == [270, -1, 272, 273, -1, 275, 276, -1, 278]  # hz's own: 216 + 54..62
    assert keys[6, 21:30].tolist() == [54, -1, 56, 57, -1, 59, 60, -1, 62]  # ex's own parts
    assert keys[6, 30:33].tolist() == [63, 66, 69]
    assert keys[6, 42:45].tolist() == [198, -1, 200]
    assert keys[6, 45:].tolist() == [330, 342, 354] and trace.block_is_write[324:].all()
    assert not trace.block_is_write[:324].any()


@pytest.mark.gpu
def test_numerics_on_gpu_at_the_default_problem(tmp_path):
    result = verify(FDTD, tmp_path / "m.npy", VerifyConfig(device="cuda", dtype="float32", seeds=(1, 2)),
                    time_it=True)
    assert result.verdict is Verdict.PASS, result.reason
    assert result.details["numerics"]["rel_errors"]["default"][0] < 1e-6
    timing = result.details["timing"]
    assert timing["time_ms"] > 0.1 and timing["time_spread_ms"] >= 0 and timing["repetitions"] > 10
