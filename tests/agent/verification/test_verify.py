"""Verification in worker subprocesses through the Triton interpreter: permutation over the real
and the check grid, numerics with the output poisoned, timeouts and crashes."""
from pathlib import Path

import numpy as np
import pytest

from swizzleperf.agent.verification.candidate import splice, target_source
from swizzleperf.agent.verification.probe import permutation_errors
from swizzleperf.agent.verification.verify import Verdict, VerifyConfig, run_worker, verify

# The usual XCD remap written naively: a permutation only when the grid is a multiple of 8.
NAIVE_XCD = '''@triton.jit
def swizzle(pid, num_pid_m, num_pid_n):
    num_pids = num_pid_m * num_pid_n
    pid = (pid % 8) * (num_pids // 8) + pid // 8
    return pid // num_pid_n, pid % num_pid_n
'''
# a loop the static check refuses (tests/agent/verification/test_candidate.py: a bound that is not a
# constant, red team 11 M01), written into a module by hand: only the worker's timeout stops it
HANGS = '''@triton.jit
def swizzle(pid, num_pid_m, num_pid_n):
    acc = pid
    for i in range(num_pid_m * 1000000000):
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
    from swizzleperf.agent.verification.swizzles import catalog_source
    target = catalog_source("xcd-grouped-m:8:8", ["pid", "num_pid_m", "num_pid_n"])
    result = verify(_module(tmp_path, gemm_source, target), tmp_path / "m.npy", VerifyConfig(seeds=(3,)))
    assert result.verdict is Verdict.PASS, result.reason
    order = np.load(tmp_path / "m.npy")
    assert sorted(order.tolist()) == list(range(128 * 64))
    assert result.details["numerics"]["rel_errors"]["check"][0] < 1e-2


def test_an_unwritten_tile_is_caught_by_the_poisoned_output(tmp_path, gemm_source):
    # A kernel that stores tile (1, 2) past C's last row (clipped away): with C pre-filled
    # with NaN the hole shows; with C left at zeros a near-zero product could hide it.
    broken = gemm_source.replace("store_tile(c, accumulator, pid_m * BLOCK_M, pid_n * BLOCK_N, M, N,",
                                 "store_tile(c, accumulator, tl.where((pid_m == 1) & (pid_n == 2), M + BLOCK_M, "
                                 "pid_m * BLOCK_M), pid_n * BLOCK_N, M, N,")
    assert broken != gemm_source
    path = tmp_path / "broken.py"
    path.write_text(broken)
    result = verify(path, tmp_path / "m.npy", VerifyConfig(seeds=(1,)))
    assert result.verdict is Verdict.MISMATCH
    assert "never written" in result.reason and "1 tile(s) (1,2) (tiles of 32x32 elements)" in result.reason


def test_a_hanging_candidate_times_out(tmp_path, gemm_source):
    path = tmp_path / "hangs.py"
    path.write_text(gemm_source.replace(target_source(gemm_source, "swizzle"), HANGS))
    assert "num_pid_m * 1000000000" in path.read_text()
    result = verify(path, tmp_path / "m.npy", VerifyConfig(timeout_s=10))
    assert result.verdict is Verdict.TIMEOUT
    assert "did not finish within 10 s" in result.reason


def test_a_kernel_that_does_not_compile_is_reported(tmp_path, gemm_source):
    path = tmp_path / "bad.py"
    broken = gemm_source.replace("accumulator = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)",
                                 "accumulator = tl.no_such_function((BLOCK_M, BLOCK_N), dtype=tl.float32)")
    assert broken != gemm_source
    path.write_text(broken)
    result = verify(path, tmp_path / "m.npy", VerifyConfig(seeds=(1,)))
    assert result.verdict in (Verdict.COMPILE_ERROR, Verdict.RUNTIME_ERROR)
    assert "no_such_function" in result.reason


def test_a_worker_that_dies_is_a_crash_not_a_traceback(tmp_path, gemm_source):
    """A worker that dies outright (here its kernel module reads address 0 at import: SIGSEGV, which
    the kernel delivers even to PID 1 of the box's PID namespace) writes no result: the verdict is
    CRASH with its exit status, not a traceback in the agent."""
    dying = tmp_path / "dying.py"
    dying.write_text(gemm_source + "\nimport ctypes as _ctypes\n_ctypes.string_at(0)\n")
    result = run_worker({"kernel_path": str(dying), "stages": ["permutation"]}, 60, interpret=True)
    assert result.verdict is Verdict.CRASH, (result.verdict, result.reason)
    assert "no result" in result.reason and "-11" in result.reason, result.reason


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


# -- every grid the kernel may be launched with (issue #21) ----------------------------------------

# Permutations at the kernel's problems (default 128x64, check 4x3, square8k 64x32, llm 32x112 tiles)
# but not on some other grid: the probe must find that grid.
BAD_AT_13 = '''@triton.jit
def swizzle(pid, num_pid_m, num_pid_n):
    pid_m = pid // num_pid_n
    return tl.where(num_pid_m == 13, 0, pid_m), pid % num_pid_n
