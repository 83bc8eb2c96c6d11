"""The built-in policy of distributed runs: the kernel's declared space of overlap
configurations, ranked by the overlap model, proposed best-predicted first.

Not a model: every configuration of ``spec.space(problem, W)`` (patterns x tile configurations x
the other knobs, those the kernel's constraints refuse left out) is priced by
profiling/overlap_model.py for the target GPU and W; the loop then verifies each proposal on
every rank and (with W GPUs) measures it. The tile order is not something the overlap model
prices, so the policy varies it last: once the best-predicted configurations have been tried,
the spec's allowed swizzles of the best one.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field

from swizzleperf.agent.distributed import DistCandidate, parse_candidate
from swizzleperf.agent.proposers.base import Proposal, ProposalContext, ProposerExhausted

#: Configurations proposed before the tile orders of the best one are tried.
CONFIGS_BEFORE_ORDERS = 3


@dataclass
class OverlapPolicy:
    """Proposes the configurations of ``evaluator`` (a ``DistEvaluator``) in predicted order."""

    evaluator: object
    ranking: list = field(default_factory=list)

    def describe(self) -> str:
        return "policy:overlap configurations ranked by the overlap model"

    def propose(self, context: ProposalContext) -> Proposal:
        if not self.ranking:
            self.ranking = self._rank()
        tried = {_key(h.get("source", ""), self.evaluator) for h in context.history}
        tried.add(_key(context.target_source, self.evaluator))
        for entry in self._with_orders(context):
            if _key(entry["source"], self.evaluator) not in tried:
                return Proposal(source=entry["source"], name=entry["name"],
                                rationale=self._rationale(entry), predicted=entry["predicted"])
        raise ProposerExhausted("the policy has tried every configuration of the space worth trying")

    def _rank(self) -> list:
        return self.evaluator.ranked_space()

    def _with_orders(self, context: ProposalContext) -> list:
        """The ranking, with the spec's allowed tile orders of the best configuration so far
        inserted after the first ``CONFIGS_BEFORE_ORDERS`` entries."""
        best = parse_candidate((context.best or {}).get("source") or self.ranking[0]["source"],
                               self.evaluator.spec)
        orders = []
        for name in self.evaluator.spec.knobs.get("swizzle", ()):
            if self.evaluator.is_own_order(name):
                continue
            candidate = DistCandidate(best.pattern, best.meta, name)
            orders.append({"name": candidate.label(), "source": candidate.to_json(),
                           "predicted": {}, "rank": None})
        return self.ranking[:CONFIGS_BEFORE_ORDERS] + orders + self.ranking[CONFIGS_BEFORE_ORDERS:]

    def _rationale(self, entry: dict) -> str:
        p = entry["predicted"]
        if not p:
            return ("the best configuration so far with another tile order from the kernel's "
                    "allowed list (the overlap model does not price tile orders: only a "
                    "measurement can rank them)")
        return (f"ranked {entry['rank']} of {len(self.ranking)} configurations by the overlap model "
                f"({p['predicted_source']}): predicted {p['predicted_time_ms']:.3f} ms, compute "
                f"{p['predicted_compute_ms']:.3f} ms, communication {p['predicted_comm_ms']:.3f} ms, "
                f"{100 * p['predicted_hidden_share']:.0f} % hidden.")


def _key(text: str, evaluator) -> str:
    """One text per configuration (canonical JSON), or the text itself when it does not parse."""
    try:
        return evaluator.canonical(parse_candidate(text, evaluator.spec)).to_json()
    except ValueError:
        return json.dumps(text)
