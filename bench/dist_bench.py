"""Verify and benchmark the distributed kernels, one process per GPU.

    torchrun --nproc-per-node 2 -m bench.dist_bench --out bench/results/dist_h200

For every kernel, problem and overlap pattern: verification first (two launches, the output
poisoned before each, against the torch reference of the inputs gathered over NCCL; the
torch + NCCL baseline checked the same way), then the verified patterns of a problem, torch +
NCCL and torch's compute alone timed together in interleaved rounds, each pattern paired with
torch + NCCL in every round (CUDA events, the slowest rank's time; medians and interquartile
ranges over the rounds; a speedup is the median of the rounds' ratios), the way from torch +
NCCL to the perfect-overlap bound computed round by round, and the peer-copy bandwidth of a
Triton kernel against the copy engine's. Rank 0 writes ``OUT.json`` and ``OUT.md``. A pattern
that fails verification is not timed; the run goes on with the next one. Exit status 1 when
anything failed.

``--order grouped-m:8`` runs the kernels with that catalog tile order spliced in for their
``swizzle`` (as the optimizer splices a candidate), ``--order expert`` each with its spec's
``expert`` order (the GEMM kernels' grouped-m:8; flash decode keeps its own);
``--gemm-configs FILE`` takes each problem's per-rank GEMM configuration from a kernels/schedule/gemm_tuning.py cache file (the committed
bench/results/gemm_configs_hopper.json: measured per shape on this GPU kind), ``--meta`` still
overriding it.
"""
from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import json
import statistics
import sys
import time
import traceback
from pathlib import Path

import torch

from swizzleperf.agent.distributed.measured import HOST_PACED
from swizzleperf.agent.distributed.rank_worker import _iqr
from swizzleperf.agent.verification.candidate import splice, target_args
from swizzleperf.agent.verification.simulate import parse_meta
from swizzleperf.agent.verification.swizzles import UnknownSwizzleError, catalog_source
from swizzleperf.kernels import distributed
from swizzleperf.kernels.distributed import KERNELS, runner

#: The contenders' names beside the patterns: torch + NCCL (the baseline) and its compute alone.
TORCH_NCCL, TORCH_COMPUTE = "torch_nccl", "torch_compute"
#: torch + NCCL timed a second time as a contender of its own: the A/A check of the timing.
TORCH_NCCL_AGAIN = "torch_nccl_again"
#: The pattern whose steps are also timed one by one (every GEMM kernel has it: no flags, no overlap).
BULK_SYNC = "bulk_sync"


def load_spec(name: str, order: str | None = None):
    """The ``SPEC`` of ``kernels/distributed/NAME.py``, with the catalog tile order ``order``
    spliced in for its rewrite target where given (a copy of the module in a temporary folder,
    imported under a name of its own; the catalog and the splice are the agent's,
    agent/verification/swizzles.py and candidate.py); ``"expert"``: the spec's own ``expert``
    order, where it has one. Raises ValueError for an unknown name or order."""
    spec = distributed.load_spec(name)
    if order == "expert":   # each kernel's own hand-written order, where it has one
        order = spec.expert
    if not order:
        return spec
    import tempfile

    source = Path(importlib.import_module(f"{distributed.__name__}.{name}").__file__).read_text()
    target = spec.rewrite_target
    try:
        text = splice(source, target, catalog_source(order, target_args(source, target)))
    except UnknownSwizzleError as exc:
        raise ValueError(f"--order {order!r}: {exc}") from None
    stem = f"{name}_{order.replace(':', '_').replace('-', '_')}"
    path = Path(tempfile.mkdtemp(prefix="swizzleperf-bench-")) / f"{stem}.py"
    path.write_text(text)
    module_spec = importlib.util.spec_from_file_location(path.stem, path)
    spliced = importlib.util.module_from_spec(module_spec)
    sys.modules[path.stem] = spliced
    module_spec.loader.exec_module(spliced)
    return spliced.SPEC


