"""bench/dist_bench.py's choices on CPU: a catalog tile order spliced into a kernel
(``--order``, ``expert``), a bad order in one line, the per-rank GEMM configuration taken
from a measured cache file (``--gemm-configs``) for the problem's per-rank shape, a problem's
contenders timed together (the timer replaced), the way to the overlap bound round by round and
the report's host-paced list."""
from __future__ import annotations

import inspect
import types
from pathlib import Path

import pytest

from bench import dist_bench as bench
from swizzleperf.kernels.schedule import gemm_tuning


def test_an_order_is_spliced_into_a_copy():
    spec = bench.load_spec("gemm_reduce_scatter", "grouped-m:4")
    copy = Path(inspect.getsourcefile(spec.steps))
    assert copy.name == "gemm_reduce_scatter_grouped_m_4.py" and copy.parent.name.startswith("swizzleperf-bench-")
    assert "groups of 4 tile rows" in copy.read_text()
    own = bench.load_spec("gemm_reduce_scatter")
    assert Path(inspect.getsourcefile(own.steps)).name == "gemm_reduce_scatter.py"
    # expert: the GEMM kernels' grouped-m:8; flash decode has none and keeps its own order
    assert "groups of 8" in Path(inspect.getsourcefile(bench.load_spec("all_gather_gemm", "expert").steps)).read_text()
    assert Path(inspect.getsourcefile(bench.load_spec("flash_decode", "expert").steps)).name == "flash_decode.py"
    with pytest.raises(ValueError, match="--order 'zigzag:3': unknown swizzle"):
        bench.load_spec("gemm_all_scatter", "zigzag:3")


def test_the_gemm_configuration_of_a_problem_comes_from_the_cache(tmp_path, monkeypatch):
    """llama70b-o-4k at W = 2 is a 4096 x 8192 x 4096 partial product per rank (K split)."""
    import torch
    from swizzleperf.kernels.schedule import persistent_gemm
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "NVIDIA H100 80GB HBM3")
    monkeypatch.setattr(persistent_gemm, "num_sms", lambda *a: 132)   # the H100's, for the kernel's checks
    spec = bench.load_spec("gemm_reduce_scatter")
    path = tmp_path / "configs.json"
    config = {**gemm_tuning.TILE_CANDIDATES[0], "STREAM_K": 1}
    key = gemm_tuning.cache_key("gemm/grouped-m:8", "NVIDIA H100 80GB HBM3", 132, "bfloat16", 4096, 8192, 4096)
    gemm_tuning.store(key, {"config": config}, path)
    args = types.SimpleNamespace(gemm_configs=str(path), dtype="bfloat16")
    # the switches the entry leaves out are off; kernels/gemm.py's tail, which the kernel lacks, is not passed
    assert bench._tuned(spec, spec.problems["llama70b-o-4k"], 2, args, "bulk_sync") == {**config, "WARP_SPECIALIZE": 0}
    gemm_tuning.store(key, {"config": {**config, "STREAM_K": 0, "TAIL_BLOCK_N": 128}}, path)
    assert bench._tuned(spec, spec.problems["llama70b-o-4k"], 2, args, "bulk_sync") == {}   # does not fit: default
    gemm_tuning.store(key, {"config": config}, path)
    assert bench._tuned(spec, spec.problems["llama70b-o-4k"], 4, args, "bulk_sync") == {}   # not measured: default
    assert bench._tuned(spec, spec.problems["llama70b-o-4k"], 2, args, "producer_consumer") == {
        **config, "WARP_SPECIALIZE": 0}   # on 116 programs too: the entry has no alternatives
    assert bench._tuned(spec, spec.problems["llama70b-o-4k"], 2,
                        types.SimpleNamespace(gemm_configs="", dtype="bfloat16"), "bulk_sync") == {}


def test_a_pattern_that_gives_its_gemm_fewer_programs_takes_the_configuration_for_them(monkeypatch, tmp_path):
    """GEMM + all-scatter iris-8192x3584x14336 at W = 4 (8192 x 896 x 14336 a rank), as measured on
    four H100s (bench/results/w4_checks_h100x4/): the WS GEMM's 128 x 256 tiles are faster alone
    on 132 SMs (0.302 against 0.321 ms) but 256 tiles take three waves of producer_consumer's
    116 programs, the Triton GEMM's 224 tiles of 256 x 128 two."""
    import torch
    from swizzleperf.kernels.distributed.tiles import WS_TILE_CONFIGS
    from swizzleperf.kernels.schedule import persistent_gemm
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "NVIDIA H100 80GB HBM3")
    monkeypatch.setattr(persistent_gemm, "num_sms", lambda *a: 132)
    spec = bench.load_spec("gemm_all_scatter")
    path = tmp_path / "configs.json"
    ws, triton_best = dict(WS_TILE_CONFIGS[0]), {**gemm_tuning.TILE_CANDIDATES[4], "STREAM_K": 0}
    key = gemm_tuning.cache_key("gemm/grouped-m:8", "NVIDIA H100 80GB HBM3", 132, "bfloat16", 8192, 896, 14336)
    gemm_tuning.store(key, {"config": ws, "ours_ms": 0.302,
                            "alternatives": [{"config": triton_best, "ours_ms": 0.321}]}, path)
    args = types.SimpleNamespace(gemm_configs=str(path), dtype="bfloat16")
    problem = spec.problems["iris-8192x3584x14336"]
    assert bench._tuned(spec, problem, 4, args, "bulk_sync")["WS_GEMM"] == 1            # all 132 SMs
    for pattern in ("producer_consumer", "workgroup_specialized"):                      # 116 programs
        chosen = bench._tuned(spec, problem, 4, args, pattern)
        assert (chosen.get("WS_GEMM", 0), chosen["BLOCK_M"], chosen["BLOCK_N"]) == (0, 256, 128), pattern
        assert spec.meta_for("iris-8192x3584x14336", chosen)["WS_GEMM"] == 0             # the spec's default


