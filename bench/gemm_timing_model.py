"""When the bundled GEMM's programs compute each tile, modelled on a CPU (issue #43): the schedule
bench/gemm_schedule_probe.py measures on a GPU, made without one, in the same format, so that
``bench/validate_simulator.py compare --schedules`` replays it as it replays a measured one.

The measured schedules (bench/results/l2_merge_h100/call3/) say that the L2 lookups ncu counts
depend on which programs of one SM group read a block together, and that how many stay together
differs by order: most of a group in the first wave, 2-3 of 15 later under the grouped orders, none
row-major. A lockstep simulator keeps every program together forever. This model lets them drift:

- The persistent loop as kernels/gemm.py runs it: program ``p`` (one per SM, on SM ``p``) computes
  tiles ``p``, ``p + P``, ... (``P`` = the spec's ``compute_units``), each a loop of k-steps.
- A k-step computes for ``C = 2 BLOCK_M BLOCK_N BLOCK_K / (peak_bf16_flops / compute_units)`` ns
  (the spec's peak, shared evenly by the SMs); its operands are issued ``num_stages - 1`` steps
  ahead (the software pipeline: the first ``num_stages - 1`` at the tile's start, then step
  ``k``'s when step ``k - num_stages + 1`` starts) and it starts when the step before it has
  finished and its operands have arrived.
- A read merges with its group's lookup of the same block made at most ``window_ns`` earlier,
  ``readers_per_lookup`` reads a lookup (l2sim.MergeModel, ``falloff="none"``), and arrives with
  it; groups are ``group_size`` consecutive programs (the dispatcher fills one group with
  consecutive program ids, measured on one H100). Otherwise the lookup waits for the L2's
  bandwidth (the spec's ``l2_bytes_per_s``, one queue) and then: a hit in the SM's partition
  (an LRU by bytes of ``l2_bytes_per_domain``, the partition of program ``p`` as
  ``l2sim.program_domains`` hashes it) arrives ``LATENCY_NS["hit"]`` later, a block the other
  partition holds ``LATENCY_NS["peer"]``, else a DRAM read after the DRAM's queue (the spec's
  ``dram_bytes_per_s``) ``LATENCY_NS["dram"]``; a read of a block already on its way from DRAM to
  that partition arrives with it. Each lookup's latency has an added exponential delay of mean
  ``noise_ns``: the one parameter not taken from the spec or a measurement, chosen on the build
  orders (``--noise``).

It is a model of this kernel's loop (one tl.dot per k-step, operands A and B), not of any kernel:
the trace's steps whose every access is a store are its epilogue, not timed.

    python -m bench.gemm_timing_model --hw h100 --orders row-major,grouped-m:8 --noise 100 --out DIR

writes ``DIR/schedule.json.gz``, ``DIR/partition_map.json`` and ``DIR/groups.json``, the three
inputs of ``compare --schedules --partition-map --groups``.
"""
from __future__ import annotations

import argparse
import gzip
import json
import tempfile
from collections import OrderedDict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
#: ns from a load's issue to its data, unloaded: the dispatch probe's pointer chase on an H200
#: (bench/results/simulator_validation.md, "A miss the other partition holds is served by it",
#: 2026-11-22): 290 cycles a load from the own partition, 376 from the other, 693 from DRAM, at
#: the 1.98 GHz SM clock the probe ran at.
LATENCY_NS = {"hit": 290 / 1.98, "peer": 376 / 1.98, "dram": 693 / 1.98}
#: Programs of one merge group: the dispatcher filled one group with consecutive program ids
#: (programs 8-23 on one group of 16 SMs, 24-39 on the next; bench/results/l2_merge_h100/call3).
GROUP_SIZE = 16


