"""The memory-access tracer: a kernel's ``TileTrace`` at its real problem size, with no GPU and no
hand-written access model.

How (and why this way): pushing all program-steps of a real launch through the Triton interpreter
is far too slow (the default GEMM has 500 000 program-steps at about 5 ms each). So a worker runs
only a few programs of the real launch under the interpreter (``record_samples``: the launch's grid
is replaced by the sampled programs, program ids and grid size are reported as in the real launch,
every load and store is recorded with its call site, ``tl.dot`` is skipped), and this module fits
each access's address range as an affine function of the tile coordinates, checks the fit on
further samples, and extends it to every tile (``extend``). Kernels whose addresses depend on data
(a CSR gather) fail the check and are reported as such.

The hooks into the interpreter, the one part that differs between Triton versions (3.6 on the GPU
machines, 3.9 here), are in ``interpreter_hooks.py``.

Recorded access: ``(site, tensor, start, end, nbytes, is_store)``: the call site (source line),
the index of the input tensor it falls in, the byte range ``[start, end)`` within that tensor, and
the distinct bytes touched. A *step* ends where a call site repeats (one loop iteration).
"""
from __future__ import annotations

import math
import sys

import numpy as np

from swizzleperf.profiling.trace import TileTrace


class TraceError(ValueError):
    """The kernel's accesses cannot be extended from samples (not affine, or differently shaped)."""


