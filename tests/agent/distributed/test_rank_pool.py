"""The rank pool (agent/distributed/rank_pool.py, agent/distributed/rank_worker.py) through the
interpreter path at W = 2: two CPU rank processes under the Triton interpreter with gloo and
shared-memory heaps, started by the pool itself. A candidate is verified on every rank and timed
against the torch baseline; a rank that hangs, dies, never signals or computes a wrong result ends
the candidate with a verdict that names it, and the next request runs on fresh ranks.

The kernel is the toy of tests/helpers/apps/dist_gather.py (every rank's vector gathered and
doubled), so these tests do not move with the bundled kernels."""
from __future__ import annotations

from pathlib import Path

import pytest

from swizzleperf.agent.distributed.rank_pool import RankPool

TOY = Path(__file__).resolve().parents[2] / "helpers" / "apps" / "dist_gather.py"
CHECK, BENCH = {"N": 40}, {"N": 96}


def _request(kernel: Path, pattern: str = "push", time_it: bool = False, bench: dict = BENCH) -> dict:
    return {"op": "evaluate", "kernel_path": str(kernel), "pattern": pattern,
            "problems": {"bench": bench, "check@candidate": CHECK}, "verify": ["check@candidate", "bench"],
            "metas": {"check@candidate": {"BLOCK": 8, "num_warps": 4}, "bench": {"BLOCK": 16, "num_warps": 4}},
            "time": time_it, "bench": "bench", "dtype": "float32", "rounds": 3, "sample_ms": 1.0}


def _variant(tmp_path: Path, switch: str) -> Path:
    """A copy of the toy with one ``*_RANK`` switch set to rank 1."""
    source = TOY.read_text()
    assert f"{switch} = None" in source
    path = tmp_path / f"{switch.lower()}.py"
    path.write_text(source.replace(f"{switch} = None", f"{switch} = 1"))
    return path


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    with RankPool(2, "cpu", 8 << 20, tmp_path_factory.mktemp("pool"), max_spins=1 << 11) as started:
        yield started


def test_a_candidate_is_verified_on_every_rank_and_timed_against_the_baseline(pool):
    answer = pool.request(_request(TOY, time_it=True), timeout_s=120)
    assert answer["verdict"] == "PASS", answer
    assert not answer["broken"]
    for name, sizes in (("check@candidate", CHECK), ("bench", BENCH)):
        check = answer["checks"][name]
        assert check["problem"] == sizes and len(check["errors"]) == 2 and max(check["errors"]) <= 1e-6
    assert answer["checks"]["bench"]["meta"]["BLOCK"] == 16          # the candidate's own knob
    timing = answer["timing"]
    assert set(timing["contenders"]) == {"candidate", "torch_nccl"} and timing["rounds"] == 3
    for figures in timing["contenders"].values():
        assert len(figures["rounds_ms"]) == 3 and figures["median_ms"] > 0 and figures["iqr_ms"] >= 0


def test_references_check_the_baseline_and_derive_the_communication(pool):
    from swizzleperf.agent.distributed.measured import summarize_references
    answer = pool.request({**_request(TOY), "op": "references"}, timeout_s=120)
    assert answer["verdict"] == "PASS", answer
    assert answer["checks"]["torch_nccl"] <= 1e-6
    refs = summarize_references(answer)
    assert refs["torch_nccl_ms"] > 0 and "derived" in refs["comm_alone_source"]
    assert refs["overlap_bound_ms"] == max(refs["gemm_alone_ms"], refs["comm_alone_ms"])
    assert "no fused" in refs["notes"]["torch_fused"]


def test_a_wrong_rank_is_a_mismatch_naming_it_and_the_pool_stays(pool, tmp_path):
    if not pool.alive:  # ranks up first, whichever test of the module ran before (xdist deals them out)
        pool.start()
    starts = pool.starts
    answer = pool.request(_request(_variant(tmp_path, "WRONG_RANK")), timeout_s=120)
    assert answer["verdict"] == "MISMATCH" and "rank 1" in answer["reason"] and "rank 0" not in answer["reason"]
    assert not answer["broken"] and pool.alive and pool.starts == starts


