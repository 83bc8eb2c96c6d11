"""The generic tracer at masked edges and at L2-line granularity (issue #15): stencils whose
shifted loads are masked at the domain's edges trace, and every tile's lines agree with a
brute-force trace of all programs; tiles that share 128 B lines but not byte ranges reuse each
other's data; data-dependent kernels and too-small grids are refused, naming the access."""
from pathlib import Path

import numpy as np
import pytest

from swizzleperf.agent.verification.load import load_kernel
from swizzleperf.agent.verification.simulate import SimulateError, trace_kernel
from swizzleperf.agent.verification.verify import run_worker
from swizzleperf.hwspecs import HardwareSpec
from swizzleperf.profiling import l2sim
from swizzleperf.profiling import tracer
from swizzleperf.profiling.tracer import TraceError, access_record, extend, sample_tiles

from brute_trace import assert_trace_is, brute_force

KERNELS = Path(__file__).resolve().parents[2] / "kernels"


def _recorded(path: Path, meta: dict, sizes: dict) -> tuple:
    """``(samples, grid)``: the worker's trace stage at the default problem with ``sizes``, as
    ``agent.simulate.trace_kernel`` runs it, before the extension."""
    _, spec = load_kernel(path)
    result = run_worker({"kernel_path": str(path), "stages": ["trace"], "dtype": spec.dtypes[0],
                         "meta_overrides": meta, "trace_problem": "default", "problem_sizes": sizes},
                        300, interpret=True)
    assert result.passed, result.reason
    recorded = result.details["trace"]
    return {tuple(t): a for t, a in zip(recorded["tiles"], recorded["accesses"])}, tuple(recorded["grid"])


@pytest.mark.parametrize("kernel, meta, sizes", [
    # 72 x 160 fp32 (rows of 640 B = 5 lines), 16 x 64 tiles: a 5 x 3 grid, ragged in both
    # dimensions (72 = 4 * 16 + 8 rows, 160 = 2 * 64 + 32 columns).
    ("stencil2d", {"BLOCK_M": 16, "BLOCK_N": 64}, {"M": 72, "N": 160}),
    # 36 x 224 fp32 (rows of 896 B = 7 lines), 8 x 64 tiles: a 5 x 4 grid, ragged in both.
    ("fdtd2d", {"BLOCK_M": 8, "BLOCK_N": 64}, {"NX": 36, "NY": 224}),
])
def test_masked_stencils_trace_as_a_brute_force_trace(kernel, meta, sizes):
    """The masked halo loads trace, and at 128 B lines and at 32 B sectors every tile reads and
    writes exactly the granules a brute-force trace of all its program's addresses finds, and
    every two tiles share exactly the granules they really share (edge tiles included)."""
    path = KERNELS / f"{kernel}.py"
    samples, grid = _recorded(path, meta, sizes)
    brute = brute_force(path, sizes, meta)
    assert len(brute) == int(np.prod(grid))
    for granule in (128, 32):
        assert_trace_is(extend(samples, grid, 1, "test", granule_bytes=granule), brute, granule)


def _one_cache(l2_bytes: int) -> HardwareSpec:
    """One L2 of ``l2_bytes``, one compute unit running one program at a time, no L1."""
    return HardwareSpec(
        name="toy", display_name="toy", vendor="test", arch="test", compute_units=1, l2_domains=1,
        l2_partitions=1, l2_bytes_per_domain=l2_bytes, l2_line_bytes=128, l2_sector_bytes=32,
        l2_associativity=None, llc_bytes=0, dram_bytes_per_s=1e12, peak_bf16_flops=1e15,
        shared_memory_per_cu_bytes=0, l1_bytes_per_cu=0, dispatch="in_order", domain_miss_path="memory")