'''
BAD_ABOVE_1000 = '''@triton.jit
def swizzle(pid, num_pid_m, num_pid_n):
    tiles = num_pid_m * num_pid_n
    pid_m = pid // num_pid_n
    return tl.where((tiles > 1000) & (tiles < 2000), 0, pid_m), pid % num_pid_n
'''


@pytest.mark.parametrize("target, where", [(BAD_AT_13, "at grid 13x"), (BAD_ABOVE_1000, "at grid ")],
                         ids=["num_pid_m-13", "1000-2000-tiles"])
def test_a_target_that_is_a_permutation_only_at_the_probed_sizes_is_rejected(tmp_path, gemm_source, gemm_path,
                                                                            target, where):
    result = verify(_module(tmp_path, gemm_source, target), tmp_path / "m.npy", VerifyConfig(seeds=(1,)),
                    reference_path=gemm_path)
    assert result.verdict is Verdict.NOT_PERMUTATION, result.reason
    assert where in result.reason and "a grid the kernel may be launched with" in result.reason
    if target is BAD_ABOVE_1000:
        tiles = int(result.reason.split("(")[1].split(" programs")[0])
        assert 1000 < tiles < 2000


def test_a_good_order_passes_every_grid_and_says_how_many(tmp_path, gemm_source, gemm_path):
    from swizzleperf.agent.verification.swizzles import catalog_source
    target = catalog_source("grouped-n:3", ["pid", "num_pid_m", "num_pid_n"])
    result = verify(_module(tmp_path, gemm_source, target), tmp_path / "m.npy", VerifyConfig(seeds=(1,)),
                    reference_path=gemm_path)
    assert result.verdict is Verdict.PASS, result.reason
    grids = result.details["all_grids"]
    assert grids["sites"] >= 16 * 16 and grids["note"] == ""


def test_a_one_dimensional_target_is_probed_on_every_small_grid(tmp_path):
    softmax = Path(__file__).resolve().parents[3] / "kernels" / "softmax.py"
    source = softmax.read_text()
    bad = '''@triton.jit
