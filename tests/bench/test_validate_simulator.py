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


def test_compare_replays_each_order_as_it_ran_and_merges_reads_within_groups(tmp_path):
    """compare --schedules: the GEMM's orders replayed on a (synthetic) measured schedule, with and
    without the merge model; an order without a schedule is left out and said to be."""
    import gzip
    import json

    from bench.validate_simulator import compare
    tiles, sms = 64 * 128, 132
    schedule = {"order": "grouped-m:8", "smid": [p % sms for p in range(tiles)], "program": [p % sms for p in range(tiles)],
                "began_ns": [(p // sms) * 55_000 for p in range(tiles)],
                "ended_ns": [(p // sms) * 55_000 + 54_000 for p in range(tiles)]}
    (tmp_path / "s.json.gz").write_bytes(gzip.compress(json.dumps({"orders": [schedule]}).encode()))
    (tmp_path / "p.json").write_text(json.dumps({"partition_of_sm": [s % 2 for s in range(sms)]}))
    (tmp_path / "g.json").write_text(json.dumps({"groups": [list(range(g, g + 16)) for g in range(0, 128, 16)]}))
    row = {"lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum": 4e8, "lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum": 1e8,
           "lts__t_sector_hit_rate.pct": 75.0, "dram__bytes_read.sum": 3e9, "lts__t_sectors_srcunit_ltcfabric.sum": 6e7}
    (tmp_path / "m.json").write_text(json.dumps({
        "kernel": "kernels/gemm.py", "problem": {"M": 16384, "N": 16384, "K": 4096}, "meta": {}, "device": "GPU",
        "rows": [{"order": "grouped-m:8", **row}, {"order": "row-major", **row}]}))
    plain = compare(tmp_path / "m.json", "h100", None, schedules=tmp_path / "s.json.gz",
                    partition_map=tmp_path / "p.json")
    merged = compare(tmp_path / "m.json", "h100", None, schedules=tmp_path / "s.json.gz",
                     partition_map=tmp_path / "p.json", groups=tmp_path / "g.json", merge="bytes")
    assert "Left out (no schedule): row-major." in plain and "| grouped-m:8 |" in plain and "| row-major |" not in plain
    assert "times measured" in plain and "merged within each of 12 SM groups" in merged   # 8 of 16, 4 SMs alone
    looked_up = lambda text: float(next(l for l in text.splitlines() if l.startswith("| grouped-m:8")).split("|")[10])
    assert looked_up(merged) < looked_up(plain) == 25.77    # the GEMM's reads, fewer looked up with merging


def test_the_merge_window_is_scanned_on_the_build_orders_only(tmp_path):
    """merge-scan replays only the build rows: a held-out row whose figures are not even numbers is
    never read; each window's row is compare's ``--merge together`` at that window."""
    import gzip
    import json

    from bench.validate_simulator import compare, merge_scan
    tiles, sms = 64 * 128, 132
    schedule = lambda order: {"order": order, "smid": [p % sms for p in range(tiles)],
                              "program": [p % sms for p in range(tiles)],
                              "began_ns": [(p // sms) * 55_000 for p in range(tiles)],
                              "ended_ns": [(p // sms) * 55_000 + 54_000 for p in range(tiles)]}
    (tmp_path / "s.json.gz").write_bytes(gzip.compress(json.dumps(
        {"orders": [schedule("grouped-m:16"), schedule("grouped-m:8")]}).encode()))
    (tmp_path / "p.json").write_text(json.dumps({"partition_of_sm": [s % 2 for s in range(sms)]}))
    (tmp_path / "g.json").write_text(json.dumps({"groups": [list(range(g, g + 16)) for g in range(0, 128, 16)]}))
    row = {"lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum": 4e8, "lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum": 1e8,
           "lts__t_sector_hit_rate.pct": 75.0, "dram__bytes_read.sum": 3e9, "lts__t_sectors_srcunit_ltcfabric.sum": 6e7}
    held_out = {key: "not a number" for key in row}           # grouped-m:8 is a held-out GEMM order
    (tmp_path / "m.json").write_text(json.dumps({
        "kernel": "kernels/gemm.py", "problem": {"M": 16384, "N": 16384, "K": 4096}, "meta": {}, "device": "GPU",
        "rows": [{"order": "grouped-m:16", **row}, {"order": "grouped-m:8", **held_out}]}))
    files = dict(schedules=tmp_path / "s.json.gz", partition_map=tmp_path / "p.json", groups=tmp_path / "g.json")
    text = merge_scan(tmp_path / "m.json", "h100", windows_ns=[0.0, 1e6], out=tmp_path / "scan.md", **files)
    rows = [line.split("|") for line in text.splitlines() if line.startswith("| 0 ") or line.startswith("| 1e+06 ")]
    assert [r[4].strip() for r in rows] == ["1", "1"]          # one order: the build row alone
    none, wide = (float(r[2]) for r in rows)
    at_zero = compare(tmp_path / "m.json", "h100", None, part="build", merge="together", merge_window_ns=0.0, **files)
    assert f"MAE {none:.1f} points" in at_zero.split("against SM read lookups:")[1]
    assert "mergeable for 0 ns" in at_zero and "| grouped-m:8 |" not in at_zero
    assert wide != none and (tmp_path / "scan.md").read_text().strip() == text
