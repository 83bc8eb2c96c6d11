"""A user's own kernel with zero glue (#15): capture of a launch from the user's command
(agent/capture/capture.py, agent/capture/capture_hook.py), the generated kernel module
(agent/capture/user_kernel.py) verified as any other, and
``swizzleperf optimize --app ... --kernel ...`` end to end.

The apps are in tests/helpers/apps/ (tiny, interpreted: TRITON_INTERPRET=1 is set for the app's
process here). The module-scoped capture of the GEMM app is shared by the tests that need one.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from swizzleperf.agent.capture import user_kernel
from swizzleperf.agent.capture.capture import CaptureError, capture
from swizzleperf.agent.capture.lift import LiftError
from swizzleperf.agent.verification.candidate import splice
from swizzleperf.agent.verification.load import load_spec
from swizzleperf.agent.verification.swizzles import catalog_source
from swizzleperf.agent.verification.verify import Verdict, VerifyConfig, verify
from swizzleperf.kernels.spec import KernelSpec

APPS = Path(__file__).resolve().parents[2] / "helpers" / "apps"
EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "user_kernels"
INTERPRET = f"TRITON_INTERPRET=1 {sys.executable}"

# The usual XCD remap written naively, for the lifted four-parameter target: a permutation only
# when the grid is a multiple of 8 (the captured GEMM's 4 x 4 = 16 is).
NAIVE_XCD = '''@triton.jit
def swizzle(pid, num_pid_m, num_pid_n, GROUP_SIZE_M):
    num_pids = num_pid_m * num_pid_n
    pid = (pid % 8) * (num_pids // 8) + pid // 8
    return pid // num_pid_n, pid % num_pid_n
'''


@pytest.fixture(scope="module")
def gemm(tmp_path_factory):
    """The GEMM app's capture, lift and generated module."""
    return user_kernel.prepare(f"{INTERPRET} {APPS / 'gemm' / 'app.py'}", "matmul_kernel",
                               tmp_path_factory.mktemp("work"))


def test_an_autotuned_launch_is_captured_with_the_config_the_autotuner_picked(gemm):
    launch = gemm.capture.launch
    picked = json.loads((gemm.capture.folder / "app.log").read_text().strip().splitlines()[-1])["best_config"]
    tuned = launch["autotuned"]
    assert {**tuned["kwargs"], "num_warps": tuned["num_warps"], "num_stages": tuned["num_stages"]} == picked
    values = {p["name"]: p.get("value") for p in launch["params"]}
    assert values["BLOCK_SIZE_K"] == picked["BLOCK_SIZE_K"] and values["GROUP_SIZE_M"] == picked["GROUP_SIZE_M"]
    assert launch["options"]["num_stages"] == picked["num_stages"]   # replayed as the autotuner launched it
    assert launch["grid"] == [16] and launch["interpreter"] is True
    # the autotuner's benchmark launches left C holding the product: found as the output all the same
    assert launch["outputs"] == [{"name": "c_ptr", "write_only": True, "deterministic": True}]
    a = next(p for p in launch["params"] if p["name"] == "a_ptr")
    assert (a["shape"], a["stride"], a["dtype"]) == ([64, 32], [32, 1], "float32")


def test_the_generated_module_loads_with_a_stand_in_and_its_lifted_baseline_passes_bitwise(gemm, tmp_path):
    spec = load_spec(gemm.module_path)   # the agent's own path: the target is a stand-in here
    assert spec.tolerance == {"float32": 0.0} and spec.rewrite_target == "swizzle"
    assert spec.num_programs("check") == 16 and spec.permutation_only == ("probe",)
    assert spec.num_programs("probe") % 8 != 0
    result = verify(gemm.module_path, tmp_path / "m.npy", VerifyConfig(dtype="float32", seeds=(1,)))
    assert result.verdict is Verdict.PASS, result.reason
    assert set(result.details["permutation"]) == {"default", "check", "probe"}
    assert result.details["numerics"]["rel_errors"]["check"] == [0.0]   # bitwise the user's output


