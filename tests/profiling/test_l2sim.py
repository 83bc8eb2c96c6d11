"""Tests of the L2 simulator. Hit counts on tiny caches are worked out by hand in the comments;
every block is 100 bytes unless said otherwise. Notation: "m" miss, "h" hit, [..] = L2 content
from least to most recently used."""
from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from swizzleperf.hwspecs import HardwareSpec
from swizzleperf.kernels.trace import TileTrace
from swizzleperf.profiling.dispatch_probe import ProbeError
from swizzleperf.profiling.l2sim import SimResult, _access_stream, order_from_tiles, simulate

B = 100  # bytes of one ordinary block


def make_trace(programs, block_bytes=None, writes=(), programs_per_cu=1):
    """``programs[t]`` = list of steps of tile t, each step a list of block ids (padded with -1)."""
    steps = max(len(p) for p in programs)
    acc = max(len(s) for p in programs for s in p)
    keys = np.full((len(programs), steps, acc), -1, dtype=np.int64)
    for t, p in enumerate(programs):
        for s, step in enumerate(p):
            keys[t, s, : len(step)] = step
    nblocks = int(keys.max()) + 1
    bb = np.full(nblocks, B, dtype=np.int64) if block_bytes is None else np.asarray(block_bytes)
    is_write = np.zeros(len(bb), dtype=bool)
    is_write[list(writes)] = True
    return TileTrace(keys, bb, is_write, programs_per_cu, "hand-written test trace")


def make_hw(compute_units=1, domains=1, l2_bytes=2 * B, llc_bytes=0, dispatch=None, name="toy",
            miss_path="memory", l1_bytes=0):
    if dispatch is None:
        dispatch = "in_order" if domains == 1 else "round_robin_domains"
    return HardwareSpec(
        name=name, display_name=name, vendor="test", arch="test", compute_units=compute_units,
        l2_domains=domains, l2_partitions=domains, l2_bytes_per_domain=l2_bytes, l2_line_bytes=128,
        l2_sector_bytes=32, l2_associativity=None, llc_bytes=llc_bytes, dram_bytes_per_s=1e12,
        peak_bf16_flops=1e15, shared_memory_per_cu_bytes=0, l1_bytes_per_cu=l1_bytes, dispatch=dispatch, domain_miss_path=miss_path)


def ident(n):
    return np.arange(n)


# --- LRU ---------------------------------------------------------------------------------------

def test_lru_evicts_least_recently_used_not_first_in():
    # one program, one access per step: A B A C A B  (A=0, B=1, C=2), L2 = 2 blocks.
    # LRU:  A m [A]; B m [A,B]; A h [B,A]; C m evicts B [A,C]; A h [C,A]; B m evicts C [A,B]
    #       -> 2 hits of 6 reads.  (FIFO would evict A at C, then miss A: only 1 hit.)
    tr = make_trace([[[0], [1], [0], [2], [0], [1]]])
    r = simulate(tr, ident(1), make_hw(l2_bytes=2 * B))
    assert (r.l2_read_bytes, r.l2_hit_bytes) == (6 * B, 2 * B)
    assert r.l2_hit_rate == pytest.approx(1 / 3)
    assert r.dram_read_bytes == 4 * B
    assert r.per_domain_hit_rate == [pytest.approx(1 / 3)]


def test_block_larger_than_cache_is_never_cached_and_evicts_nothing():
    # A=0 (100 B), X=1 (300 B), L2 = 200 B. Sequence A X A X:
    # A m [A]; X m, too big, not inserted [A]; A h; X m again -> 1 hit (100 B) of 800 B read.
    tr = make_trace([[[0], [1], [0], [1]]], block_bytes=[B, 3 * B])
    r = simulate(tr, ident(1), make_hw(l2_bytes=2 * B))
    assert (r.l2_read_bytes, r.l2_hit_bytes, r.dram_read_bytes) == (800, 100, 700)


# --- concurrency and schedule ------------------------------------------------------------------

CONCURRENT = [[[0], [1], [2]],   # tile 0: Z P Q
              [[0], [3], [4]]]   # tile 1: Z R S


def test_two_slots_share_a_block_read_in_the_same_step():
    # 2 slots (2 CUs x 1 program), L2 = 2 blocks. Both programs run together:
    # tick 0: p0 Z m [Z], p1 Z h; tick 1: P m [Z,P], R m evicts Z [P,R]; tick 2: Q m, S m
    # -> 1 hit of 6.
    r = simulate(make_trace(CONCURRENT), ident(2), make_hw(compute_units=2))
    assert (r.l2_read_bytes, r.l2_hit_bytes) == (6 * B, B)


