"""bench/gemm_schedule_probe.py: the instrumented GEMM is kernels/gemm.py with only the order and
the schedule's records added, and it compiles for Hopper through its TMA path (no GPU here)."""
from __future__ import annotations

import ast
import tempfile
from pathlib import Path

import pytest


def test_the_instrumented_kernel_differs_only_by_the_order_and_the_records():
    from bench.gemm_schedule_probe import GEMM, instrumented
    text = instrumented("column-major")
    assert text.count("        _schedule_record(sched, tile, pid, began)\n") == 1
    assert text.count("began = _schedule_now(pid)") == 1
    original = GEMM.read_text()
    kept = [line for line in original.splitlines() if line.strip()]
    new = set(text.splitlines())
    swizzle = ast.get_source_segment(original, next(n for n in ast.parse(original).body
                                                    if isinstance(n, ast.FunctionDef) and n.name == "swizzle"))
    edited = {"    workspace, flags,  # stream-K hand-over: fp32 [P, BLOCK_M * BLOCK_N], int32 [P] zeros",
              "        workspace, flags, M, N, K, rows,"}
    missing = [line for line in kept if line not in new and line not in swizzle and line not in edited]
    assert missing == []
    assert "pid_n = pid // num_pid_m" in text or "num_pid_m" in text.split("def swizzle")[1].split("return")[0]


def test_a_gemm_that_changed_under_the_probe_is_one_clear_error(monkeypatch):
    import bench.gemm_schedule_probe as probe
    monkeypatch.setattr(probe, "_EDITS", probe._EDITS + (("no such text in the kernel", "x"),))
    with pytest.raises(ValueError, match="expected 1"):
        probe.instrumented("row-major")


def test_the_instrumented_kernel_compiles_for_hopper_with_tma_and_the_global_timer():
    import torch
    from bench.gemm_schedule_probe import META, _module, instrumented
    from swizzleperf.kernels.distributed.compile_check import compiling_launches
    from swizzleperf.kernels.schedule.persistent_gemm import tma_aligned
    with tempfile.TemporaryDirectory() as folder:
        module = _module(instrumented("grouped-m:4"), Path(folder), "gemm_schedule_test")
        module.tma_supported = tma_aligned            # as on Hopper: descriptors for these tensors
        problem = {"M": 256, "N": 512, "K": 128}
        inputs = module.make_inputs(problem, seed=0, device="cpu")
        module.SCHEDULE[0] = torch.full((4, 4), -1, dtype=torch.int64)
        with compiling_launches(90) as compiled:
            module.launch(inputs, NUM_SMS=132, TMA=True, **META)   # on a GPU: TMA where supported
    assert len(compiled) == 1
    ptx = next(iter(compiled.values())).asm["ptx"]
    assert "%globaltimer" in ptx and "%smid" in ptx and "cp.async.bulk.tensor" in ptx
