"""Numbers on the command line, and options that do not apply to the kernel (red team 41i): ``--timeout
nan``, ``--target-speedup inf``, ``--time-budget inf``, ``--roof-margin inf``, ``--price-in nan`` or
a 20-digit ``--world-size``/``--iterations`` made a run folder and a record row, then failed with a
line blaming the record (NaN is not a JSON number, an integer of 20 digits), and its ``--resume``
failed for ever; ``--plateau -3`` was taken; ``--world-size 5`` or ``--problem M=1e9`` for a kernel
that is not distributed were silently dropped. Each is one line now, naming the option and its
range (or why it does not apply), before any run folder or record row. Hermetic: a private HOME."""
from __future__ import annotations

import pytest
from run_cli import assert_one_line_error, swizzleperf

from swizzleperf.agent import cli


@pytest.fixture(autouse=True)
def _private_home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "home" / ".cache"))


HUGE = "99999999999999999999"
SECONDS = f"{cli.MAX_SECONDS}] seconds"
OPTIMIZE = [
    (["--timeout", "nan"], f"--timeout must be in (0, {SECONDS}, got nan"),
    (["--timeout", "inf"], f"--timeout must be in (0, {SECONDS}, got inf"),
    (["--target-speedup", "inf"], f"--target-speedup must be in (0, {cli.MAX_SPEEDUP}], got inf"),
    (["--target-speedup", "nan"], f"--target-speedup must be in (0, {cli.MAX_SPEEDUP}], got nan"),
    (["--time-budget", "inf"], f"--time-budget must be in (0, {SECONDS}, got inf"),
    (["--world-size", HUGE], f"--world-size must be in [2, {cli.MAX_WORLD_SIZE}], got {HUGE}"),
    (["--iterations", HUGE], f"--iterations must be in [1, {cli.MAX_PROPOSALS}], got {HUGE}"),
    (["--plateau", "-3"], f"--plateau must be in [1, {cli.MAX_PROPOSALS}], got -3"),
    (["--plateau", "0"], f"--plateau must be in [1, {cli.MAX_PROPOSALS}], got 0"),
    (["--roof-margin", "inf"], "--roof-margin must be in [0, 1], got inf"),
    (["--llm-timeout", "nan"], f"--llm-timeout must be in (0, {cli.MAX_LLM_SECONDS}] seconds, got nan"),
    (["--llm-timeout", "0"], f"--llm-timeout must be in (0, {cli.MAX_LLM_SECONDS}] seconds, got 0.0"),
    (["--context-tokens", HUGE], f"--context-tokens must be in [512, {cli.MAX_CONTEXT_TOKENS}], got {HUGE}"),
    (["--llm-retries", HUGE], f"--llm-retries must be in [0, {cli.MAX_RETRIES}], got {HUGE}"),
    (["--price-in", "nan"], f"--price-in must be in [0, {cli.MAX_PRICE}] USD per million tokens, got nan"),
    (["--price-out", "-1"], f"--price-out must be in [0, {cli.MAX_PRICE}] USD per million tokens, got -1.0"),
    (["--top", HUGE], f"--top must be in [1, {cli.MAX_TOP}], got {HUGE}"),
]


@pytest.mark.parametrize("args, expected", OPTIMIZE, ids=[" ".join(a) for a, _ in OPTIMIZE])
def test_a_number_out_of_range_is_one_line_before_any_run(tmp_path, gemm_path, args, expected):
    proc = swizzleperf("optimize", str(gemm_path), *args, cwd=tmp_path, timeout=120)
    assert_one_line_error(proc, expected)
    assert not (tmp_path / ".swizzleperf").exists(), "a refused option left a run folder or a record"


EVAL = [
    (["--iterations", HUGE], f"--iterations must be in [1, {cli.MAX_PROPOSALS}], got {HUGE}"),
    (["--llm-timeout", "inf"], f"--llm-timeout must be in (0, {cli.MAX_LLM_SECONDS}] seconds, got inf"),
    (["--price-out", "nan"], f"--price-out must be in [0, {cli.MAX_PRICE}] USD per million tokens, got nan"),
    (["--llm-retries", HUGE], f"--llm-retries must be in [0, {cli.MAX_RETRIES}], got {HUGE}"),
    (["--apps", ".", "--row-budget", "inf"], f"--row-budget must be in (0, {SECONDS}, got inf"),
]


