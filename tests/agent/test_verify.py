"""Verification in worker subprocesses through the Triton interpreter: permutation over the real
and the check grid, numerics with the output poisoned, timeouts and crashes."""
from pathlib import Path

import numpy as np
import pytest

from swizzleperf.agent.candidate import splice
from swizzleperf.agent.verify import Verdict, VerifyConfig, run_worker, verify
from swizzleperf.agent.worker import permutation_errors

# The usual XCD remap written naively: a permutation only when the grid is a multiple of 8.
NAIVE_XCD = '''@triton.jit
def swizzle(pid, num_pid_m, num_pid_n):
    num_pids = num_pid_m * num_pid_n
    pid = (pid % 8) * (num_pids // 8) + pid // 8
    return pid // num_pid_n, pid % num_pid_n
'''
HANGS = '''@triton.jit
def swizzle(pid, num_pid_m, num_pid_n):
    acc = pid
    for i in range(1000000000):
        acc = acc + 1
    return pid // num_pid_n, pid % num_pid_n
'''


def _module(tmp_path: Path, source: str, target: str, name: str = "cand.py") -> Path:
    path = tmp_path / name
    path.write_text(splice(source, "swizzle", target))
    return path


def test_permutation_errors_name_missing_repeated_and_out_of_range_tiles():
    coords = np.array([[0, 0], [0, 0], [0, 0], [1, 1], [2, 5]])  # grid 2 x 2: (0,1) and (1,0) missing
    message = permutation_errors(coords, (2, 2))
    assert "2 tile(s) (0,1), (1,0) never computed" in message
    assert "(0,0) 3 times" in message
    assert "program 4 -> (2, 5)" in message
    assert permutation_errors(np.array([[0, 1], [0, 0], [1, 1], [1, 0]]), (2, 2)) == ""


def test_naive_xcd_remap_is_rejected_on_a_grid_that_is_not_a_multiple_of_8(tmp_path, gemm_source):
    # The default grid (128 x 64 = 8192 programs) is a multiple of 8, the check grid (4 x 3 = 12)
    # is not: the remap must fail there, with the tiles named.
    result = verify(_module(tmp_path, gemm_source, NAIVE_XCD), tmp_path / "m.npy", VerifyConfig())
    assert result.verdict is Verdict.NOT_PERMUTATION
    assert "check problem (4x3 tiles, 12 programs)" in result.reason
    assert "never computed" in result.reason and "computed more than once" in result.reason


def test_a_good_candidate_passes_and_saves_its_map(tmp_path, gemm_source):
    from swizzleperf.agent.swizzles import catalog_source
    target = catalog_source("xcd-grouped-m:8:8", ["pid", "num_pid_m", "num_pid_n"])
    result = verify(_module(tmp_path, gemm_source, target), tmp_path / "m.npy", VerifyConfig(seeds=(3,)))
    assert result.verdict is Verdict.PASS, result.reason
    order = np.load(tmp_path / "m.npy")
    assert sorted(order.tolist()) == list(range(128 * 64))
    assert result.details["numerics"]["rel_errors"]["check"][0] < 1e-2


def test_an_unwritten_tile_is_caught_by_the_poisoned_output(tmp_path, gemm_source):
    # A kernel that skips the store of tile (1, 2): with C pre-filled with NaN the hole shows; with
    # C left at zeros a near-zero product could hide it.
    broken = gemm_source.replace("c_mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)",
                                 "c_mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N) "
                                 "& ((offs_cm[:, None] // BLOCK_M != 1) | (offs_cn[None, :] // BLOCK_N != 2))")
    assert broken != gemm_source
    path = tmp_path / "broken.py"
    path.write_text(broken)
    result = verify(path, tmp_path / "m.npy", VerifyConfig(seeds=(1,)))
    assert result.verdict is Verdict.MISMATCH
    assert "never written" in result.reason and "1 tile(s) (1,2) (tiles of 32x32 elements)" in result.reason


def test_a_hanging_candidate_times_out(tmp_path, gemm_source):
    result = verify(_module(tmp_path, gemm_source, HANGS), tmp_path / "m.npy", VerifyConfig(timeout_s=20))
    assert result.verdict is Verdict.TIMEOUT
    assert "did not finish within 20 s" in result.reason


def test_a_kernel_that_does_not_compile_is_reported(tmp_path, gemm_source):
    path = tmp_path / "bad.py"
    path.write_text(gemm_source.replace("accumulator = tl.dot(a, b, accumulator)",
                                        "accumulator = tl.no_such_function(a, b, accumulator)"))
    result = verify(path, tmp_path / "m.npy", VerifyConfig(seeds=(1,)))
    assert result.verdict in (Verdict.COMPILE_ERROR, Verdict.RUNTIME_ERROR)
    assert "no_such_function" in result.reason


def test_a_worker_that_dies_is_a_crash_not_a_traceback(tmp_path):
    result = run_worker({"kernel_path": "x", "stages": ["nonexistent-stage"]}, 60, interpret=True)
    assert result.verdict in (Verdict.CRASH, Verdict.COMPILE_ERROR)
    assert result.reason


# The Triton tutorial's grouped order (03-matrix-multiplication.py), with Python's builtin min
# on the group size, and a fourth parameter: compiled, `min` is elementwise (tl.minimum); the
# check must read it the same way.
TUTORIAL_GROUPED = '''@triton.jit
def swizzle(pid, num_pid_m, num_pid_n):
    GROUP_SIZE_M: tl.constexpr = 3
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_SIZE_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m
    return pid_m, pid_n
'''


def test_the_tutorials_grouped_order_with_builtin_min_is_a_permutation(tmp_path, gemm_source):
    result = verify(_module(tmp_path, gemm_source, TUTORIAL_GROUPED), tmp_path / "m.npy",
                    VerifyConfig(seeds=(3,)))
    assert result.verdict is Verdict.PASS, result.reason
    order = np.load(tmp_path / "m.npy")
    assert sorted(order.tolist()) == list(range(128 * 64))
    # grouped by 3 tile rows: the first programs walk 3 rows of column 0 (64 columns per row)
    assert order[:4].tolist() == [0, 64, 128, 1]
