"""profiling/schedule_model.py: a pipelined tl.dot kernel's schedule modelled on a CPU (issue #43),
and ``l2sim.simulate(schedule=...)``, which replays the accesses at the modelled times. Times worked
by hand; programs in step stay in step without noise and drift with it; reads of one group merge;
where the model applies and where it does not."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from swizzleperf.hwspecs import HardwareSpec, load_spec
from swizzleperf.kernels.trace import TileTrace
from swizzleperf.profiling import l2sim
from swizzleperf.profiling.schedule_model import LATENCY_NS, ScheduleModel, for_kernel, model_schedule

PROGRAMS, STEPS = 4, 3


def _hw(**changes) -> HardwareSpec:
    """``PROGRAMS`` SMs, two L2 partitions of 1 GiB; DRAM 1 000 bytes a ns, L2 10 000 a ns."""
    hw = HardwareSpec(name="toy", display_name="toy", vendor="nvidia", arch="test", compute_units=PROGRAMS,
                      l2_domains=2, l2_partitions=2, l2_bytes_per_domain=1 << 30, l2_line_bytes=128,
                      l2_sector_bytes=32, l2_associativity=None, llc_bytes=0, dram_bytes_per_s=1e12,
                      peak_bf16_flops=1e15, shared_memory_per_cu_bytes=0, l1_bytes_per_cu=0,
                      dispatch="hashed_domains", domain_miss_path="peer_domains", l2_bytes_per_s=1e13)
    return dataclasses.replace(hw, **changes)


def _trace(tiles_steps, nbytes=1000, programs_per_cu=1) -> TileTrace:
    """``tiles_steps[t]``: tile t's steps, each a list of blocks read; then one store a tile."""
    tiles, steps = len(tiles_steps), max(len(s) for s in tiles_steps)
    acc = max(2, max(len(step) for s in tiles_steps for step in s))
    reads = max(b for s in tiles_steps for step in s for b in step) + 1
    keys = np.full((tiles, steps + 1, acc), -1, dtype=np.int64)
    for t, s in enumerate(tiles_steps):
        for k, step in enumerate(s):
            keys[t, k, :len(step)] = step
        keys[t, steps, 0] = reads + t
    is_write = np.zeros(reads + tiles, dtype=bool)
    is_write[reads:] = True
    return TileTrace(keys, np.full(reads + tiles, nbytes, dtype=np.int64), is_write, programs_per_cu, "test")


def _shared_trace() -> TileTrace:
    """Two waves of ``PROGRAMS`` tiles, every tile reading the same two blocks a step."""
    return _trace([[[2 * k, 2 * k + 1] for k in range(STEPS)] for _ in range(2 * PROGRAMS)])


def _own_trace() -> TileTrace:
    """Two waves of ``PROGRAMS`` tiles, each tile reading blocks of its own."""
    return _trace([[[2 * STEPS * t + 2 * k, 2 * STEPS * t + 2 * k + 1] for k in range(STEPS)]
                   for t in range(2 * PROGRAMS)])


def test_one_program_two_steps_timed_by_hand():
    """One program reads block 0, then block 1, each from DRAM: the L2's queue 0.1 ns (1 000 bytes
    at 10 000 a ns), DRAM's 1 ns, then DRAM's latency. Without operands ahead the second read is
    issued when the first step has computed; one step ahead, when the first step starts."""
    hw, trace = _hw(compute_units=1), _trace([[[0], [1]]])
    dram = LATENCY_NS["dram"]
    first = 0.1 + 1.0 + dram                                     # 351.1 ns
    got = model_schedule(trace, np.arange(1), hw, ScheduleModel(step_ns=100.0, ahead=0, noise_ns=0.0), [0])
    assert got["began_ns"] == [0.0]
    assert got["ended_ns"][0] == pytest.approx(2 * (first + 100.0), abs=0.05)
    ahead = model_schedule(trace, np.arange(1), hw, ScheduleModel(step_ns=100.0, ahead=1, noise_ns=0.0), [0])
    assert ahead["ended_ns"][0] == pytest.approx(2 * first + 100.0, abs=0.05)


def test_programs_reading_the_same_blocks_stay_in_step_without_noise():
    model = ScheduleModel(step_ns=1000.0, ahead=1, noise_ns=0.0)
    got = model_schedule(_shared_trace(), np.arange(2 * PROGRAMS), _hw(), model, [0, 1, 0, 1])
    began, ended = np.array(got["began_ns"]), np.array(got["ended_ns"])
    assert got["smid"] == got["program"] == [t % PROGRAMS for t in range(2 * PROGRAMS)]
    assert (began[:PROGRAMS] == 0).all() and len(set(began[PROGRAMS:])) == 1   # the second wave together
    assert (began[PROGRAMS:] == ended[:PROGRAMS]).all()                       # the next tile at once
    # the first step waits for DRAM (two reads queued: 0.1 + 0.1 ns at the L2, 1 + 1 ns at DRAM)
    assert ended[0] == pytest.approx(0.2 + 2.0 + LATENCY_NS["dram"] + STEPS * 1000.0, abs=0.5)


