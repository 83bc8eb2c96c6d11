"""The permutation probe: a rewrite target evaluated for whole tile grids at once, in a worker.

A swizzle must be a permutation of the tile indices on every grid the kernel may be launched with,
not only at the problems the spec names (issue #21: a target that is a permutation except when
``num_pid_m == 13``, or above 1 000 tiles, passed when only the real grids were probed). So the
probe checks *sites* (a tile grid and the target's arguments there):

- the real ones: each named problem of the spec (and its permutation-only ones);
- every small grid, exhaustively (``SMALL_EXTENT`` per dimension: 1..16 for a 2-D grid), with
  each other small argument of the target (a value in 1..16, the same at every real problem:
  ``GROUP_SIZE_M`` and the like) also taken through 1..16 on the smaller grids;
- a seeded sample of larger grids: ``SAMPLE_PER_OCTAVE`` grids per octave of tile counts, from
  above the small ones to four times the largest real grid (at most ``SAMPLE_MAX_TILES``), so
  that every size class is probed.

A synthetic site needs the target's arguments for a grid it was never launched at: the argument
positions that are the grid's extents are found from the real sites (an argument equal to the
same extent at every real problem); an argument that is the tile count is recomputed; one that is
the same at every real grid is held (``GROUP_SIZE_M``); with any other, only the real grids are
checked (the note says why). A held argument may still constrain the kernel's own order in ways
the probe cannot see, so a synthetic site counts only where the kernel's own target (the
*reference*, the module as the user wrote it) is a permutation too. Without a reference, grids are
synthesised only when every argument is an extent.

All sites are evaluated in one launch of a probe kernel whose lanes each carry a tile index and
their site's arguments (vectorised: about 20 000 tile indices in 0.05 s under the interpreter);
a target that cannot take vector arguments (a ``tl.constexpr`` parameter, a loop bound) is probed
site by site instead. The same probe runs compiled on a GPU (``compiled=True``): the target built by
Triton's compiler, each tile counted with an atomic add, so that a behaviour only the interpreter
shows cannot pass.

Persistent schedules (``for tile in range(pid, num_tiles, NUM_PROGRAMS): swizzle(tile, ...)``) are
probed the same way: the permutation is over tile indices ``0 .. num_tiles - 1``.
"""
from __future__ import annotations

import contextlib
import inspect
import math
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

PROBE_BLOCK = 4096
VECTOR_BLOCK = 32768      # lanes per program of the vectorised probe (interpreted: fewer, wider programs)
MAX_LISTED = 6
#: Largest extent of the exhaustively probed small grids, per number of grid dimensions
#: (1-D: 1..512, 2-D: 1..16 x 1..16, ...): about 20 000-130 000 tile indices in all.
SMALL_EXTENT = {1: 512, 2: 16, 3: 6}
SMALL_EXTENT_MORE_DIMS = 3
#: Other small arguments (1..SMALL_ARG) are taken through 1..SMALL_ARG on grids up to SMALL_ARG_GRID.
SMALL_ARG = 16
SMALL_ARG_GRID = 8
SAMPLE_PER_OCTAVE = 3
SAMPLE_MAX_TILES = 1 << 16
SAMPLE_SEED = 20261125


class ProbeError(Exception):
    """The probe could not evaluate the target (it raised); the message is one line."""


class VectorUnsupported(Exception):
    """The target cannot take vector arguments, and a probe per site was not allowed."""


@dataclass(frozen=True)
class Site:
    """One grid the target is checked on: its tile grid, the target's arguments after the tile
    index, and where it comes from (``"default problem"``, ``"grid 13x5"``)."""

    grid: tuple
    args: tuple
    label: str
    real: bool = True


# -- which grids --------------------------------------------------------------------------------

