"""The catalog of swizzle families: named program-id -> tile orders, as rewrite-target sources.

Every member is written for a rewrite target ``swizzle(pid, num_pid_m, num_pid_n) -> (pid_m,
pid_n)`` (parameter names taken from the kernel's own target), works elementwise on a vector of
program ids, and is a permutation of the tile grid for every grid size, remainders included.

Names: ``row-major``, ``column-major``, ``grouped-m:G`` (the Triton tutorial's order: groups of G
tile rows, walked column by column inside a group), ``grouped-n:G`` (the same along N),
``xcd-contiguous[:D]`` (chiplet remap: the programs that run on each of D L2 domains get a
contiguous range of logical ids, then row-major), ``xcd-grouped-m:G[:D]`` (the remap, then
grouped-m:G).

``rank_catalog`` ranks the members worth trying for a wave, grid and GPU by a score (the L2
simulator's prediction): the single-GPU evaluator's evidence and the built-in policy's order.
"""
from __future__ import annotations

import math
from typing import Callable


class UnknownSwizzleError(ValueError):
    """A catalog name that does not exist or has a bad parameter."""


_HEADER = "@triton.jit\ndef swizzle({params}):\n    \"\"\"{doc}\"\"\"\n"

_XCD_REMAP = """\
    NUM_XCDS: tl.constexpr = {d}
    num_pids = {m} * {n}
    xcd = {pid} % NUM_XCDS
    base = num_pids // NUM_XCDS
    rem = num_pids % NUM_XCDS
    {pid} = xcd * base + tl.minimum(xcd, rem) + {pid} // NUM_XCDS
"""

_ROW_MAJOR = """\
    pid_m = {pid} // {n}
    pid_n = {pid} % {n}
    return pid_m, pid_n
"""

_COLUMN_MAJOR = """\
    pid_m = {pid} % {m}
    pid_n = {pid} // {m}
    return pid_m, pid_n
"""

# Groups of G tile rows (M) or columns (N), walked across the other axis inside a group; the last
# group may be smaller (tl.minimum), so every grid is covered exactly once.
_GROUPED = """\
    {group}: tl.constexpr = {g}
    num_pid_in_group = {group} * {across}
    group_id = {pid} // num_pid_in_group
    first_{grouped_out} = group_id * {group}
    group_size_{axis_lower} = tl.minimum({grouped} - first_{grouped_out}, {group})
    {grouped_out} = first_{grouped_out} + ({pid} % num_pid_in_group) % group_size_{axis_lower}
    {across_out} = ({pid} % num_pid_in_group) // group_size_{axis_lower}
    return pid_m, pid_n
"""


def _grouped(axis: str, g: int, names: dict) -> str:
    """The grouped body along ``axis`` ("M" or "N")."""
    if axis == "M":
        roles = dict(grouped=names["m"], across=names["n"], grouped_out="pid_m", across_out="pid_n")
    else:
        roles = dict(grouped=names["n"], across=names["m"], grouped_out="pid_n", across_out="pid_m")
    # the target's own parameter may be called GROUP_SIZE_M (the tutorial's): keep clear of it
    group = f"GROUP_SIZE_{axis}"
    if group in names.get("params", "").replace(" ", "").split(","):
        group = f"CATALOG_GROUP_{axis}"
    return _GROUPED.format(group=group, axis_lower=axis.lower(), g=g, pid=names["pid"], **roles)


_HEADER_1D = "@triton.jit\ndef swizzle({params}):\n    \"\"\"{doc}\"\"\"\n"

_XCD_REMAP_1D = """\
    NUM_XCDS: tl.constexpr = {d}
    xcd = {pid} % NUM_XCDS
    base = {n} // NUM_XCDS
    rem = {n} % NUM_XCDS
    return xcd * base + tl.minimum(xcd, rem) + {pid} // NUM_XCDS
"""


def _catalog_source_1d(name: str, arg_names: list[str]) -> str:
    """Members for a 1-D target ``swizzle(pid, num_pids) -> tile``: ``row-major`` (the identity)
    and ``xcd-contiguous[:D]``."""
    names = dict(pid=arg_names[0], n=arg_names[1], params=", ".join(arg_names))
    family, _, param = name.partition(":")
    if family == "row-major" and not param:
        return _HEADER_1D.format(doc="Identity: program p computes tile p.", **names) + f"    return {names['pid']}\n"
    if family == "xcd-contiguous":
        d = _positive_int(name, param or "8")
        doc = f"Contiguous tiles per L2 domain ({d} domains, p -> domain p % {d})."
        return _HEADER_1D.format(doc=doc, **names) + _XCD_REMAP_1D.format(d=d, **names)
    raise UnknownSwizzleError(f"unknown swizzle {name!r} for a 1-D target: known row-major, xcd-contiguous[:D]")


