"""What runs in one rank process of the pool (agent/distributed/rank_pool.py): a distributed
kernel's candidate verified and timed on a real rank, as the user would run it.

Each rank is a process of its own, started by the pool's supervisor (inside the sandbox of
sandbox/__init__.py, so the candidate's module copy never runs in the agent's process), one GPU each
(``cuda:<rank>``, NCCL, the symmetric heap on PyTorch symmetric memory) or, for the CPU tests, a
CPU process under the Triton interpreter (gloo, and a symmetric heap of shared-memory files that
every rank maps: ``heap_bases`` holds this process's addresses of every rank's mapping, so
``device.translate`` works across processes as it does across GPUs). The process group is made
from a ``FileStore`` in the pool's folder (no network needed for the store).

Requests (dicts from the supervisor; every rank gets the same one and answers one dict):

- ``evaluate``: load the candidate's module copy (``kernel_path``); on GPUs, with ``probe_sites``
  (the sites the interpreted permutation check covered), its tile order through the target as
  Triton compiles it, each tile counted with an atomic add (agent/verification/probe.py; what only the
  interpreter does cannot pass); verify ``pattern`` with the candidate's own ``metas`` at each
  problem of ``verify`` (outputs poisoned before each of two
  launches, fresh random inputs, every rank against the fp32 reference of the inputs gathered over
  the process group; the ranks agree on the verdict), then with ``time`` time it interleaved,
  launch by launch, against torch + NCCL at the benchmark problem.
- ``references``: at the benchmark problem, torch + NCCL (what the user would run), torch's fused
  symmetric-memory op where one exists, the per-rank GEMM alone and the communication alone
  (where the spec's ``Baseline`` has a ``comm``), each checked against the reference, then timed
  interleaved.
- ``compare``: several verified candidates and torch + NCCL timed interleaved (the confirmation).

Every figure is the slowest rank's per round (the times of all ranks are gathered), median and
interquartile range over the rounds; rounds rotate the order of the contenders. An answer is
``{"rank", "verdict", "reason", "fatal", ...}``: ``fatal`` means the rank may be out of step with
its peers (an exception, a spin-wait that gave up), so the pool must be replaced.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import dataclasses
import itertools
import math
import os
import signal
import statistics
import sys
import time
import traceback
import warnings
from pathlib import Path

#: Launches verified per problem (the second proves that epoch-counted flags are reusable).
VERIFY_LAUNCHES = 2
#: Untimed launches of each contender before timing (compilation, caches, clocks).
WARMUP_LAUNCHES = 3
#: Launches per timed sample at most; fewer where one launch already fills ``sample_ms``.
MAX_PER_SAMPLE = 20
#: Each block of samples starts with the GPU asleep for this many ``sample_ms`` while the host
#: queues the launches (``_time_samples``): a sample's launches take about ``sample_ms`` on the
#: GPUs, so a host up to 1.5x slower than the GPUs at queueing them still does not set the pace.
QUEUE_AHEAD = 1.5
#: Timing stops early (after ``min_rounds``, checked every ``SETTLE_EVERY`` rounds) once every
#: contender's interquartile range is within ``settle`` of its median: more rounds would not move
#: a figure by more than that. On two H100s (2026-11-25, bench/results/dist_optimize_h100x2/ at commit 2f3ed18
#: optimize_*.log) the candidates' spreads after 15 rounds were 1.6-47 % of their medians, 7 of 24
#: under 3 %: those rounds past the first few bought nothing.
SETTLE_EVERY = 3


class RankFailure(Exception):
    """A verdict reached on this rank: ``verdict`` (a Verdict value), ``reason``, and whether the
    rank may be out of step with its peers (``fatal``)."""

    def __init__(self, verdict: str, reason: str, fatal: bool):
        super().__init__(reason)
        self.verdict, self.reason, self.fatal = verdict, reason, fatal


# --------------------------------------------------------------------------- process entry
def rank_main(rank: int, settings: dict, conn) -> None:
    """Entry point of a rank process (``multiprocessing`` spawn target): set up, say ready, then
    answer requests from ``conn`` until ``{"op": "stop"}`` or the pipe closes."""
    _die_with_parent()
    _redirect_output(Path(settings["folder"]) / f"rank{rank}.log")
    try:
        ctx = RankContext.start(rank, settings)
        ctx.conn = conn
        ctx.watch_heap()
    except BaseException as exc:  # reported to the supervisor, which reports the pool's failure
        traceback.print_exc()
        conn.send({"event": "failed", "rank": rank, "reason": _one_line(exc)})
        return
    conn.send({"event": "ready", "rank": rank, "device": ctx.device_name})
    while True:
        try:
            request = conn.recv()
        except EOFError:
            break
        if request.get("op") == "stop":
            break
        conn.send(handle(ctx, request))
    ctx.close()


def handle(ctx: "RankContext", request: dict) -> dict:
    """One request's answer on this rank (see the module docstring)."""
    from swizzleperf.kernels.distributed.heap import SpinTimeout
    ops = {"evaluate": evaluate, "references": references, "compare": compare}
    started = time.time()
    ctx.phase(f"starting {request['op']}")
    try:
        payload = ops[request["op"]](ctx, request)
        return {"rank": ctx.rank, "verdict": "PASS", "reason": "", "fatal": False,
                "seconds": time.time() - started, **payload}
    except RankFailure as failure:
        return {"rank": ctx.rank, "verdict": failure.verdict, "reason": failure.reason,
                "fatal": failure.fatal}
    except SpinTimeout as exc:
        return {"rank": ctx.rank, "verdict": "DEADLOCK", "reason": f"{exc}", "fatal": True}
    except Exception as exc:  # the candidate failed in a way we did not foresee: record it
        traceback.print_exc()
        name = type(exc).__name__
        verdict = "COMPILE_ERROR" if ("Compil" in name or "Unsupported" in name or "KernelLoad" in name) \
            else "RUNTIME_ERROR"
        return {"rank": ctx.rank, "verdict": verdict, "reason": f"rank {ctx.rank}: {_one_line(exc)}",
                "fatal": True}