@pytest.mark.parametrize("args, expected", EVAL, ids=[" ".join(a) for a, _ in EVAL])
def test_eval_refuses_a_number_out_of_range_in_one_line(tmp_path, args, expected):
    proc = swizzleperf("eval", "--kernels", "gemm", *args, cwd=tmp_path, timeout=120)
    assert_one_line_error(proc, expected)
    assert not (tmp_path / ".swizzleperf").exists(), "a refused option left a record"


def test_notebook_refuses_a_cell_timeout_out_of_range_in_one_line(tmp_path):
    assert_one_line_error(swizzleperf("notebook", "--timeout", "nan", cwd=tmp_path, timeout=120),
                          f"--timeout must be in (0, {SECONDS}, got nan")


@pytest.mark.parametrize("args, named", [(["--world-size", "5"], "--world-size"),
                                         (["--problem", "M=1000000000"], "--problem"),
                                         (["--world-size", "4", "--problem", "M=64"], "--world-size, --problem")])
def test_distributed_options_for_a_kernel_that_is_not_are_one_line(tmp_path, gemm_path, args, named):
    proc = swizzleperf("optimize", str(gemm_path), *args, cwd=tmp_path, timeout=120)
    assert_one_line_error(proc, f"{named} {'apply' if ',' in named else 'applies'} only to a distributed kernel")
    assert "gemm.py is not one" in proc.stderr
    assert not (tmp_path / ".swizzleperf").exists()


DISTRIBUTED = "kernels/distributed/all_gather_gemm.py"


@pytest.mark.parametrize("args, named", [(["--target-l2", "0.5"], "--target-l2"),
                                         (["--roof-margin", "0.03"], "--roof-margin"),
                                         (["--no-ncu"], "--no-ncu")])
def test_options_a_distributed_run_does_not_use_are_one_line(tmp_path, args, named):
    kernel = str(cli.Path(__file__).resolve().parents[2] / DISTRIBUTED)
    proc = swizzleperf("optimize", kernel, *args, cwd=tmp_path, timeout=120)
    assert_one_line_error(proc, f"{named} applies only to a kernel that is not distributed")
    assert not (tmp_path / ".swizzleperf").exists()


def test_a_distributed_kernel_takes_its_world_size_and_problem(tmp_path):
    """Past the new checks: the problem's own check answers (proof that --world-size was taken)."""
    kernel = str(cli.Path(__file__).resolve().parents[2] / DISTRIBUTED)
    proc = swizzleperf("optimize", kernel, "--world-size", "4", "--problem", "nosuch", cwd=tmp_path, timeout=300)
    assert_one_line_error(proc, "--problem must be one of")


@pytest.mark.parametrize("args, named", [(["--files", "list.txt"], "--files"),
                                         (["--row-budget", "30", "--no-ncu"], "--row-budget, --no-ncu"),
                                         (["--ray-address", "local"], "--ray-address")])
def test_apps_options_without_apps_are_one_line(tmp_path, args, named):
    """Without --apps these were dropped in silence (the bundled kernels' eval never reads them)."""
    proc = swizzleperf("eval", "--kernels", "gemm", *args, cwd=tmp_path, timeout=120)
    assert_one_line_error(proc, f"{named} {'apply' if ',' in named else 'applies'} only to an --apps eval")
    assert not (tmp_path / ".swizzleperf").exists()


@pytest.mark.parametrize("args", [["--kernels", "gemm"], ["--kernels", "gemm", "--model", "m", "--temperature", "0.5"]])
def test_kernels_with_apps_is_one_line(tmp_path, args):
    """--kernels names bundled kernels, which an --apps eval does not run; the LLM options are taken
    by both evals (tests/eval/test_apps_llm.py), so only --kernels is named."""
    (tmp_path / "apps").mkdir()
    proc = swizzleperf("eval", "--apps", "apps", *args, cwd=tmp_path, timeout=120)
    assert_one_line_error(proc, "--kernels applies to the bundled kernels' eval, not to an --apps eval")
    assert not (tmp_path / ".swizzleperf").exists()
