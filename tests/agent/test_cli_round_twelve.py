"""Red team, round twelve, user input (class 3): an empty run or eval id (U03), options given beside
an eval's ``--resume`` that the stored eval fixes (said, not dropped silently), and a kernel whose file
name is not UTF-8 text, whose run could not be resumed (U04)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from swizzleperf.agent.cli import app
from swizzleperf.agent.loop import run
from swizzleperf.agent.loop.record import RunRecord, stored_options
from swizzleperf.agent.proposers.scripted import ScriptedProposer
from swizzleperf.agent.verification.swizzles import catalog_source

ARGS = ["pid", "num_pid_m", "num_pid_n"]


@pytest.fixture(autouse=True)
def _private_home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "home" / ".cache"))
    monkeypatch.chdir(tmp_path)   # a notebook or a run written "here" is written in the test's folder


def _invoke(tmp_path, *args):
    env = {"COLUMNS": "200", "NO_COLOR": "1", "HOME": str(tmp_path / "home")}
    return CliRunner().invoke(app, list(args), env=env)


def _one_error_line(got, needle: str) -> None:
    assert got.exit_code == 2 and isinstance(got.exception, SystemExit), (got.exit_code, got.exception, got.output)
    lines = [line for line in got.output.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and needle in lines[0], got.output
    assert "Traceback" not in got.output


# -- U03: an empty id -------------------------------------------------------------------------------

@pytest.mark.parametrize("blank", ["", "   "])
def test_optimize_with_an_empty_resume_is_one_line_not_a_traceback(tmp_path, blank):
    """`optimize --resume ""` started a new run of no kernel: a TypeError traceback (U03)."""
    got = _invoke(tmp_path, "optimize", "--resume", blank, "--workdir", str(tmp_path / "w"))
    _one_error_line(got, "--resume needs a run id")
    assert not (tmp_path / "w").exists()


def test_start_without_a_kernel_and_resume_without_an_id_are_one_line(tmp_path):
    with pytest.raises(run.RunError, match="no kernel to optimize") as info:
        run.start(run.RunOptions(kernel=None, hw="mi300x", workdir=str(tmp_path / "w")))
    assert "\n" not in str(info.value) and not (tmp_path / "w").exists()
    with pytest.raises(run.RunError, match="no kernel to optimize"):
        run.start(run.RunOptions(kernel="  ", hw="mi300x", workdir=str(tmp_path / "w")))
    with pytest.raises(run.RunError, match="needs a run id"):
        run.resume("", workdir=str(tmp_path / "w"))
    assert not (tmp_path / "w").exists()


@pytest.mark.parametrize("args, needle", [
    (("eval", "--resume", ""), "--resume needs an eval id"),
    (("eval", "--resume", " "), "--resume needs an eval id"),
    (("eval-worker", "", "gemm"), "EVAL_ID needs an eval id"),
    (("notebook", ""), "RUN needs a run id or a run folder"),
])
def test_the_other_commands_with_an_id_refuse_an_empty_one(tmp_path, args, needle):
    """`notebook ""` ran the notebook on the latest run; `eval --resume ""` looked for an eval ''."""
    got = _invoke(tmp_path, *args, "--workdir", str(tmp_path / "w"))
    _one_error_line(got, needle)
    assert not list(tmp_path.glob("*.ipynb")) and not (tmp_path / "w").exists()


# -- options the stored run or eval fixes ------------------------------------------------------------

def test_optimize_resume_with_a_model_is_one_line(tmp_path):
    """A resumed run goes on with its own options: --model (or another the record fixes) beside
    --resume is refused in one line, before the record is opened (never silently dropped)."""
    got = _invoke(tmp_path, "optimize", "--resume", "r1", "--model", "other", "--workdir", str(tmp_path / "w"))
    _one_error_line(got, "--model is not taken here")
    assert not (tmp_path / "w").exists()


def test_eval_resume_says_which_given_options_the_stored_eval_overrides(tmp_path, monkeypatch):
    """`eval --resume ID --model M -n 5` went on with the stored model and iterations and said
    nothing; now one note per option whose given value is not the stored one."""
    from swizzleperf.eval import suite
    workdir = tmp_path / "w"
    suite._register(suite.EvalOptions(kernels=["gemm"], hw="mi300x", iterations=2, workdir=str(workdir)), "eval-r12")

    def stop(options, eval_id, *args, **kwargs):
        raise suite.EvalError("stopped by the test before any kernel ran")
    monkeypatch.setattr(suite, "run_eval", stop)
    got = _invoke(tmp_path, "eval", "--resume", "eval-r12", "--workdir", str(workdir), "--model", "other-model",
                  "-n", "5", "--hw", "mi300x", "--temperature", "0.2")
    notes = [line for line in got.output.splitlines() if line.startswith("note:")]
    assert notes == ["note: --iterations is taken from the stored eval eval-r12 (2); the given 5 is ignored",
                     "note: --model is taken from the stored eval eval-r12 (none); the given other-model is ignored"], got.output
    assert "stopped by the test" in got.output


def test_apps_eval_resume_says_which_given_options_the_stored_eval_overrides(tmp_path, monkeypatch):
    from swizzleperf.eval import apps
    workdir, folder = tmp_path / "w", tmp_path / "apps"
    folder.mkdir()
    (folder / "a.py").write_text("print('app')\n")
    apps._register(apps.AppsOptions(apps_dir=str(folder), names=["a.py"], iterations=2, row_budget_s=600.0,
                                    workdir=str(workdir)), "apps-r12")

    def stop(options, eval_id, *args, **kwargs):
        raise apps.AppsError("stopped by the test before any row ran")
    monkeypatch.setattr(apps, "run_apps", stop)
    got = _invoke(tmp_path, "eval", "--resume", "apps-r12", "--workdir", str(workdir), "-n", "3",
                  "--row-budget", "60", "--no-ncu", "--apps", str(folder))
    notes = [line for line in got.output.splitlines() if line.startswith("note:")]
    assert notes == [
        "note: --iterations is taken from the stored eval apps-r12 (2); the given 3 is ignored",
        "note: --row-budget is taken from the stored eval apps-r12 (600.0); the given 60.0 is ignored",
        "note: --no-ncu is taken from the stored eval apps-r12 (without --no-ncu); the given --no-ncu is ignored",
    ], got.output
    assert "stopped by the test" in got.output


# -- U04: a kernel file name that is not UTF-8 ----------------------------------------------------------

def test_a_run_of_a_kernel_whose_name_is_not_utf8_resumes(tmp_path, gemm_path, monkeypatch):
    """The record keeps text (undecodable bytes as ``?``): the resume looked for
    ``original_odd??.py`` beside the run folder's copy ``original_odd<ff><fe>.py`` (U04)."""
    folder = tmp_path / "k"
    folder.mkdir()
    name = os.fsdecode(b"odd\xff\xfe.py")
    kernel = folder / name
    kernel.write_bytes(gemm_path.read_bytes())
    monkeypatch.chdir(folder)
    outcome = run.start(run.RunOptions(kernel=name, hw="mi300x", iterations=1),
                        proposer=ScriptedProposer([("col", catalog_source("column-major", ARGS))]))
    # the run folder's files carry the name as the record writes it: printable, each undecodable byte a "?"
    assert (outcome.run_dir / "original_odd??.py").read_bytes() == kernel.read_bytes()
    names = [p.name for p in outcome.run_dir.rglob("*")]
    assert all(n.encode("utf-8") for n in names) and "candidates" in names
    assert outcome.report["best_kernel_file"] == str(outcome.run_dir / "odd??.py"), outcome.report.get("best_kernel_refused")
    resumed = run.resume(outcome.run_id, workdir=".swizzleperf",
                         proposer=ScriptedProposer([("row", catalog_source("row-major", ARGS))]))
    assert resumed.run_id == outcome.run_id and resumed.status == "finished"
    row = RunRecord(Path(".swizzleperf")).run(outcome.run_id)
    assert "?" in row["config"]["kernel"]    # the record's text, as redact writes it
    options = stored_options(row, run.RunOptions)
    assert run.stored_kernel_path(outcome.run_id, options) == str(kernel.resolve())   # its bytes kept


def test_a_stored_path_whose_bytes_do_not_match_its_text_is_refused(tmp_path):
    options = run.RunOptions(kernel="/k/odd?.py", kernel_path_bytes=b"/k/other\xff.py".hex())
    with pytest.raises(run.RunError, match="not the bytes of /k/odd") as info:
        run.stored_kernel_path("r1", options)
    assert "\n" not in str(info.value)
    for broken in ("zz", "", b"/k/odd\xff\x00.py".hex()):
        with pytest.raises(run.RunError):
            run.stored_kernel_path("r1", run.RunOptions(kernel="/k/odd?.py", kernel_path_bytes=broken))
    good = run.RunOptions(kernel="/k/odd?.py", kernel_path_bytes=b"/k/odd\xff.py".hex())
    assert os.fsencode(run.stored_kernel_path("r1", good)) == b"/k/odd\xff.py"
    assert run.lossless_path("/k/plain.py") is None
