"""The LLM proposer: any OpenAI-compatible chat endpoint (OpenAI, vLLM, SGLang, llama.cpp, Ollama).

One proposal = render ``prompts/system.j2`` and ``prompts/propose.j2`` from the context at the
most detailed level that fits the model's window with room for its reply, ask the model (through
``chat.Conversation``: streamed, under the proposal's deadline, retries counted, every request in
the transcript), and parse its reply into the new source of the rewrite target (``parse_reply``).
A reply that cannot be used (it does not parse, holds a secret of the agent's such as its API key:
``base.secret_refusal``, fails the static check, or repeats an earlier order: ``context.precheck``)
is answered with ``prompts/fix_reply.j2`` (the reason and the format) and asked again, at most
``max_parse_retries`` times; its rationale is kept with secrets masked. Where the server supports
tool calls the model may first call ``simulate(source)`` and ``analyze()`` (``max_tool_calls`` per
proposal). Everything that goes wrong becomes a one-line ``ProposerError`` carrying what was spent.
"""
from __future__ import annotations

import ast
import json
import math
import re
import textwrap
from dataclasses import dataclass
from typing import Any

from swizzleperf.agent.proposers import wire
from swizzleperf.agent.proposers.base import Proposal, ProposalContext, secret_refusal
from swizzleperf.agent.proposers.chat import CLOSED_CODE_BLOCK, ChatClient, ChatSettings, ContextOverflow, Conversation
from swizzleperf.agent.verification import lessons
from swizzleperf.agent.verification.candidate import CandidateError, canonical_target, not_a_plain_def
from swizzleperf.prompts import render
from swizzleperf.sandbox import untrusted
from swizzleperf.sandbox.redact import redact
from swizzleperf.sandbox.write_back import source_lines

_CODE_LANGUAGES = {"", "python", "py", "python3"}
_LANGUAGE = re.compile(r"[ \t]*([\w+-]*)")
#: Code fences a usable reply may hold: a few blocks (the function, perhaps a JSON configuration,
#: an example); hundreds are a hostile or degenerate reply, refused before they are scanned.
MAX_FENCES = 200
#: Characters of an unusable reply shown back to the model when asking again (its end): a reply
#: at the 2048-token budget is about 8 000 characters.
MAX_REPLY_SHOWN = 8_000
#: Characters of the one line that says why a tool call was refused: the transcript and the record
#: keep it with the call (``tool_calls[i]["rejected"]``), and the tool's answer tells the model.
MAX_TOOL_REASON_CHARS = 300
# Imports the model may add on top of the function; they are dropped, not spliced.
_TOLERATED_IMPORTS = {"triton", "triton.language", "tl"}


class ReplyParseError(ValueError):
    """The model's reply does not hold exactly the rewrite target; the message goes back to it."""


# --------------------------------------------------------------------------------------------
# Parsing a reply
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Fence:
    """A fenced block of a reply: its ``language`` tag (``python``, ``json``, ''), its ``body``,
    and where it lies in the reply (``start``: the opening fence's line, ``end``: just after the
    closing fence, its newline excluded)."""

    language: str
    body: str
    start: int
    end: int


def code_blocks(text: str) -> list[Fence]:
    """Every fenced block of ``text``, in order: an opening line of three backticks and an
    optional language tag, the body, a closing line of three backticks alone. One linear pass
    over the lines (a reply of unclosed fences costs the same as any other): a fence left open
    ends the scan, since no closing line follows it.
    """
    blocks, opened, offset = [], None, 0
    for line in text.split("\n"):
        stripped = line.lstrip(" \t")
        if opened is None:
            if stripped.startswith("```") and offset + len(line) < len(text):  # a newline follows
                language = _LANGUAGE.match(stripped, 3).group(1)
                opened = (language, offset, offset + len(line) + 1)
        elif stripped.rstrip(" \t\r") == "```":
            language, start, body_start = opened
            blocks.append(Fence(language, text[body_start:offset], start, offset + len(line)))
            opened = None
        offset += len(line) + 1
    return blocks


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
    check_reply_size(text, f"the function {expected} in one ```python code block")
    block = _pick_block(text, target_name, expected)
    code = textwrap.dedent(block.body)
    tree = parse_code(code)
    function = _the_function(tree, code, target_name, arg_names, expected)
    _check_decorator(function, target_name)
    # AST line numbers count only \n, \r\n and \r breaks (str.splitlines also splits at \x0c, \u2028...)
    lines = source_lines(code)[function.decorator_list[0].lineno - 1:function.end_lineno]
    source = "\n".join(line.rstrip("\r\n") for line in lines)
    outside = (text[:block.start].strip(), text[block.end:].strip())
    rationale = "\n\n".join(part for part in outside if part)
    return source + "\n", rationale


