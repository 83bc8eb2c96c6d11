"""The memory-access tracer: a kernel's ``TileTrace`` at its real problem size, with no GPU and no
hand-written access model.

How (and why this way): pushing all program-steps of a real launch through the Triton interpreter
is far too slow (the default GEMM has 500 000 program-steps at about 5 ms each). So a worker runs
only a few programs of the real launch under the interpreter (``record_samples``: the launch's grid
is replaced by the sampled programs, program ids and grid size are reported as in the real launch,
every load and store is recorded with its call site, ``tl.dot`` is skipped), and this module fits
each access's footprint as an affine function of the tile coordinates, checks the fit on further
samples, and extends it to every tile (``extend``). Kernels whose addresses depend on data (a CSR
gather) fail the check and are reported as such.

The hooks into the interpreter, the one part that differs between Triton versions (3.6 on the GPU
machines, 3.9 here), are in ``interpreter_hooks.py``.

Recorded access: ``(site, tensor, start, end, nbytes, is_store, pitch, col_lo, col_hi,
tensor_bytes)``, seven fields of a wrap-around (below) and ``sectors``: the call site (source line), the index
of the input tensor it falls in, the byte range ``[start, end)`` within that tensor, the distinct bytes touched, whether it is a store, its
row geometry, the tensor's size in bytes, and how many 32 B sectors it touches (which says whether the
geometry, a bound, describes it exactly: the whole-grid reading below needs that). The geometry: ``pitch`` 0 for one contiguous run of
bytes; otherwise the access lies in rows ``start // pitch .. (end - 1) // pitch`` of ``pitch``
bytes, within byte columns ``[col_lo, col_hi)`` of each (a 2-D tile: ``pitch`` is the tensor's row
stride). Runs are split where at least ``MERGE_GAP_BYTES`` (32, the smallest L2 sector of any
bundled spec) are skipped: a shorter gap holds no whole sector, so merging it changes no count at
a granularity of 32 B or more. An access whose rows are not one rectangle (a triangular mask,
skipped rows) is described by its bounding rectangle. A fully masked access is recorded empty
(tensor -1, ``end == start``) so that every program keeps the same sequence of call sites. A
*step* ends where a call site repeats (one loop iteration). Six-element records (the format
before the geometry) are read as contiguous ranges of a tensor of unknown size; records without
``sectors`` as exactly what they describe.

Whole grids. Where no fit extends the samples (addresses that depend on the data, as a LoRA kernel's
adapter index; steps or call sites that differ by tile, as an attention kernel's over sequences of
different lengths) and the launch is small (``whole_grid_affordable``: at most WHOLE_GRID_MAX_TILES
tiles, WHOLE_GRID_MAX_ACCESSES accesses, WHOLE_GRID_BUDGET_S seconds at the samples' pace), the worker
records every program, and ``extend`` reads each access as recorded, no fit (``_whole_grid_trace``): a
trace of that launch's data, exact at 32 B sectors, which its source says. An access scattered in gaps
of a sector or more within its bounds (a gather through an index, a mask that is no rectangle) is
refused there, its record keeping only its bounds, unless it touched at least WHOLE_GRID_MIN_COVER
(90 %) of the sectors there: then it is read as its bounds, and the source counts it.

Wrap-around. The Triton tutorial's GEMM loads its ragged last tiles with ``(pid_m * BLOCK_M +
tl.arange(0, BLOCK_M)) % M``: the last tile row reads rows ``[a, M)`` and wraps to ``[0, b)``, whose
bounding box is the whole tensor. Seven more fields record that, from the tensor's layout (a vector,
or a matrix of unit inner stride; ``access_record``'s ``layout``): ``(axis, period, start, end,
pitch, col_lo, col_hi)``, axis 1 for rows (period in rows), 2 for byte columns or a vector's bytes
(period in bytes), then the access's *virtual* form with the wrapped part moved past the tensor's
end (rows ``[a, M + b)``), as a rectangle of its own pitch; all zero where nothing wraps (ten-element
records are read so). ``extend`` fits such an access in its virtual form first (the wrapped part
past the end, then before the start: a periodic halo), unbounded on the wrapped axis, and folds the
extension back into the tensor (the part inside, the part past the end from 0 on, the part before
the start); the plain reading comes last. ``tl.max_contiguous`` / ``tl.multiple_of`` hints change no
address, and masks on K narrow every tile's access of one step alike, which the per-step fit takes.

Small gathers. An access whose address depends on data but that reads a scalar in each tile
(``SCALAR_GATHER_BYTES``, 16 B at most: one 128-bit load; within one granule), a row's label in a
loss kernel, say, is not refused: each tile gets a block of its own for it (a tensor of its own, one
row per tile), its traffic counted, no reuse assumed; the trace's source says how many. A larger
data-dependent access (the gather of a CSR SpMV's x) still refuses the trace.

Digits of a program id. A kernel that splits its program id by division (``pid_m = pid //
num_pid_n``, ``pid_n = pid % num_pid_n``; a 3-D launch merged into one tile axis and split back;
``row % seqlen``) has addresses that are no affine function of the tile coordinate, but affine in
its digits. The worker records the scalars the sampled programs divide integers by
(``record_samples``'s ``divisors``); where the plain fit fails on the samples (at a 1 B granule, so
that no access passes as a private block there that would not at the target's) and some divisor
divides an axis, it traces ``check_tiles`` (8 tiles at random, seeded by the grid), finds the split
that fits those (``digit_splits``) and traces that split's ``digit_tiles`` too: ``sample_tiles`` of the
grid in digits, the tiles at each digit's edges and corners, which the structured samples of the
plain grid never show (the last row of tiles of batch entry 0, say). ``extend`` then tries splits of
each axis into digits by those divisors and their ratios (``_digit_splits``: fewest digits first,
lazily, at most MAX_DIGIT_SPLITS tries, each a fit on the samples alone, the access that failed
last fitted first), strictly (the edges of every digit excluded from the fits, no fallback to one
exact fit over all samples), and takes the first that fits every access and whose digit tiles are
all sampled; it extends once with it. A mask that clips each digit's range at its own end (a ragged
M inside each batch entry) is no box and refused, as it is without digits; so is an access that
falls in different tensors, at once. A split that fits all samples yet is wrong elsewhere remains
possible in principle (an order that is digit-like except on unsampled tiles), as for any affine fit
from samples; the trace's source names the split taken.

Masked edges. Where a kernel masks its accesses at the domain's edges (a stencil's shifted loads,
a ragged last tile), edge tiles touch less than the affine map predicts, so the fit is made away
from the edges: sample_tiles takes tile (1, 1, ..) and its neighbours along each axis, the middle
tile, tile (g-2, g-2, ..) and the corners. For each access, a quantity bounding it from below (first row, first
column, start) is fitted on the sampled tiles off the grid's low edges, one bounding it from above
on tiles off its high edges (an axis of fewer than 3 tiles has no tile off its edges and is not
excluded); every fit must be exact on all its tiles, one more than it has unknowns at least. The
prediction is then clipped to a box: the tensor (rows ``[0, ceil(tensor_bytes / pitch))``, columns
``[0, pitch)``, or bytes ``[0, tensor_bytes)``), narrowed where a sampled tile touches less than the
prediction on a side (a mask that stops short of the tensor); the clipped prediction must equal
what every sampled tile, edges included, really touched. If that fails, the same is tried with
both fits on the interior tiles only, then with one exact fit over all samples (no edges excluded:
what the tracer did before masks were handled; small grids, where along an axis of two tiles any
clipping is affine). If all fail, the access is refused, naming its source line and a tile: as
affine but not clipped consistently at the edges (a mask that is no box, or the GEMM's wrap of
ragged edge tiles, ``% M``) where some fit held, else as not affine (data-dependent addressing).
A contiguous access of a tensor no access reads in 2-D, whose clip fails as no box in bytes, is
tried once more in rows: a row of a 2-D tensor per program masked at the row's end
(``x_ptr + row * stride + cols``, ``cols < N``, on a grid of rows by column blocks) is a one-row
rectangle in rows of the row coordinate's byte step, clipped by a box in byte columns there.

Granularity. The L2 holds lines (or sectors), not byte ranges: two tiles reuse each other's data
when they touch the same line, even where their byte ranges differ (32 x 32 fp16 tiles: each row
segment is 64 B, two neighbours share every 128 B line). ``extend`` takes the granule
(``granule_bytes``: the spec's ``l2_line_bytes``, or ``l2_sector_bytes`` where the L2 fills and
counts hits by sector, as NVIDIA's does: ncu's L2 hit rate is per 32 B sector; default
``GRANULE_BYTES`` = 128, the ``l2_line_bytes`` of every bundled spec, from the Nsight Compute
Kernel Profiling Guide and the ROCm Compute Profiler docs, hwspecs/*.yaml). Blocks are NOT one key
per granule: a 16384 x 16384 x 4096 GEMM's programs touch 200 M line-accesses, beyond what the
simulator's replay can run. Instead every access, after the extension, is a rectangle of granules
in its tensor's grid of rows (``pitch`` bytes each, the pitch the tensor's 2-D accesses share; one
row for a tensor only ever accessed contiguously) and byte columns rounded out to granules
(a contiguous range is split into up to three such rectangles: head, whole rows, tail; a 2-D
access of another pitch than its tensor's is taken as its bounding byte range, and the trace's
source says how many sampled accesses were). Per
tensor, all rectangles' row bounds and column bounds cut the grid into cells; a block is one cell,
and an access touches the cells inside its rectangle. Two accesses that share a granule thus share
the cell holding it, and block bytes are the granule bytes the cell covers. Where the tiles are
aligned to the granules (the GEMM's 128 x 64 bf16 tiles) a cell is a whole tile, as before; a
5-point stencil cuts each tile into 3 x 3 cells (first row, middle rows, last row x first granule
column, middle, last), an access touching up to 4 x 4 of them: 52 keys a tile where the hand
model has 22 (the shifted loads touch the tile's own cells again, as the kernel does; with an L1
those are L1 hits), and a simulation at the default problem replays 3.4 M accesses (4 to 6 s
here). Exact where a tensor's row pitch is
a multiple of the granule and the tensor starts on one (CUDA and HIP allocations are 256 B
aligned); otherwise each row is rounded as if it began on a granule (a line shared by two rows is
counted in both).
"""
from __future__ import annotations

