"""Lifting a kernel's program-id -> tile mapping into a rewrite target (agent/lift.py): by AST and
the integer evaluator, nothing of the kernel executed, so these tests take milliseconds. That the
lifted kernel computes bitwise what the user's did is checked in test_capture.py (worker runs)."""
from __future__ import annotations

import ast
import textwrap

import numpy as np
import pytest

from swizzleperf.agent.candidate import check_candidate
from swizzleperf.agent.lift import Launch, LiftError, lift, target_order

HEADER = "import triton\nimport triton.language as tl\n\n\n"

# The Triton tutorial's kernel head (03-matrix-multiplication): inline grouped order, builtin min.
TUTORIAL = HEADER + '''@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                  stride_cm, stride_cn, BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr,
                  BLOCK_SIZE_K: tl.constexpr, GROUP_SIZE_M: tl.constexpr):
    """C = A @ B."""
    # Map program ids `pid` to the block of C it should compute.
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_SIZE_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m
    tl.assume(pid_m >= 0)
    offs_am = (pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)) % M
    offs_bn = (pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)) % N
    tl.store(c_ptr + offs_am[:, None] * stride_cm + offs_bn[None, :] * stride_cn, 0.0)
'''
GEMM_LAUNCH = Launch(grid=(12,), values=dict(M=100, N=72, K=64, stride_am=64, stride_ak=1, stride_bk=72,
                                             stride_bn=1, stride_cm=72, stride_cn=1, BLOCK_SIZE_M=32,
                                             BLOCK_SIZE_N=32, BLOCK_SIZE_K=32, GROUP_SIZE_M=8),
                     pointers=frozenset({"a_ptr", "b_ptr", "c_ptr"}))

TRANSPOSE = HEADER + '''@triton.jit
def transpose_kernel(x_ptr, out_ptr, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    tl.store(out_ptr + rn[:, None] * M + rm[None, :], tl.load(x_ptr + rm[:, None] * N + rn[None, :]))
'''
TRANSPOSE_LAUNCH = Launch(grid=(4, 3), values=dict(M=100, N=70, BLOCK_M=32, BLOCK_N=32),
                          pointers=frozenset({"x_ptr", "out_ptr"}))


def _kernel(body: str, params: str = "x_ptr, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr") -> str:
    return HEADER + f"@triton.jit\ndef k({params}):\n" + textwrap.indent(textwrap.dedent(body).lstrip("\n"), "    ")


SMALL = Launch(grid=(12,), values=dict(M=96, N=128, BLOCK_M=32, BLOCK_N=32), pointers=frozenset({"x_ptr"}))


def test_the_tutorials_grouped_order_becomes_a_four_parameter_target():
    lifted = lift(TUTORIAL, "matmul_kernel", GEMM_LAUNCH)
    assert lifted.target_name == "swizzle" and lifted.outputs == ["pid_m", "pid_n"]
    assert lifted.arg_names == ["pid", "num_pid_m", "num_pid_n", "GROUP_SIZE_M"]   # extents first: the catalog's shape
    assert lifted.arg_values == (4, 3, 8) and lifted.tile_grid == (4, 3)
    assert "group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)" in lifted.target_source
    assert "num_pid_in_group = GROUP_SIZE_M * num_pid_n" in lifted.target_source   # read by the mapping only: moved
    check_candidate(lifted.target_source, lifted.target_name, lifted.arg_names)
    kernel = lifted.source[lifted.source.index("def matmul_kernel"):]
    assert "    pid_m, pid_n = swizzle(pid, num_pid_m, num_pid_n, GROUP_SIZE_M)\n" in kernel
    assert "pid = tl.program_id(axis=0)" in kernel and "num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)" in kernel
    assert "group_id" not in kernel and "num_pid_in_group" not in kernel
    assert "# Map program ids" in kernel and "tl.assume(pid_m >= 0)" in kernel   # the rest keeps its text
    # the lifted target is the user's order, program for program
    order = target_order(lifted.target_source, lifted.arg_values, 12)
    group = [(m, n) for g in (0, 1) for n in range(3) for m in range(4)[g * 8:g * 8 + 8]]
    assert [tuple(c) for c in order] == group


