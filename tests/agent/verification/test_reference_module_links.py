"""verify.reference_module writes the kernel as the run read it into the candidates folder: a link
planted at ``reference_<kernel>`` was written through (a dangling one created its target outside
the folder) or, pointing at a file, taken as the reference; a named pipe there was handed to the
worker, which waits on it for ever. The name is replaced now, as every file a run writes (#41)."""
from __future__ import annotations


import pytest
from hang_guard import never_blocks
from planted import PLANTED_KINDS, plant

from swizzleperf.agent.verification.verify import reference_module

MODULE = "import triton\n# the kernel as the run read it\n"


@pytest.fixture(autouse=True)
def _private_home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


@pytest.mark.parametrize("kind", PLANTED_KINDS)
def test_what_is_planted_at_the_reference_is_replaced(tmp_path, kind):
    candidates = tmp_path / "candidates"
    candidates.mkdir()
    victim = tmp_path / "outside.py"
    plant(kind, candidates / "reference_gemm.py", victim)
    with never_blocks(30, "reference_module on a planted pipe"):
        path = reference_module(candidates, tmp_path / "gemm.py", MODULE)
    assert path == candidates / "reference_gemm.py"
    assert not path.is_symlink() and path.is_file() and path.read_text() == MODULE
    if kind == "a dangling link":
        assert not victim.exists(), "written through the link, outside the candidates folder"
    elif kind == "a link to a file":
        assert victim.read_text() == "precious\n"


def test_the_reference_is_written_where_none_is(tmp_path):
    path = reference_module(tmp_path / "candidates", tmp_path / "gemm.py", MODULE)
    assert path.read_text() == MODULE and path.parent == tmp_path / "candidates"
