"""Why a distributed pattern times differently by its place in a round (issue #23): each launch
of a sample timed on its own, in two settings, at each selected problem.

    torchrun --nproc-per-node 2 -m bench.gpu_pce_modes --out OUT/pce_modes.json

bench/dist_bench.py's interleaved rounds time each pattern in a pair with torch + NCCL, first in
every other round. On two H200s (2026-11-26, bench/results/dist_gemm_h200x2_interleaved/)
AG + GEMM's push_copy_engine took 0.44-0.46 ms at llama70b-qkv-4k in every round where it came
second, 0.52-0.60 where it came first; the other patterns did not split so. Here, for each
pattern: ``first``, a barrier of the ranks (host synchronised) then ``--launches`` launches; and
``behind``, a barrier, as many torch + NCCL launches, then the pattern's launches queued behind
them. CUDA events around every launch on the main stream (a launch's comm stream joins it at its
end), the slowest rank's figure per launch, ``--reps`` repetitions of each setting alternated;
``host_ms``: rank 0's time to queue each launch. Nothing is verified here (bench/dist_bench.py
verifies the same launches); the per-rank GEMM configuration is the tuned one
(bench/results/gemm_configs_hopper.json), as the bench takes it.
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
import types
from pathlib import Path

import torch

from swizzleperf.kernels.distributed import load_spec, runner
from swizzleperf.kernels.distributed.heap import Heap

CONFIGS = Path(__file__).resolve().parent / "results" / "gemm_configs_hopper.json"


def _timed(launch, launches: int) -> tuple:
    """Per-launch GPU ms (events on the current stream) and host ms to queue each launch."""
    events, host = [], []
    for _ in range(launches):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        queued = time.perf_counter()
        launch()
        host.append((time.perf_counter() - queued) * 1e3)
        end.record()
        events.append((start, end))
    torch.cuda.synchronize()
    return [s.elapsed_time(e) for s, e in events], host


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--kernel", default="all_gather_gemm")
    parser.add_argument("--problems", default="llama70b-qkv-4k,llama8b-up-4k")
    parser.add_argument("--patterns", default="push_copy_engine,push,bulk_sync")
    parser.add_argument("--launches", type=int, default=20)
    parser.add_argument("--reps", type=int, default=4)
    args = parser.parse_args()
    from bench.dist_bench import _tuned
    runner.start_torchrun_rank()
    world = torch.distributed.get_world_size()
    spec = load_spec(args.kernel)
    problems = args.problems.split(",")
    heap = Heap.create(max(spec.heap_bytes(spec.problems[p], world, "bfloat16") for p in problems) + (64 << 20))
    options = types.SimpleNamespace(gemm_configs=str(CONFIGS), dtype="bfloat16")
    rows = []
    for name in problems:
        problem = spec.problems[name]
        meta = spec.meta_for(name, _tuned(spec, problem, world, options))
        inputs = spec.make_inputs(problem, heap.rank, world, 0, "cuda", "bfloat16")
        torch_nccl = spec.baseline(inputs, problem)
        for pattern in args.patterns.split(","):
            with runner.rank_state(spec, heap, problem, meta, 0, "bfloat16") as (_, state):
                launch = runner.launcher(spec, heap, state, pattern, meta)
                for _ in range(3):
                    launch()
                    torch_nccl.run()
                out = {"first": [], "behind": [], "host_first": [], "host_behind": []}
                for _ in range(args.reps):
                    for setting in ("first", "behind"):
                        heap.barrier()
                        if setting == "behind":
                            for _ in range(args.launches):
                                torch_nccl.run()
                        times, host = _timed(launch, args.launches)
                        everyone = [None] * world
                        torch.distributed.all_gather_object(everyone, times)
                        out[setting].append([max(t[i] for t in everyone) for i in range(args.launches)])
                        out[f"host_{setting}"].append(host)
                heap.barrier()
            summary = {s: {"launch_1": statistics.median(r[0] for r in out[s]),
                           "launches_2_5": statistics.median(x for r in out[s] for x in r[1:5]),
                           "launches_6_on": statistics.median(x for r in out[s] for x in r[5:]),
                           "host": statistics.median(x for r in out[f"host_{s}"] for x in r)}
                       for s in ("first", "behind")}
            rows.append({"problem": name, "pattern": pattern, "meta": meta, "summary": summary, **out})
            if heap.rank == 0:
                print(name, pattern, json.dumps({s: {k: round(v, 3) for k, v in d.items()}
                                                 for s, d in summary.items()}), flush=True)
    if heap.rank == 0:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps({"device": torch.cuda.get_device_name(), "world_size": world,
                                              "command": "torchrun --nproc-per-node 2 -m bench.gpu_pce_modes "
                                              f"--problems {args.problems} --patterns {args.patterns}",
                                              "rows": rows}, indent=1, default=str))
    torch.distributed.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