def test_one_slot_runs_programs_one_after_another():
    # 1 slot: p1 starts after p0 ends, so the stream is Z P Q Z R S.
    # Z m [Z]; P m [Z,P]; Q m evicts Z [P,Q]; Z m (two other blocks since: evicted); R m; S m
    # -> 0 hits.
    r = simulate(make_trace(CONCURRENT), ident(2), make_hw(compute_units=1))
    assert r.l2_hit_bytes == 0 and r.dram_read_bytes == 6 * B


def test_programs_per_cu_gives_slots():
    # 1 CU x 2 resident programs = 2 slots: same as test_two_slots_share_a_block_read_in_the_same_step.
    r = simulate(make_trace(CONCURRENT, programs_per_cu=2), ident(2), make_hw(compute_units=1))
    assert r.l2_hit_bytes == B


def test_access_stream_order_and_early_slot_release():
    # 2 slots, 3 programs. p0 = [10] then empty steps (done after tick 0); p1 = [20] [21] [22];
    # p2 = [30, 31]. p2 takes p0's slot at tick 1 and is visited after p1 (started earlier):
    # tick 0: 10, 20; tick 1: 21, 30, 31; tick 2: 22.
    tr = make_trace([[[10]], [[20], [21], [22]], [[30, 31]]], block_bytes=[B] * 32)
    doms, cus, keys, writes = _access_stream(tr, ident(3), dom=np.zeros(3, dtype=np.int64), slots=[2])
    assert keys.tolist() == [10, 20, 21, 30, 31, 22]
    assert doms.tolist() == [0] * 6
    assert cus.tolist() == [0, 1, 1, 0, 0, 1]  # one program per CU: p2 takes p0's slot, CU 0
    assert not writes.any()


def test_access_stream_interleaves_domains_within_a_tick():
    # 2 domains x 1 slot, round robin: p0, p2 -> domain 0; p1, p3 -> domain 1.
    # tick 0: d0 p0 (1), d1 p1 (2); tick 1: d0 p0 (11), d1 p1 (12); tick 2: d0 p2, d1 p3.
    tr = make_trace([[[1], [11]], [[2], [12]], [[3]], [[4]]], block_bytes=[B] * 13)
    doms, cus, keys, writes = _access_stream(tr, ident(4), dom=np.array([0, 1, 0, 1]), slots=[1, 1])
    assert keys.tolist() == [1, 2, 11, 12, 3, 4]
    assert doms.tolist() == [0, 1, 0, 1, 0, 1]
    assert cus.tolist() == [0, 1, 0, 1, 0, 1]  # domain 1's CU is numbered after domain 0's


# --- domains -----------------------------------------------------------------------------------

SHARED = [[[0]], [[0]], [[1]], [[1]]]   # tiles 0,1 read X=0; tiles 2,3 read Y=1


def test_round_robin_splits_sharing_across_domains():
    # 2 domains x 1 slot, identity order: p0 (X), p2 (Y) -> d0; p1 (X), p3 (Y) -> d1.
    # tick 0: d0 X m, d1 X m (X resident in d0: cross +100); tick 1: d0 Y m, d1 Y m (cross +100).
    hw = make_hw(compute_units=2, domains=2, l2_bytes=10 * B)
    r = simulate(make_trace(SHARED), ident(4), hw)
    assert (r.l2_hit_bytes, r.dram_read_bytes, r.cross_domain_bytes) == (0, 4 * B, 2 * B)
    assert r.per_domain_hit_rate == [0.0, 0.0]


def test_peer_partitions_serve_misses_instead_of_dram():
    # As above, but a miss on a block the other domain holds is served by it (NVIDIA partitions):
    # tick 0: d0 X m (DRAM), d1 X m (d0 holds X: peer, no DRAM); tick 1: d0 Y m (DRAM), d1 Y m
    # (peer). DRAM 200, cross 200; the block is still inserted in d1: a re-read there hits.
    hw = make_hw(compute_units=2, domains=2, l2_bytes=10 * B, miss_path="peer_domains")
    r = simulate(make_trace(SHARED), ident(4), hw)
    assert (r.l2_hit_bytes, r.dram_read_bytes, r.cross_domain_bytes) == (0, 2 * B, 2 * B)
    # p1 (d1) reads X twice: the second read hits in d1 after the peer served the first.
    r2 = simulate(make_trace([[[0]], [[0], [0]]]), ident(2), hw)
    assert (r2.l2_hit_bytes, r2.dram_read_bytes, r2.cross_domain_bytes) == (B, B, B)