def check_reply_size(text: str, expected: str) -> None:
    """Refuse a reply over ``wire.MAX_TEXT_CHARS`` characters or ``MAX_FENCES`` fences (both
    counted in C, before any scan); ``expected``: what the reply should hold, for the message.

    Raises:
        ReplyParseError: saying which limit, and what was expected.
    """
    if len(text) > wire.MAX_TEXT_CHARS:
        raise ReplyParseError(f"the reply is {len(text)} characters long, more than {wire.MAX_TEXT_CHARS}: "
                              f"expected {expected}")
    fences = text.count("```")
    if fences > MAX_FENCES:
        raise ReplyParseError(f"the reply holds {fences} code fences, more than {MAX_FENCES}: expected {expected}")


def parse_code(code: str) -> ast.Module:
    """A code block parsed within ``untrusted``'s limits (size, nesting, literals).

    Raises:
        ReplyParseError: it does not parse (the message and line), or it exceeds a limit.
    """
    try:
        return untrusted.parse_python(code)
    except SyntaxError as exc:
        raise ReplyParseError(f"the code block does not parse: {exc.msg} (line {exc.lineno})") from None
    except untrusted.UntrustedInput as exc:
        raise ReplyParseError(str(exc)) from None


def _pick_block(text: str, target_name: str, expected: str) -> Fence:
    """The last code block defining the target, else the last code block."""
    blocks = [b for b in code_blocks(text) if b.language.lower() in _CODE_LANGUAGES]
    if not blocks:
        if "```" in text:
            raise ReplyParseError(f"no ```python code block in the reply (a fence is not closed, "
                                  f"or not on its own line): expected the function {expected} in "
                                  f"one ```python ... ``` block")
        raise ReplyParseError(f"no ```python code block in the reply: expected the function "
                              f"{expected} in one ```python ... ``` block")
    defining = [b for b in blocks if re.search(rf"\bdef\s+{re.escape(target_name)}\b", b.body)]
    return (defining or blocks)[-1]


def _the_function(tree: ast.Module, code: str, target_name: str, arg_names: list[str],
                  expected: str) -> ast.FunctionDef:
    """The one top-level definition of the target, with the expected parameters."""
    functions = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    targets = [f for f in functions if f.name == target_name]
    if not any(isinstance(f, ast.FunctionDef) for f in targets):  # `async def`, a class, a lambda
        wrong_form = next((m for m in (not_a_plain_def(n, target_name) for n in tree.body) if m), None)
        if wrong_form:
            raise ReplyParseError(wrong_form)
    if not targets:
        found = ", ".join(f"`{_signature(f)}`" for f in functions) or "no function definition"
        raise ReplyParseError(f"expected one function {expected}, found {found}")
    if len(targets) > 1:
        raise ReplyParseError(f"the code block defines `{target_name}` {len(targets)} times: "
                              f"expected one function {expected}")
    function = targets[0]
    if not _has_parameters(function, arg_names):
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