def test_tiles_sharing_lines_reuse_them():
    """32 x 32 16-bit tiles of the transpose (x 256 x 128: rows of 256 B): each tile row is 64 B,
    half a line, and tiles (i, 2k), (i, 2k+1) read the same 32 lines. Row-major runs them one
    after the other: the second finds all 32 lines (4 KiB) in a 16 KiB L2, half of all reads hit.
    Grouped-m:8 (here column-major) runs 7 tiles (28 KiB of x and 12 KiB of out) in between:
    none. Keyed by byte ranges (the tracer before, granule 1) or by 32 B sectors (the two 64 B
    halves share none), nothing is shared under either order."""
    samples, grid = _recorded(KERNELS / "transpose.py", {"BLOCK_M": 32, "BLOCK_N": 32}, {"M": 256, "N": 128})
    assert grid == (8, 4)
    row_major = np.arange(32)
    grouped = (np.arange(32) % 8) * 4 + np.arange(32) // 8   # program p -> tile (p % 8, p // 8)
    hw = _one_cache(16 * 1024)
    rates = {g: [l2sim.simulate(extend(samples, grid, 1, "test", granule_bytes=g), order, hw).l2_hit_rate
                 for order in (row_major, grouped)] for g in (1, 32, 128)}
    assert rates[128] == [pytest.approx(0.5), 0.0]
    assert rates[1] == [0.0, 0.0] and rates[32] == [0.0, 0.0]


_GATHER = '''
"""A gather: y[i] = x[idx[i]] with idx a fixed random permutation (for the tracer's tests)."""
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
def gather_kernel(idx_ptr, x_ptr, y_ptr, N, BLOCK: tl.constexpr):
    pid = tl.program_id(axis=0)
    tile = swizzle(pid, tl.cdiv(N, BLOCK))
    offs = tile * BLOCK + tl.arange(0, BLOCK)
    mask = offs < N
    idx = tl.load(idx_ptr + offs, mask=mask, other=0)
    value = tl.load(x_ptr + idx, mask=mask, other=0.0)
    tl.store(y_ptr + offs, value, mask=mask)


def launch(inputs, BLOCK, num_warps=4, num_stages=1):
    N = inputs["x"].numel()
    gather_kernel[(triton.cdiv(N, BLOCK),)](inputs["idx"], inputs["x"], inputs["y"], N, BLOCK=BLOCK)


def make_inputs(problem, seed, device="cpu", dtype="float32"):
    N = problem["N"]
    idx = torch.from_numpy(np.random.default_rng(0).permutation(N).astype(np.int32)).to(device)
    x = torch.randn(N, generator=torch.Generator(device=device).manual_seed(seed), device=device)
    return {"idx": idx, "x": x.to(getattr(torch, dtype)), "y": torch.empty(N, device=device)}


def tile_grid(problem, meta):
    return (triton.cdiv(problem["N"], meta["BLOCK"]),)


SPEC = KernelSpec(
    name="gather", kernel_name="gather_kernel",
    problems={"default": {"N": 4096}, "check": {"N": 700}},
    meta={"BLOCK": 256, "num_warps": 4, "num_stages": 1},
    check_meta={"BLOCK": 64, "num_warps": 4, "num_stages": 1},
    make_inputs=make_inputs, launch=launch, reference=lambda inputs: inputs["x"][inputs["idx"].long()].double(),
    output_name="y", tolerance={"float32": 1e-6}, tile_grid=tile_grid, swizzle_args=tile_grid,
    flops=lambda p: 0.0, min_bytes=lambda p, dtype: 12.0 * p["N"], dtypes=("float32",),
)
'''


def test_a_data_dependent_gather_too_large_to_trace_whole_is_refused(tmp_path):
    """Same control flow in every program, addresses from loaded data, on more tiles than the worker
    traces whole (tracer.WHOLE_GRID_MAX_TILES): refused, naming the load."""
    path = tmp_path / "gather.py"
    path.write_text(_GATHER)
    gather_line = next(i for i, line in enumerate(_GATHER.splitlines(), 1) if "tl.load(x_ptr + idx" in line)
    with pytest.raises(SimulateError, match=rf"load at line {gather_line} of the kernel\): its address is "
                                            r"not an affine function.*data-dependent addressing"):
        trace_kernel(path, sizes={"N": 256 * (tracer.WHOLE_GRID_MAX_TILES + 1)})


