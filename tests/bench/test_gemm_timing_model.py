"""bench/gemm_timing_model.py: the product's schedule model (profiling/schedule_model.py, tested in
tests/profiling/test_schedule_model.py) with a GEMM's k-step taken from its meta-parameters."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from bench.gemm_timing_model import model_schedule
from swizzleperf.hwspecs import load_spec
from swizzleperf.kernels.gemm import SPEC
from swizzleperf.profiling import schedule_model
from swizzleperf.profiling.l2sim import program_domains


def test_the_bench_schedule_is_the_products_with_the_metas_k_step():
    problem, meta = {"M": 1024, "N": 2048, "K": 256}, {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "num_stages": 4}
    hw = dataclasses.replace(load_spec("h100"), compute_units=16)
    trace = SPEC.trace(problem, meta)
    order = np.random.default_rng(1).permutation(trace.num_tiles)
    got = model_schedule(trace, order, hw, meta, noise_ns=400.0, seed=2)
    step_ns = 2 * 128 * 256 * 64 / (hw.peak_bf16_flops / 16) * 1e9
    want = schedule_model.model_schedule(trace, order, hw, schedule_model.ScheduleModel(step_ns, 3, 400.0, seed=2),
                                         program_domains(16, 2, "hashed_domains"))
    assert got == want and max(got["ended_ns"]) > 0


@pytest.mark.parametrize("change", [dict(noise_ns=-1.0), dict(meta={"BLOCK_M": 128})])
def test_inputs_out_of_the_models_terms_are_refused(change):
    meta = {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "num_stages": 4}
    trace = SPEC.trace({"M": 256, "N": 256, "K": 128}, meta)
    args = dict(trace=trace, order=np.arange(trace.num_tiles), hw=load_spec("h100"), meta=meta, noise_ns=0.0)
    with pytest.raises(ValueError):
        model_schedule(**{**args, **change})