# --------------------------------------------------------------------------- the rank's context
@dataclasses.dataclass
class RankContext:
    """One rank: its heap, its process group, how it launches and synchronises."""

    rank: int
    world_size: int
    device: str            # "cuda" or "cpu"
    heap: object
    group: object
    device_name: str
    modules: dict = dataclasses.field(default_factory=dict)
    conn: object = None

    def phase(self, text: str, waiting: bool = False) -> None:
        """Tell the supervisor what this rank does now (``waiting``: for its peers), so that a
        hang is blamed on the rank that is not waiting."""
        if self.conn is not None:
            self.conn.send({"event": "phase", "rank": self.rank, "text": text, "waiting": waiting})

    def watch_heap(self) -> None:
        """Report the heap's collectives (allocation check, barrier) as waits for the peers."""
        heap = self.heap
        for name, what in (("check_symmetric", "the heap allocations compared"), ("barrier", "a barrier")):
            method = getattr(heap, name)

            def watched(*args, _method=method, _what=what, **kwargs):
                self.phase(f"waiting for its peers ({_what})", waiting=True)
                return _method(*args, **kwargs)
            setattr(heap, name, watched)

    @classmethod
    def start(cls, rank: int, settings: dict) -> "RankContext":
        import torch
        import torch.distributed as dist
        world, device = settings["world_size"], settings["device"]
        store = dist.FileStore(str(Path(settings["folder"]) / "store"), world)
        if device == "cuda":
            from swizzleperf.kernels.distributed.heap import Heap
            torch.cuda.set_device(rank)
            dist.init_process_group("nccl", store=store, rank=rank, world_size=world,
                                    device_id=torch.device("cuda", rank))
            heap = Heap.create(settings["heap_bytes"], max_spins=settings.get("max_spins")
                               or (1 << 24))
            name = torch.cuda.get_device_name(rank)
        else:
            dist.init_process_group("gloo", store=store, rank=rank, world_size=world)
            heap = _shared_heap(rank, world, settings["heap_bytes"], Path(settings["folder"]),
                                settings.get("max_spins") or (1 << 16))
            name = "cpu (Triton interpreter)"
        return cls(rank, world, device, heap, dist.group.WORLD, name)

    def close(self) -> None:
        import torch.distributed as dist
        if dist.is_initialized():
            dist.destroy_process_group()

    def sync(self) -> None:
        if self.device == "cuda":
            import torch
            torch.cuda.synchronize()

    def launcher(self, spec, state: dict, pattern: str, meta: dict):
        """One launch of the kernel per call, epochs 1, 2, ... (runner.launcher on GPUs: the comm
        stream concurrent with the main one; on the CPU the steps in order)."""
        if self.device == "cuda":
            from swizzleperf.kernels.distributed import runner
            return runner.launcher(spec, self.heap, state, pattern, meta)
        return _sequential_launcher(spec, self.heap, state, pattern, meta)

    def all_gather(self, value) -> list:
        """Every rank's ``value`` (any picklable object), in rank order (a collective)."""
        import torch.distributed as dist
        self.phase("waiting for its peers (results gathered)", waiting=True)
        out = [None] * self.world_size
        dist.all_gather_object(out, value, group=self.group)
        return out

    def kernel(self, path: str):
        """The module copy at ``path`` and its DistKernelSpec (imported once per path)."""
        if path not in self.modules:
            from swizzleperf.agent.verification.load import load_kernel
            from swizzleperf.kernels.spec import KernelLoadError
            try:
                self.modules[path] = load_kernel(path)
            except KernelLoadError as exc:
                raise RankFailure("COMPILE_ERROR", f"rank {self.rank}: {exc}", fatal=False) from None
        return self.modules[path]


