"""The tracer on the Triton tutorial GEMM's idioms (issue #24): ``% M`` / ``% N`` wrap-around
offsets on ragged tiles (and the persistent tutorial's ``tl.where(offs < M, offs, 0)``), the
``tl.max_contiguous`` / ``tl.multiple_of`` hints and ``tl.assume`` of the example's kernel, masks on K. A wrapped access is recognised when recorded (the tensor's
layout at hand), fitted with its wrapped part moved past the tensor's edge, and folded back; the
captured tutorial GEMM then traces sector for sector as a brute-force trace of all its programs,
and the simulator ranks orders on it (no "every order predicts the same")."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from swizzleperf import hwspecs
from swizzleperf.agent.capture import user_kernel
from swizzleperf.agent.capture.capture import TRACE_FALLBACK
from swizzleperf.agent.capture.lift import target_order
from swizzleperf.agent.verification.simulate import trace_kernel
from swizzleperf.agent.verification.swizzles import catalog_source
from swizzleperf.profiling import l2sim
from swizzleperf.profiling.tracer import TraceError, access_record, extend, sample_tiles

from brute_trace import assert_trace_is, brute_force

APP = Path(__file__).resolve().parents[1] / "helpers" / "apps" / "tutorial_gemm_ragged" / "app.py"


def _offsets(rows, cols, pitch_elems: int, itemsize: int = 4) -> np.ndarray:
    return np.unique((np.asarray(rows)[:, None] * pitch_elems + np.asarray(cols)[None, :]).ravel() * itemsize)


@pytest.mark.parametrize("rows, cols, expected", [
    # A [100, 64] fp32, the last tile of 32 rows: rows 96..99 and 0..27 (`% M`), K columns 0..31
    (list(range(96, 100)) + list(range(28)), range(32), (1, 100, 96 * 256, 127 * 256 + 128, 256, 0, 128)),
    # B [64, 80] fp32, the last tile of 32 columns: columns 64..79 and 0..15 (`% N`), rows 0..15
    (range(16), list(range(64, 80)) + list(range(16)), (2, 320, 256, 15 * 320 + 384, 320, 256, 384)),
    # no wrap: an interior tile, a masked edge tile, and two separate runs that do not touch both edges
    (range(32, 64), range(32), (0,) * 7),
    (range(96, 100), range(32), (0,) * 7),
    (list(range(0, 4)) + list(range(50, 60)), range(32), (0,) * 7),
])
def test_a_wrap_around_access_is_recognised_with_its_virtual_form(rows, cols, expected):
    shape = (100, 64) if expected[0] != 2 else (64, 80)
    pitch = shape[1]
    record = access_record(7, 0, _offsets(rows, cols, pitch), 4, False, shape[0] * shape[1] * 4,
                           layout=(shape, (pitch, 1)))
    assert record[10:17] == expected
    assert record[:2] == (7, 0) and record[4] == len(rows) * len(list(cols)) * 4


def test_a_vector_wraps_as_a_byte_range():
    record = access_record(3, 0, np.array([36, 37, 38, 39, 0, 1, 2]) * 2, 2, True, 80, layout=((40,), (1,)))
    assert record[10:17] == (2, 80, 72, 86, 0, 0, 0)


def _wrapped_gemm(tile: tuple, wrap: str = "%", m_rows: int = 100, k: int = 64, block: int = 32) -> list:
    """The A load of tile (m, n) of a tutorial-style GEMM ([m_rows, k] fp32, one K step) whose
    rows past M wrap (``%``: ``offs % M``, the Triton tutorial 03's) or go to row 0 (``where``:
    ``tl.where(offs < M, offs, 0)``, the persistent tutorial's), and the store of C [m_rows, 96]
    masked at M."""
    m, n = tile
    rows = [(m * block + i) % m_rows if wrap == "%" else (m * block + i if m * block + i < m_rows else 0)
            for i in range(block)]
    a = access_record(10, 0, _offsets(rows, range(k), k), 4, False, m_rows * k * 4, layout=((m_rows, k), (k, 1)))
    stored = [r for r in range(m * block, m * block + block) if r < m_rows]
    c = access_record(12, 1, _offsets(stored, range(n * block, n * block + block), 96), 4, True, m_rows * 96 * 4,
                      layout=((m_rows, 96), (96, 1)))
    return [a, c]


@pytest.mark.parametrize("wrap, wrapped_rows", [("%", 28), ("where", 1)])
def test_the_wrapped_part_is_folded_back_to_the_tensors_start(wrap, wrapped_rows):
    grid = (4, 3)
    trace = extend({t: _wrapped_gemm(t, wrap) for t in sample_tiles(grid)}, grid, 1, "test", granule_bytes=32)
    assert "1 accesses wrap around their tensor's edge" in trace.source
    reads = [set(trace.keys[t][~trace.writes()[t] & (trace.keys[t] >= 0)].tolist()) for t in range(12)]
    # tile (3, n) reads rows 96..99 and wraps to rows 0..27 (%) or row 0 (where), which tile (0, n)
    # reads too: rows of 256 B
    assert trace.block_bytes[sorted(reads[9] & reads[0])].sum() == wrapped_rows * 256
    assert trace.block_bytes[sorted(reads[9])].sum() == (4 + wrapped_rows) * 256
    assert not reads[9] & reads[3] and trace.block_bytes[sorted(reads[3])].sum() == 32 * 256


@pytest.fixture(scope="module")
def tutorial_gemm(tmp_path_factory):
    """The tutorial GEMM captured at 200 x 200 x 80 (49 programs, ragged in M, N and K)."""
    return user_kernel.prepare(f"TRITON_INTERPRET=1 {sys.executable} {APP}", "matmul_kernel",
                               tmp_path_factory.mktemp("work"))


def test_the_tutorial_gemm_traces_sector_for_sector_as_all_its_programs(tutorial_gemm):
    """Rows of 320 and 800 B are whole 32 B sectors, so the extension must equal the brute force
    exactly: every tile's sectors read and written, and every two tiles' shared sectors (the `% M`
    and `% N` wraps make the last tile row share with the first)."""
    trace = trace_kernel(tutorial_gemm.module_path, granule_bytes=32)
    assert "accesses wrap around their tensor's edge" in trace.source
    _equals_brute_force(tutorial_gemm, trace)


def test_a_3d_grid_whose_program_ids_are_remapped_traces_as_all_its_programs(tmp_path):
    """The batched GEMM example (a 2 x 3 x 3 launch; its program ids remapped, axes 1 and 2 merged
    into the second tile coordinate) is fitted in the launch's own three coordinates."""
    app = Path(__file__).resolve().parents[2] / "examples" / "user_kernels" / "batched_gemm_3d" / "app.py"
    prepared = user_kernel.prepare(f"TRITON_INTERPRET=1 {sys.executable} {app}", "bmm_kernel", tmp_path)
    assert prepared.lifted.kind == "remapped" and prepared.lifted.coordinate_splits == {1: 3}
    spec = load_spec_of(prepared)
    trace = spec.trace(spec.problems["default"], spec.meta_for("default"), granule_bytes=32)
    assert "traced from" in trace.source and not (prepared.capture.folder / TRACE_FALLBACK).exists()
    _equals_brute_force(prepared, trace)


def _equals_brute_force(prepared, trace) -> None:
    """Every tile of ``trace`` (32 B sectors) reads, writes and shares exactly the sectors a
    brute-force trace of all the captured launch's programs finds."""
    folder = prepared.capture.folder
    programs = trace.num_tiles
    per_program = brute_force(prepared.module_path, programs=programs)
    lift = json.loads((folder / "lift.json").read_text())
    grid = tuple(lift["tile_grid"])
    tiles = target_order(prepared.lifted.target_source, tuple(lift["arg_values"]), programs)
    truth = [None] * programs
    for program, tile in enumerate(tiles):
        truth[int(np.ravel_multi_index(tuple(tile), grid))] = per_program[program]
    assert_trace_is(trace, truth, 32)


def test_the_tutorial_gemms_cpu_run_ranks_orders(tutorial_gemm):
    """The captured launch's own trace (no fallback), and the simulator for the CPU run's default
    target (MI300X: program p on XCD p % 8) tells catalog orders apart."""
    spec = load_spec_of(tutorial_gemm)
    trace = spec.trace(spec.problems["default"], spec.meta_for("default"))
    assert not (tutorial_gemm.capture.folder / TRACE_FALLBACK).exists() and "traced from" in trace.source
    hardware = hwspecs.load_spec("mi300x")
    lifted = tutorial_gemm.lifted
    rates = {}
    for name in ("row-major", "column-major", "grouped-m:2", "grouped-m:4", "xcd-contiguous:8"):
        order = target_order(catalog_source(name, lifted.arg_names), lifted.arg_values, trace.num_tiles)
        rates[name] = l2sim.simulate(trace, l2sim.order_from_tiles(order, lifted.tile_grid), hardware).l2_hit_rate
    assert len({round(r, 6) for r in rates.values()}) >= 3, rates
    assert rates["grouped-m:4"] > rates["row-major"] and rates["xcd-contiguous:8"] > rates["row-major"], rates


def load_spec_of(prepared):
    from swizzleperf.agent.verification.load import load_spec
    return load_spec(prepared.module_path)


def _with_label(tile: tuple, label_offset: int) -> list:
    """A row-per-tile loss kernel's accesses: the row of a [12, 64] fp32 array (affine), then one
    element of it at a data-dependent column (the label), then the row's loss."""
    (row,) = tile
    logits = access_record(20, 0, np.arange(64) * 4 + row * 256, 4, False, 12 * 256)
    label = access_record(21, 0, np.array([row * 256 + label_offset * 4]), 4, False, 12 * 256)
    loss = access_record(22, 1, np.array([row * 4]), 4, True, 48)
    return [logits, label, loss]


def test_a_scalar_gather_gets_a_block_of_each_tiles_own_and_a_wide_one_still_refuses():
    grid = (12,)
    labels = {t: (7 * t[0] * t[0] + 3) % 64 for t in sample_tiles(grid)}   # no affine map gives these
    trace = extend({t: _with_label(t, labels[t]) for t in sample_tiles(grid)}, grid, 1, "test", granule_bytes=32)
    assert "1 data-dependent scalar accesses counted as a block of each tile's own" in trace.source
    # per 32 B sector: each row's 256 B, a label sector of each tile's own, the 48 B of loss in 2 sectors
    assert trace.footprint_bytes() == 12 * 256 + 12 * 32 + 64
    users = {}
    for t in range(12):
        for key in set(trace.keys[t].ravel().tolist()) - {-1}:
            users.setdefault(key, set()).add(t)
    own = [k for k, u in users.items() if len(u) == 1]
    assert sorted(trace.block_bytes[own].tolist()) == [32] * 12 + [256] * 12   # a row and a label a tile
    wide = {t: [a if a[0] != 21 else access_record(21, 0, np.arange(8) * 4 + t[0] * 256 + labels[t] * 4 % 128, 4,
                                                    False, 12 * 256) for a in _with_label(t, 0)]
            for t in sample_tiles(grid)}
    with pytest.raises(TraceError, match="line 21"):   # 32 B a tile: no scalar, refused as before
        extend(wide, grid, 1, "test", granule_bytes=32)
