"""The built-in policy of distributed runs: the kernel's declared space of overlap configurations,
ordered by what the run knows (the model ranks, measurements decide), proposed in a plan that
spends iterations where they can change the answer.

Not a model. Every configuration of ``spec.space(problem, W)`` (patterns x tile configurations,
schedules included, x the knobs each pattern reads; those the kernel's constraints refuse left out)
is priced by profiling/overlap_model.py and ordered by the *calibrated* prediction
(profiling/overlap_calibration.py: recalibrated after every measurement of this run, or on the
measurements committed for this kernel, problem, W and GPU kind in a simulated run, which also
rank first where they exist). The plan, each step skipping what was already evaluated (the
kernel's default, the expert order and every attempt):

1. measured mode: every pattern at the kernel's default pattern knobs (the points the hand bench,
   bench/dist_bench.py, times), so the run finds at least what the bench finds, but for a pattern
   the calibrated model is already sure loses (as in step 4: AG + GEMM's ``pull`` at
   llama70b-up-8k, predicted 12.8 ms calibrated after one 2.8 ms measurement, measured 12.7 ms on
   two H100s, bench/results/dist_optimize_h100x2/);
2. for the best pattern so far (measured, else predicted), its best-ordered configuration under
   each tile configuration of the spec (``spec.tile_configs``, a schedule knob among them where the
   kernel has one): tiles and schedules are always searched, whatever the model thinks of them;
3. the spec's allowed tile orders of the best configuration so far (the model does not price tile
   orders: only a measurement can rank them);
4. the rest in order, one configuration per *price class*: configurations the model prices
   identically (knobs it does not see, such as CE_GROUPS at one chunk per group) are not spent one
   by one; in measured mode a configuration the calibrated model is sure loses (its prediction
   less its margin above the best measured time) is pruned;
5. the other members of the classes, last.

What was measured carries into what is proposed next: the best configuration so far (the kernel's
default, the expert order or an attempt, measured, else predicted) lends its tile order to every
later proposal but those of step 3, and its GEMM configuration (the knobs of ``spec.tile_configs``)
to the pattern sweep of step 1. Once the expert order has measured faster than the kernel's own,
the patterns are swept in the expert order, with the GEMM the best measurement ran.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

from swizzleperf.agent.distributed.evaluator import DistCandidate, parse_candidate
from swizzleperf.agent.proposers.base import Proposal, ProposalContext, ProposerExhausted

#: Two predictions closer than this (relative) are the same price class.
SAME_PRICE = 1e-6


@dataclass
class OverlapPolicy:
    """Proposes the configurations of ``evaluator`` (a ``DistEvaluator``) in the plan above."""

    evaluator: object

    def describe(self) -> str:
        return "policy:overlap configurations, ranked by the calibrated overlap model, decided by measurement"

    def propose(self, context: ProposalContext) -> Proposal:
        tried = {_key(h.get("source", ""), self.evaluator) for h in context.history}
        tried.add(_key(context.target_source, self.evaluator))
        expert = self.evaluator.expert()     # evaluated before the loop, as the kernel's default
        for source in ((context.best or {}).get("source"), expert[1] if expert else None):
            if source:
                tried.add(_key(source, self.evaluator))
        for step, entry in self.plan(context):
            if _key(entry["source"], self.evaluator) not in tried:
                return Proposal(source=entry["source"], name=entry["name"],
                                rationale=self._rationale(step, entry), predicted=entry.get("predicted", {}))
        raise ProposerExhausted("the policy has tried every configuration of the space worth trying")

    def plan(self, context: ProposalContext) -> list:
        """``[(step, entry)]`` in the order of the module docstring (entries may repeat; the first
        untried one is proposed)."""
        ev = self.evaluator
        ranking = ev.rank_configurations()
        measured = ev.mode == "measured"
        best = self._best_pattern(context, ranking)
        order, gemm = self._learned(context)
        cutoff = self._cutoff(context) if measured else None
        plan = []
        if measured:
            plan += [("a pattern at the kernel's default knobs", self._carry(e, order))
                     for e in self._pattern_defaults(ranking, gemm)
                     if cutoff is None or e["key"] == float("inf") or e["key"] <= cutoff]
        plan += [("a tile configuration of the best pattern", self._carry(e, order))
                 for e in self._tile_configs(ranking, best)]
        plan += [("a tile order of the best configuration", e) for e in self._orders(context, ranking)]
        leaders, members = self._price_classes(ranking)
        plan += [("the next price class", self._carry(e, order)) for e in leaders if cutoff is None or e["key"] <= cutoff]
        plan += [("a configuration the model prices like one tried", self._carry(e, order)) for e in members
                 if cutoff is None or e["key"] <= cutoff]
        return plan

    # -- what the measurements so far teach ------------------------------------------------------

    def _learned(self, context: ProposalContext) -> tuple:
        """``(order, gemm)`` of the best configuration so far: its tile order (None: the kernel's
        own) and its GEMM knobs (those of ``spec.tile_configs`` it sets; {}: the kernel's
        default). Both empty before anything was evaluated."""
        source = (context.best or {}).get("source")
        if not source:
            return None, {}
        try:
            best = self.evaluator.canonical(parse_candidate(source, self.evaluator.spec))
        except ValueError:
            return None, {}
        tile_keys = {k for t in self.evaluator.spec.tile_configs for k in t}
        return best.swizzle, {k: v for k, v in best.meta.items() if k in tile_keys}

    def _carry(self, entry: dict, order: str | None) -> dict:
        """``entry`` with the tile order ``order`` (its source and name rewritten); as it is for
        the kernel's own order."""
        if order is None:
            return entry
        ev = self.evaluator
        candidate = ev.canonical(DistCandidate(entry["pattern"], entry["meta"], order))
        return {**entry, "name": candidate.label(), "source": candidate.to_json(), "order": order}

    # -- the steps ---------------------------------------------------------------------------------

    def _pattern_defaults(self, ranking: list, gemm: dict) -> list:
        """Each pattern at the kernel's default pattern knobs and the GEMM knobs ``gemm`` (the
        best measurement's; {}: the kernel's default), in the order of the ranking."""
        ev = self.evaluator
        out = []
        for pattern in ev.spec.patterns:
            candidate = ev.canonical(DistCandidate(pattern, dict(gemm)))
            entry = next((e for e in ranking if e["pattern"] == pattern and ev.canonical(
                DistCandidate(pattern, e["meta"])).meta == candidate.meta), None)
            out.append(entry or {"name": candidate.label(), "source": candidate.to_json(), "predicted": {},
                                 "key": float("inf"), "pattern": pattern, "meta": dict(candidate.meta)})
        return sorted(out, key=lambda e: e["key"])

    def _tile_configs(self, ranking: list, pattern: str) -> list:
        """The best-ordered configuration of ``pattern`` under each of the spec's tile
        configurations (one each)."""
        out = []
        for tiles in self.evaluator.spec.tile_configs:
            entry = next((e for e in ranking if e["pattern"] == pattern and all(
                self.evaluator.meta(DistCandidate(pattern, e["meta"])).get(k) == v for k, v in tiles.items())), None)
            if entry is not None and entry not in out:
                out.append(entry)
        return sorted(out, key=lambda e: e["key"])

    def _orders(self, context: ProposalContext, ranking: list) -> list:
        """The best configuration so far with each allowed tile order other than its own (the
        kernel's own order among them where the best runs another)."""
        ev = self.evaluator
        best = ev.canonical(parse_candidate((context.best or {}).get("source") or ranking[0]["source"], ev.spec))
        out = []
        for name in ev.spec.knobs.get("swizzle", ()):
            candidate = ev.canonical(DistCandidate(best.pattern, best.meta, name))
            if candidate.swizzle == best.swizzle:
                continue
            out.append({"name": candidate.label(), "source": candidate.to_json(), "predicted": {}, "key": None,
                        "pattern": best.pattern, "meta": dict(best.meta)})
        return out

    def _price_classes(self, ranking: list) -> tuple:
        """``(leaders, members)``: the first configuration of each class of identical raw
        predictions (pattern and predicted time), in order; the others of each class, in order."""
        leaders, members, seen = [], [], []
        for entry in ranking:
            price = (entry["pattern"], entry["raw"]["time_ms"])
            if any(p == price[0] and abs(t - price[1]) <= SAME_PRICE * max(t, 1e-12) for p, t in seen):
                members.append(entry)
            else:
                seen.append(price)
                leaders.append(entry)
        return leaders, members

    def _best_pattern(self, context: ProposalContext, ranking: list) -> str:
        source = (context.best or {}).get("source")
        if source and (context.best.get("metrics") or {}).get("time_ms") is not None:
            return parse_candidate(source, self.evaluator.spec).pattern
        return ranking[0]["pattern"]

    def _cutoff(self, context: ProposalContext) -> float | None:
        """Measured mode: the calibrated time above which a configuration surely loses to the best
        measured one (the best's time over one minus the calibration's margin); None before any
        measurement."""
        times = [(h.get("metrics") or {}).get("time_ms") for h in context.history]
        best_metrics = (context.best or {}).get("metrics") or {}
        times = [t for t in times + [best_metrics.get("time_ms")] if t is not None]
        if not times:
            return None
        margin = self.evaluator.calibration.margin()
        return min(times) / max(1e-6, 1.0 - margin)

    def _rationale(self, step: str, entry: dict) -> str:
        p = entry.get("predicted") or {}
        if entry.get("order"):
            step += f", in the best configuration's tile order ({_order_name(entry['order'])}: measured fastest so far)"
        if not p:
            return (f"{step}: the overlap model does not price it (a tile order, or a configuration outside "
                    f"its space): only a measurement can rank it")
        known = (f"; measured earlier {entry['committed_ms']:.3f} ms" if entry.get("committed_ms") is not None else "")
        return (f"{step}: predicted {p['predicted_time_ms']:.3f} ms raw, {entry['calibrated_ms']:.3f} ms calibrated "
                f"for this machine and problem ({p['predicted_source']}){known}; compute "
                f"{p['predicted_compute_ms']:.3f} ms, communication {p['predicted_comm_ms']:.3f} ms, "
                f"{100 * p['predicted_hidden_share']:.0f} % hidden.")


def _order_name(order: str) -> str:
    return "a tile-order source" if "def " in order else order


def _key(text: str, evaluator) -> str:
    """One text per configuration (canonical JSON), or the text itself when it does not parse."""
    try:
        return evaluator.canonical(parse_candidate(text, evaluator.spec)).to_json()
    except ValueError:
        return json.dumps(text)