def test_a_probe_problem_not_a_multiple_of_8_is_found_where_the_kernel_is_not_launched():
    lifted = lift(TUTORIAL, "matmul_kernel", GEMM_LAUNCH)
    assert np.prod(lifted.probe_grid) % 8 != 0
    assert dict(zip(lifted.arg_names[1:], lifted.probe_values))["GROUP_SIZE_M"] == 8
    order = target_order(lifted.target_source, lifted.probe_values, int(np.prod(lifted.probe_grid)))
    assert sorted(map(tuple, order)) == [(m, n) for m in range(lifted.probe_grid[0]) for n in range(lifted.probe_grid[1])]


def test_a_2d_grid_is_linearised_axis_0_fastest():
    lifted = lift(TRANSPOSE, "transpose_kernel", TRANSPOSE_LAUNCH)
    assert lifted.arg_names == ["pid", "num_pid_m", "num_pid_n"] and lifted.tile_grid == (4, 3)
    assert "pid_m = pid % num_pid_m\n" in lifted.target_source and "pid_n = pid // num_pid_m\n" in lifted.target_source
    assert ("    pid = tl.program_id(0) + tl.program_id(1) * tl.num_programs(0)\n"
            "    pid_m, pid_n = swizzle(pid, tl.num_programs(0), tl.num_programs(1))\n") in lifted.source
    order = target_order(lifted.target_source, lifted.arg_values, 12)
    assert [tuple(c) for c in order] == [(p % 4, p // 4) for p in range(12)]   # as the hardware issues them


def test_a_batch_axis_gets_the_grid_size_it_needs_to_delinearise():
    source = _kernel("""
        pid = tl.program_id(0)
        batch = tl.program_id(1)
        num_pid_n = tl.cdiv(N, BLOCK_N)
        pid_m = pid // num_pid_n
        pid_n = pid % num_pid_n
        tl.store(x_ptr + batch * M + pid_m * N + pid_n + tl.arange(0, BLOCK_M), 0.0)
    """)
    lifted = lift(source, "k", Launch(grid=(12, 2), values=dict(M=96, N=128, BLOCK_M=32, BLOCK_N=32),
                                      pointers=frozenset({"x_ptr"})))
    assert lifted.outputs == ["batch", "pid_m", "pid_n"]
    assert lifted.arg_names == ["linear_pid", "num_batch", "num_pid_m", "num_pid_n", "num_programs_0"]
    order = target_order(lifted.target_source, lifted.arg_values, 24)
    assert [tuple(c) for c in order] == [(p // 12, p % 12 // 4, p % 4) for p in range(24)]


def test_extents_written_inline_are_found_and_named():
    source = _kernel("""
        pid = tl.program_id(axis=0)
        pid_m = pid // tl.cdiv(N, BLOCK_N)
        pid_n = pid % tl.cdiv(N, BLOCK_N)
        tl.store(x_ptr + pid_m * N + pid_n + tl.arange(0, BLOCK_M), 0.0)
    """)
    lifted = lift(source, "k", SMALL)
    assert lifted.arg_names == ["pid", "num_pid_m", "num_pid_n"] and lifted.arg_values == (3, 4)
    assert "pid_m = pid // num_pid_n" in lifted.target_source   # the sub-expression is the parameter now
    assert "swizzle(pid, tl.num_programs(0) // tl.cdiv(N, BLOCK_N), tl.cdiv(N, BLOCK_N))" in lifted.source


def test_a_1d_kernel_whose_program_id_is_the_tile():
    source = _kernel("""
        row = tl.program_id(0)
        tl.store(x_ptr + row * N + tl.arange(0, BLOCK_N), 0.0)
    """)
    lifted = lift(source, "k", SMALL)
    assert lifted.arg_names == ["pid", "num_row"] and lifted.tile_grid == (12,)
    assert "    row = swizzle(tl.program_id(axis=0), tl.num_programs(0))\n" in lifted.source
    ast.parse(lifted.source)


@pytest.mark.parametrize("body, expected", [
    ("""
     start_pid = tl.program_id(axis=0)
     for tile_id in range(start_pid, M * N, 4):
         tl.store(x_ptr + tile_id, 0.0)
     """, "a persistent kernel: the tile index comes from a loop over tiles `for tile_id in range(start_pid, M * N, 4)` (line 8)"),
    ("""
     pid = tl.program_id(0)
     while tl.atomic_cas(x_ptr + pid, 1, 1) != 1:
         pass
     tl.store(x_ptr + pid, 0.0)
     """, "a spin-wait `while tl.atomic_cas(x_ptr + pid, 1, 1) != 1` (line 8)"),
    ("""
     pid = tl.program_id(0)
     pid_m = pid // 4
     flag = tl.load(x_ptr)
     if flag > 0:
         pid_m = 3 - pid_m
     tl.store(x_ptr + pid_m, 0.0)
     """, "data-dependent control flow in the program-id mapping: `if flag > 0` (line 10) assigns pid_m"),
    ("""
     pid = tl.program_id(0)
     pid_m = pid // 4
     if pid_m > M:
         pid_m = 0
     tl.store(x_ptr + pid_m + tl.arange(0, BLOCK_M), 0.0)
     """, "control flow in the program-id mapping: `if pid_m > M` (line 9) assigns pid_m"),
    ("""
     pid = tl.program_id(0)
     pid_m = pid // 4
     pid_n = pid % 4
     tl.store(x_ptr + pid_m * N + pid_n + tl.arange(0, BLOCK_M), 0.0)
     tl.store(x_ptr + pid, 1.0)
     """, "the program id pid is read again at line 11, after the mapping (which ends at line 9)"),
    ("""
     pid_m = tl.program_id(0) // 2
     tl.store(x_ptr + pid_m + tl.arange(0, BLOCK_M), 0.0)
     """, "covers 6 distinct tiles of a 6 grid: not one tile per program"),
    ("""
     num_pid_n = tl.cdiv(N, BLOCK_N)
     pid = tl.program_id(0); pid_m = pid // num_pid_n
     pid_n = pid % num_pid_n
     tl.store(x_ptr + pid_m * N + pid_n + tl.arange(0, BLOCK_M), 0.0)
     """, "line 8 holds several statements"),
])
def test_refusals_name_the_construct_and_its_line(body, expected):
    with pytest.raises(LiftError) as info:
        lift(_kernel(body), "k", SMALL)
    assert expected in str(info.value)
    assert "\n" not in str(info.value)


def test_no_such_kernel_and_no_program_id():
    with pytest.raises(LiftError, match="no top-level function 'nope'"):
        lift(TRANSPOSE, "nope", TRANSPOSE_LAUNCH)
    with pytest.raises(LiftError, match="no `tl.program_id` among the scalar statements"):
        lift(_kernel("tl.store(x_ptr + tl.arange(0, BLOCK_M), 0.0)\n"), "k", SMALL)


def test_a_name_already_taken_and_missing_imports():
    source = ("from triton import jit\nimport triton.language as language\n\n\ndef swizzle():\n    pass\n\n\n"
              + TRANSPOSE[len(HEADER):].replace("tl.", "triton.language."))
    lifted = lift(source, "transpose_kernel", TRANSPOSE_LAUNCH)
    assert lifted.target_name == "swizzle_2"
    assert "import triton\n" in lifted.source and "def swizzle_2(pid, num_pid_m, num_pid_n):" in lifted.source
    ast.parse(lifted.source)
