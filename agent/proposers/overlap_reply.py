"""Parsing a model's reply to a distributed prompt into a configuration (JSON text).

The reply holds one ```json block with the configuration object and, optionally, one
```python block with a new ``@triton.jit`` tile-order function; the function's source goes into
the configuration as ``"swizzle"``. What the kernel allows (knobs, values, constraints) is the
evaluator's to check, so that a value outside the space is a recorded OUTSIDE_SPACE verdict with
the allowed values named, not a parse error.
"""
from __future__ import annotations

import json
import re

from swizzleperf.agent.proposers.llm import ReplyParseError, parse_reply

_JSON_FENCE = re.compile(r"^[ \t]*```[ \t]*json[^\n]*\n(.*?)^[ \t]*```[ \t]*$", re.M | re.S | re.I)
_ANY_FENCE = re.compile(r"^[ \t]*```[^\n]*\n.*?^[ \t]*```[ \t]*$", re.M | re.S)


def parse_overlap_reply(text: str, target_name: str, arg_names: list[str]) -> tuple[str, str]:
    """``(configuration JSON text, rationale)`` from a model's reply.

    Raises:
        ReplyParseError: no JSON object, JSON that does not parse or is not an object, no
            ``pattern``, or a python block that is not exactly the tile-order function (the
            message says which, and what was expected; it goes back to the model).
    """
    if not text or not text.strip():
        raise ReplyParseError('the reply is empty: expected one ```json block with a configuration '
                              'object, e.g. {"pattern": "...", ...}')
    blocks = _JSON_FENCE.findall(text)
    raw = blocks[-1] if blocks else _bare_object(text)
    try:
        body = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ReplyParseError(f"the ```json block does not parse: {exc.msg} (line {exc.lineno}, "
                              f"column {exc.colno})") from None
    if not isinstance(body, dict):
        raise ReplyParseError(f"the ```json block must hold one object, found a {type(body).__name__}")
    if "pattern" not in body:
        raise ReplyParseError('the configuration has no "pattern": every candidate names its pattern')
    if f"def {target_name}" in text and "```python" in text.lower():
        source, _ = parse_reply(text, target_name, arg_names)
        body["swizzle"] = source
    rationale = _ANY_FENCE.sub("", text).strip()
    return json.dumps(body), rationale


def _bare_object(text: str) -> str:
    """The first ``{ ... }`` of a reply without a ```json fence (a model that skipped it)."""
    start = text.find("{")
    if start < 0:
        raise ReplyParseError('no ```json block and no JSON object in the reply: expected '
                              '```json {"pattern": "...", ...} ```')
    depth = 0
    for i, char in enumerate(text[start:], start):
        depth += {"{": 1, "}": -1}.get(char, 0)
        if depth == 0:
            return text[start:i + 1]
    raise ReplyParseError("the JSON object in the reply is not closed (a cut reply?)")
