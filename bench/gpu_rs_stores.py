"""Where GEMM + reduce-scatter's GEMM step loses to the GEMM alone (issue #23): on W GPUs, at each
bench problem, the bulk_sync GEMM step (every partial tile stored into its owner's staging, the
other owners' over NVLink) timed interleaved with the same launch whose stores all land in this
rank's own heap (``heap_bases`` given as W copies of this rank's base: the same kernel, the same
tiles and order, no remote store) and with ``torch.matmul`` of the per-rank shape (cuBLAS).

    torchrun --nproc-per-node 2 -m bench.gpu_rs_stores --out OUT/rs_stores.json

Timed as the optimizer's ranks time a head-to-head (agent/distributed/rank_worker.time_interleaved:
each round from a barrier, the variants back to back in an order rotated round by round, enough
launches per sample for ``--sample-ms``, the slowest rank's figure); medians and interquartile
ranges over ``--rounds`` rounds, ms per launch. (The figures of bench/results/rs_stores_h200x2.md
came from this script's first version, at commit 932aaf7, which timed 10 launches a sample in a
loop of its own.) The per-rank GEMM
configuration is the one tuned for the shape on this GPU (bench/results/gemm_configs_hopper.json),
as bench/dist_bench.py takes it. A diagnostic: nothing is verified here (bench/dist_bench.py
verifies the same launch).
"""
from __future__ import annotations

import argparse

import torch

from bench.rank_timing import time_problems
from swizzleperf.kernels.distributed import load_spec, runner
from swizzleperf.kernels.distributed.heap import Heap


class _LocalStores:
    """``heap`` with every rank's base replaced by this rank's: stores to peers land locally."""

    def __init__(self, heap: Heap) -> None:
        self._heap = heap
        self.heap_bases = torch.full_like(heap.heap_bases, int(heap.heap_bases[heap.rank]))

    def __getattr__(self, name):
        return getattr(self._heap, name)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--sample-ms", type=float, default=20.0)
    args = parser.parse_args()

    def contenders(heap, spec, meta, shape, inputs, state) -> dict:
        remote = runner.launcher(spec, heap, state, "bulk_sync", meta, 0)
        local = runner.launcher(spec, _LocalStores(heap), state, "bulk_sync", meta, 0)
        partial = torch.empty(shape["M"], shape["N"], dtype=torch.bfloat16, device="cuda")
        return {"gemm_step_remote_stores": remote, "gemm_step_local_stores": local,
                "cublas": lambda: torch.matmul(inputs["a"], inputs["b"], out=partial)}

    spec = load_spec("gemm_reduce_scatter")
    time_problems("gemm_reduce_scatter", list(spec.bench_problems), contenders, args.out,
                  "torchrun --nproc-per-node 2 -m bench.gpu_rs_stores --out OUT", args.rounds, args.sample_ms)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
