"""The AMD profilers without an AMD GPU: real public outputs read by the parsers, and a stand-in
`rocprofv3` on PATH (fixtures/rocprof/fake_rocprofv3.py) that plays one recorded MI300X profile of
matmul_kernel in each documented layout, so the real subprocess path runs: command line, working
folder, file discovery, errors."""
import csv
import os
import sqlite3
import stat
import sys
from pathlib import Path

import pytest

from swizzleperf.hwspecs import load_spec
from swizzleperf.profiling import rocprof
from swizzleperf.profiling.profiler import ProfilerError

FIXTURES = Path(__file__).parent / "fixtures" / "rocprof"
RECORDING = FIXTURES / "mi300x_matmul"
LAYOUTS = ("long", "wide", "rocpd")


# ----------------------------------------------------------------------------- real public outputs


def test_rocprof_compute_mi300x_tcc_workload():
    """rocprofiler-compute's tests/workloads/ipblocks_TCC/MI300X_A1: vecCopy, three dispatches."""
    table = rocprof.read_counters(FIXTURES / "rocprof_compute_MI300X_A1" / "pmc_perf.csv")
    per_dispatch = table.pivot_table(index="Dispatch_Id", columns="Counter_Name", values="Counter_Value")
    hit, miss, req = per_dispatch["TCC_HIT_sum"], per_dispatch["TCC_MISS_sum"], per_dispatch["TCC_REQ_sum"]
    assert [round(100 * r, 2) for r in hit / (hit + miss)] == [33.50, 33.29, 33.29]
    assert ((hit + miss) == req).all()
    profile = rocprof.read_workload(FIXTURES / "rocprof_compute_MI300X_A1", "vecCopy", warmup=0, count=None)
    assert profile.source == "measured:rocprof-compute" and profile.figures["dispatches"] == 3
    assert profile.figures["l2_hit_rate"] == pytest.approx((66160 + 65536 + 65536) / (197472 + 196848 + 196852))
    # 128 B requests (TCC_BUBBLE) + 64 B rest + 32 B requests, per dispatch: 8 MiB of doubles and a few lines
    assert profile.figures["dram_read_bytes"] == pytest.approx(
        sum(128 * 65536 + 64 * (rd - 65536) for rd in (65781, 65770, 65769)) / 3)
    assert profile.figures["dram_write_bytes"] == 64 * 131072  # all 64 B writes
    assert profile.figures["time_ms"] == pytest.approx((16840 + 14880 + 14040) / 3 / 1e6)
    assert not profile.notes


def test_sysinfo_gives_the_l2_of_one_xcd_not_the_gpu():
    info = rocprof.read_sysinfo(FIXTURES / "rocprof_compute_MI300X_A1" / "sysinfo.csv")
    mi300x = load_spec("mi300x")
    assert info["l2_bytes_per_xcd"] == mi300x.l2_bytes_per_domain  # gpu_l2 = 4096 KiB: one XCD
    assert info["l2_bytes_total"] == mi300x.l2_bytes_total == 8 * info["l2_bytes_per_xcd"]
    assert (info["num_xcd"], info["channels_per_xcd"], info["compute_partition"]) == (8, 16, "SPX")


def test_rocprofv3_docs_outputs_read_but_hold_no_l2_counters():
    """rocprofiler-sdk source/docs/data: SQ_WAVES of four kernels, and their kernel trace."""
    table = rocprof.read_counters(FIXTURES / "rocprofv3_docs" / "counter_collection.csv")
    assert set(table["Counter_Name"]) == {"SQ_WAVES"} and len(table) == 4
    rows = rocprof.select_dispatches(table, "subtract_kernel", 0, None, "docs")
    assert rows["Counter_Value"].tolist() == [16384.0]  # the argument list follows the name
    with pytest.raises(ProfilerError, match="TCC_HIT_sum and TCC_MISS_sum missing"):
        rocprof.derive(rocprof.mean_counters(rows), l2_domains=8)
    trace = rocprof.read_trace(FIXTURES / "rocprofv3_docs" / "kernel_trace.csv")
    durations = rocprof.select_dispatches(trace, "subtract_kernel", 0, None, "docs")["duration_ns"]
    assert durations.tolist() == [2414192765435326 - 2414192765424862, 2414192765669424 - 2414192765658519]


