"""Shared fixtures. Kernels run in worker subprocesses (interpreted on CPU), so no test needs a GPU
unless it is marked ``gpu``; those are skipped where torch sees no CUDA device."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

# Triton 3.9 warns on every compile while TRITON_DEFAULT_FP_FUSION is unset, then keeps fusion on:
# set to that same default here, so that a green run prints no third-party warning (behaviour unchanged).
os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")

ROOT = Path(__file__).resolve().parent.parent
GEMM = ROOT / "kernels" / "gemm.py"
# Helpers every test folder shares (the loopback OpenAI server, the command line, the toy apps of
# tests/helpers/apps/) are importable by name from any test file: pyproject.toml's ``pythonpath``.


def _cuda_available() -> bool:
    try:
        import torch
        return torch.cuda.is_available()
    except Exception:  # no torch build with CUDA: the GPU tests are skipped
        return False


def pytest_collection_modifyitems(config, items):
    import os
    if not os.environ.get("SWIZZLEPERF_LLM_BASE_URL"):
        no_server = pytest.mark.skip(reason="needs SWIZZLEPERF_LLM_BASE_URL (a real LLM server)")
        for item in items:
            if "llm" in item.keywords:
                item.add_marker(no_server)
    if _cuda_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords or "multigpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def _session_simulation_cache(tmp_path_factory):
    return tmp_path_factory.mktemp("simulations")


@pytest.fixture(autouse=True)
def _own_caches(tmp_path_factory, monkeypatch, _session_simulation_cache):
    """The caches a test reads and writes, never the user's ``~/.cache/swizzleperf``; the
    subprocesses a test starts inherit them.

    - GEMM configurations (kernels/schedule/gemm_tuning.py, ``$SWIZZLEPERF_GEMM_CACHE``): a file
      of the test's own; a test sees only the tuning results it made.
    - Simulations (profiling/l2sim.py, ``$SWIZZLEPERF_SIM_CACHE``): one folder for the test
      process's session. A result is a pure function of what its key digests (the trace, the
      order, the spec, the probe and the simulator's code), so a test cannot tell a result from
      the cache from one computed for it, and the catalog rankings that most runs start with are
      simulated once per session instead of once per test (#26). The cache's own tests use a
      folder of their own.
    """
    monkeypatch.setenv("SWIZZLEPERF_GEMM_CACHE",
                       str(tmp_path_factory.mktemp("gemm-cache") / "gemm_configs.json"))
    monkeypatch.setenv("SWIZZLEPERF_SIM_CACHE", str(_session_simulation_cache))


@pytest.fixture
def gemm_source() -> str:
    return GEMM.read_text()


@pytest.fixture(scope="session")
def gemm_path() -> Path:
    return GEMM


_LAUNCH_INTERPRETED = """
import json, sys, torch
from swizzleperf.agent.verification.load import load_kernel
path, problem, dtype, meta, seed = json.loads(sys.argv[1])
module, spec = load_kernel(path)
inputs = spec.make_inputs(problem, seed, 'cpu', dtype)
out = inputs[spec.output_name]
out.fill_(float('nan'))
spec.launch(inputs, **(meta or spec.check_meta))
ref = spec.reference(inputs).double()
print(json.dumps([bool(torch.isnan(out).any()), float((out.double() - ref).norm() / ref.norm())]))
"""


@pytest.fixture
def launch_interpreted():
    """``(kernel path, problem, dtype, meta=None, seed=5) -> (has_nan, rel_error)``: one launch of
    the kernel under the Triton interpreter in a worker (``@triton.jit`` picks the interpreter at
    import, so never in the pytest process), its output poisoned with NaN first; ``meta`` defaults
    to the spec's ``check_meta``; ``rel_error`` is ``||out - ref||_F / ||ref||_F`` in fp64."""
    import json
    import os
    import subprocess
    import sys

    def run(path, problem: dict, dtype: str, meta: dict | None = None, seed: int = 5):
        args = json.dumps([str(path), problem, dtype, meta, seed])
        done = subprocess.run([sys.executable, "-c", _LAUNCH_INTERPRETED, args], capture_output=True,
                              text=True, timeout=300, env=dict(os.environ, TRITON_INTERPRET="1"))
        assert done.returncode == 0, done.stderr[-2000:]
        return tuple(json.loads(done.stdout.strip().splitlines()[-1]))
    return run
