"""The built-in distributed policy's plan (agent/proposers/overlap_policy.py, #22): in a measured
run every pattern at the default knobs first (what the hand bench times), the best pattern's tile
configurations always searched, one configuration per class the model prices identically, and
what the calibrated model says surely loses pruned. Predictions only: no worker, no rank runs."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from swizzleperf import hwspecs
from swizzleperf.agent.distributed.evaluator import DistCandidate, DistEvaluator, DistTarget
from swizzleperf.agent.proposers.base import ProposalContext
from swizzleperf.agent.proposers.overlap_policy import OverlapPolicy
from swizzleperf.agent.verification.load import load_spec

ROOT = Path(__file__).resolve().parents[3]
AGG = ROOT / "kernels" / "distributed" / "all_gather_gemm.py"


def _policy(tmp_path: Path, mode: str, problem: str = "llama70b-qkv-4k") -> OverlapPolicy:
    spec = load_spec(AGG)
    target = DistTarget(hwspecs.load_spec("h100"), 2, mode, f"{mode} (test)")
    ev = DistEvaluator(kernel_path=AGG, module_source=AGG.read_text(), spec=spec, problem_name=problem,
                       world_size=2, target=target, candidates_dir=tmp_path / "c")
    return OverlapPolicy(ev)


def _context(policy: OverlapPolicy, history: list | None = None, best: dict | None = None) -> ProposalContext:
    ev = policy.evaluator
    baseline = ev.baseline()[1]
    return ProposalContext(kernel_name=ev.spec.name, kernel_source="", target_name="swizzle",
                           target_source=baseline, hardware=ev.target.spec, mode=ev.mode, problem=ev.problem,
                           meta={}, tile_grid=(), swizzle_args=(), analysis="", profile={},
                           history=history or [], best=best)


def test_a_measured_run_first_measures_every_pattern_at_the_default_knobs(tmp_path):
    policy = _policy(tmp_path, "measured")
    plan = policy.plan(_context(policy))
    patterns = len(policy.evaluator.spec.patterns)
    first = [entry for _, entry in plan[:patterns]]
    assert sorted(json.loads(e["source"])["pattern"] for e in first) == sorted(policy.evaluator.spec.patterns)
    assert all(set(json.loads(e["source"])) == {"pattern"} for e in first)     # default knobs
    # the baseline (the first pattern's default) is not proposed again
    proposal = policy.propose(_context(policy))
    assert json.loads(proposal.source) != json.loads(policy.evaluator.baseline()[1])


def test_the_best_patterns_tile_configurations_are_always_searched(tmp_path):
    policy = _policy(tmp_path, "simulated")
    ev = policy.evaluator
    plan = policy.plan(_context(policy))
    tiles = [e for step, e in plan if step.startswith("a tile configuration")]
    best_pattern = ev.rank_configurations()[0]["pattern"]
    assert tiles and all(e["pattern"] == best_pattern for e in tiles)
    covered = {tuple(sorted((k, ev.meta(DistCandidate(e["pattern"], e["meta"]))[k]) for k in t))
               for e in tiles for t in ev.spec.tile_configs
               if all(ev.meta(DistCandidate(e["pattern"], e["meta"])).get(k) == v for k, v in t.items())}
    assert len(covered) == len(tiles)                       # one entry per tile configuration
    assert len(tiles) >= min(2, len(ev.spec.tile_configs))


def test_configurations_the_model_prices_identically_are_one_iteration(tmp_path):
    policy = _policy(tmp_path, "simulated")
    plan = policy.plan(_context(policy))
    leaders = [e for step, e in plan if step == "the next price class"]
    prices = [(e["pattern"], round(e["raw"]["time_ms"], 9)) for e in leaders]
    assert len(prices) == len(set(prices))
    members = [e for step, e in plan if step.startswith("a configuration the model prices like")]
    assert members, "the space has configurations the model cannot tell apart (CE_GROUPS at one chunk...)"
    assert plan.index(next(p for p in plan if p[0].startswith("a configuration the model"))) > \
        plan.index(next(p for p in plan if p[0] == "the next price class"))


def test_a_measured_run_prunes_what_the_calibrated_model_says_surely_loses(tmp_path):
    policy = _policy(tmp_path, "measured")
    ev = policy.evaluator
    ranking = ev.rank_configurations()
    fastest = ranking[0]
    # this machine: every pattern measured as the model says; the best so far at the fastest predicted time
    for entry in ranking[:3]:
        ev.calibration.add(entry["name"], entry["pattern"], entry["raw"], entry["raw"]["time_ms"])
    best = {"source": fastest["source"], "metrics": {"time_ms": fastest["raw"]["time_ms"]}}
    plan = policy.plan(_context(policy, history=[best], best=best))
    kept = [e for step, e in plan if step == "the next price class"]
    cutoff = fastest["raw"]["time_ms"] / (1 - ev.calibration.margin())
    assert kept and all(e["key"] <= cutoff for e in kept)
    assert any(e["key"] > cutoff for e in ranking), "the test needs configurations beyond the cutoff"


def test_a_simulated_run_ranks_by_committed_measurements_and_shows_them(tmp_path):
    """Two H100s at llama70b-up-8k: pull was measured at 12.7 ms (bench/results/
    dist_h100_2gpu_20261125.json); the default (pull) carries that figure beside its prediction,
    and the model is calibrated on it."""
    policy = _policy(tmp_path, "simulated", "llama70b-up-8k")
    ev = policy.evaluator
    known = ev.committed_measurements()
    # recorded at the kernel's default knobs of its day (later benches record pull at tuned knobs)
    pull = [k for k in known if k.get("pattern") == "pull" and k.get("meta") is None]
    if not pull:
        pytest.skip("no committed two-H100 measurement of pull at llama70b-up-8k")
    entry = next(e for e in ev.rank_configurations()
                 if e["pattern"] == "pull" and not ev.canonical(DistCandidate("pull", e["meta"])).meta)
    assert entry["committed_ms"] == pull[0]["time_ms"] and entry["key"] == pull[0]["time_ms"]
    assert ev.calibration.summary()["observations"] >= 1


def test_what_was_measured_carries_into_the_next_proposals(tmp_path):
    """The run of 2026-11-25 swept the patterns in the kernel's row-major order after the expert
    order (grouped-m:8) had measured faster: now the best so far lends its tile order to every later
    proposal but the tile-order step (which offers the kernel's own again), and its GEMM knobs to the
    pattern sweep; the expert itself is never proposed again."""
    from swizzleperf.agent.verification.candidate import splice
    from swizzleperf.agent.verification.swizzles import catalog_source
    kernel = tmp_path / AGG.name        # the kernel as it was that day: row-major
    kernel.write_text(splice(AGG.read_text(), "swizzle", catalog_source("row-major", ["pid", "num_pid_m", "num_pid_n"])))
    target = DistTarget(hwspecs.load_spec("h100"), 2, "measured", "measured (test)")
    ev = DistEvaluator(kernel_path=kernel, module_source=kernel.read_text(), spec=load_spec(kernel),
                       problem_name="llama70b-qkv-4k", world_size=2, target=target, candidates_dir=tmp_path / "c")
    policy = OverlapPolicy(ev)
    expert = ev.expert()[1]
    best = {"source": json.dumps({"pattern": "push", "STREAM_K": 1, "swizzle": "grouped-m:8"}),
            "metrics": {"time_ms": 1.0}, "kind": "candidate"}
    plan = policy.plan(_context(policy, history=[best], best=best))
    sweep = [json.loads(e["source"]) for step, e in plan if step.startswith("a pattern")]
    assert sweep and all(c["swizzle"] == "grouped-m:8" and c["STREAM_K"] == 1 for c in sweep)
    classes = [json.loads(e["source"]) for step, e in plan if step == "the next price class"]
    assert classes and all(c.get("swizzle") == "grouped-m:8" for c in classes)
    orders = [json.loads(e["source"]) for step, e in plan if step.startswith("a tile order")]
    assert {"pattern": "push", "STREAM_K": 1} in orders and all(c.get("swizzle") != "grouped-m:8" for c in orders)
    # the expert measured faster than the default (the best), nothing else yet: the sweep in its order
    expert_best = {"source": expert, "metrics": {"time_ms": 1.0}, "kind": "expert"}
    proposal = policy.propose(_context(policy, best=expert_best))
    assert json.loads(proposal.source).get("swizzle") == "grouped-m:8" and "measured fastest so far" in proposal.rationale
    assert json.loads(proposal.source) not in (json.loads(expert), json.loads(ev.baseline()[1]))


def test_the_pattern_sweep_skips_a_pattern_the_calibrated_model_is_sure_loses(tmp_path):
    """Two H100s at llama70b-up-8k, measured: pull at 12.7 ms against 2.8 ms for the best pattern
    (bench/results/dist_optimize_h100x2/). Once one pattern was measured as the model says, a
    pattern predicted beyond the cut-off is not spent as an iteration; the others still are."""
    policy = _policy(tmp_path, "measured", problem="llama70b-up-8k")
    ev = policy.evaluator
    defaults = policy._pattern_defaults(ev.rank_configurations(), {})
    fastest, slowest = defaults[0], defaults[-1]
    ev.calibration.add(fastest["name"], fastest["pattern"], fastest["raw"], fastest["raw"]["time_ms"])
    best = {"source": fastest["source"], "metrics": {"time_ms": fastest["raw"]["time_ms"]}}
    cutoff = policy._cutoff(_context(policy, history=[best], best=best))
    assert slowest["key"] > cutoff, "the test needs a pattern the model prices beyond the cut-off"
    sweep = [json.loads(e["source"])["pattern"] for step, e in policy.plan(_context(policy, history=[best], best=best))
             if step == "a pattern at the kernel's default knobs"]
    assert slowest["pattern"] not in sweep
    assert set(sweep) == {e["pattern"] for e in defaults if e["key"] <= cutoff}
    # before any measurement every pattern is swept (nothing is known of this machine yet)
    first = [json.loads(e["source"])["pattern"] for step, e in policy.plan(_context(policy))
             if step == "a pattern at the kernel's default knobs"]
    assert sorted(first) == sorted(ev.spec.patterns)
