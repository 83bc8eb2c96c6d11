"""When a pipelined ``tl.dot`` kernel's programs compute each tile, modelled on a CPU (issue #43):
the schedule ``bench/gemm_schedule_probe.py`` measures on a GPU (each tile's SM, start and end),
made without one, so that ``l2sim.simulate_schedule`` replays the accesses at the times they would
happen and merges the reads of programs in step, as the L2 of an H100 was measured to.

Why: a lockstep simulator keeps every program in step forever. The measured schedules
(bench/results/l2_merge_h100/call3/) say the L2 lookups ncu counts depend on which programs of one
SM group read a block together, and that how many stay together differs by order (most of a group
in the first wave; 2-3 of 15 later under the grouped orders, none row-major). This model lets them
drift:

- Program ``p`` (one per SM, on SM ``p``) computes tiles ``p``, ``p + P``, ... (``P`` the spec's
  ``compute_units``): the persistent loop, and where a grid has one program per tile, the next
  tile taken by the SM that ran the one ``P`` before it.
- A k-step (a step of the trace with a read) computes for ``step_ns``: the kernel's FLOPs over its
  tiles' k-steps at the spec's peak shared evenly by the SMs. Its operands are issued ``ahead``
  (``num_stages - 1``) steps ahead: the first ``ahead`` at the tile's start, then step ``k``'s when
  step ``k - ahead`` starts; it starts when the step before has computed and its operands arrived.
  Steps whose every access is a store (the epilogue) are not timed.
- A read merges with its group's lookup of the same block made at most ``window_ns`` earlier,
  ``readers_per_lookup`` reads a lookup, and arrives with it; a group is ``group_size``
  consecutive programs. Otherwise it waits for the L2's bandwidth (the spec's ``l2_bytes_per_s``,
  one queue), then: a hit in its partition (an LRU by bytes of ``l2_bytes_per_domain``) arrives
  ``LATENCY_NS["hit"]`` later, a block the other partition holds ``LATENCY_NS["peer"]``, else a
  DRAM read after the DRAM's queue (``dram_bytes_per_s``) ``LATENCY_NS["dram"]``; a read of a
  block already on its way to that partition arrives with it. Each lookup adds an exponential
  delay of mean ``noise_ns``, the one parameter chosen by a fit (on an H100's build orders only).

The validation (bench/results/simulator_validation.md, "The schedule modelled on a CPU"): on one
H100's four held-out GEMM orders the replay of this schedule came within 3.8 points of ncu's SM
read hit rate on average (lockstep 7.0), every pair ranked as ncu ranks them; on an H200's ten
orders 5.0 (lockstep 4.9), its DRAM bytes within 6 % (lockstep 25 %). It models a loop of one
``tl.dot`` per k-step with one program on each SM; :func:`for_kernel` says where it applies.
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

#: ns from a load's issue to its data, unloaded: the dispatch probe's pointer chase on an H200
#: (bench/results/simulator_validation.md, "A miss the other partition holds is served by it",
#: 2026-11-22): 290 cycles a load from the own partition, 376 from the other, 693 from DRAM, at
#: the 1.98 GHz SM clock the probe ran at.
LATENCY_NS = {"hit": 290 / 1.98, "peer": 376 / 1.98, "dram": 693 / 1.98}
#: Programs of one merge group: the dispatcher filled one group of 16 SMs with consecutive program
#: ids (programs 8-23 on one group, 24-39 on the next; one H100, bench/results/l2_merge_h100/call3).
GROUP_SIZE = 16
#: ns a read stays mergeable with its group's lookup: the window that fit the build orders of the
#: H100's measured GEMM schedules best (``validate_simulator merge-scan``,
#: bench/results/l2_merge_h100/call3/compare/merge_scan_build.md; about one 32 ns timer step).
WINDOW_NS = 36.0
#: Reads one lookup serves, its own included: N SMs of one group reading a line at once made about
#: 1 + (N - 1) / 4 lookups (the merge probe's ``together-N`` cases, one H100, 2026-12-06).
READERS_PER_LOOKUP = 4
#: ns, the mean added delay of each lookup: chosen on the four build orders of one H100 alone
#: (bench/results/gemm_timing_model/COMMAND.md: build MAE 7.8 points at 0, 3.5 at 400, 3.9 at 800).
NOISE_NS = 400.0
#: Triton's default ``num_stages`` on NVIDIA GPUs (triton.Config), for a launch that names none.
DEFAULT_NUM_STAGES = 3
#: Exponential draws made at a time (the same values as one draw at a time from the same seed).
_DRAWS = 1 << 16


@dataclass(frozen=True)
class ScheduleModel:
    """The parameters of one modelled schedule (module docstring).

    Attributes:
        step_ns: ns one k-step computes (> 0).
        ahead: k-steps whose operands are in flight before a step starts (``num_stages - 1``, >= 0).
        noise_ns: mean of each lookup's added exponential delay, ns (>= 0).
        window_ns, readers_per_lookup, group_size: the merge of reads (module constants).
        seed: the noise's draws.

    Raises:
        ValueError: a value outside its range."""
    step_ns: float
    ahead: int
    noise_ns: float = NOISE_NS
    window_ns: float = WINDOW_NS
    readers_per_lookup: int = READERS_PER_LOOKUP
    group_size: int = GROUP_SIZE
    seed: int = 0

    def __post_init__(self) -> None:
        if not (self.step_ns > 0 and self.ahead >= 0 and self.noise_ns >= 0 and self.window_ns >= 0
                and self.readers_per_lookup >= 1 and self.group_size >= 1):
            raise ValueError(f"a schedule model needs step_ns > 0, ahead, noise_ns and window_ns >= 0, and "
                             f"readers_per_lookup, group_size >= 1: {self!r}")

    def describe(self) -> str:
        """One line: what the schedule was modelled with."""
        return (f"profiling/schedule_model.py: {self.step_ns:.0f} ns a k-step, operands {self.ahead} steps "
                f"ahead, noise {self.noise_ns:g} ns, groups of {self.group_size}, window {self.window_ns:g} ns, "
                f"seed {self.seed}")


def for_kernel(hw, flops: float | None, compute: str, trace, meta: dict) -> ScheduleModel | None:
    """The schedule model of one launch, or None where this model does not describe it: a kernel
    whose compute is not ``"matrix"`` (``tl.dot``; KernelSpec.compute), without a FLOP count, with
    more than one program resident on an SM (``trace.programs_per_cu``), or a spec that is not an
    NVIDIA GPU with two L2 partitions, a matrix peak and both bandwidths.

    ``flops``: the problem's FLOPs; ``meta``: the launch's meta-parameters (``num_stages``, else
    Triton's default ``DEFAULT_NUM_STAGES``). ``step_ns`` is ``flops`` over the tiles' timed
    k-steps at ``peak_bf16_flops`` shared by the ``compute_units``."""
    if (compute != "matrix" or not flops or flops <= 0 or trace.programs_per_cu != 1
            or hw.vendor != "nvidia" or hw.l2_domains != 2
            or not (hw.peak_bf16_flops and hw.dram_bytes_per_s and hw.l2_bytes_per_s)):
        return None
    steps = int(_timed_mask(trace.keys, trace.writes()).sum())
    if steps == 0:
        return None
    step_flops = float(flops) / steps
    stages = meta.get("num_stages", DEFAULT_NUM_STAGES)
    return ScheduleModel(step_ns=step_flops / (hw.peak_bf16_flops / hw.compute_units) * 1e9,
                         ahead=max(0, int(stages) - 1))


def _timed_mask(keys: np.ndarray, writes: np.ndarray) -> np.ndarray:
    """bool ``[tiles, steps]``: the steps of each tile with at least one read."""
    return ((keys >= 0) & ~writes).any(axis=2)


def model_schedule(trace, order: np.ndarray, hw, model: ScheduleModel, partition_of_program) -> dict:
    """The modelled schedule under ``order`` (``order[t]``: the logical tile the loop's tile ``t``
    computes): ``smid``, ``program`` (``t % P``), ``began_ns``, ``ended_ns`` per tile (lists, ns
    from the launch), as ``l2sim.simulate_schedule`` takes them, and ``model``, one line.

    ``trace``: the kernel's TileTrace; ``hw``: its HardwareSpec (``compute_units``, the L2's
    partitions and bandwidths); ``partition_of_program``: the L2 partition (0 or 1) of each of the
    ``compute_units`` programs, int ``[P]``.

    Raises:
        ValueError: a spec without the bandwidths or two L2 partitions, or a partition map that is
            not one 0 or 1 per program."""
    programs = hw.compute_units
    part = [int(d) for d in np.asarray(partition_of_program).tolist()]
    if not (hw.dram_bytes_per_s and hw.l2_bytes_per_s and hw.l2_domains == 2):
        raise ValueError(f"{hw.name}: the schedule model needs dram_bytes_per_s, l2_bytes_per_s and 2 L2 partitions")
    if len(part) != programs or any(d not in (0, 1) for d in part):
        raise ValueError(f"the partition map must give 0 or 1 for each of the {programs} programs")
    keys, writes = trace.keys[order], trace.writes()[order]
    tiles = keys.shape[0]
    timed = np.flatnonzero(_timed_mask(keys, writes).any(axis=0))
    reads = np.where(writes | (keys < 0), -1, keys)[:, timed, :].tolist()   # [tile][k-step][access]
    n_steps, step_ns, ahead = len(timed), float(model.step_ns), model.ahead
    nbytes = trace.block_bytes.astype(np.int64).tolist()
    n_blocks = len(nbytes)
    group = [p // model.group_size for p in range(programs)]
    ns_l2, ns_dram = 1e9 / hw.l2_bytes_per_s, 1e9 / hw.dram_bytes_per_s
    capacity, window, per_lookup = hw.l2_bytes_per_domain, model.window_ns, model.readers_per_lookup
    hit_ns, peer_ns, dram_ns = LATENCY_NS["hit"], LATENCY_NS["peer"], LATENCY_NS["dram"]
    rng, noise = np.random.default_rng(model.seed), model.noise_ns
    draws, drawn = [], 0
    lru, used = [OrderedDict(), OrderedDict()], [0, 0]
    on_way: dict = {}      # partition * n_blocks + block -> when its fill from DRAM or the peer arrives
    lookups: dict = {}     # group * n_blocks + block -> [issued, reads served, arrival]
    free_l2 = free_dram = 0.0
    began, ended = [0.0] * tiles, [0.0] * tiles
    start = [0.0] * programs
    for first in range(0, tiles, programs):
        active = range(min(programs, tiles - first))
        for p in active:
            began[first + p] = start[p]
        done = [start[p] for p in active]         # when each program's step before this one computed
        history: list = []                        # each k-step's start per program
        for k in range(n_steps):
            # the pipeline's prologue issues the first ``ahead`` steps' operands at the tile's start;
            # step k - ahead's start issues step k's (none ahead: when the step before has computed)
            if ahead:
                issued = [start[p] for p in active] if k < ahead else history[k - ahead]
            else:
                issued = done
            ready = issued[:]
            for p in sorted(active, key=issued.__getitem__):
                at, got_all, g, d = issued[p], issued[p], group[p], part[p]
                for block in reads[first + p][k]:
                    if block < 0:
                        continue
                    key = g * n_blocks + block
                    entry = lookups.get(key)
                    if entry is not None and at - entry[0] <= window and entry[1] < per_lookup:
                        entry[1] += 1
                        got = entry[2]
                    else:
                        b = nbytes[block]
                        free_l2 = (at if at > free_l2 else free_l2) + b * ns_l2
                        ready_at, way = free_l2, d * n_blocks + block
                        fill, cache = on_way.get(way), lru[d]
                        if fill is not None and fill >= ready_at:
                            got = fill
                        else:
                            held = block in cache
                            if held:
                                cache.move_to_end(block)
                                got = ready_at + hit_ns
                            elif block in lru[1 - d]:
                                lru[1 - d].move_to_end(block)
                                got = ready_at + peer_ns
                            else:
                                free_dram = (ready_at if ready_at > free_dram else free_dram) + b * ns_dram
                                got = free_dram + dram_ns
                            if noise:
                                if drawn == len(draws):
                                    draws, drawn = rng.exponential(noise, _DRAWS).tolist(), 0
                                got += draws[drawn]
                                drawn += 1
                            if not held:   # filled from the peer or DRAM: on its way, then kept
                                on_way[way] = got
                                cache[block] = None
                                total = used[d] + b
                                while total > capacity:
                                    total -= nbytes[cache.popitem(last=False)[0]]
                                used[d] = total
                        lookups[key] = [at, 1, got]
                    if got > got_all:
                        got_all = got
                ready[p] = got_all
            began_k = [r if r > before else before for before, r in zip(done, ready)]
            history.append(began_k)
            done = [s + step_ns for s in began_k]
        for p in active:
            ended[first + p] = start[p] = done[p]
    program = [t % programs for t in range(tiles)]
    return {"smid": program, "program": program, "began_ns": [round(x, 1) for x in began],
            "ended_ns": [round(x, 1) for x in ended], "model": model.describe()}
