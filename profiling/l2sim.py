"""Chiplet-aware L2 simulator: replays a :class:`TileTrace` under a program-id -> tile order,
a dispatch policy and a hardware spec, and predicts L2 hit rates, DRAM traffic and the
traffic that sharing split across L2 domains (AMD XCDs) costs.

Model (deliberately simple, every choice stated):

* Dispatch. ``"round_robin_domains"`` (AMD): program ``p`` goes to domain ``p % l2_domains``;
  ``"hashed_domains"`` (NVIDIA L2 partitions): a fixed hash of ``p``; ``"in_order"`` (one
  domain): one queue. With a stored dispatch probe (NVIDIA, ``swizzleperf hw --probe``),
  program ``p`` goes to the partition of the SM the probe saw it land on. Each domain runs its
  queue in program-id order with (its compute units) * ``programs_per_cu`` resident programs
  (slots).
* Time. A global clock of steps. At each tick every resident program performs its next loop
  step (all its accesses, ``j = 0..``, skipping -1); domains are visited 0, 1, ... and, within a
  domain, residents in the order they started. A program is done after its last non-empty
  step; its slot takes the next queued program at the next tick.
* Caches. Each domain has a fully associative L2, LRU by bytes at block granularity (a block is
  one trace key). A read hit refreshes the block; a read miss fetches it from the memory-side
  LLC (when ``llc_bytes > 0`` and resident there) or from DRAM (then also inserting it into the
  LLC), and inserts it into the domain's L2. With ``domain_miss_path: peer_domains`` (NVIDIA
  L2 partitions) a read miss on a block another domain holds is served by that domain (counted
  in ``cross_domain_bytes``, not in DRAM bytes) and still inserted into the missing domain's L2
  (both measured on an H200: bench/results/partition_h200/). With ``home_partition`` (the H100's
  partition probe, bench/results/l2_measure_h100/) each block has a home partition
  (:func:`block_homes`); a read miss on a block homed in another partition is served by the
  home (from DRAM into the home first, when the home lacks it), counted in
  ``cross_domain_bytes``, and the block is then held in both. A block larger than a cache is
  never cached there.
  Stores allocate in the domain's L2 (write-back) and do not touch the LLC or the read counts;
  every distinct stored block counts its bytes once in ``dram_write_bytes``. A block may be both
  stored and loaded (``TileTrace.access_is_write``): a load of it then hits where the store left it.
* L1. Where the trace's loads go through the L1 (``TileTrace.l1_cached``: plain loads, not
  pipelined copies into shared memory), each compute unit has an LRU L1 of ``l1_bytes_per_cu``
  in front of its domain's L2: an L1 hit never reaches the L2 and is not in its read counts
  (as ncu's L2 read lookups); a store skips the L1 and drops the block from the storing unit's.
  Program p runs on the compute unit of the slot it takes (``programs_per_cu`` slots a unit).

The replay is one pure-Python loop over the accesses (``OrderedDict`` LRUs); the schedule and
the access stream are built with numpy beforehand.

Cache. A simulation is a pure function of the trace, the order, the spec, the probe and this
simulator's code; one of the bundled GEMM's default problem (1 M accesses) took 0.36-0.65 s on a
core of this project's 2-core CPU machine (2026-11-25), and a catalog ranking runs 12-20 of them.
So results are kept on disk under a digest of all five, in ``$SWIZZLEPERF_SIM_CACHE`` (``off``:
no cache), else ``$XDG_CACHE_HOME/swizzleperf/simulations`` (``~/.cache/...``): one SQLite table
of JSON text (``simulations.sqlite3``), each value read back checked against ``StoredResult``. A
cache that cannot be opened, read or written is skipped: the simulation runs; a value that is not
a result (a wrong type, a missing field, too deep or too long; a ``source`` other than the spec's
``simulated:<name>``, a ``model`` line with control characters or ``|``, byte counts no simulation
gives) is a miss, simulated again and overwritten (#41). A database holding anything the store does
not create (a view, a trigger, another table or index) is not used at all, said once on stderr, and
every statement is aborted after ``CACHE_STATEMENT_S`` seconds of SQLite work (``StatementBound``):
a planted view over an endless query is never a hang. Why not diskcache, which this cache used
before: its rows carry a ``mode`` and a ``filename`` that its ``fetch`` obeys (a row in pickle
mode is unpickled, a row's file is read, and deleted on eviction), and it applies its database's
own ``Settings`` rows at open (each ``sqlite_*`` row formatted into a ``PRAGMA`` statement, each
``disk_*`` row set on its Disk): a planted database steers the library before any value is read,
which a Disk subclass cannot prevent. The table here is read only as text, and only by its key.
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import heapq
import json
import os
import sqlite3
import sys
import threading
import time
from collections import OrderedDict
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Annotated

import numpy as np
import pydantic

from swizzleperf.hwspecs import HardwareSpec
from swizzleperf.hwspecs.loader import DISPATCH_POLICIES
from swizzleperf.kernels.trace import TileTrace
from swizzleperf.profiling import schedule_model
from swizzleperf.profiling.dispatch_probe import program_partitions
from swizzleperf.profiling.schedule_model import ScheduleModel
from swizzleperf.sandbox import untrusted


def _mix(z: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser of uint64 ``z`` (wrapping arithmetic): the fixed pseudo-random
    functions of program and block ids below."""
    with np.errstate(over="ignore"):
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def program_domains(num_programs: int, domains: int, dispatch: str) -> np.ndarray:
    """L2 domain of each program id, int64 ``[num_programs]``.

    ``round_robin_domains`` (AMD): ``p % domains``. ``in_order``: all in domain 0.
    ``hashed_domains`` (NVIDIA L2 partitions): a fixed pseudo-random function of p (splitmix64),
    standing for the SM placement, which puts neighbouring program ids on SMs far apart
    (shared/HARDWARE.md: ids 0-7 on SMs 124-131, then 0,1,16,17,32,33,...).
    """
    pid = np.arange(num_programs, dtype=np.uint64)
    if dispatch == "round_robin_domains":
        return (pid % np.uint64(domains)).astype(np.int64)
    if dispatch == "hashed_domains":
        with np.errstate(over="ignore"):
            z = _mix(pid + np.uint64(0x9E3779B97F4A7C15))
        return (z % np.uint64(domains)).astype(np.int64)
    return np.zeros(num_programs, dtype=np.int64)


