"""The frame of the GPU diagnostics that time parts of a distributed kernel on W GPUs under torchrun
(bench/gpu_rs_stores.py, bench/gpu_rs_ce_parts.py; bench/gpu_host_profile.py takes its ``tuned_meta``): per problem, the per-rank GEMM configuration
tuned for the shape on this GPU (bench/results/gemm_configs_hopper.json), the kernel's state, the
script's contenders timed interleaved (agent/distributed/rank_worker.time_interleaved, the slowest
rank's figures), a line per problem on rank 0 and one JSON file of every row."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

import torch

CONFIGS = Path(__file__).resolve().parent / "results" / "gemm_configs_hopper.json"


def tuned_meta(spec, problem_name: str, world_size: int) -> dict:
    """The launch meta of ``spec`` at ``problem_name`` on ``world_size`` ranks with the per-rank
    GEMM configuration tuned for its shape on this GPU (``CONFIGS``; the spec's default where
    there is none), bfloat16."""
    from swizzleperf.kernels.schedule.gemm_tuning import best_config
    shape = spec.compute_shape(spec.problems[problem_name], world_size)
    tuned = best_config(shape["M"], shape["N"], shape["K"], "bfloat16", torch.cuda.get_device_name(),
                        path=CONFIGS) or {}
    return spec.meta_for(problem_name, tuned or None)


def time_problems(kernel: str, problems: list, contenders: Callable[..., dict], out: str,
                  command: str, rounds: int, sample_ms: float, pair_with: str | None = None,
                  fields: tuple = ("median_ms", "iqr_ms")) -> None:
    """Time ``contenders(heap, spec, meta, shape, inputs, state)`` (name -> one launch) at each of
    ``problems`` of distributed kernel ``kernel`` (bfloat16, every rank of torchrun), write
    ``{"device", "rows", "command"}`` to ``out`` (rank 0), each row the problem, its per-rank
    ``shape``, ``world_size``, ``meta`` and each contender's ``fields``."""
    from swizzleperf.agent.distributed.rank_worker import RankContext, time_interleaved
    from swizzleperf.kernels.distributed import load_spec, runner
    from swizzleperf.kernels.distributed.heap import Heap
    runner.start_torchrun_rank()
    rank, world = torch.distributed.get_rank(), torch.distributed.get_world_size()
    spec = load_spec(kernel)
    heap = Heap.create(max(spec.heap_bytes(spec.problems[p], world, "bfloat16") for p in problems)
                       + (64 << 20))
    ctx = RankContext(rank, world, "cuda", heap, torch.distributed.group.WORLD, torch.cuda.get_device_name())
    rows = []
    for name in problems:
        problem = spec.problems[name]
        shape = spec.compute_shape(problem, world)
        meta = tuned_meta(spec, name, world)
        with runner.rank_state(spec, heap, problem, meta, 0, "bfloat16") as (inputs, state):
            timed = time_interleaved(ctx, contenders(heap, spec, meta, shape, inputs, state), rounds,
                                     sample_ms, pair_with=pair_with)
            timing = {n: {f: t[f] for f in fields} for n, t in timed["contenders"].items()}
        rows.append({"problem": name, "shape": shape, "world_size": world, "meta": meta, **timing})
        if rank == 0:
            print(name, {k: round(v["median_ms"], 4) for k, v in timing.items()}, flush=True)
    if rank == 0:
        Path(out).write_text(json.dumps({"device": torch.cuda.get_device_name(), "rows": rows,
                                         "command": command}, indent=1, default=str))
    torch.distributed.destroy_process_group()
