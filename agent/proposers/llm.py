"""The LLM proposer: any OpenAI-compatible chat endpoint (OpenAI, vLLM, SGLang, llama.cpp, Ollama).

One proposal = render ``prompts/system.j2`` and ``prompts/propose.j2`` from the context, ask the
model, and parse its reply into the new source of the rewrite target (``parse_reply``). A reply
that does not parse is answered with ``prompts/fix_reply.j2`` (the parse error and the format) and
asked again, at most ``max_parse_retries`` times. Transient connection errors are the SDK's to
retry (``max_retries``); everything else becomes a one-line ``ProposerError``.
"""
from __future__ import annotations

import ast
import functools
import math
import os
import re
import textwrap
from dataclasses import dataclass
from enum import Enum
from typing import Any

import jinja2
import openai

from swizzleperf.agent.proposers.base import Proposal, ProposalContext, ProposerError

# A fenced block: an opening fence with an optional language tag, the body, a closing fence.
_FENCE = re.compile(r"^[ \t]*```[ \t]*([\w+-]*)[^\n]*\n(.*?)^[ \t]*```[ \t]*$", re.M | re.S)
_CODE_LANGUAGES = {"", "python", "py", "python3"}
# Imports the model may add on top of the function; they are dropped, not spliced.
_TOLERATED_IMPORTS = {"triton", "triton.language", "tl"}


class ReplyParseError(ValueError):
    """The model's reply does not hold exactly the rewrite target; the message goes back to it."""


# --------------------------------------------------------------------------------------------
# Parsing a reply
# --------------------------------------------------------------------------------------------

def parse_reply(text: str, target_name: str, arg_names: list[str]) -> tuple[str, str]:
    """Extract ``(source, rationale)`` from a model reply.

    The reply must hold a fenced code block (```python or ```) with exactly one top-level function,
    ``@triton.jit def <target_name>(<arg_names>)``; imports of triton are tolerated and dropped.
    Of several blocks, the last one that contains ``def <target_name>`` is taken. ``source`` is the
    function's text, decorator included, dedented; ``rationale`` is the reply outside that block.

    Raises:
        ReplyParseError: saying what is wrong and what was expected.
    """
    expected = f"`{target_name}({', '.join(arg_names)})`"
    if not text or not text.strip():
        raise ReplyParseError(f"the reply is empty: expected the function {expected} in one "
                              f"```python code block")
    block = _pick_block(text, target_name, expected)
    code = textwrap.dedent(block.group(2))
    try:
        tree = ast.parse(code)
    except SyntaxError as exc:
        raise ReplyParseError(f"the code block does not parse: {exc.msg} "
                              f"(line {exc.lineno})") from None
    function = _the_function(tree, code, target_name, arg_names, expected)
    _check_decorator(function, target_name)
    source = "\n".join(code.splitlines()[function.decorator_list[0].lineno - 1:function.end_lineno])
    outside = (text[:block.start()].strip(), text[block.end():].strip())
    rationale = "\n\n".join(part for part in outside if part)
    return source + "\n", rationale


def _pick_block(text: str, target_name: str, expected: str) -> re.Match:
    """The last code block defining the target, else the last code block."""
    blocks = [m for m in _FENCE.finditer(text) if m.group(1).lower() in _CODE_LANGUAGES]
    if not blocks:
        if "```" in text:
            raise ReplyParseError(f"no ```python code block in the reply (a fence is not closed, "
                                  f"or not on its own line): expected the function {expected} in "
                                  f"one ```python ... ``` block")
        raise ReplyParseError(f"no ```python code block in the reply: expected the function "
                              f"{expected} in one ```python ... ``` block")
    defining = [m for m in blocks if re.search(rf"\bdef\s+{re.escape(target_name)}\b", m.group(2))]
    return (defining or blocks)[-1]


def _the_function(tree: ast.Module, code: str, target_name: str, arg_names: list[str],
                  expected: str) -> ast.FunctionDef:
    """The one top-level definition of the target, with the expected parameters."""
    functions = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    targets = [f for f in functions if f.name == target_name]
    if not targets:
        found = ", ".join(f"`{_signature(f)}`" for f in functions) or "no function definition"
        raise ReplyParseError(f"expected one function {expected}, found {found}")
    if len(targets) > 1:
        raise ReplyParseError(f"the code block defines `{target_name}` {len(targets)} times: "
                              f"expected one function {expected}")
    function = targets[0]
    if isinstance(function, ast.AsyncFunctionDef) or not _has_parameters(function, arg_names):
        raise ReplyParseError(f"expected one function {expected}, found `{_signature(function)}`")
    for node in tree.body:
        if node is function or _is_tolerated_import(node):
            continue
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            raise ReplyParseError(f"the code block also defines `{node.name}`: only "
                                  f"`{target_name}` may be written")
        statement = (ast.get_source_segment(code, node) or "").splitlines()[0][:60]
        raise ReplyParseError(f"the code block also contains `{statement}` (line {node.lineno}): "
                              f"only the function `{target_name}` may be written")
    return function