def block_homes(num_blocks: int, domains: int) -> np.ndarray:
    """The home L2 partition of each block, int64 ``[num_blocks]`` (``domain_miss_path:
    home_partition``): a fixed pseudo-random function of the block id (splitmix64 with another
    constant than :func:`program_domains`'), standing for the address hash that homes each line
    in one partition. Blocks are whole trace blocks, not lines: over many blocks the share homed
    in each partition is what a per-line hash gives."""
    block = np.arange(num_blocks, dtype=np.uint64)
    with np.errstate(over="ignore"):
        z = _mix(block * np.uint64(0xD1B54A32D192ED03) + np.uint64(0x8CB92BA72F3D8DD7))
    return (z % np.uint64(domains)).astype(np.int64)


@dataclass(frozen=True)
class SimResult:
    """What one simulation predicts. Byte counts are in bytes, rates in 0..1.

    Attributes:
        l2_hit_rate: read bytes that hit in L2 / read bytes that reach L2 (L1 misses), over all
            domains (0.0 if no reads): what ncu counts as the SMs' L2 read lookups.
        per_domain_hit_rate: the same per domain (length ``l2_domains``; 0.0 for a domain with
            no reads).
        l2_read_bytes: bytes read through L2 (writes and L1 hits excluded).
        l2_hit_bytes: of those, bytes that hit.
        dram_read_bytes: read-miss bytes served by neither the LLC nor (with
            ``domain_miss_path: peer_domains``) another domain's L2.
        dram_write_bytes: bytes of every distinct written block, once each.
        llc_hit_rate: LLC hit bytes / L2 read-miss bytes; None when the spec has no LLC.
        cross_domain_bytes: read-miss bytes whose block was, at that moment, resident in another
            domain's L2 (0 with one domain).
        l1_hit_rate: read bytes that hit in the L1 / read bytes; None where the trace's reads
            skip the L1 (``trace.l1_cached`` False) or the spec has none.
        seconds: wall time the simulation took.
        source: ``"simulated:<spec name>"``.
        model: one line describing the model simulated.
        merged_bytes: read bytes (past the L1) never looked up in L2: merged in the SM group's
            request path with a read of the same block shortly before (``MergeModel``; 0 without
            one). ``l2_read_bytes`` is then the bytes looked up, as ncu's SM read lookups count.
    """

    l2_hit_rate: float
    per_domain_hit_rate: list
    l2_read_bytes: int
    l2_hit_bytes: int
    dram_read_bytes: int
    dram_write_bytes: int
    llc_hit_rate: float | None
    cross_domain_bytes: int
    l1_hit_rate: float | None
    seconds: float
    source: str
    model: str
    merged_bytes: int = 0

    def to_dict(self) -> dict:
        """Plain-Python dict for JSON: floats, ints, strings, a list of floats, None for a
        missing LLC hit rate."""
        d = asdict(self)
        d["per_domain_hit_rate"] = [float(x) for x in self.per_domain_hit_rate]
        return d


def order_from_tiles(tile_coords: np.ndarray, tile_grid: tuple) -> np.ndarray:
    """Per-program tile coordinates -> row-major flattened logical tile indices.

    Args:
        tile_coords: int array ``[num_programs, len(tile_grid)]``; row p holds the tile
            coordinates (e.g. ``(pid_m, pid_n)``) that program p computes.
        tile_grid: tiles along each dimension, e.g. ``(grid_m, grid_n)``.

    Returns:
        int64 ``[num_programs]``: ``order[p]`` = row-major index of program p's tile.

    Raises:
        ValueError: wrong shape, or a coordinate outside the grid.
    """
    coords = np.asarray(tile_coords)
    if coords.ndim != 2 or coords.shape[1] != len(tile_grid):
        raise ValueError(f"tile_coords must have shape [num_programs, {len(tile_grid)}], "
                         f"got {coords.shape}")
    return np.ravel_multi_index(tuple(coords.T.astype(np.int64)), tuple(tile_grid)).astype(np.int64)


def _check_inputs(trace: TileTrace, order: np.ndarray, hw: HardwareSpec) -> np.ndarray:
    """Validate the inputs; return ``order`` as int64. Raises ValueError on any problem."""
    if trace.keys.ndim != 3:
        raise ValueError(f"trace.keys must be [num_tiles, num_steps, accesses], got {trace.keys.shape}")
    n = trace.num_tiles
    order = np.asarray(order)
    if order.ndim != 1 or order.shape[0] != n or not np.issubdtype(order.dtype, np.integer):
        raise ValueError(f"order must be a 1-D integer array of length {n} (num_tiles), "
                         f"got shape {order.shape} dtype {order.dtype}")
    order = order.astype(np.int64)
    if n and (order.min() < 0 or order.max() >= n or np.bincount(order, minlength=n).max() != 1):
        raise ValueError(f"order is not a permutation of range({n}): every logical tile must be "
                         "computed by exactly one program")
    if hw.dispatch not in DISPATCH_POLICIES:
        raise ValueError(f"unknown dispatch {hw.dispatch!r}; expected one of {DISPATCH_POLICIES}")
    if hw.dispatch == "in_order" and hw.l2_domains != 1:
        raise ValueError(f"dispatch 'in_order' needs l2_domains == 1, spec has {hw.l2_domains}")
    if hw.l2_domains < 1 or hw.compute_units_per_domain * trace.programs_per_cu < 1:
        raise ValueError("the spec and trace must give at least one domain and one slot per domain")
    if trace.keys.size and trace.keys.max() >= len(trace.block_bytes):
        raise ValueError("trace.keys refers to a block id >= len(trace.block_bytes)")
    return order


def _program_lengths(keys: np.ndarray) -> np.ndarray:
    """Ticks each tile's program occupies a slot: last non-empty step + 1, at least 1.
    ``keys`` is ``[num_tiles, num_steps, accesses]``; returns int64 ``[num_tiles]``."""
    nonempty = (keys >= 0).any(axis=2)                       # [tiles, steps]
    steps = keys.shape[1]
    last = steps - np.argmax(nonempty[:, ::-1], axis=1)      # last non-empty + 1 (if any)
    return np.where(nonempty.any(axis=1), last, 1).astype(np.int64)


