"""The fixture the box's tests share."""
from __future__ import annotations

import pytest

from swizzleperf import sandbox


@pytest.fixture(params=["mounts", "landlock"])
def how(request, monkeypatch):
    """Each way the box keeps a command to its folders (skipped where this machine lacks it);
    Landlock by switching the mount path off."""
    if request.param == "mounts" and sandbox.filesystem_isolation()[0] != "mounts":
        pytest.skip(f"no read-only mounts here: {sandbox.filesystem_isolation()[1]}")
    if request.param == "landlock":
        works, why = sandbox._landlock()
        if not works:
            pytest.skip(f"no Landlock here: {why}")
        monkeypatch.setattr(sandbox, "filesystem_isolation", lambda: ("landlock", "forced by the test"))
    return request.param
