"""Distributed kernels on real GPUs, ranks spawned with torchrun (``multigpu``: skipped without
two CUDA devices). ``SWIZZLEPERF_WORLD_SIZES`` (default "2") picks the world sizes."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.multigpu
HERE = Path(__file__).resolve().parent


def _world_sizes() -> list:
    import torch
    available = torch.cuda.device_count() if torch.cuda.is_available() else 0
    wanted = [int(w) for w in os.environ.get("SWIZZLEPERF_WORLD_SIZES", "2").split(",")]
    return [w for w in wanted if w <= available] or [pytest.param(2, marks=pytest.mark.skip(
        reason=f"needs 2 CUDA devices, {available} present"))]


def _torchrun(world_size: int, *args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    env = dict(os.environ, NCCL_NVLS_ENABLE="0", TORCH_SYMM_MEM_DISABLE_MULTICAST="1",
               NVSHMEM_DISABLE_NVLS="1")
    # from the repository's root: the hand bench is the lab's bench.dist_bench (not shipped)
    return subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node",
                           str(world_size), *args], capture_output=True, text=True, env=env,
                          timeout=timeout, cwd=Path(__file__).resolve().parents[3])


@pytest.mark.parametrize("world_size", _world_sizes())
def test_every_kernel_and_pattern_verifies(world_size, tmp_path):
    out = tmp_path / "verify"
    done = _torchrun(world_size, "-m", "bench.dist_bench", "--verify-only",
                     "--problems", "check", "--copy-mib", "64", "--out", str(out))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads(out.with_suffix(".json").read_text())
    assert result["rows"] and all(r["verified"] and r["baseline_verified"] for r in result["rows"])
    assert result["peer_copy"]["verified"]


@pytest.mark.parametrize("world_size", _world_sizes())
def test_dead_rank_ends_waits_in_bounded_time(world_size):
    done = _torchrun(world_size, str(HERE / "_dead_rank.py"), timeout=300)
    lines = [l for l in done.stdout.splitlines() if l.startswith(("OK", "FAIL"))]
    assert len(lines) == 2 * (world_size - 1), done.stdout[-3000:] + done.stderr[-3000:]
    assert all(l.startswith("OK") for l in lines), lines
    dead = world_size - 1
    assert any(f"flag tile_ready[3] (set by rank {dead})" in l for l in lines), lines
    assert any(f"flag barrier[{dead}] (set by rank {dead})" in l for l in lines), lines
    assert all(float(l.split()[1]) < 60 for l in lines), lines
