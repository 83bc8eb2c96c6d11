"""The configuration of a distributed kernel that a proposer writes (JSON text), checked in two steps:

- ``load``: its *shape*, whatever the kernel: JSON within ``untrusted``'s bounds (depth, integer
  size), one object whose ``pattern`` is text, ``swizzle`` text or absent, every other key a knob
  name with one scalar value (text, integer, number or boolean); a swizzle source within the
  limits of a model-written function. A reply of another shape is a parse error the model is told.
- ``in_space``: its place in one kernel's space (``spec.patterns``, ``spec.knobs``): the pattern is
  one of the kernel's, every knob is declared, and every value is one of the allowed values *of the
  same type*: ``32.0`` is not the integer ``32`` and ``true`` is not ``1`` (Python's ``==`` says
  they are), so a knob of the wrong type is OUTSIDE_SPACE, never run.

agent/distributed/evaluator.py turns the result into a ``DistCandidate``; this module imports nothing of the
agent but ``untrusted``.
"""
from __future__ import annotations

from typing import Annotated, Any, Optional, Union

import pydantic
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictInt, StrictStr

from swizzleperf.sandbox import untrusted

#: Characters of a configuration: the knobs plus a swizzle source of ``untrusted.MAX_SOURCE_CHARS``
#: escaped into JSON (newlines and quotes double).
MAX_CONFIG_CHARS = 3 * untrusted.MAX_SOURCE_CHARS
#: Characters of a pattern, knob name or text value (the longest pattern name is 21).
MAX_NAME_CHARS = 64
#: Knobs one configuration may set (the kernels declare at most 9).
MAX_KNOBS = 64

Name = Annotated[StrictStr, Field(min_length=1, max_length=MAX_NAME_CHARS)]
Scalar = Union[StrictBool, StrictInt, StrictFloat, Annotated[StrictStr, Field(max_length=MAX_NAME_CHARS)]]


class ConfigError(ValueError):
    """The text is not a configuration (not JSON, not an object, a field of the wrong shape)."""


class OutsideSpaceError(ValueError):
    """A well-formed configuration outside the kernel's space; the message names the allowed values."""


class Shape(BaseModel):
    """A configuration's shape: ``pattern``, an optional ``swizzle``, scalar knobs."""

    model_config = ConfigDict(extra="allow", strict=True)
    __pydantic_extra__: dict[Name, Scalar] = Field(init=False)

    pattern: Name
    swizzle: Optional[Annotated[StrictStr, Field(max_length=MAX_CONFIG_CHARS)]] = None


def load(text: str) -> dict:
    """The configuration ``text`` as a dict (``pattern``, knobs, ``swizzle`` when given), its shape
    checked (see the module docstring).

    Raises:
        ConfigError: one line saying what is wrong, quoting the first 200 characters received.
    """
    if not isinstance(text, str):
        raise ConfigError(f"the configuration must be JSON text, got {type(text).__name__}")
    try:
        body = untrusted.loads(text, "the configuration", max_chars=MAX_CONFIG_CHARS)
    except untrusted.UntrustedInput as exc:
        raise ConfigError(str(exc)) from None
    if not isinstance(body, dict):
        raise ConfigError(f"the configuration must be a JSON object, got {_kind(body)}; received: "
                          f"{untrusted.preview(text)}")
    if "pattern" not in body:
        raise ConfigError('the configuration has no "pattern": every candidate names its pattern')
    if len(body) > MAX_KNOBS + 2:
        raise ConfigError(f"the configuration sets {len(body) - 1} keys, more than the {MAX_KNOBS} allowed")
    try:
        shape = Shape.model_validate(body)
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        key = str(first["loc"][0]) if first["loc"] else "a key"
        raise ConfigError(f"{key!r} must be {_expected(key)}, got {_describe(body.get(key, first.get('input')))}; "
                          f"received: {untrusted.preview(text)}") from None
    out = {"pattern": shape.pattern, **(shape.__pydantic_extra__ or {})}
    if shape.swizzle is not None:
        if "def " in shape.swizzle:
            _check_source(shape.swizzle)
        elif len(shape.swizzle) > MAX_NAME_CHARS:
            raise ConfigError(f"'swizzle' must be {_expected('swizzle')}: got {len(shape.swizzle)} characters "
                              f"without a `def`; received: {untrusted.preview(text)}")
        out["swizzle"] = shape.swizzle
    return out


def in_space(body: dict, spec) -> tuple[str, dict, str | None]:
    """``(pattern, knobs, swizzle)`` of a loaded configuration, checked against ``spec.patterns``
    and ``spec.knobs`` (exact types).

    Raises:
        OutsideSpaceError: an unknown pattern or knob, or a value (or a value's type) not allowed.
    """
    body = dict(body)
    pattern = body.pop("pattern", None)
    if not _allowed(pattern, spec.patterns):
        raise OutsideSpaceError(f"pattern must be one of {', '.join(spec.patterns)}, got {_describe(pattern)}")
    swizzle = body.pop("swizzle", None)
    meta = {}
    for knob, value in body.items():
        allowed = spec.knobs.get(knob)
        if allowed is None or knob in ("pattern", "swizzle"):
            known = ", ".join(k for k in spec.knobs if k not in ("pattern", "swizzle"))
            raise OutsideSpaceError(f"unknown knob {knob!r}: the knobs of {spec.name} are {known}")
        if not _allowed(value, allowed):
            types = sorted({_kind(a) for a in allowed})
            raise OutsideSpaceError(f"{knob} must be one of {', '.join(map(str, allowed))}, got {_describe(value)}"
                                    + (f" ({_kind(value)}, not {' or '.join(types)})" if _kind(value) not in types
                                       else ""))
        meta[knob] = value
    return pattern, meta, swizzle


def parse(text: str, spec) -> tuple[str, dict, str | None]:
    """``load`` then ``in_space``; raises ConfigError or OutsideSpaceError."""
    return in_space(load(text), spec)


def _allowed(value: Any, allowed) -> bool:
    """``value`` is one of ``allowed`` with the same type (``True`` is not ``1``, ``32.0`` not ``32``)."""
    return any(type(value) is type(a) and value == a for a in allowed)


def _check_source(source: str) -> None:
    try:
        untrusted.parse_python(source, "the swizzle source")
    except SyntaxError:
        return  # the static check of the rewrite target says where (agent/verification/candidate.py)
    except untrusted.UntrustedInput as exc:
        raise ConfigError(str(exc)) from None


def _expected(key: str) -> str:
    if key == "pattern":
        return f"the name of a pattern (text of 1 to {MAX_NAME_CHARS} characters)"
    if key == "swizzle":
        return (f"a catalog name (at most {MAX_NAME_CHARS} characters) or the source of a @triton.jit function "
                f"(at most {MAX_CONFIG_CHARS} characters)")
    return (f"a knob name of at most {MAX_NAME_CHARS} characters with one value: an integer, a number, "
            f"true/false or a short text")


def _kind(value: Any) -> str:
    return {bool: "boolean", int: "integer", float: "number with a fraction", str: "text",
            list: "list", dict: "object", type(None): "null"}.get(type(value), type(value).__name__)


def _describe(value: Any) -> str:
    """A value for a message: its repr cut to 60 characters, and its kind."""
    text = repr(value) if not isinstance(value, (list, dict)) else f"a {_kind(value)}"
    return text if len(text) <= 60 else text[:57] + "..."