def test_with_noise_programs_reading_blocks_of_their_own_drift_apart():
    hw = _hw(dram_bytes_per_s=1e18, l2_bytes_per_s=1e18)                       # no queue forms
    quiet = model_schedule(_own_trace(), np.arange(2 * PROGRAMS), hw, ScheduleModel(1000.0, 1, noise_ns=0.0),
                           [0, 1, 0, 1])
    noisy = model_schedule(_own_trace(), np.arange(2 * PROGRAMS), hw, ScheduleModel(1000.0, 1, 2000.0, seed=3),
                           [0, 1, 0, 1])
    assert len(set(quiet["began_ns"][PROGRAMS:])) == 1
    assert len(set(noisy["began_ns"][PROGRAMS:])) == PROGRAMS
    again = model_schedule(_own_trace(), np.arange(2 * PROGRAMS), hw, ScheduleModel(1000.0, 1, 2000.0, seed=3),
                           [0, 1, 0, 1])
    assert again == noisy                                                      # the seed fixes the draws
    assert min(np.subtract(noisy["ended_ns"], quiet["ended_ns"])) > 0          # a delay is never negative


@pytest.mark.parametrize("group_size, merged", [(16, True), (1, False)])
def test_reads_of_one_group_in_step_merge_and_of_two_groups_do_not(group_size, merged):
    """Two programs on one partition read block 0 at once: in one group the second read is served
    by the first's lookup (merged, never looked up); in two groups it is looked up, and hits the
    fill on its way. Either way it arrives with the first."""
    hw, trace = _hw(compute_units=2), _trace([[[0]], [[0]]])
    model = ScheduleModel(step_ns=100.0, ahead=0, noise_ns=0.0, group_size=group_size)
    got = model_schedule(trace, np.arange(2), hw, model, [0, 0])
    assert got["ended_ns"][0] == got["ended_ns"][1]
    groups = np.arange(2) // group_size
    merge = l2sim.MergeModel(window=model.window_ns, window_unit="ns", falloff="none")
    result = l2sim.simulate_schedule(trace, np.arange(2), hw, got, [0, 0], groups, merge)
    assert result.merged_bytes == (1000 if merged else 0)
    assert result.l2_read_bytes == (1000 if merged else 2000)


def test_simulate_with_a_schedule_replays_the_modelled_times_and_keys_its_cache(monkeypatch, tmp_path):
    monkeypatch.setenv(l2sim.CACHE_ENV, str(tmp_path / "cache"))
    trace, hw, order = _shared_trace(), _hw(), np.arange(2 * PROGRAMS)
    lockstep = l2sim.simulate(trace, order, hw)
    model = ScheduleModel(step_ns=1000.0, ahead=1, noise_ns=0.0)
    timed = l2sim.simulate(trace, order, hw, schedule=model)
    assert "at the times modelled (profiling/schedule_model.py: 1000 ns a k-step" in timed.model
    assert "reads merged within each of 1 SM groups" in timed.model
    assert "advancing step by step" in lockstep.model and "modelled" not in lockstep.model
    assert timed.merged_bytes > 0 and lockstep.merged_bytes == 0
    again = l2sim.simulate(trace, order, hw, schedule=model)                  # from the cache: the same
    assert dataclasses.replace(again, seconds=0) == dataclasses.replace(timed, seconds=0)
    other = l2sim.simulate(trace, order, hw, schedule=dataclasses.replace(model, group_size=1))
    assert other.merged_bytes == 0                                             # another model, another key


def test_for_kernel_times_a_k_step_at_the_specs_peak_share_of_one_sm():
    from swizzleperf.kernels.gemm import SPEC
    problem, meta = {"M": 512, "N": 512, "K": 256}, {**SPEC.meta, "num_stages": 4}
    trace, h100 = SPEC.trace(problem, meta), load_spec("h100")
    model = for_kernel(h100, SPEC.flops(problem), SPEC.compute, trace, meta)
    step_flops = 2 * meta["BLOCK_M"] * meta["BLOCK_N"] * meta["BLOCK_K"]
    assert model.step_ns == pytest.approx(step_flops / (h100.peak_bf16_flops / h100.compute_units) * 1e9)
    assert model.ahead == 3
    no_stages = for_kernel(h100, SPEC.flops(problem), SPEC.compute, trace, {"BLOCK_M": 128})
    assert no_stages.ahead == 2                                                # Triton's default: 3 stages


@pytest.mark.parametrize("why", ["amd", "vector", "two_resident", "no_flops", "one_partition"])
def test_for_kernel_leaves_to_lockstep_what_it_does_not_model(why):
    from swizzleperf.kernels.gemm import SPEC
    problem, meta = {"M": 512, "N": 512, "K": 256}, dict(SPEC.meta)
    trace, hw, flops, compute = SPEC.trace(problem, meta), load_spec("h100"), SPEC.flops(problem), "matrix"
    if why == "amd":
        hw = load_spec("mi300x")
    elif why == "vector":
        compute = "vector"
    elif why == "two_resident":
        trace = dataclasses.replace(trace, programs_per_cu=2)
    elif why == "no_flops":
        flops = None
    else:
        hw = dataclasses.replace(hw, l2_domains=1)
    assert for_kernel(hw, flops, compute, trace, meta) is None


@pytest.mark.parametrize("change", [dict(step_ns=0.0), dict(ahead=-1), dict(noise_ns=-1.0), dict(group_size=0),
                                    dict(readers_per_lookup=0)])
def test_a_model_out_of_its_terms_is_refused(change):
    with pytest.raises(ValueError):
        ScheduleModel(**{"step_ns": 1.0, "ahead": 1, **change})


@pytest.mark.parametrize("hw, parts", [(_hw(l2_domains=1), [0] * PROGRAMS), (_hw(l2_bytes_per_s=None), [0] * PROGRAMS),
                                       (_hw(), [0, 1]), (_hw(), [0, 1, 2, 0])])
def test_a_spec_or_partition_map_out_of_its_terms_is_refused(hw, parts):
    with pytest.raises(ValueError):
        model_schedule(_shared_trace(), np.arange(2 * PROGRAMS), hw, ScheduleModel(1.0, 1), parts)
