"""Loading a kernel module: the agent's own process never runs the rewrite target as written
(``load_spec``); the worker does (``load_kernel``)."""
import subprocess
import sys
from pathlib import Path

import pytest

from swizzleperf.agent.verification.candidate import target_source
from swizzleperf.agent.verification.load import load_kernel, load_spec
from swizzleperf.kernels.spec import KernelLoadError

ROOT = Path(__file__).resolve().parents[3]


def _hostile_copy(tmp_path: Path, gemm_source: str) -> tuple[Path, Path]:
    """kernels/gemm.py as `--in-place` would leave it had the escaped candidate of #12 won: a
    rewrite target whose default argument runs code when its `def` executes. The payload writes
    a marker file."""
    marker = tmp_path / "payload-ran"
    own = target_source(gemm_source, "swizzle")
    hostile = own.replace("def swizzle(pid, num_pid_m, num_pid_n):",
                          "def swizzle(pid, num_pid_m,\n"
                          f"            num_pid_n=open({str(marker)!r}, 'w').write('ran')):")
    assert hostile != own
    path = tmp_path / "gemm.py"
    path.write_text(gemm_source.replace(own, hostile))
    return path, marker


def test_load_spec_does_not_run_the_target_as_written(tmp_path, gemm_source):
    path, marker = _hostile_copy(tmp_path, gemm_source)
    spec = load_spec(path)
    assert spec.name == "gemm" and spec.rewrite_target == "swizzle"
    assert spec.tile_grid(spec.problems["check"], spec.meta_for("check")) == (4, 3)
    assert not marker.exists(), "the agent's process ran the rewrite target's default"
    load_kernel(path)  # the worker's loader runs the module as written: the payload is real
    assert marker.exists()


def test_the_agents_module_holds_only_the_stand_in(tmp_path, gemm_source):
    """In a fresh process (as the CLI is), the imported module holds the stand-in: no defaults,
    nothing of the hostile header."""
    path, marker = _hostile_copy(tmp_path, gemm_source)
    script = (f"import sys\nfrom swizzleperf.agent.verification.load import load_spec\n"
              f"spec = load_spec({str(path)!r})\n"
              f"mod = next(m for n, m in sys.modules.items() if n.startswith('_swizzleperf_kernel_gemm'))\n"
              f"print(mod.swizzle.fn.__defaults__)\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "None" and not marker.exists()


def test_every_bundled_kernel_loads_with_the_stand_in():
    for path in sorted((ROOT / "kernels").glob("*.py")):
        if path.name not in ("__init__.py", "spec.py", "trace.py", "interpreter.py"):   # the package, the contract, the trace type, the interpreter's mends
            assert load_spec(path).source_path == path.resolve()


def test_a_target_without_triton_jit_is_refused(tmp_path, gemm_source):
    path = tmp_path / "gemm.py"
    path.write_text(gemm_source.replace("@triton.jit\ndef swizzle(", "def swizzle("))
    with pytest.raises(KernelLoadError, match="exactly @triton.jit"):
        load_spec(path)


def test_a_target_named_through_a_module_level_variable_is_stood_in_for_too(tmp_path, gemm_source):
    """``rewrite_target=TARGET_NAME``, ``TARGET_NAME = "tile_order"`` at module level (#41e): the
    target found by that name is replaced by the stand-in as a literal's is (it was imported as
    written: no ``swizzle`` to stand in for)."""
    path, marker = _hostile_copy(tmp_path, gemm_source)
    source = path.read_text().replace("swizzle(", "tile_order(").replace(
        'rewrite_target="swizzle"', "rewrite_target=TARGET_NAME").replace(
        "SPEC = KernelSpec(", 'TARGET_NAME = "tile_order"\n\nSPEC = KernelSpec(')
    assert source.count("TARGET_NAME") == 2
    path.write_text(source)
    assert load_spec(path).rewrite_target == "tile_order"
    assert not marker.exists(), "the agent's process ran the rewrite target's default"