def _stencil_samples(grid: tuple, masked: bool, tile: int = 4, rows: int = None, cols: int = None,
                     origin: int = 0) -> dict:
    """Synthetic samples of a 5-point stencil over an fp32 tensor of ``rows x cols`` (default:
    the grid's tiles x ``tile``), tiles of ``tile x tile`` from row and column ``origin`` on: the
    centre load (line 10), the loads shifted up, down, left and right (lines 11-14), masked to
    the domain where ``masked`` (else not at all), and the store (line 15). Rows are padded to
    ``cols + 16`` elements (64 B more than the domain: the recorder merges gaps under 32 B, and
    the masks, not the tensor's end, clip the columns)."""
    rows, cols = rows or grid[0] * tile, cols or grid[1] * tile
    pitch = (cols + 16) * 4
    size = rows * pitch
    out = {}
    for t in sample_tiles(grid):
        r = origin + t[0] * tile + np.arange(tile)[:, None]
        c = origin + t[1] * tile + np.arange(tile)[None, :]
        inside = (r < rows) & (c < cols)
        accesses = []
        for site, (dr, dc) in zip(range(10, 15), [(0, 0), (-1, 0), (1, 0), (0, -1), (0, 1)]):
            keep = inside & (((r + dr >= 0) & (r + dr < rows) & (c + dc >= 0) & (c + dc < cols)) | (not masked))
            offsets = np.unique(((r + dr) * pitch + (c + dc) * 4)[keep])
            accesses.append(access_record(site, 0, offsets, 4, False, size))
        accesses.append(access_record(15, 1, np.unique((r * pitch + c * 4)[inside]), 4, True, size))
        out[t] = accesses
    return out


def test_small_grids_fall_back_to_the_exact_fit():
    """A 2 x 2 grid has no tile off its edges: the exact fit over all (here: all four) tiles
    traces an unmasked stencil and a masked one (along an axis of two tiles any function is
    affine); an access no affine map gives is read as recorded, every tile having been traced
    (profiling/tracer.py, "Whole grids")."""
    trace = extend(_stencil_samples((2, 2), masked=False, rows=64, cols=64, origin=4), (2, 2), 1, "test", granule_bytes=4)
    assert trace.num_tiles == 4
    trace = extend(_stencil_samples((2, 2), masked=True), (2, 2), 1, "test", granule_bytes=4)
    reads = ~trace.writes()[0] & (trace.keys[0] >= 0)
    assert trace.block_bytes[np.unique(trace.keys[0][reads])].sum() == (16 + 4 + 4) * 4  # tile + 2 halos
    samples = _stencil_samples((2, 2), masked=True)
    last = list(samples[(1, 1)])
    last[1] = access_record(11, 0, np.array([0, 40]), 4, False, 8 * 24 * 4)  # a gathered "up" load
    samples[(1, 1)] = last
    trace = extend(samples, (2, 2), 1, "test", granule_bytes=32)
    assert "every one of the 4 tiles traced" in trace.source
    reads = ~trace.writes()[3] & (trace.keys[3] >= 0)
    assert trace.block_bytes[np.unique(trace.keys[3][reads])].sum() % 32 == 0


def test_masked_edges_are_clipped_on_any_grid_of_three_tiles_or_more():
    """Masked stencils trace on 3 x 3 and larger grids, ragged or not: every tile's bytes (at
    4 B granules, the elements) are those of its clipped tile and halo counted by hand."""
    for grid, rows, cols in (((3, 3), 12, 12), ((5, 4), 18, 14), ((3, 7), 12, 26)):
        trace = extend(_stencil_samples(grid, masked=True, rows=rows, cols=cols), grid, 1, "test", granule_bytes=4)
        for m in range(grid[0]):
            for n in range(grid[1]):
                h, w = min(4, rows - 4 * m), min(4, cols - 4 * n)
                halo = (m > 0) * w + (4 * m + h < rows) * w + (n > 0) * h + (4 * n + w < cols) * h
                keys = trace.keys[m * grid[1] + n]
                writes = trace.writes()[m * grid[1] + n]
                assert trace.block_bytes[np.unique(keys[(keys >= 0) & ~writes])].sum() == (h * w + halo) * 4
                assert trace.block_bytes[np.unique(keys[writes])].sum() == h * w * 4


def test_an_edge_that_breaks_the_clipped_prediction_is_refused():
    """An edge tile that touches less than the affine map predicts, where no mask consistent with
    the other tiles would clip it (here: the first tile's centre load skips its first column,
    which tile (1, 0) below it reads), is refused, naming a tile and both rectangles."""
    samples = _stencil_samples((5, 5), masked=True)
    first = list(samples[(0, 0)])
    rows, cols = np.arange(4)[:, None], np.arange(1, 4)[None, :]
    first[0] = access_record(10, 0, np.unique(rows * 144 + cols * 4), 4, False, 20 * 144)
    samples[(0, 0)] = first
    with pytest.raises(TraceError, match=r"line 10 .*not one clipped consistently at the edges: "
                                         r"tile \(1, 0\) touches rows \[4, 8\) x bytes \[0, 16\) where the "
                                         r"affine map clipped to the tensor and the edges gives rows \[4, 8\) "
                                         r"x bytes \[4, 16\)"):
        extend(samples, (5, 5), 1, "test")


