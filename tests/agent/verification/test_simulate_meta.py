"""``simulate`` / ``analyze --meta`` checked against the kernel before any work (#41's leftovers):
tiles so small that the simulator would model hundreds of millions of programs or accesses took
minutes and gigabytes before a one-line MemoryError; a misspelt meta-parameter (``BLOCK_Q``) was
silently ignored by a kernel with an access model. Both are one line now, before a worker runs,
while every bundled kernel at its default meta-parameters (and any name its launch takes) is
still simulated."""
from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from run_cli import assert_one_line_error, swizzleperf

from swizzleperf.agent.verification import simulate
from swizzleperf.agent.verification.load import load_spec
from swizzleperf.agent.verification.simulate import SimulateError
from swizzleperf.kernels.trace import MAX_ACCESSES

KERNELS = Path(__file__).resolve().parents[3] / "kernels"
BUNDLED = sorted(p.stem for p in KERNELS.glob("*.py") if "SPEC = KernelSpec(" in p.read_text())
BOUND = f"{MAX_ACCESSES:,}"


@pytest.fixture(autouse=True)
def _private_home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


@pytest.fixture
def no_worker(monkeypatch):
    """A worker started fails the test: the refusals below come before any."""
    def started(*args, **kwargs):
        raise AssertionError("a worker was started before --meta was checked against the kernel")
    monkeypatch.setattr(simulate, "run_worker", started)


# --------------------------------------------------------------------------- too much work
@pytest.mark.parametrize("function", [simulate.simulate_kernel, simulate.analyze_kernel])
@pytest.mark.parametrize("meta, expected", [
    # 16384 x 16384 programs of one element each: more programs than the bound holds accesses
    ("BLOCK_M=1,BLOCK_N=1,BLOCK_K=1", "268,435,456 programs x at least 1 access"),
    # 8192 programs, as by default, but 4096 steps of one column of K: 8192 x 4097 x 2 accesses
    ("BLOCK_K=1", "8,192 programs x 8,194 accesses"),
], ids=["tiny tiles", "a one-column K step"])
def test_work_past_the_bound_is_one_line_before_any_worker(gemm_path, no_worker, function, meta, expected):
    start = time.perf_counter()
    with pytest.raises(SimulateError) as caught:
        function(gemm_path, "mi300x", meta=meta)
    seconds = time.perf_counter() - start
    message = str(caught.value)
    assert expected in message and BOUND in message and "gemm" in message, message
    assert "\n" not in message and len(message) < 400, message
    assert seconds < 1.0, f"refused after {seconds:.1f} s"


def test_tiny_tiles_are_one_line_from_the_command_line(tmp_path, gemm_path):
    """As the red team ran it: minutes and gigabytes, then a MemoryError; now one line at once
    (the limit below is the interpreter's start and imports, the refusal itself is the test above)."""
    start = time.perf_counter()
    proc = swizzleperf("simulate", str(gemm_path), "--meta", "BLOCK_M=1,BLOCK_N=1,BLOCK_K=1", cwd=tmp_path,
                       timeout=120)
    assert_one_line_error(proc, f"more than the simulator's bound of {BOUND} accesses")
    assert time.perf_counter() - start < 60


def test_the_generic_tracer_is_refused_before_its_worker(gemm_path, no_worker):
    """--traced runs no access model: the programs are counted before the tracer's worker runs."""
    with pytest.raises(SimulateError, match="268,435,456 programs x at least 1 access"):
        simulate.simulate_kernel(gemm_path, "mi300x", meta="BLOCK_M=1,BLOCK_N=1", traced=True)


@pytest.mark.parametrize("kernel", BUNDLED)
def test_every_bundled_kernel_at_its_default_meta_is_within_the_bound(kernel):
    """The bound leaves room: the largest default trace (fdtd2d's model, 1.6 M accesses; the
    stencil traced at 32 B sectors, 3.4 M) is a tenth to a fifth of it."""
    spec = load_spec(KERNELS / f"{kernel}.py")
    assert simulate.launch_meta(spec, dict(spec.meta)) == spec.meta_for("default")
    trace = simulate.kernel_trace(KERNELS / f"{kernel}.py", spec, {}, traced=False)
    assert trace.keys.size <= MAX_ACCESSES // 8