def render_messages(context: ProposalContext, detail: int = 0, evidence: bool = True) -> list[dict]:
    """The system and user messages of a first attempt. ``detail`` 0 shows everything: the full
    analysis and profile, the simulator's ranking of known orders with the two best sources, and
    the full source of the best and the last attempt (one line for every other); each level above
    shows less (1: one source of each kind; 2: no attempt source, the analysis' first lines;
    3: no analysis, the last four attempts), for a model with a small context window."""
    arg_names = target_arg_names(context.target_source, context.target_name)
    signature = f"{context.target_name}({', '.join(arg_names)})"
    history = context.history
    full = set()
    if history and detail < 2:
        full.add(history[-1].get("iteration"))
        if detail == 0 and context.best and context.best.get("kind") != "baseline":
            full.add(context.best.get("iteration"))
    variables = dict(
        context=context, hw=context.hardware, signature=signature, detail=detail,
        swizzle_args=list(zip(arg_names[1:], context.swizzle_args)),
        num_programs=math.prod(context.tile_grid), full_sources=full,
        evidence=context.evidence() if evidence and context.evidence else [],  # False: the ablation
        not_a_verdict=lessons.NOT_A_VERDICT,
    )
    return [{"role": "system", "content": render("system.j2", **variables)},
            {"role": "user", "content": render("propose.j2", **variables)}]


# --------------------------------------------------------------------------------------------
# The proposer
# --------------------------------------------------------------------------------------------

#: Tools offered to models whose server supports tool calls (OpenAI's ``tools`` protocol).
TOOLS = [
    {"type": "function", "function": {
        "name": "simulate",
        "description": "Check a candidate before proposing it: the static check, the permutation check "
                       "and the L2 simulator's predicted hit rate and DRAM bytes for this problem. "
                       "Costs no iteration.",
        "parameters": {"type": "object", "required": ["source"], "properties": {
            "source": {"type": "string", "description": "the complete @triton.jit function"}}}}},
    {"type": "function", "function": {
        "name": "analyze",
        "description": "The memory-access analysis of the kernel's current order (which tiles share "
                       "which data, per L2 domain).",
        "parameters": {"type": "object", "properties": {}}}},
]
#: What the prompt of each level of detail shows (``render_messages`` and prompts/propose.j2), most
#: first: the proposer takes the first level that fits the model's window with room for its reply.
DETAIL_SHOWN = {
    0: "everything: the memory-access analysis, the profile, 6 ranked catalog orders with 2 sources, "
       "the full source of the best and of the last attempt",
    1: "the memory-access analysis and the profile in full; 6 ranked orders with 1 source, the full source "
       "of the last attempt only",
    2: "the memory-access analysis cut to its first 15 lines and the profile to 4 figures, to fit the model's "
       "context window; 4 ranked orders with 1 source, no attempt's source, a shorter hardware section",
    3: "the memory-access analysis and the profile left out to fit the model's context window; 3 ranked "
       "orders with 1 source, the last 4 attempts, a shorter hardware section",
}
#: How much of the prompt is shown, most first.
DETAIL_LEVELS = tuple(DETAIL_SHOWN)