def test_passes_fit_four_tcc_events_and_channels_share_their_event():
    passes = rocprof.split_passes(rocprof.CORE_COUNTERS)
    assert [len(p) for p in passes] == [4, 4] and sum(passes, []) == list(rocprof.CORE_COUNTERS)
    assert len(rocprof.split_passes(rocprof.channel_counters(128))) == 1  # TCC_HIT[c], TCC_MISS[c]: 2 events
    mixed = rocprof.split_passes(["SQ_WAVES", "GRBM_COUNT", "GRBM_GUI_ACTIVE", "GRBM_SPI_BUSY", "TCC_HIT_sum"])
    assert mixed == [["SQ_WAVES", "GRBM_COUNT", "GRBM_GUI_ACTIVE", "TCC_HIT_sum"], ["GRBM_SPI_BUSY"]]


# ----------------------------------------------------------------------------- the fake rocprofv3


def expected_figures() -> dict:
    """The recording's figures computed here from dispatches.csv and trace.csv with the csv
    module: matmul_kernel's dispatches after the two warm-up ones, the rocBLAS kernel whose name
    contains 'matmul_kernel' left out."""
    ours = sorted({int(r["Dispatch_Id"]) for r in csv.DictReader(open(RECORDING / "trace.csv"))
                   if r["Kernel_Name"] == "matmul_kernel"})[2:]
    values = {}
    for r in csv.DictReader(open(RECORDING / "dispatches.csv")):
        if int(r["Dispatch_Id"]) in ours:
            values.setdefault(r["Counter_Name"], []).append(float(r["Counter_Value"]))
    mean = {k: sum(v) / len(v) for k, v in values.items()}
    per_xcd = []
    for x in range(8):
        h = sum(mean[f"TCC_HIT[{c}]"] for c in range(16 * x, 16 * x + 16))
        m = sum(mean[f"TCC_MISS[{c}]"] for c in range(16 * x, 16 * x + 16))
        per_xcd.append(h / (h + m))
    durations = [int(r["End_Timestamp"]) - int(r["Start_Timestamp"])
                 for r in csv.DictReader(open(RECORDING / "trace.csv")) if int(r["Dispatch_Id"]) in ours]
    read = (128 * mean["TCC_BUBBLE_sum"] + 32 * mean["TCC_EA0_RDREQ_32B_sum"]
            + 64 * (mean["TCC_EA0_RDREQ_sum"] - mean["TCC_BUBBLE_sum"] - mean["TCC_EA0_RDREQ_32B_sum"]))
    write = 64 * mean["TCC_EA0_WRREQ_64B_sum"] + 32 * (mean["TCC_EA0_WRREQ_sum"] - mean["TCC_EA0_WRREQ_64B_sum"])
    return {"l2_hit_rate": mean["TCC_HIT_sum"] / (mean["TCC_HIT_sum"] + mean["TCC_MISS_sum"]),
            "l2_requests": mean["TCC_REQ_sum"], "dram_read_bytes": read, "dram_write_bytes": write,
            "dram_bytes": read + write, "l2_hit_rate_per_domain": per_xcd, "l2_hit_rate_min_domain": min(per_xcd),
            "time_ms": sum(durations) / len(durations) / 1e6, "dispatches": 3.0}