# --------------------------------------------------------------------------- unknown names
@pytest.mark.parametrize("function", [simulate.simulate_kernel, simulate.analyze_kernel])
def test_an_unknown_meta_name_is_one_line_naming_the_known_ones(gemm_path, no_worker, function):
    with pytest.raises(SimulateError) as caught:
        function(gemm_path, "mi300x", meta="BLOCK_Q=64")
    message = str(caught.value)
    assert message.startswith("--meta BLOCK_Q is not a meta-parameter of gemm"), message
    for name in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "num_warps", "num_stages", "STREAM_K"):
        assert name in message, message
    assert "\n" not in message


def test_an_unknown_meta_name_from_the_command_line(tmp_path, gemm_path):
    proc = swizzleperf("analyze", str(gemm_path), "--meta", "BLOCK_M=64,BLOCK_Q=64", cwd=tmp_path, timeout=120)
    assert_one_line_error(proc, "--meta BLOCK_Q is not a meta-parameter of gemm")


@pytest.mark.parametrize("kernel", BUNDLED)
def test_every_name_a_bundled_launch_takes_is_known(kernel):
    """The spec's own meta-parameters, warps and stages, and the launch's other options (the
    GEMM's STREAM_K, TAIL_BLOCK_N, ... of its tuned launch configurations)."""
    spec = load_spec(KERNELS / f"{kernel}.py")
    names = set(spec.meta) | {"num_warps", "num_stages"} | {k for c in spec.launch_configs for k in c}
    assert names <= simulate.meta_names(spec)


def _spec(launch, meta):
    return SimpleNamespace(name="user_kernel", launch=launch, meta=meta, check_meta=meta,
                           meta_for=lambda name: dict(meta), tile_grid=lambda p, m: (4, 4),
                           num_programs=lambda name, m=None: 16, problems={"default": {}})


def test_a_user_kernels_names_are_its_launchs():
    """A kernel module without an access model (the generic tracer): the names its launch takes."""
    def launch(inputs, BLOCK, num_warps=4, num_stages=1):
        pass
    spec = _spec(launch, {"BLOCK": 256})
    assert simulate.launch_meta(spec, {"BLOCK": 64, "num_warps": 8}) == {"BLOCK": 64, "num_warps": 8}
    with pytest.raises(SimulateError, match=r"--meta BLOCK_SIZE is not a meta-parameter of user_kernel "
                                            r"\(it takes BLOCK, num_stages, num_warps\)"):
        simulate.launch_meta(spec, {"BLOCK_SIZE": 64})


def test_a_captured_launch_takes_warps_and_stages():
    """A launch of ``**meta`` passed to Triton (a kernel captured from an app): its own
    meta-parameters and Triton's num_warps and num_stages; a tile size is the capture's."""
    def launch_fn(inputs, **run_meta):
        pass
    spec = _spec(launch_fn, {})
    assert simulate.launch_meta(spec, {"num_warps": 8, "num_stages": 2}) == {"num_warps": 8, "num_stages": 2}
    with pytest.raises(SimulateError, match=r"\(it takes num_stages, num_warps\)"):
        simulate.launch_meta(spec, {"BLOCK_M": 64})


@pytest.mark.parametrize("function", [simulate.simulate_kernel, simulate.analyze_kernel])
def test_a_distributed_kernel_is_one_line_before_any_worker(no_worker, function):
    """A DistKernelSpec has no single-GPU launch whose names could be checked: refused as such
    (it was a worker's ``KeyError: 'default'``)."""
    with pytest.raises(SimulateError, match="gemm_all_scatter is a distributed kernel"):
        function(KERNELS / "distributed" / "gemm_all_scatter.py", "mi300x")