def _has_parameters(function: ast.FunctionDef, arg_names: list[str]) -> bool:
    args = function.args
    positional = [a.arg for a in args.posonlyargs + args.args]
    return positional == list(arg_names) and not (args.vararg or args.kwonlyargs or args.kwarg)


def _signature(function: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    return f"{function.name}({ast.unparse(function.args)})"


def _is_tolerated_import(node: ast.stmt) -> bool:
    if isinstance(node, ast.Import):
        return all(alias.name in _TOLERATED_IMPORTS for alias in node.names)
    if isinstance(node, ast.ImportFrom):
        return node.module in _TOLERATED_IMPORTS and node.level == 0
    return False


def _check_decorator(function: ast.FunctionDef, target_name: str) -> None:
    names = [ast.unparse(d.func if isinstance(d, ast.Call) else d) for d in function.decorator_list]
    if "triton.jit" not in names:
        raise ReplyParseError(f"`{target_name}` lacks the @triton.jit decorator")
    others = [n for n in names if n != "triton.jit"]
    if others or len(names) > 1:
        listed = ", ".join(f"@{n}" for n in (others or names[1:]))
        raise ReplyParseError(f"`{target_name}` may carry only the @triton.jit decorator, "
                              f"found also {listed}")


def target_arg_names(target_source: str, target_name: str) -> list[str]:
    """Positional parameter names of the rewrite target in its current source."""
    tree = ast.parse(textwrap.dedent(target_source))
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == target_name:
            return [a.arg for a in node.args.posonlyargs + node.args.args]
    raise ValueError(f"the target source does not define `{target_name}`, expected "
                     f"`def {target_name}(...)` at top level")


# --------------------------------------------------------------------------------------------
# Rendering the prompts
# --------------------------------------------------------------------------------------------

@functools.lru_cache(maxsize=1)
def _environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.PackageLoader("swizzleperf.prompts", ""),
                             undefined=jinja2.StrictUndefined, trim_blocks=True,
                             lstrip_blocks=True, keep_trailing_newline=True)
    env.filters.update(bytes=_format_bytes, num=_format_number, label=_label)
    return env


def _format_bytes(value: float) -> str:
    """``52428800`` -> ``"50 MiB"``; the unit that keeps the number readable."""
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if value >= size:
            return f"{value / size:.4g} {unit}"
    return f"{value:g} B"


def _format_number(value: Any) -> str:
    if isinstance(value, float) and math.isfinite(value):
        return f"{value:.4g}"
    return str(value)


def _label(value: Any) -> str:
    """An enum by its name (``PASS``), anything else as text."""
    return value.name if isinstance(value, Enum) else str(value)


def render(template: str, **variables: Any) -> str:
    """Render one template of ``prompts/`` by name."""
    return _environment().get_template(template).render(**variables)


def render_messages(context: ProposalContext) -> list[dict]:
    """The system and user messages of a first attempt."""
    arg_names = target_arg_names(context.target_source, context.target_name)
    signature = f"{context.target_name}({', '.join(arg_names)})"
    variables = dict(
        context=context, hw=context.hardware, signature=signature,
        swizzle_args=list(zip(arg_names[1:], context.swizzle_args)),
        num_programs=math.prod(context.tile_grid),
    )
    return [{"role": "system", "content": render("system.j2", **variables)},
            {"role": "user", "content": render("propose.j2", **variables)}]


# --------------------------------------------------------------------------------------------
# The proposer
# --------------------------------------------------------------------------------------------

@dataclass
class _Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def add(self, usage: Any) -> None:
        if usage is not None:
            self.prompt_tokens += getattr(usage, "prompt_tokens", None) or 0
            self.completion_tokens += getattr(usage, "completion_tokens", None) or 0