def extent_positions(real: list) -> list | None:
    """For each grid dimension the argument position that equals it at every real site, or None
    when some dimension has no such argument or the choice is ambiguous. Arguments that begin with
    the grid itself (``swizzle(pid, num_pid_m, num_pid_n)`` of a ``num_pid_m x num_pid_n`` grid,
    the bundled kernels' convention) are taken as such even where every real grid is square."""
    if not real:
        return None
    ndim, nargs = len(real[0].grid), len(real[0].args)
    if all(len(s.grid) == ndim and tuple(s.args[:ndim]) == tuple(s.grid) for s in real):
        return list(range(ndim))
    positions = []
    for d in range(ndim):
        found = [i for i in range(nargs)
                 if i not in positions and all(len(s.grid) == ndim and s.args[i] == s.grid[d] for s in real)]
        if len(found) != 1:
            return None
        positions.append(found[0])
    return positions


def synthetic_sites(real: list, arg_names: list, guarded: bool) -> tuple[list, str]:
    """The small grids and the sample of larger ones for the real sites ``real`` (the first gives
    the values of the arguments that are not extents), and a note on what was not synthesised.

    An argument that is not an extent is *independent* when it is the same at every real site
    (held, and taken through 1..16 when small), the *tile count* when it equals the product of the
    extents at every real site (recomputed), and otherwise unknown: then nothing is synthesised.
    Telling these apart needs real sites of two grids at least. ``guarded``: the caller filters
    the sites by a reference target (see the module docstring); without it, grids are synthesised
    only when every argument is an extent."""
    positions = extent_positions(real)
    if positions is None:
        return [], "only the real grids: the target's arguments that are the grid's extents could not be told apart"
    base = real[0]
    others = [i for i in range(len(base.args)) if i not in positions]
    if others and not guarded:
        return [], "only the real grids: the target takes arguments besides the grid's extents and no reference was given"
    grids_seen = {s.grid for s in real}
    held = [i for i in others if len(grids_seen) > 1 and all(s.args[i] == base.args[i] for s in real)]
    counts = [i for i in others if i not in held and len(grids_seen) > 1
              and all(s.args[i] == math.prod(s.grid) for s in real)]
    unknown = [arg_names[i] for i in others if i not in held + counts]
    if unknown:
        return [], (f"only the real grids: how {', '.join(unknown)} would change with the grid cannot be told "
                    f"from the kernel's {len(grids_seen)} real grid(s)")
    ndim = len(base.grid)

    def site(grid: tuple, changed: dict | None = None) -> Site:
        args = list(base.args)
        for d, i in enumerate(positions):
            args[i] = grid[d]
        for i in counts:
            args[i] = math.prod(grid)
        for i, value in (changed or {}).items():
            args[i] = value
        extra = "".join(f", {arg_names[i]}={v}" for i, v in (changed or {}).items())
        return Site(tuple(grid), tuple(args), f"grid {'x'.join(map(str, grid))}{extra}", real=False)

    small = SMALL_EXTENT.get(ndim, SMALL_EXTENT_MORE_DIMS)
    sites = [site(g) for g in _grids(ndim, small)]
    for i in held:
        if 1 <= base.args[i] <= SMALL_ARG:
            sites += [site(g, {i: v}) for v in range(1, SMALL_ARG + 1) if v != base.args[i]
                      for g in _grids(ndim, min(small, SMALL_ARG_GRID))]
    largest = max(math.prod(s.grid) for s in real)
    sites += [site(g) for g in _sample(ndim, small ** ndim, min(SAMPLE_MAX_TILES, 4 * largest))]
    seen = {(s.grid, s.args) for s in real}
    unique = []
    for s in sites:
        if (s.grid, s.args) not in seen:
            seen.add((s.grid, s.args))
            unique.append(s)
    return unique, ""