def test_order_keeping_sharers_in_one_domain_does_better():
    # order [0, 2, 1, 3]: p0=X, p2=X -> d0; p1=Y, p3=Y -> d1.
    # tick 0: d0 X m, d1 Y m; tick 1: d0 X h, d1 Y h -> hit 1/2 in each domain, no cross traffic.
    hw = make_hw(compute_units=2, domains=2, l2_bytes=10 * B)
    r = simulate(make_trace(SHARED), np.array([0, 2, 1, 3]), hw)
    assert r.l2_hit_rate == pytest.approx(0.5)
    assert r.per_domain_hit_rate == [pytest.approx(0.5), pytest.approx(0.5)]
    assert (r.dram_read_bytes, r.cross_domain_bytes) == (2 * B, 0)


def test_per_domain_hit_rate_uneven_and_idle_domain():
    # 3 domains x 1 slot; tiles 0, 1 read X=0, tile 2 reads Y'=2, tile 3 reads Y=1.
    # order [0, 3, 2, 1]: p0 = X -> d0, p1 = Y -> d1, p2 = Y' -> d2, p3 = X -> d0.
    # d0: X m, X h -> 0.5; d1: Y m -> 0.0; d2: Y' m -> 0.0; 4 programs of one read each.
    tr = make_trace([[[0]], [[0]], [[2]], [[1]]])
    hw = make_hw(compute_units=3, domains=3, l2_bytes=10 * B)
    r = simulate(tr, np.array([0, 3, 2, 1]), hw)
    assert r.per_domain_hit_rate == [pytest.approx(0.5), 0.0, 0.0]
    # A domain given no program at all reports 0.0: 1 tile, 3 domains.
    r1 = simulate(make_trace([[[0], [0]]]), ident(1), hw)
    assert r1.per_domain_hit_rate == [pytest.approx(0.5), 0.0, 0.0]


def probe_of(partition_of_sm, sm_of_program, device="NVIDIA test"):
    """A stored dispatch probe (profiling/dispatch_probe.py's format) written by hand."""
    return {"device": device, "placement": {"1": {"sm_of_program": sm_of_program}},
            "partitions": {"partition_of_sm": partition_of_sm}}


def test_probed_placement_sets_domains_and_slots():
    # SM 0 reads through partition 0, SMs 1, 2 through partition 1 (1 and 2 slots). The probe saw
    # programs 0-3 on SMs 1, 2, 0, 1. SHARED, identity: p0 (X) d1, p1 (X) d1, p2 (Y) d0, p3 (Y) d1.
    # tick 0: d0 p2 Y m; d1 p0 X m, p1 X h (2 slots: both resident). tick 1: d1 p3 Y m, Y is
    # resident in d0: cross +100. Hits 100 of 400; d0 0/1, d1 1/3.
    hw = make_hw(compute_units=4, domains=2, l2_bytes=10 * B, dispatch="hashed_domains")
    r = simulate(make_trace(SHARED), ident(4), hw, probe=probe_of([0, 1, 1], [1, 2, 0, 1]))
    assert (r.l2_hit_bytes, r.dram_read_bytes, r.cross_domain_bytes) == (B, 3 * B, B)
    assert r.per_domain_hit_rate == [0.0, pytest.approx(1 / 3)]
    assert "1/2 SMs" in r.model and "NVIDIA test" in r.model
    # A probe of 2 programs repeats for a grid of 4: p2 -> SM 1, p3 -> SM 2, all in d1.
    r2 = simulate(make_trace(SHARED), ident(4), hw, probe=probe_of([0, 1, 1], [1, 2]))
    assert r2.per_domain_hit_rate == [0.0, pytest.approx(0.5)]


def test_probe_must_match_the_spec_and_have_partitions():
    hw = make_hw(compute_units=4, domains=2, l2_bytes=10 * B, dispatch="hashed_domains")
    with pytest.raises(ValueError, match="3 L2 partitions"):
        simulate(make_trace(SHARED), ident(4), hw, probe=probe_of([0, 1, 2], [0, 1, 2, 0]))
    with pytest.raises(ProbeError, match="no partition map"):
        simulate(make_trace(SHARED), ident(4), hw, probe={"device": "x", "sm_of_program": [0, 1]})


