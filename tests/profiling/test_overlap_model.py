"""The overlap model (profiling/overlap_model.py): physical sense of its parts, its errors, its
lower bound, interval and extrapolation flag, and the mechanics of its fit and validation (fast: no
GPU, no kernels run). No test here looks at the frozen unseen set's accuracy (the 4- and 8-GPU rows,
the COMM_SMS sweep, the two-H100 bench): that is bench/results/overlap_model_validation.md's job."""
import json
import math
from pathlib import Path

import pytest

from swizzleperf import hwspecs
from swizzleperf.profiling import overlap_model as om

H200 = hwspecs.load_spec("h200")
QKV = {"M": 4096, "N": 10240, "K": 8192}
BIG = {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "num_warps": 8, "num_stages": 3}
SMALL = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "num_warps": 4, "num_stages": 4}
#: A configuration as measured for the fit: a measured tile, the later GEMM knobs off.
MEASURED = {**BIG, "EPILOGUE_SUBTILE": 0, "STREAM_K": 0, "WARP_SPECIALIZE": 0}
RESULTS = Path(__file__).resolve().parents[2] / "bench" / "results"


def test_bulk_sync_is_its_parts_in_a_row_and_overlap_hides_some_of_them():
    bulk = om.predict("gemm_all_scatter", QKV, 4, "bulk_sync", {}, H200)
    parts = bulk.breakdown
    assert bulk.time_ms == pytest.approx(parts["gemm"] + parts["scatter"] + parts["barrier"])
    assert bulk.hidden_share == 0.0 and bulk.source == "simulated:h200x4"
    pc = om.predict("gemm_all_scatter", QKV, 4, "producer_consumer", {"COMM_SMS": 16}, H200)
    assert 0.0 < pc.hidden_share <= 1.0 and pc.time_ms < parts["gemm"] + parts["scatter"] + pc.breakdown["tail"] + 0.1


def test_more_comm_sms_take_sms_from_the_gemm():
    few = om.predict("gemm_all_scatter", QKV, 8, "producer_consumer", {"COMM_SMS": 8}, H200)
    many = om.predict("gemm_all_scatter", QKV, 8, "producer_consumer", {"COMM_SMS": 32}, H200)
    assert many.compute_ms > few.compute_ms and many.breakdown["scatter"] < few.breakdown["scatter"]


def test_the_last_partial_wave_costs_less_than_a_full_one():
    tile = {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "num_warps": 8, "num_stages": 3}
    one_wave = om.gemm_s(128 * 12, 256 * 11, 8192, tile, 132, H200)     # 132 tiles
    partial = om.gemm_s(128 * 12, 256 * 12, 8192, tile, 132, H200)     # 144 tiles: 1.09 waves
    two_waves = om.gemm_s(128 * 12, 256 * 22, 8192, tile, 132, H200)   # 264 tiles
    assert one_wave < partial < two_waves


def test_the_gemm_follows_the_measured_rank_gemm_at_a_fitted_shape():
    """4096 x 5120 x 8192 (the 2-GPU per-rank QKV GEMM, in the GEMM's fit) on 132 SMs, both tile
    configurations, against bench/results/rank_gemm_h200.json: within the fit's 15 %."""
    rows = json.loads((RESULTS / "rank_gemm_h200.json").read_text())["rows"]
    for meta in (BIG, SMALL):
        row = next(r for r in rows if r["impl"] == "triton" and r["world_size"] == 2 and r["programs"] == 132
                   and (r["M"], r["N"], r["K"]) == (4096, 5120, 8192)
                   and all(r["meta"][k] == v for k, v in meta.items()))
        assert om.gemm_s(4096, 5120, 8192, meta, 132, H200) * 1e3 == pytest.approx(row["median_ms"], rel=0.15)


def test_the_tile_config_reaches_the_prediction():
    meta = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "num_warps": 4, "num_stages": 4}
    default = om.predict("gemm_all_scatter", QKV, 8, "producer_consumer", {}, H200)
    small = om.predict("gemm_all_scatter", QKV, 8, "producer_consumer", meta, H200)
    assert small.compute_ms < default.compute_ms
    odd = {**meta, "BLOCK_K": 32, "num_stages": 2}        # not measured: the nearest config, scaled
    assert om.predict("gemm_all_scatter", QKV, 8, "bulk_sync", odd, H200).compute_ms > 0


def test_the_copy_engine_pattern_is_host_bound_with_many_peers():
    eight = om.predict("all_gather_gemm", {"M": 4096, "N": 14336, "K": 4096}, 8, "push_copy_engine", {}, H200)
    assert eight.notes == "host" and eight.breakdown["host"] == pytest.approx(eight.time_ms)


