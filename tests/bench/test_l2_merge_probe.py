"""bench/l2_merge_probe.py: its kernel under Triton's interpreter (in a process of its own, as
test_l2_partition_probe.py does), its launches compiled for Hopper, its cases and its summary."""
from __future__ import annotations

import json
from pathlib import Path

from interpreted import run_interpreted

INTERPRETED = Path(__file__).with_name("_l2_merge_probe_interpreted.py")


def test_the_kernel_reads_what_each_case_claims():
    done = run_interpreted(INTERPRETED)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert " passed" in done.stdout and "failed" not in done.stdout


def test_the_cases_pair_each_anchor_with_every_other_sm_then_delay_then_group():
    from bench.l2_merge_probe import ANCHOR, ANCHORS, DELAY_PARTNERS, DELAYS_CYCLES, GROUP_SIZES, cases
    all_cases = cases(132)
    names = [c.name for c in all_cases]
    assert names[0] == "solo" and len(set(names)) == len(names)
    for a in ANCHORS:
        pairs = [c for c in all_cases if c.name.startswith("pair") and set(c.delays) - {a} and a in c.delays
                 and c.name.startswith("pair-" if a == ANCHOR else f"pair{a}-")]
        assert sorted(b for c in pairs for b in c.delays if b != a) == [b for b in range(132) if b != a]
    delays = [c for c in all_cases if c.name.startswith("delay-")]
    assert len(delays) == len(DELAY_PARTNERS) * len(DELAYS_CYCLES)
    assert all(c.delays[ANCHOR] == 0 for c in delays)
    noise = [c for c in all_cases if c.name.startswith("noise-")]
    assert noise and all(set(c.noise) <= set(c.delays) - {ANCHOR, 1} for c in noise)
    assert {len(c.noise) for c in noise} == {0, 4, 8, 13}
    groups = [c for c in all_cases if c.name.startswith("group-")]
    assert [len(c.delays) for c in groups] == list(GROUP_SIZES)
    assert [len(c.delays) for c in all_cases if c.name in ("all", "tma-all")] == [132, 132]
    tma = [c for c in all_cases if c.tma]
    from bench.l2_merge_probe import TMA_PARTNERS
    assert all(c.name.startswith("tma-") for c in tma)
    assert len(tma) == 1 + len(TMA_PARTNERS) + 2 * len(DELAYS_CYCLES) + len(GROUP_SIZES) + 1


def test_the_summary_says_which_sms_merged_and_leaves_out_cases_not_all_served():
    from bench.l2_merge_probe import BLOCK, DELAYS_CYCLES, merge_groups, summary
    n, chunk = 10, BLOCK * 4
    lines = n * chunk / 32

    def case(name, delays, per_line, served=None):
        return {"name": name, "delays": {str(k): v for k, v in delays.items()},
                "served": sorted(delays) if served is None else served, "reader_cycles": {"0": 5000},
                "metrics": {"lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum": (per_line - 1) * lines,
                            "lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum": lines}}
    result = {"device": "GPU", "chunk_bytes": chunk, "n_chunks": n, "num_sms": 5, "cases": [
        case("solo", {0: 0}, 1.0), case("pair-1", {0: 0, 1: 0}, 1.0), case("pair-2", {0: 0, 2: 0}, 2.0),
        case("pair-3", {0: 0, 3: 0}, 1.9), case("pair-4", {0: 0, 4: 0}, 1.0, served=[0]),
        case("delay-1-0", {0: 0, 1: 0}, 1.0), case("delay-1-409600", {0: 0, 1: 409600}, 2.0),
        case("group-2", {0: 0, 1: 0}, 1.0), case("all", {i: 0 for i in range(5)}, 3.0)]}
    assert merge_groups(result) == {"0": {"merged": [0, 1], "apart": [2, 3], "not_measured": [4]}}
    text = summary(result)
    assert "solo: 1.0" in text and "| 0 | 0, 1 (2) | 2 | 4 |" in text
    row = next(line for line in text.splitlines() if line.startswith("| 1 | "))
    assert row.split(" | ")[1] == "1.00" and row.rstrip(" |").endswith("2.00")
    assert len(row.split("|")) == len(DELAYS_CYCLES) + 3
    assert "| (SM 0's cycles to read the buffer) | 5000 |" in text
    assert "| group-2 | 2 | 1.00 |" in text and "| all | 5 | 3.00 |" in text


