"""The LLM proposer of distributed runs: the same chat machinery as agent/proposers/llm.py, its
own prompt (``prompts/system_distributed.j2``, ``prompts/propose_distributed.j2``) and its own
reply format (a JSON configuration, optionally a tile-order function: overlap_reply.py)."""
from __future__ import annotations

import json

from swizzleperf.agent.distributed import DistCandidate
from swizzleperf.agent.proposers.base import Proposal, ProposalContext, ProposerError
from swizzleperf.agent.proposers.llm import LLMProposer, ReplyParseError, _Usage, render
from swizzleperf.agent.proposers.overlap_reply import parse_overlap_reply

#: History entries shown with their full text (the rest one line each).
FULL_HISTORY = 3


class OverlapLLMProposer(LLMProposer):
    """Asks a chat model for overlap configurations of ``evaluator``'s kernel (a DistEvaluator).

    Args: as ``LLMProposer``, after the evaluator (it knows the space, the problem and W).
    """

    def __init__(self, evaluator, model: str, **options) -> None:
        super().__init__(model, **options)
        self.evaluator = evaluator

    def messages(self, context: ProposalContext) -> list[dict]:
        """The system and user messages of a first attempt."""
        variables = self._variables(context)
        return [{"role": "system", "content": render("system_distributed.j2", **variables)},
                {"role": "user", "content": render("propose_distributed.j2", analysis=context.analysis,
                                                   mode=context.mode, **variables)}]

    def _variables(self, context: ProposalContext) -> dict:
        ev = self.evaluator
        knobs = {k: list(v) for k, v in ev.spec.knobs.items() if k != "pattern"}
        defaults = ev.spec.meta_for(ev.problem_name)
        example = DistCandidate(ev.spec.patterns[-1], {k: v[0] for k, v in list(knobs.items())[:2]
                                                       if k != "swizzle"}).to_json()
        return {"kernel": ev.spec.name, "world_size": ev.world_size, "target_name": context.target_name,
                "signature": f"{context.target_name}({', '.join(ev.arg_names)})",
                "patterns": list(ev.spec.patterns), "knobs": knobs, "defaults": defaults,
                "constraints": _constraints_text(ev), "example": example,
                "history": _history_lines(context.history), "best_line": _line(context.best)}

    def propose(self, context: ProposalContext) -> Proposal:
        messages = self.messages(context)
        usage = _Usage()
        error = None
        for _ in range(1 + self.max_parse_retries):
            reply = self._ask(messages, usage)
            try:
                text, rationale = parse_overlap_reply(reply, context.target_name, self.evaluator.arg_names)
                reason = context.precheck(text) if context.precheck else None
                if reason:  # costs a re-ask, not an iteration
                    raise ReplyParseError(reason)
            except ReplyParseError as exc:
                error = exc
                messages = messages + [{"role": "assistant", "content": reply},
                                       {"role": "user", "content": f"Your reply could not be used: {exc}. "
                                                                   f"Reply again with one ```json block."}]
                continue
            return Proposal(source=text, rationale=rationale, name=_name(text),
                            prompt_tokens=usage.prompt_tokens, completion_tokens=usage.completion_tokens,
                            cost_usd=self._cost(usage))
        raise ProposerError(f"the model's replies could not be parsed after {1 + self.max_parse_retries} "
                            f"attempts: {error}", prompt_tokens=usage.prompt_tokens,
                            completion_tokens=usage.completion_tokens, cost_usd=self._cost(usage))


def _name(text: str) -> str:
    body = json.loads(text)
    swizzle = body.pop("swizzle", None)
    pattern = body.pop("pattern")
    return DistCandidate(pattern, body, swizzle).label()


def _constraints_text(evaluator) -> str:
    doc = getattr(evaluator.spec.constraints, "__doc__", None) if evaluator.spec.constraints else None
    return " ".join(doc.split()) if doc else ""


def _line(attempt: dict | None) -> str:
    if not attempt:
        return "none"
    m = attempt.get("metrics") or {}
    t = m.get("time_ms") if m.get("time_ms") is not None else m.get("predicted_time_ms")
    source = m.get("time_source") or m.get("predicted_source") or ""
    return f"{attempt.get('name')}: {t:.3f} ms ({source})" if t is not None else str(attempt.get("name"))


def _history_lines(history: list) -> list:
    """One line per attempt; the configuration's text in full for the last ``FULL_HISTORY``."""
    lines = []
    for i, h in enumerate(history):
        text = f"#{h.get('iteration')} {h.get('verdict')}: {h.get('lesson') or h.get('reason') or ''}"
        if i >= len(history) - FULL_HISTORY:
            source = h.get("source") or ""
            text += f" Configuration: {source if len(source) < 600 else source[:600] + '...'}"
        lines.append(" ".join(text.split()))
    return lines