def test_a_row_the_host_paced_is_labelled():
    """A launch whose queueing took 0.62 of its 0.65 GPU ms is named under the table; one that
    took 0.10 of 0.38 is not."""
    def row(pattern, time_ms, host_ms):
        return {"kernel": "all_gather_gemm", "problem": "llama8b-up-4k", "M": 4096, "N": 14336,
                "K": 4096, "pattern": pattern, "world_size": 2, "verified": True, "error": 1.7e-3,
                "message": "", "time_ms": time_ms, "iqr_ms": 0.01, "host_ms": host_ms,
                "baseline_ms": 0.44, "baseline_iqr_ms": 0.01, "speedup": 0.44 / time_ms,
                "tflops": 600.0}
    text = bench.markdown([row("push", 0.38, 0.10), row("push_copy_engine", 0.65, 0.62)], None,
                          "torchrun ...", "NVIDIA H100 80GB HBM3")
    paced = [line for line in text.splitlines() if line.startswith("Host-paced")]
    assert len(paced) == 1 and "push_copy_engine (host 0.620 of 0.650 ms)" in paced[0]
    assert "llama8b-up-4k push (" not in paced[0]


def test_the_way_to_the_overlap_bound_is_taken_round_by_round():
    """Three rounds: torch + NCCL 1.0 / 1.1 / 0.9 ms, its compute alone 0.8 / 0.85 / 0.7 (the
    bound, above the rest), the pattern 0.85 / 0.9 / 0.8. Counted by hand: ways 0.75, 0.8, 0.5
    (median 0.75); bounds 1.25x, 1.294x, 1.286x (median 1.286x). The fastest pattern of the
    problem is the one reported; a baseline without a compute part gives none."""
    rounds = {"push": [0.85, 0.9, 0.8], "bulk_sync": [0.95, 1.0, 0.9], "torch_nccl": [1.0, 1.1, 0.9],
              "torch_compute": [0.8, 0.85, 0.7]}
    rows = [{"kernel": "all_gather_gemm", "problem": "p", "pattern": name, "time_ms": sorted(r)[1],
             "baseline_ms": 1.0, "baseline_compute_ms": 0.8, "rounds_ms": rounds}
            for name, r in rounds.items() if not name.startswith("torch")]
    (fastest,) = bench._fastest(rows)
    bound = bench.overlap_bound(fastest)
    assert fastest["pattern"] == "push" and bound["way"] == pytest.approx(0.75)
    assert bound["bound_x"] == pytest.approx(0.9 / 0.7)
    assert bench.overlap_bound({**fastest, "rounds_ms": {k: v for k, v in rounds.items()
                                                           if k != "torch_compute"}}) is None