class LLMProposer:
    """Proposes rewrites of the target by asking a chat model; see the module docstring.

    Args:
        model: the model name the endpoint serves.
        max_parse_retries: extra requests after replies that cannot be used (unparseable, failing
            the static check, repeating an earlier order), each with the reason.
        max_tool_calls: tool calls a proposal may make (0: no tools offered).
        evidence: False leaves the simulator's ranking of known orders (and their sources) out of
            the prompt: the ablation that measures what the model proposes on its own.
        **settings: the rest of ``chat.ChatSettings`` (base_url, api_key, deadline_s,
            temperature, context_tokens, max_reply_tokens, retries, prices).
    """

    def __init__(self, model: str, max_parse_retries: int = 2, max_tool_calls: int = 3, evidence: bool = True,
                 **settings: Any) -> None:
        if max_parse_retries < 0:
            raise ValueError(f"max_parse_retries must be >= 0, got {max_parse_retries}")
        self.chat = ChatClient(ChatSettings(model=model, **settings))
        self.model = model
        self.max_parse_retries = max_parse_retries
        self.max_tool_calls = max_tool_calls
        self.evidence = evidence
        self.url = self.chat.url

    def describe(self) -> str:
        return self.chat.describe() + ("" if self.evidence else " (ranking evidence off)")

    # -- what a subclass changes: the prompt and the reply format ---------------------------------

    def messages(self, context: ProposalContext, detail: int = 0) -> list[dict]:
        """The system and user messages of a first attempt at ``detail`` (0: everything)."""
        return render_messages(context, detail, self.evidence)

    def parse(self, reply: str, context: ProposalContext) -> tuple[str, str, str]:
        """``(candidate text, rationale, name)``; raises ReplyParseError."""
        source, rationale = parse_reply(reply, context.target_name,
                                        target_arg_names(context.target_source, context.target_name))
        return source, rationale, "llm"

    def written(self, text: str, context: ProposalContext) -> str:
        """The text a candidate ``text`` is written as from here on (``canonical_target``: Python's
        reading of it, identifiers NFKC-normalised, without the reply's comments, layout and
        docstring beyond its summary line; a docstring copied from the baseline or a catalog order
        shown in the prompt onto other code replaced: ``shown_orders``): what the proposal carries,
        and so what is verified and written, so that the pending attempt in the record's
        checkpoints holds no more of the reply than the files do. ``text`` itself where it is not
        an acceptable rewrite target (the static check refuses it with the reason)."""
        try:
            return canonical_target(text, context.target_name,
                                    target_arg_names(context.target_source, context.target_name),
                                    others=self.shown_orders(context))
        except (CandidateError, SyntaxError, ValueError, RecursionError):
            return text

    def shown_orders(self, context: ProposalContext) -> list[str]:
        """The sources of orders the prompt shows with their docstrings, whose docstring a reply may
        copy onto other code: the baseline, and the catalog's ranked orders (none with
        ``evidence`` off: the model never saw them)."""
        ranked = context.evidence() if self.evidence and context.evidence else []
        return [context.target_source] + [e["source"] for e in ranked if isinstance(e.get("source"), str)]

    def fix_message(self, context: ProposalContext, error: str) -> str:
        arg_names = target_arg_names(context.target_source, context.target_name)
        return render("fix_reply.j2", error=error, context=context,
                      signature=f"{context.target_name}({', '.join(arg_names)})")

    # -- one proposal ----------------------------------------------------------------------------

    def propose(self, context: ProposalContext) -> Proposal:
        conversation = Conversation(self.chat)
        tools_left = self.max_tool_calls
        detail, base = self._fitted(context, conversation, TOOLS if tools_left > 0 else None)
        messages, sent, reasks, overflows = base, detail, 0, 0   # sent: the level of the messages
        while True:
            tools = TOOLS if tools_left > 0 else None
            try:
                exchange = conversation.ask(messages, tools=tools, reask=reasks, prompt_detail=sent)
            except ContextOverflow:
                overflows += 1
                if overflows > 2:
                    raise conversation.error(f"the prompt does not fit the context window of "
                                             f"{self.chat.window()} tokens even when shortened") from None
                detail, base = self._fitted(context, conversation, tools)
                messages, sent = base, detail
                continue
            if exchange.tool_calls and tools_left > 0:
                messages = self._with_tool_results(messages, exchange, context, tools_left)
                tools_left -= len(exchange.tool_calls)
                if not self.chat.fits(messages, TOOLS if tools_left > 0 else None):
                    messages, sent, tools_left = base, detail, 0
                continue
            try:
                text, rationale, name = self.parse(exchange.reply, context)
            except ReplyParseError as exc:
                reason = str(exc)
                if exchange.finish_reason == "length":
                    reason = (f"the reply was cut at the {exchange.max_tokens}-token limit before it was "
                              f"complete ({reason}): answer with the code block first and keep the "
                              f"rationale to two sentences")
            else:   # a secret of ours in it (a server that echoes the API key): refused, never written
                written = self.written(text, context)   # what reaches files and the record, if accepted
                reason = secret_refusal(text) or secret_refusal(written) or _prechecked(context, text)
                if not reason:  # the cheap checks passed: worth an iteration
                    return Proposal(source=written, rationale=redact(rationale), name=redact(name),
                                    **conversation.totals(), exchanges=conversation.transcript())
            exchange.rejected = reason
            if tools_left > 0 and _tool_call_as_text(exchange.reply):
                exchange.rejected = "a tool call written as text: the server does not support tool calls"
                self.max_tool_calls = tools_left = 0
                detail, base = self._fitted(context, conversation)   # the tools' tokens are free again
                messages, sent = base, detail
                continue
            reasks += 1  # costs a re-ask, not an iteration
            if reasks > self.max_parse_retries:
                raise conversation.error(f"no usable reply after {reasks} attempts: {reason}; the last reply "
                                         f"began: {untrusted.preview(exchange.reply)}") from None
            sent, messages = self._reask(context, detail, exchange, reason, conversation, tools)

    def _fitted(self, context: ProposalContext, conversation: Conversation,
                tools: list | None = None) -> tuple[int, list[dict]]:
        """``(detail, messages)``: the first level of detail whose messages, with the ``tools``
        offered beside them (the chat template renders them into the prompt), fit the window with
        room for the reply."""
        for detail in DETAIL_LEVELS:
            messages = self.messages(context, detail)
            if self.chat.fits(messages, tools):
                return detail, messages
        raise conversation.error(
            f"even the shortest prompt (about {self.chat.estimate_tokens(messages, tools)} tokens) leaves no room "
            f"for a {self.chat.reply_floor()}-token reply in the model's {self.chat.window()}-token window "
            f"({self.chat.window_source}): serve the model with a larger context, or give --context-tokens")

    def _reask(self, context: ProposalContext, detail: int, exchange, reason: str,
               conversation: Conversation, tools: list | None = None) -> tuple[int, list]:
        """``(level, messages)``: the first messages, the reply (cut to what fits beside the
        ``tools`` offered) and what was wrong with it; at a lower level of detail (``level``, the
        one sent) where the window asks for it, the reply left out last."""
        fix = {"role": "user", "content": self.fix_message(context, reason)}
        reply = exchange.reply
        block = CLOSED_CODE_BLOCK.search(reply or "")
        # the whole reply; else its code block alone (the line the reason names is in it: a tail cut
        # to 400 characters once showed the model only its closing sentence, 2026-12-07); else its end
        shown_forms = [reply if len(reply) <= MAX_REPLY_SHOWN else "..." + reply[-MAX_REPLY_SHOWN:]]
        if block and block.group(0) != reply and len(block.group(0)) <= MAX_REPLY_SHOWN:
            shown_forms.append(block.group(0))
        shown_forms += ["..." + reply[-limit:] for limit in (1500, 400) if limit < len(reply)]
        for level in [d for d in DETAIL_LEVELS if d >= detail]:
            base = self.messages(context, level)
            for shown in shown_forms:
                messages = base + [{"role": "assistant", "content": shown}, fix]
                if shown and self.chat.fits(messages, tools):
                    return level, messages
            merged = base[:-1] + [{"role": "user", "content": base[-1]["content"] + "\n\n" + fix["content"]}]
            if self.chat.fits(merged, tools):
                return level, merged
        raise conversation.error(f"no room in the model's {self.chat.window()}-token window to say why "
                                 f"the reply could not be used: {reason}")

    def _with_tool_results(self, messages: list, exchange, context: ProposalContext, budget: int) -> list:
        """``messages``, the model's tool calls and each call's answer; at most ``budget`` calls run.
        A call that cannot run (an unknown tool, arguments that are not a JSON object, a missing
        or mistyped argument, a call over the budget) is answered with why, in one line that the
        exchange keeps with the call (``rejected``) and, for all of them, in ``exchange.rejected``."""
        calls = [{"id": c["id"], "type": "function",
                  "function": {"name": c["name"], "arguments": c["arguments"]}} for c in exchange.tool_calls]
        out = messages + [{"role": "assistant", "content": exchange.reply or None, "tool_calls": calls}]
        refused = []
        for i, call in enumerate(exchange.tool_calls):
            if i < budget:
                answer, reason = self._run_tool(call["name"], call["arguments"], context)
            else:
                answer, reason = "", (f"not run: over the {self.max_tool_calls} tool calls a proposal may make "
                                      f"(this reply made {len(exchange.tool_calls)})")
            if reason is not None:
                call["rejected"] = reason = reason_line(reason)
                refused.append(reason_line(f"{call['id']}: {reason}"))
                answer = json.dumps({"error": reason})
            out.append({"role": "tool", "tool_call_id": call["id"], "content": answer})
        if refused:
            exchange.rejected = reason_line(f"{len(refused)} of {len(exchange.tool_calls)} tool call(s) refused: "
                                            + "; ".join(refused), 4 * MAX_TOOL_REASON_CHARS)
        return out

    def _run_tool(self, name: str, arguments: str, context: ProposalContext) -> tuple[str, str | None]:
        """``(answer, None)``: the tool's answer as text (JSON); or ``("", why)``: the call cannot run
        (its reason, in words the model can act on)."""
        if not name:   # a call that named no tool (#41): kept by the client so that the model is told
            return "", "a tool call with no tool name: the tools are simulate and analyze"
        if name not in ("simulate", "analyze"):
            return "", f"no tool {_quoted(name)}: the tools are simulate and analyze"
        values, reason = _tool_arguments(name, arguments)
        if reason is not None:
            return "", reason
        if name == "analyze":
            return context.analysis, None
        if context.simulate is None:
            return "", "simulate is not available in this run: answer with the function"
        if "source" not in values:
            given = ", ".join(_quoted(k, 40) for k in list(values)[:5])
            return "", (f'simulate needs the argument "source" (the complete @triton.jit function as text), '
                        f"got {'only ' + given if given else 'no arguments'}")
        source = values["source"]
        if not isinstance(source, str):
            return "", (f'the argument "source" of simulate must be a string (the function\'s text), '
                        f"got {_json_type(source)}")
        blocks = code_blocks(source[:wire.MAX_TEXT_CHARS])
        source = textwrap.dedent(blocks[0].body) if blocks else source
        try:
            parse_code(source)  # within the limits before any checker sees it
        except ReplyParseError as exc:
            return "", f'the argument "source" of simulate: {exc}'
        secret = secret_refusal(source) or secret_refusal(self.written(source, context))
        if secret:
            return "", f'the argument "source" of simulate: {secret}'
        return json.dumps(context.simulate(source), default=str), None