def test_a_noise_readers_own_lookups_are_taken_off_the_cases_lookups_per_line():
    from bench.l2_merge_probe import BLOCK, NOISE_DELAYS, lookups_per_line, summary
    n, chunk = 10, BLOCK * 4
    sectors = n * chunk / 32
    case = {"name": f"noise-4-{NOISE_DELAYS[0]}", "delays": {"0": 0, "1": 0, "2": 0, "3": 0, "4": 0, "5": 0},
            "noise": [2, 3, 4, 5], "served": [0, 1, 2, 3, 4, 5],
            "metrics": {"lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum": 0.25 * sectors,
                        "lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum": 5 * sectors}}
    assert lookups_per_line(case, chunk, n) == 1.25     # 4 noise buffers, one lookup a line each, taken off
    text = summary({"device": "GPU", "chunk_bytes": chunk, "n_chunks": n, "num_sms": 6, "cases": [case]})
    assert "| 4 | 1.25 |" in text


def test_every_case_compiles_for_hopper_with_cg_loads_and_the_global_timer():
    """The launches compiled for sm_90 as on the GPU (a real %smid and %clock64), without one."""
    from bench.l2_merge_probe import Case, launch
    from swizzleperf.kernels.distributed.compile_check import compiling_launches
    with compiling_launches(90) as compiled:
        launch(Case("pair", {0: 0, 1: 100}), 2**20, 132, device="cpu", on_gpu=True)
        launch(Case("tma-pair", {0: 0, 1: 100}, tma=True), 2**20, 132, device="cpu", on_gpu=True)
    assert len(compiled) == 2 and all(k[0] == "merge_kernel" for k in compiled)
    ptx = [v.asm["ptx"] for v in compiled.values() if v is not None]
    assert len(ptx) == 2 and all("%clock64" in p and "%smid" in p for p in ptx)
    assert sum("ld.global.cg" in p for p in ptx) == 1 and sum("cp.async.bulk.tensor" in p for p in ptx) == 1


def test_discover_groups_sms_round_by_round_from_the_pairs_lookups(monkeypatch, tmp_path):
    """A chip of 6 SMs in groups {0, 2, 5} and {1, 3} and {4}: each round pairs the lowest SM left
    with every other one left; the pairs below 1.5 lookups a line join its group."""
    import types

    import torch

    import bench.l2_merge_probe as probe
    truth = {0: "a", 2: "a", 5: "a", 1: "b", 3: "b", 4: "c"}
    n, chunk = 10, probe.BLOCK * 4
    sectors = n * chunk / 32
    rounds = []

    def fake_profile(todo, stem, timeout_s):
        rounds.append([c.name for c in todo])
        out = []
        for c in todo:
            a, b = sorted(c.delays)
            per_line = 1.0 if truth[a] == truth[b] else 2.0
            out.append({"name": c.name, "delays": {str(k): v for k, v in c.delays.items()}, "served": [a, b],
                        "metrics": {"lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum": (per_line - 1) * sectors,
                                    "lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum": sectors}})
        return {"cases": out}
    monkeypatch.setattr(probe, "_profile", fake_profile)
    monkeypatch.setattr(probe, "_header", lambda props: {"device": "GPU", "num_sms": 6, "n_chunks": n,
                                                          "chunk_bytes": chunk})
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: types.SimpleNamespace(multi_processor_count=6))
    result = probe.discover(tmp_path / "groups.json")
    assert result["groups"] == [[0, 2, 5], [1, 3], [4]] and result["unassigned"] == []
    assert rounds == [["find0-1", "find0-2", "find0-3", "find0-4", "find0-5"], ["find1-3", "find1-4"], []]
    assert json.loads((tmp_path / "groups.json").read_text())["groups"] == result["groups"]


def test_discover_guesses_no_group_when_ncu_measured_nothing(monkeypatch, tmp_path):
    import types

    import torch

    import bench.l2_merge_probe as probe
    monkeypatch.setattr(probe, "_profile", lambda todo, stem, t: {"cases": [{"name": c.name, "delays": {}, "served": None,
                                                                          "metrics": None} for c in todo]})
    monkeypatch.setattr(probe, "_header", lambda props: {"num_sms": 4, "n_chunks": 2, "chunk_bytes": 64})
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: types.SimpleNamespace(multi_processor_count=4))
    result = probe.discover(tmp_path / "g.json")
    assert result["groups"] == [] and result["unassigned"] == [0, 1, 2, 3]