def test_llc_hit_saves_dram():
    # 2 domains x 1 slot, LLC 10 blocks. p0 (d0) X: L2 m, LLC m -> DRAM 100, X into the LLC.
    # p1 (d1) X at the same tick: L2 m (cross +100), LLC h -> no DRAM bytes. LLC hit rate 100/200.
    tr = make_trace([[[0]], [[0]]])
    r = simulate(tr, ident(2), make_hw(compute_units=2, domains=2, llc_bytes=10 * B))
    assert (r.dram_read_bytes, r.cross_domain_bytes) == (B, B)
    assert r.llc_hit_rate == pytest.approx(0.5)
    assert "Infinity Cache" in r.model
    r0 = simulate(tr, ident(2), make_hw(compute_units=2, domains=2, llc_bytes=0))
    assert r0.dram_read_bytes == 2 * B and r0.llc_hit_rate is None


def test_llc_is_lru_by_bytes():
    # 1 domain, L2 = 1 block, LLC = 2 blocks; sequence X Y X Z Y (X=0, Y=1, Z=2).
    # L2 holds only the last block, so every read misses L2 (no immediate repeats).
    # LLC: X m [X]; Y m [X,Y]; X h [Y,X]; Z m evicts Y [X,Z]; Y m evicts X [Z,Y]
    # -> LLC hits 100 of 500, DRAM 400.
    tr = make_trace([[[0], [1], [0], [2], [1]]])
    r = simulate(tr, ident(1), make_hw(l2_bytes=B, llc_bytes=2 * B))
    assert (r.l2_hit_bytes, r.dram_read_bytes) == (0, 4 * B)
    assert r.llc_hit_rate == pytest.approx(0.2)


# --- L1 ----------------------------------------------------------------------------------------

def test_l1_filters_reads_before_l2():
    # 1 domain, 2 CUs (1 program each), L1 = 1 block, L2 = 10 blocks; reads through L1.
    # p0 (CU 0): X X Y; p1 (CU 1): X. tick 0: CU0 X: L1 m, L2 m; CU1 X: L1 m, L2 h.
    # tick 1: CU0 X: L1 h (never reaches L2). tick 2: CU0 Y: L1 m (evicts X), L2 m.
    # L1: 1 hit of 4 reads; L2: 3 reads, 1 hit. A store (W) never touches the L1.
    tr = dataclasses.replace(make_trace([[[0], [0], [1], [2]], [[0]]], writes=[2]), l1_cached=True)
    hw = make_hw(compute_units=2, l2_bytes=10 * B, l1_bytes=B)
    r = simulate(tr, ident(2), hw)
    assert r.l1_hit_rate == pytest.approx(0.25)
    assert (r.l2_read_bytes, r.l2_hit_bytes, r.dram_read_bytes) == (3 * B, B, 2 * B)
    # Without the flag (reads copied past the L1, as the pipelined GEMM's) every read reaches L2.
    r0 = simulate(dataclasses.replace(tr, l1_cached=False), ident(2), hw)
    assert r0.l1_hit_rate is None and (r0.l2_read_bytes, r0.l2_hit_bytes) == (4 * B, 2 * B)


def test_l1_is_per_compute_unit():
    # 2 CUs, programs p0..p3 all read X; 2 slots: p0 -> CU 0, p1 -> CU 1, then p2 -> CU 0, p3 -> CU 1.
    # Each CU misses X once in its L1 (2 L2 reads: 1 miss, 1 hit), then hits.
    tr = dataclasses.replace(make_trace([[[0]], [[0]], [[0]], [[0]]]), l1_cached=True)
    r = simulate(tr, ident(4), make_hw(compute_units=2, l2_bytes=10 * B, l1_bytes=4 * B))
    assert r.l1_hit_rate == pytest.approx(0.5) and (r.l2_read_bytes, r.l2_hit_bytes) == (2 * B, B)


# --- writes ------------------------------------------------------------------------------------

def test_writes_allocate_count_once_and_stay_out_of_hit_rate():
    # A=0 read; W0=1, W1=2 written. L2 = 2 blocks. Sequence A W0 W1 W0 A:
    # A m [A]; W0 alloc [A,W0]; W1 alloc evicts A [W0,W1]; W0 write hit [W1,W0] (not counted);
    # A m evicts W1 [W0,A]. Reads: 200 B, 0 hit. DRAM writes: W0 + W1 once each = 200 B.
    tr = make_trace([[[0], [1], [2], [1], [0]]], writes=[1, 2])
    r = simulate(tr, ident(1), make_hw(l2_bytes=2 * B))
    assert (r.l2_read_bytes, r.l2_hit_bytes, r.dram_read_bytes) == (2 * B, 0, 2 * B)
    assert r.dram_write_bytes == 2 * B
    assert r.l2_hit_rate == 0.0


