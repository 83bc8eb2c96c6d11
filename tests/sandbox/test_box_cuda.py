"""The box and CUDA (sandbox/__init__.py's _cuda_in_box): a way of making the file system read-only
that keeps CUDA from starting (an H100, 2026-12-06: 'cudaGetDeviceCount ... Error 304: OS call
failed' in every boxed verification worker) is not taken; the next one is, or none, with why."""
from __future__ import annotations

import pytest

from swizzleperf import sandbox


@pytest.fixture
def gpu_here(monkeypatch):
    """A machine whose driver answers "0 1" (cuInit fine, one device) outside the box; inside, the
    mounts box breaks CUDA and Landlock does not."""
    monkeypatch.setattr(sandbox, "_cuda_outside", lambda: ["0", "1"])

    def probe(options, code, *args):
        if code == sandbox._PROBE_CUDA:
            return (["304", "0"] if options["fs"] == "mounts" else ["0", "1"]), ""
        return ["1", "1"], ""
    monkeypatch.setattr(sandbox, "_probe", probe)
    monkeypatch.setattr(sandbox, "_writes_probe", lambda how: (True, ""))
    monkeypatch.setattr(sandbox, "isolation", lambda: (True, ""))
    monkeypatch.setattr(sandbox, "_landlock", lambda: (True, ""))
    sandbox.filesystem_isolation.cache_clear()
    yield
    sandbox.filesystem_isolation.cache_clear()


def test_a_box_that_keeps_cuda_from_starting_is_not_taken(gpu_here):
    works, why = sandbox._cuda_in_box("mounts")
    assert not works and "cuInit / cuDeviceGetCount gave 304 0; outside it 0 1" in why
    assert sandbox._cuda_in_box("landlock") == (True, "")
    how, why = sandbox.filesystem_isolation()
    assert how == "landlock" and why.startswith("no read-only mounts: CUDA does not start in the box made by mounts")


def test_where_neither_keeps_cuda_the_box_is_none_and_says_why(gpu_here, monkeypatch):
    monkeypatch.setattr(sandbox, "_probe", lambda options, code, *args: (["304", "0"], ""))
    how, why = sandbox.filesystem_isolation()
    assert how == "none" and "CUDA does not start in the box made by landlock" in why


@pytest.mark.parametrize("outside", [None, ["nolib"], ["100", "0"], ["0", "0"]])
def test_without_a_working_gpu_outside_nothing_is_checked(monkeypatch, outside):
    monkeypatch.setattr(sandbox, "_cuda_outside", lambda: outside)
    monkeypatch.setattr(sandbox, "_probe", lambda *a: pytest.fail("no probe without a GPU"))
    assert sandbox._cuda_in_box("mounts") == (True, "")
