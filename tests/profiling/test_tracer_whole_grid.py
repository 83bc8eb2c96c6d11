"""The tracer's whole-grid reading (profiling/tracer.py, ``WHOLE_GRID_*``): a small launch that no
fit from samples extends (addresses that depend on the data, steps that differ by tile) is recorded
whole by the worker and read as recorded; checked against every program's real accesses."""
import numpy as np
import pytest

from swizzleperf.agent.verification.simulate import SimulateError, trace_kernel
from swizzleperf.profiling import tracer
from swizzleperf.profiling.tracer import TraceError, access_record, every_tile, extend, sample_tiles

from brute_trace import assert_trace_is, brute_force
from test_tracer_edges import _GATHER, KERNELS


_SEGMENTS = '''
"""Each program sums a data-dependent number of blocks of a data-dependent row of a table (a LoRA
kernel's adapter index, an attention kernel's sequence length): for the tracer's tests."""
import numpy as np
import torch
import triton
import triton.language as tl

from swizzleperf.kernels.spec import KernelSpec


@triton.jit
def swizzle(pid, num_pids):
    tile = pid
    return tile


@triton.jit
def segment_kernel(idx_ptr, len_ptr, table_ptr, out_ptr, P, ROW: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(axis=0)
    tile = swizzle(pid, P)
    row = tl.load(idx_ptr + tile)
    n = tl.load(len_ptr + tile)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for k in range(0, n):
        acc += tl.load(table_ptr + row * ROW + k * BLOCK + tl.arange(0, BLOCK))
    tl.store(out_ptr + tile * BLOCK + tl.arange(0, BLOCK), acc)


def launch(inputs, BLOCK, num_warps=4, num_stages=1):
    P = inputs["idx"].numel()
    segment_kernel[(P,)](inputs["idx"], inputs["lens"], inputs["table"], inputs["out"], P,
                         ROW=inputs["table"].shape[1], BLOCK=BLOCK)


def make_inputs(problem, seed, device="cpu", dtype="float32"):
    rng = np.random.default_rng(7)
    P, R, ROW, BLOCK = problem["P"], problem["R"], problem["ROW"], 32
    idx = torch.from_numpy(rng.integers(0, R, P).astype(np.int32)).to(device)
    lens = torch.from_numpy(rng.integers(1, ROW // BLOCK + 1, P).astype(np.int32)).to(device)
    table = torch.randn(R, ROW, generator=torch.Generator(device=device).manual_seed(seed), device=device)
    return {"idx": idx, "lens": lens, "table": table.to(getattr(torch, dtype)), "out": torch.empty(P, BLOCK, device=device)}


def reference(inputs):
    rows = inputs["table"].double()[inputs["idx"].long()].reshape(inputs["idx"].numel(), -1, 32)
    keep = torch.arange(rows.shape[1])[None, :] < inputs["lens"].long()[:, None]
    return (rows * keep[:, :, None]).sum(dim=1)


def tile_grid(problem, meta):
    return (problem["P"],)


SPEC = KernelSpec(
    name="segments", kernel_name="segment_kernel",
    problems={"default": {"P": 24, "R": 10, "ROW": 256}, "check": {"P": 13, "R": 5, "ROW": 256}},
    meta={"BLOCK": 32, "num_warps": 4, "num_stages": 1},
    check_meta={"BLOCK": 32, "num_warps": 4, "num_stages": 1},
    make_inputs=make_inputs, launch=launch, reference=reference,
    output_name="out", tolerance={"float32": 1e-5}, tile_grid=tile_grid, swizzle_args=tile_grid,
    flops=lambda p: 0.0, min_bytes=lambda p, dtype: 4.0 * p["P"] * p["ROW"], dtypes=("float32",),
)
'''


def test_data_dependent_rows_and_steps_are_traced_whole_as_the_programs_ran(tmp_path):
    """24 programs, each summing a random number of blocks of a random row of a table (no fit from
    samples: the row and the steps come from the data): every tile's sectors and every two tiles'
    shared sectors as a brute-force trace of all programs finds them, at 32 B sectors and 128 B lines;
    the steps differ by tile."""
    path = tmp_path / "segments.py"
    path.write_text(_SEGMENTS)
    truth = brute_force(path)
    for granule in (32, 128):
        trace = trace_kernel(path, granule_bytes=granule)
        assert "every one of the 24 tiles traced" in trace.source, trace.source
        assert_trace_is(trace, truth, granule)
    steps = {int(((trace.keys[t] >= 0).any(axis=1)).sum()) for t in range(trace.num_tiles)}
    assert len(steps) > 1, steps


