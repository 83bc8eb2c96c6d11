"""The LLM proposer of distributed runs: the same chat machinery as agent/proposers/llm.py, its
own prompt (``prompts/system_distributed.j2``, ``prompts/propose_distributed.j2``) and its own
reply format (a JSON configuration, optionally a tile-order function: overlap_reply.py)."""
from __future__ import annotations

import json

from swizzleperf.agent.distributed.evaluator import DistCandidate
from swizzleperf.agent.proposers.base import ProposalContext
from swizzleperf.agent.proposers.llm import LLMProposer
from swizzleperf.agent.proposers.overlap_reply import parse_overlap_reply
from swizzleperf.agent.verification.candidate import CandidateError, canonical_target
from swizzleperf.prompts import render

#: History entries shown with their full text (the rest one line each).
FULL_HISTORY = 3


class OverlapLLMProposer(LLMProposer):
    """Asks a chat model for overlap configurations of ``evaluator``'s kernel (a DistEvaluator).

    Args: as ``LLMProposer``, after the evaluator (it knows the space, the problem and W).
    """

    def __init__(self, evaluator, model: str, **options) -> None:
        options.setdefault("max_tool_calls", 0)  # simulate() takes a rewrite-target source
        super().__init__(model, **options)
        self.evaluator = evaluator

    def messages(self, context: ProposalContext, detail: int = 0) -> list[dict]:
        """The system and user messages of a first attempt; above ``detail`` 1 the analysis is
        left out and the history keeps its last lines (a small context window)."""
        variables = self._variables(context)
        if detail >= 2:
            variables["history"] = variables["history"][-4:]
        analysis = context.analysis if detail < 2 else "(left out to fit the model's context window)"
        return [{"role": "system", "content": render("system_distributed.j2", **variables)},
                {"role": "user", "content": render("propose_distributed.j2", analysis=analysis,
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
                "history": _history_lines(context.history), "best_line": _line(context.best),
                "evidence": context.evidence() if context.evidence else []}

    def parse(self, reply: str, context: ProposalContext) -> tuple[str, str, str]:
        text, rationale = parse_overlap_reply(reply, context.target_name, self.evaluator.arg_names)
        return text, rationale, _name(text)

    def written(self, text: str, context: ProposalContext) -> str:
        """The configuration ``text`` with its tile-order function (``swizzle``, when one is given)
        as ``canonical_target`` writes it (``LLMProposer.written``); ``text`` where it is not such
        a configuration (the evaluator's check refuses it)."""
        try:
            body = json.loads(text)
        except ValueError:
            return text
        swizzle = body.get("swizzle") if isinstance(body, dict) else None
        if not isinstance(swizzle, str) or "def " not in swizzle:
            return text
        try:
            body["swizzle"] = canonical_target(swizzle, context.target_name, self.evaluator.arg_names)
        except (CandidateError, SyntaxError, ValueError, RecursionError):
            return text
        return json.dumps(body)

    def fix_message(self, context: ProposalContext, error: str) -> str:
        return f"Your reply could not be used: {error}. Reply again with one ```json block."


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