def _sequential_launcher(spec, heap, state: dict, pattern: str, meta: dict):
    """The CPU launch: every step in order (a step of the "comm" stream before the next), a
    barrier step a device barrier across the rank processes, the error record checked last."""
    epochs = itertools.count(1)

    def launch() -> None:
        for step in spec.steps(heap, state, pattern, next(epochs), meta):
            if step.barrier:
                heap.device_barrier()
            else:
                step.run()
        heap.check()
    return launch


def _shared_heap(rank: int, world: int, nbytes: int, folder: Path, max_spins: int):
    """This rank's heap on a shared-memory file, with every rank's file mapped here (a
    collective: the files exist once every rank has created its own)."""
    import torch
    import torch.distributed as dist
    from swizzleperf.kernels.distributed.heap import Heap

    class SharedHeap(Heap):
        """A heap whose peers are other processes' shared-memory files mapped into this one."""

        def __init__(self, buffers: list) -> None:
            bases = torch.tensor([b.data_ptr() for b in buffers], dtype=torch.int64)
            self._views = buffers
            super().__init__(buffers[rank], bases, rank, world, process_group=dist.group.WORLD,
                             max_spins=max_spins)

        def peer_view(self, tensor, peer: int):
            offset = tensor.data_ptr() - self.buffer.data_ptr()
            count = tensor.numel() * tensor.element_size()
            return self._views[peer][offset:offset + count].view(tensor.dtype).view(tensor.shape)

        def barrier(self) -> None:
            self.check_symmetric()
            self.device_barrier()
            self.check()

    path = folder / f"heap{rank}"
    with open(path, "wb") as handle:
        handle.truncate(int(nbytes))
    dist.barrier()
    buffers = [torch.from_file(str(folder / f"heap{p}"), shared=True, size=int(nbytes),
                               dtype=torch.uint8) for p in range(world)]
    heap = SharedHeap(buffers)
    dist.barrier()      # every control block zeroed before anyone signals into it
    heap.barrier()
    return heap