def _parse(argv) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kernels", default="all", help="all or a comma-separated list")
    parser.add_argument("--patterns", default="all", help="all or a comma-separated list")
    parser.add_argument("--problems", default="bench",
                        help="bench (each kernel's bench problems), or comma-separated names")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--iterations", type=int, default=20,
                        help="timed rounds of a problem's contenders (samples of a part timed alone)")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--verify-only", action="store_true")
    parser.add_argument("--meta", default="", help="overrides, e.g. COMM_SMS=32,BLOCK_N=128")
    parser.add_argument("--order", default="", help="a catalog tile order for every kernel's swizzle, "
                        "e.g. grouped-m:8, or expert: each kernel's spec.expert (default: the kernels' own)")
    parser.add_argument("--gemm-configs", default="", help="per-rank GEMM configurations measured "
                        "per shape (a kernels/schedule/gemm_tuning.py cache file)")
    parser.add_argument("--copy-mib", type=int, default=1024, help="peer-copy size (0: skip)")
    parser.add_argument("--out", default="", help="path prefix of OUT.json / OUT.md (rank 0)")
    return parser.parse_args(argv)


def _tuned(spec, problem: dict, world_size: int, args, pattern: str) -> dict:
    """The per-rank GEMM configuration measured for this problem's per-rank shape on this GPU
    (``--gemm-configs``) for the programs ``pattern`` gives its GEMM, as knobs of the spec, or {}
    (the spec's default) where there is none or it does not fit the kernel
    (agent/distributed/problems.py's ``tuned_gemm``, which a measured optimize uses too: a switch
    the kernel lacks, such as kernels/gemm.py's tail, is not run silently as another schedule)."""
    if not args.gemm_configs or spec.compute_shape is None:
        return {}
    from swizzleperf.agent.distributed.problems import tuned_gemm
    from swizzleperf.kernels.schedule.persistent_gemm import num_sms
    knobs, _ = tuned_gemm(spec, problem, world_size, args.dtype, torch.cuda.get_device_name(), num_sms(),
                          caches=(args.gemm_configs,), pattern=pattern)
    return knobs


def _problems(spec, selection: str) -> list:
    if selection == "bench":
        return list(spec.bench_problems)
    return [p for p in selection.split(",") if p in spec.problems]


def bench_kernel(spec, heap, args, group=None) -> list:
    """Rows of one kernel: every selected problem x pattern verified, then the verified patterns
    of a problem timed together with torch + NCCL (``_time_problem``)."""
    rows = []
    patterns = spec.patterns if args.patterns == "all" else [
        p for p in args.patterns.split(",") if p in spec.patterns]
    from swizzleperf.kernels.schedule.persistent_gemm import num_sms
    sms = num_sms()
    for problem_name in _problems(spec, args.problems):
        problem = spec.problems[problem_name]
        block = []
        for pattern in patterns:
            meta = spec.meta_for(problem_name, {**_tuned(spec, problem, heap.world_size, args, pattern),
                                                **parse_meta(args.meta)})
            row = {"kernel": spec.name, "problem": problem_name, **problem, "pattern": pattern,
                   "world_size": heap.world_size, "dtype": args.dtype, "meta": meta}
            refused = spec.constraints(problem, heap.world_size, pattern, {"NUM_SMS": sms, **meta}) \
                if spec.constraints is not None else None
            if refused:   # a configuration the kernel cannot run (--meta over a tuned one): said, not launched
                row.update(verified=False, error=float("nan"), message=f"refused: {refused}",
                           baseline_verified=False)
                block.append(row)
                continue
            check, base_check = runner.verify_rank(spec, heap, problem_name, pattern, meta,
                                                   seed=len(rows) + len(block) + 1, dtype=args.dtype,
                                                   group=group)
            row.update(verified=_all_ranks(check.ok, group), error=check.error,
                       message=check.message, baseline_verified=_all_ranks(base_check.ok, group),
                       baseline_error=base_check.error)
            block.append(row)
        timed = [row for row in block if row["verified"]]
        if timed and not args.verify_only:
            _time_problem(spec, heap, problem, timed, args, group)
            for row in timed:
                row["tflops"] = spec.flops(problem, heap.world_size) / row["time_ms"] * 1e-9
                if spec.min_bytes is not None:
                    row["gbps"] = spec.min_bytes(problem, heap.world_size, args.dtype) / row["time_ms"] * 1e-6
        for row in block:
            rows.append(row)
            if heap.rank == 0:
                print(_line(row), flush=True)
    return rows