@pytest.fixture
def fake_rocprofv3(tmp_path, monkeypatch):
    """``configure(layout="long", **faults)``: puts a `rocprofv3` on PATH that runs the stand-in
    with that layout and those faults (the environment is set inside the script: the profiler runs
    in the worker's box, which passes no FAKE_* variable)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")

    def configure(layout: str = "long", **faults: str) -> Path:
        env = {"FAKE_ROCPROF_RECORDING": str(RECORDING), "FAKE_ROCPROF_LAYOUT": layout,
               **{f"FAKE_ROCPROF_{k.upper()}": v for k, v in faults.items()}}
        script = bin_dir / "rocprofv3"
        script.write_text(f"#!{sys.executable}\nimport os, sys\nos.environ.update({env!r})\n"
                          f"sys.path.insert(0, {str(FIXTURES)!r})\nimport fake_rocprofv3\n"
                          f"sys.exit(fake_rocprofv3.main())\n")
        script.chmod(script.stat().st_mode | stat.S_IEXEC)
        return script
    return configure


@pytest.fixture
def kernel_file(tmp_path, gemm_path) -> Path:
    path = tmp_path / "run" / "candidates" / "baseline_gemm.py"
    path.parent.mkdir(parents=True)
    path.write_text(gemm_path.read_text())
    return path


@pytest.mark.parametrize("layout", LAYOUTS)
def test_every_layout_reads_into_the_same_figures(layout, fake_rocprofv3, kernel_file):
    fake_rocprofv3(layout)
    out = kernel_file.parent / "baseline_gemm.rocprofv3"
    profile = rocprof.RocprofV3(l2_domains=8).profile(kernel_file, "matmul_kernel", "bfloat16", out)
    expected = expected_figures()
    assert profile.figures.keys() == expected.keys()
    for name, value in expected.items():
        assert profile.figures[name] == pytest.approx(value, rel=1e-12), name
    assert profile.source == "measured:rocprofv3" and profile.notes == []
    assert {e["source"] for e in profile.filtered()} == {"measured:rocprofv3"}
    # the raw output stays in the run's folder: one folder and one log per pass
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == ["pass_1", "pass_2", "pass_3"]
    log = (out / "pass_1.log").read_text()
    assert "--pmc TCC_HIT_sum TCC_MISS_sum TCC_REQ_sum TCC_EA0_RDREQ_sum --kernel-include-regex ^matmul_kernel$" in log
    assert "--kernel-trace --output-format csv" in log and f"-d {out / 'pass_1'} -o run" in log


def test_the_layouts_give_one_filtered_profile(fake_rocprofv3, kernel_file):
    profiles = []
    for layout in LAYOUTS:
        fake_rocprofv3(layout)
        out = kernel_file.parent / f"{layout}.rocprofv3"
        profiles.append(rocprof.RocprofV3().profile(kernel_file, "matmul_kernel", "bfloat16", out).filtered())
    assert profiles[0] == profiles[1] == profiles[2]
    assert [e["name"] for e in profiles[0]][:3] == ["time_ms", "l2_hit_rate", "dram_bytes"]


def test_a_relative_kernel_path_reaches_the_worker_resolved(fake_rocprofv3, kernel_file, monkeypatch):
    """rocprofv3 runs in the output folder: the worker's request must not hold a relative path (the
    stand-in writes nothing when the kernel file it names cannot be found from there)."""
    fake_rocprofv3()
    monkeypatch.chdir(kernel_file.parent.parent)
    profile = rocprof.RocprofV3().profile(Path("candidates") / kernel_file.name, "matmul_kernel", "bfloat16",
                                          Path("candidates/rel.rocprofv3"))
    assert profile.figures["l2_hit_rate"] == pytest.approx(expected_figures()["l2_hit_rate"])


@pytest.mark.parametrize("faults, message", [
    ({"drop": "TCC_MISS_sum,TCC_MISS[0]"}, "counter TCC_MISS_sum missing from the profile"),
    ({"empty": "1"}, "run_counter_collection.csv is empty: expected a CSV header"),
    ({"truncate": "1"}, "run_counter_collection.csv (is truncated|cannot be read as CSV)"),
    ({"unknown": "TCC_BUBBLE_sum"}, "rocprofv3 exited with code 1: rocprofv3: error: counter 'TCC_BUBBLE_sum'"),
])
def test_bad_output_is_one_clear_line(faults, message, fake_rocprofv3, kernel_file):
    fake_rocprofv3("long", **faults)
    with pytest.raises(ProfilerError, match=message) as caught:
        rocprof.RocprofV3().profile(kernel_file, "matmul_kernel", "bfloat16", kernel_file.parent / "p")
    assert "\n" not in str(caught.value)


def test_a_dispatch_the_regex_did_not_match(fake_rocprofv3, kernel_file, tmp_path):
    fake_rocprofv3()
    with pytest.raises(ProfilerError, match=r"run_counter_collection.csv has a header but no rows: no dispatch "
                                            r"matched the kernel filter"):
        rocprof.RocprofV3().profile(kernel_file, "other_kernel", "bfloat16", kernel_file.parent / "p")
    table = rocprof.read_counters(_long_table(tmp_path / "unfiltered"))
    with pytest.raises(ProfilerError, match=r"no dispatch of 'other_kernel' \(kernels seen: \['Cijk"):
        rocprof.select_dispatches(table, "other_kernel", 2, 3, "all_counter_collection.csv")
    assert len(rocprof.select_dispatches(table, "matmul_kernel", 2, 3, "x")["Dispatch_Id"].unique()) == 3


def _long_table(folder: Path) -> Path:
    """The recording as rocprofv3 writes it without a kernel filter (both kernels)."""
    folder.mkdir()
    sys.path.insert(0, str(FIXTURES))
    import fake_rocprofv3
    rows = list(csv.DictReader(open(RECORDING / "dispatches.csv")))
    fake_rocprofv3.write_long(folder / "all_counter_collection.csv", rows, list(csv.DictReader(open(RECORDING / "trace.csv"))))
    return folder / "all_counter_collection.csv"


def test_an_optional_pass_that_fails_is_a_note(fake_rocprofv3, kernel_file):
    fake_rocprofv3("long", unknown="TCC_HIT[0]")
    profile = rocprof.RocprofV3().profile(kernel_file, "matmul_kernel", "bfloat16", kernel_file.parent / "p")
    assert "l2_hit_rate_per_domain" not in profile.figures
    assert profile.figures["l2_hit_rate"] == pytest.approx(expected_figures()["l2_hit_rate"])
    assert len(profile.notes) == 1 and profile.notes[0].startswith("optional pass 3 (TCC_HIT[0]...) failed")


def test_a_locked_rocpd_database(fake_rocprofv3, kernel_file):
    fake_rocprofv3("rocpd")
    out = kernel_file.parent / "p"
    rocprof.RocprofV3(per_xcd=False).profile(kernel_file, "matmul_kernel", "bfloat16", out)
    db_path = next(out.rglob("*_results.db"))
    holder = sqlite3.connect(db_path)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(ProfilerError, match=r"cannot be read as a rocpd database \(database is locked\)"):
            rocprof.read_rocpd(db_path, timeout_s=0.1)
    finally:
        holder.rollback()
        holder.close()
    with pytest.raises(ProfilerError, match="expected the views 'kernels' and 'pmc_events'"):
        empty = out / "empty.db"
        sqlite3.connect(empty).close()
        rocprof.read_rocpd(empty)


def test_channels_that_do_not_cover_every_xcd_give_no_per_xcd_rates():
    counters = {"TCC_HIT_sum": 30.0, "TCC_MISS_sum": 10.0,
                **{f"TCC_HIT[{c}]": 1.0 for c in range(16)}, **{f"TCC_MISS[{c}]": 1.0 for c in range(16)}}
    figures, notes = rocprof.derive(counters, l2_domains=8)
    assert figures["l2_hit_rate"] == 0.75 and "l2_hit_rate_per_domain" not in figures
    assert any("expected 0..127 (8 XCDs x 16)" in n for n in notes)
    figures, notes = rocprof.derive({"TCC_HIT_sum": 3.0, "TCC_MISS_sum": 1.0, "TCC_REQ_sum": 5.0}, 8)
    assert "TCC_HIT + TCC_MISS = 4 but TCC_REQ = 5" in notes[0]
    assert any("TCC_EA0_RDREQ_sum missing" in n for n in notes)


def test_no_rocprofv3_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setattr(rocprof, "find_tool", lambda name: None)
    assert not rocprof.RocprofV3().available()
    with pytest.raises(ProfilerError, match="rocprofv3 not found on PATH or in /opt/rocm/bin"):
        rocprof.RocprofV3().profile(tmp_path / "k.py", "matmul_kernel", "bfloat16", tmp_path / "out")