# --------------------------------------------------------------------------- requests
def evaluate(ctx: RankContext, request: dict) -> dict:
    """Verify the candidate at each problem of ``request["verify"]`` with its own knobs, then
    (``request["time"]``) time it against torch + NCCL at ``request["bench"]``."""
    module, spec = ctx.kernel(request["kernel_path"])
    spec = _with_problems(spec, request["problems"])
    pattern, dtype = request["pattern"], request["dtype"]
    checks = {}
    if request.get("probe_sites") and ctx.device == "cuda":
        ctx.phase("the tile order through the compiled target")
        checks["compiled_permutation"] = compiled_permutation(ctx, module, spec, request["probe_sites"])
    for name in request["verify"]:
        checks[name] = verify(ctx, spec, name, pattern, request["metas"][name],
                              request.get("seed", 1), dtype)
    out = {"checks": checks}
    if request.get("time"):
        ctx.phase("timing")
        bench = request["bench"]
        problem, meta = spec.problems[bench], request["metas"][bench]
        from swizzleperf.kernels.distributed import runner
        with runner.rank_state(spec, ctx.heap, problem, meta, 0, dtype) as (inputs, state):
            torch_nccl = spec.baseline(inputs, problem, ctx.group)
            fns = {"candidate": ctx.launcher(spec, state, pattern, meta), "torch_nccl": torch_nccl.run}
            out["timing"] = time_interleaved(ctx, fns, request.get("rounds", 15),
                                             request.get("sample_ms", 20.0), request.get("warmup", WARMUP_LAUNCHES),
                                             **_settling(request))
    return out


def compiled_permutation(ctx: RankContext, module, spec, sites: list) -> dict:
    """The tile order at ``sites`` (``[grid, args, label, real]``) through the rewrite target as
    Triton compiles it on this rank's GPU, as agent/verification/worker.py's ``compiled_permutation`` stage
    does: the real grids, and the synthetic ones where the target takes vector arguments (one
    compilation for all of them). Every rank computes the same (no collective).

    Raises: RankFailure (NOT_PERMUTATION, RUNTIME_ERROR; not fatal: every rank raises alike).
    """
    from swizzleperf.agent.verification import probe
    every = [probe.Site(tuple(int(g) for g in grid), tuple(int(a) for a in args), label, bool(real))
             for grid, args, label, real in sites]
    real = [s for s in every if s.real]
    try:
        coords = probe.probe_sites(module, spec.rewrite_target, real, compiled=True)
        probed = list(real)
        others = [s for s in every if not s.real]
        try:
            coords += probe.probe_sites(module, spec.rewrite_target, others, compiled=True, per_site=False)
            probed += others
        except probe.VectorUnsupported:   # a constexpr argument: one compilation per grid is too many
            pass
    except probe.ProbeError as exc:
        raise RankFailure("RUNTIME_ERROR", f"rank {ctx.rank}: the compiled tile order: {exc}", fatal=False) from None
    for site, c in zip(probed, coords):
        message = probe.permutation_errors(c, site.grid)
        if message:
            raise RankFailure("NOT_PERMUTATION", f"the tile order compiled by Triton (the interpreter's reading "
                                                 f"passed) is not a permutation at the {site.label}: {message}",
                              fatal=False)
    return {"sites": len(probed), "of": len(every), "tiles": int(sum(math.prod(s.grid) for s in probed))}


def verify(ctx: RankContext, spec, name: str, pattern: str, meta: dict, seed: int, dtype: str) -> dict:
    """``VERIFY_LAUNCHES`` launches at problem ``name``, outputs poisoned before each, then on a
    GPU launches back to back with the linear input scaled (``runner.launch_outputs``), then
    every rank's outputs against the fp32 reference of all ranks' inputs (a rank's error: its
    worst output's). The ranks agree on the result:
    every rank raises the same MISMATCH naming the ranks that differ.

    Returns ``{"problem", "meta", "errors": [per rank], "tolerance"}``.
    Raises: RankFailure (MISMATCH, not fatal); SpinTimeout (a wait that gave up, fatal).
    """
    from swizzleperf.kernels.distributed import runner
    problem = spec.problems[name]
    tolerance = spec.tolerance[dtype]
    ctx.phase(f"setting up the {name} problem")
    with runner.rank_state(spec, ctx.heap, problem, meta, seed, dtype) as (inputs, state):
        launch = ctx.launcher(spec, state, pattern, meta)
        outputs = runner.launch_outputs(spec, ctx.heap, state, inputs, launch, VERIFY_LAUNCHES, ctx.sync,
                                        lambda text: ctx.phase(f"{text}: {pattern} at the {name} problem"))
        ctx.phase("waiting for its peers (inputs gathered for the reference)", waiting=True)
        expected = spec.reference(runner.gather_inputs(inputs, ctx.world_size, ctx.group), ctx.rank)
        error = max(runner.relative_error(output, scale * expected) for output, scale in outputs)
        ctx.heap.barrier()
    errors = ctx.all_gather(error)
    bad = [r for r, e in enumerate(errors) if not e <= tolerance]
    if bad:
        sizes = ", ".join(f"{k}={v}" for k, v in problem.items())
        described = "; ".join(f"rank {r}: relative error {errors[r]:.3e}"
                              + (" (NaN: never written)" if math.isinf(errors[r]) else "") for r in bad)
        raise RankFailure("MISMATCH", f"{name} problem ({sizes}), W = {ctx.world_size}, pattern "
                                      f"{pattern}: output differs from the fp32 reference: {described} "
                                      f"> tolerance {tolerance:.1e}", fatal=False)
    return {"problem": dict(problem), "meta": dict(meta), "errors": errors, "tolerance": tolerance}


