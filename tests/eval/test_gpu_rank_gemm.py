"""eval/gpu_rank_gemm.py's merge: one report from two devices' reports, a later row replacing an
earlier one of the same device, kernel, problem and W, the summary per device, the caches merged."""
import json

from swizzleperf.eval import gpu_rank_gemm


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