def test_more_ranks_mean_less_compute_and_more_peers():
    two, eight = (om.predict("all_gather_gemm", {"M": 8192, "N": 28672, "K": 8192}, w, "push", {}, H200)
                  for w in (2, 8))
    assert eight.compute_ms < two.compute_ms / 3


@pytest.mark.parametrize("kernel, pattern, message", [
    ("gemm_all_scatter", "teleport", "pattern of gemm_all_scatter must be"),
    ("nccl_magic", "bulk_sync", "kernel must be one of"),
])
def test_unknown_kernel_or_pattern_is_one_line(kernel, pattern, message):
    with pytest.raises(om.OverlapModelError, match=message):
        om.predict(kernel, QKV, 4, pattern, {}, H200)


def test_a_world_size_of_one_is_refused():
    with pytest.raises(om.OverlapModelError, match="world_size must be an integer >= 2, got 1"):
        om.predict("gemm_all_scatter", QKV, 1, "bulk_sync", {}, H200)


def test_a_spec_without_interconnect_figures_is_refused():
    with pytest.raises(om.OverlapModelError, match="copy_engine_bytes_per_s"):
        om.predict("gemm_all_scatter", QKV, 4, "bulk_sync", {}, hwspecs.load_spec("mi300x"))


def test_a_prediction_is_fast():
    import time
    start = time.perf_counter()
    for _ in range(200):
        om.predict("gemm_reduce_scatter", {"M": 8192, "N": 8192, "K": 28672}, 8, "producer_consumer", {}, H200)
    assert (time.perf_counter() - start) / 200 < 0.01


# ------------------------------------------------------------------------------ bound, interval, flag
_PATTERNS = {"gemm_all_scatter": ("bulk_sync", "producer_consumer", "fused_sequential", "workgroup_specialized"),
             "all_gather_gemm": ("bulk_sync", "pull", "push", "push_copy_engine"),
             "gemm_reduce_scatter": ("bulk_sync", "producer_consumer", "epilogue_reduce", "push_copy_engine"),
             "flash_decode": ("bulk_sync", "fused_push")}
#: A typical problem and a weird one (sizes off every power of two, a tiny one) per kernel.
_PROBLEMS = {"gemm_all_scatter": [QKV, {"M": 1000, "N": 3000, "K": 136}],
             "all_gather_gemm": [{"M": 8192, "N": 28672, "K": 8192}, {"M": 968, "N": 2040, "K": 72}],
             "gemm_reduce_scatter": [{"M": 4096, "N": 8192, "K": 8192}, {"M": 1000, "N": 600, "K": 4104}],
             "flash_decode": [{"B": 8, "H": 64, "H_kv": 8, "D": 128, "S": 65536},
                              {"B": 3, "H": 12, "H_kv": 3, "D": 64, "S": 1000}]}
_CASES = [(k, pa, pr, w, hw) for k, pats in _PATTERNS.items() for pa in pats for pr in _PROBLEMS[k]
          for w in (2, 3, 8, 64) for hw in ("h200", "h100")]


def _comm_bytes(kernel, problem, w):
    return om.extent(kernel, problem, w)["comm_bytes"]


@pytest.mark.parametrize("kernel, pattern, problem, w, spec", _CASES)
def test_no_prediction_is_below_the_communication_alone_or_the_gemm_alone(kernel, pattern, problem, w, spec):
    hw = hwspecs.load_spec(spec)
    for meta in ({}, SMALL, {"COMM_SMS": 40}):
        if kernel == "flash_decode" and meta:
            continue
        p = om.predict(kernel, problem, w, pattern, meta, hw)
        comm_alone = _comm_bytes(kernel, problem, w) / om.peak_copy_rate(hw) * 1e3
        assert p.lower_bound_ms >= comm_alone * (1 - 1e-9)
        if kernel != "flash_decode":
            m, n, k = (om.extent(kernel, problem, w)[x] for x in "mnk")
            gemm_alone = om.gemm_s(m, n, k, {**om._default_meta(kernel), **meta}, hw.compute_units, hw) * 1e3
            assert p.lower_bound_ms >= gemm_alone * (1 - 1e-9)
        assert p.time_ms >= p.lower_bound_ms
        assert p.notes in ("gpu", "host"), "the schedule itself fell below its bound and was raised"
        lo, hi = p.interval_ms
        assert p.lower_bound_ms <= lo <= p.time_ms <= hi


