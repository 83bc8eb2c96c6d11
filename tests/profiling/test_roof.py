"""profiling/roof.py's arithmetic on known numbers, the peaks it reads (each with its source), and
agent/verification/measure.py's roof of a recorded ncu profile (an H200, tests/profiling/fixtures/ncu)."""
from __future__ import annotations

import pytest
from ncu_fixture import h200_measurer, measured_metrics

from swizzleperf import hwspecs
from swizzleperf.profiling import roof

# The recorded launches' problem: M = N = 16384, K = 4096, bf16 (kernels/gemm.py's default).
GEMM_FLOPS = 2.0 * 16384 * 16384 * 4096                        # 2.199e12
GEMM_MIN_BYTES = 2.0 * (16384 * 4096 * 2 + 16384 * 16384)       # A + B read, C written: 805 MB
H200 = hwspecs.load_spec("h200")


def test_a_measured_gemm_is_compute_bound_with_its_ceiling():
    """Row-major on an H200 (ncu, 3.259 ms): 674.8 TFLOP/s of the 989.4 dense bf16 peak; the floor
    is the compute term 2.199e12 / 989.4e12 = 2.2226 ms (the compulsory bytes take 0.168 ms)."""
    r = roof.measured(GEMM_FLOPS, GEMM_MIN_BYTES, H200, "bfloat16", "matrix", time_ms=3.2587733,
                      dram_bytes=9.0637e9, dram_source="measured:ncu", l2_bytes=21.38e9, programs=8192, wave=132)
    assert r["tflops"] == pytest.approx(674.8, abs=0.1)
    assert r["shares"]["compute"] == pytest.approx(674.8 / 989.4, abs=1e-3)
    assert r["gbps"] == pytest.approx(2781, abs=1) and r["shares"]["DRAM"] == pytest.approx(2781 / 4800, abs=1e-3)
    assert r["shares"]["L2"] == pytest.approx(21.38e9 / 3.2587733e-3 / 11.45e12, rel=1e-6)
    assert r["binding"] == "compute"
    assert r["floor_ms"] == pytest.approx(2.2226, abs=1e-4)
    assert r["roof_share"] == pytest.approx(2.2226 / 3.2588, abs=1e-4)
    assert r["max_gain"] == pytest.approx(3.2588 / 2.2226 - 1, abs=1e-4)
    assert "at 68 % of the roof: no tile order can gain more than 47 %" in r["line"]


@pytest.mark.parametrize("time_ms, expected", [(0.2, "DRAM"), (5.0, "latency / too few waves")])
def test_a_vector_kernel_is_bound_by_dram_or_by_nothing(time_ms, expected):
    """An elementwise pass over 0.8 GB on an H200: at 0.2 ms it streams 4.0 TB/s (83 % of 4.8), so
    DRAM binds; at 5 ms every share is under 40 %: no throughput limit explains the time."""
    r = roof.measured(1e9, 0.8e9, H200, "bfloat16", "vector", time_ms=time_ms, dram_bytes=0.8e9,
                      programs=100_000, wave=132 * 8)
    assert r["peaks"]["flops"] == H200.peak_fp32_flops and r["peaks"]["flops_what"] == "fp32 vector"
    assert r["binding"] == expected
    assert r["floor_ms"] == pytest.approx(0.8e9 / 4.8e12 * 1e3)      # the compulsory bytes at the DRAM peak


def test_fewer_programs_than_one_wave_is_latency_bound():
    """The 8-GPU per-rank GEMM of HARDWARE.md: 160 tiles on 132 SMs is more than a wave; 100 is less."""
    r = roof.measured(GEMM_FLOPS, GEMM_MIN_BYTES, H200, "bfloat16", "matrix", time_ms=2.5, programs=100, wave=132)
    assert r["binding"] == "latency / too few waves" and "fewer than one wave of 132" in r["binding_why"]
    assert roof.measured(GEMM_FLOPS, GEMM_MIN_BYTES, H200, "bfloat16", "matrix", time_ms=2.5, programs=160,
                         wave=132)["binding"] == "compute"


def test_a_simulated_roof_has_predicted_bytes_and_no_rates():
    r = roof.predicted(GEMM_FLOPS, GEMM_MIN_BYTES, hwspecs.load_spec("mi300x"), "bfloat16", "matrix",
                       dram_bytes=0.805e9, dram_source="simulated:mi300x", programs=8192, wave=304)
    assert r["status"] == "predicted" and r["time_ms"] is None
    assert r["tflops"] == r["gbps"] == r["roof_share"] == r["max_gain"] == "not measured"
    assert set(r["shares"].values()) == {"not measured"}
    assert r["dram_source"] == "simulated:mi300x (predicted)" and r["binding"] == "compute"
    assert "predicted" in r["line"] and "not measured" in r["line"]
    assert roof.at_roof({"roof": r, "time_ms": None}) is None          # nothing measured: never stops a run