def test_a_scattered_gather_is_refused_whole_naming_its_load(tmp_path):
    """A gather through a random permutation, 16 programs: its records keep only their bounds, so the
    whole-grid reading refuses it, naming the load, its tile and the sectors."""
    path = tmp_path / "gather.py"
    path.write_text(_GATHER)
    line = next(i for i, text in enumerate(_GATHER.splitlines(), 1) if "tl.load(x_ptr + idx" in text)
    with pytest.raises(SimulateError, match=rf"the load at line {line} of tile \d+ touches \d+ sectors of 32 B "
                                            r"scattered within the \d+ its record bounds.*cannot trace it whole"):
        trace_kernel(path)


def _stencil(tile: tuple, rows: int, cols: int, size_tile: int = 4) -> list:
    """A masked 5-point stencil's accesses for one tile (fp32, rows padded by 16 elements)."""
    pitch = (cols + 16) * 4
    size = rows * pitch
    r = tile[0] * size_tile + np.arange(size_tile)[:, None]
    c = tile[1] * size_tile + np.arange(size_tile)[None, :]
    inside = (r < rows) & (c < cols)
    out = []
    for site, (dr, dc) in zip(range(10, 15), [(0, 0), (-1, 0), (1, 0), (0, -1), (0, 1)]):
        keep = inside & (r + dr >= 0) & (r + dr < rows) & (c + dc >= 0) & (c + dc < cols)
        out.append(access_record(site, 0, np.unique(((r + dr) * pitch + (c + dc) * 4)[keep]), 4, False, size))
    out.append(access_record(15, 1, np.unique((r * pitch + c * 4)[inside]), 4, True, size))
    return out


def _steps(trace, t: int) -> list:
    return [[int(k) for k in row if k >= 0] for row in trace.keys[t]]


@pytest.mark.parametrize("granule", [1, 32, 128])
def test_where_a_fit_holds_the_whole_grid_reading_is_the_same_trace(granule):
    """A masked stencil on a ragged 6 x 5 grid of tiles, fitted from its samples and read whole:
    the same blocks, bytes, stores and, per tile and step, the same accesses in the same order."""
    grid, rows, cols = (6, 5), 22, 18
    fitted = extend({t: _stencil(t, rows, cols) for t in sample_tiles(grid)}, grid, 1, "fit", granule_bytes=granule)
    whole = tracer._whole_grid_trace({t: _stencil(t, rows, cols) for t in every_tile(grid)}, grid, 1, "whole",
                                     granule)
    assert np.array_equal(fitted.block_bytes, whole.block_bytes)
    assert np.array_equal(fitted.block_is_write, whole.block_is_write)
    for t in range(fitted.num_tiles):
        assert _steps(fitted, t) == _steps(whole, t), t
    assert "every one of the 30 tiles traced" in whole.source


def test_extend_reads_the_whole_grid_only_where_no_fit_holds_and_every_tile_is_there():
    """Addresses from a table (no affine map): refused from samples, read whole from every tile;
    a fit that holds is kept even where every tile was recorded (its source says so)."""
    grid = (3, 4)
    table = np.random.default_rng(5).permutation(64)

    def gather(t):
        start = int(table[t[0] * 4 + t[1]]) * 256
        return [access_record(7, 0, np.arange(start, start + 256, 4), 4, False, 64 * 256),
                access_record(8, 1, np.arange(64) * 4 + (t[0] * 4 + t[1]) * 256, 4, True, 12 * 256)]
    partial = {t: gather(t) for t in sample_tiles(grid)[:6]}
    with pytest.raises(TraceError, match="line 7"):
        extend(partial, grid, 1, "partial")
    whole = extend({t: gather(t) for t in every_tile(grid)}, grid, 1, "whole")
    assert "every one of the 12 tiles traced" in whole.source
    reads = [sorted(set(whole.keys[t][~whole.writes()[t] & (whole.keys[t] >= 0)].tolist())) for t in range(12)]
    assert all(whole.block_bytes[r].sum() == 256 for r in reads)
    assert len({tuple(r) for r in reads}) == 12           # each tile its own rows of the table
    fitted = extend({t: _stencil(t, 12, 16) for t in every_tile(grid)}, grid, 1, "all sampled")
    assert "every one of" not in fitted.source


