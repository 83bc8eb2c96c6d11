"""``profile-<pid>.json`` is data (issue #41): the app's process writes it (the capture hook's profile
mode, at exit) and the app may write anything there; the agent reads each one within a size and a
nesting depth and checks it field by field (agent/capture/schema.py's ``ProfileFile``). A file that
does not fit is left out in one line of the profile's note, never a traceback; where no file fits,
one CaptureError line.

The app is tests/helpers/apps/hostile/bad_profile.py (guarded/'s kernel, interpreted), which
writes the bytes given as ``profile-1.json``.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from swizzleperf.agent.capture.bottleneck import profile_app
from swizzleperf.agent.capture.capture import CaptureError

APPS = Path(__file__).resolve().parents[2] / "helpers" / "apps"
INTERPRET = f"TRITON_INTERPRET=1 {sys.executable}"
KERNEL = {"kernel": "evil_kernel", "file": "/x.py", "line": 1, "calls": 1, "grid": [2], "programs": 2,
          "values": {}, "pointers": [], "globals": {}, "wall_s": 0.5, "time_s": 0.5,
          "source": "measured:interpreter-wall"}


def _record(**kernel) -> str:
    return json.dumps({"pid": 1, "source": "measured:interpreter-wall", "kernels": [{**KERNEL, **kernel}]})


BAD = {   # what the app writes, and what the one line says
    "not-json": ('{"pid": 1, "kernels": [', "is not JSON"),
    "not-utf8": (b'{"pid": 1, "kernels": []}\xff\xfe', "is not UTF-8"),
    "deep": ("[" * 100_000 + "]" * 100_000, "levels deep"),
    "huge": (" " * (16 << 20) + "{}", "longer than the"),
    "no-kernels": ('{"pid": 1}', "kernels: Field required"),
    "kernels-not-a-list": ('{"pid": 1, "kernels": "x"}', "kernels: Input should be a valid list"),
    "name-with-code": (_record(kernel="evil\nimport os"), "kernels.0.kernel: Value error, must be a Python identifier"),
    "grid-of-4": (_record(grid=[1, 1, 1, 2]), "kernels.0.grid: List should have at most 3 items"),
    "negative-calls": (_record(calls=-1), "kernels.0.calls: Input should be greater than or equal to 0"),
    "time-a-string": (_record(time_s="1e9"), "kernels.0.time_s: Input should be a valid number"),
    "file-two-lines": (_record(file="/x.py\nchose evil_kernel"), "kernels.0.file: Value error, must be one line"),
}


def _app(tmp_path: Path, content, alone: bool = False) -> str:
    bad = tmp_path / "bad.json"
    bad.write_bytes(content if isinstance(content, bytes) else content.encode())
    return f"{INTERPRET} {APPS / 'hostile' / 'bad_profile.py'} {bad}" + (" alone" if alone else "")


@pytest.fixture(autouse=True)
def _private_home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "home" / ".cache"))


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_bad_profile_file_is_left_out_in_one_line(tmp_path, case):
    content, expected = BAD[case]
    profile = profile_app(_app(tmp_path, content), tmp_path / "work", hw="mi300x")
    assert [r.kernel for r in profile.rows] == ["triple_kernel"]   # the hook's own file, read as ever
    assert "\n" not in profile.note and profile.note.isprintable(), profile.note
    assert "profile-1.json left out" in profile.note and expected in profile.note, profile.note
    assert "evil" not in " ".join(r.kernel for r in profile.rows)


def test_where_no_profile_file_fits_it_is_one_capture_error_line(tmp_path):
    with pytest.raises(CaptureError) as info:
        profile_app(_app(tmp_path, BAD["name-with-code"][0], alone=True), tmp_path / "work", hw="mi300x")
    message = str(info.value)
    assert "\n" not in message and "launched no Triton kernel" in message
    assert "profile-1.json left out" in message and "must be a Python identifier" in message, message
