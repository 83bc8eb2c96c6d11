"""The distributed optimize on a CPU (#13): candidates are overlap configurations, verified on
every rank at W = 2 and 3 through the interpreter, priced by the overlap model (simulated W = 4).
Every verdict is reached: PASS, OUTSIDE_SPACE, INVALID, NOT_PERMUTATION, MISMATCH, DEADLOCK."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from fake_openai import FakeOpenAIServer

from swizzleperf.agent.distributed.evaluator import DistCandidate, DistEvaluator, resolve_target
from swizzleperf.agent.loop import run
from swizzleperf.agent.loop.record import RunRecord
from swizzleperf.agent.proposers.llm import ReplyParseError
from swizzleperf.agent.proposers.overlap_reply import parse_overlap_reply
from swizzleperf.agent.verification.candidate import canonical_target, splice
from swizzleperf.agent.verification.load import load_spec
from swizzleperf.agent.verification.swizzles import catalog_source

ROOT = Path(__file__).resolve().parents[3]
GAS = ROOT / "kernels" / "distributed" / "gemm_all_scatter.py"

# Not a permutation: every tile row maps to row 0 or 1.
TWO_ROWS = '''@triton.jit
def swizzle(pid, num_pid_m, num_pid_n):
    pid_m = (pid // num_pid_n) % 2
    pid_n = pid % num_pid_n
    return pid_m, pid_n
'''
# A permutation (column-major): verified and priced like the kernel's own order.
COLUMN_MAJOR = '''@triton.jit
def swizzle(pid, num_pid_m, num_pid_n):
    pid_m = pid % num_pid_m
    pid_n = pid // num_pid_m
    return pid_m, pid_n
'''


def _evaluator(tmp_path: Path, source: str | None = None) -> DistEvaluator:
    path = tmp_path / "gemm_all_scatter.py"
    path.write_text(source if source is not None else GAS.read_text())
    return DistEvaluator(kernel_path=path, module_source=path.read_text(), spec=load_spec(path),
                         problem_name="llama70b-qkv-4k", world_size=4,
                         target=resolve_target("h200", 4), candidates_dir=tmp_path / "candidates",
                         timeout_s=300)


def _verdict(ev: DistEvaluator, config: dict | str, label: str = "c") -> dict:
    text = config if isinstance(config, str) else json.dumps(config)
    prepared = ev.prepare(label, text)
    if prepared["verdict"]:
        return prepared
    return {**prepared, **ev.verify(prepared["kernel_file"], time_it=False)}


@pytest.mark.parametrize("config, verdict, message", [
    ({"pattern": "bulk_sync", "COMM_SMS": 12}, "OUTSIDE_SPACE", "COMM_SMS must be one of 8, 16, 32, got 12"),
    ({"pattern": "teleport"}, "OUTSIDE_SPACE", "pattern must be one of bulk_sync, producer_consumer"),
    ({"pattern": "bulk_sync", "WARP_DRIVE": 1}, "OUTSIDE_SPACE", "unknown knob 'WARP_DRIVE'"),
    ({"pattern": "bulk_sync", "BLOCK_M": 256, "BLOCK_N": 256, "BLOCK_K": 128, "num_stages": 4},
     "OUTSIDE_SPACE", "shared memory must fit"),
    ({"pattern": "bulk_sync", "swizzle": "hilbert"}, "OUTSIDE_SPACE", "swizzle must be a rewrite-target source or one of"),
    ("[1, 2]", "INVALID", "must be a JSON object"),
    ("{not json", "INVALID", "not JSON"),
    ({"pattern": "bulk_sync", "swizzle": "@triton.jit\ndef swizzle(pid, num_pid_m, num_pid_n=__import__('os')):\n"
                                         "    return pid, 0\n"}, "INVALID", "default"),
])
def test_rejections_before_any_worker_runs(tmp_path, config, verdict, message):
    result = _verdict(_evaluator(tmp_path), config)
    assert result["verdict"] == verdict and message in result["reason"], result["reason"]
    assert not result["kernel_file"]


def test_a_swizzle_that_is_not_a_permutation_names_the_tiles(tmp_path):
    result = _verdict(_evaluator(tmp_path), {"pattern": "fused_sequential", "swizzle": TWO_ROWS})
    assert result["verdict"] == "NOT_PERMUTATION", result["reason"]
    assert "never computed" in result["reason"] and "W = 4" in result["reason"]


def test_a_verified_configuration_passes_on_every_rank_at_2_and_3(tmp_path):
    ev = _evaluator(tmp_path)
    result = _verdict(ev, {"pattern": "producer_consumer", "COMM_SMS": 32, "BLOCK_N": 128,
                           "num_warps": 4, "num_stages": 4, "swizzle": COLUMN_MAJOR})
    assert result["verdict"] == "PASS", result["reason"]
    numerics = result["details"]["dist_numerics"]
    assert set(numerics["rel_errors"]) == {"2", "3"}
    # the candidate's own knobs ran, at a check problem grown for its tiles (N: 2 x 1.5 tiles of 128 at W = 2)
    assert numerics["meta"]["COMM_SMS"] == 32 and numerics["meta"]["BLOCK_N"] == 128
    assert numerics["check_sizes"]["N"] >= 3 * 128 and numerics["check_sizes"] != {"M": 40, "N": 96, "K": 32}
    metrics = ev.measure(result["kernel_file"], result["mapping"], result["details"])
    assert metrics["time_ms"] is None and metrics["predicted_source"] == "simulated:h200x4"
    assert metrics["predicted_time_ms"] > 0 and 0 <= metrics["predicted_hidden_share"] <= 1
    low, high = metrics["predicted_interval_ms"]
    assert low <= metrics["predicted_time_ms"] <= high
    assert "W = 2 and 3" in metrics["verified_at"] and "COMM_SMS=32" in metrics["verified_at"]


def test_a_wrong_result_on_one_rank_is_a_mismatch(tmp_path):
    # the scatter forgets the last peer: with 3 ranks, one rank's C misses a block
    broken = GAS.read_text().replace("for i in tl.static_range(1, WORLD_SIZE):\n            device.put(",
                                     "for i in tl.static_range(1, WORLD_SIZE - 1):\n            device.put(")
    assert broken != GAS.read_text()
    result = _verdict(_evaluator(tmp_path, broken), {"pattern": "bulk_sync"})
    assert result["verdict"] == "MISMATCH", result["reason"]
    assert "rank" in result["reason"] and "reference" in result["reason"]


def test_a_wait_that_never_completes_is_a_deadlock_naming_rank_flag_and_epoch(tmp_path):
    # the producer never signals: every consumer's wait gives up
    broken = GAS.read_text().replace("device.signal(flags + tile, epoch, rank, rank, heap_bases, scope=\"gpu\")",
                                     "pass")
    assert broken != GAS.read_text()
    result = _verdict(_evaluator(tmp_path, broken), {"pattern": "producer_consumer"})
    assert result["verdict"] == "DEADLOCK", result["reason"]
    assert "rank" in result["reason"] and "tile_ready" in result["reason"] and "epoch" in result["reason"]


def test_the_policy_runs_end_to_end_simulated(tmp_path):
    options = run.RunOptions(kernel=str(GAS), workdir=str(tmp_path / ".sp"), iterations=2, plateau=10,
                             world_size=4, problem="llama70b-up-1k")
    outcome = run.start(options)
    report = json.loads((outcome.run_dir / "report.json").read_text())
    assert outcome.status == "finished" and report["mode"] == "simulated"
    assert report["distributed"]["world_size"] == 4 and report["distributed"]["torch_nccl"]["time_ms"] > 0
    assert [a["verdict"] for a in report["attempts"]] == ["PASS"] * 2
    assert report["best"]["predicted_source"] == "simulated:h200x4" and report["best"]["time_ms"] is None
    # the 4-H200 bench of this problem is committed: the model is calibrated on it, the report lists it
    assert report["distributed"]["calibration"]["observations"] >= 1
    text = (outcome.run_dir / "report.md").read_text()
    assert "predicted, not measured" in text and "Measured earlier for this kernel" in text
    assert report["distributed"]["answer"]["use"] is None          # a simulated run recommends nothing
    assert (outcome.run_dir / "best_command.sh").exists()
    rows = RunRecord(Path(options.workdir)).iterations(outcome.run_id)
    # the kernel's own order is the expert one (grouped-m:8) since 2026-11-25: it is not evaluated
    # twice, so no expert row; the two proposals follow the baseline
    assert list(rows.kind) == ["baseline", "candidate", "candidate"] and report["expert"] is None


def test_an_llm_proposes_configurations_through_a_loopback_server(tmp_path):
    good = ("Attack the scatter: more SMs copying.\n```json\n"
            '{"pattern": "producer_consumer", "COMM_SMS": 32}\n```\n')
    outside = '```json\n{"pattern": "producer_consumer", "COMM_SMS": 20}\n```'
    with FakeOpenAIServer() as server:
        server.reply(good, prompt_tokens=900, completion_tokens=40)
        server.reply(outside, prompt_tokens=950, completion_tokens=30)   # answered at once, no iteration
        server.reply(good, prompt_tokens=950, completion_tokens=30)      # a repeat: answered at once too
        server.reply('```json\n{"pattern": "fused_sequential"}\n```', prompt_tokens=990, completion_tokens=20)
        options = run.RunOptions(kernel=str(GAS), workdir=str(tmp_path / ".sp"), iterations=2,
                                 plateau=10, world_size=4, model="fake", base_url=server.base_url)
        outcome = run.start(options)
        prompt = server.requests[0]["messages"][1]["content"]
        reasks = [r["messages"][-1]["content"] for r in server.requests[2:]]
    assert "COMM_SMS" in prompt and "torch + NCCL" in prompt and "simulated" in prompt
    assert [a["verdict"] for a in outcome.report["attempts"]] == ["PASS", "PASS"]
    assert "COMM_SMS must be one of 8, 16, 32, got 20" in reasks[0]
    assert "same as attempt 1" in reasks[1]
    assert outcome.report["attempts"][1]["name"] == "fused_sequential"


@pytest.mark.parametrize("reply, expected", [
    ('```json\n{"pattern": "bulk_sync", "COMM_SMS": 16}\n```', {"pattern": "bulk_sync", "COMM_SMS": 16}),
    ('I pick {"pattern": "fused_sequential"} because the stores overlap.', {"pattern": "fused_sequential"}),
    ('```json\n{"pattern": "bulk_sync"}\n```\n```python\n' + COLUMN_MAJOR + '```',
     {"pattern": "bulk_sync", "swizzle": COLUMN_MAJOR}),
])
def test_replies_parse_into_configurations(reply, expected):
    text, _ = parse_overlap_reply(reply, "swizzle", ["pid", "num_pid_m", "num_pid_n"])
    assert json.loads(text) == expected


@pytest.mark.parametrize("reply, message", [
    ("", "empty"), ("no json here", "no ```json block"), ('```json\n{"COMM_SMS": 8}\n```', 'no "pattern"'),
    ('```json\n{"pattern": "bulk_sync",\n```', "does not parse"), ('{"pattern": "bulk', "not closed"),
])
def test_bad_replies_say_what_is_wrong(reply, message):
    with pytest.raises(ReplyParseError, match=message):
        parse_overlap_reply(reply, "swizzle", ["pid", "num_pid_m", "num_pid_n"])


def test_a_spec_the_overlap_model_cannot_price_is_one_line(tmp_path):
    from run_cli import assert_one_line_error, swizzleperf
    proc = swizzleperf("optimize", str(GAS), "--hw", "mi300x", cwd=tmp_path)
    assert_one_line_error(proc, "cannot simulate gemm_all_scatter on mi300x")
    proc = swizzleperf("optimize", str(GAS), "--problem", "nope", cwd=tmp_path)
    assert_one_line_error(proc, "--problem must be one of iris-4096")


# A permutation at every grid the run names, not where the grid has 13 tile rows: only the probe's
# small grids (agent/verification/probe.py) can catch it.
NOT_AT_13_ROWS = '''@triton.jit
def swizzle(pid, num_pid_m, num_pid_n):
    pid_m = pid // num_pid_n
    pid_n = pid % num_pid_n
    pid_m = tl.where(num_pid_m == 13, 0, pid_m)
    return pid_m, pid_n
'''


def test_a_tile_order_is_checked_on_every_small_grid_not_only_the_runs_problems(tmp_path):
    ev = _evaluator(tmp_path)
    grids = [g for g, _ in ev.spec.tile_orders(ev.problem, 4, ev.meta(DistCandidate("bulk_sync", {})))]
    assert all(g[0] != 13 for g in grids)          # the benchmark problem's grid has no 13 rows
    result = _verdict(ev, {"pattern": "bulk_sync", "swizzle": NOT_AT_13_ROWS})
    assert result["verdict"] == "NOT_PERMUTATION", result["reason"]
    assert "grid 13x" in result["reason"] and "a grid the kernel may be launched with" in result["reason"]
    passed = _verdict(ev, {"pattern": "bulk_sync", "swizzle": COLUMN_MAJOR})
    summary = passed["details"]["dist_permutation"]
    assert summary["all_grids"]["sites"] > 100 and len(summary["sites"]) > summary["all_grids"]["sites"]


def test_a_configuration_has_one_text_the_canonical_one(tmp_path):
    """A tile-order source is stored as agent/verification/candidate.canonical_target writes it (the report
    never shows the proposer's text), and an order that is the kernel's own (grouped-m:8 since
    2026-11-25, by name or by source) is no order at all: the same configuration as the default."""
    ev = _evaluator(tmp_path)
    dressed = COLUMN_MAJOR.replace("    pid_m = pid % num_pid_m\n",
                                   "    # a comment the report must not carry\n    pid_m = pid % num_pid_m\n")
    prepared = ev.prepare("c", json.dumps({"pattern": "bulk_sync", "swizzle": dressed}))
    stored = json.loads(prepared["source"])["swizzle"]
    assert "comment" not in stored and stored == canonical_target(dressed, "swizzle", ["pid", "num_pid_m", "num_pid_n"])
    assert json.loads(Path(prepared["kernel_file"]).with_suffix(".config.json").read_text())["swizzle"] == stored
    own = catalog_source("grouped-m:8", ["pid", "num_pid_m", "num_pid_n"])
    for config in ({"pattern": "bulk_sync", "swizzle": "grouped-m:8"}, {"pattern": "bulk_sync", "swizzle": own}):
        assert ev.prepare("o", json.dumps(config))["source"] == json.dumps({"pattern": "bulk_sync"})
    assert ev.expert() is None                      # the expert order is the kernel's own: not measured twice
    row_major = tmp_path / "row_major" / GAS.name
    row_major.parent.mkdir()
    row_major.write_text(splice(GAS.read_text(), "swizzle", catalog_source("row-major", ["pid", "num_pid_m", "num_pid_n"])))
    older = DistEvaluator(kernel_path=row_major, module_source=row_major.read_text(), spec=load_spec(row_major),
                          problem_name="llama70b-qkv-4k", world_size=4, target=resolve_target("h200", 4),
                          candidates_dir=tmp_path / "c2")
    assert json.loads(older.expert()[1]) == {"pattern": "bulk_sync", "swizzle": "grouped-m:8"}


def test_a_proposal_lost_to_the_endpoint_is_no_verdict_and_its_lesson_has_no_url(tmp_path):
    """A distributed proposal the endpoint never answered: its lesson (what the next prompt's history
    shows) says it is no verdict on any configuration, without the endpoint's URL (real-LLM finding 12)."""
    evaluator = _evaluator(tmp_path)
    attempt = {"name": "none", "verdict": "NO_CANDIDATE",
               "reason": "LLM endpoint http://127.0.0.1:8089/v1: no usable reply within the 300 s deadline"}
    lesson = evaluator.lesson(attempt, {}, {})
    assert lesson == "no reply in time; not a verdict on any order" and "http" not in lesson
