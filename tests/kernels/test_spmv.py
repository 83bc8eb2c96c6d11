"""kernels/spmv.py: the sparsity pattern (sorted, in range, diagonal present), the reference against a
dense float64 product, numerics through the interpreter on CPU at the check problem, the expert
order (outside the catalog) verified and probed as a permutation at ragged sizes, the access model
counted by hand, and on a GPU the default problem.

Tolerance: ||y - ref|| / ||ref|| with fp32 products summed in fp32 (~37 a row): ~7e-8 measured on
CPU; the spec allows 1e-5."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from swizzleperf.agent.verification.candidate import check_candidate, splice, target_args
from swizzleperf.agent.verification.load import load_kernel
from swizzleperf.agent.verification.verify import Verdict, VerifyConfig, verify

SPMV = Path(__file__).resolve().parents[2] / "kernels" / "spmv.py"
# 16 x 16 x 4 grid: 1024 rows, 8 row blocks of 128 (half a plane each), 4 x blocks of 256
# columns (one plane each): small enough to count the access model by hand.
PLANES = {"nx": 16, "ny": 16, "nz": 4, "radius": 2, "seed": 0}


@pytest.fixture(scope="module")
def loaded():
    return load_kernel(SPMV)


@pytest.fixture(scope="module")
def spec(loaded):
    return loaded[1]


def test_spec_contract(spec):
    assert spec.num_programs("check") == 14  # not a multiple of 8
    assert spec.tile_grid(spec.problems["default"], spec.meta) == (16384,)
    assert spec.swizzle_args(spec.problems["default"], spec.meta) == (16384,)
    assert spec.dtypes == ("float32",) and dict(spec.tolerance) == {"float32": 1e-5}
    assert "def swizzle(pid, num_pids)" in spec.expert


def test_the_pattern(loaded):
    module, spec = loaded
    row_ptr, col_idx = module.structure(spec.problems["check"])
    M = 7 * 6 * 5
    assert row_ptr.shape == (M + 1,) and row_ptr[0] == 0 and row_ptr[-1] == col_idx.size
    assert row_ptr.dtype == np.int64 and col_idx.dtype == np.int32
    for i in range(M):
        cols = col_idx[row_ptr[i]:row_ptr[i + 1]]
        assert (np.diff(cols) > 0).all() and cols.min() >= 0 and cols.max() < M and i in cols
    # A row's columns are within its 5 x 5 x 5 box: row 0 (corner) may reach at most column
    # 2 + 2 * 7 + 2 * 42 = 100, and has at most 27 candidates.
    assert col_idx[:row_ptr[1]].max() <= 100 and row_ptr[1] <= 27
    # Deterministic for the problem's seed, different for another seed.
    again = module._structure.__wrapped__(7, 6, 5, 2, 0)
    assert (again[0] == row_ptr).all() and (again[1] == col_idx).all()
    other = module._structure.__wrapped__(7, 6, 5, 2, 1)
    assert other[1].size != col_idx.size or (other[1] != col_idx).any()


def test_reference_against_a_dense_product(spec):
    inputs = spec.make_inputs(spec.problems["check"], 3, "cpu", "float32")
    row_ptr, col_idx, values = inputs["row_ptr"], inputs["col_idx"], inputs["values"]
    dense = torch.zeros(210, 210, dtype=torch.float64)
    for i in range(210):
        sl = slice(int(row_ptr[i]), int(row_ptr[i + 1]))
        dense[i, col_idx[sl].long()] = values[sl].double()
    expected = dense @ inputs["x"].double()
    assert torch.allclose(spec.reference(inputs), expected, rtol=1e-12, atol=1e-12)
    # Fresh values and x for another input seed, the same pattern.
    other = spec.make_inputs(spec.problems["check"], 4, "cpu", "float32")
    assert torch.equal(other["col_idx"], col_idx) and not torch.equal(other["values"], values)


def test_numerics_on_cpu_at_the_check_problem(tmp_path):
    result = verify(SPMV, tmp_path / "m.npy", VerifyConfig(dtype="float32", seeds=(11, 12)))
    assert result.verdict is Verdict.PASS, result.reason
    errors = result.details["numerics"]["rel_errors"]["check"]
    assert all(0 < e < 1e-5 for e in errors)


def test_the_expert_order_verifies(tmp_path, spec):
    source = SPMV.read_text()
    args = target_args(source, "swizzle")
    check_candidate(spec.expert, "swizzle", args)  # what the optimizer checks before splicing
    path = tmp_path / "spmv.py"
    path.write_text(splice(source, "swizzle", spec.expert))
    result = verify(path, tmp_path / "m.npy", VerifyConfig(dtype="float32", seeds=(3,)))
    assert result.verdict is Verdict.PASS, result.reason
    # The default grid is 128 whole groups of 8 chunks x 16 row blocks: program 8 j + d computes
    # row block 128 (j // 16) + 16 d + j % 16.
    order = np.load(tmp_path / "m.npy")
    assert order[:3].tolist() == [0, 16, 32] and order[8] == 1 and order[8 * 16] == 128


def test_the_expert_at_ragged_sizes(tmp_path, spec):
    """Permutation at grids of 1, 127, 128, 1000 and 16461 programs (partial last group), and
    numerics at 158 programs (one whole group, 30 identity), in an interpreted worker."""
    path = tmp_path / "spmv.py"
    path.write_text(splice(SPMV.read_text(), "swizzle", spec.expert))
    code = ("import json, numpy as np\n"
            "from swizzleperf.agent.verification.load import load_kernel\n"
            "from swizzleperf.agent.verification.probe import probe_target\n"
            f"m, spec = load_kernel({str(path)!r})\n"
            "ok = [bool((np.sort(probe_target(m, spec, (n,), n, 1)[:, 0]) == np.arange(n)).all())\n"
            "      for n in (1, 127, 128, 1000, 16461)]\n"
            "p = {'nx': 9, 'ny': 7, 'nz': 5, 'radius': 2, 'seed': 2}\n"
            "x = spec.make_inputs(p, 5, 'cpu', 'float32'); x['y'].fill_(float('nan'))\n"
            "spec.launch(x, BLOCK_M=2, BLOCK_K=32)\n"
            "ref = spec.reference(x)\n"
            "print(json.dumps([ok, bool(x['y'].isnan().any()), float((x['y'].double() - ref).norm() / ref.norm())]))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         env=dict(os.environ, TRITON_INTERPRET="1"))
    assert out.returncode == 0, out.stderr[-2000:]
    ok, has_nan, rel = json.loads(out.stdout.strip().splitlines()[-1])
    assert all(ok) and not has_nan and 0 < rel < 1e-5


def test_access_model_counted_by_hand(loaded, spec):
    module = loaded[0]
    trace = spec.trace(PLANES, spec.meta)
    # Row block m is half of plane m // 2; its columns lie in planes m // 2 - 2 .. m // 2 + 2
    # (clipped to 0..3), and x block b is plane b. So row blocks 0, 1 touch x blocks 0, 1, 2;
    # 2..5 all four; 6, 7 blocks 1, 2, 3: 3 + 3 + 4 * 4 + 3 + 3 = 28 x block reads, width 2 + 4.
    assert trace.keys.shape == (8, 3, 6)
    # Blocks: row_ptr 0..7, col_idx 8..15, values 16..23, x 24..27, y 28..35.
    assert trace.keys[0].tolist() == [[0] + [-1] * 5, [8, 16, 24, 25, 26, -1], [28] + [-1] * 5]
    assert trace.keys[3, 1].tolist() == [11, 19, 24, 25, 26, 27]
    assert trace.keys[7, 1].tolist() == [15, 23, 25, 26, 27, -1]
    x_reads = trace.keys[:, 1, 2:]
    assert int((x_reads >= 0).sum()) == 28
    nnz = int(module.structure(PLANES)[0][-1])
    assert trace.block_bytes[:8].tolist() == [128 * 8] * 8  # row_ptr: 8 B a row
    assert trace.block_bytes[8:24].sum() == 2 * 4 * nnz  # col_idx and values: 4 B a nonzero
    assert trace.block_bytes[24:28].tolist() == [1024] * 4  # x: 256 columns of 4 B
    assert trace.block_bytes[28:].tolist() == [512] * 8 and trace.block_is_write[28:].all()
    assert trace.footprint_bytes() == 1024 * 8 + 8 * nnz + 4096 + 4096
    # min_bytes also counts row_ptr's last element (M + 1 of them), which the model leaves out.
    assert spec.min_bytes(PLANES, "float32") == trace.footprint_bytes() + 8


def test_access_model_at_the_check_problem(spec):
    # 210 rows: 13 row blocks of 16 and one of 2; all 210 columns in one x block (840 bytes).
    trace = spec.trace(spec.problems["check"], spec.check_meta)
    assert trace.keys.shape == (14, 3, 3)
    assert (trace.keys[:, 1, 2] == 3 * 14).all()
    assert trace.block_bytes[3 * 14] == 840 and trace.block_bytes[13] == 2 * 8


@pytest.mark.gpu
def test_numerics_on_gpu_at_the_default_problem(tmp_path):
    result = verify(SPMV, tmp_path / "m.npy", VerifyConfig(device="cuda", dtype="float32", seeds=(1, 2)),
                    time_it=True)
    assert result.verdict is Verdict.PASS, result.reason
    assert result.details["numerics"]["rel_errors"]["default"][0] < 1e-5
    timing = result.details["timing"]
    assert timing["time_ms"] > 0 and timing["time_spread_ms"] >= 0 and timing["repetitions"] > 10