def _start_ticks(lengths: np.ndarray, dom: np.ndarray, slots: list) -> tuple:
    """Tick at which each program id starts, and the slot it takes. ``lengths[p]`` = ticks
    program p occupies; program p joins domain ``dom[p]``'s queue; queue d fills ``slots[d]``
    slots in id order (slot i first, for i = 0, 1, ...), a freed slot taking the next program
    at the tick after its last step (the lowest slot first among those freed together).

    Returns ``(start, slot)``: int64 ``[programs]`` each; ``slot`` counts within the domain."""
    start = np.zeros(len(lengths), dtype=np.int64)
    slot = np.zeros(len(lengths), dtype=np.int64)
    for d, n_slots in enumerate(slots):
        pids = np.flatnonzero(dom == d).tolist()
        free = []                                            # min-heap of (free tick, slot)
        for i, p in enumerate(pids):
            t, s = heapq.heappop(free) if i >= n_slots else (0, i)
            start[p], slot[p] = t, s
            heapq.heappush(free, (t + int(lengths[p]), s))
    return start, slot


def _access_stream(trace: TileTrace, order: np.ndarray, dom: np.ndarray, slots: list):
    """Flatten the schedule into the global access sequence; program p runs in domain ``dom[p]``,
    whose queue has ``slots[d]`` resident programs, ``trace.programs_per_cu`` per compute unit.

    Returns ``(domain, cu, key, is_write)``: arrays ``[num_accesses]`` in simulation order (tick,
    then domain, then resident start order == queue order, then step access j), -1 keys
    dropped; ``cu`` numbers the compute units of all domains together (domain 0's first).
    """
    keys = trace.keys[order]                                 # [programs, steps, acc]
    writes = trace.writes()[order]
    p_count, steps, acc = keys.shape
    start, slot = _start_ticks(_program_lengths(keys), dom, slots)
    first_cu = np.concatenate([[0], np.cumsum(slots)[:-1]]) // max(1, trace.programs_per_cu)
    cu = first_cu[dom] + slot // max(1, trace.programs_per_cu)
    rank = np.empty(p_count, dtype=np.int64)                 # domain-major, queue position
    rank[np.argsort(dom, kind="stable")] = np.arange(p_count)
    ranks = int(rank.max()) + 1 if p_count else 1
    tick = start[:, None] + np.arange(steps, dtype=np.int64)[None, :]        # [programs, steps]
    sort_key = ((tick * ranks + rank[:, None])[:, :, None] * acc
                + np.arange(acc, dtype=np.int64)[None, None, :])
    mask = keys >= 0
    flat_keys, flat_key_order = keys[mask], sort_key[mask]
    flat_dom = np.broadcast_to(dom[:, None, None], keys.shape)[mask]
    flat_cu = np.broadcast_to(cu[:, None, None], keys.shape)[mask]
    idx = np.argsort(flat_key_order, kind="stable")
    return flat_dom[idx], flat_cu[idx], flat_keys[idx], writes[mask][idx]


def _replay(doms: np.ndarray, cus: np.ndarray, keys: np.ndarray, writes: np.ndarray, trace: TileTrace,
            hw: HardwareSpec, merge: "MergeModel | None" = None, groups: np.ndarray | None = None,
            clock: np.ndarray | None = None) -> dict:
    """Run the access stream through the per-CU L1s (when the trace's reads use them), the
    per-domain L2s and the LLC; return raw byte counters. A store skips the L1 (write-through),
    dropping the block from the storing CU's L1, and allocates in its domain's L2.

    Every cache is an LRU by bytes at block granularity (an ``OrderedDict``, least recent first):
    a block larger than the cache is never allocated; allocating one evicts the least recently
    used blocks until the bytes fit. A hit costs no call (this loop is where a ranking of the
    catalog spends its time); an insertion, one.

    With ``merge`` (a ``MergeModel``; ``groups``: the SM group of each access, ``clock``: its time in
    ns where the model's window is a time), a read past the L1 first meets its SM group's request
    path: where the group read the block within the window and fewer than ``readers_per_lookup``
    reads shared that lookup, it is merged (``merged`` bytes: no L2 read, hit or miss)."""
    D, cap, llc_cap = hw.l2_domains, hw.l2_bytes_per_domain, hw.llc_bytes
    nbytes = trace.block_bytes.astype(np.int64).tolist()
    caches, used = [OrderedDict() for _ in range(D)], [0] * D
    l1_cap = hw.l1_bytes_per_cu if trace.l1_cached else 0
    n_cu = int(cus.max()) + 1 if cus.size else 0
    l1s, l1_used = [OrderedDict() for _ in range(n_cu if l1_cap else 0)], [0] * n_cu
    counts = [0] * len(nbytes) if D > 1 else None           # domains holding each block
    llc, llc_used = OrderedDict(), 0
    read, hit = [0] * D, [0] * D
    cross = llc_hit = dram_read = l1_read = l1_hit = 0
    peers_serve = counts is not None and hw.domain_miss_path == "peer_domains"
    homes = (block_homes(len(nbytes), D).tolist() if D > 1 and hw.domain_miss_path == "home_partition"
             else None)
    merged = 0
    if merge is not None:
        n_groups = int(groups.max()) + 1 if groups is not None and groups.size else 1
        paths, inserted = [OrderedDict() for _ in range(n_groups)], [0] * n_groups
        limits = ((merge.window * block_fractions(len(nbytes))).tolist() if merge.falloff == "linear"
                  else [float(merge.window)] * len(nbytes))
        per_lookup, by_time = merge.readers_per_lookup, merge.window_unit == "ns"
        by_sm, sm_read = merge.window_unit == "sm_bytes", [0] * max(1, int(cus.max()) + 1 if cus.size else 1)
        prune_at = [4096] * n_groups
        group_list = groups.tolist() if groups is not None else [0] * len(keys)
        clock_list = clock.tolist() if by_time else [0] * len(keys)
    else:
        group_list = clock_list = [0] * len(keys)

    def insert(d: int, k: int, b: int) -> None:
        """Block ``k`` of ``b`` bytes into domain ``d``'s L2, least recently used blocks out until
        it fits (never a block larger than the cache); ``counts`` kept where there are several."""
        if b > cap:
            return
        cache, u = caches[d], used[d] + b
        while u > cap:
            old = cache.popitem(False)[0]
            u -= nbytes[old]
            if counts is not None:
                counts[old] -= 1
        if counts is not None:
            counts[k] += 1
        cache[k] = None
        used[d] = u

    for d, c, k, w, g, now in zip(doms.tolist(), cus.tolist(), keys.tolist(), writes.tolist(), group_list,
                                  clock_list):
        b = nbytes[k]
        if l1_cap:
            l1 = l1s[c]
            if w:
                if k in l1:
                    l1_used[c] -= b
                    del l1[k]
            else:
                l1_read += b
                if k in l1:
                    l1.move_to_end(k)
                    l1_hit += b
                    continue
                if b <= l1_cap:
                    u = l1_used[c] + b
                    while u > l1_cap:
                        u -= nbytes[l1.popitem(False)[0]]
                    l1[k] = None
                    l1_used[c] = u
        if merge is not None and not w:
            path = paths[g]
            at = now if by_time else inserted[g]
            inserted[g] += b                            # the group's reads past the L1, merged or not
            sm_read[c] += b
            entry = path.get(k)
            if entry is not None:
                age = sm_read[entry[2]] - entry[3] if by_sm else at - entry[0]
                if age <= limits[k] and entry[1] < per_lookup:
                    entry[1] += 1
                    merged += b
                    continue
                del path[k]
            path[k] = [at, 1, c, sm_read[c]]
            if len(path) > prune_at[g]:   # entries past the window (never merged again: kept only in memory)
                stale = [key for key, e in path.items()
                         if (sm_read[e[2]] - e[3] if by_sm else at - e[0]) > merge.window]
                for key in stale:
                    del path[key]
                prune_at[g] = max(4096, 2 * len(path))  # a scan per doubling, not per read
        cache = caches[d]
        if k in cache:
            cache.move_to_end(k)
            if not w:
                read[d] += b
                hit[d] += b
            continue
        if not w and homes is not None and homes[k] != d:
            # a line homed in the other partition: served by its home (filled there from DRAM
            # when the home lacks it too), and kept in both
            read[d] += b
            cross += b
            h = homes[k]
            home = caches[h]
            if k in home:
                home.move_to_end(k)
            else:
                dram_read += b
                insert(h, k, b)
        elif not w:
            read[d] += b
            held = counts is not None and counts[k]
            if held:
                cross += b
            if peers_serve and held:
                pass                                        # a peer partition's L2 serves it
            elif llc_cap > 0 and k in llc:
                llc.move_to_end(k)
                llc_hit += b
            else:
                dram_read += b
                if 0 < llc_cap and b <= llc_cap:
                    llc_used += b
                    while llc_used > llc_cap:
                        llc_used -= nbytes[llc.popitem(False)[0]]
                    llc[k] = None
        insert(d, k, b)
    return dict(read=read, hit=hit, cross=cross, llc_hit=llc_hit, dram_read=dram_read,
                l1_read=l1_read, l1_hit=l1_hit, l1=bool(l1_cap), merged=merged)


