"""A deterministic proposer that replays given candidates in order: for tests and demonstrations of
the loop without an LLM (in the manner of mini-swe-agent's deterministic model)."""
from __future__ import annotations

from dataclasses import dataclass, field

from swizzleperf.agent.proposers.base import Proposal, ProposalContext, ProposerError, ProposerExhausted


@dataclass
class ScriptedProposer:
    """Proposes ``script`` entries one per call: ``(name, source)`` pairs, or an Exception instance
    to raise in that turn (a ``ProposerError`` to play an endpoint that is down). Raises
    ``ProposerExhausted`` after the last entry. ``contexts`` keeps every context it was given."""

    script: list
    contexts: list = field(default_factory=list)

    def describe(self) -> str:
        return f"scripted:{len(self.script)} candidates"

    def propose(self, context: ProposalContext) -> Proposal:
        self.contexts.append(context)
        turn = len(self.contexts) - 1
        if turn >= len(self.script):
            raise ProposerExhausted("the script has no more candidates")
        entry = self.script[turn]
        if isinstance(entry, Exception):
            raise entry
        name, source = entry
        return Proposal(source=source, name=name, rationale=f"scripted turn {turn + 1}")


__all__ = ["ScriptedProposer", "ProposerError"]