def test_at_roof_uses_the_margin_or_the_spread():
    """At 2.25 ms the GEMM is 1.2 % above its 2.2226 ms floor: within the default 3 %; at 2.4 ms (8 %)
    only a spread of 0.2 ms (8.3 %) makes the gain indistinguishable from noise."""
    def metrics(time_ms, spread):
        r = roof.measured(GEMM_FLOPS, GEMM_MIN_BYTES, H200, "bfloat16", "matrix", time_ms=time_ms)
        return {"roof": r, "time_ms": time_ms, "time_spread_ms": spread}
    stop = roof.at_roof(metrics(2.25, 0.01))
    assert stop.startswith("at 99 % of the roof: no tile order can gain more than 1 %")
    assert roof.at_roof(metrics(2.4, 0.01)) is None
    assert roof.at_roof(metrics(2.4, 0.2)).startswith("at 93 % of the roof: no tile order can gain more than 8 %")
    assert roof.at_roof(metrics(2.4, 0.01), margin=0.10) is not None


@pytest.mark.parametrize("dtype, compute, field", [("bfloat16", "matrix", "peak_bf16_flops"),
                                                    ("float16", "matrix", "peak_fp16_flops"),
                                                    ("bfloat16", "vector", "peak_fp32_flops"),
                                                    ("float32", "matrix", None)])
def test_the_compute_peak_follows_dtype_and_units(dtype, compute, field):
    p = roof.peaks(H200, dtype, compute)
    assert p["flops_field"] == field and p["flops"] == (getattr(H200, field) if field else None)
    # an fp32 matrix kernel has no peak in the specs: no compute share, still a DRAM one
    r = roof.measured(1e12, 1e9, H200, dtype, compute, time_ms=1.0, dram_bytes=1e9)
    assert (r["shares"]["compute"] is None) == (field is None) and r["shares"]["DRAM"] is not None


@pytest.mark.parametrize("name", hwspecs.list_specs())
def test_every_peak_in_hwspecs_names_its_source(name):
    """A peak with no source is not added; an estimate says it is one (hwspecs/*.yaml comments)."""
    spec, sources = hwspecs.load_spec(name), hwspecs.value_sources(name)
    for field in ("peak_bf16_flops", "peak_fp16_flops", "peak_fp32_flops", "dram_bytes_per_s", "l2_bytes_per_s"):
        if getattr(spec, field) is not None:
            assert len(sources.get(field, "")) > 20, f"{name}.{field} has no source"
    if spec.vendor == "nvidia" and spec.l2_bytes_per_s and name != "a100":
        assert sources["l2_bytes_per_s"].startswith("estimate")


def test_a_recorded_ncu_profile_gives_the_roof(monkeypatch):
    """grouped-m:8 on the H200: 2.850 ms, 3.14 GB from DRAM, 451.3 M SM read lookups of 32 B."""
    r = measured_metrics(monkeypatch, "grouped-m:8")["roof"]
    assert r["status"] == "measured" and r["dram_source"] == "measured:ncu"
    assert r["tflops"] == pytest.approx(GEMM_FLOPS / 2.8504107e-3 / 1e12)          # 771.5
    assert r["dram_bytes"] == pytest.approx(2610778453.33 + 530370816.0)
    assert r["l2_bytes"] == pytest.approx((339094958.67 + 112234749.33) * 32)
    assert r["l2_source"] == "measured:ncu: L2 requests x 32 B"
    assert r["peaks"]["flops_field"] == "peak_bf16_flops" and r["binding"] == "compute"
    assert r["roof_share"] == pytest.approx(2.2226 / 2.8504, abs=1e-4) and "at 78 % of the roof" in r["line"]


def test_without_ncu_the_dram_bytes_are_labelled_predicted(monkeypatch):
    m = h200_measurer(monkeypatch, {})
    metrics = {"time_ms": 3.0, "time_spread_ms": 0.02, "dram_bytes": 9e9, "dram_source": "simulated:h200",
               "profile": []}
    r = m.roof(metrics)
    assert r["status"] == "measured" and r["dram_source"] == "simulated:h200 (predicted)"
    assert r["l2_bytes"] is None and r["shares"]["L2"] is None


def test_far_below_the_roof_the_line_bounds_nothing():
    """An H200 run of a 6-program GEMM (2026-12-06): 0 % of the roof, bound by latency; the line once
    read "no tile order can gain more than 209900 %"."""
    far = {"roof_share": 0.0005, "max_gain": 2099.0}
    assert roof.stop_line(far) == "at 0 % of the roof: far below it, the roof bounds no order's gain here"
    assert roof.stop_line({"roof_share": 0.5, "max_gain": 1.0}) == \
        "at 50 % of the roof: no tile order can gain more than 100 %"
