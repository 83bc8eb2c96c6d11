"""agent/measure.py's reading of ncu and agent/report.py's comparisons, on recorded figures."""
from __future__ import annotations

from types import SimpleNamespace

from swizzleperf.agent import measure, report


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