@pytest.mark.parametrize("switch, verdict, words", [
    ("SILENT_RANK", "DEADLOCK", ("gave up waiting", "block_ready", "set by rank 1")),
    ("EXIT_RANK", "RUNTIME_ERROR", ("rank 1 died", "exit code 3")),
    ("HANG_RANK", "DEADLOCK", ("rank(s) 1", "did not finish within")),
])
def test_a_rank_that_fails_ends_the_candidate_and_the_next_runs_on_fresh_ranks(pool, tmp_path, switch, verdict, words):
    if not pool.alive:  # ranks up before the failing candidate, whichever test of the module ran first
        pool.start()
    starts = pool.starts
    answer = pool.request(_request(_variant(tmp_path, switch)), timeout_s=10)
    assert answer["verdict"] == verdict, answer
    assert all(w in answer["reason"] for w in words), answer["reason"]
    assert answer["broken"] and not pool.alive
    again = pool.request(_request(TOY), timeout_s=120)
    assert again["verdict"] == "PASS", again
    assert pool.starts == starts + 1


class _OneRank:
    """A rank of one, on the CPU: what ``time_interleaved`` needs of a RankContext."""

    device, world_size = "cpu", 1
    heap = type("Heap", (), {"barrier": lambda self: None})()

    def sync(self) -> None:
        pass

    def all_gather(self, value) -> list:
        return [value]


@pytest.mark.parametrize("settle, rounds", [(10.0, 4), (0.0, 12)])
def test_timing_ends_early_once_every_spread_is_small(settle, rounds):
    """With ``settle``, the rounds stop at ``min_rounds`` (or a later multiple of SETTLE_EVERY) once
    every contender's interquartile range is within ``settle`` of its median (10.0: at once); with
    0, every round runs. Each contender keeps one time per round timed, paired with the others."""
    import time
    from swizzleperf.agent.distributed.rank_worker import time_interleaved
    fns = {"candidate": lambda: time.sleep(0.001), "torch_nccl": lambda: time.sleep(0.002)}
    timing = time_interleaved(_OneRank(), fns, rounds=12, sample_ms=1.0, warmup=0, min_rounds=4, settle=settle)
    assert timing["rounds"] == rounds
    assert all(len(c["rounds_ms"]) == rounds and c["median_ms"] > 0 for c in timing["contenders"].values())


def test_paired_timing_times_each_contender_in_a_pair_with_the_reference():
    """``pair_with``: every other contender is timed in a pair with the reference, each pair from
    its own barrier, the reference first in every other pair; without it one block of all."""
    from swizzleperf.agent.distributed.rank_worker import _blocks
    names = ["c0", "torch_nccl", "c1", "c2"]
    for r in range(4):
        blocks = _blocks(names, r, "torch_nccl")
        assert len(blocks) == 3 and all(len(b) == 2 and 1 in b for b in blocks)
        assert sorted(i for b in blocks for i in b if i != 1) == [0, 2, 3]
        assert [b[0] == 1 for b in blocks].count(True) in (1, 2)     # the reference leads in alternate pairs
    assert _blocks(names, 1, None) == [[1, 2, 3, 0]]                 # all back to back, rotated
    assert _blocks(["candidate", "torch_nccl"], 0, "torch_nccl") == [[0, 1]]   # a pair is a pair


def test_paired_timing_keeps_each_contenders_own_time():
    import time
    from swizzleperf.agent.distributed.rank_worker import time_interleaved
    calls = {"torch_nccl": 0}

    def reference():
        calls["torch_nccl"] += 1
        time.sleep(0.002)
    fns = {"c0": lambda: time.sleep(0.001), "c1": lambda: time.sleep(0.004), "torch_nccl": reference}
    timing = time_interleaved(_OneRank(), fns, rounds=3, sample_ms=4.0, warmup=0, pair_with="torch_nccl")
    c = timing["contenders"]
    assert timing["paired"] and timing["rounds"] == 3
    assert c["c0"]["median_ms"] < c["torch_nccl"]["median_ms"] < c["c1"]["median_ms"]
    # the probe launch, then per round one sample of the reference in each of the two pairs
    assert calls["torch_nccl"] == 1 + 3 * 2 * timing["per_sample"]


@pytest.mark.parametrize("line", ['@@rankpool {"verdict": ', "@@rankpool [1, 2]", "@@rankpool \"PASS\""])
def test_a_protocol_line_that_is_no_json_object_is_a_broken_pool_not_a_dead_reader(line):
    import io
    import queue
    from swizzleperf.agent.distributed.rank_pool import _read_lines
    lines = queue.Queue()
    _read_lines(io.StringIO(line + "\n@@rankpool {\"event\": \"ready\"}\nnot the protocol\n"), lines)
    first, second = lines.get_nowait(), lines.get_nowait()
    assert first["broken"] and first["verdict"] == "CRASH" and "not a JSON object" in first["reason"]
    assert second == {"event": "ready"} and lines.empty()
