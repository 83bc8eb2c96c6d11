"""The filtered profile: one filter over ncu, rocprofv3 and the simulator; the profile step of a run
on an MI300X through the stand-in rocprofv3 (test_rocprof.py's fixture), what the prompt shows of
it, and `swizzleperf profile`."""
import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from typer.testing import CliRunner

from swizzleperf import hwspecs
from swizzleperf.agent.loop.graph import PROMPT_METRICS
from swizzleperf.agent.proposers.base import ProposalContext
from swizzleperf.agent.proposers.llm import render_messages
from swizzleperf.agent.verification.load import load_spec
from swizzleperf.agent.verification.measure import Measurer
from swizzleperf.profiling import backends, ncu, profiler

from test_ncu import LOG
from test_rocprof import expected_figures, fake_rocprofv3  # noqa: F401 -- the stand-in's fixture

MI300X = hwspecs.DeviceInfo("AMD Instinct MI300X", "amd", 304, 4 << 20, "gfx942:sramecc+:xnack-", "SPX")


def test_the_filter_ranks_known_figures_with_unit_source_and_meaning():
    entries = profiler.filtered({"dram_bytes": 2e9, "time_ms": 1.5, "l2_hit_rate": 0.8, "not_a_figure": 3.0,
                                 "l1_hit_rate": float("nan"), "cross_domain_bytes": None,
                                 "l2_hit_rate_per_domain": [0.7, 0.9]}, "measured:x",
                                sources={"l2_hit_rate": "measured:x:read-lookups"})
    assert [e["name"] for e in entries] == ["time_ms", "l2_hit_rate", "dram_bytes", "l2_hit_rate_per_domain"]
    assert [e["unit"] for e in entries] == ["ms", "fraction", "bytes", "fraction"]
    assert [e["source"] for e in entries] == ["measured:x", "measured:x:read-lookups", "measured:x", "measured:x"]
    assert all(e["meaning"] and "\n" not in e["meaning"] for e in entries)
    assert [e["rank"] for e in entries] == sorted(e["rank"] for e in entries)


def test_changes_against_the_baseline_and_the_best():
    baseline = profiler.filtered({"time_ms": 2.0, "l2_hit_rate": 0.5}, "measured:x")
    best = profiler.filtered({"time_ms": 1.5}, "measured:x")
    now = profiler.with_changes(profiler.filtered({"time_ms": 1.0, "l2_hit_rate": 0.75,
                                                   "l2_hit_rate_per_domain": [0.7, 0.8]}, "measured:x"),
                                baseline, best)
    assert [(e["name"], e["vs_baseline"], e["vs_best"]) for e in now] == [
        ("time_ms", -1.0, -0.5), ("l2_hit_rate", 0.25, None), ("l2_hit_rate_per_domain", None, None)]


def test_the_same_filter_over_ncu():
    raw = ncu.parse_csv(LOG, "matmul_kernel")
    entries = {e["name"]: e for e in profiler.filtered(ncu.figures(raw), "measured:ncu")}
    assert entries["l2_hit_rate"]["value"] == pytest.approx(0.465)
    assert entries["time_ms"]["value"] == pytest.approx(3.51)
    assert entries["dram_bytes"]["value"] == pytest.approx(8.81e9 + 536_870_912)
    assert entries["dispatches"]["value"] == 2 and {e["source"] for e in entries.values()} == {"measured:ncu"}
    over = ncu.figures({"lts__t_sector_hit_rate.pct": 122.3, "lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum": 3.0,
                        "lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum": 1.0})
    assert over["l2_hit_rate"] == 0.75  # not a rate above 100 %: the SM read lookups'


def test_the_profiler_follows_the_vendor():
    assert backends.profiler_for(hwspecs.load_spec("h200")).name == "ncu"
    assert backends.profiler_for(hwspecs.load_spec("mi300x")).name in ("rocprofv3", "rocprof-compute")
    with pytest.raises(profiler.ProfilerError, match="no profiler for vendor 'intel'"):
        backends.profiler_for(SimpleNamespace(vendor="intel"))


# ----------------------------------------------------------------------------- a run's profile step


@pytest.fixture
def measured_mi300x(tmp_path, gemm_path):
    """A Measurer of the bundled GEMM on a (pretended) live MI300X, the candidate's module in a run's
    candidates folder, its program -> tile map the row-major order."""
    spec = load_spec(gemm_path)
    target = hwspecs.resolve_target("mi300x", device=MI300X)
    assert target.mode == "measured"
    kernel = tmp_path / "runs" / "r1" / "candidates" / "baseline_gemm.py"
    kernel.parent.mkdir(parents=True)
    kernel.write_text(gemm_path.read_text())
    grid = spec.tile_grid(spec.problems["default"], spec.meta_for("default"))
    np.save(kernel.with_suffix(".map.npy"), np.arange(math.prod(grid)))
    return Measurer(spec, target), kernel