def _model_line(hw: HardwareSpec, slots: list, cus: list, probe: dict | None, l1: bool) -> str:
    """One line naming the model simulated."""
    line = (f"per-domain LRU by bytes at block granularity, {'/'.join(map(str, slots))} resident "
            f"programs per domain advancing step by step, ")
    if probe is not None:
        line += (f"programs on the SMs the dispatch probe measured on {probe['device']}, "
                 f"{hw.l2_domains} L2 partitions of {hw.l2_bytes_per_domain / 2**20:g} MiB behind "
                 f"{'/'.join(map(str, cus))} SMs, each holding its own copy of what its SMs read")
    elif hw.dispatch == "hashed_domains" and hw.l2_domains > 1:
        line += (f"dispatch {hw.dispatch} ({hw.l2_domains} L2 partitions of "
                 f"{hw.l2_bytes_per_domain / 2**20:g} MiB, each holding its own copy of what its SMs read)")
    else:
        line += f"dispatch {hw.dispatch}"
    if hw.domain_miss_path == "peer_domains" and hw.l2_domains > 1:
        line += "; a miss the other partition holds is served by it, not by DRAM"
    elif hw.domain_miss_path == "home_partition" and hw.l2_domains > 1:
        line += ("; each block homed in one partition (hashed): a read from the other is served by its home "
                 "(filled there from DRAM first where the home lacks it) and then held in both")
    if l1:
        line += f"; loads through a per-{hw.compute_unit_label} L1 LRU of {hw.l1_bytes_per_cu // 1024} KiB"
    if hw.llc_bytes > 0:
        mb = hw.llc_bytes / 2**20 if hw.llc_bytes % 2**20 == 0 else hw.llc_bytes / 1e6
        line += f", Infinity Cache LRU {mb:g} MB"
    return line


def placement(num_programs: int, hw: HardwareSpec, programs_per_cu: int, probe: dict | None = None):
    """``(domain of each program id, int64 [num_programs]; compute units per domain, list [D])``:
    from the spec's dispatch policy, or from a stored dispatch probe (NVIDIA).

    Raises:
        ValueError: the probe's partition count differs from the spec's.
        ProbeError: a probe without partition map or placement."""
    if probe is None:
        return (program_domains(num_programs, hw.l2_domains, hw.dispatch),
                [hw.compute_units_per_domain] * hw.l2_domains)
    dom, cus = program_partitions(probe, num_programs, programs_per_cu)
    if len(cus) != hw.l2_domains:
        raise ValueError(f"the probe found {len(cus)} L2 partitions, the spec {hw.name} has "
                         f"{hw.l2_domains}: probe the GPU the spec describes")
    return dom, [int(c) for c in cus]