def test_reads_of_stored_blocks_hit_where_the_store_allocated():
    # Per-access stores: p0 stores W=0 then reads it back; p1 (other domain, same tick) reads W
    # after p0's store. 2 domains x 1 slot, peers serve misses (NVIDIA partitions).
    # tick 0: d0 p0 W store (alloc d0); d1 p1 R=1 read m (DRAM). tick 1: d0 p0 W read h;
    # d1 p1 W read m, held by d0: peer serves it (cross +100), inserted in d1.
    # Reads 300 B, hits 100; DRAM read 100 (R only); DRAM write: W once.
    keys = np.array([[[0], [0]], [[1], [0]]])
    tr = TileTrace(keys=keys, block_bytes=np.array([B, B]), block_is_write=np.array([True, False]),
                   programs_per_cu=1, source="test", access_is_write=np.array([[[True], [False]], [[False], [False]]]))
    hw = make_hw(compute_units=2, domains=2, l2_bytes=10 * B, miss_path="peer_domains")
    r = simulate(tr, ident(2), hw)
    assert (r.l2_read_bytes, r.l2_hit_bytes, r.dram_read_bytes, r.cross_domain_bytes) == (3 * B, B, B, B)
    assert r.dram_write_bytes == B


def test_a_store_drops_the_block_from_the_storing_cus_l1():
    # 1 CU, L1 and L2 hold 4 blocks; W=0 read (L1 m, L2 m), stored, read again: the store
    # dropped W from the L1, so the second read misses L1 and hits L2 (the store allocated).
    keys = np.array([[[0], [0], [0]]])
    tr = TileTrace(keys=keys, block_bytes=np.array([B]), block_is_write=np.array([True]), programs_per_cu=1,
                   source="test", l1_cached=True, access_is_write=np.array([[[False], [True], [False]]]))
    r = simulate(tr, ident(1), make_hw(l2_bytes=4 * B, l1_bytes=4 * B))
    assert r.l1_hit_rate == 0.0 and (r.l2_read_bytes, r.l2_hit_bytes) == (2 * B, B)


# --- inputs and outputs ------------------------------------------------------------------------

@pytest.mark.parametrize("order", [[0, 0, 1], [0, 1], [0, 1, 3], [-1, 0, 1], [0.0, 1.0, 2.0]])
def test_bad_order_raises(order):
    tr = make_trace([[[0]], [[1]], [[2]]])
    with pytest.raises(ValueError):
        simulate(tr, np.array(order), make_hw())


def test_in_order_dispatch_needs_one_domain():
    with pytest.raises(ValueError, match="in_order"):
        simulate(make_trace([[[0]]]), ident(1), make_hw(domains=2, dispatch="in_order"))


def test_order_from_tiles_is_row_major():
    coords = np.array([[0, 0], [1, 2], [0, 3]])
    assert order_from_tiles(coords, (2, 4)).tolist() == [0, 6, 3]
    with pytest.raises(ValueError):
        order_from_tiles(np.array([0, 1]), (2, 4))


def test_result_to_dict_is_json():
    r = simulate(make_trace([[[0], [0]]]), ident(1), make_hw(name="h100"))
    assert isinstance(r, SimResult) and r.source == "simulated:h100"
    d = json.loads(json.dumps(r.to_dict()))
    assert d["l2_hit_rate"] == pytest.approx(0.5) and d["llc_hit_rate"] is None
    assert d["model"].startswith("per-domain LRU by bytes at block granularity, 1 resident")


# --- full-size GEMM trace: speed and the grouped-order effect ----------------------------------

GM, GN, KSTEPS = 128, 64, 64   # M = N = 16384 with 128x256 tiles; K = 4096 in steps of 64


def gemm_trace() -> TileTrace:
    """Tile t = (m, n) reads A(m, k) [128x64 bf16 = 16 KiB] and B(k, n) [64x256 bf16 = 32 KiB]
    at step k, then writes C(m, n) [128x256 bf16 = 64 KiB] in a last step."""
    m, n = np.divmod(np.arange(GM * GN), GN)
    k = np.arange(KSTEPS)
    a0, b0 = 0, GM * KSTEPS
    c0 = b0 + KSTEPS * GN
    keys = np.full((GM * GN, KSTEPS + 1, 2), -1, dtype=np.int64)
    keys[:, :KSTEPS, 0] = a0 + m[:, None] * KSTEPS + k
    keys[:, :KSTEPS, 1] = b0 + k * GN + n[:, None]
    keys[:, KSTEPS, 0] = c0 + m * GN + n
    block_bytes = np.concatenate([np.full(GM * KSTEPS, 16384), np.full(KSTEPS * GN, 32768),
                                  np.full(GM * GN, 65536)]).astype(np.int64)
    is_write = np.zeros(len(block_bytes), dtype=bool)
    is_write[c0:] = True
    return TileTrace(keys, block_bytes, is_write, 1, "synthetic GEMM trace")