@pytest.mark.parametrize("layout", ["long", "wide", "rocpd"])
def test_a_run_on_an_mi300x_profiles_with_rocprofv3_and_the_prompt_shows_it(layout, fake_rocprofv3,
                                                                            measured_mi300x):
    fake_rocprofv3(layout)
    measurer, kernel = measured_mi300x
    metrics = measurer.measure(kernel, kernel.with_suffix(".map.npy"), {})
    expected = expected_figures()
    assert metrics["l2_source"] == metrics["dram_source"] == "measured:rocprofv3"
    assert metrics["l2_hit_rate"] == pytest.approx(expected["l2_hit_rate"])
    assert metrics["predicted_source"] == "simulated:mi300x" and metrics["notes"] == ""
    by_name = {e["name"]: e for e in metrics["profile"]}
    assert by_name["time_ms"]["value"] == pytest.approx(expected["time_ms"])
    assert by_name["l2_hit_rate_per_domain"]["value"] == pytest.approx(expected["l2_hit_rate_per_domain"], abs=1e-4)
    assert {e["source"] for e in metrics["profile"]} == {"measured:rocprofv3", "simulated:mi300x"}
    assert by_name["cross_domain_bytes"]["source"] == "simulated:mi300x"  # not measured: the simulator's
    assert (kernel.parent / "baseline_gemm.rocprofv3" / "pass_1").is_dir()  # raw output in the run folder

    prompt = _prompt(measurer, metrics, best={"iteration": 3, "name": "grouped-m:8",
                                              "metrics": {"l2_hit_rate": 0.9, "l2_source": "measured:rocprofv3"}})
    section = prompt[prompt.index("## Profile of the baseline"):prompt.index("## History")]
    rows = [line for line in section.splitlines() if line.startswith("| ") and "measured:rocprofv3" in line]
    assert [row.split(" | ")[1] for row in rows][:3] == ["time_ms", "l2_hit_rate", "dram_bytes"]
    l2_row = next(row for row in rows if row.split(" | ")[1] == "l2_hit_rate")
    assert f"{expected['l2_hit_rate']:.4g}" in l2_row and "fraction" in l2_row and "share of L2 lookups" in l2_row
    assert f"0.9 ({0.9 - expected['l2_hit_rate']:+.4g})" in l2_row  # the best so far and the change
    assert "simulated:mi300x" in section  # cross-domain bytes, labelled as the simulator's


def test_a_failed_profile_leaves_the_simulators_figures_labelled(fake_rocprofv3, measured_mi300x):
    fake_rocprofv3("long", drop="TCC_MISS_sum,TCC_MISS[0]")
    measurer, kernel = measured_mi300x
    metrics = measurer.measure(kernel, kernel.with_suffix(".map.npy"), {})
    assert metrics["l2_source"] == metrics["dram_source"] == "simulated:mi300x"
    assert metrics["notes"].startswith("rocprofv3 failed (counter TCC_MISS_sum missing from the profile")
    assert metrics["notes"].endswith(": L2 hit rate and DRAM bytes are the simulator's")
    assert {e["source"] for e in metrics["profile"]} == {"simulated:mi300x"}
    prompt = _prompt(measurer, metrics, best=None)
    assert "| 2 | l2_hit_rate | 0.8112 | fraction | simulated:mi300x | - |" in prompt


def _prompt(measurer, metrics: dict, best) -> str:
    """propose.j2 as the loop renders it, the baseline's profile holding the filtered profile."""
    keys = PROMPT_METRICS  # what agent/loop/graph.py passes to the prompt: the filtered profile among them
    assert "profile" in keys
    context = ProposalContext(
        kernel_name="gemm", kernel_source="", target_name="swizzle",
        target_source="@triton.jit\ndef swizzle(pid, num_pid_m, num_pid_n):\n    return pid // num_pid_n, pid % num_pid_n\n",
        hardware=measurer.target.spec, mode="measured", problem={"M": 16384}, meta={}, tile_grid=(128, 64),
        swizzle_args=(128, 64), analysis="(analysis)",
        profile={k: metrics[k] for k in keys if metrics.get(k) is not None}, best=best)
    return render_messages(context)[1]["content"]


# ----------------------------------------------------------------------------- swizzleperf profile


def test_swizzleperf_profile_prints_the_filtered_profile(fake_rocprofv3, gemm_path, tmp_path, monkeypatch):
    from swizzleperf.agent.cli import app
    fake_rocprofv3("rocpd")
    monkeypatch.setattr(hwspecs.loader, "detect_device", lambda: MI300X)
    result = CliRunner().invoke(app, ["profile", str(gemm_path), "--hw", "mi300x", "--swizzle", "grouped-m:8",
                                      "--workdir", str(tmp_path / "work")], terminal_width=250)
    assert result.exit_code == 0, result.output
    out = result.output
    assert "gemm on mi300x (measured): detected AMD Instinct MI300X" in out
    assert "order: kernel's own" in out and "order: grouped-m:8" in out
    assert out.count("measured:rocprofv3") >= 2 * 6 and "l2_hit_rate_per_domain" in out
    assert f"{expected_figures()['l2_hit_rate']:.4g}" in out
    folder = Path(out.split("raw output and modules: ")[1].split()[0])
    assert sorted(p.name for p in folder.iterdir() if p.suffix == ".rocprofv3") == [
        "grouped-m_8_gemm.rocprofv3", "own_gemm.rocprofv3"]


def test_swizzleperf_profile_without_a_gpu_shows_the_simulators_figures(gemm_path, tmp_path, monkeypatch):
    from swizzleperf.agent.cli import app
    monkeypatch.setattr(hwspecs.loader, "detect_device", lambda: None)
    result = CliRunner().invoke(app, ["profile", str(gemm_path), "--hw", "mi300x", "--swizzle", "xcd-grouped-m:8",
                                      "--workdir", str(tmp_path / "work")], terminal_width=250)
    assert result.exit_code == 0, result.output
    assert "(simulated)" in result.output and "measured:" not in result.output
    own, remapped = result.output.split("order: xcd-grouped-m:8")
    assert "simulated:mi300x" in own and "l2_hit_rate" in own
    assert any(line.split("│")[6].strip().startswith(("+", "-")) for line in remapped.splitlines()
               if "l2_hit_rate " in line)  # the change against the kernel's own order