def test_a_captured_kernel_is_traced_per_sector_of_the_target(gemm, monkeypatch):
    """The simulator counts a captured kernel's reuse per L2 sector of the target, as for any traced
    kernel: 32 B on an H100, 128 B lines on an MI300X (at 128 B on an H100, a transpose's 64 B rows
    shared lines that the hardware does not share: 25 % predicted against ncu's read hits of none).
    The tracer's worker is stood in for: what is checked is the granule it is asked for."""
    import swizzleperf.agent.verification.simulate as simulate
    from swizzleperf.agent.capture.capture import no_reuse_trace
    from swizzleperf.hwspecs import load_spec as load_hardware
    asked = []

    def tracer(path, meta_overrides=None, granule_bytes=None, **_):
        asked.append((Path(path), granule_bytes))
        return no_reuse_trace((4, 4), 1024.0, "stand-in")
    monkeypatch.setattr(simulate, "trace_kernel", tracer)
    spec = load_spec(gemm.module_path)
    for hardware in ("h100", "mi300x"):
        simulate.kernel_trace(gemm.module_path, spec, {}, traced=False, hardware=load_hardware(hardware))
    assert asked == [(gemm.module_path, 32), (gemm.module_path, 128)]


def test_a_remap_that_is_a_permutation_only_on_multiples_of_8_is_rejected_at_the_probe_problem(gemm, tmp_path):
    path = tmp_path / "naive.py"
    path.write_text(splice(gemm.module_path.read_text(), "swizzle", NAIVE_XCD))
    result = verify(path, tmp_path / "m.npy", VerifyConfig(dtype="float32", seeds=(1,)))
    assert result.verdict is Verdict.NOT_PERMUTATION
    grid = "x".join(map(str, gemm.lifted.probe_grid))
    assert f"at the probe problem ({grid} tiles" in result.reason and "never computed" in result.reason


def test_a_spec_without_a_grid_off_multiples_of_8_is_refused(gemm):
    spec = load_spec(gemm.module_path)
    fields = {f: getattr(spec, f) for f in KernelSpec.__dataclass_fields__ if f != "source_path"}
    with pytest.raises(ValueError, match="nor a permutation-only problem's"):
        KernelSpec(**{**fields, "problems": {**spec.problems, "probe": spec.problems["check"]}})
    with pytest.raises(ValueError, match="permutation_only must name problems"):
        KernelSpec(**{**fields, "permutation_only": ("check",)})


@pytest.fixture
def cpu_only(monkeypatch):
    """A CPU-only machine with nothing exported: no TRITON_INTERPRET, no GPU for the app either."""
    import swizzleperf.hwspecs
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    monkeypatch.setattr(swizzleperf.hwspecs, "detect_device", lambda: None)


def test_an_autotuned_kernel_with_two_configs_captures_on_a_cpu_without_its_benchmark(cpu_only, tmp_path):
    """The app's autotuner has no do_bench of its own: Triton's benchmark would fail with "0 active
    drivers" under the interpreter. The hook times nothing, the autotuner keeps its first config,
    and the capture says so; TRITON_INTERPRET=1 was set for the app by the tool."""
    captured = capture(f"{sys.executable} {APPS / 'autotuned' / 'app.py'}", "axpy_kernel", tmp_path)
    launch = captured.launch
    assert launch["interpreter"] is True and launch["grid"] == [3, 3]
    tuned = launch["autotuned"]
    assert (tuned["kwargs"], tuned["num_warps"]) == ({"BLOCK_M": 16, "BLOCK_N": 32}, 4)
    assert tuned["choice"].startswith("the first of its 2 configs: Triton's benchmark needs a GPU")
    assert "autotuned config BLOCK_M=16, BLOCK_N=32, num_warps=4, num_stages=1 (the first of its 2" in captured.describe()
    assert "axpy OK" in (captured.folder / "app.log").read_text()


