"""What a proposer is given and what it returns. A proposer is anything with
``propose(context) -> Proposal``: the LLM proposer, the built-in search policy, a scripted one."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Protocol


class ProposerError(Exception):
    """No candidate this time (endpoint down, replies unparseable after the retries); one line.
    What the failed attempt still spent is kept: ``prompt_tokens``, ``completion_tokens``,
    ``cost_usd``, and the requests made (``exchanges``, for the transcript)."""

    def __init__(self, message: str, prompt_tokens: int = 0, completion_tokens: int = 0,
                 cost_usd: float = 0.0, exchanges: list | None = None):
        super().__init__(message)
        self.prompt_tokens, self.completion_tokens, self.cost_usd = prompt_tokens, completion_tokens, cost_usd
        self.exchanges = exchanges or []


class ProposerExhausted(Exception):
    """The proposer has nothing left worth trying; the loop stops."""


@dataclass
class ProposalContext:
    """Everything a proposer may use for one proposal.

    Attributes:
        kernel_name: the KernelSpec's name.
        kernel_source: full text of the kernel module.
        target_name: name of the rewrite target (``"swizzle"``).
        target_source: the rewrite target's current source in the kernel module (the baseline).
        hardware: the ``HardwareSpec`` the run targets; ``mode`` says measured or simulated.
        mode: ``"measured"`` (a matching GPU is present) or ``"simulated"``.
        problem: the default problem's sizes; ``meta`` its launch meta-parameters.
        tile_grid: logical tile grid of the default problem, e.g. ``(128, 64)``.
        swizzle_args: the values of the target's arguments after ``pid`` at the default problem.
        analysis: the memory-access analysis as text (rendered once per run).
        profile: the baseline's filtered profile, metric name -> value (with ``*_source`` keys).
        history: earlier attempts, oldest first: dicts with ``iteration, name, source, verdict,
            reason, metrics, lesson``.
        best: the best verified attempt so far (same keys as a history entry).
        iteration: 1-based number of the proposal being asked for.
        precheck: ``(candidate text) -> reason or None``: the checks that cost no iteration
            (the static check, a repeat of the baseline or of an earlier attempt); a proposer
            that can ask again does so with the reason instead of spending an iteration.
        evidence: ``() -> [{name, source, predicted_*}]``: known candidates ranked by the
            simulator (or the overlap model) for this problem, best first; computed on first call.
        simulate: ``(candidate text) -> dict``: the simulator's figures for a candidate, or
            ``{"error": reason}``; costs a worker, not an iteration (a model's tool).
    """

    kernel_name: str
    kernel_source: str
    target_name: str
    target_source: str
    hardware: Any
    mode: str
    problem: dict
    meta: dict
    tile_grid: tuple
    swizzle_args: tuple
    analysis: str
    profile: dict
    history: list = field(default_factory=list)
    best: dict | None = None
    iteration: int = 1
    precheck: Callable[[str], str | None] | None = None
    evidence: Callable[[], list] | None = None
    simulate: Callable[[str], dict] | None = None


@dataclass
class Proposal:
    """One candidate: the full new source of the rewrite target and why.

    Attributes:
        source: the complete ``@triton.jit def <target>(...)`` definition, nothing else.
        rationale: the proposer's reasoning, a few sentences.
        name: a label (``"grouped-m:16"`` for the policy; ``"llm"`` for a model).
        prompt_tokens / completion_tokens: tokens spent on this proposal (0 for the policy).
        cost_usd: money spent on this proposal (0.0 when no price is configured).
        predicted: what the proposer expects, metric name -> value (may be empty).
        exchanges: the requests this proposal made (``chat.Exchange.to_dict()``), for the
            transcript; empty for proposers that ask no one.
    """

    source: str
    rationale: str
    name: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    predicted: dict = field(default_factory=dict)
    exchanges: list = field(default_factory=list)


class Proposer(Protocol):
    """Anything that proposes candidates. ``describe()`` names it for the run record."""

    def propose(self, context: ProposalContext) -> Proposal: ...

    def describe(self) -> str: ...
