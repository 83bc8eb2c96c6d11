"""The command line as a user meets it: bad input gives one clear line and no traceback; a run
killed mid-way resumes and finishes without losing or repeating an iteration."""
from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest
from run_cli import CLI, assert_one_line_error, swizzleperf


@pytest.mark.parametrize("make, expected", [
    (lambda d: d / "missing.py", "no such file"),
    (lambda d: d, "not a Python kernel module"),
    (lambda d: _write(d / "notes.txt", "hello"), "not a Python kernel module"),
    (lambda d: _write(d / "empty.py", "x = 1\n"), "defines no KernelSpec"),
    (lambda d: _write(d / "broken.py", "def f(:\n"), "does not parse"),
    (lambda d: _write(d / "deps.py", "import no_such_package_xyz\n"), "failed to import: ModuleNotFoundError"),
])
def test_bad_kernel_paths(tmp_path, make, expected):
    assert_one_line_error(swizzleperf("optimize", str(make(tmp_path)), cwd=tmp_path), expected)


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_unknown_hardware_and_unknown_run(tmp_path, gemm_path):
    assert_one_line_error(swizzleperf("optimize", str(gemm_path), "--hw", "tpu9", cwd=tmp_path),
                           "unknown hardware 'tpu9'")
    assert_one_line_error(swizzleperf("optimize", "--resume", "nope", cwd=tmp_path), "no run 'nope'")


def test_a_kernel_that_does_not_compile(tmp_path, gemm_path):
    source = gemm_path.read_text()
    broken = source.replace("accumulator = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)",
                            "accumulator = tl.no_such_function((BLOCK_M, BLOCK_N), dtype=tl.float32)")
    assert broken != source  # the bundled kernel still holds the line this test breaks
    bad = _write(tmp_path / "gemm_bad.py", broken)
    proc = swizzleperf("optimize", str(bad), cwd=tmp_path)
    assert_one_line_error(proc, "the unmodified kernel fails verification")
    report = json.loads(next((tmp_path / ".swizzleperf" / "runs").glob("*/report.json")).read_text())
    assert report["baseline"]["verdict"] in ("COMPILE_ERROR", "RUNTIME_ERROR")


def test_hw_without_a_gpu(tmp_path):
    proc = swizzleperf("hw", cwd=tmp_path)
    assert proc.returncode == 0 and "no GPU" in proc.stdout and "mi300x" in proc.stdout


def test_resume_after_a_kill_mid_run(tmp_path, gemm_path):
    kernel = _write(tmp_path / "gemm.py", gemm_path.read_text())
    workdir = tmp_path / ".swizzleperf"
    proc = subprocess.Popen(CLI + ["optimize", str(kernel), "--iterations", "4", "--plateau", "10"],
                            cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        run_id = _wait_for_candidate_row(workdir / "swizzleperf.db", timeout_s=300)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the CLI and any worker it was running
        proc.wait()
    done = _candidate_iterations(workdir / "swizzleperf.db", run_id)
    assert 1 <= len(done) < 4

    resumed = swizzleperf("optimize", "--resume", run_id, cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert _candidate_iterations(workdir / "swizzleperf.db", run_id) == [1, 2, 3, 4]
    report = json.loads((workdir / "runs" / run_id / "report.json").read_text())
    assert report["status"] == "finished" and report["iterations"] == 4
    assert [a["iteration"] for a in report["attempts"]] == [1, 2, 3, 4]


def _candidate_iterations(db: Path, run_id: str) -> list:
    with sqlite3.connect(db) as connection:
        rows = connection.execute("SELECT iteration FROM iterations WHERE run_id = ? AND kind = 'candidate' "
                                  "ORDER BY iteration", (run_id,)).fetchall()
    return [r[0] for r in rows]


def _wait_for_candidate_row(db: Path, timeout_s: float) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if db.exists():
            try:
                with sqlite3.connect(db) as connection:
                    row = connection.execute("SELECT run_id FROM iterations WHERE kind = 'candidate'").fetchone()
            except sqlite3.OperationalError:  # tables not created yet
                row = None
            if row:
                return row[0]
        time.sleep(0.2)
    raise AssertionError("no candidate row appeared")


# ------------------------------------------------------------------------------ options and help
def _commands():
    import typer
    from swizzleperf.agent.cli import app
    return typer.main.get_command(app).commands


def test_eval_takes_the_llm_options_optimize_takes():
    """The README says eval takes the same LLM options: --price-in was 'No such option'."""
    commands = _commands()
    llm = {"model", "base_url", "llm_timeout", "temperature", "context_tokens", "llm_retries", "price_in",
           "price_out", "evidence"}
    for name in ("optimize", "eval"):
        assert llm <= {p.name for p in commands[name].params}, name


@pytest.mark.parametrize("command, flag", [("optimize", "--in-place"), ("optimize", "--no-ncu"),
                                           ("optimize", "--no-evidence"), ("eval", "--no-evidence"),
                                           ("simulate", "--json"), ("simulate", "--traced")])
def test_a_flag_shows_no_value_in_help(command, flag):
    from typer.testing import CliRunner
    from swizzleperf.agent.cli import app
    result = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "200", "NO_COLOR": "1"})
    line = next(line for line in result.output.splitlines() if flag in line)
    assert "<bool>" not in line and "BOOLEAN" not in line, line


def test_no_evidence_leaves_the_ranking_out_of_the_prompt():
    from swizzleperf import hwspecs
    from swizzleperf.agent.proposers.base import ProposalContext
    from swizzleperf.agent.proposers.llm import LLMProposer
    source = "@triton.jit\ndef swizzle(pid, num_pid_m, num_pid_n):\n    return pid // num_pid_n, pid % num_pid_n\n"
    ranked = [{"name": "grouped-n:32", "source": source.replace("row", "g"), "tried": "",
               "predicted_l2_hit_rate": 0.84, "predicted_dram_bytes": 8e8, "predicted_source": "simulated:mi300x"}]
    context = ProposalContext(kernel_name="gemm", kernel_source=source, target_name="swizzle", target_source=source,
                              hardware=hwspecs.load_spec("mi300x"), mode="simulated", problem={"M": 1024},
                              meta={}, tile_grid=(8, 4), swizzle_args=(8, 4), analysis="", profile={},
                              evidence=lambda: ranked)
    on, off = (LLMProposer("m", base_url="http://127.0.0.1:9/v1", evidence=e) for e in (True, False))
    assert "grouped-n:32" in on.messages(context)[1]["content"]
    assert "grouped-n:32" not in off.messages(context)[1]["content"]
    assert "predicts for known orders" not in off.messages(context)[1]["content"]
    assert off.describe().endswith("(ranking evidence off)") and "evidence" not in on.describe()
