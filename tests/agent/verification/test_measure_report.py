"""agent/verification/measure.py's reading of ncu and agent/loop/report.py's comparisons, on
recorded figures."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from swizzleperf.agent.loop import report
from swizzleperf.agent.verification import measure


def _measurer(monkeypatch, raw: dict) -> measure.Measurer:
    monkeypatch.setattr(measure, "profile_launch", lambda *args, **kwargs: raw)
    m = measure.Measurer(spec=SimpleNamespace(kernel_name="k"), target=None)
    m.__dict__["ncu_path"] = "/usr/bin/ncu"  # the cached property, as if ncu were installed
    return m


def test_an_ncu_hit_rate_above_100_percent_is_not_reported_as_one(monkeypatch):
    """smith_waterman's tiny launches read 122.3 % on an H200 (2026-11-22)."""
    raw = {"lts__t_sector_hit_rate.pct": 122.3,
           "lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum": 30.0,
           "lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum": 10.0}
    out = _measurer(monkeypatch, raw)._ncu("kernel.py")
    assert out["l2_hit_rate"] == 0.75 and out["l2_source"] == "measured:ncu:read-lookups"
    assert "122.3 % (> 100 %)" in out["notes"]
    raw = {"lts__t_sector_hit_rate.pct": 122.3}
    out = _measurer(monkeypatch, raw)._ncu("kernel.py")
    assert "l2_hit_rate" not in out and "simulator's" in out["notes"]


def test_a_plausible_hit_rate_is_ncus(monkeypatch):
    out = _measurer(monkeypatch, {"lts__t_sector_hit_rate.pct": 76.0})._ncu("kernel.py")
    assert out["l2_hit_rate"] == 0.76 and out["l2_source"] == "measured:ncu"


def test_the_best_that_is_the_baseline_is_no_speedup():
    """Measured twice, the same order differed by 0.3 % (smith_waterman, H200): not a gain."""
    baseline = {"name": "baseline", "source": "def swizzle(...)",
                "metrics": {"time_ms": 10.896, "time_spread_ms": 0.010}}
    again = {"name": "baseline", "source": "def swizzle(...)",
             "metrics": {"time_ms": 10.861, "time_spread_ms": 0.011}}
    out = report._comparisons(again, baseline, None, "measured")
    assert out["speedup_vs_baseline"] == 1.0 and out["beyond_noise_vs_baseline"] is False


def _order(name: str, l2: float, dram: float, cross: float | None = None, time_ms: float | None = None) -> dict:
    return {"name": name, "iteration": 0, "verdict": "PASS", "l2_hit_rate": l2, "source": "simulated:mi300x",
            "dram_bytes": dram, "dram_source": "simulated:mi300x", "cross_domain_bytes": cross,
            "time_ms": time_ms, "time_spread_ms": None if time_ms is None else 0.01,
            "time_source": None if time_ms is None else "measured:events:NVIDIA H200"}


def _report(hardware: str, baseline: dict, expert: dict, best: dict, attempts: list | None = None) -> dict:
    return {"run_id": "r", "kernel": "gemm", "hardware": hardware, "mode": "simulated", "target": "t",
            "proposer": "policy", "iterations": 1, "stop_reason": "budget", "prompt_tokens": 0,
            "completion_tokens": 0, "cost_usd": 0.0, "baseline": baseline, "expert": expert, "best": best,
            "attempts": attempts or [], "workload": None}


def test_report_md_and_the_console_put_time_before_its_source(capsys):
    """Both say `not measured | n/a` for an unmeasured order, and the measured time then its source."""
    from swizzleperf.agent import cli
    r = _report("mi300x", _order("baseline", 0.81, 8e8), _order("grouped-m:8", 0.32, 8e8),
                _order("grouped-n:32", 0.84, 8e8, time_ms=3.355))
    md = report.render_markdown(r)
    assert "| baseline: baseline | 81.0% | simulated:mi300x | not measured | n/a |" in md
    assert "| best: grouped-n:32 | 84.0% | simulated:mi300x | 3.355 ± 0.010 ms | measured:events:NVIDIA H200 |" in md
    cli._print_summary(SimpleNamespace(report=r, run_id="r", status="finished", run_dir="runs/r"))
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if "baseline: baseline" in line)
    assert row.index("not measured") < row.index("n/a")


def test_same_dram_for_every_order_is_explained_by_the_last_level_cache():
    """The CPU gemm run on a simulated MI300X: 0.81 GB for every order while L2 goes 32-84 %."""
    r = _report("mi300x", _order("baseline", 0.811, 805306368, cross=1.09e9),
                _order("grouped-m:8", 0.320, 805306368, cross=15.03e9), _order("grouped-n:32", 0.840, 805306368),
                [_order("column-major", 0.803, 805306368)])
    notes = report.order_notes(r)
    assert "DRAM bytes are the same for every order (0.81 GB) while the L2 hit rate ranges 32%-84%" in notes[0]
    assert "256 MiB last-level cache (Infinity Cache)" in notes[0]
    assert "sends program p to XCD p % 8" in notes[1] and "15.03 GB of its L2 misses" in notes[1]
    assert "1.09 GB for the baseline" in notes[1]
    assert notes[0] in report.render_markdown(r)


@pytest.mark.parametrize("hardware, drams, expert_l2, count", [
    ("mi300x", (8e8, 9e8, 8e8), 0.32, 1),     # DRAM moves: no DRAM note; the expert below: its note
    ("mi300x", (8e8, 8e8, 8e8), 0.805, 1),    # the expert within a point of the baseline: no expert note
    ("h200", (8e8, 8e8, 8e8), 0.32, 1),       # no LLC: the other partition; hashed dispatch: no XCD note
    ("a100", (8e8, 8e8, 8e8), 0.32, 0),       # one L2 domain, no LLC: nothing to say
])
def test_order_notes_only_where_the_figures_call_for_them(hardware, drams, expert_l2, count):
    r = _report(hardware, _order("baseline", 0.81, drams[0]), _order("grouped-m:8", expert_l2, drams[1]),
                _order("grouped-n:32", 0.84, drams[2]))
    notes = report.order_notes(r)
    assert len(notes) == count
    if hardware == "h200":
        assert "served by the other partition" in notes[0]
