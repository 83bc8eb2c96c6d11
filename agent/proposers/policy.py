"""The built-in search policy, the proposer when no LLM is configured.

Not a model: a hardware-aware search over the catalog of swizzle families (agent/verification/swizzles.py).
Group sizes come from the concurrent wave of the target GPU; every member is ranked by the L2
simulator on the real problem before anything is proposed; members are then proposed best-ranked
first, and the loop's measurements (on a GPU) decide which one is kept.
"""
from __future__ import annotations

import ast
import textwrap
from dataclasses import dataclass, field
from typing import Callable

from swizzleperf.agent.proposers.base import Proposal, ProposalContext, ProposerExhausted
from swizzleperf.agent.verification.swizzles import rank_catalog


@dataclass
class SearchPolicy:
    """Ranks the catalog once with ``score`` and proposes members in rank order.

    Attributes:
        arg_names: the rewrite target's parameter names.
        wave: programs resident at once per L2 domain (compute units per domain x occupancy).
        aspect: bytes of a column-operand block over a row-operand block (sets G* of the groups).
        score: ``[(name, source)] -> [predicted metrics dict or None]``; None for a member that
            failed verification (it is then never proposed).
        known: sources of orders the run evaluated before the loop (the spec's expert): never
            proposed, under any name that maps programs to tiles the same way.
    """

    arg_names: list
    wave: int
    aspect: float
    score: Callable[[list], list]
    known: list = field(default_factory=list)
    ranking: list = field(default_factory=list)
    counts: dict = field(default_factory=dict)

    def describe(self) -> str:
        return "policy:catalog search ranked by the L2 simulator"

    def propose(self, context: ProposalContext) -> Proposal:
        if not self.ranking:
            self.ranking = self._rank(context)
        tried = {_normalise(h.get("source", "")) for h in context.history}
        tried.add(_normalise(context.target_source))
        for entry in self.ranking:
            if _normalise(entry["source"]) not in tried:
                return Proposal(source=entry["source"], name=entry["name"],
                                rationale=self._rationale(entry, context), predicted=entry["predicted"])
        raise ProposerExhausted(self._exhausted(context))

    def _rank(self, context: ProposalContext) -> list:
        return rank_catalog(self.score, self.arg_names, self.wave, self.aspect, context.tile_grid,
                            context.hardware, context.target_source, known_sources=self.known,
                            counts=self.counts)

    def _exhausted(self, context: ProposalContext) -> str:
        """Why there is nothing left to propose, with the catalog's counts: on a grid where every
        member is the kernel's own order (one row of tiles), that is the reason, not a search."""
        c = self.counts
        if not c:
            return "the policy has tried every catalog member that passed verification"
        grid = " x ".join(map(str, context.tile_grid))
        if not self.ranking:
            why = [f"{c['same']} map programs to tiles as the kernel's own order (or another member) does on its "
                   f"{grid} tile grid"] if c["same"] else []
            why += [f"{c['failed']} got no program -> tile map (not a permutation, or its mapping failed or did "
                    f"not finish in time)"] if c["failed"] else []
            return (f"no catalog order differs from the kernel's own: of {c['members']} members, "
                    + ", ".join(why or ["none applies"]))
        return (f"the policy has tried every catalog member that passed verification ({len(self.ranking)} distinct "
                f"orders of {c['members']} members on its {grid} tile grid)")

    def _rationale(self, entry: dict, context: ProposalContext) -> str:
        rank = self.ranking.index(entry) + 1
        p = entry["predicted"]
        return (f"catalog member {entry['name']}, ranked {rank} of {len(self.ranking)} by the "
                f"simulator for {context.hardware.name} (wave of {self.wave} programs per L2 "
                f"domain): predicted L2 hit rate {p['predicted_l2_hit_rate']:.1%}, DRAM "
                f"{p['predicted_dram_bytes'] / 1e9:.2f} GB ({p['predicted_source']}).")


def _normalise(source: str) -> str:
    """A source's syntax tree without docstrings, for repeat detection: the same order however it
    is laid out (the loop may hand back a candidate re-printed from its tree: ``(a % b) % c`` as
    ``a % b % c``); the text without blank lines and docstring lines where it does not parse."""
    try:
        tree = ast.parse(textwrap.dedent(source))
    except SyntaxError:
        lines = [line.rstrip() for line in source.strip().splitlines() if line.strip()]
        return "\n".join(line for line in lines if not line.lstrip().startswith('"""'))
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            node.body = body[1:] or [ast.Pass()]
    return ast.dump(tree, annotate_fields=False)