def guarded_sites(module, target: str, real: list, reference_path: str | None, compiled: bool = False,
                  first: list | tuple = ()) -> tuple[list, str]:
    """``(sites, note)`` that a worker's all-grids check probes ``module``'s ``target`` at: ``first``
    and the synthetic sites for the ``real`` ones (:func:`synthetic_sites`), kept where the
    reference module's own target (the kernel as the user wrote it, at ``reference_path``) is a
    permutation too, probed compiled or not as the candidate will be. None are kept, and the note
    says why, where the reference cannot be loaded or probed."""
    from swizzleperf.agent.verification.load import load_kernel
    from swizzleperf.kernels.spec import KernelLoadError
    names = list(inspect.signature(getattr(module, target).fn).parameters)[1:]
    synthetic, note = synthetic_sites(real, names, guarded=bool(reference_path))
    sites = list(first) + synthetic
    if sites and reference_path:
        try:
            ref_module, ref_spec = load_kernel(reference_path)
            ref_coords = probe_sites(ref_module, ref_spec.rewrite_target, sites, compiled=compiled)
        except (KernelLoadError, ProbeError) as exc:
            return [], f"only the real grids: the reference could not be probed ({exc})"
        kept = [s for s, c in zip(sites, ref_coords) if is_permutation(c, s.grid)]
        if len(kept) < len(sites):
            note = (f"{len(sites) - len(kept)} of {len(sites)} grids skipped: the kernel's own target is no "
                    f"permutation there either")
        sites = kept
    return sites, note


def _grids(ndim: int, extent: int) -> list:
    grids = [()]
    for _ in range(ndim):
        grids = [g + (e,) for g in grids for e in range(1, extent + 1)]
    return grids


def _sample(ndim: int, above: int, up_to: int) -> list:
    """``SAMPLE_PER_OCTAVE`` grids per octave of tile counts in (above, up_to], seeded: the
    tile count drawn log-uniformly in the octave, split over the dimensions at random."""
    rng = np.random.default_rng(SAMPLE_SEED)
    grids = []
    low = max(above, 1)
    while low < up_to:
        high = min(2 * low, up_to)
        for _ in range(SAMPLE_PER_OCTAVE):
            tiles = int(np.exp(rng.uniform(np.log(low + 1), np.log(high + 1))))
            shares = rng.dirichlet(np.ones(ndim)) if ndim > 1 else np.ones(1)
            grid = [max(1, int(round(tiles ** s))) for s in shares]
            grids.append(tuple(grid))
        low = high
    return grids


# -- evaluating the target ----------------------------------------------------------------------

_VECTOR_PROBE = '''\
import sys
import triton
import triton.language as tl

target = getattr(sys.modules[{module!r}], {target!r})


@triton.jit
def probe(out_ptr, tile_ptr, args_ptr, dims_ptr, base_ptr, counts_ptr, G, BLOCK: tl.constexpr,
          COUNT: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < G
    index = tl.load(tile_ptr + offs, mask=mask, other=0)
{loads}
    tiles = target(index, {args})
{stores}
    if COUNT:
        inside = mask
        flat = tl.zeros((BLOCK,), dtype=tl.int64)
{count}
        base = tl.load(base_ptr + offs, mask=mask, other=0)
        tl.atomic_add(counts_ptr + base + flat, 1, mask=inside)
'''

_SCALAR_PROBE = '''\
import sys
import triton
import triton.language as tl

target = getattr(sys.modules[{module!r}], {target!r})


@triton.jit
def probe(out_ptr, G, {params}, BLOCK: tl.constexpr):
    pids = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = pids < G
    index = tl.where(mask, pids, 0)
    tiles = target(index, {args})
{stores}
'''


def _coord(ndim: int, d: int) -> str:
    return f"tiles[{d}]" if ndim > 1 else "tiles"