def _bench_or_record(spec, heap, args) -> list:
    """``bench_kernel``, or one failed row naming the error when the kernel does not build or
    run (every rank fails alike: a compile error, a bad shape), so the other kernels still run."""
    mark = len(heap.allocations)
    try:
        return bench_kernel(spec, heap, args)
    except Exception as exc:  # recorded as the kernel's failure; the bench goes on
        where = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
        message = (f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
                   + (f" ({Path(where.filename).name}:{where.lineno})" if where else ""))
        print(f"bench: {spec.name} failed: {message}", file=sys.stderr, flush=True)
        heap.reset(mark)
        return [{"kernel": spec.name, "problem": "-", "pattern": "-", "world_size":
                 heap.world_size, "verified": False, "error": float("nan"), "message": message,
                 "baseline_verified": False}]


def _all_ranks(ok: bool, group) -> bool:
    import torch.distributed as dist
    flag = torch.tensor([0 if ok else 1], device="cuda")
    dist.all_reduce(flag, group=group)
    return int(flag.item()) == 0


def _time_problem(spec, heap, problem, rows, args, group) -> None:
    """Time every verified pattern of ``rows`` (one problem) and torch + NCCL, with torch's compute
    alone where the baseline has one and each step of ``bulk_sync`` alone (the parts the other
    patterns overlap: ``bulk_sync_steps_ms``), interleaved in rounds, each pattern paired with torch +
    NCCL in every round (agent/distributed/rank_worker.py's ``time_interleaved``, the measured
    optimize's timer); fills each row's ``time_ms``, ``iqr_ms``, the baseline's figures, the
    paired ``speedup`` (median over the rounds of torch + NCCL's time over the pattern's, with
    ``speedup_iqr``), ``rounds_ms`` of every contender and ``host_ms`` (this rank's median time
    to queue one launch; the timer lets the host queue ahead, so the times are the GPUs' work,
    and where ``host_ms`` nears ``time_ms`` an application that launches eagerly would run at the
    host's pace instead). Each pattern runs on its own heap state, so that their epoch-counted
    flags never meet, and with its row's ``meta`` (a pattern that gives its GEMM fewer programs
    can take another per-rank GEMM configuration: ``_tuned``)."""
    import torch.distributed as dist

    from swizzleperf.agent.distributed.measured import SAMPLE_MS
    from swizzleperf.agent.distributed.rank_worker import RankContext, time_interleaved
    ctx = RankContext(heap.rank, heap.world_size, "cuda", heap, group or dist.group.WORLD,
                      torch.cuda.get_device_name())
    with contextlib.ExitStack() as stack:
        fns, parts = {}, {}
        for row in rows:
            meta = row["meta"]
            _, state = stack.enter_context(runner.rank_state(spec, heap, problem, meta, 0, args.dtype))
            fns[row["pattern"]] = runner.launcher(spec, heap, state, row["pattern"], meta)
            if row["pattern"] == BULK_SYNC:   # its steps wait on no flag: each is timed alone too
                for index, step in enumerate(spec.steps(heap, state, BULK_SYNC, 1, meta)):
                    if not step.barrier:
                        parts[f"{index}:{step.name}"] = f"{BULK_SYNC} {index}:{step.name}"
                        fns[parts[f"{index}:{step.name}"]] = runner.launcher(spec, heap, state, BULK_SYNC,
                                                                             meta, index)
        inputs = spec.make_inputs(problem, heap.rank, heap.world_size, 0, heap.buffer.device, args.dtype)
        torch_nccl = spec.baseline(inputs, problem, group)
        fns[TORCH_NCCL] = torch_nccl.run
        fns[TORCH_NCCL_AGAIN] = torch_nccl.run   # the A/A check: the baseline against itself
        if torch_nccl.compute is not None:
            fns[TORCH_COMPUTE] = torch_nccl.compute
        timing = time_interleaved(ctx, fns, args.iterations, SAMPLE_MS, args.warmup,
                                  pair_with=TORCH_NCCL)
    contenders = timing["contenders"]
    baseline = contenders[TORCH_NCCL]
    rounds = {name: c["rounds_ms"] for name, c in contenders.items()}
    again = [t / a for t, a in zip(rounds[TORCH_NCCL], rounds[TORCH_NCCL_AGAIN])]
    common = {"baseline_ms": baseline["median_ms"], "baseline_iqr_ms": baseline["iqr_ms"],
              "aa_ratio": statistics.median(again), "aa_iqr": _iqr(again),
              "baseline_host_ms": baseline["host_ms"], "rounds": timing["rounds"],
              "rounds_ms": rounds}
    if TORCH_COMPUTE in contenders:
        common["baseline_compute_ms"] = contenders[TORCH_COMPUTE]["median_ms"]
        common["baseline_compute_iqr_ms"] = contenders[TORCH_COMPUTE]["iqr_ms"]
    if parts:
        common["bulk_sync_steps_ms"] = {part: contenders[name]["median_ms"] for part, name in parts.items()}
    for row in rows:
        mine = contenders[row["pattern"]]
        ratios = [t / m for t, m in zip(rounds[TORCH_NCCL], rounds[row["pattern"]])]
        row.update(common, time_ms=mine["median_ms"], iqr_ms=mine["iqr_ms"],
                   host_ms=mine["host_ms"],
                   speedup=statistics.median(ratios), speedup_iqr=_iqr(ratios))


