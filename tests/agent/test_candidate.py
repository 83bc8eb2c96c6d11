"""Static check and AST splice of candidates (pure Python, no kernel runs)."""
import ast

import pytest

from swizzleperf.agent.candidate import (CandidateError, check_candidate, splice, target_args,
                                          target_source, unified_diff)
from swizzleperf.agent.swizzles import catalog_source

ARGS = ["pid", "num_pid_m", "num_pid_n"]
GOOD = '''@triton.jit
def swizzle(pid, num_pid_m, num_pid_n):
    """Column-major."""
    GROUP: tl.constexpr = 4
    pid_m = tl.minimum(pid % num_pid_m, num_pid_m - 1)
    pid_n = pid // num_pid_m
    return pid_m, pid_n
'''


def test_accepts_catalog_members_and_a_hand_written_target():
    check_candidate(GOOD, "swizzle", ARGS)
    for name in ("row-major", "column-major", "grouped-m:8", "grouped-n:3", "xcd-contiguous:8",
                 "xcd-grouped-m:8:8"):
        check_candidate(catalog_source(name, ARGS), "swizzle", ARGS)


@pytest.mark.parametrize("source, message", [
    ("def swizzle(pid, num_pid_m, num_pid_n):\n    return pid, 0\n", "@triton.jit"),
    ("@triton.jit\ndef swizzle(pid, m):\n    return pid, 0\n", "must keep its parameters"),
    ("@triton.jit\ndef other(pid, num_pid_m, num_pid_n):\n    return pid, 0\n", "exactly one function"),
    ("import os\n@triton.jit\ndef swizzle(pid, num_pid_m, num_pid_n):\n    return pid, 0\n", "exactly one function"),
    ("@triton.jit\ndef swizzle(pid, num_pid_m, num_pid_n):\n    x = tl.load(pid)\n    return x, 0\n", "tl.load"),
    ("@triton.jit\ndef swizzle(pid, num_pid_m, num_pid_n):\n    import os\n    return pid, 0\n", "Import"),
    ("@triton.jit\ndef swizzle(pid, num_pid_m, num_pid_n):\n    while True:\n        pass\n", "While"),
    ("@triton.jit\ndef swizzle(pid, num_pid_m, num_pid_n):\n    return os.getpid(), 0\n", "os.getpid is not allowed"),
    ("@triton.jit\ndef swizzle(pid, num_pid_m, num_pid_n):\n    return pid.__class__, 0\n", "not allowed"),
    ("@triton.jit\ndef swizzle(pid, num_pid_m, num_pid_n)\n    return pid, 0\n", "does not parse"),
    ("@triton.jit\ndef swizzle(pid, num_pid_m, num_pid_n):\n    if pid < 3:\n        pid = 2 - pid\n    return pid, 0\n", "tl.where"),
    ("@triton.jit\ndef swizzle(pid, num_pid_m, num_pid_n):\n    return (pid if pid < 3 else 0), 0\n", "tl.where"),
    ("@triton.jit\ndef swizzle(pid, num_pid_m, num_pid_n):\n    s = 'x'\n    return pid, 0\n", "numbers only"),
])
def test_rejects_with_a_precise_reason(source, message):
    with pytest.raises(CandidateError, match=message):
        check_candidate(source, "swizzle", ARGS)


def test_splice_changes_only_the_target(gemm_source):
    new = splice(gemm_source, "swizzle", GOOD)
    old_tree, new_tree = ast.parse(gemm_source), ast.parse(new)
    assert len(old_tree.body) == len(new_tree.body)
    assert target_source(new, "swizzle").strip() == GOOD.strip()
    assert "Column-major" not in gemm_source and "Column-major" in new
    diff = unified_diff(gemm_source, new, "gemm.py")
    assert diff.startswith("--- a/gemm.py") and "+    pid_n = pid // num_pid_m" in diff
    assert target_args(gemm_source, "swizzle") == ARGS


def test_splice_refuses_a_module_without_the_target():
    with pytest.raises(CandidateError, match="no top-level function"):
        splice("x = 1\n", "swizzle", GOOD)
