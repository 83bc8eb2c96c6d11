"""kernels/schedule/gemm_tuning.py on CPU: the candidate configurations of a shape, the JSON cache
(keys, round trip, the nearest entry for another SM count, a broken file said in one line), and
on a GPU one shape tuned end to end against cuBLAS."""
from __future__ import annotations

import json

import pytest
import triton

from swizzleperf.kernels.schedule import gemm_tuning
from swizzleperf.kernels.schedule.persistent_gemm import config_error, split_tiles


@pytest.mark.parametrize("shape, programs", [((4096, 1280, 8192), 132), ((4096, 512, 4096), 132),
                                             ((1000, 33, 70), 7)], ids=["1.2 waves", "one wave", "weird"])
def test_candidates_fit_and_split_differently(shape, programs):
    """Every candidate fits sm_90's shared memory; per tile shape, the STREAM_K values kept split
    the tiles differently (a value that gives another's split is not timed twice)."""
    configs = gemm_tuning.candidates(*shape, programs)
    assert configs and all(config_error(c) is None for c in configs)
    by_tile = {}
    for c in configs:
        tiles = triton.cdiv(shape[0], c["BLOCK_M"]) * triton.cdiv(shape[1], c["BLOCK_N"])
        split = split_tiles(tiles, min(programs, tiles), c["STREAM_K"])
        key = json.dumps({k: v for k, v in c.items() if k != "STREAM_K"}, sort_keys=True)
        assert split not in by_tile.setdefault(key, []), c
        by_tile[key].append(split)
    if shape == (4096, 1280, 8192):   # 160 tiles of 128 x 256: whole, 28 stream-K, all 160
        leader = json.dumps(gemm_tuning.TILE_CANDIDATES[0], sort_keys=True)
        assert sorted(by_tile[leader]) == [0, 132, 160]


def test_tail_candidates_only_where_asked_and_where_a_tail_ends_sooner():
    """kernels/gemm.py's loop has a tail of narrower tiles, the distributed kernels' loops do not:
    only ``tail=True`` adds those configurations, data-parallel, and only where ``tail_rows``
    finds a split (4096 x 2560: 320 tiles of 128 x 256 on 132 SMs; not 4096 x 5120: full waves)."""
    assert not any(c.get("TAIL_BLOCK_N") for c in gemm_tuning.candidates(4096, 2560, 8192, 132))
    tails = [c for c in gemm_tuning.candidates(4096, 2560, 8192, 132, tail=True) if c.get("TAIL_BLOCK_N")]
    assert tails and all(c["STREAM_K"] == 0 and c["TAIL_BLOCK_N"] == c["BLOCK_N"] // 2
                         and config_error(c) is None for c in tails)
    assert not any(c.get("TAIL_BLOCK_N") for c in gemm_tuning.candidates(4096, 5120, 8192, 132, tail=True))
    leader = {**gemm_tuning.TILE_CANDIDATES[0], "STREAM_K": 0, "TAIL_BLOCK_N": 128}
    assert gemm_tuning.schedule_words(4096, 2560, leader, 132) == "tail (6 of 32 rows as 120 tiles 128 wide)"
    assert gemm_tuning.schedule_words(4096, 5120, leader, 132) == "data-parallel (640 tiles)"
    assert gemm_tuning.schedule_words(4096, 2560, {**leader, "TAIL_BLOCK_N": 0, "STREAM_K": 1}, 132) == \
        "stream-K (56 of 320 tiles)"


def test_name_says_every_knob():
    config = {**gemm_tuning.TILE_CANDIDATES[1], "STREAM_K": 2}
    assert gemm_tuning.name(config) == "128x256x64 w8 s4 sub sk2 ws"
    assert gemm_tuning.name(gemm_tuning.DEFAULT_CONFIG) == "128x256x64 w8 s4 sub sk0"
    assert gemm_tuning.name({**gemm_tuning.DEFAULT_CONFIG, "TAIL_BLOCK_N": 128}) == "128x256x64 w8 s4 sub sk0 t128"


def test_cache_round_trip_and_nearest(tmp_path, monkeypatch):
    path = tmp_path / "sub" / "gemm_configs.json"
    monkeypatch.setenv("SWIZZLEPERF_GEMM_CACHE", str(path))
    assert gemm_tuning.cache_path() == path and gemm_tuning.load_cache() == {}
    config = {**gemm_tuning.TILE_CANDIDATES[2], "STREAM_K": 1}
    key = gemm_tuning.cache_key("gemm/grouped-m:8", "NVIDIA H100 80GB HBM3", 132, "bfloat16", 4096, 1280, 8192)
    assert key == f"gemm/grouped-m:8|NVIDIA H100 80GB HBM3|sms=132|triton={triton.__version__}|bfloat16|4096x1280x8192"
    gemm_tuning.store(key, {"config": config, "ours_ms": 0.12})
    other = gemm_tuning.cache_key("gemm/grouped-m:8", "NVIDIA H100 80GB HBM3", 116, "bfloat16", 4096, 1280, 8192)
    gemm_tuning.store(other, {"config": gemm_tuning.DEFAULT_CONFIG, "ours_ms": 0.13})
    assert gemm_tuning.lookup("gemm/grouped-m:8", "NVIDIA H100 80GB HBM3", 132, "bfloat16", 4096, 1280, 8192) == config
    assert gemm_tuning.lookup("gemm/grouped-m:8", "NVIDIA H200", 132, "bfloat16", 4096, 1280, 8192) is None
    # the distributed kernels' GEMM on 116 SMs takes the 116 entry, on 124 the one with most SMs
    best = gemm_tuning.best_config
    off = {switch: 0 for switch in gemm_tuning.SWITCHES}   # a switch an entry leaves out is off
    assert best(4096, 1280, 8192, "bfloat16", "NVIDIA H100 80GB HBM3", 116) == {**off, **gemm_tuning.DEFAULT_CONFIG}
    assert best(4096, 1280, 8192, "bfloat16", "NVIDIA H100 80GB HBM3", 124) == {**off, **config}
    assert best(4096, 1280, 8192, "float16", "NVIDIA H100 80GB HBM3", 132) is None
    assert sorted(json.loads(path.read_text())) == sorted([key, other])
    assert not list(path.parent.glob("*.tmp"))   # written through a renamed temporary file