def bench_peer_copy(heap, mib: int, args, group=None) -> dict:
    """Triton put to the next rank vs the copy engine, all ranks at once, GB/s per rank."""
    from swizzleperf.kernels.distributed.peer_copy import peer_copy
    from swizzleperf.kernels.distributed.tiles import num_sms

    n = mib * (1 << 20) // 2
    mark = len(heap.allocations)
    src = heap.empty(n, dtype=torch.bfloat16, name="copy_src").normal_()
    dst = heap.zeros(n, dtype=torch.bfloat16, name="copy_dst")
    heap.check_symmetric()
    peer = (heap.rank + 1) % heap.world_size
    peer_dst = heap.peer_view(dst, peer)
    results = {"kernel": "peer_copy", "bytes": 2 * n, "world_size": heap.world_size}
    heap.barrier()                               # every dst zeroed before anyone writes
    peer_copy(heap, src, dst, peer, num_sms())
    heap.barrier()
    incoming = heap.peer_view(src, (heap.rank - 1) % heap.world_size)
    results["verified"] = _all_ranks(torch.equal(dst, incoming), group)
    results["copy_engine"] = runner.time_rank(lambda: peer_dst.copy_(src), heap,
                                              args.iterations, args.warmup, group)
    best = None
    for programs in (num_sms() // 4, num_sms() // 2, num_sms()):
        timing = runner.time_rank(lambda: peer_copy(heap, src, dst, peer, programs), heap,
                                  args.iterations, args.warmup, group)
        results[f"triton_{programs}"] = timing
        if best is None or timing["median_ms"] < best[1]["median_ms"]:
            best = (programs, timing)
    results["copy_engine_gbps"] = 2 * n / results["copy_engine"]["median_ms"] * 1e-6
    results["triton_gbps"] = 2 * n / best[1]["median_ms"] * 1e-6
    results["triton_programs"] = best[0]
    results["share_of_peak"] = results["triton_gbps"] / results["copy_engine_gbps"]
    heap.reset(mark)
    return results


def _line(row: dict) -> str:
    if not row.get("verified"):
        return (f"{row['kernel']:<20} {row['problem']:<22} {row['pattern']:<22} FAILED "
                f"error {row['error']:.3g} {row['message']}")
    if "time_ms" not in row:
        return f"{row['kernel']:<20} {row['problem']:<22} {row['pattern']:<22} verified " \
               f"(error {row['error']:.2e}; baseline {row['baseline_error']:.2e})"
    return (f"{row['kernel']:<20} {row['problem']:<22} {row['pattern']:<22} "
            f"{row['time_ms']:.3f} ± {row['iqr_ms']:.3f} ms  torch+NCCL {row['baseline_ms']:.3f} ± "
            f"{row['baseline_iqr_ms']:.3f} ms  {_speedup(row)}  {_rate(row)}")


def _speedup(row: dict) -> str:
    """The paired speedup over torch + NCCL with its interquartile range over the rounds."""
    spread = row.get("speedup_iqr")
    return f"{row['speedup']:.2f}x" + ("" if spread is None else f" (IQR {spread:.2f})")


def _fastest(rows: list) -> list:
    """The timed row of least median time per (kernel, problem), in the order first seen."""
    best = {}
    for row in rows:
        if "time_ms" in row:
            key = (row["kernel"], row["problem"])
            if key not in best or row["time_ms"] < best[key]["time_ms"]:
                best[key] = row
    return list(best.values())


def overlap_bound(row: dict) -> dict | None:
    """How far a timed row went from torch + NCCL towards the perfect-overlap bound, round by
    round: bound_r = max(compute_r, torch_nccl_r - compute_r) (torch's compute alone, and the
    rest of torch + NCCL taken as its communication), way_r = (torch_nccl_r - time_r) /
    (torch_nccl_r - bound_r): 0 at torch + NCCL's time, 1 at the bound, above 1 past it. Returns
    the medians (``way``, ``way_iqr``, ``bound_x``: torch + NCCL over the bound), or None without
    the compute's rounds (a baseline with no compute part)."""
    rounds = row.get("rounds_ms") or {}
    if TORCH_COMPUTE not in rounds or row["pattern"] not in rounds:
        return None
    ways, bounds_x = [], []
    for mine, total, compute in zip(rounds[row["pattern"]], rounds[TORCH_NCCL], rounds[TORCH_COMPUTE]):
        bound = max(compute, total - compute)
        if total > bound:
            ways.append((total - mine) / (total - bound))
            bounds_x.append(total / bound)
    if not ways:
        return None
    return {"kernel": row["kernel"], "problem": row["problem"], "pattern": row["pattern"],
            "time_ms": row["time_ms"], "baseline_ms": row["baseline_ms"],
            "compute_ms": row["baseline_compute_ms"], "way": statistics.median(ways),
            "way_iqr": _iqr(ways), "bound_x": statistics.median(bounds_x)}


def _rate(row: dict) -> str:
    """TFLOP/s per GPU, or HBM GB/s per GPU for a kernel with a byte floor (memory-bound)."""
    if "gbps" in row:
        return f"{row['gbps']:.0f} GB/s"
    return f"{row['tflops']:.0f} TFLOP/s"


def markdown(rows: list, copy: dict | None, command: str, device_name: str) -> str:
    """The results as a markdown table (times measured with CUDA events on ``device_name``)."""
    world = rows[0]["world_size"] if rows else copy["world_size"]
    lines = [f"### {world} x {device_name} (measured: CUDA events)", "", f"`{command}`", "",
             "| kernel | problem (M,N,K / shape) | pattern | time ms (median ± IQR) | "
             "torch + NCCL ms | speedup | rate per GPU | verified (rel. error) |",
             "|---|---|---|---|---|---|---|---|"]
    for row in rows:
        shape = ",".join(str(v) for k, v in row.items()
                         if k in ("M", "N", "K", "B", "H", "H_kv", "S", "D"))
        if "time_ms" in row:
            timing = (f"{row['time_ms']:.3f} ± {row['iqr_ms']:.3f} | {row['baseline_ms']:.3f} ± "
                      f"{row['baseline_iqr_ms']:.3f} | {_speedup(row)} | {_rate(row)}")
        else:
            timing = "not timed | | |"
        verdict = f"yes ({row['error']:.1e})" if row["verified"] else f"NO: {row['message'] or row['error']}"
        lines.append(f"| {row['kernel']} | {row['problem']} ({shape}) | {row['pattern']} | "
                     f"{timing} | {verdict} |")
    checks = [r for r in _fastest(rows) if "aa_ratio" in r]
    if checks:
        lines += ["", "A/A check, torch + NCCL timed against itself in the same rounds (median ratio, "
                  "IQR): " + "; ".join(f"{r['kernel']} {r['problem']} {r['aa_ratio']:.3f}x "
                                       f"({r['aa_iqr']:.3f})" for r in checks) + "."]
    bounds = [b for b in (overlap_bound(r) for r in _fastest(rows)) if b]
    if bounds:
        lines += ["", "The fastest pattern against the perfect-overlap bound (bound = max of torch's "
                  "compute alone and the rest of torch + NCCL, each round's own figures; way = (torch "
                  "+ NCCL - pattern) / (torch + NCCL - bound), median and interquartile range over the "
                  "rounds):", "",
                  "| kernel | problem | fastest pattern | ms | torch + NCCL | compute alone | bound | "
                  "way to the bound |", "|---|---|---|---|---|---|---|---|"]
        for b in bounds:
            lines.append(f"| {b['kernel']} | {b['problem']} | {b['pattern']} | {b['time_ms']:.3f} | "
                         f"{b['baseline_ms']:.3f} | {b['compute_ms']:.3f} | {b['bound_x']:.2f}x | "
                         f"{100 * b['way']:.0f} % (IQR {100 * b['way_iqr']:.0f}) |")
    paced = [r for r in rows if "time_ms" in r and (r.get("host_ms") or 0) >= HOST_PACED * r["time_ms"]]
    if paced:
        lines += ["", f"Host-paced (rank 0 took at least {HOST_PACED:.0%} of the launch's GPU time to "
                  "queue it: the times above are the GPUs' with the launches queued ahead; launched "
                  "one by one as an eager application does, these run at the host's pace): "
                  + "; ".join(f"{r['kernel']} {r['problem']} {r['pattern']} (host {r['host_ms']:.3f} "
                              f"of {r['time_ms']:.3f} ms)" for r in paced) + "."]
    parts = list({(r["kernel"], r["problem"]): r for r in rows
                  if r.get("bulk_sync_steps_ms")}.values())
    if parts:
        lines += ["", "Time breakdown, each part timed alone in the same rounds (ms): the torch + NCCL "
                  "baseline's compute, and the steps of this kernel's bulk_sync pattern.", "",
                  "| kernel | problem | torch compute | torch collective (rest) | bulk_sync steps |",
                  "|---|---|---|---|---|"]
        for row in parts:
            compute = row.get("baseline_compute_ms")
            rest = f"{row['baseline_ms'] - compute:.3f}" if compute is not None else ""
            steps = ", ".join(f"{k.split(':', 1)[1]} {v:.3f}" for k, v in row["bulk_sync_steps_ms"].items())
            lines.append(f"| {row['kernel']} | {row['problem']} | "
                         f"{'' if compute is None else f'{compute:.3f}'} | {rest} | {steps} |")
    if copy:
        lines += ["", f"Peer copy, every rank to the next at once, {copy['bytes'] / 2**20:.0f} MiB: "
                  f"copy engine {copy['copy_engine_gbps']:.0f} GB/s per rank, Triton put "
                  f"({copy['triton_programs']} programs) {copy['triton_gbps']:.0f} GB/s = "
                  f"{100 * copy['share_of_peak']:.0f} % of it (verified: {copy['verified']})."]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    """Entry point under torchrun; returns the exit status."""
    args = _parse(argv)
    import torch.distributed as dist
    from swizzleperf.kernels.distributed.heap import Heap, HeapError

    try:
        runner.start_torchrun_rank()
    except RuntimeError:
        print("bench: needs CUDA GPUs and torchrun (torchrun --nproc-per-node N -m "
              "bench.dist_bench)", file=sys.stderr)
        return 2
    try:
        names = KERNELS if args.kernels == "all" else args.kernels.split(",")
        specs = [load_spec(name, args.order) for name in names]
        world = dist.get_world_size()
        # every verified pattern of a problem holds its own heap state while they are timed together
        size = max([s.heap_bytes(s.problems[p], world, args.dtype) * len(s.patterns)
                    for s in specs for p in _problems(s, args.problems)] + [0])
        size = max(size, 2 * args.copy_mib * (1 << 20)) + (64 << 20)
        heap = Heap.create(size)
        started = time.time()
        rows = []
        for spec in specs:
            rows += _bench_or_record(spec, heap, args)
        copy = bench_peer_copy(heap, args.copy_mib, args) if args.copy_mib else None
        if heap.rank == 0:
            _write(rows, copy, args, time.time() - started)
        failed = any(not r["verified"] or not r["baseline_verified"] for r in rows) or (
            copy is not None and not copy["verified"])
        return 1 if failed else 0
    except (ValueError, HeapError) as exc:
        print(f"bench: {exc}", file=sys.stderr)
        return 2
    finally:
        dist.destroy_process_group()


def _write(rows, copy, args, seconds) -> None:
    command = "torchrun --nproc-per-node {} -m bench.dist_bench {}".format(
        rows[0]["world_size"] if rows else copy["world_size"], " ".join(sys.argv[1:]))
    name = torch.cuda.get_device_name()
    text = markdown(rows, copy, command, name)
    print(text)
    if copy:
        print(json.dumps({k: v for k, v in copy.items() if k.startswith("triton_") or
                          k == "copy_engine"}, default=str))
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(f"{args.out}.md").write_text(text)
        Path(f"{args.out}.json").write_text(json.dumps(
            {"command": command, "device": name, "seconds": seconds, "rows": rows,
             "peer_copy": copy}, indent=1, default=str))


if __name__ == "__main__":
    sys.exit(main())
