"""kernels/distributed/flash_decode.py on CPU: every pattern through ``runner.run_group`` (all ranks in one
process, the Triton interpreter) at world sizes 2 and 3, both dtypes; GQA, multi-head and uneven
shards with an empty split; non-default tile orders from the swizzle catalog (and a broken one
that verification must reject); a lost producer ending in ``SpinTimeout``; the torch + NCCL
baseline's math, and the baseline itself over gloo with two ranks; every launch compiled for
sm_90 (``compile_check``). GPU runs: ``test_multigpu.py`` through the bench.

Interpreted runs go to a subprocess with ``TRITON_INTERPRET=1`` (the repository's convention:
``triton.jit`` picks the interpreter when a module is imported). Tolerance: the spec's, 1e-2 for
bf16 and 2e-3 for fp16 (two roundings to the input dtype; see the SPEC's comment); a lost or
stale partial gives errors of 0.1 to 1.
"""
from __future__ import annotations

import pytest
from _interpreted import compile_for_sm90, interpret, spliced_copy
import torch

from swizzleperf.agent.verification.candidate import target_args
from swizzleperf.agent.verification.swizzles import catalog_source
from swizzleperf.kernels.distributed import flash_decode
from swizzleperf.kernels.distributed.flash_decode import SPEC

MODULE = flash_decode.__file__