@pytest.mark.parametrize("kernel, problem", [(k, prs[0]) for k, prs in _PROBLEMS.items()])
def test_torch_nccl_has_a_bound_and_an_interval_too(kernel, problem):
    b = om.predict_baseline(kernel, problem, 4, H200)
    assert b.lower_bound_ms == pytest.approx(max(b.compute_ms, b.comm_ms))
    lo, hi = b.interval_ms
    assert lo <= b.time_ms <= hi and lo >= b.lower_bound_ms and hi > b.time_ms


def test_world_size_64_is_extrapolated_and_its_interval_wider():
    inside = om.predict("gemm_all_scatter", QKV, 8, "bulk_sync", MEASURED, H200)
    far = om.predict("gemm_all_scatter", {"M": 4096, "N": 81920, "K": 8192}, 64, "bulk_sync", MEASURED, H200)
    assert not inside.extrapolated and inside.extrapolated_why == ""
    assert far.extrapolated and "W = 64 is outside the measured 2-8" in far.extrapolated_why
    q = om.load_params()["_interval"]["kernel"]
    assert inside.interval_ms[1] / inside.time_ms == pytest.approx(math.exp(q))
    assert far.interval_ms[1] / far.time_ms == pytest.approx(math.exp(2 * q))
    assert om.predict_baseline("gemm_all_scatter", QKV, 64, H200).extrapolated


@pytest.mark.parametrize("knob", [{"STREAM_K": 1}, {"WARP_SPECIALIZE": 1}, {"EPILOGUE_SUBTILE": 1}])
def test_a_knob_the_model_does_not_price_makes_it_extrapolated(knob):
    p = om.predict("gemm_all_scatter", QKV, 4, "bulk_sync", {**MEASURED, **knob}, H200)
    name, value = next(iter(knob.items()))
    assert p.extrapolated and f"{name} = {value} is not in the model" in p.extrapolated_why
    assert not om.predict("gemm_all_scatter", QKV, 4, "bulk_sync", MEASURED, H200).extrapolated


@pytest.mark.parametrize("problem, meta, spec, says", [
    ({"M": 65536, "N": 10240, "K": 8192}, {}, "h200", "m = 65536 is outside the measured"),
    ({"M": 4096, "N": 10240, "K": 100}, {}, "h200", "k = 100 is outside the measured"),
    (QKV, {"BLOCK_K": 32, "num_stages": 2}, "h200", "tile 128x256x32:8:2 was not measured"),
    (QKV, {"COMM_SMS": 100}, "h200", "COMM_SMS = 100 is outside the measured 8-48"),
    (QKV, {}, "h100", "fitted on h200, not measured on h100"),
])
def test_a_shape_a_knob_or_a_gpu_outside_the_measurements_is_extrapolated(problem, meta, spec, says):
    p = om.predict("gemm_all_scatter", problem, 4, "producer_consumer", meta, hwspecs.load_spec(spec))
    assert p.extrapolated and says in p.extrapolated_why


def test_a_knob_the_pattern_does_not_read_does_not_flag_it():
    assert not om.predict("gemm_all_scatter", QKV, 4, "bulk_sync", {**MEASURED, "COMM_SMS": 100}, H200).extrapolated


def test_the_prediction_dict_keeps_its_keys_and_adds_the_new_ones():
    d = om.predict("all_gather_gemm", QKV, 4, "push", MEASURED, H200).to_dict()
    assert {"time_ms", "compute_ms", "comm_ms", "hidden_share", "source", "breakdown", "notes"} <= d.keys()
    assert isinstance(d["interval_ms"], list) and len(d["interval_ms"]) == 2
    assert isinstance(d["lower_bound_ms"], float) and d["extrapolated"] is False
    json.dumps(d)


# ------------------------------------------------------------------------------ the fit's mechanics
def test_spearman_counts_an_exact_0_8():
    import bench.validate_overlap_model as v
    rho = v.spearman([1, 2, 3, 4, 5], [2, 1, 4, 3, 5])       # two swaps of neighbours: 1 - 6*4/120
    assert rho == 0.8 and rho >= 0.8
    assert math.isnan(v.spearman([1.0], [2.0])) and math.isnan(v.spearman([1, 1], [1, 2]))
    assert v.spearman([1, 2, 3], [5, 5, 6]) == pytest.approx(math.sqrt(3) / 2)   # a tie: average ranks
    assert v.share({"n": 21, "of": 29}) == "21 of 29 (72 %)"