def references(ctx: RankContext, request: dict) -> dict:
    """torch + NCCL, torch's fused op, the GEMM alone and the communication alone at the
    benchmark problem: checked against the reference (torch + NCCL and the fused op), then timed
    interleaved."""
    from swizzleperf.kernels.distributed import runner
    module, spec = ctx.kernel(request["kernel_path"])
    spec = _with_problems(spec, request["problems"])
    problem, dtype = spec.problems[request["bench"]], request["dtype"]
    device = "cuda" if ctx.device == "cuda" else "cpu"
    inputs = spec.make_inputs(problem, ctx.rank, ctx.world_size, 0, device, dtype)
    expected = spec.reference(runner.gather_inputs(inputs, ctx.world_size, ctx.group), ctx.rank)
    torch_nccl = spec.baseline(inputs, problem, ctx.group)
    fns, checks, notes = {}, {}, {}
    torch_nccl.run()
    ctx.sync()
    checks["torch_nccl"] = runner.relative_error(torch_nccl.result(), expected)
    fns["torch_nccl"] = torch_nccl.run
    if torch_nccl.compute is not None:
        fns["gemm_alone"] = torch_nccl.compute
    comm = getattr(torch_nccl, "comm", None)
    if comm is not None:
        fns["comm_alone"] = comm
    else:
        notes["comm_alone"] = "the spec's Baseline has no comm part: derived as torch + NCCL minus its GEMM"
    fused_name, fused = fused_op(spec.name, inputs, ctx)
    if fused is not None:
        try:
            result = fused()
            ctx.sync()
            checks["torch_fused"] = runner.relative_error(result, expected)
            fns["torch_fused"] = fused
            notes["torch_fused"] = fused_name
        except Exception as exc:  # torch's op refuses this shape or build: said in the report
            notes["torch_fused"] = f"{fused_name} failed: {_one_line(exc)}"
    else:
        notes["torch_fused"] = fused_name
    tolerance = spec.tolerance[dtype]
    agreed = ctx.all_gather({k: bool(v <= tolerance) for k, v in checks.items()})
    for key in list(fns):
        if key in checks and not all(a.get(key, False) for a in agreed):
            notes[key] = f"{key} differs from the reference on some rank: not timed"
            del fns[key]
    timing = time_interleaved(ctx, fns, request.get("rounds", 15), request.get("sample_ms", 20.0),
                              request.get("warmup", WARMUP_LAUNCHES), **_settling(request))
    return {"timing": timing, "checks": checks, "notes": notes}