import itertools
import math
import numbers
import sys
from collections import Counter

import numpy as np

from swizzleperf.kernels.trace import TileTrace, check_size, new_keys

_EXACT = "exactly on all sampled tiles"
_NO_WRAP = (0, 0, 0, 0, 0, 0, 0)  # fields 11-17 of an access that wraps nowhere
_GATHER_TENSORS = 1 << 40          # tensor ids of the private blocks of small data-dependent accesses
SCALAR_GATHER_BYTES = 16  # a data-dependent access this small (one 128-bit load at most) gets a private block
GRANULE_BYTES = 128  # the l2_line_bytes of every bundled spec (hwspecs/*.yaml)
MERGE_GAP_BYTES = 32  # the smallest L2 sector of any bundled spec (NVIDIA: 32 B)


class TraceError(ValueError):
    """The kernel's accesses cannot be extended from samples (not affine, or differently shaped).
    ``edge``: True where an access was affine but its clip at the edges was no box."""

    def __init__(self, message: str, edge: bool = False) -> None:
        super().__init__(message)
        self.edge = edge


def sample_tiles(grid: tuple) -> list:
    """Tile coordinates to trace, distinct and within ``grid``: tile (1, 1, ..) and its neighbours
    one step either way along each axis, the middle tile, tile (g-2, g-2, ..), and the corners.
    Along an axis of 4 or more tiles that gives two tiles off each edge to fit on (1 and 2, or
    g-3 and g-2) and further ones to check; the corners and tiles 0 and g-1 show how the masks
    clip the edges (see the module docstring)."""
    base = tuple(min(1, g - 1) for g in grid)
    picks = [base]
    for axis, g in enumerate(grid):
        for delta in (1, -1):
            picks.append(tuple(min(max(c + delta, 0), g - 1) if a == axis else c for a, c in enumerate(base)))
    picks.append(tuple(g // 2 for g in grid))
    picks.append(tuple(max(0, g - 2) for g in grid))
    picks.extend(itertools.product(*[(0, g - 1) for g in grid]))
    return list(dict.fromkeys(p for p in picks if all(0 <= c < g for c, g in zip(p, grid))))


def group_steps(accesses: list) -> list:
    """Split one program's ordered accesses into steps: a step ends where a call site repeats."""
    steps, seen = [[]], set()
    for access in accesses:
        if access[0] in seen:
            steps.append([])
            seen = set()
        steps[-1].append(tuple(access))
        seen.add(access[0])
    return [s for s in steps if s]


def extend(samples: dict, grid: tuple, programs_per_cu: int, source: str,
           granule_bytes: int = GRANULE_BYTES, coordinate_splits: dict | None = None,
           divisors=()) -> TileTrace:
    """The TileTrace of every tile of ``grid`` from traced samples.

    Args:
        samples: tile coordinates (tuple) -> that program's ordered accesses (lists or tuples as
            ``record_samples`` gives them, or six-element ``(site, tensor, start, end, nbytes,
            is_store)``).
        grid: the logical tile grid; tiles are numbered row-major.
        programs_per_cu: occupancy, passed on to the trace.
        source: where the samples come from (the trace's ``source``, the granule appended).
        granule_bytes: the unit the L2 holds and counts: the target spec's ``l2_line_bytes``
            or ``l2_sector_bytes`` (default 128 B, every bundled spec's line); 1 counts bytes.
        coordinate_splits: ``{axis: d}``: tile coordinate ``axis`` is two launch axes merged
            (``c = inner + d * outer``, inner fastest: agent/capture/pid_remap.py's tile grid of a 3-D
            launch), so accesses are fitted as affine in ``(c % d, c // d)`` instead of ``c``.
        divisors: the scalars the sampled programs divided an integer by (``record_samples``'s
            ``divisors``): where no coordinate_splits are given and an access is not affine in the
            tile coordinates, a kernel that splits a program id into digits (``pid // num_pid_n``,
            ``pid % num_pid_n``, ``row % seqlen``) is fitted in them: the fewest splits by such
            divisors under which every access fits exactly on all sampled tiles (``_digit_splits``;
            the samples should then include ``check_tiles``). The trace's source names the splits.

    Where no fit extends the samples but they hold every tile of ``grid`` (``covers_grid``: the
    worker traced a small launch whole, ``whole_grid_affordable``), the trace is what each program
    recorded, read without a fit (``_whole_grid_trace``).

    Raises:
        TraceError: the samples differ in shape (steps, sites), an access is not affine in the
            tile coordinates (away from the edges, with the edges clipped consistently), or there
            are too few samples to fit; and they do not hold every tile.
        TraceTooLarge: the grid's programs times the accesses a sampled program makes pass the
            simulator's bound (kernels/trace.py's ``MAX_ACCESSES``), checked before any array of
            the grid's size is made; or the trace's keys would (checked as they are made).
    """
    if granule_bytes < 1:
        raise ValueError(f"granule_bytes must be positive, got {granule_bytes}")
    try:
        return _extended(samples, grid, programs_per_cu, source, granule_bytes, coordinate_splits, divisors)
    except TraceError:
        if not covers_grid(samples, grid):
            raise
    return _whole_grid_trace(samples, grid, programs_per_cu, source, granule_bytes)


def _extended(samples: dict, grid: tuple, programs_per_cu: int, source: str, granule_bytes: int,
              coordinate_splits: dict | None, divisors) -> TileTrace:
    """``extend`` by a fit from the samples (its docstring), without the whole-grid reading."""
    fitted, coords, grid = _fitted(samples, grid, granule_bytes)
    tiles, shape = fitted["tiles"], fitted["shape"]
    check_size(math.prod(grid), sum(len(step) for step in shape))
    all_coords = np.stack(np.unravel_index(np.arange(math.prod(grid)), grid), axis=1)  # [tiles, ndim]
    splits, digits = dict(coordinate_splits or {}), ""
    try:
        parts, inexact, wrapped, gathered = _fit_parts(fitted, *_split_all(coords, all_coords, grid, splits))
    except TraceError as exc:
        found = None if coordinate_splits or getattr(exc, "hopeless", False) else (
            _digit_splits(fitted, coords, grid, divisors))
        if found is None:
            raise
        splits = found
        parts, inexact, wrapped, gathered = _fit_parts(fitted, *_split_all(coords, all_coords, grid, splits),
                                                       strict=True)
        digits = ("; tile coordinates fitted in digits (" + ", ".join(
            f"coordinate {a} in digits of {' x '.join(map(str, chain))} x the rest" for a, chain in sorted(splits.items()))
            + f": divisors the kernel divides by, the fit exact on all {len(tiles)} sampled tiles)")
    note = (f"; {granule_bytes} B granules" + (f"; {inexact} sampled 2-D accesses counted by their "
                                                f"bounding byte range" if inexact else "")
            + (f"; {wrapped} accesses wrap around their tensor's edge (% M)" if wrapped else "")
            + (f"; {gathered} data-dependent scalar accesses counted as a block of each tile's own"
               if gathered else "") + digits)
    return _to_trace(parts, math.prod(grid), len(shape), programs_per_cu, source + note)


#: A launch of at most this many tiles whose samples no fit extends (addresses that depend on the data,
#: control flow that differs by tile: a LoRA kernel's adapter index, an attention kernel's sequence
#: lengths) is traced whole, every program recorded (``whole_grid_affordable``)...
WHOLE_GRID_MAX_TILES = 4096
#: ...where its programs would record at most this many accesses in all (at the samples' mean; the
#: worker's result holds them, about 150 B each in JSON: far under agent/verification/verify.py's
#: MAX_RESULT_BYTES)...
WHOLE_GRID_MAX_ACCESSES = 150_000
#: ...and recording the rest would take at most this many seconds at the samples' pace.
WHOLE_GRID_BUDGET_S = 90.0
#: A recorded access that touches at least this share of the 32 B sectors its record bounds (a mask
#: that drops a few elements) is read whole as its bounds, and counted in the trace's source; below
#: it the whole-grid reading refuses the access (a gather scattered within its bounds).
WHOLE_GRID_MIN_COVER = 0.9


def every_tile(grid: tuple) -> list:
    """Every tile coordinate of ``grid``, row-major (tile ``i`` is ``np.unravel_index(i, grid)``)."""
    return [tuple(t) for t in itertools.product(*[range(int(g)) for g in grid])]


def covers_grid(samples: dict, grid: tuple) -> bool:
    """Whether ``samples`` hold a record of every tile of ``grid`` (and none outside it)."""
    try:
        total = math.prod(int(g) for g in grid)
        tiles = {tuple(int(c) for c in t) for t in samples}
    except (TypeError, ValueError):
        return False
    return (len(tiles) == total and len(samples) == total
            and all(len(t) == len(grid) and all(0 <= c < int(g) for c, g in zip(t, grid)) for t in tiles))


def whole_grid_affordable(grid: tuple, sampled: int, accesses: int, seconds: float) -> bool:
    """Whether the worker may record the rest of a launch whose ``sampled`` programs made ``accesses``
    accesses in ``seconds``: at most WHOLE_GRID_MAX_TILES tiles, WHOLE_GRID_MAX_ACCESSES accesses and
    WHOLE_GRID_BUDGET_S seconds for the rest, each at the samples' mean."""
    total = math.prod(int(g) for g in grid)
    if sampled <= 0 or total > WHOLE_GRID_MAX_TILES:
        return False
    return (accesses / sampled * total <= WHOLE_GRID_MAX_ACCESSES
            and seconds / sampled * (total - sampled) <= WHOLE_GRID_BUDGET_S)


#: The most rows of its own pitch one record may describe in the whole-grid reading (a record that
#: describes more, or more than it holds bytes, is refused: no record the recorder makes does).
WHOLE_GRID_MAX_ROWS = 1 << 20


def _whole_grid_trace(samples: dict, grid: tuple, programs_per_cu: int, source: str, granule: int) -> TileTrace:
    """The trace of a launch every tile of which was recorded (``covers_grid``): each program's own
    accesses, read without any fit, so addresses that depend on the data and steps or call sites that
    differ by tile are taken as they were (the data of the traced launch: another input may differ);
    each access in its own step (a step ends where a call site repeats), as the bytes it touched
    (``_as_read``), cut into cells per tensor: rows of the tensor's pitch where that is a whole number
    of granules, else byte ranges (a row that does not begin on a granule is not rounded as if it did).
    Raises TraceError for a record the reading cannot take, TraceTooLarge past the simulator's bound."""
    grid = tuple(int(g) for g in grid)
    index = {t: i for i, t in enumerate(every_tile(grid))}
    programs = {index[tuple(int(c) for c in t)]: group_steps([_normalise(a) for a in samples[t]]) for t in samples}
    steps = max([len(p) for p in programs.values()] + [1])
    records = [a for p in programs.values() for step in p for a in step if a[3] > a[2] and a[1] >= 0]
    pitch, size = _tensor_pitches(records), _tensor_sizes(records)
    pitch = {t: p for t, p in pitch.items() if p % granule == 0}
    rects, wrapped, bounded = [], 0, 0   # (tile, step, tensor, is_store, r0, r1, c0, c1), the last four arrays
    for tile, program in programs.items():
        for s, step in enumerate(program):
            for a in step:
                if a[3] <= a[2] or a[1] < 0:
                    continue
                p, size_t = pitch.get(a[1], 0), size.get(a[1], -1)
                values, as_bounds = _as_read(a, p, tile)
                wrapped, bounded = wrapped + bool(a[10]), bounded + as_bounds
                for r0, r1, c0, c1 in _rectangles(values, p):
                    rects.append((tile, s, a[1], bool(a[5]), *_round_columns(r0, r1, c0, c1, p, size_t, granule)))
    note = (f"; every one of the {len(index)} tiles traced, read as recorded (no fit: addresses or steps differ "
            f"by tile, as this launch's data gave them); {granule} B granules"
            + (f"; {wrapped} accesses wrap around their tensor's edge" if wrapped else "")
            + (f"; {bounded} accesses that skip a few sectors (at least {WHOLE_GRID_MIN_COVER:.0%} of those "
               f"within their bounds touched) counted by their bounds" if bounded else ""))
    return _rects_to_trace(rects, len(index), steps, programs_per_cu, source + note)


def _as_read(access: tuple, pitch: int, tile: int) -> tuple:
    """One recorded access as ``(values, as_bounds)``: int64 ``[n, 4]``, one rectangle of the tensor's
    ``pitch`` (a 2-D access of that pitch), or ``[n, 2]``, byte ranges (a contiguous one; each row of a
    2-D one of another pitch; a wrapped one's parts, its virtual form folded back), as ``_rectangles``
    takes them: the 32 B sectors it touched. ``as_bounds`` where it touched fewer than its record
    bounds but at least WHOLE_GRID_MIN_COVER of them, read as the bounds.

    Raises:
        TraceError: it touched fewer (a gather scattered in gaps of 32 B or more within its bounds:
            the record keeps only the bounds), or its record describes more rows than it holds bytes
            or WHOLE_GRID_MAX_ROWS; naming its line and tile."""
    start, end, nbytes, own, col_lo, col_hi = access[2], access[3], access[4], access[6], access[7], access[8]
    what = f"the {'store' if access[5] else 'load'} at line {access[0]} of tile {tile}"
    if access[10]:    # a wrap is recorded only where the access is one whole rectangle in its virtual form
        return _wrapped_ranges(access, what), False
    touched, sector = access[17], MERGE_GAP_BYTES
    contiguous = -(-end // sector) - start // sector
    if own > 0 and touched == contiguous:
        own = 0       # runs closer than a sector apart in rows of their own pitch: every sector between touched
    described = contiguous if own <= 0 else _described_sectors(access, what)
    as_bounds = touched is not None and touched != described
    if as_bounds and not (0 < described and WHOLE_GRID_MIN_COVER * described <= touched < described):
        raise TraceError(f"{what} touches {touched} sectors of 32 B scattered within the {described} its "
                         f"record bounds (a gather, or a mask that is no rectangle: the record keeps only its "
                         f"bounds): cannot trace it whole")
    if own <= 0:
        return np.array([[start, end]], dtype=np.int64), as_bounds
    if own == pitch:
        return np.array([_as_rect(access, pitch)], dtype=np.int64), as_bounds
    rows = _rows(start, end, own, nbytes, what)
    return np.stack([rows + col_lo, rows + col_hi], axis=1), as_bounds


def _rows(start: int, end: int, own: int, nbytes: int, what: str) -> np.ndarray:
    """Byte offsets of the rows of pitch ``own`` that bytes ``[start, end)`` span. Raises TraceError
    for more rows than the record holds bytes (``nbytes``) or than WHOLE_GRID_MAX_ROWS."""
    first, last = start // own, (end - 1) // own
    if last - first + 1 > min(max(int(nbytes), 1), WHOLE_GRID_MAX_ROWS):
        raise TraceError(f"{what} is recorded as {last - first + 1} rows of {own} B holding {nbytes} B: no record "
                         f"of the tracer's describes itself so; cannot trace it whole")
    return np.arange(first, last + 1, dtype=np.int64) * own


def _wrapped_ranges(access: tuple, what: str) -> np.ndarray:
    """A wrapped record's bytes (fields 11-17: its virtual form, the wrapped part moved past the end)
    as byte ranges ``[n, 2]`` folded back into the tensor: each row of its virtual rectangle, the rows
    past the last (axis 1) taken from row 0 on, the columns past the row's end (axis 2, or a vector's
    bytes) from its start."""
    axis, period, start, end, own, col_lo, col_hi = access[10:17]
    if axis not in (1, 2) or period <= 0 or (axis == 1 and own <= 0):
        raise TraceError(f"{what} is recorded as wrapping in a way the tracer never records: {access[10:17]}")
    if own <= 0:                                    # a vector: bytes [start, end), past `period` from 0
        ranges = [(start, min(end, period))] + ([(0, end - period)] if end > period else [])
        return np.array([r for r in ranges if r[1] > r[0]], dtype=np.int64).reshape(-1, 2)
    rows = _rows(start, end, own, access[4], what)
    if axis == 1:                                   # rows past `period` rows from row 0 on
        rows = (rows // own % period) * own
        return np.stack([rows + col_lo, rows + col_hi], axis=1)
    inside = np.stack([rows + col_lo, rows + min(col_hi, period)], axis=1)
    if col_hi <= period:
        return inside
    return np.concatenate([inside, np.stack([rows, rows + col_hi - period], axis=1)])


def _described_sectors(access: tuple, what: str) -> int:
    """The 32 B sectors (MERGE_GAP_BYTES) an unwrapped 2-D record describes: the byte columns
    ``[col_lo, col_hi)`` of each row of its own pitch. Raises TraceError as ``_rows``."""
    start, end, nbytes, own, col_lo, col_hi = access[2], access[3], access[4], access[6], access[7], access[8]
    sector = MERGE_GAP_BYTES
    rows = _rows(start, end, own, nbytes, what)
    lo, hi = (rows + col_lo) // sector, -(-(rows + col_hi) // sector)
    covered = np.maximum.accumulate(np.concatenate([[lo[0]], hi[:-1]]))   # sectors earlier rows reached
    return int(np.maximum(hi - np.maximum(lo, covered), 0).sum())


def _rects_to_trace(rects: list, num_tiles: int, steps: int, programs_per_cu: int, source: str) -> TileTrace:
    """The TileTrace of rectangles ``(tile, step, tensor, is_store, r0, r1, c0, c1)`` given per tile
    and step in the order the program made them: each tensor cut into cells as in ``_to_trace``, each
    rectangle's cells (row-major) in its tile's step, one after another."""
    if not rects:
        return _numbered(new_keys(num_tiles, steps, 1), np.zeros((num_tiles, steps, 1), dtype=bool), {},
                         programs_per_cu, source)
    r0, r1, c0, c1 = (np.concatenate([np.asarray(r[k], dtype=np.int64).ravel() for r in rects]) for k in range(4, 8))
    counts = [np.asarray(r[4]).size for r in rects]
    tile, step, tensor, store = (np.repeat(np.array([r[k] for r in rects], dtype=np.int64), counts) for k in range(4))
    keep = (r0 < r1) & (c0 < c1)
    tile, step, tensor, store, r0, r1, c0, c1 = (a[keep] for a in (tile, step, tensor, store, r0, r1, c0, c1))
    grids, base = {}, 0
    first_cell, ncols = np.zeros(len(tile), dtype=np.int64), np.zeros(len(tile), dtype=np.int64)
    i0, nr, k0, nc = (np.zeros(len(tile), dtype=np.int64) for _ in range(4))
    for t in np.unique(tensor):
        mine = tensor == t
        rows, cols = np.unique(np.concatenate([r0[mine], r1[mine]])), np.unique(np.concatenate([c0[mine], c1[mine]]))
        grids[int(t)] = (rows, cols, base)
        first_cell[mine], ncols[mine] = base, len(cols)
        i0[mine] = np.searchsorted(rows, r0[mine])
        nr[mine] = np.searchsorted(rows, r1[mine]) - i0[mine]
        k0[mine] = np.searchsorted(cols, c0[mine])
        nc[mine] = np.searchsorted(cols, c1[mine]) - k0[mine]
        base += (len(rows) - 1) * len(cols)
    count = nr * nc
    check_size(num_tiles, -(-int(count.sum()) // num_tiles), at_least=True)   # before the cells are made
    owner = np.repeat(np.arange(len(tile)), count)          # the rectangle of each cell access
    m = np.arange(int(count.sum())) - np.repeat(np.cumsum(count) - count, count)
    cell = first_cell[owner] + (i0[owner] + m // nc[owner]) * ncols[owner] + (k0[owner] + m % nc[owner])
    group = tile[owner] * steps + step[owner]               # (tile, step), rectangles kept in their order
    order = np.argsort(group, kind="stable")
    group, cell, written = group[order], cell[order], store[owner][order].astype(bool)
    starts = np.searchsorted(group, group, side="left")
    slot = np.arange(len(group)) - starts
    width = int(slot.max()) + 1 if slot.size else 1
    keys = new_keys(num_tiles, steps, width)
    is_store = np.zeros(keys.shape, dtype=bool)
    keys[group // steps, group % steps, slot] = cell
    is_store[group // steps, group % steps, slot] = written
    return _numbered(keys, is_store, grids, programs_per_cu, source)


def fits_on_samples(samples: dict, grid: tuple, granule: int = 1) -> bool:
    """Whether ``extend`` fits every access of ``samples`` in the plain tile coordinates (no digit
    splits), checked on the samples alone (no array over the grid) at a granule of ``granule`` bytes
    (1: an access small enough to be a private block at 1 B is one at any granule ``extend`` is given):
    the worker traces ``check_tiles`` only where it does not at 1 B, and a launch whole only where it
    does not at 32 B (the smallest granule ``extend`` is given: a 4 B label load is a private block there)."""
    try:
        fitted, coords, grid = _fitted(samples, grid, granule)
        _fit_parts(fitted, coords, coords, grid)
    except TraceError:
        return False
    return True


#: At most this many sets of digit splits are tried for a trace (each a fit on the sampled tiles only).
MAX_DIGIT_SPLITS = 256
#: Tiles traced beyond ``sample_tiles`` where the kernel divides by a scalar (``check_tiles``): a fit in
#: digits must be exact on them too, so that a split that happens to fit the structured samples (a
#: divisor whose digits coincide on them) is not extended to every tile.
CHECK_TILES = 8


def check_tiles(grid: tuple, taken: list, count: int = CHECK_TILES) -> list:
    """``count`` tiles of ``grid`` not in ``taken``, spread at random (a generator seeded by the grid,
    so a trace is the same each time), for checking a fit beyond the structured samples."""
    total = math.prod(grid)
    taken = set(map(tuple, taken))
    if total - len(taken) <= 0:
        return []
    rng = np.random.default_rng([int(g) for g in grid])
    picks, tries, wanted = [], 0, min(count, total - len(taken))
    while len(picks) < wanted and tries < 50 * count:
        tile = tuple(int(c) for c in np.unravel_index(int(rng.integers(total)), grid))
        tries += 1
        if tile not in taken:
            taken.add(tile)
            picks.append(tile)
    return picks


def _split_all(coords: np.ndarray, all_coords: np.ndarray, grid: tuple, splits: dict) -> tuple:
    """``(coords, all_coords, fit_grid)`` with each ``{axis: d}`` of ``splits`` split into the digits
    ``(c % d, c // d)``; a tuple ``(d1, d2, ..)`` splits it into ``c % d1``, ``(c // d1) % d2``, ..
    and the rest."""
    fit_grid = grid
    for axis, chain in sorted(splits.items(), reverse=True):
        for k, inner in enumerate(chain if isinstance(chain, tuple) else (chain,)):
            coords, all_coords, fit_grid = _split(coords, all_coords, fit_grid, int(axis) + k, int(inner))
    return coords, all_coords, fit_grid


def _chains(g: int, divisors: list, longest: int = 3) -> list:
    """Digit chains ``(d1, d2, ..)`` of an axis of ``g`` tiles from ``divisors`` (each > 1, their
    product dividing ``g`` and below it), the empty chain first, shorter before longer."""
    chains, frontier = [()], [()]
    for _ in range(longest):
        frontier = [c + (d,) for c in frontier for d in divisors
                    if g % (math.prod(c) * d) == 0 and math.prod(c) * d < g]
        chains += frontier
    return chains


def _divisor_values(divisors) -> list:
    """The usable divisors: integers above 1 (bools and anything else dropped), and the ratios of
    two of them (a digit between two divisions: the kernel takes t // P, then (t % P) // num_n)."""
    recorded = {int(d) for d in (divisors if isinstance(divisors, (list, tuple, set, frozenset)) else ())
                if isinstance(d, numbers.Integral) and not isinstance(d, bool) and 1 < d < 2 ** 63}
    return sorted(recorded | {b // a for a in recorded for b in recorded if b % a == 0 and b > a})


def _combos(options: list):
    """Each choice of one chain per axis from ``options`` (per axis, chains with the empty one), by
    the total number of digits, fewest first, the all-empty choice left out; lazily."""
    by_length = [{} for _ in options]
    for axis, chains in enumerate(options):
        for chain in chains:
            by_length[axis].setdefault(len(chain), []).append(chain)
    lengths = [sorted(b) for b in by_length]
    for total in range(1, sum(max(l) for l in lengths) + 1):
        for split in itertools.product(*lengths):
            if sum(split) == total:
                yield from itertools.product(*(by_length[a][n] for a, n in enumerate(split)))


def digit_tiles(grid: tuple, splits: dict) -> list:
    """``sample_tiles`` of the grid in digits that ``splits`` makes of ``grid``, as tiles of ``grid``:
    the tiles at each digit's edges and corners, which a fit in digits needs to see."""
    fit_grid, digits = [], []
    for axis, g in enumerate(grid):
        chain = splits.get(axis, ())
        chain = chain if isinstance(chain, tuple) else (chain,)
        sizes = list(chain) + [g // math.prod(chain)]
        digits.append(sizes)
        fit_grid += sizes
    tiles = []
    for t in sample_tiles(tuple(fit_grid)):
        coords, k = [], 0
        for sizes in digits:
            c, scale = 0, 1
            for size in sizes:
                c, scale, k = c + t[k] * scale, scale * size, k + 1
            coords.append(c)
        tiles.append(tuple(coords))
    return list(dict.fromkeys(tiles))


def digit_splits(samples: dict, grid: tuple, divisors) -> dict | None:
    """The digit splits ``extend`` would try first that fit ``samples`` (see ``_digit_splits``), without
    asking that their ``digit_tiles`` be among them: the worker traces those next."""
    try:
        fitted, coords, grid = _fitted(samples, grid, 1)
    except TraceError:
        return None
    return _digit_splits(fitted, coords, grid, divisors, require_digit_tiles=False)


def _digit_splits(fitted: dict, coords: np.ndarray, grid: tuple, divisors, require_digit_tiles: bool = True):
    """The splits ``{axis: (d1, ..)}`` (fewest digits first, each ``d`` a divisor the kernel divided by
    or a ratio of two) under which every access fits exactly on the sampled tiles with the edges of
    every digit excluded from the fits (strict), and, with ``require_digit_tiles``, whose
    ``digit_tiles`` are all sampled; or None. Each try fits the samples only (no array over the
    grid), the access that failed last first; at most MAX_DIGIT_SPLITS tries."""
    usable = _divisor_values(divisors)
    options = [_chains(g, usable) for g in grid]
    if all(len(o) == 1 for o in options):
        return None
    sampled = set(fitted["tiles"])
    first = ()
    for combo in itertools.islice(_combos(options), MAX_DIGIT_SPLITS):
        splits = {a: chain for a, chain in enumerate(combo) if chain}
        split_coords, _, fit_grid = _split_all(coords, coords, grid, splits)
        try:
            _fit_parts(fitted, split_coords, split_coords, fit_grid, strict=True, first=first)
        except TraceError as exc:
            key = getattr(exc, "access", None)
            first = (key,) + tuple(k for k in first if k != key) if key else first
            continue
        if require_digit_tiles and not set(digit_tiles(grid, splits)) <= sampled:
            continue
        return splits
    return None


def _fitted(samples: dict, grid: tuple, granule: int) -> tuple:
    """``(fitted, coords, grid)`` of ``samples`` as ``_fit_parts`` takes them. Raises TraceError where
    the samples differ in shape (steps, sites)."""
    grid = tuple(int(g) for g in grid)
    tiles = [tuple(int(c) for c in t) for t in samples]
    shaped = {t: group_steps([_normalise(a) for a in samples[key]]) for t, key in zip(tiles, samples)}
    shape = _shape(shaped[tiles[0]])
    for t in tiles[1:]:
        if _shape(shaped[t]) != shape:
            raise TraceError(f"tile {t} has another access pattern than tile {tiles[0]} (steps or "
                             f"call sites differ): data-dependent control flow or addressing")
    records = [a for t in tiles for step in shaped[t] for a in step if a[3] > a[2]]
    fitted = {"shape": shape, "shaped": shaped, "tiles": tiles, "pitch": _tensor_pitches(records),
              "size": _tensor_sizes(records), "granule": granule}
    return fitted, np.array(tiles, dtype=np.int64).reshape(len(tiles), len(grid)), grid


def _fit_parts(fitted: dict, coords: np.ndarray, all_coords: np.ndarray, fit_grid: tuple, strict: bool = False,
               first: tuple = ()) -> tuple:
    """Every access of the samples (``fitted``: their steps, tiles, tensors' pitches and sizes, the
    granule) fitted on ``coords`` and extended to ``all_coords``: ``(parts, inexact, wrapped,
    gathered)``, parts as ``_to_trace`` takes them. ``strict``: no fit that includes the edges
    (a fit in digits, whose edges the samples may not show otherwise). ``first``: accesses
    ``(step, index)`` fitted before the others (a search tries the one that failed last first).
    Raises TraceError (see ``extend``) with ``access``, the failing ``(step, index)``, and ``hopeless``
    where no split of the coordinates can help (an access in different tensors)."""
    shape, shaped, tiles, pitch, size = (fitted[k] for k in ("shape", "shaped", "tiles", "pitch", "size"))
    granule_bytes, ntiles = fitted["granule"], len(all_coords)
    parts = []  # (step, tensor, is_store, r0, r1, c0, c1) per rectangle; arrays over all tiles
    inexact = wrapped = gathered = 0
    keys = [(s, j) for s in range(len(shape)) for j in range(len(shape[s]))]
    if first:
        keys = [k for k in first if k in set(keys)] + [k for k in keys if k not in set(first)]
    for s, j in keys:
        try:
            piece = _fit_one(fitted, s, j, coords, all_coords, fit_grid, strict)
        except TraceError as exc:
            exc.access = (s, j)
            raise
        if piece is None:
            continue
        kind, value = piece
        if kind == "gather":   # a scalar gather (a row's label): a block of each tile's own
            gathered += 1
            parts.append((s, _GATHER_TENSORS + len(parts), value, *_private(ntiles, granule_bytes)))
            continue
        tensor, store, pieces, counted, wraps, p, size_t = value
        inexact += counted
        wrapped += wraps
        for values in pieces:
            for r0, r1, c0, c1 in _rectangles(values, p):
                parts.append((s, tensor, store, *_round_columns(r0, r1, c0, c1, p, size_t, granule_bytes)))
    return parts, inexact, wrapped, gathered


def _fit_one(fitted: dict, s: int, j: int, coords, all_coords, fit_grid: tuple, strict: bool):
    """Access ``j`` of step ``s`` fitted and extended: None (masked off in every sample),
    ``("gather", is_store)``, or ``("rects", (tensor, is_store, pieces, inexact, wraps, pitch, size))``."""
    shaped, tiles, pitch, size, granule_bytes = (fitted[k] for k in ("shaped", "tiles", "pitch", "size", "granule"))
    rows = [shaped[t][s][j] for t in tiles]
    touched = [r for r in rows if r[3] > r[2]]
    if not touched:
        return None                                     # masked off in every sampled tile
    tensor, site, store = touched[0][1], touched[0][0], touched[0][5]
    small = all(r[4] <= SCALAR_GATHER_BYTES and r[2] // granule_bytes == (r[3] - 1) // granule_bytes
                for r in touched)
    label = f"access {j} of step {s} (the {'store' if store else 'load'} at line {site} of the kernel)"
    if any(r[1] != tensor for r in touched):
        if not small:
            failure = TraceError(f"access {j} of step {s} (line {site}) falls in different tensors in "
                                 f"different tiles: data-dependent addressing")
            failure.hopeless = True
            raise failure
        return ("gather", bool(store))
    p, size_t = pitch.get(tensor, 0), size.get(tensor, -1)
    try:
        pieces, counted = _extend_access(rows, p, size_t, coords, all_coords, fit_grid, label, strict)
    except TraceError:
        if not small:
            raise
        return ("gather", bool(store))
    wraps = bool(any(r[10] for r in touched) and len(pieces) > 1)
    return ("rects", (tensor, bool(store), pieces, counted, wraps, p, size_t))


def _split(coords: np.ndarray, all_coords: np.ndarray, grid: tuple, axis: int, inner: int) -> tuple:
    """Coordinate ``axis`` replaced by ``(c % inner, c // inner)`` in the sampled and all tiles'
    coordinates and in the grid the fit sees."""
    if inner < 1 or grid[axis] % inner:
        raise TraceError(f"coordinate {axis} of the tile grid {grid} cannot be split by {inner}")

    def split(c: np.ndarray) -> np.ndarray:
        return np.concatenate([c[:, :axis], c[:, axis:axis + 1] % inner, c[:, axis:axis + 1] // inner,
                               c[:, axis + 1:]], axis=1)
    return split(coords), split(all_coords), grid[:axis] + (inner, grid[axis] // inner) + grid[axis + 1:]


def _private(tiles: int, granule: int) -> tuple:
    """Rectangles ``(r0, r1, c0, c1)`` giving each tile one granule of its own (row t of a tensor of
    its own): an access whose address depends on data, too small to matter for reuse."""
    rows = np.arange(tiles, dtype=np.int64)
    return rows, rows + 1, np.zeros(tiles, dtype=np.int64), np.full(tiles, granule, dtype=np.int64)


#: Every field of a recorded access is an integer below this in magnitude (byte offsets far past any
#: memory, with room for the products of int64 arithmetic); the worker's records are data, and anything
#: else is refused.
_FIELD_BOUND = 1 << 56


def _normalise(access) -> tuple:
    """A recorded access as the eighteen-element tuple (module docstring): six-element records
    are contiguous of unknown size, ten-element ones wrap nowhere, and records of fewer than 18
    fields do not say how many sectors they touch (None: taken as described)."""
    access = tuple(access)
    if len(access) == 6:
        access = (*access, 0, 0, 0, -1)
    if len(access) == 10:
        access = (*access, *_NO_WRAP)
    if len(access) == 17:
        access = (*access, None)
    if len(access) != 18:
        raise TraceError(f"a recorded access has {len(access)} fields, expected 6, 10, 17 or 18: {access}"[:300])
    if not (all(isinstance(v, numbers.Integral) and abs(v) < _FIELD_BOUND for v in access[:17])
            and (access[17] is None or (isinstance(access[17], numbers.Integral) and 0 <= access[17] < _FIELD_BOUND))):
        raise TraceError(f"a recorded access holds a field that is no integer of the recorder's: {access}"[:300])
    return access


def _extend_access(rows: list, pitch: int, size: int, coords, all_coords, grid: tuple, label: str,
                   strict: bool = False) -> tuple:
    """One access (its record in every sampled tile) extended to every tile: ``([values], inexact)``,
    each values array as ``_fit_access`` returns them, more than one where the access wraps around
    its tensor's edge (the parts of it on either side). Read as recorded first; where that fails
    and some sampled tile wrapped, read with the wrapped part moved past the tensor's end, then
    before its start (an access that continues past the edge on the far side, the tutorial GEMM's
    ``(pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M``, or one that comes from before the start);
    those readings are tried first where a sampled tile wrapped, the plain one last."""
    failure = None
    readings = [(rows, None)]
    if any(r[10] for r in rows if r[3] > r[2]):   # the wrapped readings first: as recorded, a
        # wrapped tile's bounding box spans the tensor, which a fit on few tiles may take as affine
        readings = [(_unwrapped(rows, shift), shift) for shift in (0, -1)] + readings
    for records, shift in readings:
        obs, bounds, sides, inexact, axis = _observations(records, pitch, size, wrap=shift is not None)
        if obs is None:
            continue
        try:
            values = _fit_access(obs, coords, all_coords, grid, sides, bounds, label, strict)
        except TraceError as exc:
            failure = failure or exc
            continue
        if shift is None:
            return [values], inexact
        wrapped = next(r for r in records if r[3] > r[2] and r[10])
        period = wrapped[11] * (wrapped[14] if wrapped[10] == 1 and len(obs[0]) == 2 else 1)  # rows -> bytes
        return _fold(values, axis, period), inexact
    if not pitch and failure is not None and failure.edge:
        values = _pitched_reading(rows, size, coords, all_coords, grid, label, strict)
        if values is not None:
            return [values], 0
    raise failure


def _pitched_reading(rows: list, size: int, coords, all_coords, grid: tuple, label: str, strict: bool = False):
    """A contiguous access whose clip at the edges is no box in bytes, read in rows instead: a
    row of a 2-D tensor per program, masked at the row's end (``cols < N``), the row advancing
    with one tile coordinate (``x_ptr + row * stride + cols`` on a grid of rows by column blocks).
    Each byte range is taken as a one-row rectangle in rows of a pitch P, P the byte step of a
    tile coordinate (largest first), fitted with its clip as a box in (rows, byte columns) and
    turned back into byte ranges: int64 ``[tiles, 2]``, or None where no such pitch fits."""
    touched = [i for i, r in enumerate(rows) if r[3] > r[2]]
    active = [a for a, g in enumerate(grid) if g > 1]
    if len(touched) <= len(active) + 1:
        return None
    design = np.column_stack([np.ones(len(touched)), coords[touched][:, active]]).astype(np.float64)
    starts = np.array([rows[i][2] for i in touched], dtype=np.float64)
    steps = np.round(np.linalg.lstsq(design, starts, rcond=None)[0][1:]).astype(np.int64)
    longest = max(rows[i][3] - rows[i][2] for i in touched)
    for pitch in sorted({int(abs(c)) for c in steps if abs(c) >= longest}, reverse=True):
        rects = [_as_rect(r, pitch) if r[3] > r[2] else () for r in rows]
        if any(r is None or (r and r[1] != r[0] + 1) for r in rects):
            continue                                         # not one row each at this pitch
        obs = np.array([r if r else (np.nan,) * 4 for r in rects], dtype=np.float64)
        nrows = -(-size // pitch) if size > 0 else np.inf
        try:
            values = _fit_access(obs, coords, all_coords, grid, "lhlh",
                                 [(0, nrows), (0, nrows), (0, pitch), (0, pitch)], label, strict)
        except TraceError:
            continue
        r0, r1, c0, c1 = values.T
        some = (r1 > r0) & (c1 > c0)
        if np.any(some & (r1 != r0 + 1)):
            continue
        return np.stack([np.where(some, r0 * pitch + c0, 0), np.where(some, r0 * pitch + c1, 0)], axis=1)
    return None


def _unwrapped(rows: list, shift: int) -> list:
    """The records with each wrapped one read in its virtual form (fields 12-16), moved by
    ``shift`` periods (0: the wrapped part past the tensor's end, -1: before its start)."""
    out = []
    for r in rows:
        if r[3] <= r[2] or not r[10]:
            out.append(r)
            continue
        axis, period, start, end, pitch, col_lo, col_hi = r[10:17]
        if axis == 1:       # rows: the whole rectangle moves by period rows
            start, end = start + shift * period * pitch, end + shift * period * pitch
        elif pitch:         # byte columns of a 2-D access
            start, end, col_lo, col_hi = (start + shift * period, end + shift * period,
                                          col_lo + shift * period, col_hi + shift * period)
        else:               # a contiguous range
            start, end = start + shift * period, end + shift * period
        out.append((r[0], r[1], start, end, r[4], r[5], pitch, col_lo, col_hi, r[9], *r[10:]))
    return out


def _observations(rows: list, pitch: int, size: int, wrap: bool) -> tuple:
    """``(obs, bounds, sides, inexact, wrap quantity)`` of one access's records: rectangles (rows x
    byte columns) where every touched record is one in the tensor's grid of ``pitch``-byte rows,
    else byte ranges. With ``wrap``, the quantity pair on the wrapped axis (0 for rows or a byte
    range, 2 for byte columns) is unbounded, and obs is None where the records' virtual forms
    are no rectangles of the tensor's pitch."""
    touched = [r for r in rows if r[3] > r[2]]
    rects = [_as_rect(r, pitch) if r[3] > r[2] else () for r in rows] if pitch else [None]
    axis = next((r[10] for r in touched if r[10]), 0)
    if pitch and all(r is not None for r in rects):         # 2-D: rows x byte columns
        obs = np.array([r if r else (np.nan,) * 4 for r in rects], dtype=np.float64)
        nrows = -(-size // pitch) if size > 0 else np.inf
        bounds, sides = [(0, nrows), (0, nrows), (0, pitch), (0, pitch)], "lhlh"
        q = 0 if axis == 1 else 2
    else:                                                   # contiguous byte ranges
        if wrap and any(r[10] and r[14] and (r[15], r[16]) != (0, r[14]) for r in touched):
            return None, None, None, 0, 0                   # a virtual rectangle of part rows
        obs = np.array([(r[2], r[3]) if r[3] > r[2] else (np.nan, np.nan) for r in rows], dtype=np.float64)
        bounds, sides = [(0, size if size > 0 else np.inf)] * 2, "lh"
        q = 0
    if wrap:
        bounds[q] = bounds[q + 1] = (-np.inf, np.inf)
    return obs, bounds, sides, sum(r[6] > 0 for r in touched) if len(sides) == 2 else 0, q


def _fold(values: np.ndarray, q: int, period: int) -> list:
    """An access extended in virtual coordinates, its quantity pair ``(q, q + 1)`` folded back into
    ``[0, period)``: the part inside, the part past the end (from 0 on) and the part before the
    start (up to the end); empty (lower == upper) where a tile has no such part."""
    lo, hi = values[:, q], values[:, q + 1]
    inside, after, before = values.copy(), values.copy(), values.copy()
    inside[:, q], inside[:, q + 1] = np.maximum(lo, 0), np.minimum(hi, period)
    past = hi > period
    after[:, q], after[:, q + 1] = 0, np.where(past, hi - period, 0)
    early = lo < 0
    before[:, q], before[:, q + 1] = np.where(early, lo + period, period), period
    return [inside, after, before]


def _shape(steps: list) -> list:
    return [tuple((a[0], bool(a[5])) for a in step) for step in steps]


def _tensor_pitches(records: list) -> dict:
    """Tensor -> the row pitch its 2-D accesses use most (the smallest among equals); tensors
    only accessed contiguously are absent."""
    counts = {}
    for r in records:
        own = r[14] if r[10] else r[6]     # a wrapped access: the pitch of its virtual rectangle
        if own > 0:
            counts.setdefault(r[1], Counter())[own] += 1
    return {t: min(c, key=lambda p: (-c[p], p)) for t, c in counts.items()}


def _tensor_sizes(records: list) -> dict:
    sizes = {}
    for r in records:
        sizes[r[1]] = max(sizes.get(r[1], -1), int(r[9]))
    return sizes


def _as_rect(access: tuple, pitch: int):
    """``(r0, r1, c0, c1)``: the rows ``[r0, r1)`` and byte columns ``[c0, c1)`` of an access in
    a grid of rows of ``pitch`` bytes, or None where the access is no rectangle there (a
    contiguous run crossing rows partly, another pitch)."""
    start, end, own, col_lo, col_hi = access[2], access[3], access[6], access[7], access[8]
    if own == pitch:   # a virtual (unwrapped) one may reach past the row: its columns above pitch
        return (start // pitch, (end - 1 - max(col_hi - pitch, 0)) // pitch + 1, col_lo, col_hi)
    if own == 0:
        r0, r1 = start // pitch, (end - 1) // pitch
        if r0 == r1:
            return (r0, r0 + 1, start - r0 * pitch, end - r0 * pitch)
        if start % pitch == 0 and end % pitch == 0:
            return (r0, r1 + 1, 0, pitch)
    return None


def _fit_access(obs: np.ndarray, coords: np.ndarray, all_coords: np.ndarray, grid: tuple,
                sides: str, bounds: list, label: str, strict: bool = False) -> np.ndarray:
    """Each quantity of one access (columns of ``obs``, one row per sample, NaN rows where the
    access was masked off) as an affine function of the tile coordinates, clipped to a box;
    returns int64 ``[tiles, quantities]`` for every tile, where a lower bound >= its upper bound
    (quantity pairs (0, 1), (2, 3)) marks an access that touches nothing. See the module
    docstring for the strategies tried. Raises TraceError naming ``label``."""
    active = [a for a, g in enumerate(grid) if g > 1]
    design = np.column_stack([np.ones(len(coords)), coords[:, active]]).astype(np.float64)
    design_all = np.column_stack([np.ones(len(all_coords)), all_coords[:, active]]).astype(np.float64)
    edged = [a for a, g in enumerate(grid) if g >= 3]
    high = np.array([grid[a] - 2 for a in edged])
    off_low = np.all(coords[:, edged] >= 1, axis=1)
    off_high = np.all(coords[:, edged] <= high, axis=1)
    everywhere = np.ones(len(coords), dtype=bool)
    strategies = [("on the sampled tiles off the edges that clip each side", off_low, off_high, True),
                  ("on the sampled interior tiles", off_low & off_high, off_low & off_high, True)] if edged else []
    if not strict or not edged:   # strict (a fit in digits): edges are excluded and every fit checked
        strategies.append((_EXACT, everywhere, everywhere, False))
    touched = ~np.isnan(obs[:, 0])
    failures = []
    for name, low_set, high_set, checked in strategies:
        coef = np.zeros((design.shape[1], obs.shape[1]))
        failure = None
        for q, side in enumerate(sides):
            sel = (low_set if side == "l" else high_set) & touched
            x, y = design[sel], obs[sel, q]
            if len(x) == 0 or np.linalg.matrix_rank(x) < x.shape[1]:
                failure = ("few", f"{int(sel.sum())} usable sampled tiles do not determine an affine map")
                break
            if checked and len(x) <= x.shape[1]:
                failure = ("few", f"{int(sel.sum())} usable sampled tiles leave none to check the fit")
                break
            c = np.round(np.linalg.lstsq(x, y, rcond=None)[0])
            if not np.array_equal(x @ c, y):
                bad = tuple(int(v) for v in coords[sel][np.argmax(np.abs(x @ c - y))])
                failure = ("affine", f"no affine map gives what tile {bad} touches")
                break
            coef[:, q] = c
        if failure is None:
            box = _learn_box(design @ coef, obs, touched, sides, bounds)
            predicted = _clip(design @ coef, box, sides)
            empty = _empty(predicted)
            for i in range(len(coords)):
                if empty[i] != (not touched[i]) or (touched[i] and not np.array_equal(predicted[i], obs[i])):
                    what = "nothing" if not touched[i] else _describe(obs[i], sides)
                    would = "nothing" if empty[i] else _describe(predicted[i], sides)
                    failure = ("edge", f"tile {tuple(int(v) for v in coords[i])} touches {what} where the "
                                       f"affine map clipped to the tensor and the edges gives {would}")
                    break
        if failure is None:
            values = _clip(design_all @ coef, box, sides)
            return np.where(np.isfinite(values), values, 0).astype(np.int64)
        failures.append((name, failure))
    # an access affine on some tiles but clipped oddly at the edges says more than "not affine"
    real = sorted([(n, f) for n, f in failures if f[0] != "few"], key=lambda nf: nf[1][0] != "edge")
    if not real:
        raise TraceError(f"grid {grid} gives too few distinct samples to fit an affine map ({label}: "
                         f"{failures[-1][1][1]})")
    name, (kind, detail) = real[0]
    small = "" if any(f[0] != "few" for n, f in failures if n != _EXACT) else (
        f" (the grid {grid} has too few tiles to fit away from its edges, so the fit had to include them)")
    if kind == "edge":
        raise TraceError(f"{label}: its address is an affine function of the tile coordinates {name}{small}, "
                         f"but not one clipped consistently at the edges: {detail} (a mask that is not "
                         f"a box, or data-dependent addressing?)", edge=True)
    raise TraceError(f"{label}: its address is not an affine function of the tile coordinates "
                     f"{name}{small}: {detail} (data-dependent addressing?)")


def _learn_box(predicted: np.ndarray, obs: np.ndarray, touched: np.ndarray, sides: str, bounds: list) -> list:
    """Per quantity, the bound a mask sets: the tensor's, narrowed to what sampled tiles touch
    where they touch less than predicted (a lower bound above the tensor's start, an upper one
    below its end)."""
    box = []
    for q, side in enumerate(sides):
        lo, hi = bounds[q]
        got, want = obs[touched, q], predicted[touched, q]
        if side == "l":
            narrower = got[got > want]
            box.append(max(lo, narrower.max()) if narrower.size else lo)
        else:
            narrower = got[got < want]
            box.append(min(hi, narrower.min()) if narrower.size else hi)
    return box


def _clip(values: np.ndarray, box: list, sides: str) -> np.ndarray:
    out = values.copy()
    for q, side in enumerate(sides):
        out[:, q] = np.maximum(out[:, q], box[q]) if side == "l" else np.minimum(out[:, q], box[q])
    return out


def _empty(values: np.ndarray) -> np.ndarray:
    return np.any(values[:, 0::2] >= values[:, 1::2], axis=1)


def _describe(values: np.ndarray, sides: str) -> str:
    v = [int(x) if np.isfinite(x) else x for x in values]
    return f"rows [{v[0]}, {v[1]}) x bytes [{v[2]}, {v[3]})" if len(sides) == 4 else f"bytes [{v[0]}, {v[1]})"


def _rectangles(values: np.ndarray, pitch: int) -> list:
    """An access's extension (``_fit_access``'s values, 4 columns: a rectangle; 2: a byte range)
    as rectangles ``(r0, r1, c0, c1)`` of arrays over all tiles (empty where r0 >= r1 or
    c0 >= c1): a range in a tensor of rows of ``pitch`` bytes is its head, whole rows and tail;
    in a tensor of no pitch, one row."""
    if values.shape[1] == 4:
        return [tuple(values.T)]
    start, end = values[:, 0], values[:, 1]
    if not pitch:
        return [(np.zeros_like(start), np.where(end > start, 1, 0), start, end)]
    first, last = start // pitch, (end - 1) // pitch
    some = end > start
    head = (first, np.where(some, first + 1, first), start - first * pitch,
            np.where(last > first, pitch, end - first * pitch))
    middle = (first + 1, np.maximum(last, first + 1), np.zeros_like(start), np.full_like(start, pitch))
    tail = (last, np.where(some & (last > first), last + 1, last), np.zeros_like(start), end - last * pitch)
    return [head, middle, tail]


def _round_columns(r0, r1, c0, c1, pitch: int, size: int, granule: int) -> tuple:
    """Byte columns rounded out to whole granules, kept within the row (``pitch`` bytes, or the
    tensor rounded up to a granule where it has no pitch); empty rectangles set to rows [0, 0)."""
    row = pitch if pitch else (-(-size // granule) * granule if size > 0 else None)
    lo = (c0 // granule) * granule
    hi = -(-c1 // granule) * granule
    if row is not None:
        hi = np.minimum(hi, row)
    keep = (r0 < r1) & (lo < hi)
    zero = np.zeros_like(r0)
    return (np.where(keep, r0, zero), np.where(keep, r1, zero), np.where(keep, lo, zero), np.where(keep, hi, zero))


def _to_trace(parts: list, num_tiles: int, steps: int, programs_per_cu: int, source: str) -> TileTrace:
    """Cut each tensor's rectangles into cells (all row bounds x all column bounds), number the
    cells touched, and assemble the TileTrace: each rectangle's cells, row-major, in its step."""
    bounds = {}
    for _, tensor, _, r0, r1, c0, c1 in parts:
        keep = r0 < r1
        rows, cols = bounds.setdefault(tensor, ([], []))
        rows.extend([r0[keep], r1[keep]])
        cols.extend([c0[keep], c1[keep]])
    grids, base = {}, 0
    for tensor in sorted(bounds):
        rows, cols = (np.unique(np.concatenate(b)) if b else np.zeros(0, np.int64) for b in bounds[tensor])
        grids[tensor] = (rows, cols, base)
        base += max(len(rows) - 1, 0) * max(len(cols), 1)
    columns = []  # (step, cell ids [tiles], is_store) per key slot
    for step, tensor, store, r0, r1, c0, c1 in parts:
        rows, cols, first = grids[tensor]
        i0, i1 = np.searchsorted(rows, r0), np.searchsorted(rows, r1)
        k0, k1 = np.searchsorted(cols, c0), np.searchsorted(cols, c1)
        nr, nc = np.where(r0 < r1, i1 - i0, 0), np.where(r0 < r1, k1 - k0, 0)
        count, across = nr * nc, np.maximum(nc, 1)
        for m in range(int(count.max()) if count.size else 0):
            cell = first + (i0 + m // across) * len(cols) + (k0 + m % across)
            columns.append((step, np.where(m < count, cell, -1), store))
    width = max([sum(1 for c in columns if c[0] == s) for s in range(steps)] + [1])
    keys = new_keys(num_tiles, steps, width)
    is_store = np.zeros((steps, width), dtype=bool)
    slot = [0] * steps
    for step, cell, store in columns:
        keys[:, step, slot[step]] = cell
        is_store[step, slot[step]] = store
        slot[step] += 1
    return _numbered(keys, np.broadcast_to(is_store, keys.shape), grids, programs_per_cu, source)


def _numbered(keys: np.ndarray, is_store: np.ndarray, grids: dict, programs_per_cu: int, source: str) -> TileTrace:
    """The TileTrace of cell ids ``keys`` (-1: none; changed in place to block ids, numbered in the
    order of the cells) whose accesses are stores where ``is_store`` (the shape of ``keys``), each
    tensor's cells cut by ``grids[tensor] = (row bounds, column bounds, first cell id)``."""
    valid = keys >= 0
    unique, inverse = np.unique(keys[valid], return_inverse=True)
    keys[valid] = inverse.ravel()
    block_bytes = np.zeros(len(unique), dtype=np.int64)
    for tensor, (rows, cols, first) in grids.items():
        inside = (unique >= first) & (unique < first + max(len(rows) - 1, 0) * max(len(cols), 1))
        local = unique[inside] - first
        ri, ci = local // len(cols), local % len(cols)
        block_bytes[inside] = (rows[ri + 1] - rows[ri]) * (cols[ci + 1] - cols[ci])
    flat_store = is_store[valid]
    block_is_write = np.zeros(len(unique), dtype=bool)
    np.logical_or.at(block_is_write, inverse.ravel(), flat_store)
    loaded = np.zeros(len(unique), dtype=bool)              # blocks also loaded somewhere
    np.logical_or.at(loaded, inverse.ravel(), ~flat_store)
    access_is_write = is_store & valid
    return TileTrace(keys=keys, block_bytes=block_bytes, block_is_write=block_is_write,
                     programs_per_cu=programs_per_cu, source=source,
                     access_is_write=access_is_write.copy() if (loaded & block_is_write).any() else None)


# -- recording (runs in the worker, under the Triton interpreter) -------------------------------

def record_samples(spec, module, problem: dict, meta: dict, dtype: str, pids: list,
                   divisors: set | None = None) -> list:
    """Run the programs ``pids`` of one real launch under the interpreter, recording every load
    and store; returns one ordered access list per pid (see the module docstring for an access's
    fields). Loads still read memory (addresses may depend on loaded data); ``tl.dot`` is
    skipped. ``divisors``, where given, receives every scalar an integer was divided by (``extend``'s
    ``divisors``). Raises TraceError for multi-launch kernels and for addresses outside every input
    tensor."""
    from swizzleperf.profiling.interpreter_hooks import sampled_launches
    inputs = spec.make_inputs(problem, 0, "cpu", dtype)
    tensors = [t for t in inputs.values() if hasattr(t, "data_ptr")]
    ranges = np.array([(t.data_ptr(), t.data_ptr() + t.numel() * t.element_size()) for t in tensors],
                      dtype=np.int64).reshape(-1, 2)
    layouts = [(tuple(t.shape), tuple(t.stride())) if hasattr(t, "stride") else None for t in tensors]
    log, outside, stopped = [], [], []  # outside: sites outside every tensor; stopped: a second
    # launch began. Both are raised after the launch: the interpreter rewraps what a hook raises.

    def record(launch, index, addrs, itemsize, is_store):
        if launch > 0:  # stop at the second launch's first access (a wavefront runs hundreds)
            stopped.append(launch)
            raise TraceError("several launches")
        site = _site(module.__file__)
        if addrs.size == 0:
            log.append((launch, index, access_record(site, -1, addrs, itemsize, is_store, 0)))
            return
        lo = int(addrs.min())
        inside = np.flatnonzero((ranges[:, 0] <= lo) & (lo < ranges[:, 1]))
        if inside.size == 0:
            outside.append(site)
            return
        tensor = int(inside[0])
        base = int(ranges[tensor, 0])
        log.append((launch, index, access_record(site, tensor, np.unique(addrs) - base, itemsize, is_store,
                                                 int(ranges[tensor, 1] - base), layouts[tensor])))

    try:
        with sampled_launches(pids, record, None if divisors is None else divisors.add):
            spec.launch(inputs, **meta)
    except Exception:
        if not stopped:
            raise
    if stopped:
        raise TraceError("the kernel's launch runs several Triton launches: trace one launch at a time")
    if outside:
        raise TraceError(f"the access at line {outside[0]} of the kernel reads or writes outside every "
                         f"input tensor (memory the launch allocates itself?): cannot trace it")
    per_pid = [[] for _ in pids]
    for _, index, access in log:
        per_pid[index].append(access)
    return per_pid


def access_record(site: int, tensor: int, offsets: np.ndarray, itemsize: int, is_store: bool,
                  tensor_bytes: int, layout: tuple | None = None) -> tuple:
    """The recorded access (module docstring) of one load or store: the sorted distinct byte
    ``offsets`` of its elements (of ``itemsize`` bytes) within ``tensor`` (``tensor_bytes``
    long); an empty ``offsets`` gives the empty access. ``layout`` (the tensor's shape and strides
    in elements) lets an access that wraps around the tensor's edge be recognised (fields 11-17)."""
    offsets = np.asarray(offsets, dtype=np.int64)
    if offsets.size == 0:
        return (site, -1, 0, 0, 0, bool(is_store), 0, 0, 0, 0, *_NO_WRAP, 0)
    pitch, col_lo, col_hi = _geometry(offsets, itemsize)
    sectors = np.unique(np.concatenate([offsets // MERGE_GAP_BYTES, (offsets + itemsize - 1) // MERGE_GAP_BYTES]))
    return (site, tensor, int(offsets[0]), int(offsets[-1]) + itemsize, int(offsets.size) * itemsize,
            bool(is_store), pitch, col_lo, col_hi, int(tensor_bytes), *_wrap(offsets, itemsize, layout),
            int(sectors.size))


def _wrap(offsets: np.ndarray, itemsize: int, layout: tuple | None) -> tuple:
    """Fields 11-17 of a record: ``(axis, period, start, end, pitch, col_lo, col_hi)`` where the
    access wraps around an edge of its tensor (a vector, or a matrix of unit inner stride): along
    one axis it touches indices ``[0, b)`` and ``[a, S)`` and nothing between, and is a whole
    rectangle. Axis 1: rows (period S rows); axis 2: byte columns of the rows, or bytes of a
    vector (period S x itemsize bytes). The rest is the access's virtual form, the part ``[0, b)``
    moved past the end (``[a, S + b)``), in the record's own fields' meaning. ``_NO_WRAP``
    elsewhere."""
    if layout is None or np.any(offsets % itemsize):
        return _NO_WRAP
    dims = sorted(((int(n), int(st)) for n, st in zip(*layout) if n > 1), key=lambda d: -d[1])
    if not dims or len(dims) > 2 or dims[-1][1] != 1:
        return _NO_WRAP
    index = offsets // itemsize
    if len(dims) == 1:
        runs = _two_runs(index, dims[0][0])
        if runs is None:
            return _NO_WRAP
        a, b = runs
        return (2, dims[0][0] * itemsize, a * itemsize, (dims[0][0] + b) * itemsize, 0, 0, 0)
    (n_rows, row_stride), (n_cols, _) = dims
    rows, cols = np.unique(index // row_stride), np.unique(index % row_stride)
    if cols[-1] >= n_cols or rows.size * cols.size != index.size:
        return _NO_WRAP                                   # not one whole rectangle
    wrap_rows, wrap_cols = _two_runs(rows, n_rows), _two_runs(cols, n_cols)
    if (wrap_rows is None) == (wrap_cols is None):
        return _NO_WRAP                                   # no wrap, or a wrap on both axes
    r0, r1 = (wrap_rows[0], n_rows + wrap_rows[1]) if wrap_rows else _run(rows)
    c0, c1 = (wrap_cols[0], n_cols + wrap_cols[1]) if wrap_cols else _run(cols)
    if r0 is None or c0 is None:
        return _NO_WRAP
    pitch = row_stride * itemsize
    period = n_rows if wrap_rows else n_cols * itemsize
    return (1 if wrap_rows else 2, period, r0 * pitch + c0 * itemsize, (r1 - 1) * pitch + c1 * itemsize,
            pitch, c0 * itemsize, c1 * itemsize)


def _two_runs(values: np.ndarray, size: int):
    """``(a, b)`` where the sorted distinct ``values`` are exactly ``[0, b)`` and ``[a, size)``
    with ``b < a``, else None."""
    values = np.unique(values)
    if values.size < 2 or values[0] != 0 or values[-1] != size - 1:
        return None
    gaps = np.flatnonzero(np.diff(values) != 1)
    if gaps.size != 1:
        return None
    return int(values[gaps[0] + 1]), int(values[gaps[0]]) + 1


def _run(values: np.ndarray) -> tuple:
    """``(first, last + 1)`` of sorted distinct values that are one run, else ``(None, None)``."""
    return (int(values[0]), int(values[-1]) + 1) if values[-1] - values[0] + 1 == values.size else (None, None)


def _geometry(offsets: np.ndarray, itemsize: int) -> tuple:
    """``(pitch, col_lo, col_hi)`` of an access's sorted distinct byte offsets: ``(0, 0, 0)`` for
    one run (gaps under ``MERGE_GAP_BYTES`` merged); else the pitch of its runs' starts (their
    gcd) and the byte columns bounding the runs within rows of that pitch. A run crossing a row
    makes it one run (its bounding range)."""
    cut = np.flatnonzero(np.diff(offsets) - itemsize >= MERGE_GAP_BYTES)
    if cut.size == 0:
        return 0, 0, 0
    starts = offsets[np.concatenate([[0], cut + 1])]
    ends = offsets[np.concatenate([cut, [offsets.size - 1]])] + itemsize
    pitch = int(np.gcd.reduce(np.diff(starts)))
    rows = starts // pitch
    col_lo, col_hi = starts - rows * pitch, ends - rows * pitch
    if col_hi.max() > pitch:
        return 0, 0, 0
    return pitch, int(col_lo.min()), int(col_hi.max())


def _site(kernel_file: str) -> int:
    """Source line of the innermost frame in the kernel's file (the tl.load / tl.store call)."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename != kernel_file:
        frame = frame.f_back
    return frame.f_lineno if frame is not None else -1