def test_ragged_steps_and_call_sites_keep_each_tiles_own_accesses():
    """Tiles that loop a different number of times, through different call sites: each tile's steps
    are its own (a step ends where a call site repeats), padded where it has fewer."""
    grid = (4,)

    def program(t):
        loads = [access_record(20 + (t % 2), 0, np.arange(64) * 4 + 256 * k, 4, False, 4096) for k in range(t + 1)]
        return loads + [access_record(30, 1, np.arange(16) * 4 + 64 * t, 4, True, 256)]
    whole = extend({(t,): program(t) for t in range(4)}, grid, 1, "ragged", granule_bytes=1)
    steps = [len([row for row in _steps(whole, t) if row]) for t in range(4)]
    assert steps == [1, 2, 3, 4]
    # tile t reads bytes [0, 256 (t + 1)) of tensor 0: tile 3's reads cover every other tile's
    blocks = [set(k for row in _steps(whole, t) for k in row) for t in range(4)]
    assert all(blocks[t] - blocks[3] == {b for b in blocks[t] if whole.block_is_write[b]} for t in range(3))


def test_the_worker_records_a_launch_whole_only_within_its_bounds():
    """``whole_grid_affordable``: at most WHOLE_GRID_MAX_TILES tiles, WHOLE_GRID_MAX_ACCESSES accesses
    and WHOLE_GRID_BUDGET_S seconds for the rest, each at the samples' pace."""
    ok = tracer.whole_grid_affordable
    assert ok((64, 2), 12, 12 * 40, 1.2)
    assert not ok((tracer.WHOLE_GRID_MAX_TILES + 1,), 12, 12, 0.01)
    assert not ok((1000,), 10, 10 * (tracer.WHOLE_GRID_MAX_ACCESSES // 1000 + 1), 0.01)
    assert not ok((1000,), 10, 10, 10 * tracer.WHOLE_GRID_BUDGET_S / 990 * 1.01)
    assert not ok((10,), 0, 0, 0.0)


def test_samples_that_do_not_cover_the_grid_are_not_read_whole():
    grid = (2, 3)
    assert tracer.covers_grid({t: [] for t in every_tile(grid)}, grid)
    assert not tracer.covers_grid({t: [] for t in every_tile(grid)[:-1]}, grid)
    assert not tracer.covers_grid({**{t: [] for t in every_tile(grid)[:-1]}, (2, 0): []}, grid)
    assert not tracer.covers_grid({("a", 0): []}, (1, 1))


def test_an_access_missing_a_few_sectors_is_read_as_its_bounds_and_counted():
    """A masked load that drops one 32 B sector of its 16 (a random mask, mostly true) is read as its
    bounds and counted in the source; one that drops 7 of them is refused, naming line and tile."""
    grid, where = (4,), [2, 0, 3, 1]                     # each tile's block from a table: no fit holds

    def program(t, dropped):
        offsets = np.arange(128) * 4 + where[t] * 512
        keep = ~np.isin((offsets // 32) % 16, dropped)  # sectors of the 16 skipped (never the first or last)
        return [access_record(11, 0, offsets[keep], 4, False, 2048),
                access_record(12, 1, np.arange(4) * 4 + 16 * t, 4, True, 64)]
    few = extend({(t,): program(t, [5])[:1] + [access_record(13, 0, np.array([0]), 4, False, 2048)]
                  + program(t, [5])[1:] for t in range(4)}, grid, 1, "few", granule_bytes=32)
    assert "4 accesses that skip a few sectors" in few.source and "every one of the 4 tiles" in few.source
    reads = few.keys[0][~few.writes()[0] & (few.keys[0] >= 0)]
    assert few.block_bytes[np.unique(reads)].sum() == 512 + 32   # its bounds (its whole 512 B) and line 13's
    with pytest.raises(TraceError, match="the load at line 11 of tile 0 touches 9 sectors of 32 B scattered "
                                         "within the 16 its record bounds"):
        extend({(t,): program(t, [2, 4, 6, 8, 10, 12, 14])[:1] + [access_record(13, 0, np.array([0]), 4, False, 2048)]
                + program(t, [2, 4, 6, 8, 10, 12, 14])[1:] for t in range(4)}, grid, 1, "many", granule_bytes=32)
