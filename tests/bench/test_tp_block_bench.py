"""bench/tp_block_bench.py end to end on two CPU ranks (gloo, the tiny block): numerics of ours
against torch + the collectives on every rank, both eager variants timed per round (slowest rank),
the GPU-only variants named with why they did not run, the command written."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_two_cpu_ranks_time_the_block_and_say_what_did_not_run(tmp_path):
    out = tmp_path / "tp_cpu"
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
                           "--standalone", "-m", "bench.tp_block_bench", "--model", "tiny", "--tokens", "8",
                           "--batch", "2", "--rounds", "3", "--out", str(out)],
                          cwd=ROOT, env=dict(os.environ, OMP_NUM_THREADS="1"), capture_output=True, text=True,
                          timeout=240)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    result = json.loads(out.with_suffix(".json").read_text())
    assert result["world_size"] == 2 and result["device"] == "CPU (gloo)"
    assert result["ours_vs_torch_rel_error_per_rank"] == [0.0, 0.0]   # on a CPU both run torch + gloo
    assert set(result["variants"]) == {"ours", "torch"}
    assert all(len(v["rounds_ms"]) == 3 and v["median_ms"] > 0 for v in result["variants"].values())
    assert result["variants"]["torch"]["torch_over_this"] == 1.0
    assert set(result["not_run"]) == {"torch_graph", "ours_graph", "async_tp"}
    assert "-m bench.tp_block_bench --model tiny" in result["command"]
    assert "| torch_graph | not run | | no CUDA graphs on a CPU |" in out.with_suffix(".md").read_text()