def test_spec_contract():
    check = SPEC.problems["check"]
    grid = check["B"] * check["H_kv"] * SPEC.check_meta["SPLITS"]
    assert grid == 12 and grid % 8 != 0
    assert SPEC.patterns[0] == "bulk_sync" and set(SPEC.knobs["pattern"]) == set(SPEC.patterns)
    assert len(SPEC.bench_problems) >= 3 and set(SPEC.dtypes) == {"bfloat16", "float16"}
    # Hand counts at the check problem, W = 2: 48 keys per rank, 4 x 2 x 48 x 16 x 2 x 2 FLOP.
    assert SPEC.flops(check, 2) == 4 * 2 * 4 * 48 * 16
    assert SPEC.comm_bytes(check, 3, "bfloat16") == 2 * 2 * 4 * 17 * 4
    # Every bench problem's shard of K and V fits an H200 (141 GB) at W = 2 with room for the
    # reference, which holds one sequence's whole cache in fp32 at a time.
    for name in SPEC.bench_problems:
        p = SPEC.problems[name]
        shard_bytes = 2 * p["B"] * p["H_kv"] * (p["S"] // 2) * p["D"] * 2
        sequence_fp32 = 2 * p["H_kv"] * p["S"] * p["D"] * 4
        assert shard_bytes + sequence_fp32 < 8e9, name
        assert SPEC.heap_bytes(p, 8, "bfloat16") < 64 << 20, name


def test_shards_cover_the_sequence_once():
    for S, W in [(96, 3), (100, 3), (131072, 8), (7, 7)]:
        spans = [flash_decode.shard(S, W, r) for r in range(W)]
        assert spans[0][0] == 0 and sum(n for _, n in spans) == S
        assert all(a + n == b for (a, n), (b, _) in zip(spans, spans[1:]))
        assert max(n for _, n in spans) - min(n for _, n in spans) <= 1
    with pytest.raises(ValueError, match="S must be at least the world size 4, got 3"):
        flash_decode.shard(3, 4, 0)


def test_bad_problems_are_refused_with_the_reason():
    with pytest.raises(ValueError, match="H must be a multiple of H_kv=3"):
        flash_decode.make_inputs({"B": 1, "H": 4, "H_kv": 3, "D": 16, "S": 8}, 0, 2, 0)
    with pytest.raises(ValueError, match="D must be a power of two >= 16, got 96"):
        flash_decode.make_inputs({"B": 1, "H": 4, "H_kv": 2, "D": 96, "S": 8}, 0, 2, 0)


@pytest.mark.parametrize("world_size", [2, 3])
def test_torch_partials_merge_to_the_reference(world_size):
    """The baseline's math without NCCL: per-rank partials, stacked as an all-gather would."""
    problem = {"B": 2, "H": 8, "H_kv": 2, "D": 32, "S": 301}
    for dtype, tolerance in SPEC.tolerance.items():
        inputs = [flash_decode.make_inputs(problem, r, world_size, 3, "cpu", dtype)
                  for r in range(world_size)]
        parts = [flash_decode.torch_partial(x["q"], x["k"], x["v"]) for x in inputs]
        out = flash_decode.torch_combine(torch.stack([o for o, _ in parts]),
                                         torch.stack([lse for _, lse in parts]))
        expected = flash_decode.reference(inputs, 0)
        error = float((out.to(getattr(torch, dtype)).double() - expected).norm() / expected.norm())
        assert error < tolerance, (dtype, error)


@pytest.mark.parametrize("world_size", [2, 3])
@pytest.mark.parametrize("pattern", SPEC.patterns)
def test_pattern_verifies_through_the_interpreter(world_size, pattern):
    """Two launches in a row (epoch-counted flags and split counters reused), both dtypes."""
    result = interpret(f"""
        import json
        from swizzleperf.kernels.distributed import runner
        from swizzleperf.kernels.distributed.flash_decode import SPEC
        errors = {{}}
        for dtype in SPEC.dtypes:
            checks = runner.run_group(SPEC, {world_size}, {pattern!r}, dtype=dtype, seed=7)
            errors[dtype] = [c.error if c.ok else repr(c) for c in checks]
        print(json.dumps(errors))
    """)
    for dtype, errors in result.items():
        assert len(errors) == world_size, (dtype, errors)
        assert all(isinstance(e, float) and 0 < e < SPEC.tolerance[dtype] for e in errors), \
            (dtype, errors)


def test_gqa_multihead_and_uneven_shards():
    """G = 8 (one KV head for 8 query heads) and G = 1 (multi-head) at W = 3 with S = 100: shards
    of 34, 33, 33 keys, chunks of 16, so every rank has a short and an empty split."""
    result = interpret("""
        import dataclasses, json
        from swizzleperf.kernels.distributed import runner
        from swizzleperf.kernels.distributed.flash_decode import SPEC
        problems = {"gqa8": {"B": 1, "H": 8, "H_kv": 1, "D": 32, "S": 100},
                    "mha": {"B": 3, "H": 2, "H_kv": 2, "D": 16, "S": 100}}
        spec = dataclasses.replace(SPEC, problems={**SPEC.problems, **problems})
        meta = {"BLOCK_N": 16, "SPLITS": 4}
        errors = {}
        for name, pattern in [("gqa8", "fused_push"), ("mha", "bulk_sync")]:
            checks = runner.run_group(spec, 3, pattern, problem_name=name, meta=meta,
                                      dtype="float16")
            errors[name] = [c.error if c.ok else repr(c) for c in checks]
        print(json.dumps(errors))
    """)
    for name, errors in result.items():
        assert all(isinstance(e, float) and 0 < e < SPEC.tolerance["float16"] for e in errors), \
            (name, errors)


def test_catalog_orders_verify_and_a_broken_order_is_caught(tmp_path):
    """Catalog members spliced into a copy of the module (as the optimizer does) verify
    (grouped-m:3 over 4 bh: a short last group); a swizzle that maps every program to bh 0
    leaves the other heads unmerged and fails."""
    args = target_args(open(MODULE).read(), "swizzle")
    broken = "@triton.jit\ndef swizzle(pid, num_bh, num_splits):\n    return pid * 0, pid % num_splits\n"
    orders = {"column-major": catalog_source("column-major", args),
              "grouped-m:3": catalog_source("grouped-m:3", args), "broken": broken}
    code = "import json\nfrom swizzleperf.kernels.distributed import runner\nmodules = {}\n"
    for name, target in orders.items():
        path = tmp_path / ("fd_" + name.replace(":", "_").replace("-", "_") + ".py")
        code += spliced_copy(MODULE, target, path) + f"modules[{name!r}] = module\n"
    result = interpret(code + """
errors = {}
for name, module in modules.items():
    pattern = "bulk_sync" if name == "broken" else "fused_push"
    checks = runner.run_group(module.SPEC, 2, pattern, dtype="float16", launches=1 if name == "broken" else 2)
    errors[name] = [c.error for c in checks]
print(json.dumps(errors))
""")
    tolerance = SPEC.tolerance["float16"]
    assert all(0 < e < tolerance for e in result["column-major"] + result["grouped-m:3"]), result
    assert all(e > 0.1 for e in result["broken"]), result


def test_a_lost_producer_ends_in_spin_timeout():
    """fused_push without its partial step: the combine's bounded waits give up, and the error
    names the waiting rank and the flag (source rank 0's ready flag of bh 0, set by rank 0)."""
    result = interpret("""
        import dataclasses, json
        from swizzleperf.kernels.distributed import runner
        from swizzleperf.kernels.distributed.flash_decode import SPEC
        from swizzleperf.kernels.distributed.heap import SpinTimeout
        no_producer = dataclasses.replace(
            SPEC, steps=lambda heap, state, pattern, epoch, meta:
            [s for s in SPEC.steps(heap, state, pattern, epoch, meta)
             if s.name != "partial + push"])
        try:
            runner.run_group(no_producer, 2, "fused_push", launches=1)
            print(json.dumps({"raised": None}))
        except SpinTimeout as exc:
            print(json.dumps({"raised": str(exc)}))
    """)
    message = result["raised"]
    assert message is not None, "no SpinTimeout without the producer"
    assert message.startswith("rank 0: gave up waiting for flag partial_ready[0] (set by rank 0)")


def test_the_baseline_over_gloo_with_two_ranks(tmp_path):
    """``baseline`` end to end (the packing, ``all_gather_into_tensor``, the merge) on CPU."""
    result = interpret("""
        import json, os, tempfile
        import torch, torch.distributed as dist, torch.multiprocessing as mp
        from swizzleperf.kernels.distributed.flash_decode import SPEC
        from swizzleperf.kernels.distributed.runner import relative_error

        def rank_main(rank, world, init, queue):
            dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
            problem = SPEC.problems["check"]
            inputs = [SPEC.make_inputs(problem, r, world, 5, "cpu", "float16")
                      for r in range(world)]
            torch_nccl = SPEC.baseline(inputs[rank], problem)
            torch_nccl.run()
            queue.put(relative_error(torch_nccl.result(), SPEC.reference(inputs, rank)))
            dist.destroy_process_group()

        if __name__ == "__main__":
            init = "file://" + tempfile.mktemp()
            queue = mp.get_context("fork").SimpleQueue()
            mp.start_processes(rank_main, args=(2, init, queue), nprocs=2, start_method="fork")
            print(json.dumps([queue.get(), queue.get()]))
    """, timeout=180, script=tmp_path / "gloo_baseline.py")
    assert all(0 < e < SPEC.tolerance["float16"] for e in result), result


def test_every_launch_compiles_for_sm_90():
    """``compile_check``: each pattern's kernels through Triton's code generation and ptxas for
    sm_90 (what the interpreter never runs), on CPU."""
    stdout = compile_for_sm90("flash_decode")
    assert stdout.count("compiled for sm_90") == len(SPEC.patterns), stdout