def simulate(trace: TileTrace, order: np.ndarray, hw: HardwareSpec, probe: dict | None = None,
             schedule: ScheduleModel | None = None) -> SimResult:
    """Simulate the L2 (and LLC) behaviour of one kernel launch.

    Args:
        trace: block accesses of every logical tile (``keys`` ``[num_tiles, num_steps, acc]``).
        order: int ``[num_tiles]``; ``order[p]`` = logical tile computed by program id p. Must be
            a permutation of ``range(trace.num_tiles)``.
        hw: the GPU (domains, L2 bytes per domain, CUs per domain, LLC bytes, dispatch policy).
        probe: a stored dispatch probe of this GPU (``profiling.dispatch_probe``); when given,
            program p runs in the L2 partition of the SM the probe saw it land on, and each
            partition has as many slots as SMs read through it, instead of ``hw.dispatch``.
        schedule: a ``schedule_model.ScheduleModel`` (``schedule_model.for_kernel`` gives one for a
            pipelined ``tl.dot`` kernel on an NVIDIA GPU): the programs are not advanced in
            lockstep but placed and timed as that model schedules them (one per SM; the SM's
            partition from the probe, else ``hw.dispatch``), and the reads of programs in step
            merged (``simulate_schedule``).

    Returns:
        :class:`SimResult` (bytes in bytes, rates in 0..1, ``seconds`` = wall time this call took,
        a cached result's the lookup's: module docstring, "Cache").

    Raises:
        ValueError: ``order`` not a permutation of the tiles, malformed trace, unknown dispatch,
            ``"in_order"`` dispatch with several domains, zero slots per domain, or a probe
            whose partition count differs from the spec's.
        ProbeError: a probe without partition map or placement.
    """
    t0 = time.perf_counter()
    order = _check_inputs(trace, order, hw)
    key = _cache_key(trace, order, hw, probe, schedule)
    cached = _cache_get(key, hw)
    if cached is not None:
        return dataclasses.replace(cached, seconds=time.perf_counter() - t0)
    result = _simulate(trace, order, hw, probe, t0) if schedule is None else _scheduled(trace, order, hw, probe,
                                                                                       schedule, t0)
    _cache_set(key, result)
    return result


def _scheduled(trace: TileTrace, order: np.ndarray, hw: HardwareSpec, probe: dict | None,
               schedule: ScheduleModel, t0: float) -> SimResult:
    """:func:`simulate` of a checked order with its programs timed by ``schedule``, without the cache."""
    parts = placement(hw.compute_units, hw, 1, probe)[0]
    timed = schedule_model.model_schedule(trace, order, hw, schedule, parts)
    merge = MergeModel(readers_per_lookup=schedule.readers_per_lookup, window=schedule.window_ns,
                       window_unit="ns", falloff="none",
                       source="window chosen on one H100's build orders, "
                              "bench/results/l2_merge_h100/call3/compare/merge_scan_build.md")
    groups = np.arange(hw.compute_units) // schedule.group_size
    result = simulate_schedule(trace, order, hw, timed, parts, groups, merge, timed_by=f"modelled ({timed['model']})")
    where = (f"; program p in the partition where the dispatch probe measured on {probe['device']} placed "
             f"program p" if probe is not None else f"; program p in the partition {hw.dispatch} gives it")
    return dataclasses.replace(result, seconds=time.perf_counter() - t0, model=result.model + where)


def _simulate(trace: TileTrace, order: np.ndarray, hw: HardwareSpec, probe: dict | None,
              t0: float) -> SimResult:
    """:func:`simulate` of a checked order, without the cache."""
    dom, cus = placement(len(order), hw, trace.programs_per_cu, probe)
    slots = [c * trace.programs_per_cu for c in cus]
    doms, access_cus, keys, writes = _access_stream(trace, order, dom, slots)
    c = _replay(doms, access_cus, keys, writes, trace, hw)
    return _result(c, trace, keys, writes, hw, t0, _model_line(hw, slots, cus, probe, c["l1"]))


def _result(c: dict, trace: TileTrace, keys: np.ndarray, writes: np.ndarray, hw: HardwareSpec, t0: float,
            model: str) -> SimResult:
    """The ``SimResult`` of ``_replay``'s counters ``c``."""
    written = np.unique(keys[writes])
    read_total, hit_total = sum(c["read"]), sum(c["hit"])
    miss_total = read_total - hit_total
    return SimResult(
        l2_hit_rate=hit_total / read_total if read_total else 0.0,
        per_domain_hit_rate=[h / r if r else 0.0 for h, r in zip(c["hit"], c["read"])],
        l2_read_bytes=int(read_total),
        l2_hit_bytes=int(hit_total),
        dram_read_bytes=int(c["dram_read"]),
        dram_write_bytes=int(trace.block_bytes[written].sum()),
        llc_hit_rate=(c["llc_hit"] / miss_total if miss_total else 0.0) if hw.llc_bytes > 0 else None,
        cross_domain_bytes=int(c["cross"]),
        l1_hit_rate=(c["l1_hit"] / c["l1_read"] if c["l1_read"] else 0.0) if c["l1"] else None,
        seconds=time.perf_counter() - t0,
        source=f"simulated:{hw.name}",
        model=model,
        merged_bytes=int(c.get("merged", 0)),
    )


# ------------------------------------------------------------------ a measured schedule, merging
def block_fractions(num_blocks: int) -> np.ndarray:
    """A fixed pseudo-random fraction in (0, 1] per block id, float64 ``[num_blocks]`` (splitmix64
    with its own constant): how far into a ``MergeModel``'s window each block stays mergeable, so
    that over many blocks the share still merged falls linearly with the lag, as measured."""
    block = np.arange(num_blocks, dtype=np.uint64)
    with np.errstate(over="ignore"):
        z = _mix(block * np.uint64(0x9E3779B97F4A7C15) + np.uint64(0x632BE59BD9B4E019))
    return ((z >> np.uint64(11)).astype(np.float64) + 1.0) / float(1 << 53)