def test_the_readmes_cpu_command_works_with_nothing_exported(cpu_only, tmp_path):
    """``swizzleperf optimize --app "python app.py" --kernel bmm_kernel`` as the README writes it, on
    a 3-D-grid kernel that reads its batch id inside the address arithmetic (its program ids are
    remapped): the tool runs the app under the interpreter itself, one catalog order is verified
    bitwise against the captured launch, and user.diff patches the user's file."""
    folder = tmp_path / "bmm"
    shutil.copytree(EXAMPLES / "batched_gemm_3d", folder)
    env = dict(os.environ, PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
    assert "TRITON_INTERPRET" not in env
    proc = subprocess.run([sys.executable, "-m", "swizzleperf.agent.cli", "optimize", "--app", "python app.py",
                           "--kernel", "bmm_kernel", "--iterations", "1", "--workdir", str(tmp_path / ".sp")],
                          cwd=folder, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = " ".join((proc.stdout + proc.stderr).split())
    assert "no GPU detected: simulating mi300x" in out and "program ids remapped from kernel.py line 22 on" in out
    report = json.loads(next((tmp_path / ".sp" / "runs").glob("*/report.json")).read_text())
    assert report["baseline"]["verdict"] == "PASS" and [a["verdict"] for a in report["attempts"]] == ["PASS"]
    launch = json.loads(next((tmp_path / ".sp" / "captures").glob("bmm_kernel-*/launch.json")).read_text())
    lift = json.loads(next((tmp_path / ".sp" / "captures").glob("bmm_kernel-*/lift.json")).read_text())
    assert launch["interpreter"] is True and launch["grid"] == [2, 3, 3] and lift["tolerance"] == 0.0
    diff = Path(report["user_kernel"]["user_diff"]).read_text()
    assert "+    a_ptrs = a_ptr + pid_2 * stride_ab" in diff and "-    pid_m = tl.program_id(0)" in diff


@pytest.mark.parametrize("app, kernel, timeout, expected", [
    (f"{sys.executable} {APPS / 'fails.py'}", "k", 60, "failed (exit code 1): fails.py: the input file is missing"),
    (f"{sys.executable} {APPS / 'sleeps.py'}", "k", 2, "did not finish within 2 s; it was stopped"),
    (f"{INTERPRET} {APPS / 'transpose' / 'app.py'}", "matmul_kernel", 120,
     "never launched a Triton kernel named 'matmul_kernel'; it launched transpose_kernel (2x)"),
])
def test_capture_refusals_are_one_line(tmp_path, app, kernel, timeout, expected):
    start = time.monotonic()
    with pytest.raises(CaptureError) as info:
        capture(app, kernel, tmp_path, timeout_s=timeout)
    assert expected in str(info.value) and "\n" not in str(info.value) and time.monotonic() - start < 30
    assert not [p for p in tmp_path.iterdir()]   # nothing left behind


def test_a_2d_grid_launch_of_a_strided_view_replays_bitwise(tmp_path):
    prepared = user_kernel.prepare(f"{INTERPRET} {APPS / 'transpose' / 'app.py'}", "transpose_kernel", tmp_path)
    x = next(p for p in prepared.capture.launch["params"] if p["name"] == "x_ptr")
    assert x["stride"] == [48, 2]   # the column-strided view, as the kernel read it
    assert prepared.capture.launch["grid"] == [3, 2] and prepared.lifted.tile_grid == (3, 2)
    result = verify(prepared.module_path, tmp_path / "m.npy", VerifyConfig(dtype="float32", seeds=(1,)))
    assert result.verdict is Verdict.PASS, result.reason
    assert result.details["numerics"]["rel_errors"]["check"] == [0.0]


def test_a_kernel_of_host_tensor_descriptors_is_captured_and_replays_bitwise(tmp_path):
    """Descriptor arguments (TMA on Hopper) are snapshot by their base tensors and fields and
    rebuilt for every replay; the lifted baseline passes bitwise and the kernel traces."""
    prepared = user_kernel.prepare(f"{INTERPRET} {APPS / 'descriptors' / 'app.py'}", "scale_kernel", tmp_path)
    launch = prepared.capture.launch
    x = next(p for p in launch["params"] if p["name"] == "x_desc")
    assert x["kind"] == "tensor_descriptor" and x["descriptor"]["block_shape"] == [16, 32]
    assert [b["name"] for b in launch["descriptor_bases"]] == ["x_desc.base", "out_desc.base"]
    assert [o["name"] for o in launch["outputs"]] == ["out_desc.base"] and prepared.lifted.tile_grid == (4, 3)
    result = verify(prepared.module_path, tmp_path / "m.npy", VerifyConfig(dtype="float32", seeds=(1,)))
    assert result.verdict is Verdict.PASS, result.reason
    assert result.details["numerics"]["rel_errors"]["check"] == [0.0]


def test_optimize_an_app_end_to_end(tmp_path):
    """``swizzleperf optimize --app --kernel --test --in-place --iterations 1`` with the built-in
    policy, on a copy of the GEMM app's folder: the run finishes, user.diff patches the user's
    file, and the user's test passes against the optimized kernel (it checks that it runs it)."""
    folder = tmp_path / "user"
    shutil.copytree(APPS / "gemm", folder)
    original = (folder / "kernel.py").read_text()
    env = dict(os.environ, TRITON_INTERPRET="1")
    proc = subprocess.run([sys.executable, "-m", "swizzleperf.agent.cli", "optimize", "--app",
                           f"{sys.executable} user/app.py", "--kernel", "matmul_kernel", "--test",
                           f"{sys.executable} user/check.py", "--iterations", "1", "--hw", "mi300x",
                           "--in-place", "--workdir", str(tmp_path / ".sp")],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "passed against the optimized kernel" in proc.stdout
    run_dir = next((tmp_path / ".sp" / "runs").iterdir())
    report = json.loads((run_dir / "report.json").read_text())
    summary = report["user_kernel"]
    assert report["baseline"]["verdict"] == "PASS" and summary["test"]["passed"] is True
    diff = (run_dir / "user.diff").read_text()
    # a candidate's patch opens with one line saying whether its order is proven on every grid or guarded
    body = diff.split("\n", 1)[1] if diff.startswith("swizzleperf: permutation") else diff
    assert body.startswith("--- a/user/kernel.py\n+++ b/user/kernel.py\n")
    assert "+def swizzle(pid, num_pid_m, num_pid_n, GROUP_SIZE_M):" in diff
    assert "+    pid_m, pid_n = swizzle(pid, num_pid_m, num_pid_n, GROUP_SIZE_M)" in diff
    assert "-    group_id = pid // num_pid_in_group" in diff
    patched = (run_dir / "user_kernel.py").read_text()
    if summary["best_is_candidate"]:
        assert (folder / "kernel.py").read_text() == patched and summary["in_place"].startswith("applied")
    else:
        assert (folder / "kernel.py").read_text() == original and summary["in_place"].startswith("not applied")
    assert "## Your kernel" in (run_dir / "report.md").read_text()


EXPECTED = {   # examples/user_kernels/<folder>: kernel, and None (optimized) or the refusal
    "tutorial_gemm": ("matmul_kernel", None),
    "transpose_2d": ("transpose_kernel", None),
    "stencil_2d": ("jacobi_step_kernel", None),
    "row_norm": ("rms_norm_fwd_kernel", None),
    "grouped_gemm_2d": ("linear_kernel", None),
    "attention_fwd": ("attention_fwd_kernel", None),
    "cross_entropy": ("cross_entropy_fwd_kernel", None),   # offset_m = pid_m * stride: program ids remapped
    "csr_spmv": ("csr_spmv_kernel", None),                   # a loop over loaded bounds: not persistent
    "batched_gemm_3d": ("bmm_kernel", None),                 # tl.program_id(2) in the addresses: remapped
    "softmax": ("softmax_kernel", "a persistent kernel: the tile index comes from a loop over tiles"),
    "persistent_streamk_gemm": ("matmul_streamk_kernel", "a persistent kernel"),
}
REWRITE = {"cross_entropy": "remapped", "batched_gemm_3d": "remapped"}   # the others: lifted


@pytest.mark.parametrize("example", sorted(EXPECTED))
def test_each_example_is_optimized_with_zero_glue(example, tmp_path):
    """Slow-ish (about 20 s each on 2 cores): capture, lift, the baseline verified, one iteration
    (one catalog order, scripted); the stream-K and softmax kernels end in their refusals."""
    folder = EXAMPLES / example
    if not (folder / "app.py").exists():
        pytest.skip(f"{folder} not written yet")
    from swizzleperf.agent.loop import run
    from swizzleperf.agent.proposers.scripted import ScriptedProposer
    kernel, refusal = EXPECTED[example]
    app = f"{INTERPRET} {folder / 'app.py'}"
    if refusal:   # a true refusal: one line, and soon (the app's run included)
        start = time.monotonic()
        with pytest.raises(LiftError, match=refusal) as info:
            user_kernel.prepare(app, kernel, tmp_path)
        assert "\n" not in str(info.value) and time.monotonic() - start < 30
        return
    prepared = user_kernel.prepare(app, kernel, tmp_path)
    assert prepared.lifted.kind == REWRITE.get(example, "lifted"), prepared.lifted.notes
    args = prepared.lifted.arg_names   # one catalog order, scripted: the policy's ranking worker is left out
    order = catalog_source("row-major" if len(prepared.lifted.extents) == 2 else "xcd-contiguous:8", args)
    outcome = run.start(run.RunOptions(kernel=str(prepared.module_path), hw="mi300x", iterations=1,
                                       workdir=str(tmp_path)), proposer=ScriptedProposer([("catalog", order)]))
    assert outcome.status == "finished" and outcome.report["baseline"]["verdict"] == "PASS", outcome.report["stop_reason"]
    assert [a["verdict"] for a in outcome.report["attempts"]] == ["PASS"], outcome.report["attempts"]
    assert set(load_spec(prepared.module_path).tolerance.values()) == {0.0}   # PASS meant bitwise
    summary = user_kernel.finish(outcome, prepared, in_place=False, test=None)
    assert f"+def {prepared.lifted.target_name}(" in Path(summary["user_diff"]).read_text()
    # the naive XCD remap, a permutation only on multiples of 8 programs, is rejected here too
    naive = tmp_path / "naive.py"
    naive.write_text(splice(prepared.module_path.read_text(), prepared.lifted.target_name,
                            _naive_xcd(prepared.lifted.target_name, args, len(prepared.lifted.extents))))
    result = verify(naive, tmp_path / "naive.npy", VerifyConfig(dtype="float32", seeds=(1,)))
    assert result.verdict is Verdict.NOT_PERMUTATION, (result.verdict, result.reason)


def _naive_xcd(name: str, args: list, extents: int) -> str:
    """The usual XCD remap written without the remainder: (pid % 8) * (n // 8) + pid // 8, then
    row-major over the first ``extents`` parameters after pid (the tile-grid sizes)."""
    sizes = args[1:1 + extents]
    lines = [f"    num_pids = {' * '.join(sizes)}",
             "    pid = (pid % 8) * (num_pids // 8) + pid // 8"]
    coords, rest = [], "pid"
    for i, size in enumerate(sizes):
        inner = " * ".join(sizes[i + 1:])
        coords.append(f"{rest} // ({inner})" if inner else rest)
        if inner:
            lines.append(f"    r{i} = {rest} % ({inner})")
            rest = f"r{i}"
    lines.append(f"    return {', '.join(coords)}")
    return f"@triton.jit\ndef {name}({', '.join(args)}):\n" + "\n".join(lines) + "\n"


@pytest.mark.gpu
def test_a_compiled_launch_is_captured_and_its_lifted_baseline_replays_bitwise_on_the_gpu(tmp_path):
    """The compiled path (JITFunction.run, Triton 3.6 on the GPU machines): CUDA tensors
    snapshot and replayed, numerics compiled at the captured launch, timed."""
    prepared = user_kernel.prepare(f"env -u TRITON_INTERPRET {sys.executable} {APPS / 'gemm' / 'app.py'}",
                                   "matmul_kernel", tmp_path)
    launch = prepared.capture.launch
    assert launch["interpreter"] is False and launch["autotuned"] is not None
    assert next(p for p in launch["params"] if p["name"] == "a_ptr")["device"].startswith("cuda")
    result = verify(prepared.module_path, tmp_path / "m.npy",
                    VerifyConfig(device="cuda", dtype="float32", seeds=(1,)), time_it=True)
    assert result.verdict is Verdict.PASS, result.reason
    assert result.details["numerics"]["rel_errors"] == {"check": [0.0], "default": [0.0]}
    assert result.details["timing"]["time_ms"] > 0


def _one_candidate_passes(prepared, tmp_path, hw: str, name: str, source: str) -> dict:
    """One scripted candidate through the loop on ``prepared``'s module: the baseline and the
    candidate both PASS (bitwise, the lift's tolerance); the run's outcome."""
    from swizzleperf.agent.loop import run
    from swizzleperf.agent.proposers.scripted import ScriptedProposer
    outcome = run.start(run.RunOptions(kernel=str(prepared.module_path), hw=hw, iterations=1, workdir=str(tmp_path)),
                        proposer=ScriptedProposer([(name, source)]))
    assert outcome.report["baseline"]["verdict"] == "PASS", outcome.report["stop_reason"]
    assert [a["verdict"] for a in outcome.report["attempts"]] == ["PASS"], outcome.report["attempts"]
    return outcome


def test_program_ids_read_through_functions_are_remapped_with_zero_glue(tmp_path):
    """Another module's `tle.program_id(0)` and a helper reading `tl.program_id(1)`: the kernel is
    remapped (not refused), its baseline passes bitwise and a permutation of its programs verifies."""
    prepared = user_kernel.prepare(f"{INTERPRET} {APPS / 'program_id_helpers' / 'app.py'}", "scale_kernel", tmp_path)
    lifted = prepared.lifted
    assert lifted.kind == "remapped" and "_col_block (line 17) as _col_block_remapped" in lifted.notes[0]
    assert "`tle.program_id(0)`" in lifted.notes[0]
    # row-major over the 4 x 3 tiles (the kernel's own order is column-major): a permutation that no
    # mix of remapped and raw program ids reproduces, so a read left unremapped is a MISMATCH
    row_major = (f"@triton.jit\ndef {lifted.target_name}({', '.join(lifted.arg_names)}):\n"
                 f"    return pid // num_pid_1, pid % num_pid_1\n")
    _one_candidate_passes(prepared, tmp_path, "h100", "row-major", row_major)
    assert set(load_spec(prepared.module_path).tolerance.values()) == {0.0}   # PASS meant bitwise
    # the remapped module (its copies, `.to(tle.program_id(0).dtype)`, the per-axis functions)
    # through Triton's code generation and ptxas for sm_90, interpreter off: what a GPU would build
    script = (f"import importlib.util, sys, torch\nsys.path.insert(0, {str(APPS / 'program_id_helpers')!r})\n"
              f"spec = importlib.util.spec_from_file_location('gen', {str(prepared.module_path)!r})\n"
              "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
              "from swizzleperf.kernels.distributed.compile_check import compile_launch\n"
              "x, out = torch.empty(50, 70), torch.empty(50, 70)\n"
              "compile_launch(m.scale_kernel, (x, out, 50, 70, 70, 1.5), dict(BLOCK_M=16, BLOCK_N=32), 90)\n"
              "print('compiled for sm_90')\n")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0 and "compiled for sm_90" in done.stdout, done.stderr[-3000:]


def test_a_kernel_in_a_package_with_relative_imports_is_optimized(tmp_path):
    """The generated copy lives outside the package: its relative imports are made absolute and the
    folder holding the package goes on sys.path; the user's own file keeps its relative import."""
    prepared = user_kernel.prepare(f"{INTERPRET} {APPS / 'package_relative' / 'app.py'}", "row_sum_kernel", tmp_path)
    text = prepared.module_path.read_text()
    assert "from rowlib.sizes import block_for" in text and "from ..sizes" not in text
    outcome = _one_candidate_passes(prepared, tmp_path, "mi300x", "catalog",
                                    catalog_source("xcd-contiguous:8", prepared.lifted.arg_names))
    summary = user_kernel.finish(outcome, prepared, in_place=False, test=None)
    assert "from ..sizes import block_for" in (APPS / "package_relative" / "rowlib" / "sub" / "ops.py").read_text()
    assert "+from rowlib" not in Path(summary["user_diff"]).read_text()      # the user's file keeps its import


def test_a_relative_import_is_resolved_against_the_files_package(tmp_path):
    import ast as ast_module
    root = tmp_path / "top"
    (root / "inner").mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "inner" / "__init__.py").write_text("")
    (root / "inner" / "k.py").write_text("")
    assert user_kernel.package_of(root / "inner" / "k.py") == ("top.inner", tmp_path)
    assert user_kernel.package_of(tmp_path / "loose.py") == ("", tmp_path)
    node = lambda text: ast_module.parse(text).body[0]
    assert user_kernel._absolute("top.inner", node("from .a import b")) == "top.inner.a"
    assert user_kernel._absolute("top.inner", node("from ..a import b")) == "top.a"
    assert user_kernel._absolute("top.inner", node("from . import b")) == "top.inner"
    with pytest.raises(LiftError, match="reaches above the package top"):
        user_kernel._absolute("top.inner", node("from ...a import b"))


def test_a_kernel_defined_inside_a_module_level_if_is_optimized(tmp_path):
    """`if HAS_TRITON:` around the kernel: the target goes in at the kernel's indentation (in the
    user's diff too), a candidate is verified bitwise, and no import is added that the module has."""
    prepared = user_kernel.prepare(f"{INTERPRET} {APPS / 'guarded' / 'app.py'}", "triple_kernel", tmp_path)
    assert prepared.lifted.kind == "lifted"
    outcome = _one_candidate_passes(prepared, tmp_path, "h100", "catalog",
                                    catalog_source("row-major", prepared.lifted.arg_names))
    diff = Path(user_kernel.finish(outcome, prepared, in_place=False, test=None)["user_diff"]).read_text()
    assert f"+    def {prepared.lifted.target_name}(" in diff and "+import triton" not in diff
