"""The end of `swizzleperf optimize` (#45.4): the order table fits 80 columns with every label
whole, the run names its best kernel and best.diff, and "numerics" says at which problem."""
from __future__ import annotations

from pathlib import Path

import pytest
from rich.console import Console

from swizzleperf.agent import cli
from swizzleperf.agent.loop.report import numerics_text, render_markdown

CHECK, DEFAULT = {"M": 100, "N": 72, "K": 80}, {"M": 16384, "N": 16384, "K": 4096}


def _order(name: str, l2: float, time_ms=None, time_source=None) -> dict:
    return {"name": name, "iteration": 0, "verdict": "PASS", "reason": "", "l2_hit_rate": l2,
            "source": "simulated:mi300x", "time_ms": time_ms, "time_spread_ms": 0.01 if time_ms else None,
            "time_source": time_source, "dram_bytes": 8e8, "dram_source": "simulated:mi300x"}


def _report(measured: bool = False) -> dict:
    time = (lambda t: {"time_ms": t, "time_source": "measured:events:NVIDIA H200"}) if measured else (lambda t: {})
    best = {**_order("grouped-n:32", 0.84, **time(3.1)), "kind": "candidate", "permutation_verified": True,
            "numerics_verified": True, "permutation_scope": "permutation proven for all grids",
            "swizzle_source": "def swizzle(pid): ..."}
    problems = {"check": CHECK, "default": DEFAULT} if measured else {"check": CHECK}
    return {"kernel": "gemm", "hardware": "h200" if measured else "mi300x",
            "mode": "measured" if measured else "simulated", "kernel_path": "/k/gemm.py",
            "baseline": _order("baseline", 0.811, **time(3.3)), "expert": _order("grouped-m:8", 0.32, **time(3.2)),
            "best": best, "best_kernel_file": "/r/gemm.py", "attempts": [], "stop_reason": "budget",
            "run_id": "r", "target": "t", "proposer": "policy", "iterations": 1, "prompt_tokens": 0,
            "completion_tokens": 0, "cost_usd": 0.0,
            "workload": {"problem": DEFAULT, "dtype": "bfloat16", "numerics_problems": problems, "meta": {},
                         "tile_grid": [128, 64], "programs": 8192, "programs_per_wave": 304, "wave_note": "w"}}


@pytest.mark.parametrize("measured", [False, True])
def test_the_order_table_fits_80_columns_with_its_labels_whole(measured):
    console = Console(width=80, record=True, highlight=False)
    table, line = cli._orders_table(_report(measured))
    console.print(table)
    console.print(line, markup=False)
    text = console.export_text()
    assert max(len(row) for row in text.splitlines()) <= 80
    assert "simulated:mi300x" in text and "best: grouped-n:32" in text and "…" not in text
    if measured:
        assert "3.100 ± 0.010 ms" in text and "measured:events:NVIDIA H200" in text
    else:
        assert "every order's source: simulated:mi300x; time: not measured" in text


def test_differing_sources_stay_columns():
    report = _report()
    report["best"]["source"] = "ncu (lts__t_sector_hit_rate)"
    table, line = cli._orders_table(report)
    assert [c.header for c in table.columns] == ["order", "L2 hit rate", "source"] and "source" not in line


def test_the_run_names_its_best_kernel_and_diff(tmp_path):
    (tmp_path / "best.diff").write_text("--- a/gemm.py\n")
    lines = cli._best_lines(_report(), tmp_path)
    assert lines[0].startswith("best: grouped-n:32: permutation proven for all grids; numerics verified at check")
    assert lines[1] == "best kernel: /r/gemm.py"
    assert lines[2] == f"best.diff: {tmp_path / 'best.diff'} (`patch /k/gemm.py {tmp_path / 'best.diff'}` applies it)"
    baseline = {**_report(), "best": {**_report()["baseline"], "kind": "baseline"}}
    assert "no order beat your kernel's own" in cli._best_lines(baseline, tmp_path)[0]


def test_numerics_say_at_which_problem():
    assert numerics_text(_report()) == ("numerics verified at check M=100, N=72, K=80 (bfloat16); not at the "
                                        "default M=16384, N=16384, K=4096 (a GPU checks it)")
    assert numerics_text(_report(measured=True)) == ("numerics verified at check M=100, N=72, K=80 and default "
                                                     "M=16384, N=16384, K=4096 (bfloat16)")
    assert "numerics True" not in render_markdown(_report())
    assert "numerics verified at check M=100" in render_markdown(_report())
    unverified = _report()
    unverified["best"]["numerics_verified"] = False
    assert numerics_text(unverified) == "numerics not verified"


def test_a_real_run_records_the_problems_it_checked(tmp_path):
    """The evaluator writes which problems the numerics ran at (verify.numerics_problems) into the report."""
    from swizzleperf.agent.verification.verify import numerics_problems
    assert numerics_problems("cpu") == ["check"] and numerics_problems("cuda") == ["check", "default"]
    from swizzleperf.agent.loop import run
    outcome = run.start(run.RunOptions(kernel=str(Path(__file__).resolve().parents[2] / "kernels" / "gemm.py"),
                                       hw="mi300x", iterations=1, workdir=str(tmp_path / ".sp")))
    workload = outcome.report["workload"]
    assert workload["numerics_problems"] == {"check": CHECK}
    assert "numerics verified at check M=100, N=72, K=80" in (outcome.run_dir / "report.md").read_text()


def test_the_patch_hint_quotes_the_paths_for_a_shell(tmp_path):
    """A kernel named `$(touch pwned).py` is a file name to the printed `patch` command, not a
    command substitution (#41, round eight: pasting the hint ran it)."""
    import shlex
    (tmp_path / "best.diff").write_text("--- a/x.py\n")
    report = {**_report(), "kernel_path": "/k/$(touch pwned).py"}
    line = cli._best_lines(report, tmp_path)[2]
    command = line.split("(`", 1)[1].rsplit("` applies it)", 1)[0]
    assert shlex.split(command) == ["patch", "/k/$(touch pwned).py", str(tmp_path / "best.diff")]
    assert "'/k/$(touch pwned).py'" in command


def test_options_given_beside_resume_are_one_line_not_dropped(tmp_path):
    """`optimize --resume ID --in-place` (or a KERNEL, or -n) used to go on without them and say
    nothing; now it is one line naming them, before the record is opened; --workdir and --base-url
    are taken."""
    from typer.testing import CliRunner
    from swizzleperf.agent.cli import app
    env = {"COLUMNS": "200", "NO_COLOR": "1", "HOME": str(tmp_path)}
    got = CliRunner().invoke(app, ["optimize", "--resume", "r1", "--in-place", "-n", "3", "--workdir", str(tmp_path / "w")], env=env)
    assert got.exit_code == 2 and "--iterations, --in-place are not taken here" in got.output, got.output
    assert not (tmp_path / "w").exists()
    got = CliRunner().invoke(app, ["optimize", "kernels/gemm.py", "--resume", "r1"], env=env)
    assert got.exit_code == 2 and "KERNEL is not taken here" in got.output, got.output
    got = CliRunner().invoke(app, ["optimize", "--resume", "r1", "--workdir", str(tmp_path / "w")], env=env)
    assert "not taken" not in got.output and got.exit_code != 0    # no such run: the record's own line