@dataclass(frozen=True)
class MergeModel:
    """Reads of one block by the SMs of one group that the L2 never looks up (issue #43).

    Measured on two H100s (bench/l2_merge_probe.py, bench/results/l2_merge_h100/, 2026-12-06): the
    reads of a line by two SMs of one group (16 SMs) were looked up once; the share of the second
    SM's reads merged fell about linearly with its lag behind the first, from all at 3 200 cycles
    to none near 1.8 MiB of the buffer (0.11 MiB behind: 95 %; 0.22: 88 %; 0.44: 77 %; 0.87: 53 %;
    1.75: 4 %); N SMs of one group reading at once: about one lookup per four (4: 1.00, 8: 2.11,
    12: 3.18 lookups a line).

    Attributes:
        readers_per_lookup: reads one lookup serves, its own included (4).
        window: how far behind a read may come and still merge: a block stays mergeable for a
            fixed pseudo-random fraction of it (``block_fractions``), so that the share merged
            falls linearly to 0 at ``window``. In bytes the group read past its L1s since the
            block's lookup, merged or not (``window_unit`` ``"bytes"``: in the probe two SMs read,
            so a lag of 1.85 MiB is 3.7 MiB of the group's reads), in bytes the SM that looked it
            up has read since (``"sm_bytes"``), or in ns (``"ns"``).
        window_unit: ``"bytes"``, ``"sm_bytes"`` or ``"ns"``. The noise cases (call 3: 13 more
            SMs of the group reading buffers of their own, 14 times the group's traffic, moved the
            merged share by at most 0.11 lookups a line) say it is not the group's bytes.
        falloff: ``"linear"``: each block mergeable for its own fraction of ``window``, as above
            (the probe's streams); ``"none"``: every block for the whole window, so that only reads
            within ``window`` of their group's lookup merge (the GEMM replayed as it ran: reads of
            programs that began a tile together, bench/results/simulator_validation.md).
        source: where the figures come from.

    Raises:
        ValueError: ``window_unit`` or ``falloff`` not one of the above, a negative window or
            fewer than one reader a lookup.
    """
    readers_per_lookup: int = 4
    window: float = 2 * 1.85 * 2**20
    window_unit: str = "bytes"
    source: str = "bench/results/l2_merge_h100/ (H100, ld.global.cg, 2026-12-06)"
    falloff: str = "linear"

    def __post_init__(self) -> None:
        if self.window_unit not in ("bytes", "sm_bytes", "ns") or self.falloff not in ("linear", "none"):
            raise ValueError(f"window_unit bytes, sm_bytes or ns and falloff linear or none, not "
                             f"{self.window_unit!r}, {self.falloff!r}")
        if not self.window >= 0 or self.readers_per_lookup < 1:
            raise ValueError(f"a window of 0 or more and 1 or more readers a lookup, not {self.window!r}, "
                             f"{self.readers_per_lookup!r}")


def simulate_schedule(trace: TileTrace, order: np.ndarray, hw: HardwareSpec, schedule: dict,
                      partition_of_sm, group_of_sm=None, merge: MergeModel | None = None,
                      timed_by: str = "measured") -> SimResult:
    """:func:`simulate` with the programs placed and timed as measured, not dispatched by the model:
    program ``p`` (a tile of the kernel's persistent loop, ``order[p]`` its logical tile) runs on SM
    ``schedule["smid"][p]`` from ``began_ns[p]`` to ``ended_ns[p]`` (bench/gemm_schedule_probe.py),
    its non-empty loop steps spread evenly over that time; the accesses replayed in time order
    (ties: by SM, then step order). Its L2 partition: ``partition_of_sm`` (the dispatch probe's map of
    that chip); its L1: its SM's. With ``merge`` and ``group_of_sm`` (an int per SM, the chip's merge
    groups, bench/l2_merge_probe.py discover), reads merge as ``MergeModel`` says. ``timed_by``:
    where the schedule comes from, for the result's model line (``"measured"``, or a model's name,
    e.g. bench/gemm_timing_model.py's). Not cached.

    Raises:
        ValueError: as :func:`simulate`; a schedule whose lists are not one entry per program, or
            name an SM outside the maps.
    """
    t0 = time.perf_counter()
    order = _check_inputs(trace, order, hw)
    p_count = len(order)
    sm = np.asarray(schedule.get("smid", []), dtype=np.int64)
    began = np.asarray(schedule.get("began_ns", []), dtype=np.float64)
    ended = np.asarray(schedule.get("ended_ns", []), dtype=np.float64)
    parts = np.asarray(list(partition_of_sm), dtype=np.int64)
    groups = np.zeros(len(parts), dtype=np.int64) if group_of_sm is None else np.asarray(list(group_of_sm), np.int64)
    if not (len(sm) == len(began) == len(ended) == p_count):
        raise ValueError(f"the schedule must give smid, began_ns and ended_ns for each of the {p_count} programs")
    if p_count and (sm.min() < 0 or sm.max() >= len(parts) or len(groups) != len(parts)):
        raise ValueError("the schedule names an SM outside the partition and group maps")
    if parts.size and (parts.min() < 0 or parts.max() >= hw.l2_domains):
        raise ValueError(f"the partition map names a partition outside the spec's {hw.l2_domains}")
    keys = trace.keys[order]
    writes_all = trace.writes()[order]
    steps, acc = keys.shape[1], keys.shape[2]
    lengths = _program_lengths(keys)
    when = began[:, None] + (np.arange(steps)[None, :] + 0.5) / lengths[:, None] * (ended - began)[:, None]
    mask = keys >= 0
    flat_when = np.broadcast_to(when[:, :, None], keys.shape)[mask]
    flat_sm = np.broadcast_to(sm[:, None, None], keys.shape)[mask]
    flat_j = np.broadcast_to((np.arange(steps)[:, None] * acc + np.arange(acc)[None, :])[None], keys.shape)[mask]
    idx = np.lexsort((flat_j, flat_sm, flat_when))
    access_sm, flat_keys = flat_sm[idx], keys[mask][idx]
    writes = writes_all[mask][idx]
    c = _replay(parts[access_sm], access_sm, flat_keys, writes, trace, hw, merge, groups[access_sm], flat_when[idx])
    model = (f"per-partition LRU by bytes at block granularity, programs on the SMs and at the times {timed_by} "
             f"({p_count} programs on {len(np.unique(sm))} SMs), each partition holding its own copy of what its "
             f"SMs read")
    if hw.domain_miss_path == "peer_domains" and hw.l2_domains > 1:
        model += "; a miss the other partition holds is served by it, not by DRAM"
    if merge is not None:
        model += (f"; reads merged within each of {len(np.unique(groups))} SM groups: one lookup serves "
                  f"{merge.readers_per_lookup} reads, a block mergeable for "
                  f"{'up to ' if merge.falloff == 'linear' else ''}{merge.window:g} {merge.window_unit} "
                  f"({merge.source})")
    return _result(c, trace, flat_keys, writes, hw, t0, model)


