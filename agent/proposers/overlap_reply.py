"""Parsing a model's reply to a distributed prompt into a configuration (JSON text).

The reply holds one ```json block with the configuration object and, optionally, one
```python block with a new ``@triton.jit`` tile-order function; the function's source goes into
the configuration as ``"swizzle"``. The configuration's *shape* is checked here
(agent/distributed/config.py ``load``: JSON within bounds, ``pattern`` text, scalar knobs), so a reply of
another shape is told to the model; what the kernel allows (knobs, values, their types,
constraints) is the evaluator's to check, so that a value outside the space is a recorded
OUTSIDE_SPACE verdict with the allowed values named, not a parse error. Every step is linear in
the reply's length.
"""
from __future__ import annotations

import json
import re

from swizzleperf.agent.distributed import config as dist_config
from swizzleperf.agent.proposers.llm import ReplyParseError, check_reply_size, code_blocks, parse_reply

_BRACES = re.compile(r"[{}]")


def parse_overlap_reply(text: str, target_name: str, arg_names: list[str]) -> tuple[str, str]:
    """``(configuration JSON text, rationale)`` from a model's reply.

    Raises:
        ReplyParseError: no JSON object, JSON that does not parse, is too deep or holds an integer
            of more than 18 digits, is not an object, has no ``pattern`` or a field of the wrong
            shape, or a python block that is not exactly the tile-order function (the message says
            which, and what was expected; it goes back to the model).
    """
    if not text or not text.strip():
        raise ReplyParseError('the reply is empty: expected one ```json block with a configuration '
                              'object, e.g. {"pattern": "...", ...}')
    check_reply_size(text, "one ```json block with a configuration object")
    blocks = code_blocks(text)
    json_blocks = [b for b in blocks if b.language.lower().startswith("json")]
    raw = json_blocks[-1].body if json_blocks else _bare_object(text)
    try:
        body = dist_config.load(raw)
    except dist_config.ConfigError as exc:
        message = str(exc).replace("the configuration is not JSON", "the ```json block does not parse", 1)
        raise ReplyParseError(message) from None
    if any(b.language.lower() in ("python", "py", "python3") for b in blocks) and f"def {target_name}" in text:
        source, _ = parse_reply(text, target_name, arg_names)
        body["swizzle"] = source
    rationale = _outside(text, blocks).strip()
    return json.dumps(body), rationale


def _outside(text: str, blocks: list) -> str:
    """``text`` without its fenced blocks."""
    parts, position = [], 0
    for block in blocks:
        parts.append(text[position:block.start])
        position = block.end
    parts.append(text[position:])
    return "".join(parts)


def _bare_object(text: str) -> str:
    """The first ``{ ... }`` of a reply without a ```json fence (a model that skipped it)."""
    start = text.find("{")
    if start < 0:
        raise ReplyParseError('no ```json block and no JSON object in the reply: expected '
                              '```json {"pattern": "...", ...} ```')
    depth = 0
    for brace in _BRACES.finditer(text, start):
        depth += 1 if brace.group() == "{" else -1
        if depth == 0:
            return text[start:brace.end()]
    raise ReplyParseError("the JSON object in the reply is not closed (a cut reply?)")