def grouped_order(group_m: int = 8) -> np.ndarray:
    """Triton tutorial's GROUP_SIZE_M mapping of program id -> (pid_m, pid_n)."""
    pid = np.arange(GM * GN)
    in_group = group_m * GN
    first_m = (pid // in_group) * group_m
    size_m = np.minimum(GM - first_m, group_m)
    pid_m = first_m + (pid % in_group) % size_m
    pid_n = (pid % in_group) // size_m
    return order_from_tiles(np.stack([pid_m, pid_n], axis=1), (GM, GN))


def test_full_size_gemm_speed_and_grouped_beats_row_major(monkeypatch):
    monkeypatch.setenv("SWIZZLEPERF_SIM_CACHE", "off")  # the time taken is a simulation's, not a lookup's
    tr = gemm_trace()
    pid = np.arange(GM * GN)
    row_major = order_from_tiles(np.stack([pid // GN, pid % GN], axis=1), (GM, GN))
    grouped = grouped_order()
    h100 = make_hw(compute_units=132, l2_bytes=50 * 2**20, name="h100-like")
    mi300x = make_hw(compute_units=304, domains=8, l2_bytes=4 * 2**20, llc_bytes=256 * 2**20,
                     name="mi300x-like")
    r_row = simulate(tr, row_major, h100)
    r_grp = simulate(tr, grouped, h100)
    r_mi = simulate(tr, grouped, mi300x)
    for r in (r_row, r_grp, r_mi):
        assert r.seconds < 30
        assert r.l2_read_bytes == GM * GN * KSTEPS * (16384 + 32768)
        assert r.dram_write_bytes == GM * GN * 65536
    assert r_grp.l2_hit_rate > r_row.l2_hit_rate
    assert r_grp.dram_read_bytes < r_row.dram_read_bytes
    assert r_mi.llc_hit_rate is not None and r_mi.cross_domain_bytes > 0


def test_home_partition_a_line_one_half_read_is_a_hit_in_its_home_half():
    """``domain_miss_path: home_partition``, as the H100's partition probe measured it
    (bench/results/l2_measure_h100/l2_partition_probe_h100.json, far-A0-B1: 25 % read hits):
    partition 0 reads 64 blocks once, then partition 1 reads them once. A block homed in partition
    1 was filled there by partition 0's read: partition 1 hits on it. One homed in partition 0 is
    a miss in partition 1, served by its home (no DRAM). Every block leaves DRAM once."""
    from swizzleperf.profiling.l2sim import block_homes
    n = 64
    trace = make_trace([[[s] for s in range(n)], [[] for _ in range(n)] + [[s] for s in range(n)]])
    hw = make_hw(compute_units=2, domains=2, l2_bytes=10 * n * B, miss_path="home_partition")
    r = simulate(trace, ident(2), hw)
    homed_in_1 = int((block_homes(n, 2) == 1).sum())
    assert 0 < homed_in_1 < n
    assert r.l2_hit_bytes == homed_in_1 * B and r.dram_read_bytes == n * B
    assert r.cross_domain_bytes == n * B      # partition 0's reads homed in 1, 1's homed in 0
    peer = simulate(trace, ident(2), make_hw(compute_units=2, domains=2, l2_bytes=10 * n * B, miss_path="peer_domains"))
    assert peer.l2_hit_bytes == 0             # the model it may replace: every such read a miss


def test_home_partition_a_far_line_takes_room_in_both_halves():
    """The probe's split cases: a line partition 0 reads and partition 1 homes is held in both, so
    one half reading more than its capacity's worth of far-homed lines evicts the other half's."""
    from swizzleperf.profiling.l2sim import block_homes
    homes = block_homes(400, 2)
    far = [int(b) for b in np.flatnonzero(homes == 1)[:4]]      # homed in 1, read by 0
    near = [int(b) for b in np.flatnonzero(homes == 1)[4:6]]    # homed in 1, read by 1
    # partition 1 reads `near` twice around partition 0's four far reads; capacity 4 blocks a half
    p0 = [[]] + [[b] for b in far]
    p1 = [[b] for b in near] + [[] for _ in far] + [[b] for b in near]
    hw = make_hw(compute_units=2, domains=2, l2_bytes=4 * B, miss_path="home_partition")
    r = simulate(make_trace([p0, p1]), ident(2), hw)
    assert r.per_domain_hit_rate[1] == 0.0    # near's lines were pushed out by far's home fills
    roomy = simulate(make_trace([p0, p1]), ident(2), make_hw(compute_units=2, domains=2, l2_bytes=8 * B,
                                                            miss_path="home_partition"))
    assert roomy.per_domain_hit_rate[1] == pytest.approx(0.5)


# --- a measured schedule and the merge model (issue #43, bench/results/l2_merge_h100/) ------------
def _streams(n_programs, n_blocks, same=True):
    """Each program reads blocks 0..n_blocks-1 one a step (``same``), or blocks of its own."""
    return make_trace([[[i if same else p * n_blocks + i] for i in range(n_blocks)] for p in range(n_programs)])


def _schedule(sms, began, length=1000.0):
    return {"smid": list(sms), "began_ns": list(began), "ended_ns": [b + length for b in began]}


def test_a_measured_schedule_without_merging_counts_every_read_as_simulate_does():
    from swizzleperf.profiling.l2sim import simulate_schedule
    tr = _streams(2, 4)
    hw = make_hw(compute_units=2, domains=1, l2_bytes=10 * B)
    got = simulate_schedule(tr, ident(2), hw, _schedule([0, 1], [0.0, 0.0]), [0, 0])
    want = simulate(tr, ident(2), dataclasses.replace(hw, dispatch="in_order"))
    assert (got.l2_read_bytes, got.l2_hit_bytes, got.dram_read_bytes) == (want.l2_read_bytes, want.l2_hit_bytes,
                                                                          want.dram_read_bytes) == (800, 400, 400)
    assert got.merged_bytes == 0 and "times measured" in got.model


def test_reads_of_two_sms_of_one_group_merge_and_of_two_groups_do_not():
    from swizzleperf.profiling.l2sim import MergeModel, simulate_schedule
    tr = _streams(2, 50)
    hw = make_hw(compute_units=2, domains=1, l2_bytes=100 * B)
    sched = _schedule([0, 1], [0.0, 1.0])
    one = simulate_schedule(tr, ident(2), hw, sched, [0, 0], [0, 0], MergeModel())
    assert one.merged_bytes == 50 * B and one.l2_read_bytes == 50 * B and one.l2_hit_bytes == 0
    two = simulate_schedule(tr, ident(2), hw, sched, [0, 0], [0, 1], MergeModel())
    assert two.merged_bytes == 0 and two.l2_read_bytes == 100 * B and two.l2_hit_bytes == 50 * B


def test_one_lookup_serves_four_readers_of_a_group():
    from swizzleperf.profiling.l2sim import MergeModel, simulate_schedule
    tr = _streams(8, 10)
    hw = make_hw(compute_units=8, domains=1, l2_bytes=100 * B)
    got = simulate_schedule(tr, ident(8), hw, _schedule(range(8), [0.0] * 8), [0] * 8, [0] * 8, MergeModel())
    assert got.l2_read_bytes == 2 * 10 * B and got.merged_bytes == 6 * 10 * B   # 8 readers: 2 lookups a block


def test_the_share_merged_falls_linearly_with_the_lag_in_bytes_as_the_probe_measured():
    """Reader 2 lags reader 1 by L blocks: in the steady part the group read 2 L blocks between their
    reads of a block, so about 1 - 2 L / window of reader 2's reads merge (bench/results/l2_merge_h100/:
    0.87 MiB behind, 53 %); before reader 2 starts and after reader 1 ends the group reads at half
    the pace, and a block's age is what the group read between the two reads of it."""
    from swizzleperf.profiling.l2sim import MergeModel, simulate_schedule
    n, window = 4000, 2000
    tr = _streams(2, n)
    hw = make_hw(compute_units=2, domains=1, l2_bytes=10 * n * B)
    x = np.arange(n)
    for lag in (0, 250, 500, 1000):
        step = 1000.0 / n                                   # ns a block
        got = simulate_schedule(tr, ident(2), hw, _schedule([0, 1], [0.0, lag * step + step / 2]), [0, 0], [0, 0],
                                MergeModel(window=window * B))
        before_first = x + np.maximum(0, x - lag)           # blocks the group read before reader 1 reads x
        before_second = np.minimum(n, x + lag + 1) + x      # ... before reader 2 reads x
        want = np.clip(1 - (before_second - before_first) / window, 0, 1).mean()
        assert abs(got.merged_bytes / (n * B) - want) < 0.03, (lag, got.merged_bytes / (n * B), want)
        if lag == 500:
            assert 0.45 < want < 0.55                       # the steady part: 1 - 2 * 500 / 2000


def test_a_window_in_time_counts_ns_not_bytes():
    from swizzleperf.profiling.l2sim import MergeModel, simulate_schedule
    tr = _streams(2, 100)
    hw = make_hw(compute_units=2, domains=1, l2_bytes=1000 * B)
    near = simulate_schedule(tr, ident(2), hw, _schedule([0, 1], [0.0, 1.0]), [0, 0], [0, 0],
                             MergeModel(window=1e9, window_unit="ns"))
    far = simulate_schedule(tr, ident(2), hw, _schedule([0, 1], [0.0, 5000.0]), [0, 0], [0, 0],
                            MergeModel(window=10.0, window_unit="ns"))
    assert near.merged_bytes == 100 * B and far.merged_bytes == 0


def test_with_no_falloff_every_read_within_the_window_merges_and_none_past_it():
    """``falloff="none"`` (the GEMM replayed as it ran, ``--merge together``): reader 2 a fixed lag
    behind reader 1 merges every read while the lag is inside the window and none once it is past
    it; the linear falloff merges only part of them at the same lag."""
    from swizzleperf.profiling.l2sim import MergeModel, simulate_schedule
    n = 200
    tr = _streams(2, n)
    hw = make_hw(compute_units=2, domains=1, l2_bytes=10 * n * B)
    got = {}
    for lag, falloff in ((30.0, "none"), (50.0, "none"), (30.0, "linear")):
        got[lag, falloff] = simulate_schedule(tr, ident(2), hw, _schedule([0, 1], [0.0, lag]), [0, 0], [0, 0],
                                              MergeModel(window=36.0, window_unit="ns", falloff=falloff))
    assert got[30.0, "none"].merged_bytes == n * B and got[50.0, "none"].merged_bytes == 0
    assert 0 < got[30.0, "linear"].merged_bytes < n * B       # about 1 - 30 / 36 of them
    assert "mergeable for 36 ns" in got[30.0, "none"].model and "up to 36 ns" in got[30.0, "linear"].model


@pytest.mark.parametrize("bad", [dict(falloff="step"), dict(window_unit="cycles"), dict(window=-1.0),
                                 dict(window=float("nan")), dict(readers_per_lookup=0)])
def test_a_merge_model_out_of_its_terms_is_refused(bad):
    from swizzleperf.profiling.l2sim import MergeModel
    with pytest.raises(ValueError):
        MergeModel(**bad)


def test_a_schedule_that_does_not_fit_is_one_error():
    from swizzleperf.profiling.l2sim import simulate_schedule
    tr = _streams(2, 3)
    hw = make_hw(compute_units=2, domains=2, l2_bytes=10 * B)
    with pytest.raises(ValueError, match="each of the 2 programs"):
        simulate_schedule(tr, ident(2), hw, _schedule([0], [0.0]), [0, 1])
    with pytest.raises(ValueError, match="outside the partition"):
        simulate_schedule(tr, ident(2), hw, _schedule([0, 5], [0.0, 0.0]), [0, 1])
    with pytest.raises(ValueError, match="outside the spec"):
        simulate_schedule(tr, ident(2), hw, _schedule([0, 1], [0.0, 0.0]), [0, 3])


def test_a_window_in_the_looking_up_sms_bytes_ignores_the_rest_of_the_group():
    """window_unit sm_bytes: what ages a block is what the SM that looked it up read since, not
    what other SMs of its group read (the probe's noise cases, bench/results/l2_merge_h100/call3)."""
    from swizzleperf.profiling.l2sim import MergeModel, simulate_schedule
    n = 100
    readers = [[[i] for i in range(n)], [[i] for i in range(n)]]
    noise = [[[1000 + 1000 * s + i] for i in range(n)] for s in range(4)]     # blocks of their own
    tr = make_trace(readers + noise)
    hw = make_hw(compute_units=6, domains=1, l2_bytes=100_000 * B)
    sched = _schedule(range(6), [0.0, 1.0, 0.0, 0.0, 0.0, 0.0])
    model = MergeModel(window=1e12, window_unit="sm_bytes")
    quiet = simulate_schedule(tr, ident(6), hw, sched, [0] * 6, [0, 0, 1, 1, 1, 1], model)
    noisy = simulate_schedule(tr, ident(6), hw, sched, [0] * 6, [0] * 6, model)
    assert quiet.merged_bytes == noisy.merged_bytes == n * B
    tight = simulate_schedule(tr, ident(6), hw, _schedule(range(6), [0.0, 600.0, 0, 0, 0, 0]), [0] * 6, [0] * 6,
                              MergeModel(window=10 * B, window_unit="sm_bytes"))
    assert tight.merged_bytes < n * B // 5                # reader 2 60 blocks behind: past a 10-block window
