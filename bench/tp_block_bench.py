"""The Llama-style tensor-parallel block (kernels/distributed/tp_block.py) timed per forward on W
ranks, as a model runs it (issue #46). Under torchrun, every rank:

    python -m torch.distributed.run --nproc-per-node W -m bench.tp_block_bench \\
        --model 70b --tokens 4096 --batch 1 --rounds 30 --out bench/results/tp_block_h100x2

Variants, each the whole block forward on this rank's ``tokens / W`` rows (bfloat16 on GPUs):
``ours`` (every projection through the package's kernels, their default configuration), ``torch``
(torch + NCCL: ``all_gather_into_tensor`` then ``matmul``, ``matmul`` then
``reduce_scatter_tensor``), ``torch_graph`` (the same captured in a CUDA graph and replayed),
``ours_graph`` (refused at W > 1 by the ops: their flags count epochs from the host; the row says
so), and ``async_tp`` (torch's micro-pipeline TP: the torch block through functional collectives
under ``torch.compile`` with ``_micro_pipeline_tp``, where it compiles; else the row says why).

Numerics first: ``ours`` against ``torch`` on the same inputs, every rank (relative error of its
rows). Timing: ``--rounds`` rounds, each variant once per round in an order rotated by one each
round, the ranks lined up by a barrier before each forward; a forward's time on a rank is its CUDA
events (``time.perf_counter`` on a CPU, gloo), and the round's figure is the slowest rank's (an
all-reduce of the maximum). Per variant the median and IQR of those; per variant against ``torch``
the median and IQR of the per-round ratios (paired). The host's time to queue one eager forward
(``host_ms``) is measured separately, rank 0.

Rank 0 writes ``OUT.json`` and ``OUT.md`` with the command. Weights: each rank's shard drawn at
random (seeded by rank): numerics compare two paths on the same shards, and timing needs no model.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist

from swizzleperf.kernels.distributed import tp_block as tb

MODELS = {"8b": tb.LLAMA3_8B, "70b": tb.LLAMA3_70B,
          "tiny": tb.LlamaDims(hidden=64, intermediate=128, heads=8, kv_heads=8, head_dim=8)}
TORCH = {name: '{"pattern": "torch_nccl"}' for name in tb.PROJECTIONS}


def shard_weights(dims: tb.LlamaDims, rank: int, world: int, dtype, device, seed: int = 0) -> dict:
    """This rank's shard of a random block (tp_block.shard's layout), drawn directly: a 70B block's
    full weights are 1.7 GB in bfloat16, and no rank needs another's."""
    dims.check(world)
    g = torch.Generator(device="cpu").manual_seed(seed * 1000 + rank)
    hq, hkv, i, d = dims.heads // world, dims.kv_heads // world, dims.intermediate // world, dims.head_dim

    def w(rows: int, cols: int, fan_in: int) -> torch.Tensor:
        return (torch.randn(rows, cols, generator=g) / math.sqrt(fan_in)).to(device=device, dtype=dtype)
    return {"w_qkv": w(dims.hidden, (hq + 2 * hkv) * d, dims.hidden), "wo": w(hq * d, dims.hidden, dims.heads * d),
            "w_gate_up": w(dims.hidden, 2 * i, dims.hidden), "w_down": w(i, dims.hidden, dims.intermediate),
            "attn_norm": torch.ones(dims.hidden, device=device, dtype=dtype),
            "mlp_norm": torch.ones(dims.hidden, device=device, dtype=dtype)}


def _torch_block_funcol(x, w, dims, batch, group_name, world):
    """The torch block through functional collectives, the form torch's micro-pipeline TP rewrites."""
    from torch.distributed import _functional_collectives as funcol
    return tb.forward_with(
        x, w, dims, batch, world,
        lambda a, b, _: torch.matmul(funcol.all_gather_tensor(a, 0, group_name), b),
        lambda a, b, _: funcol.reduce_scatter_tensor(torch.matmul(a, b), "sum", 0, group_name))


def _variants(x, w, dims, batch, group_name, world, cuda: bool) -> tuple:
    """``({name: forward}, {name: why it does not run})``."""
    run = {"ours": lambda: tb.block_forward(x, w, dims, batch, group_name, world),
           "torch": lambda: tb.block_forward(x, w, dims, batch, group_name, world, TORCH)}
    skipped = {}
    if not cuda:
        skipped.update(torch_graph="no CUDA graphs on a CPU", ours_graph="no CUDA graphs on a CPU",
                       async_tp="torch's micro-pipeline TP needs CUDA and symmetric memory")
        return run, skipped
    for name, configs in (("torch_graph", TORCH), ("ours_graph", {})):
        try:
            for _ in range(2):   # warm-up outside the capture (the ops' state, NCCL's communicators)
                tb.block_forward(x, w, dims, batch, group_name, world, configs)
            torch.cuda.synchronize()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                tb.block_forward(x, w, dims, batch, group_name, world, configs)
            run[name] = graph.replay
        except Exception as exc:  # noqa: BLE001 -- the row says why this variant does not run
            skipped[name] = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
            torch.cuda.synchronize()
    try:
        import torch._inductor.config as inductor_config
        from torch.distributed._symmetric_memory import enable_symm_mem_for_group
        enable_symm_mem_for_group(group_name)
        inductor_config._micro_pipeline_tp = True
        compiled = torch.compile(_torch_block_funcol, fullgraph=True)
        compiled(x, w, dims, batch, group_name, world)
        run["async_tp"] = lambda: compiled(x, w, dims, batch, group_name, world)
    except Exception as exc:  # noqa: BLE001
        skipped["async_tp"] = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
    return run, skipped


