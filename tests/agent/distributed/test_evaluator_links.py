"""The distributed evaluator writes each candidate's configuration beside its kernel file
(``<label>_<kernel>.config.json``) in the candidates folder: a link planted at that name was
written through, a named pipe there blocked ``prepare`` for ever. The name is replaced now (a new
file renamed over it), as every file a run writes (#41)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from hang_guard import never_blocks
from planted import PLANTED_KINDS, plant

from swizzleperf.agent.distributed.evaluator import DistEvaluator, resolve_target
from swizzleperf.agent.verification.load import load_spec

GAS = Path(__file__).resolve().parents[3] / "kernels" / "distributed" / "gemm_all_scatter.py"
CONFIG = {"pattern": "bulk_sync"}


@pytest.fixture(autouse=True)
def _private_home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def _evaluator(tmp_path: Path) -> DistEvaluator:
    path = tmp_path / "gemm_all_scatter.py"
    path.write_text(GAS.read_text())
    return DistEvaluator(kernel_path=path, module_source=path.read_text(), spec=load_spec(path),
                         problem_name="llama70b-qkv-4k", world_size=4, target=resolve_target("h200", 4),
                         candidates_dir=tmp_path / "candidates", timeout_s=300)


@pytest.mark.parametrize("kind", PLANTED_KINDS)
def test_what_is_planted_at_a_config_name_is_replaced(tmp_path, kind):
    evaluator = _evaluator(tmp_path)
    evaluator.candidates_dir.mkdir()
    planted = evaluator.candidates_dir / "c1_gemm_all_scatter.config.json"
    victim = tmp_path / "outside.json"
    plant(kind, planted, victim)
    with never_blocks(30, "prepare on a planted pipe"):
        prepared = evaluator.prepare("c1", json.dumps(CONFIG))
    assert not prepared["verdict"], prepared["reason"]
    assert Path(prepared["kernel_file"]).with_suffix(".config.json") == planted
    assert not planted.is_symlink() and planted.is_file()
    assert json.loads(planted.read_text()) == json.loads(prepared["source"])
    if kind == "a dangling link":
        assert not victim.exists(), "written through the link, outside the candidates folder"
    elif kind == "a link to a file":
        assert victim.read_text() == "precious\n"