def test_a_problems_patterns_are_timed_together_each_on_its_own_state(monkeypatch):
    """``_time_problem`` on CPU heaps with the timer replaced: one timing call holds every verified
    pattern, torch + NCCL and torch's compute, paired with torch + NCCL; while it runs each
    pattern has its own heap state (twice one state's allocations), freed afterwards; bulk_sync's
    steps are timed alone in the same call, each pattern with its row's meta; each row gets its
    own contender's figures and the median of the rounds' ratios."""
    import dataclasses
    import torch
    from swizzleperf.agent.distributed import rank_worker
    from swizzleperf.kernels.distributed import runner
    from swizzleperf.kernels.distributed.heap import Heap
    from swizzleperf.kernels.distributed.spec import Baseline

    spec = bench.load_spec("all_gather_gemm")
    spec = dataclasses.replace(spec, baseline=lambda inputs, problem, group=None: Baseline(
        lambda: None, lambda: None, compute=lambda: None))
    heap = Heap.group(2, 3 * spec.heap_bytes(spec.problems["check"], 2, "bfloat16"))[0]
    meta = spec.meta_for("check")
    before = len(heap.allocations)
    one_state = []
    with runner.rank_state(spec, heap, spec.problems["check"], meta, 0, "bfloat16"):
        one_state.append(len(heap.allocations) - before)
    seen = {}

    def fake_timer(ctx, fns, rounds, sample_ms, warmup, pair_with=None):
        seen.update(names=list(fns), pair_with=pair_with, held=len(heap.allocations) - before)
        for fn in fns.values():
            fn()
        times = {"push": [1.0, 2.0, 4.0], "bulk_sync": [2.0, 2.0, 2.0], "torch_nccl": [2.0, 3.0, 4.0],
                 "torch_nccl_again": [2.0, 3.0, 5.0], "torch_compute": [1.5, 1.5, 1.5]}
        return {"rounds": 3, "contenders": {n: {"median_ms": sorted(t)[1], "iqr_ms": 0.5, "rounds_ms": t,
                                                "host_ms": 0.25}
                                            for n, t in ((n, times.get(n, [0.5] * 3)) for n in fns)}}
    monkeypatch.setattr(rank_worker, "time_interleaved", fake_timer)
    launched = []
    monkeypatch.setattr(runner, "launcher", lambda spec, heap, state, pattern, meta, *a:
                        launched.append((pattern, meta["COMM_SMS"])) or (lambda: None))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "cpu")
    rows = [{"pattern": "push", "meta": {**meta, "COMM_SMS": 2}}, {"pattern": "bulk_sync", "meta": meta}]
    args = types.SimpleNamespace(dtype="bfloat16", iterations=3, warmup=1)
    bench._time_problem(spec, heap, spec.problems["check"], rows, args, group=object())
    # each pattern launched with its row's meta
    assert launched == [("push", 2)] + [("bulk_sync", meta["COMM_SMS"])] * 3
    # bulk_sync's steps alone (its push, barrier, GEMM, barrier) on bulk_sync's own state
    assert seen == {"names": ["push", "bulk_sync", "bulk_sync 0:push", "bulk_sync 2:gemm", "torch_nccl",
                              "torch_nccl_again", "torch_compute"], "pair_with": "torch_nccl",
                    "held": 2 * one_state[0]}
    assert len(heap.allocations) == before
    push, bulk = rows
    assert push["time_ms"] == 2.0 and push["speedup"] == 1.5 and push["baseline_ms"] == 3.0  # ratios 2, 1.5, 1
    assert bulk["speedup"] == 1.5 and bulk["baseline_compute_ms"] == 1.5
    assert push["bulk_sync_steps_ms"] == {"0:push": 0.5, "2:gemm": 0.5}
    assert push["aa_ratio"] == 1.0 and push["aa_iqr"] == pytest.approx(0.2)   # ratios 1, 1, 0.8
    assert push["host_ms"] == 0.25 and push["rounds_ms"]["torch_compute"] == [1.5, 1.5, 1.5]


def test_a_configuration_the_kernel_refuses_is_recorded_not_launched(monkeypatch):
    """``--meta`` over a problem's tuned configuration can make one the kernel cannot build (here
    a second consumer's rows with 256-wide tiles); each pattern's row says why, nothing launches."""
    from swizzleperf.kernels.distributed import runner
    from swizzleperf.kernels.distributed.heap import Heap

    spec = bench.load_spec("all_gather_gemm")
    heap = Heap.group(2, spec.heap_bytes(spec.problems["check"], 2, "bfloat16"))[0]
    monkeypatch.setattr(runner, "verify_rank", lambda *a, **k: pytest.fail("launched a refused configuration"))
    args = types.SimpleNamespace(patterns="push_copy_engine,bulk_sync", problems="check", gemm_configs="",
                                 meta="WS_GEMM=1,BLOCK_M=256,BLOCK_M_LOW=64,BLOCK_N=256,BLOCK_K=32,num_warps=8,num_stages=2,NUM_SMS=132", dtype="bfloat16",
                                 verify_only=True)
    rows = bench.bench_kernel(spec, heap, args)
    assert [r["pattern"] for r in rows] == ["push_copy_engine", "bulk_sync"]
    assert all(not r["verified"] and r["message"].startswith("refused: WS_GEMM:") and "registers" in r["message"]
               for r in rows)


@pytest.mark.parametrize("name", ["gemm_all_scatter", "all_gather_gemm", "gemm_reduce_scatter", "flash_decode"])
def test_no_pattern_refuses_the_check_problem_s_default_meta(name):
    """The multi-GPU test runs ``bench --verify-only --problems check`` at W = 2, 4 or 8, and the
    measured optimize checks every candidate's pattern there: a refusal fails both. (At W = 4
    flash decode's check, 24 keys a rank, was refused for 3 splits of 16 until its constraint
    kept to what the kernel cannot run.)"""
    spec = bench.load_spec(name)
    problem = spec.problems["check"]
    for world_size in (2, 4, 8):
        for sms in (4, 132):
            meta = {**spec.meta_for("check"), "NUM_SMS": sms}
            refused = {p: spec.constraints(problem, world_size, p, meta) for p in spec.patterns}
            assert {p: r for p, r in refused.items() if r} == {}, (world_size, sms)
