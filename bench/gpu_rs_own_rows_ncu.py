"""GEMM + reduce-scatter's push_copy_engine own rows against its other owners' rows (issue #23),
on ONE GPU: rank 0 of a W = 2 group whose two heaps both live on this GPU (``Heap.group``). At
each problem: the GEMM of the other owners' rows (the first step, no sums), flattened as
launched and not (FLATTEN=0); the own rows with the peer's partials summed (every launch after
the copies) through the staging's descriptor and through pointers, and at each knob set of
``--knobs``. Every flag is already set (epoch 0: the waits pass at once) and the partials are
whatever the staging holds: nothing is verified here (bench/dist_bench.py verifies the same
launches). Each contender is timed (CUDA events around ``--launches`` launches back to back,
queued behind a GPU sleep, five samples, after a warm-up) and then run once more between
``cudaProfilerStart`` / ``Stop``, so that

    ncu --profile-from-start off --set full -o OUT/own_rows bash bench/gpu_torchrun.sh -m bench.gpu_rs_own_rows_ncu

(``WORLD_SIZE=1``: one process) profiles exactly one launch of each contender, in the order this
script prints. The per-rank GEMM configuration is the one tuned for the shape on this GPU
(bench/results/gemm_configs_hopper.json), as in the bench. First results:
bench/results/rs_own_rows_ncu_h100/.
"""
from __future__ import annotations

import argparse
import json
import statistics

import torch

from swizzleperf.agent.verification.simulate import parse_meta
from bench.rank_timing import tuned_meta
from swizzleperf.kernels.distributed import load_spec
from swizzleperf.kernels.distributed.heap import Heap


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="JSON of the times and the profiled order")
    parser.add_argument("--problems", default="llama70b-o-4k,llama8b-down-4k")
    parser.add_argument("--launches", type=int, default=20)
    parser.add_argument("--knobs", default="",
                        help="more own-rows contenders: knob sets KNOB=VALUE[,KNOB=VALUE...] over the "
                             "defaults, ';'-separated")
    args = parser.parse_args()
    spec = load_spec("gemm_reduce_scatter")
    world = 2
    rows, profiled = [], []
    for name in args.problems.split(","):
        problem = spec.problems[name]
        meta = {**tuned_meta(spec, name, world), "SLICES": 1}
        heaps = Heap.group(world, spec.heap_bytes(problem, world, "bfloat16") + (64 << 20), device="cuda")
        inputs = spec.make_inputs(problem, 0, world, 0, "cuda", "bfloat16")
        state = spec.setup(heaps[0], inputs, problem, meta)
        contenders = {}
        variants = [("others", {}), ("others FLATTEN=0", {"FLATTEN": 0}),
                    ("own SUM_TMA=1", {"SUM_TMA": 1}), ("own SUM_TMA=0", {"SUM_TMA": 0})]
        variants += [(f"own {knob_set}", parse_meta(knob_set))
                     for knob_set in filter(None, args.knobs.split(";"))]
        for label, knobs in variants:
            steps = spec.steps(heaps[0], state, "push_copy_engine", 0, {**meta, **knobs})
            if label.startswith("others"):
                contenders[label] = steps[0].run
            else:   # every own-rows launch: the steps after the copies
                own = [s.run for s in steps[2:]]
                contenders[label] = lambda own=own: [run() for run in own]
        times = {}
        for label, run in contenders.items():
            for _ in range(3):
                run()
            samples = []
            for _ in range(5):   # launches back to back: the host queues ahead of the GPU
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                torch.cuda._sleep(50_000_000)
                start.record()
                for _ in range(args.launches):
                    run()
                end.record()
                torch.cuda.synchronize()
                samples.append(start.elapsed_time(end) / args.launches)
            times[label] = {"median_ms": statistics.median(samples), "min_ms": min(samples)}
        torch.cuda.synchronize()
        torch.cuda.cudart().cudaProfilerStart()
        for label, run in contenders.items():
            run()
            profiled.append(f"{name} {label}")
        torch.cuda.synchronize()
        torch.cuda.cudart().cudaProfilerStop()
        rows.append({"problem": name, "shape": spec.compute_shape(problem, world), "meta": meta,
                     "times": times})
        print(name, json.dumps(times), flush=True)
        del heaps, state
        torch.cuda.empty_cache()
    with open(args.out, "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "rows": rows, "profiled_in_order": profiled,
                   "command": "ncu --profile-from-start off --set full -o OUT/own_rows bash "
                              "bench/gpu_torchrun.sh -m bench.gpu_rs_own_rows_ncu --out OUT/times.json"},
                  f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
