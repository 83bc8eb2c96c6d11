"""Where GEMM + reduce-scatter's push_copy_engine spends its time (issue #23): on W GPUs, at each
bench problem, the whole launch (at each of ``--variants``: SLICES / SUM_IN_EPILOGUE / CE_GROUPS)
timed interleaved with each of its steps alone (at SLICES=1 and the kernel's other defaults) and
with cuBLAS:

- ``others``: the GEMM of the other owners' rows into the outbox (step 0);
- ``copies``: the copy engines' copies of the outbox to the owners, each with its flag (step 1);
- ``own_no_wait SUM_IN_EPILOGUE=E``: the GEMM of the own rows with the peers' partials summed,
  first (E=0) or in the epilogue (E=1; each E of ``--own-variants``), every flag already set
  (epoch 0: the waits pass at once), so the time of its compute and its sums alone (step 2);
- for each knob set of ``--knobs`` (e.g. ``SUM_TMA=1;FLATTEN=1``): the whole launch and the own
  rows alone with those knobs over the defaults;
- ``others_in_two_slices``: step 0 in two launches (SLICES=2, no copies between them);
- ``no_copies``: the whole launch at the defaults without its copies (the GEMMs alone, back to
  back, every flag already set: epoch 0), so the whole launch's time over it is the copies' cost;
- ``cublas`` (``torch.matmul`` of the per-rank shape) and ``cublas_own_rows`` (of the rows of
  one owner, the share of the own-rows GEMM);
- ``bulk_sync`` for reference, and ``barrier`` (one device barrier, the step every pattern ends with).

    torchrun --nproc-per-node 2 -m bench.gpu_rs_ce_parts --out OUT/rs_ce_parts.json

Timed as bench/dist_bench.py times (agent/distributed/rank_worker.time_interleaved, paired with
cuBLAS): medians and interquartile ranges over ``--rounds`` rounds, ms per launch, the slowest
rank's. The whole launches share one epoch counter (they share the flags); the steps alone run
at epoch 0. The per-rank GEMM configuration is the one tuned for the shape on this GPU
(bench/results/gemm_configs_hopper.json). A diagnostic: nothing is verified here
(bench/dist_bench.py verifies the same launch).
"""
from __future__ import annotations

import argparse
import itertools

import torch

from swizzleperf.agent.verification.simulate import parse_meta
from bench.rank_timing import time_problems
from swizzleperf.kernels.distributed import load_spec, runner


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--sample-ms", type=float, default=20.0)
    parser.add_argument("--variants", default="2/0/2,2/1/1,2/1/2,2/1/4,4/1/2",
                        help="whole launches: SLICES/SUM_IN_EPILOGUE/CE_GROUPS, comma-separated")
    parser.add_argument("--own-variants", default="0,1",
                        help="the own rows alone at each SUM_IN_EPILOGUE, comma-separated")
    parser.add_argument("--knobs", default="",
                        help="more variants, each a whole launch and the own rows alone (no wait): "
                             "knob sets KNOB=VALUE[,KNOB=VALUE...] over the defaults, ';'-separated")
    parser.add_argument("--problems", default="", help="comma-separated (default: the bench problems)")
    args = parser.parse_args()

    def contenders(heap, spec, meta, shape, inputs, state) -> dict:
        epochs = itertools.count(1)

        def launch(pattern: str, knobs: dict, step=None):
            """One launch of ``pattern`` a call; ``step``: only that step (an index), those
            steps (a tuple), or only the main stream's steps (``"main"``: no copies), at epoch 0."""
            run_steps, launch_meta = runner.StepRunner(heap), {**meta, **knobs}

            def run() -> None:
                steps = spec.steps(heap, state, pattern, 0 if step is not None else next(epochs),
                                   launch_meta)
                if step == "main":
                    steps = [s for s in steps if s.stream != "comm"]
                elif isinstance(step, tuple):
                    steps = [steps[i] for i in step]
                elif step is not None:
                    steps = [steps[step]]
                run_steps(steps)
            return run

        a, b = inputs["a"], inputs["b"]
        partial = torch.empty(shape["M"], shape["N"], dtype=a.dtype, device="cuda")
        own = shape["M"] // heap.world_size
        fns = {}
        for variant in args.variants.split(","):
            slices, in_epilogue, groups = (int(x) for x in variant.split("/"))
            fns[f"push_copy_engine SLICES={slices} SUM_IN_EPILOGUE={in_epilogue} CE_GROUPS={groups}"] = \
                launch("push_copy_engine", {"SLICES": slices, "SUM_IN_EPILOGUE": in_epilogue,
                                            "CE_GROUPS": groups})
        for in_epilogue in filter(None, args.own_variants.split(",")):
            fns[f"own_no_wait SUM_IN_EPILOGUE={in_epilogue}"] = launch(
                "push_copy_engine", {"SLICES": 1, "SUM_IN_EPILOGUE": int(in_epilogue)}, 2)
        for knob_set in filter(None, args.knobs.split(";")):
            knobs = parse_meta(knob_set)
            fns[f"push_copy_engine {knob_set}"] = launch("push_copy_engine", knobs)
            fns[f"own_no_wait {knob_set}"] = launch("push_copy_engine", {**knobs, "SLICES": 1}, 2)
        fns.update({"others": launch("push_copy_engine", {"SLICES": 1}, 0),
                    "others_in_two_slices": launch("push_copy_engine", {"SLICES": 2}, (0, 2)),
                    "no_copies": launch("push_copy_engine", {}, "main"),
                    "copies": launch("push_copy_engine", {"SLICES": 1}, 1),
                    "bulk_sync": launch("bulk_sync", {}),
                    "barrier": heap.device_barrier,
                    "cublas": lambda: torch.matmul(a, b, out=partial),
                    "cublas_own_rows": lambda: torch.matmul(a[:own], b, out=partial[:own])})
        return fns

    spec = load_spec("gemm_reduce_scatter")
    problems = args.problems.split(",") if args.problems else list(spec.bench_problems)
    time_problems("gemm_reduce_scatter", problems, contenders, args.out,
                  "torchrun --nproc-per-node 2 -m bench.gpu_rs_ce_parts --out OUT", args.rounds,
                  args.sample_ms, pair_with="cublas", fields=("median_ms", "iqr_ms", "host_ms"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
