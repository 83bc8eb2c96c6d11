"""The generic tracer: the affine extension on samples counted by hand, its refusals, and the
traced GEMM against the GEMM's hand-written access model at the real problem size."""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from swizzleperf.agent.verification.load import load_kernel
from swizzleperf.agent.verification.simulate import trace_kernel
from swizzleperf.hwspecs import load_spec
from swizzleperf.profiling import l2sim
from swizzleperf.profiling.tracer import TraceError, extend, group_steps, sample_tiles
from triton36 import SKIP_REASON, TRITON36, env_with_triton36


def _gemm_like(tile, steps=2):
    """Accesses of tile (m, n) of a 3 x 4 GEMM-like grid: per step k an A block of 100 bytes at
    m*1000 + k*100 in tensor 0 and a B block of 50 bytes at k*400 + n*50 in tensor 1; then a store
    of 80 bytes at (m*4 + n)*80 in tensor 2. Sites: 10 (A), 11 (B), 12 (C)."""
    m, n = tile
    out = []
    for k in range(steps):
        out.append((10, 0, m * 1000 + k * 100, m * 1000 + k * 100 + 100, 100, False))
        out.append((11, 1, k * 400 + n * 50, k * 400 + n * 50 + 50, 50, False))
    out.append((12, 2, (m * 4 + n) * 80, (m * 4 + n) * 80 + 80, 80, True))
    return out


def test_steps_end_where_a_site_repeats():
    steps = group_steps(_gemm_like((0, 0)))
    assert [[a[0] for a in s] for s in steps] == [[10, 11], [10, 11, 12]]


def test_extension_matches_the_hand_count():
    grid = (3, 4)
    samples = {t: _gemm_like(t) for t in sample_tiles(grid)}
    # At byte granularity (granule_bytes=1) every distinct range is a block of its own; at the
    # default 128 B lines these unaligned ranges would share lines (tests/profiling/test_tracer_edges.py).
    trace = extend(samples, grid, programs_per_cu=1, source="test", granule_bytes=1)
    # Distinct blocks by hand: A 3 rows x 2 steps = 6, B 2 steps x 4 cols = 8, C 12: 26 blocks,
    # 6*100 + 8*50 + 12*80 = 1960 bytes.
    assert trace.block_bytes.size == 26 and trace.footprint_bytes() == 1960
    assert trace.block_is_write.sum() == 12
    # Tile (2, 3) (flat 11) reads the A blocks at 2000 and 2100 and B blocks at 150 and 550.
    a_ids = set(trace.keys[11, :, 0].tolist())
    assert a_ids == set(trace.keys[8, :, 0].tolist())  # tile (2, 0): same row, same A blocks
    assert a_ids.isdisjoint(trace.keys[0, :, 0].tolist())


def _row_blocks(tile, width=100, block=32, itemsize=4):
    """Program (row, column block) of a grid of rows by column blocks reading x[row, cols] with
    cols < width (the last block masked at the row's end), flat: x_ptr + row * stride + cols; a
    scale per row; the result stored the same way. Tensors 0 (x), 1 (scale), 2 (y)."""
    row, cb = tile
    start = (row * width + cb * block) * itemsize
    end = min(start + block * itemsize, (row + 1) * width * itemsize)
    return [(20, 1, row * itemsize, row * itemsize + itemsize, itemsize, False),
            (21, 0, start, end, end - start, False),
            (22, 2, start, end, end - start, True)]


def test_a_row_masked_at_its_end_is_read_in_rows_of_the_tiles_step():
    """Byte ranges clipped at each row's end are no box in bytes; read as one-row rectangles of
    the row coordinate's byte step they are, and every tile gets exactly its bytes."""
    grid = (24, 4)
    samples = {t: _row_blocks(t) for t in sample_tiles(grid)}
    trace = extend(samples, grid, programs_per_cu=1, source="test", granule_bytes=1)
    x_slot = 1                                        # step 0: the scale, then x, then the store
    covered = set()
    for flat in range(24 * 4):
        row, cb = divmod(flat, 4)
        start, end = _row_blocks((row, cb))[1][2:4]
        got = sum(int(trace.block_bytes[k]) for k in trace.keys[flat, 0, x_slot:x_slot + 1] if k >= 0)
        assert got == end - start, (row, cb, got, end - start)
        covered.add(int(trace.keys[flat, 0, x_slot]))
    assert len(covered) == 24 * 4                     # no two tiles share a block of x
    assert trace.footprint_bytes() == 24 * 4 + 2 * 24 * 100 * 4


def test_data_dependent_addresses_are_refused():
    grid = (3, 4)
    samples = {t: _gemm_like(t) for t in sample_tiles(grid)}
    tile = (1, 1)
    bad = list(samples[tile])
    bad[0] = (10, 0, 12345, 12445, 100, False)  # an address no affine map gives
    samples[tile] = bad
    with pytest.raises(TraceError, match="not an affine function"):
        extend(samples, grid, 1, "test")