class LLMProposer:
    """Proposes rewrites of the target by asking a chat model; see the module docstring.

    Args:
        model: the model name the endpoint serves.
        base_url: the endpoint (``http://localhost:8000/v1``); None for the SDK's default.
        api_key: the key; None reads ``OPENAI_API_KEY``, and local servers need none.
        timeout_s: seconds one request may take.
        max_parse_retries: extra requests after replies that do not parse.
        price_in_per_mtok / price_out_per_mtok: USD per million prompt / completion tokens.
        temperature: sampling temperature.
        max_retries: the SDK's retries of connection errors, timeouts, 429 and 5xx.
    """

    def __init__(self, model: str, base_url: str | None = None, api_key: str | None = None,
                 timeout_s: float = 120.0, max_parse_retries: int = 2,
                 price_in_per_mtok: float = 0.0, price_out_per_mtok: float = 0.0,
                 temperature: float = 0.2, max_retries: int = 2) -> None:
        if max_parse_retries < 0:
            raise ValueError(f"max_parse_retries must be >= 0, got {max_parse_retries}")
        self.model = model
        self.timeout_s = timeout_s
        self.max_parse_retries = max_parse_retries
        self.price_in_per_mtok = price_in_per_mtok
        self.price_out_per_mtok = price_out_per_mtok
        self.temperature = temperature
        self._client = openai.OpenAI(
            base_url=base_url, api_key=api_key or os.environ.get("OPENAI_API_KEY") or "not-needed",
            timeout=timeout_s, max_retries=max_retries)
        self.url = str(self._client.base_url).rstrip("/")

    def describe(self) -> str:
        return f"llm:{self.model} at {self.url}"

    def propose(self, context: ProposalContext) -> Proposal:
        arg_names = target_arg_names(context.target_source, context.target_name)
        messages = render_messages(context)
        usage = _Usage()
        for _ in range(1 + self.max_parse_retries):
            reply = self._ask(messages, usage)
            try:
                source, rationale = parse_reply(reply, context.target_name, arg_names)
                reason = context.precheck(source) if context.precheck else None
                if reason:  # costs a re-ask, not an iteration
                    raise ReplyParseError(reason)
            except ReplyParseError as exc:
                error = exc
                messages = messages + [{"role": "assistant", "content": reply},
                                       {"role": "user", "content": self._fix_message(context, exc)}]
                continue
            return Proposal(source=source, rationale=rationale, name="llm",
                            prompt_tokens=usage.prompt_tokens,
                            completion_tokens=usage.completion_tokens, cost_usd=self._cost(usage))
        raise ProposerError(f"the model's replies could not be parsed after "
                            f"{1 + self.max_parse_retries} attempts: {error}",
                            prompt_tokens=usage.prompt_tokens, completion_tokens=usage.completion_tokens,
                            cost_usd=self._cost(usage))

    def _fix_message(self, context: ProposalContext, error: ReplyParseError) -> str:
        arg_names = target_arg_names(context.target_source, context.target_name)
        return render("fix_reply.j2", error=str(error), context=context,
                      signature=f"{context.target_name}({', '.join(arg_names)})")

    def _cost(self, usage: _Usage) -> float:
        return (usage.prompt_tokens * self.price_in_per_mtok / 1e6
                + usage.completion_tokens * self.price_out_per_mtok / 1e6)

    def _ask(self, messages: list[dict], usage: _Usage) -> str:
        """One chat request; the reply's text ('' when it has none). SDK errors -> ProposerError."""
        try:
            raw = self._client.chat.completions.with_raw_response.create(
                model=self.model, messages=messages, temperature=self.temperature)
        except openai.APITimeoutError:
            raise ProposerError(f"LLM endpoint {self.url} timed out after "
                                f"{self.timeout_s:g} s") from None
        except openai.APIConnectionError as exc:
            raise ProposerError(f"LLM endpoint {self.url} unreachable: {_reason(exc)}") from None
        except openai.AuthenticationError:
            raise ProposerError("LLM endpoint rejected the API key (set OPENAI_API_KEY)") from None
        except openai.NotFoundError:
            raise ProposerError(f"model '{self.model}' not found at {self.url}") from None
        except openai.APIStatusError as exc:
            raise ProposerError(f"LLM endpoint returned HTTP {exc.status_code}: "
                                f"{_short_message(exc)}") from None
        try:
            response = raw.parse()
            usage.add(getattr(response, "usage", None))
            choices = response.choices or []
            content = (choices[0].message.content or "") if choices else ""
            if not isinstance(content, str):
                raise TypeError(f"message content is {type(content).__name__}, not text")
        except (ValueError, TypeError, AttributeError, IndexError, openai.APIResponseValidationError) as exc:
            raise ProposerError(f"LLM endpoint {self.url} answered HTTP 200 with something that is not a "
                                f"chat completion ({type(exc).__name__}); received: "
                                f"{_preview(raw.http_response.content)}") from None
        return content


def _preview(body: bytes, limit: int = 200) -> str:
    """The first ``limit`` characters of a body, undecodable bytes shown as escapes."""
    text = body[:limit * 4].decode("utf-8", errors="backslashreplace")
    return repr(text[:limit]) + (" ..." if len(text) > limit else "")


def _reason(exc: openai.APIConnectionError) -> str:
    """The underlying cause of a connection error (``[Errno 111] Connection refused``)."""
    cause = exc.__cause__
    while cause is not None and cause.__cause__ is not None and not str(cause):
        cause = cause.__cause__
    return _one_line(str(cause) if cause is not None and str(cause) else exc.message)


def _short_message(exc: openai.APIStatusError) -> str:
    """The error's own message from the body when it has one, else the SDK's text."""
    body = exc.body
    if isinstance(body, dict):
        error = body.get("error", body)
        message = error.get("message") if isinstance(error, dict) else error
        if message:
            return _one_line(str(message))
    return _one_line(exc.message)


def _one_line(text: str, limit: int = 200) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[:limit - 3] + "..."
