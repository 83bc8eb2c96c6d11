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


def _stencil(tile: tuple, rows: int, cols: int, size_tile: int = 4, pad: int = 16) -> list:
    """A masked 5-point stencil's accesses for one tile (fp32, rows padded by ``pad`` elements)."""
    pitch = (cols + pad) * 4
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
    """A masked stencil on a ragged 6 x 5 grid of tiles (rows of 128 B: whole granules, where the fit's
    rectangles are exact), fitted from its samples and read whole: the same blocks, bytes, stores and,
    per tile and step, the same accesses in the same order."""
    grid, rows, cols = (6, 5), 22, 18
    fitted = extend({t: _stencil(t, rows, cols, pad=14) for t in sample_tiles(grid)}, grid, 1, "fit",
                    granule_bytes=granule)
    whole = tracer._whole_grid_trace({t: _stencil(t, rows, cols, pad=14) for t in every_tile(grid)}, grid, 1,
                                     "whole", granule)
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


# -- what the review of c54076d found: each test failed there ------------------------------------------

def _sectors(offsets: np.ndarray, itemsize: int) -> set:
    return set(np.unique(np.concatenate([offsets // 32, (offsets + itemsize - 1) // 32])).tolist())


def _synthetic(programs: dict) -> tuple:
    """``programs``: tile -> ``[(site, tensor, byte offsets, itemsize, is_store, tensor bytes, layout)]``;
    returns ``(samples, truth)``: the records ``access_record`` makes of them, and per tile (row-major)
    the ``(tensor, 32 B sector)`` pairs it reads and writes, as ``brute_force`` counts them."""
    samples, truth = {}, []
    for t in sorted(programs):
        records, reads, writes = [], set(), set()
        for site, tensor, offsets, itemsize, store, size, layout in programs[t]:
            offsets = np.unique(np.asarray(offsets, dtype=np.int64))
            records.append(access_record(site, tensor, offsets, itemsize, store, size, layout))
            (writes if store else reads).update((tensor, s) for s in _sectors(offsets, itemsize))
        samples[t], truth = records, truth + [[reads, writes]]
    return samples, truth


def _block(row: int, rows: int, col: int, cols: int, pitch_elems: int, row_step: int = 1) -> np.ndarray:
    r = row + row_step * np.arange(rows)[:, None]
    return ((r * pitch_elems + col + np.arange(cols)[None, :]) * 4).ravel()


@pytest.mark.parametrize("pitch_elems", [25, 24, 32], ids=["rows-of-100B", "rows-of-96B", "rows-of-128B"])
def test_rows_that_do_not_begin_on_a_granule_are_exact(pitch_elems):
    """Each tile loads 4 rows x 16 fp32 of a table at a row from the data: exact at 32 B sectors and
    128 B lines whatever the row stride (a 100 B or 96 B row is not rounded as if it began on a granule)."""
    rows = np.random.default_rng(3).integers(0, 36, 8)
    programs = {(t,): [(10, 0, _block(int(rows[t]), 4, 4, 16, pitch_elems), 4, False, 40 * pitch_elems * 4, None),
                       (11, 1, np.arange(16) * 4 + 64 * t, 4, True, 512, None)] for t in range(8)}
    samples, truth = _synthetic(programs)
    for granule in (32, 128):
        assert_trace_is(extend(samples, (8,), 1, "odd", granule_bytes=granule), truth, granule)


def test_runs_closer_than_a_sector_in_rows_of_a_small_pitch_are_read_whole():
    """fp32 elements at +0, +40 and +84 B (their starts' gcd, 4 B, is the record's pitch: more rows
    than bytes) touch all 3 sectors of their bounds: read as one range, not refused as a gather."""
    where = [3, 0, 2, 1]
    programs = {(t,): [(11, 0, where[t] * 512 + np.array([0, 40, 84]), 4, False, 4096, None),
                       (12, 1, np.arange(4) * 4 + 16 * t, 4, True, 64, None)] for t in range(4)}
    samples, truth = _synthetic(programs)
    assert_trace_is(extend(samples, (4,), 1, "small pitch", granule_bytes=32), truth, 32)


def test_a_wrapped_access_of_a_tensor_whose_other_accesses_set_another_pitch_is_exact():
    """``(r0 + arange(8)) % R`` rows x 16 columns beside loads of every other row (the tensor's
    dominant pitch then twice its row stride): the wrapped access is read as its two parts, exactly."""
    rng, R, ld = np.random.default_rng(2), 40, 256

    def program(t):
        out = [(10 + k, 0, _block(int(rng.integers(0, 30)), 4, 8, 16, ld, 2), 4, False, R * ld * 4, None)
               for k in range(3)]
        rows = (int(rng.integers(34, 40)) + np.arange(8)) % R
        out.append((20, 0, ((rows[:, None] * ld + 16 + np.arange(16)[None, :]) * 4).ravel(), 4, False, R * ld * 4,
                    ((R, ld), (ld, 1))))
        return out + [(30, 1, np.arange(8) * 4 + 32 * t, 4, True, 256, None)]
    samples, truth = _synthetic({(t,): program(t) for t in range(8)})
    for granule in (32, 128):
        trace = extend(samples, (8,), 1, "wrap", granule_bytes=granule)
        assert "every one of the 8 tiles" in trace.source and "8 accesses wrap" in trace.source
        assert_trace_is(trace, truth, granule)


@pytest.mark.parametrize("field", range(18))
def test_a_record_field_the_recorder_never_writes_is_a_one_line_refusal(field):
    """The worker's records are data: a field that is no integer, or far past any memory (2^56 and
    more), or a count of rows no record describes, ends in TraceError, never in another exception or
    a huge allocation (the whole-grid reading reached np.arange over 2^31 rows)."""
    base = [access_record(10, 0, (np.arange(4)[:, None] * 256 + np.arange(8)[None, :]).ravel() * 4, 4, False, 1 << 16),
            access_record(11, 1, np.arange(8) * 4, 4, True, 1024)]
    for value in (1 << 70, -(1 << 60), 3.5, "x", None, float("nan")):
        bad = list(base[0])
        bad[field] = value
        if field == 17 and value is None:
            continue                                    # "not known": a 17-field record's meaning
        samples = {(t,): [tuple(bad) if t == 0 else base[0]] + base[1:] for t in range(3)}
        samples[(1,)] = samples[(1,)] + [base[1]]       # shapes differ: no fit, the whole-grid reading
        with pytest.raises(TraceError):
            extend(samples, (3,), 1, "hostile", granule_bytes=32)
    rows = list(base[0])
    rows[2:4], rows[6:9] = [0, 1 << 31], [1, 0, 1]      # 2^31 rows of 1 B said to hold 128 B
    samples = {(0,): [tuple(rows)] + base[1:], (1,): base + [base[1]], (2,): base}
    with pytest.raises(TraceError, match="rows"):
        extend(samples, (3,), 1, "rows", granule_bytes=32)


_LABEL_GATHER = '''
"""A loss kernel's per-row label, a 4 B gather the fit takes as a block of each tile's own."""
import torch
import triton
import triton.language as tl

from swizzleperf.kernels.spec import KernelSpec


@triton.jit
def swizzle(pid, num_pids):
    tile = pid
    return tile


@triton.jit
def nll_kernel(x_ptr, label_ptr, out_ptr, R, N: tl.constexpr):
    row = swizzle(tl.program_id(axis=0), R)
    x = tl.load(x_ptr + row * N + tl.arange(0, N))
    label = tl.load(label_ptr + row)
    picked = tl.load(x_ptr + row * N + label)
    tl.store(out_ptr + row, tl.log(tl.sum(tl.exp(x), axis=0)) - picked)


def launch(inputs, num_warps=4, num_stages=1):
    R, N = inputs["x"].shape
    nll_kernel[(R,)](inputs["x"], inputs["label"], inputs["out"], R, N=N)


def make_inputs(problem, seed, device="cpu", dtype="float32"):
    g = torch.Generator().manual_seed(seed)
    R, N = problem["R"], problem["N"]
    return {"x": torch.randn(R, N, generator=g), "label": torch.randint(0, N, (R,), generator=g, dtype=torch.int32),
            "out": torch.empty(R)}


def reference(inputs):
    x = inputs["x"].double()
    return torch.logsumexp(x, 1) - x.gather(1, inputs["label"].long()[:, None])[:, 0]


def tile_grid(problem, meta):
    return (problem["R"],)


SPEC = KernelSpec(
    name="nll", kernel_name="nll_kernel", problems={"default": {"R": 256, "N": 64}, "check": {"R": 13, "N": 64}},
    meta={"num_warps": 4, "num_stages": 1}, check_meta={"num_warps": 4, "num_stages": 1},
    make_inputs=make_inputs, launch=launch, reference=reference, output_name="out", tolerance={"float32": 1e-4},
    tile_grid=tile_grid, swizzle_args=tile_grid, flops=lambda p: 0.0, min_bytes=lambda p, dtype: 1.0,
    dtypes=("float32",))
'''


def test_a_kernel_the_fit_traces_at_32_bytes_is_not_recorded_whole(tmp_path):
    """A 4 B label gather is no affine access at a 1 B granule, but a block of each tile's own at 32 B,
    the smallest granule a trace is made at: the worker records the structured samples only (it had
    recorded all 256 programs, for a trace that differed only in its source)."""
    from swizzleperf.agent.verification.verify import run_worker
    path = tmp_path / "nll.py"
    path.write_text(_LABEL_GATHER)
    result = run_worker({"kernel_path": str(path), "stages": ["trace"], "dtype": "float32", "meta_overrides": {},
                         "trace_problem": "default", "problem_sizes": {}}, 300, interpret=True)
    assert result.passed, result.reason
    assert len(result.details["trace"]["tiles"]) == len(sample_tiles((256,)))
    assert "1 data-dependent scalar accesses" in trace_kernel(path, granule_bytes=32).source


def test_the_rest_of_a_launch_is_recorded_in_chunks_and_given_up_past_its_bounds(monkeypatch):
    """Programs whose data make them longer than the sampled ones: recording the rest stops once the
    accesses pass 1.5 times the bound (the trace is then refused as before), and a rest within it
    comes back whole, in order, in chunks."""
    from swizzleperf.agent.verification import worker
    calls = []

    def traced(tiles):
        calls.append(len(tiles))
        return [[("access",)] * 100 for _ in tiles]       # 100 accesses a program
    rest = [(t,) for t in range(600)]
    got = worker._record_rest(traced, rest, 0)
    assert calls == [256, 256, 88] and len(got) == 600
    calls.clear()
    monkeypatch.setattr(tracer, "WHOLE_GRID_MAX_ACCESSES", 30_000)   # 45 000 at 1.5 x: past it in the 2nd chunk
    assert worker._record_rest(traced, rest, 0) is None and calls == [256, 256]