def compare(ctx: RankContext, request: dict) -> dict:
    """Several verified candidates (``candidates``: [{kernel_path, pattern, meta}]) and torch +
    NCCL, timed interleaved at the benchmark problem (their states all allocated at once), with
    the ``references`` asked for (``torch_fused``, ``gemm_alone``, ``comm_alone``: those the run's
    references checked and timed) in the same rounds, so that every figure the report derives
    from them is of one timing session (issue #44)."""
    from swizzleperf.kernels.distributed import runner
    import contextlib
    dtype, bench = request["dtype"], request["bench"]
    fns = {}
    with contextlib.ExitStack() as stack:
        for i, item in enumerate(request["candidates"]):
            module, spec = ctx.kernel(item["kernel_path"])
            spec = _with_problems(spec, request["problems"])
            problem = spec.problems[bench]
            inputs, state = stack.enter_context(runner.rank_state(spec, ctx.heap, problem, item["meta"], 0, dtype))
            fns[f"c{i}"] = ctx.launcher(spec, state, item["pattern"], item["meta"])
            if i == 0:
                fns["torch_nccl"] = spec.baseline(inputs, problem, ctx.group).run
                fns.update(_reference_fns(ctx, spec, problem, dtype, request.get("references") or []))
        timing = time_interleaved(ctx, fns, request.get("rounds", 15), request.get("sample_ms", 20.0),
                                  request.get("warmup", WARMUP_LAUNCHES), **_settling(request))
    return {"timing": timing}


def _reference_fns(ctx: RankContext, spec, problem: dict, dtype: str, wanted: list) -> dict:
    """The references of ``wanted`` as ``references`` times them (their own inputs, as there)."""
    if not wanted:
        return {}
    device = "cuda" if ctx.device == "cuda" else "cpu"
    inputs = spec.make_inputs(problem, ctx.rank, ctx.world_size, 0, device, dtype)
    baseline, fns = spec.baseline(inputs, problem, ctx.group), {}
    if "gemm_alone" in wanted and baseline.compute is not None:
        fns["gemm_alone"] = baseline.compute
    if "comm_alone" in wanted and getattr(baseline, "comm", None) is not None:
        fns["comm_alone"] = baseline.comm
    if "torch_fused" in wanted:
        _, fused = fused_op(spec.name, inputs, ctx)
        if fused is not None:
            fns["torch_fused"] = fused
    return fns


def fused_op(kernel: str, inputs: dict, ctx: RankContext) -> tuple:
    """``(name, callable)`` of torch's fused symmetric-memory op doing what ``kernel`` does, or
    ``(why not, None)``. all_gather_gemm: ``fused_all_gather_matmul(A_r, [B_r], 0)``;
    gemm_reduce_scatter: ``fused_matmul_reduce_scatter(A_r, B_r, "sum", 0)``; the others have none.
    Known here by the kernel's name: a ``DistKernelSpec`` does not declare it (yet)."""
    if kernel not in ("all_gather_gemm", "gemm_reduce_scatter"):
        return f"torch has no fused symmetric-memory op for {kernel}", None
    if ctx.device != "cuda":
        return "torch's fused symmetric-memory ops need CUDA", None
    import torch
    import torch.distributed._symmetric_memory as symm_mem
    group_name = ctx.group.group_name
    if hasattr(symm_mem, "enable_symm_mem_for_group"):   # needed before torch 2.9, a no-op after
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            symm_mem.enable_symm_mem_for_group(group_name)
    a, b = inputs["a"], inputs["b"]
    if kernel == "all_gather_gemm":
        op = torch.ops.symm_mem.fused_all_gather_matmul
        return "torch.ops.symm_mem.fused_all_gather_matmul", lambda: op(a, [b], 0, group_name)[1][0]
    op = torch.ops.symm_mem.fused_matmul_reduce_scatter
    return "torch.ops.symm_mem.fused_matmul_reduce_scatter", lambda: op(a, b, "sum", 0, group_name)


