"""The permutation proof over every grid (agent/verification/prove.py, issue #41): the orders that
passed the sampled probe (a permutation except above 32 768 tiles, except at 97 x 61, except when
num_pid_n == 50) are rejected with a counterexample, single-GPU and distributed; every catalog
member and the bundled kernels' expert orders are proven within the time budget; an order the
prover cannot settle is checked on every small grid and written so that it guards itself."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from swizzleperf.agent.verification.candidate import canonical_target, splice, target_source
from swizzleperf.agent.verification.evaluate import Evaluator
from swizzleperf.agent.verification.prove import (TIME_BUDGET_S, Role, guard_condition, guarded_source,
                                                  prove_permutation)
from swizzleperf.agent.verification.swizzles import catalog_source
from swizzleperf.agent.verification.verify import VerifyConfig, run_worker

ROOT = Path(__file__).resolve().parents[3]
GEMM = ROOT / "kernels" / "gemm.py"
ARGS = ["pid", "num_pid_m", "num_pid_n"]
GRID = [Role("extent", 0), Role("extent", 1)]

# The issue's three orders: row-major everywhere but where a grid nobody probes is launched.
ABOVE_32768_TILES = '''@triton.jit
def swizzle(pid, num_pid_m, num_pid_n):
    q = tl.where(num_pid_m * num_pid_n > 32768, pid // 2, pid)
    return q // num_pid_n, q % num_pid_n
'''
AT_97_X_61 = '''@triton.jit
def swizzle(pid, num_pid_m, num_pid_n):
    bad = (num_pid_m == 97) & (num_pid_n == 61)
    q = tl.where(bad & (pid == 40), 12, pid)
    return q // num_pid_n, q % num_pid_n
'''
AT_50_COLUMNS = '''@triton.jit
def swizzle(pid, num_pid_m, num_pid_n):
    pid_m = pid // num_pid_n
    pid_n = pid % num_pid_n
    return pid_m, tl.where(num_pid_n == 50, pid_n % 49, pid_n)
'''
TRICKS = [(ABOVE_32768_TILES, None), (AT_97_X_61, "grid 97 x 61"), (AT_50_COLUMNS, " x 50 ")]

# Row-major through a loop of more steps than the prover unrolls: a permutation it does not settle.
UNROLLED_TOO_FAR = '''@triton.jit
def swizzle(pid, num_pid_m, num_pid_n):
    q = pid
    for i in range(65):
        q = q + 0
    return q // num_pid_n, q % num_pid_n
'''


@pytest.mark.parametrize("source, where", TRICKS)
def test_the_issues_orders_have_a_counterexample(source, where):
    proof = prove_permutation(source, GRID, 2)
    assert proof.status == "counterexample", proof.statement
    assert len(proof.programs) == 2 and proof.tiles[0] == proof.tiles[1]
    assert f"programs {proof.programs[0]} and {proof.programs[1]} both compute tile" in proof.statement
    if where:
        assert where in proof.statement + " ", proof.statement
    else:
        assert np.prod(proof.grid) > 32768


@pytest.mark.parametrize("source, where", TRICKS)
def test_the_worker_rejects_them_though_every_sampled_grid_passes(tmp_path, source, where):
    """The sampled probe alone passed these (issue #41); the worker's all_grids stage now names the
    counterexample, run through the target itself."""
    kernel = tmp_path / "cand.py"
    kernel.write_text(splice(GEMM.read_text(), "swizzle", source))
    reference = tmp_path / "reference_gemm.py"
    reference.write_text(GEMM.read_text())
    result = run_worker({"kernel_path": str(kernel), "problems": ["default", "check"],
                         "stages": ["permutation", "all_grids"], "reference_path": str(reference)},
                        300, interpret=True)
    assert result.verdict.value == "NOT_PERMUTATION", result.reason
    assert "found by the proof over every grid" in result.reason and "both compute tile" in result.reason
    if where:
        assert where in result.reason + " "


CATALOG_2D = ["row-major", "column-major", "grouped-m:1", "grouped-m:8", "grouped-n:8", "grouped-m:64",
              "grouped-n:23", "xcd-contiguous:8", "xcd-contiguous:3", "xcd-grouped-m:8:8", "xcd-grouped-m:16:4"]


@pytest.mark.parametrize("name", CATALOG_2D)
def test_every_catalog_member_is_proven(name):
    proof = prove_permutation(catalog_source(name, ARGS), GRID, 2)
    assert proof.status == "proven", proof.statement
    assert proof.seconds < TIME_BUDGET_S and "permutation proven for all grids" in proof.statement


@pytest.mark.parametrize("name, args, roles, coordinates", [
    ("row-major", ["pid", "num_pids"], [Role("extent", 0)], 1),
    ("xcd-contiguous:8", ["pid", "num_pids"], [Role("extent", 0)], 1),
    ("grouped-m:8", ["pid", "num_b", "num_pid_m", "num_pid_n"], [Role("extent", d) for d in range(3)], 3),
    ("xcd-grouped-m:8:8", ["pid", "num_b", "num_pid_m", "num_pid_n"], [Role("extent", d) for d in range(3)], 3),
    ("grouped-m:8", ["pid", "num_pid_m", "num_pid_n", "GROUP_SIZE_M"], GRID + [Role("held", 8)], 2),
])
def test_catalog_members_of_other_shapes_are_proven(name, args, roles, coordinates):
    proof = prove_permutation(catalog_source(name, args, coordinates), roles, len([r for r in roles if r.kind == "extent"]))
    assert proof.status == "proven", proof.statement


@pytest.mark.parametrize("module", ["spmv", "gemm", "stencil2d", "transpose"])
def test_a_bundled_kernels_expert_order_is_proven_within_the_budget(module):
    """The expert orders of bundled kernels, as the spec gives them (spmv's is source of its own)."""
    from swizzleperf.agent.verification.load import load_spec
    from swizzleperf.agent.verification.swizzles import expert_source
    path = ROOT / "kernels" / f"{module}.py"
    spec = load_spec(path)
    args = [a for a in target_source(path.read_text(), spec.rewrite_target).split("(", 1)[1].split(")")[0].replace(" ", "").split(",")]
    _, source = expert_source(spec.expert, args)
    roles = [Role("extent", d) for d in range(len(args) - 1)]
    proof = prove_permutation(source, roles, len(roles))
    assert proof.status == "proven", proof.statement
    assert proof.seconds < TIME_BUDGET_S, f"{module}: {proof.seconds:.1f} s"


TARGET_WITH = """@triton.jit
def swizzle(pid, num_pid_m, num_pid_n):
    {}
    return pid % num_pid_m, pid // num_pid_m
"""


@pytest.mark.parametrize("source, expected", [
    # pid - 3 may be negative: Triton truncates, z3's division floors; not proven, never a counterexample
    ('''@triton.jit
def swizzle(pid, num_pid_m, num_pid_n):
    q = (pid - 3) // num_pid_n
    return q, pid % num_pid_n
''', "dividend may be negative"),
    # 2^24 x 2^7 tiles: the product of num_pid_m * num_pid_n * 4 leaves int32
    ('''@triton.jit
def swizzle(pid, num_pid_m, num_pid_n):
    t = num_pid_m * num_pid_n * 4
    return pid // num_pid_n + t * 0, pid % num_pid_n
''', "overflows int32"),
    (UNROLLED_TOO_FAR, "more than 64 steps"),
    # #41: constants the prover folds with Python's operators: a shift of 2^63 - 1 bits (MemoryError,
    # or gigabytes for 2^32), a loop of step 0 (ValueError) or of more steps than a C integer holds
    (TARGET_WITH.format("x = 1 << 9223372036854775807"), "beyond 64 bits"),
    (TARGET_WITH.format("x = 1 << 4294967296"), "beyond 64 bits"),
    (TARGET_WITH.format("for i in range(0, 10, 0):\n        pid = pid + 0"), "a loop over range(0, 10, 0)"),
    (TARGET_WITH.format("for i in range(-9223372036854775807, 9223372036854775807):\n        pid = pid + 0"),
     "a loop over range("),
])
def test_what_the_prover_cannot_settle_is_not_proven_and_says_why(source, expected):
    proof = prove_permutation(source, GRID, 2)
    assert proof.status == "unknown" and expected in proof.statement, proof.statement


@pytest.mark.parametrize("shift", ["pid = pid + (pid >> 40)", "pid = pid + (pid >> 32)",
                                   "pid = pid + ((pid << 33) >> 60)"])
def test_a_shift_by_the_width_or_more_is_never_proven(shift):
    """#41, replayed from outside: ``pid >> 40`` of an int32 was folded to 0 and the order proven
    and written unguarded, while Triton calls such a shift undefined (poison in MLIR's arith; the
    interpreter's numpy gives 0, so no sampled grid tells)."""
    proof = prove_permutation(TARGET_WITH.format(shift), GRID, 2)
    assert proof.status == "unknown" and "operator" in proof.statement, proof.statement


def test_a_shift_below_the_width_is_still_proven():
    proof = prove_permutation(TARGET_WITH.format("pid = pid + (pid >> 31)"), GRID, 2)
    assert proof.status == "proven", proof.statement


def test_an_order_not_proven_is_checked_on_every_small_grid_and_guarded(tmp_path):
    """The worker checks it on every grid up to 32 x 32 and returns the guard; the evaluator writes
    the kernel that runs it only there and at the kernel's problems (the kernel's own order
    elsewhere), verifies that kernel, and hands it on as the candidate's file, source and diff."""
    module_source = GEMM.read_text()
    folder = tmp_path / "candidates"
    ev = Evaluator(kernel_path=GEMM, module_source=module_source, target_name="swizzle", arg_names=ARGS,
                   candidates_dir=folder, verify_config=VerifyConfig(device="cpu", seeds=(1,)), measurer=None)
    prepared = ev.prepare("loop", UNROLLED_TOO_FAR)
    checked = ev.verify(prepared["kernel_file"], time_it=False)
    assert checked["verdict"] == "PASS", checked["reason"]
    scope = checked["permutation_scope"]
    assert "not proven" in scope and "checked exhaustively on every grid up to 32 per axis" in scope
    assert "guarded beyond" in scope
    guarded = checked["source"]
    assert checked["kernel_file"] != prepared["kernel_file"] and guarded in Path(checked["kernel_file"]).read_text()
    assert "use_new = (num_pid_m <= 32) & (num_pid_n <= 32)" in guarded and "tl.where(use_new" in guarded
    assert "+    use_new" in checked["diff"]
    module_text = Path(checked["kernel_file"]).read_text()
    spec_grid = [int(g) for g in checked["details"]["permutation"]["default"]["grid"]]
    assert f"(num_pid_m == {spec_grid[0]}) & (num_pid_n == {spec_grid[1]})" in guarded
    assert splice(module_source, "swizzle", guarded) == module_text
    # the guarded kernel passed the same checks (the real grids, the sampled ones beyond the box)
    assert checked["details"]["all_grids"]["sites"] > 100 and checked["details"]["numerics"]


def test_the_guarded_source_is_a_candidate_that_picks_by_the_grid():
    own = catalog_source("row-major", ARGS)
    new = catalog_source("xcd-grouped-m:8:8", ARGS)       # reassigns pid: the own order must not see it
    condition = guard_condition(ARGS, GRID, 4, [[64, 64]])
    text = canonical_target(guarded_source(new, own, "swizzle", condition, "guarded"), "swizzle", ARGS)
    assert "new_pid = pid" in text and "own_pid_m = pid // num_pid_n" in text
    assert condition == "((num_pid_m <= 4) & (num_pid_n <= 4)) | ((num_pid_m == 64) & (num_pid_n == 64))"


# -- distributed -------------------------------------------------------------------------------------

GAS = ROOT / "kernels" / "distributed" / "gemm_all_scatter.py"


@pytest.mark.parametrize("source, where", TRICKS[1:])
def test_a_distributed_tile_order_with_a_counterexample_is_rejected(tmp_path, source, where):
    """The distributed verifier accepted these and made one the best configuration (issue #41)."""
    from swizzleperf.agent.distributed.evaluator import DistEvaluator, resolve_target
    from swizzleperf.agent.verification.load import load_spec
    path = tmp_path / "gemm_all_scatter.py"
    path.write_text(GAS.read_text())
    ev = DistEvaluator(kernel_path=path, module_source=path.read_text(), spec=load_spec(path),
                       problem_name="llama70b-qkv-4k", world_size=4, target=resolve_target("h200", 4),
                       candidates_dir=tmp_path / "candidates", timeout_s=300)
    prepared = ev.prepare("c", json.dumps({"pattern": "bulk_sync", "swizzle": source}))
    assert not prepared["verdict"], prepared["reason"]
    result = ev.verify(prepared["kernel_file"], time_it=False)
    assert result["verdict"] == "NOT_PERMUTATION", result["reason"]
    assert "found by the proof over every grid" in result["reason"] and where in result["reason"] + " "


def test_the_report_says_whether_the_best_order_is_proven_or_guarded():
    from swizzleperf.agent.loop.report import build_report, render_markdown
    run = {k: "x" for k in ("kernel", "kernel_path", "hardware", "mode", "run_id", "run_dir", "proposer")}
    scope = "permutation proven for all grids (up to 2147483647 programs; z3)"
    best = {"name": "grouped-m:8", "verdict": "PASS", "source": catalog_source("grouped-m:8", ARGS),
            "kind": "candidate", "permutation_scope": scope, "metrics": {}}
    report = build_report({"best": best, "baseline": {"name": "baseline", "verdict": "PASS", "metrics": {}},
                           "history": []}, run, "")
    assert report["best"]["permutation_scope"] == scope
    assert "Permutation proven for all grids" in render_markdown(report)


# Round seven of #41: a name assigned without tl.constexpr holds a tensor in Triton (int32 here), whose
# `//` truncates and whose sum wraps; folded with Python's operators these read as row-major, and
# were proven and written unguarded. In Triton each breaks the grids with 12 345 columns.
_TENSOR_TRAPS = {
    "floor division of a negative local": "c = -1\n    e = c // 2 + 1\n    w = 1 - e",   # Triton: e = 1, w = 0
    "a local that wraps": "c = 2147483647\n    w = tl.where(c + 1 < 0, 0, 1)",              # Triton: c + 1 < 0
    "a range variable": "w = 1\n    for i in range(1):\n        w = (i - 1) // 2 + 2",           # Triton: w = 2
    "an augmented local": "w = -3\n    w %= 2\n    w = w + 0",                                   # Triton: -1, Python: 1
}


@pytest.mark.parametrize("trap", list(_TENSOR_TRAPS))
def test_a_local_holds_a_tensor_and_is_never_folded_with_pythons_operators(trap):
    source = ("@triton.jit\ndef swizzle(pid, num_pid_m, num_pid_n):\n    " + _TENSOR_TRAPS[trap]
              + "\n    pid_m = pid // num_pid_n\n    pid_n = pid % num_pid_n\n"
              "    return pid_m, tl.where(num_pid_n == 12345, pid_n * w, pid_n)\n")
    proof = prove_permutation(source, GRID, 2)
    assert proof.status != "proven", proof.statement


def test_constexpr_locals_and_static_range_variables_still_fold_as_triton_folds_them():
    """The same arithmetic on names annotated tl.constexpr, and on a tl.static_range variable, is
    Python's in Triton too (its front end folds constexprs): -1 // 2 + 1 is 0 there, w is 1."""
    source = ('@triton.jit\ndef swizzle(pid, num_pid_m, num_pid_n):\n'
              '    C: tl.constexpr = -1\n    E: tl.constexpr = C // 2 + 1\n    w = 1 - E\n'
              '    for i in tl.static_range(1):\n        w = w + (i - 1) // 2 + 1\n'
              '    pid_m = pid // num_pid_n\n    pid_n = pid % num_pid_n\n'
              '    return pid_m, tl.where(num_pid_n == 12345, pid_n * w, pid_n)\n')
    proof = prove_permutation(source, GRID, 2)
    assert proof.status == "proven", proof.statement


def test_a_literal_out_of_the_range_of_the_tensor_it_meets_is_not_proven():
    """`pid + 3000000000`: Triton refuses a scalar out of int32's range beside an int32 (the
    interpreter raises 'Scalar 3000000000 is out of range for type int32'); the prover read it as
    an int64 sum."""
    source = ('@triton.jit\ndef swizzle(pid, num_pid_m, num_pid_n):\n'
              '    p = tl.where(pid + 3000000000 >= 3000000000, pid, 0)\n'
              '    return p // num_pid_n, p % num_pid_n\n')
    assert prove_permutation(source, GRID, 2).status != "proven"


# Round nine of #41: a comparison's result is an int1 tensor in Triton; arithmetic of two of them (or
# of one and a bool constant) is int1 arithmetic, which wraps: `c + c` is 0 where c is true, so
# `c + c - 2 * c` is -2 there. Read as int32 arithmetic these were 0, and an order that breaks at
# 40 000 tiles was proven for all grids and written unguarded by --in-place.
_INT1_TRAPS = {
    "the sum of two comparisons": "d = c + c - 2 * c",
    "a comparison plus True": "d = (c + True) - c - 1",
    "sums and differences": "d = c + c - c - c",
    "a negated sum": "d = -(c + c) + 2 * c",
    "a negated comparison": "d = -c + c",
}


@pytest.mark.parametrize("trap", list(_INT1_TRAPS))
def test_int1_arithmetic_is_never_read_as_int32(trap):
    source = ("@triton.jit\ndef swizzle(pid, num_pid_m, num_pid_n):\n    c = pid >= 40000\n    "
              + _INT1_TRAPS[trap] + "\n    pid_m = pid // num_pid_n\n    pid_n = pid % num_pid_n\n"
              "    return pid_m, pid_n + d\n")
    proof = prove_permutation(source, GRID, 2)
    assert proof.status != "proven", proof.statement


def test_a_boolean_beside_a_number_and_its_inverse_are_still_proven():
    """Mixed with an int32, an int1 is widened as 0 or 1 (Triton: `2 * c` is 2 where c is true), and
    `~c` of an int1 is its not: these orders are row-major and stay proven."""
    source = ("@triton.jit\ndef swizzle(pid, num_pid_m, num_pid_n):\n    c = pid >= 40000\n"
              "    d = 2 * c - c - c + tl.where(~c, 0, 0) + tl.where(~c & c, 1, 0)\n"
              "    pid_m = pid // num_pid_n\n    pid_n = pid % num_pid_n\n    return pid_m, pid_n + d\n")
    proof = prove_permutation(source, GRID, 2)
    assert proof.status == "proven", proof.statement


# #41 round fourteen: `1 and 2` is 2 in Python and in Triton's code generator; the prover read 1 and
# proved an order that halves the program id above 300 000 tiles (half of C never computed).
HALVED_BY_AND = '''@triton.jit
def swizzle(pid, num_pid_m, num_pid_n):
    q = tl.where(num_pid_m * num_pid_n > 300000, pid // (1 and 2), pid)
    return q // num_pid_n, q % num_pid_n
'''
TIMES_THREE_BY_OR = '''@triton.jit
def swizzle(pid, num_pid_m, num_pid_n):
    q = (pid * (0 or 3)) % (num_pid_m * num_pid_n)
    return q // num_pid_n, q % num_pid_n
'''
SYMBOLIC_AND = '''@triton.jit
def swizzle(pid, num_pid_m, num_pid_n):
    q = pid + (num_pid_m and 0)
    return q // num_pid_n, q % num_pid_n
'''
CONSTANTS_KEPT = '''@triton.jit
def swizzle(pid, num_pid_m, num_pid_n):
    q = pid * (2 and 1) + (0 or 0)
    return q // num_pid_n, q % num_pid_n
'''


@pytest.mark.parametrize("source", [HALVED_BY_AND, TIMES_THREE_BY_OR])
def test_and_or_of_constants_give_an_operand_as_python_does(source):
    proof = prove_permutation(source, GRID, 2)
    assert proof.status == "counterexample", proof.statement


def test_and_or_of_a_grid_value_is_left_unproven_and_constants_that_keep_the_order_prove():
    assert prove_permutation(SYMBOLIC_AND, GRID, 2).status not in ("proven", "counterexample")
    assert prove_permutation(CONSTANTS_KEPT, GRID, 2).status == "proven"
