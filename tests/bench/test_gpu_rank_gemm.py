"""bench/gpu_rank_gemm.py's merge: one report from two devices' reports, a later row replacing an
earlier one of the same device, kernel, problem and W, the summary per device, the caches merged."""
import json

from bench import gpu_rank_gemm


def _row(device, problem, ours, cublas, M=4096, N=512, K=4096):
    return {"device": device, "M": M, "N": N, "K": K, "kernel": "gemm_all_scatter", "source_problem": problem,
            "world_size": 8, "schedule": "data-parallel (128 tiles)",
            "config": {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 128, "num_warps": 8, "num_stages": 3, "STREAM_K": 0},
            "ours_ms": ours, "cublas_ms": cublas, "spread_ms": 0.001, "ratio": cublas / ours}


def test_merge_keeps_one_row_per_device_and_problem_the_later_one(tmp_path):
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    first.write_text(json.dumps({"rows": [_row("NVIDIA H100", "iris-4096", 0.0385, 0.0342),
                                          _row("NVIDIA H100", "other", 0.10, 0.10, N=1024)]}))
    second.write_text(json.dumps({"rows": [_row("NVIDIA H200", "iris-4096", 0.0355, 0.0310),
                                           _row("NVIDIA H100", "other", 0.08, 0.10, N=1024)]}))
    (tmp_path / "c1.json").write_text(json.dumps({"k1": {"config": 1}}))
    (tmp_path / "c2.json").write_text(json.dumps({"k2": {"config": 2}}))
    gpu_rank_gemm.main(["merge", str(first), str(second), "--out", str(tmp_path / "m"), "--configs",
                        str(tmp_path / "c1.json"), str(tmp_path / "c2.json"), "--configs-out", str(tmp_path / "c.json")])
    merged = json.loads((tmp_path / "m.json").read_text())
    assert len(merged["rows"]) == 3
    h100 = merged["summary"]["NVIDIA H100"]
    assert h100["shapes"] == 2 and h100["below_0_95"] == 1 and h100["worst_shape"] == "4096x512x4096"
    assert abs(h100["geomean_cublas_over_ours"] - ((0.0342 / 0.0385) * (0.10 / 0.08)) ** 0.5) < 1e-9
    assert merged["summary"]["NVIDIA H200"]["shapes"] == 1
    assert json.loads((tmp_path / "c.json").read_text()) == {"k1": {"config": 1}, "k2": {"config": 2}}
    text = (tmp_path / "m.md").read_text()
    assert "**NVIDIA H100**: geometric mean" in text and "**NVIDIA H200**" in text


def test_the_320_row_tile_may_win_a_row_but_is_not_a_default():
    """``ws``'s choice: the row keeps the fastest schedule; the configuration cache (the kernels'
    default) the fastest without a second consumer's rows; a tie goes to the Triton GEMM."""
    plain, tall = {"WS_GEMM": 1, "BLOCK_M": 128}, {"WS_GEMM": 1, "BLOCK_M": 256, "BLOCK_M_LOW": 64}
    ws = {"plain": plain, "tall": tall}
    assert gpu_rank_gemm.choose_schedules({"triton": 0.13, "plain": 0.17, "tall": 0.117}, ws) == ("tall", "triton")
    assert gpu_rank_gemm.choose_schedules({"triton": 0.32, "plain": 0.30, "tall": 0.39}, ws) == ("plain", "plain")
    assert gpu_rank_gemm.choose_schedules({"triton": 0.30, "plain": 0.30, "tall": 0.31}, ws) == ("triton", "triton")
    assert gpu_rank_gemm.choose_schedules({"triton": 0.30}, {}) == ("triton", "triton")


def test_all_gather_shapes_take_the_ws_gemm_within_the_margin():
    """At all-gather + GEMM's shapes (``margin``) the WS GEMM is the default while it is slower
    alone by less than the margin; beyond it, and at other shapes when it is slower at all, the
    Triton GEMM is; the row's fastest schedule is unaffected."""
    ws = {"plain": {"WS_GEMM": 1, "BLOCK_M": 128}}
    margin = gpu_rank_gemm.AG_WS_MARGIN
    within = {"triton": 0.300, "plain": 0.300 * (1 + margin / 2)}
    beyond = {"triton": 0.300, "plain": 0.300 * (1 + 2 * margin)}
    assert gpu_rank_gemm.choose_schedules(within, ws, margin) == ("triton", "plain")
    assert gpu_rank_gemm.choose_schedules(within, ws) == ("triton", "triton")
    assert gpu_rank_gemm.choose_schedules(beyond, ws, margin) == ("triton", "triton")
    assert gpu_rank_gemm.choose_schedules({"triton": 0.30, "plain": 0.29}, ws, margin) == ("plain", "plain")


def test_the_cache_takes_the_default_configuration(tmp_path):
    """``report --configs-out`` writes a ``ws`` row's ``default_config`` (and its time) with the other
    schedules timed with it that could be defaults (``alternatives``), the table its fastest
    ``config``."""
    row = {**_row("NVIDIA H100", "qkv", 0.117, 0.115, N=1280, K=8192), "sources": [["gemm_all_scatter", "qkv", 8]],
           "config": {"WS_GEMM": 1, "BLOCK_M": 256, "BLOCK_N": 128, "BLOCK_K": 32, "num_warps": 8, "num_stages": 6,
                      "BLOCK_M_LOW": 64},
           "default_config": {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "num_warps": 8, "num_stages": 4,
                              "STREAM_K": 2},
           "default_ms": 0.131, "cublas_spread_ms": 0.001, "rel_error": 1e-3, "programs": 132, "triton": "3.6.0",
           "date": "2026-11-26"}
    row.update(triton_config=row["default_config"], triton_ms=0.131,
               ws_ms={"256+64x128x32 w8 s6 sub sk0 gluon": 0.115, "128x256x64 w8 s3 sk0 gluon": 0.14})
    (tmp_path / "ws.json").write_text(json.dumps({"rows": [row]}))
    gpu_rank_gemm.main(["report", str(tmp_path / "ws.json"), "--out", str(tmp_path / "r"),
                        "--configs-out", str(tmp_path / "c.json")])
    (entry, ) = json.loads((tmp_path / "c.json").read_text()).values()
    assert entry["config"] == row["default_config"] and entry["ours_ms"] == 0.131
    # the other schedules of the same rounds that could be a default: not the 320-row tile
    from swizzleperf.kernels.distributed.tiles import WS_TILE_CONFIGS
    assert entry["alternatives"] == [{"config": WS_TILE_CONFIGS[0], "ours_ms": 0.14}]
    (reported, ) = json.loads((tmp_path / "r.json").read_text())["rows"]
    assert reported["config"] == row["config"] and "256+64x128x32" in (tmp_path / "r.md").read_text()