# --------------------------------------------------------------------------- timing
def time_interleaved(ctx: RankContext, fns: dict, rounds: int, sample_ms: float,
                     warmup: int = WARMUP_LAUNCHES, min_rounds: int | None = None,
                     settle: float = 0.0, pair_with: str | None = None) -> dict:
    """Interleaved timing of ``fns`` (name -> one launch): ``rounds`` rounds at most, each starting
    from a barrier of the ranks, each timing every contender for the same number of launches back
    to back (CUDA events; on the CPU the wall clock), in an order rotated by one each round. A
    sample's time is the slowest rank's. With ``min_rounds`` (< ``rounds``) and ``settle`` > 0,
    the timing ends after ``min_rounds`` or a later multiple of ``SETTLE_EVERY`` rounds once every
    contender's interquartile range is at most ``settle`` times its median (every rank decides
    alike, on the same gathered figures).

    ``pair_with`` (a name of ``fns``, e.g. ``"torch_nccl"``): a round times every other contender
    in a pair with it instead of all back to back, each pair from its own barrier and ending
    synchronised (the duty cycle of a candidate's own timing and of the hand bench); that
    contender's time in a round is the median of its samples there. Why: on two H100s five
    contenders back to back timed every figure 3-8 % higher than pairs did, the ratio to torch +
    NCCL unchanged (bench/results/h2h_bias_h100x2.md).

    Returns ``{"rounds" (those timed), "per_sample", "contenders": {name: {"median_ms", "iqr_ms",
    "rounds_ms"}}, "paired": bool}`` (per launch).
    """
    names = list(fns)
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    ctx.sync()
    ctx.heap.barrier()
    probe = [_time_block(ctx, fns[n], 1) for n in names]
    slowest_probe = max(max(p) for p in ctx.all_gather(probe))
    per_sample = max(1, min(MAX_PER_SAMPLE, int(sample_ms / max(slowest_probe, 1e-3))))
    per_sample = max(ctx.all_gather(per_sample))
    times = [[0.0] * len(names) for _ in range(rounds)]
    host = {i: [] for i in range(len(names))}
    done = rounds
    for r in range(rounds):
        if min_rounds and settle > 0 and min_rounds <= r < rounds and (r - min_rounds) % SETTLE_EVERY == 0 \
                and _settled(_slowest(ctx.all_gather(times[:r]), r, len(names)), settle):
            done = r
            break
        samples = {i: [] for i in range(len(names))}
        for block in _blocks(names, r, pair_with):
            ctx.heap.barrier()
            for i, ms, queued in _time_samples(ctx, [fns[names[i]] for i in block], per_sample,
                                               QUEUE_AHEAD * sample_ms):
                samples[block[i]].append(ms / per_sample)
                host[block[i]].append(queued / per_sample)
        for i, values in samples.items():
            times[r][i] = statistics.median(values)
    ctx.heap.barrier()
    slowest = _slowest(ctx.all_gather(times[:done]), done, len(names))
    out = {}
    for i, name in enumerate(names):
        column = [row[i] for row in slowest]
        out[name] = {"median_ms": statistics.median(column), "iqr_ms": _iqr(column), "rounds_ms": column,
                     "host_ms": statistics.median(host[i]) if host[i] else None}
    return {"rounds": done, "per_sample": per_sample, "contenders": out, "paired": pair_with is not None}


def _blocks(names: list, round_index: int, pair_with: str | None) -> list:
    """The blocks of contender indices round ``round_index`` times, each from its own barrier:
    all of them in an order rotated by the round; or, with ``pair_with``, each other contender
    (rotated) in a pair with that one, which goes first in every other pair."""
    n = len(names)
    if pair_with is None or pair_with not in names or n < 3:
        return [[(round_index + j) % n for j in range(n)]]
    ref = names.index(pair_with)
    others = [i for i in range(n) if i != ref]
    rotated = [others[(round_index + j) % len(others)] for j in range(len(others))]
    return [[i, ref] if (round_index + j) % 2 == 0 else [ref, i] for j, i in enumerate(rotated)]


