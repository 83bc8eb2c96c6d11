"""Shared fixtures. Kernels run in worker subprocesses (interpreted on CPU), so no test needs a GPU
unless it is marked ``gpu``; those are skipped where torch sees no CUDA device."""
from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
GEMM = ROOT / "kernels" / "gemm.py"


def _cuda_available() -> bool:
    try:
        import torch
        return torch.cuda.is_available()
    except Exception:  # no torch build with CUDA: the GPU tests are skipped
        return False


def pytest_collection_modifyitems(config, items):
    if _cuda_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords or "multigpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def gemm_source() -> str:
    return GEMM.read_text()


@pytest.fixture(scope="session")
def gemm_path() -> Path:
    return GEMM
