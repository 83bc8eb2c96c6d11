"""kernels/smith_waterman.py: exact scores through the interpreter on CPU (check problem: the
wavefront, the expert given as source, and another order within the diagonals), a wavefront-breaking
order rejected, a weird shape, the access model counted by hand, and on a GPU the default problem.

Tolerance: 0.0. H is int32, computed with integer additions and maxima only: exact equality with
the reference."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from swizzleperf.agent.verification.candidate import check_candidate, splice
from swizzleperf.agent.verification.load import load_kernel
from swizzleperf.agent.verification.swizzles import catalog_source
from swizzleperf.agent.verification.verify import Verdict, VerifyConfig, verify

SW = Path(__file__).resolve().parents[2] / "kernels" / "smith_waterman.py"
ARGS = ["pid", "num_pid_m", "num_pid_n"]


@pytest.fixture(scope="module")
def spec():
    return load_kernel(SW)[1]


def _spliced(tmp_path: Path, target: str) -> Path:
    path = tmp_path / "smith_waterman.py"
    path.write_text(splice(SW.read_text(), "swizzle", target))
    return path


def test_spec_contract(spec):
    assert spec.num_programs("check") % 8 != 0  # 5 x 4 = 20 programs in 8 launches
    assert spec.tile_grid(spec.problems["default"], spec.meta) == (256, 128)
    assert spec.tolerance == {"int32": 0.0} and spec.dtypes == ("int32",)
    check_candidate(spec.expert, "swizzle", ARGS)  # the expert is a legal rewrite target


def test_exact_scores_on_cpu_at_the_check_problem(tmp_path):
    result = verify(SW, tmp_path / "m.npy", VerifyConfig(dtype="int32", seeds=(11, 12)))
    assert result.verdict is Verdict.PASS, result.reason
    assert result.details["numerics"]["rel_errors"]["check"] == [0.0, 0.0]
    order = np.load(tmp_path / "m.npy")  # program -> tile at the default problem (256 x 128 tiles)
    pid_m, pid_n = np.divmod(order, 128)
    diagonal = pid_m + pid_n
    assert (np.diff(diagonal) >= 0).all()  # the diagonals in order ...
    assert (np.diff(pid_m)[np.diff(diagonal) == 0] == 1).all()  # ... each from its top row down
    assert np.count_nonzero(np.diff(diagonal)) == 256 + 128 - 2 and sorted(order.tolist()) == list(range(256 * 128))


def test_the_expert_order_passes_too(tmp_path, spec):
    result = verify(_spliced(tmp_path, spec.expert), tmp_path / "m.npy", VerifyConfig(dtype="int32", seeds=(3,)))
    assert result.verdict is Verdict.PASS, result.reason
    assert result.details["numerics"]["rel_errors"]["check"] == [0.0]


def test_another_order_within_the_diagonals_passes(tmp_path):
    # Within each anti-diagonal from its bottom row up (the reverse of the natural order): legal.
    result = verify(_spliced(tmp_path, load_kernel(SW)[0].order_sources()["bottom-up"]), tmp_path / "m.npy", VerifyConfig(dtype="int32", seeds=(4,)))
    assert result.verdict is Verdict.PASS, result.reason


@pytest.mark.parametrize("order", ["row-major", "xcd-grouped-m:8:8"])
def test_an_order_that_breaks_the_wavefront_fails_numerics(tmp_path, order):
    """Permutations of the grid, but launch d computes tiles off diagonal d: they are left
    unwritten (row-major would even be a valid order for one program after the other)."""
    result = verify(_spliced(tmp_path, catalog_source(order, ARGS)), tmp_path / "m.npy",
                    VerifyConfig(dtype="int32", seeds=(5,)))
    assert result.verdict is Verdict.MISMATCH, result.reason
    assert "never written" in result.reason and "tiles of 8x16 elements" in result.reason


def test_a_weird_shape_through_the_interpreter(spec):
    """M = 9, N = 70 with 8 x 16 tiles: a one-row tile row and a 6-wide last column; in a worker."""
    code = ("import json, torch\n"
            "from swizzleperf.agent.verification.load import load_kernel\n"
            f"m, spec = load_kernel({str(SW)!r})\n"
            "x = spec.make_inputs({'M': 9, 'N': 70}, 5, 'cpu', 'int32'); x['h'].fill_(-2**31)\n"
            "spec.launch(x, **spec.check_meta)\n"
            "ref = spec.reference(x)\n"
            "print(json.dumps([bool((x['h'] == ref).all()), int(ref.max()), int((ref > 0).sum())]))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         env=dict(os.environ, TRITON_INTERPRET="1"))
    equal, best, positive = json.loads(out.stdout.strip().splitlines()[-1])
    assert equal and best > 0 and positive > 0


def test_the_reference_on_a_hand_example(spec):
    """a = ACGT, b = AGT (0123 / 023): match 3, mismatch -3, gap 2, by hand:
    row A: 3 1 0; row C: 1 0 0; row G: 0 4 2; row T: 0 2 7 (T-T after G-G: 4 + 3)."""
    import torch
    inputs = {"a": torch.tensor([0, 1, 2, 3], dtype=torch.int8), "b": torch.tensor([0, 2, 3], dtype=torch.int8)}
    assert spec.reference(inputs).tolist() == [[3, 1, 0], [1, 0, 0], [0, 4, 2], [0, 2, 7]]


def test_access_model_counted_by_hand(spec):
    # M = 37, N = 50 with 8 x 16 tiles: 5 x 4 tiles (rows 8, 8, 8, 8, 5; columns 16, 16, 16, 2).
    # Blocks: a's 5 pieces (0..4), b's 4 (5..8), the 20 last rows (9..28), the 20 last columns
    # (29..48), the 20 interiors (49..68).
    trace = spec.trace(spec.problems["check"], spec.check_meta)
    assert trace.keys.shape == (20, 3, 4)
    last_rows = 5 * (16 + 16 + 16 + 2) * 4  # every tile's last row, int32: 1000 B
    last_cols = 4 * (8 + 8 + 8 + 8 + 5) * 32  # every tile's last column, a 32 B sector a row: 4736 B
    interiors = 37 * 50 * 4 - last_rows - last_cols + 20 * 32  # the rest, the corner sector once
    assert trace.footprint_bytes() == 37 + 50 + last_rows + last_cols + interiors
    writes = trace.writes()
    step0, step1, step2 = (trace.keys[:, s] for s in range(3))
    # Step 0 reads a piece per tile (4 tile columns x 37 B), b (5 tile rows x 50 B), the last rows
    # of tile rows 0..3 (4 x 200 B), the last columns of tile columns 0..2 (3 x 37 x 32 B).
    assert trace.block_bytes[step0[step0 >= 0]].sum() == 4 * 37 + 5 * 50 + 4 * 200 + 3 * 37 * 32
    assert not writes[:, 0].any() and not writes[:, 2].any()
    # Step 1 stores all of H (each tile whole); step 2 reads back every interior and last column.
    assert trace.block_bytes[step1[writes[:, 1]]].sum() == 37 * 50 * 4 + 20 * 32
    assert trace.block_bytes[step2[step2 >= 0]].sum() == interiors + last_cols
    # Tile (1, 2) (flat 6): a piece 1, b piece 2, the last row of (0, 2), the last column of (1, 1);
    # then it stores its interior, last row and last column, and reads back the interior and column.
    assert trace.keys[6].tolist() == [[1, 7, 9 + 2, 29 + 5], [49 + 6, 9 + 6, 29 + 6, -1], [49 + 6, 29 + 6, -1, -1]]
    assert writes[6].tolist() == [[False] * 4, [True, True, True, False], [False] * 4]
    assert trace.keys[0, 0].tolist() == [0, 5, -1, -1]
    assert trace.block_is_write[9:].all() and not trace.block_is_write[:9].any()


@pytest.mark.gpu
def test_exact_scores_on_gpu_at_the_default_problem(tmp_path, spec):
    for path in (SW, _spliced(tmp_path, spec.expert)):
        result = verify(path, tmp_path / "m.npy", VerifyConfig(device="cuda", dtype="int32", seeds=(1, 2)),
                        time_it=True)
        assert result.verdict is Verdict.PASS, result.reason
        assert result.details["numerics"]["rel_errors"]["default"] == [0.0]
        timing = result.details["timing"]
        assert timing["time_ms"] > 1.0 and timing["repetitions"] > 10
