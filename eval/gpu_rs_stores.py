"""Where GEMM + reduce-scatter's GEMM step loses to the GEMM alone (issue #23): on W GPUs, at each
bench problem, the bulk_sync GEMM step (every partial tile stored into its owner's staging, the
other owners' over NVLink) timed interleaved with the same launch whose stores all land in this
rank's own heap (``heap_bases`` given as W copies of this rank's base: the same kernel, the same
tiles and order, no remote store) and with ``torch.matmul`` of the per-rank shape (cuBLAS).

    torchrun --nproc-per-node 2 eval/gpu_rs_stores.py --out OUT/rs_stores.json

Each round: a device barrier, then each variant's ``--launches`` launches between CUDA events, the
variants' order rotated round by round; a round's figure is the slowest rank's (all-reduce MAX).
Medians and interquartile ranges over ``--rounds`` rounds, ms per launch. The per-rank GEMM
configuration is the one tuned for the shape on this GPU (eval/results/gemm_configs_hopper.json),
as eval/dist_bench.py takes it. A diagnostic: nothing is verified here (eval/dist_bench.py
verifies the same launch).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
from pathlib import Path

import torch

from swizzleperf.kernels.distributed import load_spec, runner
from swizzleperf.kernels.distributed.heap import Heap

CONFIGS = Path(__file__).resolve().parent / "results" / "gemm_configs_hopper.json"


class _LocalStores:
    """``heap`` with every rank's base replaced by this rank's: stores to peers land locally."""

    def __init__(self, heap: Heap) -> None:
        self._heap = heap
        self.heap_bases = torch.full_like(heap.heap_bases, int(heap.heap_bases[heap.rank]))

    def __getattr__(self, name):
        return getattr(self._heap, name)


def _time(fns: dict, heap: Heap, rounds: int, launches: int) -> dict:
    names = list(fns)
    samples = {n: [] for n in names}
    for r in range(rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        for name in order:
            heap.barrier()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(launches):
                fns[name]()
            end.record()
            torch.cuda.synchronize()
            value = torch.tensor([start.elapsed_time(end) / launches], device="cuda")
            torch.distributed.all_reduce(value, op=torch.distributed.ReduceOp.MAX)
            samples[name].append(float(value))
    out = {}
    for name, values in samples.items():
        q = statistics.quantiles(values, n=4)
        out[name] = {"median_ms": statistics.median(values), "iqr_ms": q[2] - q[0]}
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--launches", type=int, default=10)
    args = parser.parse_args()
    from swizzleperf.kernels.distributed.heap import NO_MULTICAST_ENV
    from swizzleperf.kernels.schedule.gemm_tuning import best_config
    for key, value in NO_MULTICAST_ENV.items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    torch.distributed.init_process_group("nccl", device_id=torch.device("cuda", local_rank))
    rank, world = torch.distributed.get_rank(), torch.distributed.get_world_size()
    spec = load_spec("gemm_reduce_scatter")
    heap = Heap.create(max(spec.heap_bytes(spec.problems[p], world, "bfloat16") for p in spec.bench_problems)
                       + (64 << 20))
    rows = []
    for name in spec.bench_problems:
        problem = spec.problems[name]
        shape = spec.compute_shape(problem, world)
        tuned = best_config(shape["M"], shape["N"], shape["K"], "bfloat16", torch.cuda.get_device_name(),
                            path=CONFIGS) or {}
        meta = spec.meta_for(name, tuned or None)
        with runner.rank_state(spec, heap, problem, meta, 0, "bfloat16") as (inputs, state):
            remote = runner.launcher(spec, heap, state, "bulk_sync", meta, 0)
            local = runner.launcher(spec, _LocalStores(heap), state, "bulk_sync", meta, 0)
            partial = torch.empty(shape["M"], shape["N"], dtype=torch.bfloat16, device="cuda")
            cublas = lambda: torch.matmul(inputs["a"], inputs["b"], out=partial)
            for fn in (remote, local, cublas):   # compile and warm up
                fn()
            torch.cuda.synchronize()
            timing = _time({"gemm_step_remote_stores": remote, "gemm_step_local_stores": local,
                            "cublas": cublas}, heap, args.rounds, args.launches)
        rows.append({"problem": name, "shape": shape, "world_size": world, "meta": meta, **timing})
        if rank == 0:
            print(name, {k: round(v["median_ms"], 4) for k, v in timing.items()}, flush=True)
    if rank == 0:
        Path(args.out).write_text(json.dumps({"device": torch.cuda.get_device_name(), "rows": rows,
                                              "command": "torchrun --nproc-per-node 2 eval/gpu_rs_stores.py --out OUT"},
                                             indent=1, default=str))
    torch.distributed.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