# ---------------------------------------------------------------------------------------- cache
#: The cache's folder, or ``off``; unset: ``$XDG_CACHE_HOME/swizzleperf/simulations``.
CACHE_ENV = "SWIZZLEPERF_SIM_CACHE"
#: The database in that folder.
CACHE_FILE = "simulations.sqlite3"
#: Results the cache keeps before the least recently stored go (a result is about 1 KB: 256 MB).
CACHE_ROWS = 250_000
#: Characters of one stored value read back: a result is about 1 KB, its per-domain list at most
#: a few hundred rates (``MAX_DOMAINS``); longer is not a result.
CACHE_VALUE_CHARS = 64 * 1024
#: Domains a stored result may list (MI300X has 8 XCDs; 4 096 is far beyond any GPU's).
MAX_DOMAINS = 4096
#: What a failing cache raises: its folder or database unusable.
_CACHE_ERRORS = (OSError, sqlite3.Error)
_Rate = Annotated[float, pydantic.Field(strict=True, ge=0.0, le=1.0, allow_inf_nan=False)]
_Bytes = Annotated[int, pydantic.Field(strict=True, ge=0, lt=1 << 62)]
#: What ``_result`` writes as a result's ``source``: ``simulated:`` and a spec name (a YAML file's
#: stem, ``hwspecs/``), at most 64 characters of letters, digits, ``.``, ``_``, ``+`` and ``-``.
SOURCE_PATTERN = r"simulated:[A-Za-z0-9][A-Za-z0-9._+-]{0,63}"
#: Seconds of SQLite work one statement on the cache (or on the run record) may take before SQLite
#: aborts it (``sqlite3.OperationalError``: "interrupted"); a statement of this module takes
#: milliseconds, a planted view over an endless query or a trigger inserting 3e8 rows forever.
CACHE_STATEMENT_S = 5.0


def _printable_line(text: str) -> str:
    """``text`` unchanged where it is printable and holds no ``|`` (a Markdown table's cell
    separator); raises ValueError otherwise (a stored ``model`` line that is not one)."""
    if not text.isprintable() or "|" in text:
        raise ValueError("must be one printable line without control characters or '|'")
    return text


class StoredResult(pydantic.BaseModel):
    """A ``SimResult`` as the cache stores it (``SimResult.to_dict``), checked field by field
    before it is believed: rates in 0..1, byte counts non-negative integers, a bounded list, short
    strings; nothing else."""
    model_config = pydantic.ConfigDict(extra="forbid", strict=True)
    l2_hit_rate: _Rate
    per_domain_hit_rate: Annotated[list[_Rate], pydantic.Field(max_length=MAX_DOMAINS)]
    l2_read_bytes: _Bytes
    l2_hit_bytes: _Bytes
    dram_read_bytes: _Bytes
    dram_write_bytes: _Bytes
    llc_hit_rate: _Rate | None
    cross_domain_bytes: _Bytes
    l1_hit_rate: _Rate | None
    seconds: Annotated[float, pydantic.Field(strict=True, ge=0.0, allow_inf_nan=False)]
    source: Annotated[str, pydantic.Field(max_length=200, pattern=f"^{SOURCE_PATTERN}$")]
    model: Annotated[str, pydantic.Field(max_length=2000), pydantic.AfterValidator(_printable_line)]
    merged_bytes: _Bytes = 0

    @pydantic.model_validator(mode="after")
    def _consistent(self) -> "StoredResult":
        """Refuse counts no simulation gives (ValueError, a miss): more hit bytes than read bytes,
        more DRAM-read or cross-domain bytes than read-miss bytes (each is a miss), a hit rate that
        is not hit / read bytes (0 without reads), a domain with a hit rate while nothing was read,
        an LLC hit rate without L2 read misses."""
        missed = self.l2_read_bytes - self.l2_hit_bytes
        if missed < 0:
            raise ValueError("more L2 hit bytes than L2 read bytes")
        if self.dram_read_bytes > missed or self.cross_domain_bytes > missed:
            raise ValueError("more DRAM-read or cross-domain bytes than L2 read-miss bytes")
        expected = self.l2_hit_bytes / self.l2_read_bytes if self.l2_read_bytes else 0.0
        if abs(self.l2_hit_rate - expected) > 1e-9:
            raise ValueError("l2_hit_rate is not l2_hit_bytes / l2_read_bytes")
        if not self.l2_read_bytes and any(self.per_domain_hit_rate):
            raise ValueError("a domain hit rate without L2 reads")
        if not missed and self.llc_hit_rate:
            raise ValueError("an LLC hit rate without L2 read misses")
        return self


def cache_dir() -> Path | None:
    """The folder of the simulation cache, None when ``$SWIZZLEPERF_SIM_CACHE`` is ``off``."""
    chosen = os.environ.get(CACHE_ENV)
    if chosen == "off":
        return None
    if chosen:
        return Path(chosen)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "swizzleperf" / "simulations"


@functools.cache
def _code_digest() -> str:
    """SHA-1 of the code a result depends on: this module, the dispatch probe's placement and the
    trace type (a change to any of them is a new simulator, whose results are its own)."""
    from swizzleperf.kernels import trace as trace_module
    from swizzleperf.profiling import dispatch_probe
    digest = hashlib.sha1()
    for path in (__file__, dispatch_probe.__file__, trace_module.__file__, schedule_model.__file__):
        digest.update(Path(path).read_bytes())
    return digest.hexdigest()


def _cache_key(trace: TileTrace, order: np.ndarray, hw: HardwareSpec, probe: dict | None,
               schedule: ScheduleModel | None = None) -> str:
    """SHA-1 of everything a result depends on: every field of the trace (arrays by dtype, shape
    and bytes), the order, the spec (a frozen dataclass: its repr holds every field), the probe,
    the schedule model (a frozen dataclass too) and the simulator's code."""
    digest = hashlib.sha1(_code_digest().encode())
    for field in dataclasses.fields(trace):
        value = getattr(trace, field.name)
        if isinstance(value, np.ndarray):
            value = np.ascontiguousarray(value)
            digest.update(f"{field.name}:{value.dtype}{value.shape}".encode())
            digest.update(value.tobytes())
        else:
            digest.update(f"{field.name}={value!r}".encode())
    digest.update(np.ascontiguousarray(order, dtype=np.int64).tobytes())
    digest.update(repr(hw).encode())
    digest.update(json.dumps(probe, sort_keys=True, default=str).encode())
    digest.update(repr(schedule).encode())
    return digest.hexdigest()


#: The objects the cache's database may hold, ``(type, name, table): SQL`` as ``sqlite_master`` keeps
#: them (blanks collapsed): the table ``_Store`` creates and the index SQLite makes for its key.
_CACHE_OBJECTS = {
    ("table", "simulations", "simulations"):
        "CREATE TABLE simulations (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    ("index", "sqlite_autoindex_simulations_1", "simulations"): None,
}


