"""The built-in search policy, the proposer when no LLM is configured.

Not a model: a hardware-aware search over the catalog of swizzle families (agent/swizzles.py).
Group sizes come from the concurrent wave of the target GPU; every member is ranked by the L2
simulator on the real problem before anything is proposed; members are then proposed best-ranked
first, and the loop's measurements (on a GPU) decide which one is kept.
"""
from __future__ import annotations

import ast
import textwrap
from dataclasses import dataclass, field
from typing import Callable

from swizzleperf.agent import swizzles
from swizzleperf.agent.proposers.base import Proposal, ProposalContext, ProposerExhausted


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
        raise ProposerExhausted("the policy has tried every catalog member that passed verification")

    def _rank(self, context: ProposalContext) -> list:
        return rank_catalog(self.score, self.arg_names, self.wave, self.aspect, context.tile_grid,
                            context.hardware, context.target_source, known_sources=self.known)

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


def rank_catalog(score: Callable[[list], list], arg_names: list, wave: int, aspect: float,
                 tile_grid: tuple, hardware, current_source: str, known_sources: list | tuple = ()) -> list:
    """The catalog members worth trying for this wave, grid and hardware, best first by ``score``
    (the L2 simulator: predicted hit rate, then DRAM bytes): ``[{name, source, predicted}]``.
    Members that are the same order as the kernel's current one, as one of ``known_sources`` (the
    expert, evaluated before the loop) or as a better-ranked member, under any name (grouped-n:64
    on 64 columns is row-major) are dropped, and so are members that fail the permutation check
    (``score`` gives None)."""
    names = swizzles.family_members(wave, tile_grid, hardware.l2_domains, aspect, hardware.dispatch)
    members = [(n, swizzles.catalog_source(n, arg_names)) for n in names]
    known = [("current", current_source)] + [(f"known {i}", s) for i, s in enumerate(known_sources)]
    predictions = score(members + known)
    seen = {p["order_sha1"] for p in predictions[len(members):] if p}
    predictions = predictions[:len(members)]
    scored = sorted(({"name": n, "source": s, "predicted": p}
                     for (n, s), p in zip(members, predictions) if p is not None),
                    key=lambda e: (-e["predicted"]["predicted_l2_hit_rate"],
                                   e["predicted"]["predicted_dram_bytes"]))
    ranking = []
    for entry in scored:
        if entry["predicted"]["order_sha1"] not in seen:
            seen.add(entry["predicted"]["order_sha1"])
            ranking.append(entry)
    return ranking
