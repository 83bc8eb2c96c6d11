"""Bounded readers of what servers and models send (#21): JSON depth and integer size, Python source
size, depth and literals, each refused in one line that quotes what was received; linear time."""
from __future__ import annotations

import json
import time

import pytest

from swizzleperf.sandbox import untrusted


@pytest.mark.parametrize("text, expected", [
    ("[" * 100_000 + "]" * 100_000, "nests 100000 levels deep"),
    ('{"a": ' * 40 + "1" + "}" * 40, "nests 40 levels deep"),
    ('{"n": ' + "9" * 5000 + "}", "an integer of 5000 digits"),
    ('{"n": 100000000000000000000000}', "an integer of 24 digits"),
    ('{"n": 1e999}', "a number out of range"),
    ('{"n": NaN}', "NaN is not a JSON number"),
    ('{"n": -Infinity}', "-Infinity is not a JSON number"),
    ("{not json", "is not JSON: Expecting property name"),
    (b"\xff\xfe", "is not UTF-8"),
])
def test_json_beyond_bounds_is_one_line_quoting_what_came(text, expected):
    with pytest.raises(untrusted.UntrustedInput) as info:
        untrusted.loads(text, "the body")
    message = str(info.value)
    assert expected in message and "received: " in message and "\n" not in message
    assert len(message) < 600  # the first 200 characters, not the whole body


@pytest.mark.parametrize("text", ['{"a": [1, {"b": "]]]]{{{{"}], "n": -12, "x": 1.5e3}', "[]", '"[[[["'])
def test_json_within_bounds_loads_as_json_does(text):
    assert untrusted.loads(text, "the body") == json.loads(text)


def test_depth_counts_brackets_outside_strings_only():
    assert untrusted.json_depth('{"a": "' + "[" * 1000 + '"}') == 1
    assert untrusted.json_depth('{"a": "\\"[[[[", "b": [[[]]]}' + " " * 40) == 4


@pytest.mark.parametrize("code, expected", [
    ("def swizzle(pid):\n    return " + " + ".join(["pid"] * 2500) + "\n", "more than 64 levels deep"),
    ("def swizzle(p):\n    return " + "+".join(["p"] * 9000) + "\n", "nest"),
    ("def swizzle(pid):\n    return pid + " + "9" * 3600 + "\n", "integer literal of 11959 bits"),
    ("def swizzle(pid):\n    return pid + 0x" + "f" * 5000 + "\n", "integer literal of 20000 bits"),
    ("@" + ".".join(["a"] * 3000) + "\ndef swizzle(pid):\n    return pid\n", "nest"),
    ("@" + "f(" * 100 + ")" * 100 + "\ndef swizzle(pid):\n    return pid\n", "more than 64 levels deep"),
    ('def swizzle(pid):\n    """' + "x" * 5000 + '"""\n    return pid\n', "a string of 5000 characters"),
    ("def swizzle(pid):\n" + "    x = pid\n" * 3000, "characters, more than the 20000"),
    ("def swizzle(pid):\n" + "    x = pid\n" * 1500, "more than 5000 syntax nodes"),
])
def test_hostile_functions_are_refused_before_anything_recurses(code, expected):
    start = time.process_time()
    with pytest.raises(untrusted.UntrustedInput, match=expected):
        untrusted.parse_python(code)
    assert time.process_time() - start < 2.0


def test_an_ordinary_function_parses():
    tree = untrusted.parse_python("@triton.jit\ndef swizzle(pid, m, n):\n    return pid // n, pid % n\n")
    assert tree.body[0].name == "swizzle"
    with pytest.raises(SyntaxError):
        untrusted.parse_python("def f(:\n")


def test_preview_is_the_first_200_characters_as_a_literal():
    assert untrusted.preview("a" * 500) == repr("a" * 200) + " ..."
    assert untrusted.preview(b"\xff" + b"x" * 10) == repr("\\xff" + "x" * 10)
    assert untrusted.preview("short") == "'short'"