class UnusableCache(Exception):
    """The cache's database holds what ``_Store`` never creates (a view, a trigger, another table
    or index, its table defined otherwise): one line naming the first such object."""


def _plain(text, limit: int = 120) -> str:
    """``text`` (any object) as one printable line of at most ``limit`` characters: non-printable
    characters as ``?`` (a planted name's escape codes never reach the terminal)."""
    text = str(text)
    return "".join(ch if ch.isprintable() else "?" for ch in text[:limit]) + ("..." if len(text) > limit else "")


def _foreign_object(db: sqlite3.Connection, expected: dict) -> str | None:
    """The first object of ``db``'s ``sqlite_master`` not in ``expected`` (``(type, name, table):
    SQL or None``, the SQL compared with blanks collapsed), as ``"a view named X"`` (triggers and
    views named first); None when all are expected (or there are none). At most 64 objects are
    read: more is not ours either.

    Raises:
        sqlite3.Error: the schema cannot be read (not a database, malformed).
    """
    rows = db.execute("SELECT type, name, tbl_name, sql FROM sqlite_master LIMIT 65").fetchall()
    if len(rows) > 64:
        return "more than 64 schema objects"
    for kind, name, table, sql in sorted(rows, key=lambda row: row[0] not in ("trigger", "view")):  # those first
        key = (kind, name, table)
        wanted = expected.get(key, ...)
        found = " ".join(sql.split()) if isinstance(sql, str) else sql
        if wanted is ... or found != wanted:
            article = "an" if str(kind)[:1] in ("a", "e", "i", "o", "u") else "a"
            return (f"{article} {_plain(kind, 20)} named {_plain(name, 60)}"
                    + ("" if wanted is ... else " defined otherwise"))
    return None


class _Store:
    """The cache's table, ``simulations (key TEXT PRIMARY KEY, value TEXT)``, one connection per
    folder shared by this process's threads (a lock around each statement). Each statement is
    bounded to ``CACHE_STATEMENT_S`` seconds of SQLite work (``StatementBound``)."""

    def __init__(self, folder: Path) -> None:
        """Open (or create) ``folder/CACHE_FILE``.

        Raises:
            UnusableCache: the database holds objects the store never creates, or it or a file of
                SQLite beside it is a link (nothing is written to it then).
            OSError, sqlite3.Error: the folder or database cannot be made, opened or read.
        """
        folder.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self.path = folder / CACHE_FILE
        linked = untrusted.sqlite_file_not_its_own(self.path)
        if linked is not None:
            raise UnusableCache(f"the simulation cache: {linked}: it is not used (every simulation runs); "
                                f"remove the link to cache again")
        self._db = sqlite3.connect(self.path, timeout=5, isolation_level=None, check_same_thread=False)
        try:
            self._bound = untrusted.StatementBound(CACHE_STATEMENT_S).install(self._db)
            self._bound.arm()
            self._db.execute("PRAGMA trusted_schema = OFF")  # a planted view or trigger calls no function
            foreign = _foreign_object(self._db, _CACHE_OBJECTS)   # before anything is written to it
            if foreign is not None:
                raise UnusableCache(f"the simulation cache {_plain(self.path, 200)} holds {foreign}, which "
                                    f"swizzleperf never creates: it is not used (every simulation runs); "
                                    f"move it aside to cache again")
            self._db.execute("PRAGMA journal_mode = WAL")    # test processes share one cache
            self._bound.arm()
            self._db.execute("CREATE TABLE IF NOT EXISTS simulations (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        except BaseException:
            self._db.close()
            raise

    def get(self, key: str) -> str | None:
        """The stored text of ``key``, None where there is none or it is not text of at most
        ``CACHE_VALUE_CHARS`` characters (SQLite compares the length before Python sees it).

        Raises:
            sqlite3.Error: the database cannot be read, or the statement ran past its bound."""
        with self._lock:
            self._bound.arm()
            row = self._db.execute("SELECT value FROM simulations WHERE key = ? AND typeof(value) = 'text' "
                                   "AND length(value) <= ?", (key, CACHE_VALUE_CHARS)).fetchone()
        return row[0] if row else None

    def set(self, key: str, value: str) -> None:
        """Store (or replace) ``key``; the least recently stored beyond ``CACHE_ROWS`` go.

        Raises:
            sqlite3.Error: the database cannot be written, or a statement ran past its bound."""
        with self._lock:
            self._bound.arm()
            self._db.execute("INSERT OR REPLACE INTO simulations (key, value) VALUES (?, ?)", (key, value))
            self._bound.arm()
            self._db.execute("DELETE FROM simulations WHERE rowid <= (SELECT max(rowid) FROM simulations) - ?",
                             (CACHE_ROWS,))


@functools.lru_cache(maxsize=4)
def _open_cache(folder: str) -> _Store | None:
    """The store of ``folder``, opened once per process; None where it cannot be used (a folder
    or database that cannot be opened: silently; one holding objects the store never creates:
    said once, in one line on stderr). Never raises."""
    try:
        return _Store(Path(folder))
    except UnusableCache as exc:
        print(f"warning: {exc}", file=sys.stderr)
        return None
    except _CACHE_ERRORS:
        return None


def _cache() -> _Store | None:
    folder = cache_dir()
    return None if folder is None else _open_cache(str(folder))


def _cache_get(key: str, hw: HardwareSpec | None = None) -> SimResult | None:
    """The stored result of ``key``, or None: no cache, no row, or a row that is not a result
    (``StoredResult``), or, given ``hw``, not one of ``hw``'s (its ``source`` not
    ``simulated:<hw.name>``, not one hit rate per L2 domain)."""
    cache = _cache()
    if cache is None:
        return None
    try:
        text = cache.get(key)
    except _CACHE_ERRORS:
        return None
    if text is None:
        return None
    try:
        stored = untrusted.load_json_checked(text, StoredResult, "a stored simulation", CACHE_VALUE_CHARS, 4)
    except untrusted.UntrustedInput:
        return None
    if hw is not None and (stored.source != f"simulated:{hw.name}"
                           or len(stored.per_domain_hit_rate) != hw.l2_domains):
        return None
    return SimResult(**stored.model_dump())


def _cache_set(key: str, result: SimResult) -> None:
    cache = _cache()
    if cache is not None:
        try:
            cache.set(key, json.dumps(result.to_dict()))
        except _CACHE_ERRORS:
            pass