def test_fewer_programs_than_measured_take_the_alternative_with_fewer_waves(tmp_path):
    """An entry measured on 132 SMs with the schedules timed beside it: on 132 (or without
    ``programs``) the entry's own configuration; on 116, where its 256 tiles need three waves and
    the alternative's 224 two, the alternative. A stream-K configuration scales by tiles over
    programs, not by whole waves, and an entry of one is not re-ranked; nor is an entry by a
    schedule that loses as many waves."""
    path = tmp_path / "gemm_configs.json"
    wide = {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "num_warps": 8, "num_stages": 3}
    tall = {**wide, "BLOCK_M": 256, "BLOCK_N": 128}
    key = gemm_tuning.cache_key("gemm/grouped-m:8", "NVIDIA H100 80GB HBM3", 132, "bfloat16", 8192, 896, 14336)
    gemm_tuning.store(key, {"config": wide, "ours_ms": 0.302, "alternatives": [{"config": tall, "ours_ms": 0.321}]}, path)
    off = {switch: 0 for switch in gemm_tuning.SWITCHES}
    best = gemm_tuning.best_config
    assert best(8192, 896, 14336, "bfloat16", "NVIDIA H100 80GB HBM3", path=path) == {**off, **wide}
    assert best(8192, 896, 14336, "bfloat16", "NVIDIA H100 80GB HBM3", 132, path=path) == {**off, **wide}
    assert best(8192, 896, 14336, "bfloat16", "NVIDIA H100 80GB HBM3", 116, path=path) == {**off, **tall}
    assert best(8192, 896, 14336, "bfloat16", "NVIDIA H100 80GB HBM3", 128, path=path) == {**off, **wide}  # 2 waves
    # 4096 x 7168: 896 tiles of either, 7 waves of 132 and 8 of 116 alike: the entry's own stays
    # first though the other was faster alone (all-gather + GEMM push at llama8b-up-4k, W = 2)
    same = gemm_tuning.cache_key("gemm/grouped-m:8", "NVIDIA H100 80GB HBM3", 132, "bfloat16", 4096, 7168, 4096)
    gemm_tuning.store(same, {"config": wide, "ours_ms": 0.3105, "alternatives": [
        {"config": {**wide, "num_stages": 4}, "ours_ms": 0.3098}]}, path)
    assert best(4096, 7168, 4096, "bfloat16", "NVIDIA H100 80GB HBM3", 116, path=path) == {**off, **wide}
    # a stream-K entry spreads its last wave over whatever programs it gets: not re-ranked
    gemm_tuning.store(key, {"config": {**wide, "STREAM_K": 1}, "ours_ms": 0.302,
                            "alternatives": [{"config": tall, "ours_ms": 0.321}]}, path)
    assert gemm_tuning.ranked_configs(8192, 896, 14336, "bfloat16", "NVIDIA H100 80GB HBM3", 116, path=path) == [
        {**off, **wide, "STREAM_K": 1}, {**off, **tall}]
    scaled = gemm_tuning.scaled_ms
    assert scaled(wide, 0.3, 8192, 896, 132, 116) == pytest.approx(0.45)                  # 2 -> 3 waves
    assert scaled({**wide, "STREAM_K": 1}, 0.3, 8192, 896, 132, 116) == pytest.approx(0.3 * 132 / 116)
    assert scaled({**wide, "BLOCK_M_LOW": 64}, 0.3, 8192, 896, 132, 116) == pytest.approx(0.3)  # 182 tiles


def test_a_broken_cache_is_one_line(tmp_path):
    path = tmp_path / "gemm_configs.json"
    path.write_text("{not json")
    with pytest.raises(ValueError, match="is not JSON.* remove it to start a new one"):
        gemm_tuning.load_cache(path)
    path.write_text("[1, 2]")
    with pytest.raises(ValueError, match="must be a JSON object, got list"):
        gemm_tuning.store("k", {"config": {}}, path)


def test_tuning_needs_a_gpu():
    import torch
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    with pytest.raises(RuntimeError, match="tune needs a CUDA device"):
        gemm_tuning.tune(lambda inputs, **meta: None, 128, 128, 128)


@pytest.mark.gpu
def test_one_shape_tuned_against_cublas(tmp_path, gemm_path):
    """M = 1024, N = 1280, K = 2048 on the GPU: every candidate checked with C poisoned, the
    winner timed against torch.matmul in the same rounds, and cached."""
    from swizzleperf.agent.verification.load import load_kernel
    spec = load_kernel(gemm_path)[1]
    path = tmp_path / "cache.json"
    record = gemm_tuning.tune(spec.launch, 1024, 1280, 2048, rounds=10, path=path, log=lambda line: None)
    assert record["rel_error"] < 1e-2 and record["ours_ms"] > 0 and record["cublas_ms"] > 0
    assert not record["rejected"], record["rejected"]
    assert gemm_tuning.best_config(1024, 1280, 2048, "bfloat16", record["device"], path=path) == {
        **{switch: 0 for switch in gemm_tuning.SWITCHES}, **record["config"]}
