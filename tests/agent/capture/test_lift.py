"""Lifting a kernel's program-id -> tile mapping into a rewrite target (agent/capture/lift.py): by AST and
the integer evaluator, nothing of the kernel executed, so these tests take milliseconds. That the
lifted kernel computes bitwise what the user's did is checked in test_capture.py (worker runs)."""
from __future__ import annotations

import ast
import textwrap

import numpy as np
import pytest

from swizzleperf.agent.capture.lift import Launch, LiftError, lift, target_order
from swizzleperf.agent.verification.candidate import check_candidate

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
    # the catalog's members for three coordinates: the 2-D order inside each batch, batch outermost
    from swizzleperf.agent.verification.swizzles import catalog_source, coordinates_of
    assert coordinates_of(lifted.target_source) == 3
    row_major = target_order(catalog_source("row-major", lifted.arg_names, 3), lifted.arg_values, 24)
    assert [tuple(c) for c in row_major] == [tuple(c) for c in order]
    column_major = target_order(catalog_source("column-major", lifted.arg_names, 3), lifted.arg_values, 24)
    assert [tuple(c) for c in column_major] == [(p // 12, p % 12 % 3, p % 12 // 3) for p in range(24)]


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
     for tile_id in range(start_pid, M * N, tl.num_programs(0)):
         tl.store(x_ptr + tile_id, 0.0)
     """, "a persistent kernel: the tile index comes from a loop over tiles `for tile_id in range(start_pid, "
          "M * N, tl.num_programs(0))` (line 8) that starts at the program id and steps by the program count"),
    ("""
     start_pid = tl.program_id(axis=0)
     for tile_id in tl.range(start_pid + 0, M * N, BLOCK_N - 20):
         tl.store(x_ptr + tile_id, 0.0)
     """, "`for tile_id in tl.range(start_pid + 0, M * N, BLOCK_N - 20)` (line 8)"),   # 12: the grid's size
    ("""
     tile = tl.program_id(0)
     step = tl.num_programs(0)
     while tile < M:
         tl.store(x_ptr + tile, 0.0)
         tile += step
     """, "a persistent kernel: `while tile < M` (line 9) loops over work items"),
    ("""
     pid = tl.program_id(0)
     while tl.atomic_cas(x_ptr + pid, 1, 1) != 1:
         pass
     tl.store(x_ptr + pid, 0.0)
     """, "a spin-wait `while tl.atomic_cas(x_ptr + pid, 1, 1) != 1` (line 8)"),
    ("""
     pid = tl.program_id(0)
     while tl.load(x_ptr + pid - 1, volatile=True) == 0:
         pass
     tl.store(x_ptr + pid, 1.0)
     """, "a spin-wait `while tl.load(x_ptr + pid - 1, volatile=True) == 0` (line 8)"),
])
def test_true_refusals_name_the_construct_and_its_line(body, expected):
    with pytest.raises(LiftError) as info:
        lift(_kernel(body), "k", SMALL)
    assert expected in str(info.value)
    assert "\n" not in str(info.value)


# What the lift cannot take, the program-id remap takes (agent/capture/pid_remap.py); the note keeps why.
@pytest.mark.parametrize("body, why", [
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
    ("""
     pid_m = tl.program_id(0).to(tl.int64)
     offset_m = pid_m * M
     tl.store(x_ptr + offset_m + tl.arange(0, BLOCK_M), 0.0)
     """, "the mapping's (offset_m) covers 12 distinct tiles of a 1057 grid: not one tile per program"),
    ("""
     for k in range(tl.program_id(0), M, 4):   # starts at the program id, but steps by 4, not the grid
         tl.store(x_ptr + k, 0.0)
     """, "no `tl.program_id` among the scalar statements at the top of its body"),
])
def test_what_the_lift_cannot_take_is_remapped_and_the_note_says_why(body, why):
    lifted = lift(_kernel(body), "k", SMALL)
    assert lifted.kind == "remapped" and lifted.arg_names == ["pid", "num_pids"] and lifted.tile_grid == (12,)
    assert why in lifted.notes[0] and lifted.notes[0].startswith("the program ids are remapped")
    assert "    pid_0 = swizzle(tl.program_id(axis=0), tl.num_programs(0))\n" in lifted.source
    body_text = lifted.source[lifted.source.index("def k("):]
    assert "tl.program_id" not in body_text.replace("swizzle(tl.program_id(axis=0)", "")   # every read remapped
    ast.parse(lifted.source)
    check_candidate(lifted.target_source, lifted.target_name, lifted.arg_names)
    assert [int(c) for c in target_order(lifted.target_source, lifted.arg_values, 12)[:, 0]] == list(range(12))
    assert np.prod(lifted.probe_grid) % 8 != 0


# A CSR row: the inner loop's bounds are loaded at the row's index, so it is no persistent loop.
CSR = """
    row = tl.program_id(0)
    row_start = tl.load(x_ptr + row)
    row_end = tl.load(x_ptr + row + 1)
    acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    for i in range(row_start, row_end, BLOCK_N):
        acc += tl.load(x_ptr + i + tl.arange(0, BLOCK_N))
    tl.store(x_ptr + row, tl.sum(acc, axis=0))
"""


def test_a_loop_over_data_dependent_bounds_is_not_persistent_and_the_row_is_lifted():
    lifted = lift(_kernel(CSR), "k", SMALL)
    assert lifted.kind == "lifted" and lifted.outputs == ["row"] and lifted.tile_grid == (12,)


@pytest.mark.parametrize("grid, axes, tile_grid", [((4, 3), 2, (4, 3)), ((2, 3, 5), 3, (2, 15)), ((1, 6), 2, (6,))])
def test_a_remap_of_a_multi_axis_grid_linearises_and_delinearises_every_axis(grid, axes, tile_grid):
    """The 3-D kernel reads its batch id inside the address arithmetic, after the mapping."""
    source = _kernel("""
        pid_m = tl.program_id(0)
        pid_n = tl.program_id(1)
        offs = pid_m * BLOCK_M + pid_n * N + tl.arange(0, BLOCK_M)
        tl.store(x_ptr + tl.program_id(2) * M * N + offs, 0.0)
    """)
    launch = Launch(grid=grid, values=dict(M=96, N=128, BLOCK_M=32, BLOCK_N=32), pointers=frozenset({"x_ptr"}))
    lifted = lift(source, "k", launch)
    assert lifted.kind == "remapped" and lifted.tile_grid == tile_grid
    assert "the program id" in lifted.notes[0] or "tl.program_id(2)" in lifted.notes[0]
    kernel = lifted.source[lifted.source.index("def k("):]
    linear = "tl.program_id(0) + tl.program_id(1) * tl.num_programs(0) + tl.program_id(2) * tl.num_programs(0) * tl.num_programs(1)"
    assert f"    linear_pid = {linear}\n" in kernel
    if len(tile_grid) == 2:
        assert "    pid_0, pid_rest = swizzle(linear_pid, tl.num_programs(0), tl.num_programs(1) * tl.num_programs(2))\n" in kernel
        assert "    pid_1 = pid_rest % tl.num_programs(1)\n    pid_2 = pid_rest // tl.num_programs(1)\n" in kernel
    else:
        assert "    remapped_pid = swizzle(linear_pid, tl.num_programs(0) * tl.num_programs(1) * tl.num_programs(2))\n" in kernel
    assert "    pid_m = pid_0\n    pid_n = pid_1\n" in kernel and "x_ptr + pid_2 * M * N + offs" in kernel
    # the generated kernel's ids for every program (the target and the prologue by the evaluator):
    # the launch's own, axis by axis
    from swizzleperf.agent.capture.lift_eval import Evaluator, program_ids
    kernel_def = next(n for n in ast.parse(lifted.source).body if isinstance(n, ast.FunctionDef) and n.name == "k")
    linear, call, *split = kernel_def.body[:2 + axes - (len(tile_grid) == 2)]
    evaluator = Evaluator({}, grid)
    assert np.array_equal(evaluator.expr(linear.value), np.arange(int(np.prod(grid))))
    assert [evaluator.expr(a) for a in call.value.args[1:]] == list(lifted.arg_values)
    assert call.value.args[0].id == linear.targets[0].id
    coords = target_order(lifted.target_source, lifted.arg_values, int(np.prod(grid)))
    names = [e.id for e in call.targets[0].elts] if isinstance(call.targets[0], ast.Tuple) else [call.targets[0].id]
    evaluator.env.update(zip(names, coords.T))
    for stmt in split:
        evaluator.run(stmt)
    for a, ids in enumerate(program_ids(grid)):
        assert np.array_equal(np.broadcast_to(evaluator.env[f"pid_{a}"], ids.shape), ids)


def test_a_helper_that_reads_the_program_id_runs_as_a_remapped_copy():
    """A module-level function the kernel calls (here through another) that reads tl.program_id is
    copied with its reads remapped; the user's own function is left for their other kernels."""
    helper = HEADER + """@triton.jit
def _row():
    return tl.program_id(0) * 2


@triton.jit
def _row_clipped(M):
    r = _row()
    return tl.minimum(r, M)


@triton.jit
def k(x_ptr, M):
    r = _row_clipped(M)
    tl.store(x_ptr + r, 0.0)
"""
    launch = Launch(grid=(12,), values=dict(M=96), pointers=frozenset({"x_ptr"}))
    lifted = lift(helper, "k", launch)
    assert lifted.kind == "remapped" and "_row (line 6) as _row_remapped" in lifted.notes[0]
    tree = ast.parse(lifted.source)
    functions = {f.name: ast.unparse(f) for f in tree.body if isinstance(f, ast.FunctionDef)}
    assert functions["_row"] == ast.unparse(ast.parse(helper).body[2])          # the user's own, unchanged
    assert "swizzle_program_id_0()" in functions["_row_remapped"] and "tl.program_id" not in functions["_row_remapped"]
    assert "_row_remapped()" in functions["_row_clipped_remapped"]
    assert "_row_clipped_remapped(M)" in functions["k"]
    assert "swizzle(tl.program_id(axis=0), tl.num_programs(0))" in functions["swizzle_program_id_0"]


def test_a_function_named_program_id_of_another_module_is_read_as_the_program_id():
    """FlagGems' idiom: `pid = tle.program_id(0)`, tle another module's functions (int64 ids)."""
    lifted = lift(HEADER.replace("import triton\n", "import triton\nimport tle\n")
                  + "@triton.jit\ndef k(x_ptr, M):\n    pid = tle.program_id(0)\n    tl.store(x_ptr + pid, 0.0)\n",
                  "k", Launch(grid=(12,), values=dict(M=96), pointers=frozenset({"x_ptr"})))
    assert lifted.kind == "remapped" and "`tle.program_id(0)` (line 8)" in lifted.notes[0]
    assert "pid = pid_0.to(tle.program_id(0).dtype)" in lifted.source


def test_a_remap_is_refused_where_nothing_reads_the_program_id_or_one_program_runs():
    with pytest.raises(LiftError, match="it never reads tl.program_id"):
        lift(_kernel("tl.store(x_ptr + tl.arange(0, BLOCK_M), 0.0)\n"), "k", SMALL)
    with pytest.raises(LiftError, match="the captured launch has one program"):
        lift(_kernel("tl.store(x_ptr + tl.program_id(0) // 2, 0.0)\n"), "k",
             Launch(grid=(1,), values=SMALL.values, pointers=SMALL.pointers))


def test_no_such_kernel_and_no_program_id():
    with pytest.raises(LiftError, match="no top-level function 'nope'"):
        lift(TRANSPOSE, "nope", TRANSPOSE_LAUNCH)


def test_a_name_already_taken_and_missing_imports():
    source = ("from triton import jit\nimport triton.language as language\n\n\ndef swizzle():\n    pass\n\n\n"
              + TRANSPOSE[len(HEADER):].replace("tl.", "triton.language."))
    lifted = lift(source, "transpose_kernel", TRANSPOSE_LAUNCH)
    assert lifted.target_name == "swizzle_2"
    assert "import triton\n" in lifted.source and "def swizzle_2(pid, num_pid_m, num_pid_n):" in lifted.source
    ast.parse(lifted.source)


def test_a_liftable_mapping_is_remapped_where_a_function_reads_the_program_id_too():
    """`pid = tl.program_id(0)` would lift, but a helper reads program id 1 itself: lifting would
    leave that read in the kernel's own order, so the program ids are remapped instead."""
    source = HEADER + """@triton.jit
def _col():
    return tl.program_id(1)


@triton.jit
def k(x_ptr, M, BLOCK_M: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = _col()
    tl.store(x_ptr + pid_m * BLOCK_M + pid_n, 0.0)
"""
    lifted = lift(source, "k", Launch(grid=(4, 3), values=dict(M=96, BLOCK_M=32), pointers=frozenset({"x_ptr"})))
    assert lifted.kind == "remapped" and "the program id is also read through _col (line 6)" in lifted.notes[0]
    assert "_col_remapped()" in lifted.source