def catalog_source(name: str, arg_names: list[str], coordinates: int = 2) -> str:
    """Source of the catalog member ``name`` for a target with parameters ``arg_names``: a 2-D
    target ``(pid, num_pid_m, num_pid_n, ...) -> (pid_m, pid_n)`` (parameters after the third kept
    and unread), a 1-D one ``(pid, num_pids) -> tile`` or, with ``coordinates=3``, a 3-D one
    ``(pid, num_outer, num_pid_m, num_pid_n, ...) -> (outer, pid_m, pid_n)`` (a batch or split-K
    coordinate outermost, as a lifted mapping of three coordinates numbers its tiles): the 2-D
    order inside each outer slice; an XCD remap first over all the programs.

    Raises:
        UnknownSwizzleError: unknown family, a bad parameter, or a target of another shape.
    """
    if coordinates == 3:
        return _catalog_source_3d(name, arg_names)
    if len(arg_names) == 2:
        return _catalog_source_1d(name, arg_names)
    if len(arg_names) < 3:
        raise UnknownSwizzleError(f"the catalog needs a target swizzle(pid, num_pid_m, num_pid_n, ...) or "
                                  f"swizzle(pid, num_pids), got ({', '.join(arg_names)})")
    family, _, param = name.partition(":")
    # parameters after the third (a GROUP_SIZE_M the kernel passes, say) stay in the signature;
    # the catalog's orders do not read them
    names = dict(pid=arg_names[0], m=arg_names[1], n=arg_names[2], params=", ".join(arg_names))
    if family in ("row-major", "column-major") and not param:
        body = _ROW_MAJOR if family == "row-major" else _COLUMN_MAJOR
        return _HEADER.format(doc=f"{family} order.", **names) + body.format(**names)
    if family in ("grouped-m", "grouped-n"):
        g = _positive_int(name, param)
        doc = f"{family} with groups of {g} tile {'rows' if family == 'grouped-m' else 'columns'}."
        return _HEADER.format(doc=doc, **names) + _grouped(family[-1].upper(), g, names)
    if family == "xcd-contiguous":
        d = _positive_int(name, param or "8")
        doc = f"Contiguous logical tiles per L2 domain ({d} domains, p -> domain p % {d}), row-major."
        return (_HEADER.format(doc=doc, **names) + _XCD_REMAP.format(d=d, **names)
                + _ROW_MAJOR.format(**names))
    if family == "xcd-grouped-m":
        g_text, _, d_text = param.partition(":")
        g, d = _positive_int(name, g_text), _positive_int(name, d_text or "8")
        doc = f"Contiguous logical tiles per L2 domain ({d} domains), then grouped-m:{g}."
        return (_HEADER.format(doc=doc, **names) + _XCD_REMAP.format(d=d, **names)
                + _grouped("M", g, names))
    raise UnknownSwizzleError(f"unknown swizzle {name!r}: known row-major, column-major, "
                              f"grouped-m:G, grouped-n:G, xcd-contiguous[:D], xcd-grouped-m:G[:D]")


def coordinates_of(target: str) -> int:
    """How many tile coordinates a rewrite target's source returns (its first ``return``: a tuple's
    length, else 1), for ``catalog_source``'s ``coordinates``; 2 where it cannot be read."""
    import ast
    try:
        tree = ast.parse(target)
    except SyntaxError:
        return 2
    returned = next((n.value for n in ast.walk(tree) if isinstance(n, ast.Return) and n.value is not None), None)
    if returned is None:
        return 2
    return len(returned.elts) if isinstance(returned, ast.Tuple) else 1


def _catalog_source_3d(name: str, arg_names: list[str]) -> str:
    """``catalog_source`` for a target of three coordinates (its docstring)."""
    if len(arg_names) < 4:
        raise UnknownSwizzleError(f"the catalog needs a target swizzle(pid, num_outer, num_pid_m, num_pid_n, ...) "
                                  f"for three coordinates, got ({', '.join(arg_names)})")
    pid, outer, m, n = arg_names[:4]
    taken = set(arg_names)
    local = {k: (k if k not in taken else f"catalog_{k}") for k in ("tiles_per_slice", "slice_id", "inner_pid")}
    family, _, param = name.partition(":")
    inner_name, xcd = name, ""
    if family in ("xcd-contiguous", "xcd-grouped-m"):   # the remap over every program, then the slices
        group, _, domains = param.partition(":") if family == "xcd-grouped-m" else ("", "", param)
        d = _positive_int(name, domains or "8")
        inner_name = f"grouped-m:{group}" if family == "xcd-grouped-m" else "row-major"
        xcd = _XCD_REMAP.format(d=d, pid=pid, m=f"{outer} * {m}", n=n)
    inner_source = catalog_source(inner_name, [local["inner_pid"], m, n] + arg_names[4:])
    body = inner_source.split('"""', 2)[2].lstrip("\n")          # the 2-D body, after its docstring
    body = body.replace("return pid_m, pid_n", f"return {local['slice_id']}, pid_m, pid_n")
    split = (f"    {local['tiles_per_slice']} = {m} * {n}\n"
             f"    {local['slice_id']} = {pid} // {local['tiles_per_slice']}\n"
             f"    {local['inner_pid']} = {pid} % {local['tiles_per_slice']}\n")
    doc = f"{name} inside each slice of the outer coordinate {outer} (outermost)."
    return _HEADER.format(doc=doc, params=", ".join(arg_names)) + xcd + split + body