def _time_samples(ctx: RankContext, fns: list, launches: int, queue_ms: float = 0.0) -> list:
    """``[(position, ms, host_ms)]``: ``launches`` launches of each of ``fns`` back to back, in that
    order (CUDA events, synchronised once at the end; the wall clock on the CPU, where a launch
    runs as it is queued and the host's time is the launches' own), and the host's time to queue
    them (``time.perf_counter``). On a GPU the stream first sleeps about ``queue_ms``
    (``torch.cuda._sleep``), so that the host has queued the first launches before the GPU
    reaches them: the samples time the GPUs' work, not the host's pace. A device barrier after
    the sleep (queued, the host not waiting) starts every rank's first sample together: the
    ranks' sleeps end apart (two H200s: milliseconds, all of it timed in the first contender's
    sample without the barrier, bench/results/dist_gemm_h200x2_queued/). Without the sleep the
    first contender of a block was timed at the host's pace wherever queueing a launch took
    about as long as running it: AG + GEMM's push_copy_engine (four copies and four signal
    kernels a launch, CE_GROUPS=4, its default then) at llama70b-qkv-4k on two H200s, 0.55 ms a launch first after a barrier
    and 0.46 queued behind torch + NCCL, the host taking 0.44 ms to queue one (2026-11-26,
    bench/results/pce_modes_h200x2/)."""
    if ctx.device == "cuda":
        import torch
        if queue_ms > 0:
            torch.cuda._sleep(int(queue_ms * _sleep_cycles_per_ms()))
            ctx.heap.device_barrier()   # the ranks' sleeps differ: their first samples start together
        events = []
        for fn in fns:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            queued = time.perf_counter()
            for _ in range(launches):
                fn()
            events.append((start, end, (time.perf_counter() - queued) * 1e3))
            end.record()
        torch.cuda.synchronize()
        return [(k, start.elapsed_time(end), host) for k, (start, end, host) in enumerate(events)]
    out = []
    for k, fn in enumerate(fns):
        ms = _time_block(ctx, fn, launches)
        out.append((k, ms, ms))
    return out


_SLEEP_CYCLES_PER_MS: list = []


def _sleep_cycles_per_ms() -> float:
    """``torch.cuda._sleep``'s clock cycles per millisecond on this GPU, measured once (CUDA
    events around a sleep of 10^7 cycles): the sleep spins on the SM clock, whose rate this is."""
    if not _SLEEP_CYCLES_PER_MS:
        import torch
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(1_000_000)   # the clock up from idle first
        start.record()
        torch.cuda._sleep(10_000_000)
        end.record()
        end.synchronize()
        _SLEEP_CYCLES_PER_MS.append(10_000_000 / max(start.elapsed_time(end), 1e-3))
    return _SLEEP_CYCLES_PER_MS[0]


def _slowest(everyone: list, rounds: int, contenders: int) -> list:
    """Per round and contender, the slowest rank's time (``everyone``: every rank's times)."""
    return [[max(rank_times[r][i] for rank_times in everyone) for i in range(contenders)] for r in range(rounds)]


def _settled(slowest: list, settle: float) -> bool:
    """Every contender's interquartile range within ``settle`` of its median."""
    for i in range(len(slowest[0])):
        column = [row[i] for row in slowest]
        median = statistics.median(column)
        if not median > 0 or _iqr(column) > settle * median:
            return False
    return True


def _settling(request: dict) -> dict:
    """The early-stop settings of a request (``min_rounds``, ``settle``; none: every round) and its
    pairing (``pair_with``: ``"torch_nccl"`` when the request asks for ``paired`` timing)."""
    return {"min_rounds": request.get("min_rounds"), "settle": float(request.get("settle") or 0.0),
            "pair_with": "torch_nccl" if request.get("paired") else None}


def _time_block(ctx: RankContext, fn, launches: int) -> float:
    """Milliseconds of ``launches`` launches of ``fn`` on this rank, synchronised."""
    if ctx.device == "cuda":
        import torch
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(launches):
            fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end)
    started = time.perf_counter()
    for _ in range(launches):
        fn()
    return (time.perf_counter() - started) * 1e3


def _iqr(values: list) -> float:
    if len(values) < 2:
        return 0.0
    q = statistics.quantiles(values, n=4)
    return q[2] - q[0]


# --------------------------------------------------------------------------- helpers
def _with_problems(spec, problems: dict):
    """``spec`` with the request's named problems added (the user's shape, the check problem
    sized for the candidate's tiles)."""
    return dataclasses.replace(spec, problems={**spec.problems, **problems})


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:400]}"


def _die_with_parent() -> None:
    """SIGKILL this process when the supervisor dies (Linux ``PR_SET_PDEATHSIG``)."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)


def _redirect_output(path: Path) -> None:
    """This process's stdout and stderr (file descriptors 1 and 2) into ``path``: what candidate
    code prints never reaches the supervisor's protocol stream."""
    sys.stdout.flush()
    sys.stderr.flush()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
