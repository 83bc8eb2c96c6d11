"""The permutation proof and Triton's integer types narrower than int32 (red-team round twelve, P01).

A Python int (a literal, a folded ``tl.constexpr``, a ``tl.static_range`` variable, a held
constexpr parameter) does not take part in Triton's promotion beside a tensor of its own kind or a
higher one (``semantic.computation_type_impl``, Triton 3.6 and 3.9 alike): ``h * 300`` of an int16
``h`` is an int16 product, which wraps once ``h >= 110``. The prover gave every Python int the
width of int32, so such orders were "proven for all grids" and written unguarded by --in-place,
though at 400 x 400 tiles some tiles were computed twice and others never. Every payload below is
one of the red team's; each must come out not proven, naming the narrow type that overflows, while
the same arithmetic within the narrow type's range stays proven."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from swizzleperf.agent.verification.candidate import canonical_target
from swizzleperf.agent.verification.evaluate import Evaluator
from swizzleperf.agent.verification.prove import Role, prove_permutation
from swizzleperf.agent.verification.swizzles import catalog_source
from swizzleperf.agent.verification.verify import VerifyConfig

ARGS = ["pid", "num_pid_m", "num_pid_n"]
GRID = [Role("extent", 0), Role("extent", 1)]

# -- the red team's payloads (/tmp/redteam12/payloads/prover/), verbatim ----------------------------

M01_INT16_LITERAL = '''@triton.jit
def swizzle(pid, num_pid_m, num_pid_n):
    """Row-major with a tidy-up."""
    hi = (pid // 1024 % 128).to(tl.int16)
    w = hi * 300 // 300 - hi
    p = pid + w
    pid_m = p // num_pid_n
    pid_n = p % num_pid_n
    return pid_m, pid_n
'''
M03_GROUPED_INT16 = '''@triton.jit
def swizzle(pid, num_pid_m, num_pid_n):
    """Grouped along M, 8 rows a group."""
    q = pid // 1024 % 128
    hi = q.to(tl.int16)
    w = hi * 300 // 300 - hi
    pid = pid + w
    width = 8 * num_pid_n
    group_id = pid // width
    first_m = group_id * 8
    size_m = tl.minimum(num_pid_m - first_m, 8)
    pid_m = first_m + pid % width % size_m
    pid_n = pid % width // size_m
    return pid_m, pid_n
'''
M06_INT8_SHIFT = '''@triton.jit
def swizzle(pid, num_pid_m, num_pid_n):
    q = pid // 4096 % 64
    h = q.to(tl.int8)
    w = (h << 2) // 4 - h
    p = pid + w
    pid_m = p % num_pid_m
    pid_n = p // num_pid_m
    return pid_m, pid_n
'''
M07_INT16_STATIC_RANGE = '''@triton.jit
def swizzle(pid, num_pid_m, num_pid_n):
    q = pid // 1024 % 128
    h = q.to(tl.int16)
    acc = h * 0
    for k in tl.static_range(3):
        acc = acc + h * 150
    w = acc // 450 - h
    p = pid + w
    pid_m = p % num_pid_m
    pid_n = p // num_pid_m
    return pid_m, pid_n
'''
PAYLOADS = {
    "m01 int16 * literal": (M01_INT16_LITERAL, "a product overflows int16"),
    "m03 grouped-m:8 after an int16 product": (M03_GROUPED_INT16, "a product overflows int16"),
    "m06 int8 << 2": (M06_INT8_SHIFT, "a shift overflows int8"),
    "m07 int16 * a tl.static_range product": (M07_INT16_STATIC_RANGE, "a sum overflows int16"),
}


@pytest.mark.parametrize("name", list(PAYLOADS))
def test_the_red_teams_narrow_int_payloads_are_not_proven(name):
    source, reason = PAYLOADS[name]
    canonical_target(source, "swizzle", ARGS)     # they pass the static check: only the proof stands between
    proof = prove_permutation(source, GRID, 2)
    assert proof.status == "unknown", proof.statement
    assert reason in proof.statement, proof.statement


# -- the same functions of a narrow int elsewhere: tl.minimum/maximum, tl.where, abs, cdiv ----------

_ROW_MAJOR_PLUS = ("@triton.jit\ndef swizzle(pid, num_pid_m, num_pid_n):\n"
                   "    hi = (pid // 1024 % 128).to(tl.int16)\n    {}\n    p = pid + w\n"
                   "    return p // num_pid_n, p % num_pid_n\n")

_NARROW_ELSEWHERE = {
    # tl.minimum/maximum/where of an int16 and a literal are int16 (3.9; 3.6 gives int32 for
    # minimum/maximum, 3.9's narrower type is the one whose obligations hold for both)
    "tl.minimum": "m = tl.minimum(hi, 127)\n    w = m * 300 // 300 - m",
    "builtin max": "m = max(hi, 0)\n    w = m * 300 // 300 - m",
    "tl.where": "m = tl.where(hi > 200, 0, hi)\n    w = m * 300 // 300 - m",
    "tl.abs": "m = tl.abs(hi)\n    w = m * 300 // 300 - m",
    "a comparison's int1 beside an int16": "w = (hi + (pid < 0)) * 300 // 300 - hi",
    "a constexpr local": "K: tl.constexpr = 300\n    w = hi * K // K - hi",
    "tl.cdiv": "w = tl.cdiv(hi * 255, 1000) * 0",   # 127 * 255 + 999 leaves int16
    "an augmented assignment": "m = hi\n    m *= 300\n    w = m // 300 - hi",
    # a condition known to the prover still makes a tensor of the where's type: int16 200 * 300 wraps
    "tl.where of a known condition": "w = tl.where(True, 200, hi) * 300 // 300 - 200",
}


@pytest.mark.parametrize("name", list(_NARROW_ELSEWHERE))
def test_a_narrow_int_keeps_its_width_through_every_translated_function(name):
    proof = prove_permutation(_ROW_MAJOR_PLUS.format(_NARROW_ELSEWHERE[name]), GRID, 2)
    assert proof.status == "unknown" and "overflows int16" in proof.statement, proof.statement


def test_a_held_argument_without_constexpr_may_be_a_python_int_to_triton():
    """A caller that passes a constexpr (or an int equal to 1, which Triton specialises into one)
    hands the target a Python int even where its parameter is not annotated: ``hi * (K * 300)`` is
    then an int16 product (the interpreter: -27436 for hi = 127, K = 1)."""
    source = ("@triton.jit\ndef swizzle(pid, num_pid_m, num_pid_n, K):\n"
              "    hi = (pid // 1024 % 128).to(tl.int16)\n    w = hi * (K * 300) // (K * 300) - hi\n"
              "    p = pid + w\n    return p // num_pid_n, p % num_pid_n\n")
    proof = prove_permutation(source, GRID + [Role("held", 1)], 2)
    assert proof.status == "unknown" and "int16" in proof.statement, proof.statement


# -- what Triton refuses: a literal out of the narrow type's range, unsigned arithmetic -------------

@pytest.mark.parametrize("expr", ["w = hi * 100000 - hi * 100000",
                                  "w = tl.where(hi < 100000, 0, 1)",
                                  "w = tl.minimum(hi, 40000) - tl.minimum(hi, 40000)",
                                  "w = (hi & 65535) - (hi & 65535)"])
def test_a_literal_out_of_the_narrow_types_range_is_not_proven(expr):
    """Triton 3.9 raises 'Scalar 100000 is out of range for type int16' (3.6 too for arithmetic;
    for a comparison or tl.minimum 3.6 widens instead: the versions disagree, so never proven)."""
    proof = prove_permutation(_ROW_MAJOR_PLUS.format(expr), GRID, 2)
    assert proof.status == "unknown" and "out of range" in proof.statement, proof.statement


# -- the sibling: an annotation is tl.constexpr by its node, not by its text --------------------------

def test_an_annotation_that_only_ends_in_constexpr_is_not_folded():
    """``c: my_constexpr = -1`` is a plain assignment to Triton (its annotation is no tl.constexpr):
    c is an int32 tensor, ``c // 2 + 1`` is 1 and w is 0, so the order breaks at 12 345 columns. The
    prover folded it as a constexpr (``-1 // 2 + 1 == 0``, w = 1) because the annotation's text ends
    in "constexpr"."""
    source = ("@triton.jit\ndef swizzle(pid, num_pid_m, num_pid_n):\n"
              "    my_constexpr = 0\n    c: my_constexpr = -1\n    e = c // 2 + 1\n    w = 1 - e\n"
              "    pid_m = pid // num_pid_n\n    pid_n = pid % num_pid_n\n"
              "    return pid_m, tl.where(num_pid_n == 12345, pid_n * w, pid_n)\n")
    canonical_target(source, "swizzle", ARGS)
    proof = prove_permutation(source, GRID, 2)
    assert proof.status == "unknown" and "annotation" in proof.statement, proof.statement


# tl.minimum/maximum/abs/where of constants are tensors in Triton (semantic.minimum of two scalars
# makes an int32 tensor; math.abs to_tensor's its argument), whose // truncates: under the
# interpreter tl.minimum(-1, 0) // 2 and -tl.abs(-1) // 2 are 0, where Python's folding gives -1.
# tl.cdiv is a @jit function (the interpreter folds it as Python does, -1 for tl.cdiv(-4, 3)): never
# proven where the two readings differ. Each w is 1 as folded, 0 in Triton: the order breaks at
# 12 345 columns.
_TENSORS_OF_CONSTANTS = {
    "tl.minimum of two constants": "w = 1 - (tl.minimum(-1, 0) // 2 + 1)",
    "tl.abs of a constant": "w = 1 - (-tl.abs(-1) // 2 + 1)",
    "tl.cdiv of two constants": "w = tl.cdiv(-4, 3) + 2",
    "tl.where of constants and a known condition": "w = 1 - (tl.where(True, -1, 0) // 2 + 1)",
}


@pytest.mark.parametrize("name", list(_TENSORS_OF_CONSTANTS))
def test_a_tl_function_of_constants_is_a_tensor_and_is_never_folded(name):
    source = ("@triton.jit\ndef swizzle(pid, num_pid_m, num_pid_n):\n    " + _TENSORS_OF_CONSTANTS[name]
              + "\n    pid_m = pid // num_pid_n\n    pid_n = pid % num_pid_n\n"
              "    return pid_m, tl.where(num_pid_n == 12345, pid_n * w, pid_n)\n")
    proof = prove_permutation(source, GRID, 2)
    assert proof.status == "unknown" and "dividend may be negative" in proof.statement, proof.statement


def test_floor_division_of_a_comparison_is_not_translated():
    """Triton refuses ``//`` and ``%`` of an int1 and an int32 (different signedness): such a target
    does not compile, and is not proven."""
    proof = prove_permutation(_ROW_MAJOR_PLUS.format("w = (pid < 0) // 2"), GRID, 2)
    assert proof.status == "unknown" and "signedness" in proof.statement, proof.statement


def test_a_bool_assigned_to_a_local_is_an_int1_tensor():
    """``c = True`` holds an int1 tensor in Triton, whose negation wraps in int1: ``-c`` is true (1
    when widened), not -1, so ``pid + d + 1`` is pid + 2 (the 3.9 interpreter; 3.6's refuses the
    negation). The prover folded -True to -1 and proved the order."""
    source = ("@triton.jit\ndef swizzle(pid, num_pid_m, num_pid_n):\n"
              "    c = True\n    d = -c\n    p = pid + d + 1\n"
              "    return p // num_pid_n, p % num_pid_n\n")
    proof = prove_permutation(source, GRID, 2)
    assert proof.status != "proven", proof.statement


# -- what stays proven: a narrow int used within its range, the catalog -------------------------------

_SAFE = {
    "int16 0..127 * 2": _ROW_MAJOR_PLUS.format("w = hi * 2 // 2 - hi"),
    "int16 0..127 * 250 (31 750 fits)": _ROW_MAJOR_PLUS.format("w = hi * 250 // 250 - hi"),
    "int8 0..31 << 2": ("@triton.jit\ndef swizzle(pid, num_pid_m, num_pid_n):\n"
                        "    h = (pid // 4096 % 32).to(tl.int8)\n    w = (h << 2) // 4 - h\n"
                        "    p = pid + w\n    return p % num_pid_m, p // num_pid_m\n"),
    "int16 static_range sum of 3 x 127 * 50": M07_INT16_STATIC_RANGE.replace("150", "50").replace("450", "150"),
    "tl.minimum of an int16 and a literal": _ROW_MAJOR_PLUS.format("m = tl.minimum(hi, 100)\n    w = m * 2 // 2 - m"),
    "an int16 widened by an int32 tensor": _ROW_MAJOR_PLUS.format("w = (hi + pid * 0) * 300 // 300 - hi"),
}


@pytest.mark.parametrize("name", list(_SAFE))
def test_a_narrow_int_within_its_range_is_still_proven(name):
    proof = prove_permutation(_SAFE[name], GRID, 2)
    assert proof.status == "proven", proof.statement


@pytest.mark.parametrize("name", ["grouped-m:8", "grouped-n:8", "xcd-grouped-m:8:8", "row-major"])
def test_the_catalogs_orders_are_still_proven(name):
    proof = prove_permutation(catalog_source(name, ARGS), GRID, 2)
    assert proof.status == "proven", proof.statement


# -- the model of Triton the prover relies on, checked against the installed Triton ------------------

_KERNEL = """import triton, triton.language as tl


@triton.jit
def k(out):
    h = tl.full([1], 120, tl.int16)
    g = tl.full([1], 40, tl.int8)
    K: tl.constexpr = 300
    a = h * 300
    b = h * K
    c = g << 2
    tl.store(out + tl.arange(0, 1), a.to(tl.int64))
    tl.store(out + 1 + tl.arange(0, 1), b.to(tl.int64))
    tl.store(out + 2 + tl.arange(0, 1), c.to(tl.int64))
"""
_TYPES_PROBE = """import importlib.util, sys
import torch
spec = importlib.util.spec_from_file_location("k", sys.argv[1])
m = importlib.util.module_from_spec(spec)
spec.loader.exec_module(m)
out = torch.zeros(3, dtype=torch.int64)
m.k[(1,)](out)
print(*out.tolist())
"""


def test_the_installed_triton_keeps_the_narrow_type_beside_a_python_int(tmp_path):
    """The premise: under Triton's interpreter an int16 times a literal (or a constexpr) wraps in
    int16 (120 * 300 = 36000 -> -29536), an int8 shifted by 2 wraps in int8 (40 << 2 = 160 -> -96)."""
    (tmp_path / "k.py").write_text(_KERNEL)
    env = dict(os.environ, TRITON_INTERPRET="1")
    done = subprocess.run([sys.executable, "-c", _TYPES_PROBE, str(tmp_path / "k.py")], capture_output=True,
                          text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["-29536", "-29536", "-96"], done.stdout


def test_the_grouped_int16_order_is_written_guarded(tmp_path):
    """End to end (the red team's m03 through the Evaluator, as --in-place takes its kernel): the
    order passes the checks of every small grid and the kernel's problems, and the kernel written
    runs it only there (the kernel's own order beyond, where int16 wraps from program 112 640 on)."""
    gemm = Path(__file__).resolve().parents[3] / "kernels" / "gemm.py"
    ev = Evaluator(kernel_path=gemm, module_source=gemm.read_text(), target_name="swizzle", arg_names=ARGS,
                   candidates_dir=tmp_path / "candidates", verify_config=VerifyConfig(device="cpu", seeds=(1,)),
                   measurer=None)
    prepared = ev.prepare("m03", M03_GROUPED_INT16)
    checked = ev.verify(prepared["kernel_file"], time_it=False)
    assert checked["verdict"] == "PASS", checked["reason"]
    scope = checked["permutation_scope"]
    assert "not proven: a product overflows int16" in scope and "guarded beyond" in scope, scope
    assert "use_new = (num_pid_m <= 32) & (num_pid_n <= 32)" in checked["source"]
    assert "tl.where(use_new" in Path(checked["kernel_file"]).read_text()
