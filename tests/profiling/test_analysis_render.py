"""The analysis text a proposer is shown (profiling/analysis.py, prompts/analysis.j2)."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from swizzleperf import hwspecs
from swizzleperf.agent.verification.simulate import kernel_trace, program_order
from swizzleperf.profiling import analysis

GEMM = Path(__file__).resolve().parents[2] / "kernels" / "gemm.py"


def test_a_kernel_that_reads_only_what_it_writes_renders_without_dividing_by_zero():
    """An in-place kernel (TritonBench-G triton_mul2's mul2_inplace_kernel: x *= 2) reads only blocks it
    also writes: no read-only input data; the text says so (it raised ZeroDivisionError, a tool failure)."""
    spec, order, _ = program_order(GEMM, None, None, {})
    hardware = hwspecs.load_spec("mi300x")
    trace = kernel_trace(GEMM, spec, {}, False, hardware)
    grid = spec.tile_grid(spec.problems["default"], spec.meta_for("default"))
    figures = analysis.analyze(trace, np.asarray(order), grid, hardware, None)
    assert figures["compulsory_bytes"] > 0 and "times on average" in analysis.render(figures, hardware)
    text = analysis.render({**figures, "compulsory_bytes": 0.0}, hardware)
    assert "all of it in blocks the kernel also writes (in place)" in text and "times on average" not in text


def test_each_figure_of_the_analysis_is_a_bullet_of_its_own():
    """The first bullet ended in a block tag whose newline jinja's trim_blocks removed: the prompt read
    "... costs DRAM bandwidth.- Operand 0 of each step: ..." (a transcript read end to end, #41)."""
    spec, order, _ = program_order(GEMM, None, None, {})
    hardware = hwspecs.load_spec("h100")
    trace = kernel_trace(GEMM, spec, {}, False, hardware)
    grid = spec.tile_grid(spec.problems["default"], spec.meta_for("default"))
    figures = analysis.analyze(trace, np.asarray(order), grid, hardware, None)
    for text in (analysis.render(figures, hardware), analysis.render({**figures, "compulsory_bytes": 0.0}, hardware)):
        lines = text.splitlines()
        assert sum(line.startswith("- Operand ") for line in lines) == len(figures["operands"]) >= 2
        assert all(line.count("- Operand ") <= 1 and ".- " not in line for line in lines)