def test_the_gemm_fit_never_sees_the_unseen_shapes(tmp_path):
    """Rows at W = 4 and 8 with absurd times change nothing: the fit reads the W = 2 shapes only."""
    import bench.validate_overlap_model as v
    data = json.loads(v.RANK_GEMM.read_text())
    clean = tmp_path / "clean.json"
    clean.write_text(json.dumps({**data, "rows": [r for r in data["rows"] if r["world_size"] == 2]}))
    poisoned = tmp_path / "poisoned.json"
    poisoned.write_text(json.dumps({**data, "rows": [
        {**r, "median_ms": 1000.0} if r["world_size"] != 2 and "median_ms" in r else r for r in data["rows"]]}))
    assert v.gemm_fit(poisoned) == v.gemm_fit(clean)


def test_the_spec_carries_the_gemm_fitted_without_the_unseen_shapes():
    import bench.validate_overlap_model as v
    fitted = v.gemm_fit()
    v.check_gemm_constants(H200, fitted)
    v.check_gemm_constants(hwspecs.load_spec("h100"), fitted)      # the H200's, said so in h100.yaml
    with pytest.raises(ValueError, match="must be the fit on the 2-GPU shapes"):
        v.check_gemm_constants(H200, {**fitted, "matmul_last_wave_exp": 0.155})


def test_the_parameter_fit_reads_no_unseen_row(monkeypatch):
    import bench.validate_overlap_model as v
    monkeypatch.setattr(v, "check_frozen", lambda: (_ for _ in ()).throw(AssertionError("read the unseen set")))
    obs = v._observations(H200)
    assert obs and all("/" in what or what.startswith("cuBLAS") for what, *_ in obs)
    held = v._observations(H200, exclude=frozenset({("all_gather_gemm", "llama70b-up-8k")}))
    assert not any("llama70b-up-8k" in what and "all_gather_gemm" in what for what, *_ in held)
    assert len(held) < len(obs)


def test_the_frozen_unseen_set_is_checked_by_hash(tmp_path, monkeypatch):
    import shutil
    import bench.validate_overlap_model as v
    v.check_frozen()                                   # the committed files are the frozen ones
    for name in v.UNSEEN:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(v.RESULTS / name, tmp_path / name)
    monkeypatch.setattr(v, "RESULTS", tmp_path)
    v.check_frozen()
    path = tmp_path / "dist_h200_8gpu.json"
    path.write_text(path.read_text().replace('"time_ms": 0.', '"time_ms": 1.', 1))
    with pytest.raises(ValueError, match="the frozen unseen set changed: bench/results/dist_h200_8gpu.json"):
        v.rows(8)


def test_the_fitted_parameters_carry_their_interval_and_domain():
    p = om.load_params()
    assert 0 < p["_interval"]["kernel"] < 1 and 0 < p["_interval"]["baseline"] < 1
    assert "left out of the GEMM fit and the parameter fit" in p["_interval"]["source"]
    assert p["_domain"]["hardware"] == "h200" and p["_domain"]["world_size"] == [2, 8]
    assert set(p["_domain"]["kernels"]) == set(_PATTERNS)


def test_a_per_rank_gemm_measured_on_the_device_calibrates_the_gemm(tmp_path):
    """A rank-GEMM file (bench/results/rank_gemm_hopper.json's rows) with this device and shape: the
    GEMM part becomes the measured time at every SM, the source says so; other devices, shapes and
    the default (measured_gemm off) are the model's own."""
    path = tmp_path / "rank_gemm.json"
    path.write_text(json.dumps({"rows": [{"device": "NVIDIA H100 80GB HBM3", "M": 4096, "N": 5120, "K": 8192,
                                          "ours_ms": 0.4472}]}))
    h100 = hwspecs.load_spec("h100")
    on = om.predict("all_gather_gemm", QKV, 2, "bulk_sync", {}, h100, measured_gemm=True, rank_gemm=str(path))
    off = om.predict("all_gather_gemm", QKV, 2, "bulk_sync", {}, h100)
    assert on.breakdown["gemm"] == pytest.approx(0.4472, rel=1e-6) and off.breakdown["gemm"] != pytest.approx(0.4472)
    assert "measured on nvidia h100 80gb hbm3" in on.source and off.source == "simulated:h100x2"
    fewer = om.predict("all_gather_gemm", QKV, 2, "push", {"COMM_SMS": 32}, h100, measured_gemm=True, rank_gemm=str(path))
    assert fewer.compute_ms > on.compute_ms                    # fewer SMs still cost the model's share
    same = om.predict("all_gather_gemm", QKV, 2, "bulk_sync", {}, H200, measured_gemm=True, rank_gemm=str(path))
    assert same.source == "simulated:h200x2"
    assert om.predict("all_gather_gemm", QKV, 4, "bulk_sync", {}, h100, measured_gemm=True,
                      rank_gemm=str(path)).source == "simulated:h100x4"      # 4096x2560x8192: not measured
