"""Where the host's time to queue one launch of a distributed kernel goes (issue #23: GEMM + RS
push_copy_engine took the host 0.45-1.05 ms a launch against 0.32-0.38 ms on two and four H100s, so
an application launching it eagerly runs at the host's pace): on W GPUs, for each
``--cases`` KERNEL:PROBLEM:PATTERN, the per-rank GEMM configuration tuned for its shape on this GPU
(bench/results/gemm_configs_hopper.json), ``--launches`` launches queued while the GPU sleeps (so
that the host never waits for it), timed with ``time.perf_counter`` (median per launch over
``--rounds`` rounds), then the same under ``cProfile`` (its own overhead inflates Python-heavy
calls: the ranking, not the sum, is what it gives).

    torchrun --nproc-per-node 2 -m bench.gpu_host_profile --out OUT/host_profile.json

Writes ``{"device", "command", "rows"}`` (rank 0): each row the case, ``host_ms`` (median per
launch), its ``rounds_ms`` and ``profile``, the 25 functions of most own time (``tottime`` per
launch in us, calls per launch, cumulative us per launch).
"""
from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import statistics
import time
from pathlib import Path

import torch

from bench.rank_timing import tuned_meta

DEFAULT_CASES = ("gemm_reduce_scatter:llama70b-o-4k:push_copy_engine,"
                 "gemm_reduce_scatter:llama70b-o-4k:bulk_sync,"
                 "all_gather_gemm:llama70b-qkv-4k:push_copy_engine")


def _queued(launch, launches: int) -> float:
    """Seconds the host took to queue ``launches`` launches, the GPU asleep meanwhile."""
    torch.cuda._sleep(int(2e8))        # ~0.1 s at Hopper's clocks: longer than the queueing
    start = time.perf_counter()
    for _ in range(launches):
        launch()
    elapsed = time.perf_counter() - start
    torch.cuda.synchronize()
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--cases", default=DEFAULT_CASES)
    parser.add_argument("--launches", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    from swizzleperf.kernels.distributed import load_spec, runner
    from swizzleperf.kernels.distributed.heap import Heap
    runner.start_torchrun_rank()
    rank, world = torch.distributed.get_rank(), torch.distributed.get_world_size()
    cases = [c.split(":") for c in args.cases.split(",")]
    specs = {k: load_spec(k) for k, _, _ in cases}
    heap = Heap.create(max(specs[k].heap_bytes(specs[k].problems[p], world, "bfloat16")
                           for k, p, _ in cases) + (64 << 20))
    rows = []
    for kernel, problem_name, pattern in cases:
        spec = specs[kernel]
        problem = spec.problems[problem_name]
        meta = tuned_meta(spec, problem_name, world)
        with runner.rank_state(spec, heap, problem, meta, 0, "bfloat16") as (_, state):
            launch = runner.launcher(spec, heap, state, pattern, meta)
            for _ in range(5):
                launch()
            torch.cuda.synchronize()
            heap.barrier()
            rounds = [_queued(launch, args.launches) / args.launches * 1e3 for _ in range(args.rounds)]
            heap.barrier()
            profiler = cProfile.Profile()
            torch.cuda._sleep(int(2e8))
            profiler.enable()
            for _ in range(args.launches):
                launch()
            profiler.disable()
            torch.cuda.synchronize()
            heap.barrier()
        stats = pstats.Stats(profiler)
        top = sorted(stats.stats.items(), key=lambda item: -item[1][2])[:25]
        profile = [{"function": f"{Path(file).name}:{line}:{name}",
                    "calls": calls / args.launches, "own_us": own / args.launches * 1e6,
                    "cumulative_us": cumulative / args.launches * 1e6}
                   for (file, line, name), (_, calls, own, cumulative, _) in top]
        rows.append({"kernel": kernel, "problem": problem_name, "pattern": pattern,
                     "world_size": world, "meta": meta, "host_ms": statistics.median(rounds),
                     "rounds_ms": rounds, "profile": profile})
        if rank == 0:
            print(f"{kernel} {problem_name} {pattern}: {statistics.median(rounds):.3f} ms a launch",
                  flush=True)
            for entry in profile[:12]:
                print(f"  {entry['own_us']:8.1f} us own {entry['cumulative_us']:8.1f} cum "
                      f"{entry['calls']:5.1f}x {entry['function']}", flush=True)
    if rank == 0:
        Path(args.out).write_text(json.dumps({
            "device": torch.cuda.get_device_name(), "rows": rows,
            "command": "torchrun --nproc-per-node 2 -m bench.gpu_host_profile --out OUT"},
            indent=1, default=str))
    torch.distributed.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