def swizzle(pid, num_pids):
    return tl.where(num_pids == 300, pid // 2, pid)
'''
    path = tmp_path / "softmax_cand.py"
    path.write_text(splice(source, "swizzle", bad))
    result = run_worker({"kernel_path": str(path), "problems": ["default", "check"],
                         "stages": ["permutation", "all_grids"], "reference_path": str(softmax)}, 300, interpret=True)
    assert result.verdict is Verdict.NOT_PERMUTATION and "at grid 300 (300 programs)" in result.reason


# A target with an argument besides the grid's extents (GROUP, the same at every problem: held, and
# taken through 1..16) and the tile count (recomputed for each grid).
PROBE_ONLY = '''
import triton
import triton.language as tl
from swizzleperf.kernels.spec import KernelSpec


{target}


def _never(*args, **kwargs):
    raise NotImplementedError("permutation stages only")


SPEC = KernelSpec(
    name="probe-only", kernel_name="none",
    problems={{"default": {{"M": 40, "N": 24}}, "check": {{"M": 5, "N": 3}}}},
    meta={{}}, check_meta={{}}, make_inputs=_never, launch=_never, reference=_never, output_name="c",
    tolerance={{"bfloat16": 0.0}}, tile_grid=lambda p, m: (p["M"], p["N"]),
    swizzle_args=lambda p, m: (p["M"], p["N"], 8, p["M"] * p["N"]), flops=lambda p: 0.0,
    min_bytes=lambda p, d: 0.0)
'''
OWN_GROUPED = '''@triton.jit
def swizzle(pid, num_pid_m, num_pid_n, GROUP, num_tiles):
    num_pid_in_group = GROUP * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP
    group_size_m = tl.minimum(num_pid_m - first_pid_m, GROUP)
    pid_m = first_pid_m + (pid % num_pid_in_group) % group_size_m
    pid_n = (pid % num_pid_in_group) // group_size_m
    return pid_m, pid_n'''
ROTATED = '''@triton.jit
def swizzle(pid, num_pid_m, num_pid_n, GROUP, num_tiles):
    shifted = (pid + 7) % num_tiles
    return shifted // num_pid_n, shifted % num_pid_n'''
GROUP_5_BROKEN = OWN_GROUPED.replace("    return pid_m, pid_n", "    return tl.where(GROUP == 5, 0, pid_m), pid_n")


@pytest.mark.parametrize("target, verdict, message", [
    (OWN_GROUPED, Verdict.PASS, ""),
    (ROTATED, Verdict.PASS, ""),                       # uses the tile count: recomputed per grid
    (GROUP_5_BROKEN, Verdict.NOT_PERMUTATION, "GROUP=5"),
], ids=["own", "uses-tile-count", "broken-at-group-5"])
def test_arguments_besides_the_extents_are_held_recomputed_or_varied(tmp_path, target, verdict, message):
    reference = tmp_path / "own.py"
    reference.write_text(PROBE_ONLY.format(target=OWN_GROUPED))
    path = tmp_path / "cand.py"
    path.write_text(PROBE_ONLY.format(target=target))
    result = run_worker({"kernel_path": str(path), "problems": ["default", "check"],
                         "stages": ["permutation", "all_grids"], "reference_path": str(reference)}, 300,
                        interpret=True)
    assert result.verdict is verdict, result.reason
    assert message in result.reason
    if verdict is Verdict.PASS:
        assert result.details["all_grids"]["sites"] > 16 * 16 * 2 and result.details["all_grids"]["note"] == ""


def test_without_a_reference_only_targets_of_extents_alone_get_synthetic_grids(tmp_path):
    path = tmp_path / "cand.py"
    path.write_text(PROBE_ONLY.format(target=GROUP_5_BROKEN))
    result = run_worker({"kernel_path": str(path), "problems": ["default", "check"],
                         "stages": ["permutation", "all_grids"]}, 300, interpret=True)
    assert result.verdict is Verdict.PASS and result.details["all_grids"]["sites"] == 0
    assert "no reference" in result.details["all_grids"]["note"]


def test_the_synthetic_grids_are_seeded_and_cover_every_octave():
    from swizzleperf.agent.verification.probe import Site, synthetic_sites
    real = [Site((128, 64), (128, 64), "default"), Site((4, 3), (4, 3), "check")]
    sites, note = synthetic_sites(real, ["num_pid_m", "num_pid_n"], guarded=False)
    again, _ = synthetic_sites(real, ["num_pid_m", "num_pid_n"], guarded=False)
    assert note == "" and sites == again
    grids = {s.grid for s in sites}
    assert {(m, n) for m in range(1, 17) for n in range(1, 17)} - {(4, 3)} <= grids
    tiles = [np.prod(g) for g in grids if np.prod(g) > 256]
    for low in (256, 512, 1024, 2048, 4096, 8192, 16384):
        assert any(low <= t <= 2 * low + 64 for t in tiles), low
    assert max(tiles) <= min(4 * 8192, 1 << 16) + 64


_COUNTED = r'''
import json, math, sys
import numpy as np
from swizzleperf.agent.verification import probe
from swizzleperf.agent.verification.load import load_kernel
module, spec = load_kernel(sys.argv[1])
sites = [probe.Site(tuple(g), tuple(g), "grid") for g in json.loads(sys.argv[2])]
coords = probe.probe_sites(module, "swizzle", sites, compiled=sys.argv[3] == "compiled", count=True)
print(json.dumps([probe.permutation_errors(c, s.grid) for s, c in zip(sites, coords)]))
'''


def _counted(path: Path, grids: list, mode: str) -> list:
    """Run the probe with its atomic tile counts in a subprocess (``mode``: "interpreted" or
    "compiled"); the permutation errors per grid."""
    import json
    import os
    import subprocess
    import sys
    env = dict(os.environ, TRITON_INTERPRET="1" if mode == "interpreted" else "0")
    done = subprocess.run([sys.executable, "-c", _COUNTED, str(path), json.dumps(grids), mode],
                          capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_atomic_tile_counts_agree_with_the_stored_tiles(tmp_path, gemm_source):
    # the counting half of the compiled probe, run by the interpreter: counts and stores agree for a
    # permutation and for a non-permutation alike (a disagreement would raise)
    from swizzleperf.agent.verification.swizzles import catalog_source
    good = _module(tmp_path, gemm_source, catalog_source("grouped-m:3", ["pid", "num_pid_m", "num_pid_n"]), "g.py")
    bad = _module(tmp_path, gemm_source, NAIVE_XCD, "b.py")
    assert _counted(good, [[7, 9], [4, 3], [1, 1]], "interpreted") == ["", "", ""]
    errors = _counted(bad, [[7, 9], [4, 4]], "interpreted")
    assert "never computed" in errors[0] and errors[1] == ""


# The docstring trick written into a module as it is (the canonical source bypassed): the
# interpreter reads from the last `def` line (row-major: a permutation), the compiler from the
# first (every program on row 0: not one).
INTERPRETER_ONLY = '''@triton.jit
def swizzle(pid, num_pid_m, num_pid_n):
    """Row-major.
def swizzle(pid, num_pid_m, num_pid_n):
    return pid // num_pid_n, pid % num_pid_n
    # """
    return pid * 0, pid % num_pid_n
'''


@pytest.mark.gpu
def test_the_compiled_probe_rejects_what_only_the_interpreter_passes(tmp_path, gemm_source):
    source = gemm_source
    own = source[source.index("@triton.jit\ndef swizzle("):source.index("\n\n\n", source.index("def swizzle("))]
    path = tmp_path / "raw.py"
    path.write_text(source.replace(own, INTERPRETER_ONLY.rstrip("\n")))
    grids = [[128, 64], [7, 9], [13, 5]]
    assert _counted(path, grids, "interpreted") == ["", "", ""]          # the interpreter was fooled
    assert all("never computed" in e for e in _counted(path, grids, "compiled"))
    # and the compiled worker stage refuses the module before probing anything
    result = run_worker({"kernel_path": str(path), "problems": ["default", "check"], "device": "cuda",
                         "stages": ["compiled_permutation"]}, 300, interpret=False)
    assert result.verdict is Verdict.INVALID and "lines beginning with `def`" in result.reason


@pytest.mark.gpu
def test_on_a_gpu_a_good_order_passes_the_compiled_probe_on_every_grid(tmp_path, gemm_source, gemm_path):
    from swizzleperf.agent.verification.swizzles import catalog_source
    target = catalog_source("xcd-grouped-m:8:8", ["pid", "num_pid_m", "num_pid_n"])
    result = verify(_module(tmp_path, gemm_source, target), tmp_path / "m.npy",
                    VerifyConfig(device="cuda", seeds=(1,)), reference_path=gemm_path)
    assert result.verdict is Verdict.PASS, result.reason
    compiled = result.details["compiled_permutation"]
    assert compiled["all_grids"]["sites"] >= 16 * 16 and compiled["all_grids"]["note"] == ""
    bad = verify(_module(tmp_path, gemm_source, BAD_AT_13, "bad.py"), tmp_path / "b.npy",
                 VerifyConfig(device="cuda", seeds=(1,)), reference_path=gemm_path)
    assert bad.verdict is Verdict.NOT_PERMUTATION and "at grid 13x" in bad.reason


@pytest.mark.parametrize("sites, positions", [
    ([((4, 3), (4, 3)), ((128, 64), (128, 64))], [0, 1]),        # the bundled kernels' convention
    ([((4, 4), (4, 4)), ((64, 64), (64, 64))], [0, 1]),          # square grids only: still the convention
    ([((4, 3), (3, 4, 8)), ((64, 32), (32, 64, 8))], [1, 0]),    # extents given the other way round
    ([((4, 4), (9, 4, 4)), ((64, 64), (9, 64, 64))], None),      # square, not at the front: ambiguous
    ([((5, 3), (5, 7))], None),                                  # no argument is the second extent
], ids=["convention", "square", "swapped", "ambiguous", "missing"])
def test_the_extents_among_the_targets_arguments(sites, positions):
    from swizzleperf.agent.verification.probe import Site, extent_positions
    assert extent_positions([Site(g, a, "") for g, a in sites]) == positions


# A kernel whose output is wrong the same way on every run, and one whose output changes from run to
# run on the same inputs (as a kernel reading memory outside its tensors does: TritonBench-G
# token_attn_reduceV's replay on an H100, 2026-12-06).
WRAPPED = '''
import dataclasses, itertools
_runs = itertools.count(1)
_launch = SPEC.launch
def _launch_then(inputs, **meta):
    _launch(inputs, **meta)
    inputs[SPEC.output_name].add_({shift})
SPEC = dataclasses.replace(SPEC, launch=_launch_then)
'''


@pytest.mark.parametrize("shift, reproducible", [("1.0", True), ("float(next(_runs))", False)])
def test_a_mismatch_says_whether_two_runs_on_the_same_inputs_agree(tmp_path, shift, reproducible):
    from swizzleperf.agent.verification.stages import NOT_REPRODUCIBLE
    elementwise = Path(__file__).resolve().parents[3] / "kernels" / "elementwise.py"
    path = tmp_path / "elementwise_wrapped.py"
    path.write_text(elementwise.read_text() + WRAPPED.format(shift=shift))
    result = run_worker({"kernel_path": str(path), "stages": ["numerics"], "numerics_problems": ["check"],
                         "problems": ["check"], "seeds": [1], "device": "cpu", "dtype": "float32"},
                        300, interpret=True)
    assert result.verdict is Verdict.MISMATCH, result.reason
    assert (NOT_REPRODUCIBLE in result.reason) is not reproducible, result.reason
    if not reproducible:
        assert "a second run of the same launch on the same inputs leaves y otherwise" in result.reason


# A launch that hands the kernel a `scale` half as long as the kernel reads (TritonBench-G's
# token_attn_reduceV and rotary_emb_nopad read outside their tensors; on an H100, 2026-12-06, their
# replays read other bytes than the app's run, or faulted).
SHORT_SCALE = '''
import dataclasses
_launch = SPEC.launch
def _launch_short(inputs, **meta):
    _launch({**inputs, "scale": inputs["scale"][: inputs["scale"].numel() // 2].clone()}, **meta)
SPEC = dataclasses.replace(SPEC, launch=_launch_short)
'''


def test_a_numerics_failure_of_a_kernel_reaching_outside_its_tensors_says_where(tmp_path):
    from swizzleperf.agent.verification.bounds import OUTSIDE_ITS_TENSORS
    elementwise = Path(__file__).resolve().parents[3] / "kernels" / "elementwise.py"
    path = tmp_path / "elementwise_short.py"
    path.write_text(elementwise.read_text() + SHORT_SCALE)
    result = verify(path, tmp_path / "map.npy", VerifyConfig(device="cpu", seeds=(1,)))
    assert result.verdict in (Verdict.MISMATCH, Verdict.CRASH), result.reason
    assert f"under Triton's interpreter with every access checked: {OUTSIDE_ITS_TENSORS}: the load at line" in result.reason
    assert "(bias_gelu_kernel: `" in result.reason and "the nearest, scale_ptr's storage (50 elements" in result.reason
    quoted = result.reason.split("(bias_gelu_kernel: `", 1)[1].split("`)", 1)[0]
    assert "scale_ptr" in quoted and quoted in elementwise.read_text()   # the line as the user wrote it
    plain = tmp_path / "elementwise.py"
    plain.write_text(elementwise.read_text())
    assert verify(plain, tmp_path / "map2.npy", VerifyConfig(device="cpu", seeds=(1,))).passed
