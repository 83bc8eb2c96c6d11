"""bench/validate_simulator.py's summary line: hit rates, DRAM bytes and the misses beside ncu's."""
from types import SimpleNamespace

from bench.validate_simulator import _summary


def _pair(read_hit, lookups, misses, sim_hit, sim_reads, sim_hits):
    measured = {"all": read_hit, "read": read_hit, "dram_read": 1e9, "lookup_bytes": lookups, "miss_bytes": misses}
    sim = SimpleNamespace(l2_hit_rate=sim_hit, dram_read_bytes=1e9, l2_read_bytes=sim_reads, l2_hit_bytes=sim_hits)
    return measured, sim


def test_misses_are_compared_apart_from_the_hit_rate():
    # ncu looked up 60 of the 100 bytes read and 30 missed (hit rate 50 %); the simulator read 100,
    # 70 hit (70 %): 20 points off on the hit rate, none on the misses
    pairs = [_pair(0.5, 60.0, 30.0, 0.7, 100, 70), _pair(0.9, 100.0, 10.0, 0.8, 100, 80)]
    line = _summary(pairs)
    assert "against SM read lookups: MAE 15.0 points" in line, line
    # misses 30 vs 30 and 10 vs 20: 0 and 10 points of the simulated reads
    assert "SM read misses: MAE 5.0 points of the simulated L2 reads" in line, line
    assert "ncu looked up 60%-100% of the simulated L2 read bytes" in line, line