def sample_tiles(grid: tuple) -> list:
    """Tile coordinates to trace: the origin, its neighbours along each axis, and interior tiles
    for the check; all within ``grid`` and distinct."""
    picks = [tuple(0 for _ in grid)]
    for axis in range(len(grid)):
        picks.append(tuple(1 if a == axis else 0 for a in range(len(grid))))
    picks.append(tuple(1 for _ in grid))
    picks.append(tuple(g // 2 for g in grid))
    picks.append(tuple(max(0, g - 2) for g in grid))
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


def extend(samples: dict, grid: tuple, programs_per_cu: int, source: str) -> TileTrace:
    """The TileTrace of every tile of ``grid`` from traced samples.

    Args:
        samples: tile coordinates (tuple) -> that program's ordered accesses (list of
            ``(site, tensor, start, end, nbytes, is_store)``).
        grid: the logical tile grid; tiles are numbered row-major.

    Raises:
        TraceError: the samples differ in shape (steps, sites), an address is not affine in the
            tile coordinates, or there are too few samples to fit.
    """
    tiles = list(samples)
    shaped = {t: group_steps(samples[t]) for t in tiles}
    shape = _shape(shaped[tiles[0]])
    for t in tiles[1:]:
        if _shape(shaped[t]) != shape:
            raise TraceError(f"tile {t} has another access pattern than tile {tiles[0]} (steps or "
                             f"call sites differ): data-dependent control flow or addressing")
    coords = np.array([(1, *t) for t in tiles], dtype=np.float64)  # [samples, 1 + ndim]
    if np.linalg.matrix_rank(coords) < coords.shape[1]:
        raise TraceError(f"grid {grid} gives too few distinct samples to fit an affine map")
    all_coords = np.stack(np.unravel_index(np.arange(math.prod(grid)), grid), axis=1)  # [tiles, ndim]
    steps, width = len(shape), max(len(s) for s in shape)
    tensor = np.full((steps, width), -1, dtype=np.int64)
    start = np.zeros((math.prod(grid), steps, width), dtype=np.int64)
    end, nbytes = np.zeros_like(start), np.zeros((steps, width), dtype=np.int64)
    store = np.zeros((steps, width), dtype=bool)
    for s, j in ((s, j) for s in range(steps) for j in range(len(shape[s]))):
        rows = [shaped[t][s][j] for t in tiles]
        tensor[s, j], nbytes[s, j], store[s, j] = rows[0][1], rows[0][4], rows[0][5]
        for target, column in ((start, 2), (end, 3)):
            target[:, s, j] = _affine([r[column] for r in rows], coords, all_coords, s, j)
    return _to_trace(tensor, start, end, nbytes, store, programs_per_cu, source)


def _shape(steps: list) -> list:
    return [tuple((a[0], a[1], a[5]) for a in step) for step in steps]


def _affine(values: list, coords: np.ndarray, all_coords: np.ndarray, step: int, j: int) -> np.ndarray:
    """Fit ``values`` (one per sample) as c0 + c . coords, exactly; evaluate on every tile."""
    y = np.asarray(values, dtype=np.float64)
    c, *_ = np.linalg.lstsq(coords, y, rcond=None)
    c = np.round(c)
    if not np.array_equal(coords @ c, y):
        raise TraceError(f"access {j} of step {step}: its address is not an affine function of the "
                         f"tile coordinates (data-dependent addressing?)")
    return (c[0] + all_coords @ c[1:]).astype(np.int64)


def _to_trace(tensor, start, end, nbytes, store, programs_per_cu: int, source: str) -> TileTrace:
    """Number the distinct (tensor, start, end) blocks and assemble the TileTrace."""
    tiles, steps, width = start.shape
    valid = np.broadcast_to(tensor >= 0, start.shape)
    stacked = np.stack([np.broadcast_to(tensor, start.shape)[valid], start[valid], end[valid]], axis=1)
    unique, inverse = np.unique(stacked, axis=0, return_inverse=True)
    keys = np.full(start.shape, -1, dtype=np.int64)
    keys[valid] = inverse.ravel()
    block_bytes = np.zeros(len(unique), dtype=np.int64)
    block_is_write = np.zeros(len(unique), dtype=bool)
    flat_bytes = np.broadcast_to(nbytes, start.shape)[valid]
    flat_store = np.broadcast_to(store, start.shape)[valid]
    block_bytes[inverse.ravel()] = flat_bytes
    np.logical_or.at(block_is_write, inverse.ravel(), flat_store)
    access_is_write = np.broadcast_to(store, start.shape) & valid
    both = np.zeros(len(unique), dtype=bool)                 # blocks also loaded somewhere
    np.logical_or.at(both, inverse.ravel(), ~flat_store)
    return TileTrace(keys=keys, block_bytes=block_bytes, block_is_write=block_is_write,
                     programs_per_cu=programs_per_cu, source=source,
                     access_is_write=access_is_write.copy() if (both & block_is_write).any() else None)


# -- recording (runs in the worker, under the Triton interpreter) -------------------------------

def record_samples(spec, module, problem: dict, meta: dict, dtype: str, pids: list) -> list:
    """Run the programs ``pids`` of one real launch under the interpreter, recording every load
    and store; returns one ordered access list per pid. Loads still read memory (addresses may
    depend on loaded data); ``tl.dot`` is skipped. Raises TraceError for multi-launch kernels."""
    from swizzleperf.profiling.interpreter_hooks import sampled_launches
    inputs = spec.make_inputs(problem, 0, "cpu", dtype)
    tensors = [t for t in inputs.values() if hasattr(t, "data_ptr")]
    ranges = np.array([(t.data_ptr(), t.data_ptr() + t.numel() * t.element_size()) for t in tensors])
    log = []

    def record(launch, index, addrs, itemsize, is_store):
        if addrs.size == 0:
            return
        lo, hi = int(addrs.min()), int(addrs.max()) + itemsize
        tensor = int(np.flatnonzero((ranges[:, 0] <= lo) & (lo < ranges[:, 1]))[0]) if len(ranges) else -1
        base = int(ranges[tensor, 0]) if tensor >= 0 else 0
        log.append((launch, index, (_site(module.__file__), tensor, lo - base, hi - base,
                                    int(np.unique(addrs).size) * itemsize, is_store)))

    with sampled_launches(pids, record):
        spec.launch(inputs, **meta)
    if len({entry[0] for entry in log}) > 1:
        raise TraceError("the kernel's launch runs several Triton launches: trace one launch at a time")
    per_pid = [[] for _ in pids]
    for _, index, access in log:
        per_pid[index].append(access)
    return per_pid


def _site(kernel_file: str) -> int:
    """Source line of the innermost frame in the kernel's file (the tl.load / tl.store call)."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename != kernel_file:
        frame = frame.f_back
    return frame.f_lineno if frame is not None else -1
