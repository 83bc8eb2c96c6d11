"""What a proposer is given and what it returns. A proposer is anything with
``propose(context) -> Proposal``: the LLM proposer, the built-in search policy, a scripted one."""
from __future__ import annotations

import ast
import unicodedata
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

from swizzleperf.sandbox import untrusted
from swizzleperf.sandbox.redact import holds_secret

#: Why a candidate that holds a secret of the agent's is refused: the secret itself is never said.
SECRET_REASON = ("the candidate holds a secret of this agent's (its API key, or a credential of the endpoint's "
                 "URL; not repeated here): a candidate is written into files, the run record and the report, "
                 "so none may carry one; write it without it")


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


def secret_refusal(text: str) -> str | None:
    """``SECRET_REASON`` when a candidate's ``text`` (a function's source, or a configuration's JSON
    text with a function in it) holds a secret ``sandbox/redact`` knows (the configured API key,
    credentials of ``--base-url``): as written, written with escapes, or once Python has read a
    string of it (``"sk-" "..."`` joined, escapes undone); else None. A proposer asks it before a
    candidate is accepted, so that no secret reaches a candidate file, the record's checkpoints,
    ``report.json``/``report.md``, ``best.diff`` or the user's kernel (only masked texts do)."""
    texts = [text, *_strings(text)]
    return SECRET_REASON if any(holds_secret(t) for t in [*texts, *map(_as_written, texts)]) else None


def _as_written(text: str) -> str:
    """``text`` as the canonical source may write it: NFKC-normalised (Python reads identifiers so,
    a full-width or mathematical-bold name becomes ASCII) and without the characters that are not
    printable and not whitespace (a zero-width space or soft hyphen in a docstring, dropped when its
    summary line is re-emitted)."""
    return "".join(c for c in unicodedata.normalize("NFKC", text) if c.isprintable() or c.isspace())


def _strings(text: str, nested: bool = True) -> list[str]:
    """The string constants of ``text`` read as Python; or, where it is JSON, its string values and
    theirs (a configuration's ``swizzle`` function). Nothing where it is neither."""
    try:
        tree = untrusted.parse_python(text)
    except (SyntaxError, untrusted.UntrustedInput, ValueError):
        tree = None
    if tree is not None:
        return [n.value if isinstance(n.value, str) else n.value.decode("latin-1") for n in ast.walk(tree)
                if isinstance(n, ast.Constant) and isinstance(n.value, (str, bytes))]
    if not nested:
        return []
    try:
        values = untrusted.loads(text, "a candidate")
    except (untrusted.UntrustedInput, ValueError):
        return []
    found, stack = [], [values]
    while stack:
        value = stack.pop()
        if isinstance(value, str):
            found += [value, *_strings(value, nested=False)]
        elif isinstance(value, dict):
            stack += [*value.keys(), *value.values()]
        elif isinstance(value, list):
            stack += value
    return found