def _positive_int(name: str, text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise UnknownSwizzleError(f"{name!r}: expected a positive integer parameter, got {text!r}")
    return int(text)


def group_sizes(wave: int, grid: tuple, aspect: float = 1.0) -> list[int]:
    """Group sizes worth trying for a wave of ``wave`` concurrent programs on ``grid`` tiles.

    A wave grouped by G tile rows spans G rows and wave / G columns; per loop step it reads
    G row blocks and wave / G column blocks. With column blocks ``aspect`` times the bytes of row
    blocks, that sum of bytes is smallest at G* = sqrt(wave * aspect). Returned: the powers of
    two from G*/4 to 4 G*, and G* rounded, capped by the grid's rows.
    """
    g_star = max(1.0, math.sqrt(wave * aspect))
    sizes = {max(1, round(g_star))}
    g = 1
    while g <= 4 * g_star:
        if g >= g_star / 4:
            sizes.add(g)
        g *= 2
    return sorted(s for s in sizes if s <= max(1, grid[0]))


def family_members(wave: int, grid: tuple, l2_domains: int, aspect: float = 1.0,
                   dispatch: str = "round_robin_domains") -> list[str]:
    """Catalog names the built-in policy considers for this wave, grid and hardware. The XCD
    remaps only where program p runs on domain p % l2_domains (``round_robin_domains``)."""
    chiplet = l2_domains > 1 and dispatch == "round_robin_domains"
    if len(grid) == 1:
        return ["row-major"] + ([f"xcd-contiguous:{l2_domains}"] if chiplet else [])
    names = ["row-major", "column-major"]
    for g in group_sizes(wave, grid, aspect):
        names += [f"grouped-m:{g}", f"grouped-n:{g}"]
    if chiplet:
        names.append(f"xcd-contiguous:{l2_domains}")
        names += [f"xcd-grouped-m:{g}:{l2_domains}" for g in group_sizes(wave, grid, aspect)]
    return names


def expert_source(expert: str, arg_names: list) -> tuple:
    """``(name, source)`` of a spec's expert order: a catalog name, or the full source of a
    rewrite target (named "expert")."""
    if "def " in expert:
        return "expert", expert
    return expert, catalog_source(expert, arg_names)


def rank_catalog(score: Callable[[list], list], arg_names: list, wave: int, aspect: float,
                 tile_grid: tuple, hardware, current_source: str, known_sources: list | tuple = (),
                 counts: dict | None = None) -> list:
    """The catalog members worth trying for this wave, grid and hardware, best first by ``score``
    (the L2 simulator: predicted hit rate, then DRAM bytes): ``[{name, source, predicted}]``.
    Members that are the same order as the kernel's current one, as one of ``known_sources`` (the
    expert, evaluated before the loop) or as a better-ranked member, under any name (grouped-n:64
    on 64 columns is row-major) are dropped, and so are members that fail the permutation check
    (``score`` gives None). ``counts``, where given, gets how many members there were
    (``members``), failed the check (``failed``) and were the same order as another (``same``)."""
    coordinates = 3 if len(tile_grid) == 3 else 2    # a batch / split-K coordinate outermost
    grid = tuple(tile_grid[1:]) if coordinates == 3 else tile_grid
    names = family_members(wave, grid, hardware.l2_domains, aspect, hardware.dispatch)
    members = [(n, catalog_source(n, arg_names, coordinates)) for n in names]
    known = [("current", current_source)] + [(f"known {i}", s) for i, s in enumerate(known_sources)]
    predictions = score(members + known)
    seen = {p["order_sha1"] for p in predictions[len(members):] if p}
    predictions = predictions[:len(members)]
    scored = sorted(({"name": n, "source": s, "predicted": p}
                     for (n, s), p in zip(members, predictions) if p is not None),
                    key=lambda e: (-e["predicted"]["predicted_l2_hit_rate"],
                                   e["predicted"]["predicted_dram_bytes"]))
    ranking = []
    for entry in scored:
        if entry["predicted"]["order_sha1"] not in seen:
            seen.add(entry["predicted"]["order_sha1"])
            ranking.append(entry)
    if counts is not None:
        counts.update(members=len(members), failed=len(members) - len(scored), same=len(scored) - len(ranking))
    return ranking