def _timed(fn, cuda: bool) -> float:
    """One forward's time on this rank (ms): CUDA events around it on a GPU, the wall clock on a CPU."""
    if cuda:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end)
    began = time.perf_counter()
    fn()
    return (time.perf_counter() - began) * 1e3


def _quartiles(values: list) -> tuple:
    q25, q50, q75 = statistics.quantiles(values, n=4) if len(values) > 1 else [values[0]] * 3
    return q50, q75 - q25


def main(argv: list | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", choices=sorted(MODELS), default="8b")
    parser.add_argument("--tokens", type=int, default=4096, help="sequence length of each batch entry")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--out", required=True, help="OUT.json and OUT.md (rank 0)")
    args = parser.parse_args(argv)
    cuda = torch.cuda.is_available()
    if cuda:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    group_name = dist.group.WORLD.group_name
    dims = MODELS[args.model]
    tokens = args.tokens * args.batch
    dims.check(world, tokens)
    device, dtype = ("cuda", torch.bfloat16) if cuda else ("cpu", torch.float32)
    w = shard_weights(dims, rank, world, dtype, device)
    x = torch.randn(tokens // world, dims.hidden, generator=torch.Generator().manual_seed(7 + rank)).to(device, dtype)

    ours, reference = tb.block_forward(x, w, dims, args.batch, group_name, world), \
        tb.block_forward(x, w, dims, args.batch, group_name, world, TORCH)
    error = torch.tensor([float((ours.float() - reference.float()).norm() / reference.float().norm())], device=device)
    errors = [torch.zeros_like(error) for _ in range(world)]
    dist.all_gather(errors, error)

    run, skipped = _variants(x, w, dims, args.batch, group_name, world, cuda)
    names = list(run)
    rounds = {n: [] for n in names}
    for r in range(args.rounds):
        for n in names[r % len(names):] + names[:r % len(names)]:
            dist.barrier()
            ms = torch.tensor([_timed(run[n], cuda)], device=device)
            dist.all_reduce(ms, op=dist.ReduceOp.MAX)   # the slowest rank's forward
            rounds[n].append(float(ms))
    host = []
    for _ in range(5):   # every rank calls (the forward is collective); rank 0's figures are kept
        dist.barrier()
        began = time.perf_counter()
        run["ours"]()
        host.append((time.perf_counter() - began) * 1e3)
        if cuda:
            torch.cuda.synchronize()
    dist.barrier()
    if rank == 0:
        _write(args, dims, world, cuda, [float(e) for e in errors], rounds, skipped, host)
    dist.destroy_process_group()
    return 0


def _write(args, dims, world, cuda, errors, rounds, skipped, host) -> None:
    device = torch.cuda.get_device_name() if cuda else "CPU (gloo)"
    rows = {}
    for n, times in rounds.items():
        median, iqr = _quartiles(times)
        ratio, ratio_iqr = _quartiles([t / o for t, o in zip(rounds["torch"], times)])
        rows[n] = {"median_ms": median, "iqr_ms": iqr, "torch_over_this": ratio, "torch_over_this_iqr": ratio_iqr,
                   "rounds_ms": times}
    command = "python -m torch.distributed.run --nproc-per-node {} -m bench.tp_block_bench {}".format(
        world, " ".join(sys.argv[1:]))
    result = {"device": device, "world_size": world, "model": args.model, "dims": dataclasses.asdict(dims),
              "tokens_per_sequence": args.tokens, "batch": args.batch, "rounds": args.rounds,
              "ours_vs_torch_rel_error_per_rank": errors, "variants": rows, "not_run": skipped,
              "host_ms_ours_eager": _quartiles(host)[0] if host else None, "command": command}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(result, indent=1))
    lines = [f"# The tensor-parallel block, Llama 3 {args.model}, {world} x {device}", "",
             f"Measured ({'CUDA events' if cuda else 'the wall clock'} on each rank, the slowest rank per round; "
             f"{args.rounds} interleaved rounds), "
             f"batch {args.batch} x {args.tokens} tokens. Command: `{command}`", "",
             f"Numerics, ours against torch + the collectives, relative error of each rank's rows: "
             f"{', '.join(f'{e:.2e}' for e in errors)}", "",
             "| variant | median ms | IQR ms | torch eager / this (paired per round, median ± IQR) |", "|---|---|---|---|"]
    for n, r in rows.items():
        lines.append(f"| {n} | {r['median_ms']:.3f} | {r['iqr_ms']:.3f} | "
                     f"{r['torch_over_this']:.3f}x ± {r['torch_over_this_iqr']:.3f} |")
    lines += [f"| {n} | not run | | {why} |" for n, why in skipped.items()]
    if host:
        lines.append(f"\nThe host's time to queue one eager forward of ours (rank 0, median of 5): "
                     f"{_quartiles(host)[0]:.3f} ms.")
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    code = main()
    # Leave without the interpreter's finalization: a gloo worker thread that drops its last tensor
    # reference then takes the GIL of a finalizing interpreter, which (Python 3.11) ends that thread
    # with a forced unwind through a noexcept frame: "terminate called without an active exception",
    # SIGABRT, a rank failed after its results were written (seen once in CI's run of 6a8ce19, and in
    # tests/kernels/distributed/test_tp_block.py's ranks before they left this way).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
