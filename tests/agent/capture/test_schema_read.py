"""agent/capture/schema.py's ``read`` (``launch.json``, ``seen-<pid>.json``, ``lift.json``; the app
writes the first two and may write anything there, issue #41): each file is read within
``MAX_FILE_BYTES`` (sandbox/untrusted.py's ``read_bounded``, never its whole length after a size
check) and ``MAX_JSON_DEPTH`` before ``json.loads``; what does not fit is one CaptureError line."""
from __future__ import annotations

import os

import pytest

from swizzleperf.agent.capture import schema
from swizzleperf.agent.capture.schema import CaptureError, LaunchFile, LiftFile, read, read_seen
from swizzleperf.sandbox.untrusted import MAX_JSON_DEPTH


def _one_line(exc_info, *parts):
    text = str(exc_info.value)
    assert "\n" not in text and len(text) < 400, text
    assert all(p in text for p in parts), text


@pytest.mark.parametrize("model", [LaunchFile, LiftFile, None])
def test_a_huge_file_is_refused_in_one_line(tmp_path, model):
    path = tmp_path / "launch.json"
    with open(path, "wb") as handle:   # sparse: 64 GiB that a whole read would take
        handle.truncate(64 << 30)
    with pytest.raises(CaptureError) as exc_info:
        read_seen(path) if model is None else read(path, model)
    _one_line(exc_info, str(path), f"longer than the {schema.MAX_FILE_BYTES} bytes")


def test_a_file_whose_size_says_nothing_is_read_only_to_the_bound(tmp_path):
    """A size check passes a file that grows after it (or one with no size: /dev/zero, 0 bytes by
    ``stat``, endless to read); the bounded read stops at ``MAX_FILE_BYTES`` all the same, and a link
    the app left (here to /dev/zero) is not followed at all (#41, round thirteen)."""
    if not os.path.exists("/dev/zero"):
        pytest.skip("no /dev/zero")
    path = tmp_path / "seen-1.json"
    path.symlink_to("/dev/zero")
    assert path.stat().st_size == 0
    with pytest.raises(CaptureError) as exc_info:
        read_seen(path)
    _one_line(exc_info, str(path), "symbolic link")


def test_a_deep_json_is_refused_in_one_line_before_it_is_parsed(tmp_path):
    path = tmp_path / "seen-1.json"
    path.write_text("[" * 200_000 + "]" * 200_000)
    with pytest.raises(CaptureError) as exc_info:
        read_seen(path)
    _one_line(exc_info, str(path), "200000 levels deep", f"more than the {MAX_JSON_DEPTH}")


def test_just_within_the_depth_it_is_parsed_and_checked(tmp_path):
    path = tmp_path / "seen-1.json"
    path.write_text('{"k": ' + "[" * (MAX_JSON_DEPTH - 1) + "]" * (MAX_JSON_DEPTH - 1) + "}")
    with pytest.raises(CaptureError) as exc_info:   # within the depth: the schema says what is wrong
        read_seen(path)
    _one_line(exc_info, "is not a capture file swizzleperf wrote", "k: Input should be a valid integer")


@pytest.mark.parametrize("content, says", [(b'{"a": 1}\xff\xfe', "is not a readable capture file"),
                                           (b'{"a": ', "is not a readable capture file")])
def test_not_utf8_or_not_json_is_one_line(tmp_path, content, says):
    path = tmp_path / "seen-1.json"
    path.write_bytes(content)
    with pytest.raises(CaptureError) as exc_info:
        read_seen(path)
    _one_line(exc_info, str(path), says)


def test_a_fitting_file_is_read(tmp_path):
    path = tmp_path / "seen-1.json"
    path.write_text('{"add_kernel": 3, "matmul_kernel": 1}')
    assert read_seen(path) == {"add_kernel": 3, "matmul_kernel": 1}