def model_schedule(trace, order: np.ndarray, hw, meta: dict, noise_ns: float, seed: int = 0,
                   window_ns: float = 36.0, readers_per_lookup: int = 4, group_size: int = GROUP_SIZE) -> dict:
    """The modelled schedule of the persistent GEMM under ``order`` (``order[t]``: the logical tile
    of the loop's tile ``t``, as ``program_order`` gives it): ``smid``, ``program``, ``began_ns``,
    ``ended_ns`` per tile (lists, ns from the launch), as bench/gemm_schedule_probe.py's rows.

    ``trace``: the GEMM's TileTrace (kernels/gemm.py's access model); ``hw``: a HardwareSpec;
    ``meta``: BLOCK_M, BLOCK_N, BLOCK_K, num_stages; ``noise_ns`` (ns, >= 0): the mean of each
    lookup's added exponential delay; ``seed`` fixes its draws.

    Raises:
        ValueError: a negative noise, a meta without those keys, a spec without the peak, the
            bandwidths or two L2 partitions.
    """
    from swizzleperf.profiling.l2sim import program_domains
    if not noise_ns >= 0:
        raise ValueError(f"noise_ns must be 0 or more, not {noise_ns!r}")
    missing = [k for k in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "num_stages") if k not in meta]
    if missing:
        raise ValueError(f"meta lacks {', '.join(missing)}")
    if not (hw.peak_bf16_flops and hw.dram_bytes_per_s and hw.l2_bytes_per_s and hw.l2_domains == 2):
        raise ValueError(f"{hw.name}: the model needs peak_bf16_flops, dram_bytes_per_s, l2_bytes_per_s and 2 L2 "
                         f"partitions")
    rng = np.random.default_rng(seed)
    programs = hw.compute_units
    keys, writes = trace.keys[order], trace.writes()[order]
    tiles = keys.shape[0]
    timed = [s for s in range(keys.shape[1]) if not (writes[:, s] | (keys[:, s] < 0)).all()]
    compute_ns = 2 * meta["BLOCK_M"] * meta["BLOCK_N"] * meta["BLOCK_K"] / (hw.peak_bf16_flops / programs) * 1e9
    ahead = max(0, int(meta["num_stages"]) - 1)
    part = program_domains(programs, 2, "hashed_domains")
    group = np.arange(programs) // group_size
    nbytes = trace.block_bytes
    ns_l2, ns_dram = 1e9 / hw.l2_bytes_per_s, 1e9 / hw.dram_bytes_per_s
    lru, used = [OrderedDict(), OrderedDict()], [0, 0]
    on_way: dict = {}          # (partition, block) -> when its fill from DRAM or the peer arrives
    lookups: dict = {}         # (group, block) -> [issued, reads served, arrival]
    free = {"l2": 0.0, "dram": 0.0}
    began, ended = np.zeros(tiles), np.zeros(tiles)
    start = np.zeros(programs)
    counts = np.array([len(range(p, tiles, programs)) for p in range(programs)])

    def keep(d: int, block: int) -> None:
        cache = lru[d]
        if block in cache:
            cache.move_to_end(block)
            return
        cache[block] = None
        used[d] += int(nbytes[block])
        while used[d] > hw.l2_bytes_per_domain:
            used[d] -= int(nbytes[cache.popitem(last=False)[0]])

    def arrival(p: int, block: int, at: float) -> float:
        entry = lookups.get((group[p], block))
        if entry is not None and at - entry[0] <= window_ns and entry[1] < readers_per_lookup:
            entry[1] += 1
            return entry[2]
        b, d = int(nbytes[block]), int(part[p])
        free["l2"] = max(at, free["l2"]) + b * ns_l2
        ready, fill = free["l2"], on_way.get((d, block))
        if fill is not None and fill >= ready:
            got = fill
        elif block in lru[d]:
            lru[d].move_to_end(block)
            got = ready + LATENCY_NS["hit"] + rng.exponential(noise_ns) if noise_ns else ready + LATENCY_NS["hit"]
        else:
            if block in lru[1 - d]:
                lru[1 - d].move_to_end(block)
                got = ready + LATENCY_NS["peer"]
            else:
                free["dram"] = max(ready, free["dram"]) + b * ns_dram
                got = free["dram"] + LATENCY_NS["dram"]
            got += rng.exponential(noise_ns) if noise_ns else 0.0
            on_way[(d, block)] = got
            keep(d, block)
        lookups[(group[p], block)] = [at, 1, got]
        return got

    for i in range(int(counts.max())):
        active = np.flatnonzero(counts > i)
        tile_of = {p: p + i * programs for p in active}
        for p in active:
            began[tile_of[p]] = start[p]
        step_start = np.zeros((programs, len(timed)))
        for k, step in enumerate(timed):
            # the pipeline's prologue issues the first ``ahead`` steps' operands at the tile's start;
            # step k - ahead's start issues step k's (none ahead: when the step before has computed)
            if ahead:
                issued = {p: (start[p] if k < ahead else step_start[p, k - ahead]) for p in active}
            else:
                issued = {p: (start[p] if k == 0 else step_start[p, k - 1] + compute_ns) for p in active}
            ready = {}
            for p in sorted(active, key=lambda q: issued[q]):
                reads = [int(b) for b, w in zip(keys[tile_of[p], step], writes[tile_of[p], step]) if b >= 0 and not w]
                ready[p] = max([issued[p]] + [arrival(p, b, issued[p]) for b in reads])
            for p in active:
                before = start[p] if k == 0 else step_start[p, k - 1] + compute_ns
                step_start[p, k] = max(before, ready[p])
        for p in active:
            ended[tile_of[p]] = start[p] = step_start[p, -1] + compute_ns
    program = [t % programs for t in range(tiles)]
    return {"smid": program, "program": program, "began_ns": began.round(1).tolist(),
            "ended_ns": ended.round(1).tolist(),
            "model": (f"bench/gemm_timing_model.py: C {compute_ns:.0f} ns a k-step, {ahead} steps ahead, "
                      f"noise {noise_ns:g} ns, groups of {group_size}, window {window_ns:g} ns, seed {seed}")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hw", default="h100")
    parser.add_argument("--orders", required=True, help="catalog orders, comma-separated")
    parser.add_argument("--noise", type=float, required=True, help="ns: each lookup's mean added delay")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--meta", default="BLOCK_M=128,BLOCK_N=256,BLOCK_K=64,num_stages=4",
                        help="the measured launch's (bench/gemm_schedule_probe.py META)")
    parser.add_argument("--out", required=True, help="a folder: schedule.json.gz, partition_map.json, groups.json")
    args = parser.parse_args()
    from bench.validate_simulator import _order_source
    from swizzleperf.agent.verification.load import load_kernel
    from swizzleperf.agent.verification.simulate import kernel_trace, program_order
    from swizzleperf.hwspecs import load_spec
    from swizzleperf.profiling.l2sim import program_domains
    hw = load_spec(args.hw)
    meta = {k: int(v) for k, v in (item.split("=") for item in args.meta.split(","))}
    kernel = ROOT / "kernels" / "gemm.py"
    source, (module, kernel_spec) = kernel.read_text(), load_kernel(kernel)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows, trace = [], None
    for name in args.orders.split(","):
        with tempfile.TemporaryDirectory() as folder:
            target = Path(folder) / "target.py"
            target.write_text(_order_source(name, source, module, kernel_spec))
            spec, order, _ = program_order(kernel, None, target, {})
        trace = trace or kernel_trace(kernel, spec, {}, traced=False)
        rows.append({"order": name, "meta": meta, "tiles": int(len(order)),
                     **model_schedule(trace, order, hw, meta, args.noise, args.seed)})
        print(f"{name}: modelled, tiles {np.median(np.subtract(rows[-1]['ended_ns'], rows[-1]['began_ns'])) / 1e3:.1f} us "
              f"(median)", flush=True)
    (out / "schedule.json.gz").write_bytes(gzip.compress(json.dumps({"device": f"modelled:{hw.name}", "orders": rows}).encode()))
    programs = hw.compute_units
    (out / "partition_map.json").write_text(json.dumps(
        {"partition_of_sm": program_domains(programs, 2, "hashed_domains").tolist(), "source": "l2sim.program_domains"}))
    (out / "groups.json").write_text(json.dumps(
        {"groups": [list(range(g, min(g + GROUP_SIZE, programs))) for g in range(0, programs, GROUP_SIZE)],
         "source": f"bench/gemm_timing_model.py: {GROUP_SIZE} consecutive programs a group"}))


if __name__ == "__main__":
    main()