_DIGITS = '''
"""A batched GEMM-like kernel on a (tiles, batches) tile grid whose tile coordinate t it splits into
digits itself (pid_m = t // num_n, pid_n = t % num_n), as operators do (for the tracer's tests)."""
import torch
import triton
import triton.language as tl

from swizzleperf.kernels.spec import KernelSpec


@triton.jit
def swizzle(pid, num_tiles, batches):
    """Program ``pid`` -> tile ``(t, batch)`` of the (tiles, batches) grid, row-major."""
    return pid // batches, pid % batches


@triton.jit
def digits_kernel(a_ptr, b_ptr, c_ptr, B, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    num_n = tl.cdiv(N, BN)
    t, batch = swizzle(tl.program_id(0), tl.cdiv(M, BM) * num_n, B)
    pid_m, pid_n = t // num_n, t % num_n
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + batch * M * K + rm[:, None] * K + (k + rk)[None, :], mask=(rm[:, None] < M), other=0.0)
        b = tl.load(b_ptr + batch * K * N + (k + rk)[:, None] * N + rn[None, :], mask=(rn[None, :] < N), other=0.0)
        acc += tl.dot(a, b)
    tl.store(c_ptr + batch * M * N + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


def launch(inputs, BM, BN, BK, num_warps=4, num_stages=1):
    a, b, c = inputs["a"], inputs["b"], inputs["c"]
    B, M, K = a.shape
    N = b.shape[2]
    digits_kernel[(triton.cdiv(M, BM) * triton.cdiv(N, BN) * B,)](a, b, c, B, M, N, K, BM=BM, BN=BN, BK=BK)


def make_inputs(problem, seed, device="cpu", dtype="float32"):
    g = torch.Generator(device=device).manual_seed(seed)
    B, M, N, K = problem["B"], problem["M"], problem["N"], problem["K"]
    return {"a": torch.randn(B, M, K, generator=g, device=device), "b": torch.randn(B, K, N, generator=g, device=device),
            "c": torch.empty(B, M, N, device=device)}


def tile_grid(problem, meta):
    return (triton.cdiv(problem["M"], meta["BM"]) * triton.cdiv(problem["N"], meta["BN"]), problem["B"])


SPEC = KernelSpec(
    name="digits", kernel_name="digits_kernel",
    problems={"default": {"B": 3, "M": 80, "N": 192, "K": 32}, "check": {"B": 2, "M": 40, "N": 48, "K": 32}},
    meta={"BM": 16, "BN": 32, "BK": 32, "num_warps": 4, "num_stages": 1},
    check_meta={"BM": 16, "BN": 16, "BK": 32, "num_warps": 4, "num_stages": 1},
    make_inputs=make_inputs, launch=launch, reference=lambda inputs: (inputs["a"] @ inputs["b"]).double(),
    output_name="c", tolerance={"float32": 1e-4}, tile_grid=tile_grid, swizzle_args=tile_grid,
    flops=lambda p: 2.0 * p["B"] * p["M"] * p["N"] * p["K"], min_bytes=lambda p, dtype: 4.0 * p["B"] * (
        p["M"] * p["K"] + p["K"] * p["N"] + p["M"] * p["N"]), dtypes=("float32",),
)
'''


# One tile coordinate per program, the kernel splitting it in three: batch = t // P, then
# pid_m = (t % P) // num_n and pid_n = t % num_n (the digits of a 3-D launch merged into one axis).
_NESTED_DIGITS = _DIGITS.replace('''def swizzle(pid, num_tiles, batches):
    """Program ``pid`` -> tile ``(t, batch)`` of the (tiles, batches) grid, row-major."""
    return pid // batches, pid % batches''', '''def swizzle(pid, num_tiles):
    return pid''').replace(
    '''    t, batch = swizzle(tl.program_id(0), tl.cdiv(M, BM) * num_n, B)
    pid_m, pid_n = t // num_n, t % num_n''', '''    tile = swizzle(tl.program_id(0), tl.cdiv(M, BM) * num_n * B)
    batch, t = tile // (tl.cdiv(M, BM) * num_n), tile % (tl.cdiv(M, BM) * num_n)
    pid_m, pid_n = t // num_n, t % num_n''').replace(
    '''    return (triton.cdiv(problem["M"], meta["BM"]) * triton.cdiv(problem["N"], meta["BN"]), problem["B"])''',
    '''    return (triton.cdiv(problem["M"], meta["BM"]) * triton.cdiv(problem["N"], meta["BN"]) * problem["B"],)''')


