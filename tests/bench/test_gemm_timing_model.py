"""bench/gemm_timing_model.py: the GEMM's schedule modelled on a CPU (issue #43). Programs that read
the same blocks stay in step without noise and drift apart with it; a k-step takes at least its
compute time; the epilogue's stores are not timed; the schedule replays (l2sim.simulate_schedule);
inputs out of the model's terms are refused."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from bench.gemm_timing_model import LATENCY_NS, model_schedule
from swizzleperf.hwspecs import HardwareSpec
from swizzleperf.kernels.trace import TileTrace
from swizzleperf.profiling.l2sim import simulate_schedule

META = {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "num_stages": 2}
FLOPS = 2 * 128 * 256 * 64
PROGRAMS, STEPS = 4, 3


def _hw(**changes) -> HardwareSpec:
    """4 SMs whose k-step takes 1 000 ns; bandwidths so large that no queue forms; a large L2."""
    hw = HardwareSpec(name="toy", display_name="toy", vendor="test", arch="test", compute_units=PROGRAMS,
                      l2_domains=2, l2_partitions=2, l2_bytes_per_domain=1 << 30, l2_line_bytes=128,
                      l2_sector_bytes=32, l2_associativity=None, llc_bytes=0, dram_bytes_per_s=1e18,
                      peak_bf16_flops=FLOPS * PROGRAMS * 1e6, shared_memory_per_cu_bytes=0, l1_bytes_per_cu=0,
                      dispatch="hashed_domains", domain_miss_path="peer_domains", l2_bytes_per_s=1e18)
    return dataclasses.replace(hw, **changes)


def _trace(shared: bool) -> TileTrace:
    """8 tiles (two waves of 4 programs), each STEPS k-steps reading an A and a B block, then a
    store of its own output block; ``shared``: every tile reads the same blocks."""
    tiles = 2 * PROGRAMS
    reads = 2 * STEPS if shared else 2 * STEPS * tiles
    keys = np.full((tiles, STEPS + 1, 2), -1, dtype=np.int64)
    for t in range(tiles):
        base = 0 if shared else 2 * STEPS * t
        for k in range(STEPS):
            keys[t, k] = [base + 2 * k, base + 2 * k + 1]
        keys[t, STEPS, 0] = reads + t
    is_write = np.zeros(reads + tiles, dtype=bool)
    is_write[reads:] = True
    return TileTrace(keys, np.full(reads + tiles, 1024, dtype=np.int64), is_write, 1, "test")


def test_programs_reading_the_same_blocks_stay_in_step_without_noise():
    got = model_schedule(_trace(shared=True), np.arange(2 * PROGRAMS), _hw(), META, noise_ns=0.0)
    began, ended = np.array(got["began_ns"]), np.array(got["ended_ns"])
    assert got["smid"] == got["program"] == [t % PROGRAMS for t in range(2 * PROGRAMS)]
    assert (began[:PROGRAMS] == 0).all() and len(set(began[PROGRAMS:])) == 1   # the second wave together
    # each tile: the first step waits for DRAM, the rest are compute-bound (operands one step ahead)
    assert ended[0] == pytest.approx(LATENCY_NS["dram"] + STEPS * 1000.0, abs=1.0)
    assert (began[PROGRAMS:] == ended[:PROGRAMS]).all()                       # the next tile at once


def test_with_noise_programs_reading_blocks_of_their_own_drift_apart():
    quiet = model_schedule(_trace(shared=False), np.arange(2 * PROGRAMS), _hw(), META, noise_ns=0.0)
    noisy = model_schedule(_trace(shared=False), np.arange(2 * PROGRAMS), _hw(), META, noise_ns=2000.0, seed=3)
    assert len(set(quiet["began_ns"][PROGRAMS:])) == 1
    assert len(set(noisy["began_ns"][PROGRAMS:])) == PROGRAMS
    again = model_schedule(_trace(shared=False), np.arange(2 * PROGRAMS), _hw(), META, noise_ns=2000.0, seed=3)
    assert again == noisy                                                      # the seed fixes the draws


def test_a_modelled_schedule_replays_as_a_measured_one():
    trace, hw = _trace(shared=True), _hw()
    got = model_schedule(trace, np.arange(2 * PROGRAMS), hw, META, noise_ns=0.0)
    result = simulate_schedule(trace, np.arange(2 * PROGRAMS), hw, got, [0, 1, 0, 1], timed_by=f"modelled ({got['model']})")
    assert result.l2_read_bytes == 2 * PROGRAMS * 2 * STEPS * 1024             # every read, none merged
    assert "at the times modelled (bench/gemm_timing_model.py: C 1000 ns a k-step" in result.model


@pytest.mark.parametrize("change", [dict(noise_ns=-1.0), dict(meta={"BLOCK_M": 128}),
                                    dict(hw=_hw(l2_domains=1)), dict(hw=_hw(l2_bytes_per_s=None))])
def test_inputs_out_of_the_models_terms_are_refused(change):
    args = dict(trace=_trace(shared=True), order=np.arange(2 * PROGRAMS), hw=_hw(), meta=META, noise_ns=0.0)
    with pytest.raises(ValueError):
        model_schedule(**{**args, **change})