@contextlib.contextmanager
def _probe_module(template: str, lane: str, module, target: str, nargs: int, ndim: int,
                  constexpr_args: bool = False):
    """A probe kernel written from ``template`` (``lane``: its name of the lane index), imported
    from a file that lives while the context does (the interpreter re-reads it at launch)."""
    names = [f"a{i}" for i in range(nargs)]
    text = template.format(
        module=module.__name__, target=target, args=", ".join(names),
        params=", ".join(f"{n}: tl.constexpr" if constexpr_args else n for n in names),
        loads="\n".join(f"    a{i} = tl.load(args_ptr + offs * {nargs} + {i}, mask=mask, other=1)"
                        for i in range(nargs)),
        stores="\n".join(f"    tl.store(out_ptr + {lane} * {ndim} + {d}, "
                         f"{_coord(ndim, d)}, mask=mask)" for d in range(ndim)),
        count="\n".join(f"        g{d} = tl.load(dims_ptr + offs * {ndim} + {d}, mask=mask, other=1)\n"
                        f"        c{d} = {_coord(ndim, d)}\n"
                        f"        inside = inside & (c{d} >= 0) & (c{d} < g{d})\n"
                        f"        flat = flat * g{d} + c{d}" for d in range(ndim)))
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "swizzleperf_probe.py"
        path.write_text(text)
        from swizzleperf.agent.verification.load import _import_file
        yield _import_file(path)


def probe_target(module, spec, args: tuple, num_programs: int, ndim: int) -> np.ndarray:
    """Evaluate the rewrite target on program ids 0..num_programs-1 (interpreter, vectorised).

    Returns int64 ``[num_programs, ndim]`` tile coordinates.
    """
    return probe_sites(module, spec.rewrite_target, [Site(tuple([0] * ndim), tuple(args), "")],
                       programs=[num_programs], vector=False)[0]


def probe_sites(module, target: str, sites: list, programs: list | None = None, vector: bool = True,
                compiled: bool = False, per_site: bool = True, count: bool | None = None) -> list:
    """The tile coordinates (int64 ``[programs, ndim]``) the target gives at each site, for tile
    indices ``0 .. prod(grid) - 1`` (or ``programs[i]`` of them). ``vector``: all sites in one
    launch, falling back to a launch per site when the target cannot take vector arguments.
    ``compiled`` (CUDA): the probe compiled by Triton; in the vectorised launch each in-range tile
    is also counted with an atomic add, and a count that disagrees with the stored coordinates
    raises (site by site, a ``tl.constexpr`` argument compiles once per value: the caller keeps
    that to few sites). ``count`` (default: ``compiled``) asks for the atomic count alone (the
    interpreter runs it too).

    Raises:
        ProbeError: the target raised at a site (message: the site and the error, one line).
        VectorUnsupported: the vectorised launch failed and ``per_site`` is false.
    """
    if not sites:
        return []
    programs = programs or [math.prod(s.grid) for s in sites]
    if vector:
        try:
            return _probe_vector(module, target, sites, programs, compiled, compiled if count is None else count)
        except ProbeError:
            raise
        except Exception as exc:  # the target needs scalar arguments: one launch per site below
            if not per_site:
                raise VectorUnsupported(str(exc)) from None
    return [_probe_scalar(module, target, s, n, compiled) for s, n in zip(sites, programs)]


def probe_programs(module, target: str, site: Site, programs: list) -> np.ndarray:
    """The tiles (int64 ``[len(programs), ndim]``) the target gives the program ids ``programs`` at
    ``site``, interpreted: a prover's counterexample on a grid too large to probe whole is
    confirmed at its own programs (agent/verification/prove.py)."""
    index = np.asarray(programs, dtype=np.int32)
    try:
        return _probe_vector(module, target, [site], [index.size], False, False, index=index)[0]
    except Exception as exc:
        raise ProbeError(f"the target raised at the {site.label}: {type(exc).__name__}: "
                         f"{' '.join(str(exc).split())[:300]}") from exc