def test_differently_shaped_programs_are_refused():
    grid = (3, 4)
    samples = {t: _gemm_like(t) for t in sample_tiles(grid)}
    samples[(1, 1)] = _gemm_like((1, 1), steps=3)
    with pytest.raises(TraceError, match="another access pattern"):
        extend(samples, grid, 1, "test")


def test_traced_gemm_equals_its_access_model(gemm_path):
    _, spec = load_kernel(gemm_path)
    hand = spec.trace(spec.problems["default"], spec.meta)
    traced = trace_kernel(Path(gemm_path))
    assert traced.footprint_bytes() == hand.footprint_bytes() == 2 * (16384 * 4096 * 2) + 16384 * 16384 * 2
    assert traced.block_bytes.size == hand.block_bytes.size
    assert traced.num_tiles == hand.num_tiles
    hw = load_spec("h200")
    # The tracer puts the store of C in the last loop step (its call site does not repeat), the
    # model in a step of its own: the programs' timing differs by one step, the hit rate by <1e-4.
    for order in (np.arange(8192), np.argsort(np.arange(8192) % 64, kind="stable")):
        assert l2sim.simulate(traced, order, hw).l2_hit_rate == pytest.approx(
            l2sim.simulate(hand, order, hw).l2_hit_rate, abs=1e-4)


KERNELS = Path(__file__).resolve().parents[2] / "kernels"


@pytest.mark.parametrize("kernel, meta, sizes, footprint, blocks", [
    # A 96x64 + B 64x64 + C 96x64, bf16: 12288 + 8192 + 12288 bytes. Rows are 128 B, one line, and
    # a 32-wide tile's row is half of it: the two tiles side by side share every line, so each
    # 32-row band of A, B and C is one block of 4096 B at 128 B lines: 3 + 2 + 3 blocks (the
    # access model, at byte ranges, counts 6 + 4 + 6).
    ("gemm", {"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32}, {"M": 96, "N": 64, "K": 64}, 32768, 8),
    # x and y 16x64 fp32 (4096 bytes each) + scale and bias 64 fp32 each (512): 1 KiB blocks of x
    # and y (4 each), all of scale and of bias: 10 blocks, as the access model.
    ("elementwise", {"BLOCK": 256}, {"M": 16, "N": 64}, 8704, 10),
    # x 96x64 and out 64x96, bf16: 12288 bytes each. x's 128 B rows: one 4096 B block per 32-row
    # band (3); out's 192 B rows: columns [0, 128) shared by out tiles 0 and 1, [128, 192) of
    # tile 2 (rounded to a line within the row): 2 bands x (4096 + 2048 B) = 4 blocks.
    ("transpose", {"BLOCK_M": 32, "BLOCK_N": 32}, {"M": 96, "N": 64}, 24576, 7),
])
def test_tracer_footprints_counted_by_hand(kernel, meta, sizes, footprint, blocks):
    path = KERNELS / f"{kernel}.py"
    traced = trace_kernel(path, meta_overrides=meta, sizes=sizes)
    assert traced.footprint_bytes() == footprint
    assert traced.block_bytes.size == blocks
    _, spec = load_kernel(path)
    hand = spec.trace({**spec.problems["default"], **sizes}, {**spec.meta, **meta})
    assert hand.footprint_bytes() == footprint


# Prints the triton version, then per kernel the traced keys and block bytes (small problems).
_TRACE_SCRIPT = """
import json, sys, triton
from pathlib import Path
from swizzleperf.agent.verification.simulate import trace_kernel
out = {"version": triton.__version__}
for kernel, meta, sizes in json.loads(sys.argv[1]):
    trace = trace_kernel(Path(kernel), meta_overrides=meta, sizes=sizes)
    out[kernel] = [trace.keys.tolist(), trace.block_bytes.tolist()]
print(json.dumps(out))
"""
_SMALL = [(str(KERNELS / "gemm.py"), {"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32}, {"M": 96, "N": 64, "K": 64}),
          (str(KERNELS / "elementwise.py"), {"BLOCK": 256}, {"M": 16, "N": 64})]


@pytest.mark.skipif(TRITON36 is None, reason=SKIP_REASON)
def test_tracer_gives_the_same_trace_under_triton36():
    """The GPU image's Triton 3.6 (with NumPy >= 2.4) once failed where 3.9 worked
    (profiling/interpreter_hooks.py says why): the GEMM (a loop over K, so ``tensor.__index__``)
    and the elementwise kernel (loads only) traced in a subprocess under 3.6 give exactly the
    installed Triton's trace."""
    env = env_with_triton36()
    proc = subprocess.run([sys.executable, "-c", _TRACE_SCRIPT, json.dumps(_SMALL)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    under36 = json.loads(proc.stdout.strip().splitlines()[-1])
    assert under36.pop("version").startswith("3.6"), f"{TRITON36} does not hold Triton 3.6"
    for kernel, meta, sizes in _SMALL:
        here = trace_kernel(Path(kernel), meta_overrides=meta, sizes=sizes)
        assert under36[kernel] == [here.keys.tolist(), here.block_bytes.tolist()], kernel