def reason_line(text: str, limit: int = MAX_TOOL_REASON_CHARS) -> str:
    """``text`` as one line for the transcript, the record and the model: secrets masked
    (``redact``, before anything is cut, so no part of one is left), every character that is not
    printable (a newline, an escape sequence, a NUL) written as its escape, at most ``limit``
    characters."""
    text = redact(text[:limit * 8])
    text = "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _quoted(text: str, limit: int = 60) -> str:
    """What a model sent, quoted in a reason: its secrets masked first, then cut (``untrusted.preview``)."""
    return untrusted.preview(redact(text[:limit * 8]), limit)


def _json_type(value: Any) -> str:
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", int: "a number",
             float: "a number", type(None): "null"}
    return names.get(type(value), type(value).__name__)


def _tool_arguments(name: str, arguments: str | None) -> tuple[dict, str | None]:
    """``(arguments, None)``: a tool call's arguments as a JSON object (none given: ``{}``); or
    ``({}, why)`` when they are not one."""
    if not (arguments or "").strip():
        return {}, None
    try:
        values = untrusted.loads(arguments, f"the arguments of {name}")
    except untrusted.UntrustedInput as exc:
        said = str(exc).rpartition("; received: ")[0] or str(exc)   # quoted again below, secrets masked
        return {}, f"{said}; received: {_quoted(arguments)}"
    if values is None:
        return {}, None
    if not isinstance(values, dict):
        shape = ' {"source": "<the function>"}' if name == "simulate" else ""
        return {}, (f"the arguments of {name} must be a JSON object{shape}, got {_json_type(values)}; "
                    f"received: {_quoted(arguments)}")
    return values, None


def _prechecked(context: ProposalContext, text: str) -> str | None:
    """``context.precheck(text)``: why the candidate is not worth an iteration, or None. A
    candidate that exhausts the checker's recursion or memory is refused with that reason (parse
    limits make it rare; a model's text must never end the run)."""
    if context.precheck is None:
        return None
    try:
        return context.precheck(text)
    except (RecursionError, MemoryError) as exc:
        return f"the candidate is too deeply nested or too large to check ({type(exc).__name__})"


def _tool_call_as_text(reply: str) -> bool:
    """A reply that writes a tool call as text (the server passed the tools to the model but does
    not turn its answer into ``tool_calls``)."""
    return bool(re.search(r"<tool_call>|\"name\"\s*:\s*\"(simulate|analyze)\"", reply or ""))