# ragged in N only: a ragged M would clip each batch entry's rows at its own end, a mask that is no box
# of the tensor (refused as such, digits or not)
@pytest.mark.parametrize("source, sizes, digits", [
    (_DIGITS, {"M": 80, "N": 192}, "{n}"), (_DIGITS, {"M": 80, "N": 200}, "{n}"),
    (_NESTED_DIGITS, {"M": 80, "N": 192}, "{n} x {m}")], ids=["even", "ragged-n", "nested"])
def test_a_program_id_split_into_digits_traces_as_a_brute_force_trace(tmp_path, source, sizes, digits):
    """pid // num_n and pid % num_n are no affine function of the program id: the worker records the
    divisors the programs used (num_n, 6 or 7 here, and the swizzle's number of batch entries, 3) and
    traces 8 random tiles more; the extension fits in the digits (c % num_n, c // num_n) and every tile's
    granules equal a brute-force trace of all programs, ragged edges included. Without the divisors
    the same samples are refused as before."""
    assert source.count("swizzle(") == 2 and "tile_grid" in source   # the replacements above took
    path = tmp_path / "digits.py"
    path.write_text(source)
    samples, grid = _recorded(path, {}, sizes)
    _, spec = load_kernel(path)
    result = run_worker({"kernel_path": str(path), "stages": ["trace"], "dtype": "float32", "meta_overrides": {},
                         "trace_problem": "default", "problem_sizes": sizes}, 300, interpret=True)
    divisors = result.details["trace"]["divisors"]
    num_n, num_m = -(-sizes["N"] // 32), -(-sizes["M"] // 16)
    assert num_n in divisors and len(samples) > len(sample_tiles(grid)) + 8   # + random tiles + digits' edges
    with pytest.raises(TraceError, match="not an affine function"):
        extend(samples, grid, 1, "test")
    trace = extend(samples, grid, 1, "test", granule_bytes=32, divisors=divisors)
    assert f"coordinate 0 in digits of {digits.format(n=num_n, m=num_m)} x the rest" in trace.source
    assert_trace_is(trace, brute_force(path, sizes), 32)


def _gemm_truth(B: int, M: int, N: int, BM: int = 16, BN: int = 32, K: int = 32):
    """tile (c,) -> its accesses (as record_samples gives them) for a batched GEMM over one merged axis:
    batch = c // P, pid_m = (c % P) // num_n, pid_n = c % num_n, fp32, rows and columns masked."""
    num_m, num_n = -(-M // BM), -(-N // BN)
    P = num_m * num_n
    layouts = [((B, M, K), (M * K, K, 1)), ((B, K, N), (K * N, N, 1)), ((B, M, N), (M * N, N, 1))]

    def truth(tile):
        c = tile[0]
        b, pm, pn = c // P, (c % P) // num_n, c % num_n
        rm, rn, rk = pm * BM + np.arange(BM), pn * BN + np.arange(BN), np.arange(K)
        a = (b * M * K + rm[:, None] * K + rk[None, :])[np.broadcast_to(rm[:, None] < M, (BM, K))]
        w = (b * K * N + rk[:, None] * N + rn[None, :])[np.broadcast_to(rn[None, :] < N, (K, BN))]
        o = (b * M * N + rm[:, None] * N + rn[None, :])[(rm[:, None] < M) & (rn[None, :] < N)]
        return [access_record(10, 0, np.unique(a) * 4, 4, False, B * M * K * 4, layouts[0]),
                access_record(11, 1, np.unique(w) * 4, 4, False, B * K * N * 4, layouts[1]),
                access_record(12, 2, np.unique(o) * 4, 4, True, B * M * N * 4, layouts[2])]
    return truth, (P * B,), P, num_n


def _as_the_worker_samples(truth, grid: tuple, divisors: list) -> dict:
    """agent/verification/worker.py's _stage_trace on a synthetic kernel: the structured samples; where
    they do not fit, 8 random tiles, then the edges of the digits that fit them."""
    samples = {t: truth(t) for t in sample_tiles(grid)}
    if not tracer.fits_on_samples(samples, grid):
        samples.update({t: truth(t) for t in tracer.check_tiles(grid, list(samples))})
        splits = tracer.digit_splits(samples, grid, divisors)
        samples.update({t: truth(t) for t in (tracer.digit_tiles(grid, splits) if splits else ())})
    return samples


@pytest.mark.parametrize("B, M, N, divisors", [
    (2, 72, 192, [6, 30]),          # a ragged M clips each batch entry at its own end: no box (was traced wrong)
    (4, 56, 128, [4, 16, 32]),      # 32 // 16 = 2 (two block sizes) made a digit that absorbed the ragged edge
    (3, 40, 200, [16, 32, 7, 21]),
], ids=["ragged-m", "distractor-digit", "ragged-both"])
def test_a_mask_inside_a_digit_is_refused_not_traced_wrong(B, M, N, divisors):
    truth, grid, _, _ = _gemm_truth(B, M, N)
    samples = _as_the_worker_samples(truth, grid, divisors)
    with pytest.raises(TraceError, match="not an affine function|not one clipped consistently"):
        extend(samples, grid, 1, "test", granule_bytes=32, divisors=divisors)


@pytest.mark.parametrize("B, M, N", [(2, 80, 192), (3, 64, 200), (4, 16, 96)])
def test_digits_of_a_merged_batch_axis_trace_every_tile_right(B, M, N):
    """Against the truth of every tile, with distractor divisors (the block sizes 16 and 32)."""
    truth, grid, P, num_n = _gemm_truth(B, M, N)
    divisors = sorted(d for d in {P, num_n, 16, 32} if 1 < d < grid[0] and grid[0] % d == 0)
    samples = _as_the_worker_samples(truth, grid, divisors)
    trace = extend(samples, grid, 1, "test", granule_bytes=32, divisors=divisors)
    assert "fitted in digits" in trace.source
    everything = {(c,): truth((c,)) for c in range(grid[0])}   # every tile sampled: exact by construction
    exact = extend(everything, grid, 1, "test", granule_bytes=32, divisors=divisors)
    for t in range(grid[0]):
        assert sorted(trace.block_bytes[trace.keys[t][trace.keys[t] >= 0]].tolist()) == sorted(
            exact.block_bytes[exact.keys[t][exact.keys[t] >= 0]].tolist()), t
    assert trace.footprint_bytes() == exact.footprint_bytes()


@pytest.mark.parametrize("divisors", [["x", None, 2.5, True, float("nan"), -4, 0, 2 ** 70], 5, None])
def test_divisors_that_are_no_integers_are_ignored(divisors):
    truth, grid, _, _ = _gemm_truth(2, 80, 192)
    samples = {t: truth(t) for t in sample_tiles(grid)}
    with pytest.raises(TraceError):
        extend(samples, grid, 1, "test", granule_bytes=32, divisors=divisors)


def test_a_refusal_with_many_divisors_stays_cheap():
    """A data-dependent access after 100 affine steps on a 240 x 240 grid with every divisor of 240: the
    search fits the access that failed first (each try re-fitted the 100 steps: 90 s here)."""
    import time
    grid = (240, 240)

    def accesses(t):
        steps = [access_record(k, 0, (t[0] * 4 * 4096 + k * 64 + np.arange(16) * 4), 4, False, 1 << 30,
                               ((1 << 18, 1024), (1024, 1))) for k in range(100)]
        scatter = ((t[0] * 7919 + t[1] * 104729) % 1000) * 64 + np.arange(16) * 4   # data-dependent, 64 B
        return steps + [access_record(100, 1, scatter, 4, False, 1 << 20)]
    samples = {t: accesses(t) for t in sample_tiles(grid) + tracer.check_tiles(grid, sample_tiles(grid))}
    start = time.process_time()
    with pytest.raises(TraceError):
        extend(samples, grid, 1, "test", granule_bytes=32, divisors=[d for d in range(2, 240) if 240 % d == 0])
    assert time.process_time() - start < 30