def _probe_vector(module, target: str, sites: list, programs: list, compiled: bool, count: bool,
                  index: np.ndarray | None = None) -> list:
    import torch
    device = "cuda" if compiled else "cpu"
    ndim, nargs = len(sites[0].grid), len(sites[0].args)
    if index is None:
        index = np.concatenate([np.arange(n, dtype=np.int32) for n in programs])
    args = np.concatenate([np.broadcast_to(np.asarray(s.args, dtype=np.int32), (n, nargs))
                           for s, n in zip(sites, programs)]).reshape(-1)
    dims = np.concatenate([np.broadcast_to(np.asarray(s.grid, dtype=np.int32), (n, ndim))
                           for s, n in zip(sites, programs)]).reshape(-1)
    starts = np.concatenate([[0], np.cumsum([math.prod(s.grid) for s in sites])]).astype(np.int64)
    base = np.repeat(starts[:-1], programs)
    G = int(index.size)
    out = torch.full((G * ndim,), -1, dtype=torch.int64, device=device)
    counts = torch.zeros(max(1, int(starts[-1])) if count else 1, dtype=torch.int32, device=device)
    as_tensor = lambda a: torch.from_numpy(np.ascontiguousarray(a)).to(device)
    block = PROBE_BLOCK if compiled else VECTOR_BLOCK
    with _probe_module(_VECTOR_PROBE, "offs", module, target, nargs, ndim) as probe_module, \
            _elementwise_min_max(getattr(module, target), enabled=not compiled):
        probe_module.probe[(math.ceil(G / block),)](out, as_tensor(index), as_tensor(args), as_tensor(dims),
                                                    as_tensor(base), counts, G, BLOCK=block, COUNT=count)
    coords = out.cpu().numpy().reshape(G, ndim)
    result = np.split(coords, np.cumsum(programs)[:-1])
    if count:
        _check_counts(sites, result, counts.cpu().numpy(), starts)
    return result


def _probe_scalar(module, target: str, site: Site, programs: int, compiled: bool) -> np.ndarray:
    import torch
    device = "cuda" if compiled else "cpu"
    ndim = len(site.grid)
    out = torch.full((max(programs, 1) * ndim,), -1, dtype=torch.int64, device=device)
    try:
        with _probe_module(_SCALAR_PROBE, "pids", module, target, len(site.args), ndim,
                           constexpr_args=compiled) as probe_module, \
                _elementwise_min_max(getattr(module, target), enabled=not compiled):
            probe_module.probe[(max(1, math.ceil(programs / PROBE_BLOCK)),)](out, programs, *site.args,
                                                                           BLOCK=PROBE_BLOCK)
    except Exception as exc:
        where = f" at the {site.label}" if site.label else ""
        raise ProbeError(f"the target raised{where}: {type(exc).__name__}: {' '.join(str(exc).split())[:300]}") from exc
    return out.cpu().numpy().reshape(-1, ndim)[:programs]


def _check_counts(sites: list, coords: list, counts: np.ndarray, starts: np.ndarray) -> None:
    """The compiled probe's atomic counts agree with its stored coordinates, site by site."""
    for site, c, start, end in zip(sites, coords, starts[:-1], starts[1:]):
        inside = c[_in_range(c, site.grid)]
        expected = np.bincount(np.ravel_multi_index(tuple(inside.T), site.grid), minlength=math.prod(site.grid))
        if not np.array_equal(expected, counts[start:end]):
            raise ProbeError(f"the compiled probe's atomic tile counts disagree with its stored tiles at the "
                             f"{site.label or 'grid'}: the target's compiled code is not deterministic")


def _in_range(coords: np.ndarray, grid: tuple) -> np.ndarray:
    return np.all((coords >= 0) & (coords < np.asarray(grid)), axis=1)


@contextlib.contextmanager
def _elementwise_min_max(target, enabled: bool = True):
    """Python's ``min`` / ``max`` inside the target as the compiler reads them while the probe
    runs. Compiled, Triton's code generator turns the builtins into ``tl.minimum`` /
    ``tl.maximum``, elementwise; the interpreter calls the builtins themselves, which on the
    probe's vector of program ids compare whole vectors and return one argument (the Triton
    tutorial's ``min(num_pid_m - first_pid_m, GROUP_SIZE_M)`` then looked like no permutation).
    Only the target's own module globals change, and only for the probe."""
    import functools

    if not enabled:
        yield
        return
    namespace = target.fn.__globals__
    saved = {name: namespace[name] for name in ("min", "max") if name in namespace}

    def elementwise(op_name: str):
        def apply(*args):
            values = list(args[0]) if len(args) == 1 else list(args)
            # looked up at call time: the interpreter patches triton.language for each launch
            return functools.reduce(getattr(sys.modules["triton.language"], op_name), values)
        return apply
    namespace.update(min=elementwise("minimum"), max=elementwise("maximum"))
    try:
        yield
    finally:
        for name in ("min", "max"):
            namespace.pop(name, None)
        namespace.update(saved)


def one_definition(target) -> str:
    """'' when the target's source text (what Triton re-reads: the interpreter from its last line
    beginning with ``def``, the compiler from its first) holds exactly one such line, else why not."""
    try:
        lines, _ = inspect.getsourcelines(target.fn)
    except (OSError, TypeError) as exc:
        return f"its source cannot be read ({exc})"
    defs = [i for i, line in enumerate(lines) if line.strip().startswith("def ")]
    if len(defs) != 1:
        return (f"its source holds {len(defs)} lines beginning with `def` (a docstring or string that "
                f"holds a `def` line): Triton's interpreter and compiler would run different functions")
    return ""


# -- judging ------------------------------------------------------------------------------------

def permutation_errors(coords: np.ndarray, grid: tuple) -> str:
    """'' when ``coords`` ([programs, ndim]) hits every tile of ``grid`` exactly once, else what
    went wrong: tiles never computed, tiles computed several times, programs out of range."""
    in_range = _in_range(coords, grid)
    flat = np.ravel_multi_index(tuple(coords[in_range].T), grid)
    counts = np.bincount(flat, minlength=math.prod(grid))
    parts = []
    missing = np.flatnonzero(counts == 0)
    if missing.size:
        parts.append(f"{_tiles(missing, grid)} never computed")
    repeated = np.flatnonzero(counts > 1)
    if repeated.size:
        listed = ", ".join(f"{_coord_text(t, grid)} {counts[t]} times" for t in repeated[:MAX_LISTED])
        more = f" and {repeated.size - MAX_LISTED} more" if repeated.size > MAX_LISTED else ""
        parts.append(f"{repeated.size} tile(s) computed more than once: {listed}{more}")
    bad = np.flatnonzero(~in_range)
    if bad.size:
        listed = ", ".join(f"program {p} -> {tuple(int(c) for c in coords[p])}" for p in bad[:MAX_LISTED])
        parts.append(f"{bad.size} program(s) map outside the grid: {listed}")
    return "; ".join(parts)


def _coord_text(flat_index: int, grid: tuple) -> str:
    return "(" + ",".join(str(int(c)) for c in np.unravel_index(flat_index, grid)) + ")"


def tiles_text(flat: np.ndarray, grid: tuple) -> str:
    """'N tile(s) (a,b), (c,d) and M more' for flat tile indices of ``grid``."""
    return _tiles(flat, grid)


def _tiles(flat: np.ndarray, grid: tuple) -> str:
    listed = ", ".join(_coord_text(t, grid) for t in flat[:MAX_LISTED])
    more = f" and {flat.size - MAX_LISTED} more" if flat.size > MAX_LISTED else ""
    return f"{flat.size} tile(s) {listed}{more}"


def is_permutation(coords: np.ndarray, grid: tuple) -> bool:
    in_range = _in_range(coords, grid)
    if not in_range.all() or coords.shape[0] != math.prod(grid):
        return False
    return np.unique(np.ravel_multi_index(tuple(coords.T), grid)).size == coords.shape[0]
