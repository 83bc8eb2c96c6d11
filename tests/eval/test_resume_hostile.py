"""``swizzleperf eval --resume`` of a tampered record (#41, a later replay): an eval's stored
options that hold an unknown key, 100 000 nested ``[``, text that is not JSON, a value of the
wrong type or a kernel or app path out of its folder are one line saying the eval cannot be resumed
and why (the row left as it was), never a TypeError, RecursionError or JSONDecodeError; a run's
report.json nested 100 000 deep is that kernel's row marked unreadable in one line, and the other
rows of the table go on. Hermetic: a private HOME and workdir, records written here."""
from __future__ import annotations

import dataclasses
import json
import sqlite3
import time
from pathlib import Path

import pandas as pd
import pytest
from run_cli import assert_one_line_error, swizzleperf

from swizzleperf.agent.loop.record import RunRecord
from swizzleperf.eval import apps, suite
from swizzleperf.eval.evals_table import set_status

DEEP = "[" * 100_000 + "]" * 100_000


@pytest.fixture(autouse=True)
def _private_home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "home" / ".cache"))


def _rows(workdir: Path, query: str) -> list:
    with sqlite3.connect(workdir / "swizzleperf.db") as db:
        return db.execute(query).fetchall()


def _tamper(workdir: Path, query: str, value) -> None:
    with sqlite3.connect(workdir / "swizzleperf.db") as db:
        db.execute(query, (value,))


# -- the options of an eval over the bundled kernels (evals.options_json) ---------------------------

def _eval(tmp_path: Path, options_json) -> Path:
    """A registered eval ``e1`` of gemm whose stored options are then ``options_json``."""
    workdir = tmp_path / ".swizzleperf"
    workdir.mkdir()
    suite._register(suite.EvalOptions(kernels=["gemm", "transpose"], hw="mi300x", iterations=1,
                                      workdir=str(workdir), out_dir=str(tmp_path / "results")), "e1")
    _tamper(workdir, "UPDATE evals SET options_json = ? WHERE eval_id = 'e1'", options_json)
    return workdir


GOOD_OPTIONS = json.dumps(dataclasses.asdict(suite.EvalOptions(kernels=["gemm"], hw="mi300x", iterations=1)))
BAD_OPTIONS = {   # the red-team's rows (/tmp/redteam41g/w5: e1, e2, e3), then other shapes
    "an unknown key": '{"bogus": 1}',
    "deep": DEEP,
    "not JSON": "not json",
    "null": None,
    "a list": "[1, 2]",
    "iterations as text": json.dumps({**json.loads(GOOD_OPTIONS), "iterations": "8"}),
    "iterations of 0": json.dumps({**json.loads(GOOD_OPTIONS), "iterations": 0}),
    "a number of 40 digits": json.dumps({**json.loads(GOOD_OPTIONS), "llm_retries": 10 ** 40}),
    "kernels as text": json.dumps({**json.loads(GOOD_OPTIONS), "kernels": "gemm"}),
    "a kernel path out of kernels/": json.dumps({**json.loads(GOOD_OPTIONS), "kernels": ["../../../tmp/evil"]}),
    "a workdir with a NUL": json.dumps({**json.loads(GOOD_OPTIONS), "workdir": "a\x00b"}),
    "a temperature of NaN": json.dumps({**json.loads(GOOD_OPTIONS), "temperature": float("nan")}),
    "too long": json.dumps({**json.loads(GOOD_OPTIONS), "left_out": "x" * (1 << 20)}),
}


@pytest.mark.parametrize("name", list(BAD_OPTIONS))
def test_a_tampered_eval_options_row_is_one_line_and_left_as_it_was(tmp_path, name):
    workdir = _eval(tmp_path, BAD_OPTIONS[name])
    before = _rows(workdir, "SELECT * FROM evals ORDER BY rowid")
    with pytest.raises(suite.EvalError) as caught:
        suite.stored_options(str(workdir), "e1")
    message = str(caught.value)
    assert "eval e1 cannot be resumed" in message and "\n" not in message and len(message) < 2000, message
    with pytest.raises(suite.EvalError, match="cannot be resumed"):
        suite.run_eval(suite.EvalOptions(workdir=str(workdir)), "e1")
    assert _rows(workdir, "SELECT * FROM evals ORDER BY rowid") == before
    assert not (tmp_path / "results").exists()


def test_the_stored_options_model_holds_every_option():
    """A field added to EvalOptions or AppsOptions must be added to what a resume accepts."""
    assert set(suite.StoredEvalOptions.model_fields) == {f.name for f in dataclasses.fields(suite.EvalOptions)}
    assert set(apps.StoredAppsOptions.model_fields) == {f.name for f in dataclasses.fields(apps.AppsOptions)}


def test_good_options_resume_as_they_were_and_an_older_row_takes_the_defaults(tmp_path):
    workdir = _eval(tmp_path, GOOD_OPTIONS)
    assert dataclasses.asdict(suite.stored_options(str(workdir), "e1")) == json.loads(GOOD_OPTIONS)
    older = {k: v for k, v in json.loads(GOOD_OPTIONS).items() if k not in ("left_out", "evidence")}
    _tamper(workdir, "UPDATE evals SET options_json = ? WHERE eval_id = 'e1'", json.dumps(older))
    resumed = suite.stored_options(str(workdir), "e1")
    assert resumed.evidence is True and resumed.left_out == "" and resumed.kernels == ["gemm"]


@pytest.mark.parametrize("name", ["an unknown key", "deep", "not JSON"])
def test_eval_resume_of_a_tampered_row_ends_with_one_line(tmp_path, name):
    workdir = _eval(tmp_path, BAD_OPTIONS[name])
    proc = swizzleperf("eval", "--resume", "e1", "--workdir", str(workdir), cwd=tmp_path, timeout=300)
    assert_one_line_error(proc, "eval e1 cannot be resumed")
    assert proc.returncode == 2


# -- the options of an apps eval (app_evals.options_json) -------------------------------------------

def _apps_eval(tmp_path: Path, options_json) -> Path:
    workdir = tmp_path / ".swizzleperf"
    workdir.mkdir()
    folder = tmp_path / "apps"
    folder.mkdir()
    (folder / "app.py").write_text("raise SystemExit('the app ran')\n")
    apps._register(apps.AppsOptions(apps_dir=str(folder), names=["app.py"], iterations=1, row_budget_s=60,
                                    hw="mi300x", workdir=str(workdir), out=str(tmp_path / "out" / "t")), "a1")
    _tamper(workdir, "UPDATE app_evals SET options_json = ? WHERE eval_id = 'a1'", options_json)
    return workdir


def _good_apps(tmp_path: Path, **changed) -> str:
    options = apps.AppsOptions(apps_dir=str(tmp_path / "apps"), names=["app.py"], iterations=1, row_budget_s=60,
                               hw="mi300x", workdir=str(tmp_path / ".swizzleperf"), out=str(tmp_path / "out" / "t"))
    return json.dumps({**dataclasses.asdict(options), **changed})


BAD_APPS_OPTIONS = {   # the red-team's rows (/tmp/redteam41g/w5: a1, a2), then other shapes
    "an unknown key": lambda tmp: '{"evil": 1}',
    "not JSON": lambda tmp: "{",
    "deep": lambda tmp: DEEP,
    "null": lambda tmp: None,
    "names as text": lambda tmp: _good_apps(tmp, names="app.py"),
    "an app out of the folder": lambda tmp: _good_apps(tmp, names=["../../elsewhere.py"]),
    "an absolute app": lambda tmp: _good_apps(tmp, names=["/tmp/elsewhere.py"]),
    "an app with a newline": lambda tmp: _good_apps(tmp, names=["a\nb.py"]),
    "iterations as text": lambda tmp: _good_apps(tmp, iterations="2"),
    "a budget of 0": lambda tmp: _good_apps(tmp, row_budget_s=0),
    "use_ncu as 1": lambda tmp: _good_apps(tmp, use_ncu=1),
}


@pytest.mark.parametrize("name", list(BAD_APPS_OPTIONS))
def test_a_tampered_apps_eval_options_row_is_one_line_and_left_as_it_was(tmp_path, name):
    workdir = _apps_eval(tmp_path, BAD_APPS_OPTIONS[name](tmp_path))
    before = _rows(workdir, "SELECT * FROM app_evals")
    with pytest.raises(apps.AppsError) as caught:
        apps.stored_options(str(workdir), "a1")
    message = str(caught.value)
    assert "apps eval a1 cannot be resumed" in message and "\n" not in message and len(message) < 2000, message
    with pytest.raises(apps.AppsError, match="cannot be resumed"):
        apps.run_apps(apps.AppsOptions(apps_dir="", workdir=str(workdir)), "a1", gpus=1, devices=[])
    assert _rows(workdir, "SELECT * FROM app_evals") == before
    assert _rows(workdir, "SELECT * FROM app_rows") == [] and not (tmp_path / "out").exists()
    assert apps.stored_options(str(workdir), "a-missing") is None   # no such eval: still None


def test_good_apps_options_resume_in_the_given_workdir(tmp_path):
    workdir = _apps_eval(tmp_path, _good_apps(tmp_path, workdir="/elsewhere/.swizzleperf"))
    resumed = apps.stored_options(str(workdir), "a1")
    assert resumed.names == ["app.py"] and resumed.workdir == str(workdir) and resumed.row_budget_s == 60


@pytest.mark.parametrize("name", ["an unknown key", "not JSON"])
def test_eval_resume_of_a_tampered_apps_row_ends_with_one_line(tmp_path, name):
    workdir = _apps_eval(tmp_path, BAD_APPS_OPTIONS[name](tmp_path))
    proc = swizzleperf("eval", "--resume", "a1", "--workdir", str(workdir), cwd=tmp_path, timeout=300)
    assert_one_line_error(proc, "apps eval a1 cannot be resumed")


# -- a finished run's report.json ----------------------------------------------------------------

def _report(hit_rate: float) -> dict:
    """What a simulated run's report.json holds of the fields the eval's table reads."""
    entry = lambda name, rate: {"name": name, "iteration": 0, "l2_hit_rate": rate, "source": "simulated:mi300x",
                                "time_ms": None, "time_spread_ms": None, "dram_bytes": 805306368}
    return {"kernel": "gemm", "hardware": "mi300x", "mode": "simulated", "iterations": 1, "status": "finished",
            "baseline": entry("baseline", 0.5), "expert": entry("grouped-m:8", 0.4),
            "best": {**entry("grouped-n:32", hit_rate), "l2_gain_vs_baseline": hit_rate - 0.5,
                     "l2_gain_vs_expert": hit_rate - 0.4},
            "roof": {"orders": {"best": {"status": "predicted", "binding": "compute", "roof_share": "not measured",
                                         "max_gain": "not measured"}}},
            "distributed": None}


def _finished_eval(tmp_path: Path, reports: dict) -> Path:
    """An eval ``e9`` whose kernels each finished a run with the report.json text given."""
    workdir = tmp_path / ".swizzleperf"
    workdir.mkdir()
    suite._register(suite.EvalOptions(kernels=list(reports), hw="mi300x", iterations=1, workdir=str(workdir),
                                      out_dir=str(tmp_path / "results")), "e9")
    record = RunRecord(workdir)
    for number, (kernel, text) in enumerate(reports.items()):
        run_id = f"20261206-000000-{number:04d}"
        run_dir = workdir / "runs" / run_id
        run_dir.mkdir(parents=True)
        (run_dir / "report.json").write_text(text)
        record.create_run(run_id, {"kernel": kernel, "kernel_path": f"kernels/{kernel}.py", "hardware": "mi300x",
                                   "mode": "simulated", "proposer": "policy", "run_dir": f"runs/{run_id}"},
                          {"iterations": 1})
        record.finish_run(run_id, "finished", "iteration budget reached (1)")
        set_status(str(workdir), "e9", kernel, "finished", run_id=run_id)
    return workdir


BAD_REPORTS = {
    "deep": DEEP,                                                  # the red-team's (/tmp/redteam41g/w10)
    "not JSON": "{",
    "a list": "[]",
    "l2_hit_rate as text": json.dumps({**_report(0.8), "best": {**_report(0.8)["best"], "l2_hit_rate": "lots"}}),
    "iterations as text": json.dumps({**_report(0.8), "iterations": "1"}),
    "best as a list": json.dumps({**_report(0.8), "best": [1]}),
    "a measured roof of text": json.dumps({**_report(0.8), "roof": {"orders": {"best": {
        "status": "measured", "roof_share": "most", "max_gain": 1.0, "binding": "DRAM"}}}}),
}


@pytest.mark.parametrize("name", list(BAD_REPORTS))
def test_an_unreadable_report_is_its_row_and_the_other_rows_go_on(tmp_path, name):
    workdir = _finished_eval(tmp_path, {"gemm": json.dumps(_report(0.8)), "transpose": BAD_REPORTS[name]})
    table = suite.summarize(str(workdir), "e9")
    good, bad = table.iloc[0], table.iloc[1]
    assert good.kernel == "gemm" and good.status == "finished" and good.best_l2_hit_rate == 0.8
    assert good.verdict == "higher predicted L2 hit rate"
    assert bad.kernel == "transpose" and bad.status == "unreadable", bad.to_dict()
    assert "report.json" in bad.reason and "\n" not in bad.reason and len(bad.reason) < 2000, bad.reason
    assert bad.verdict.startswith("unreadable: ") and pd.isna(bad.best_l2_hit_rate)
    files = suite.write_tables(table, tmp_path / "results", "e9")
    assert "| transpose |" in files[1].read_text() and "| gemm |" in files[1].read_text()


def test_a_report_that_is_too_long_or_a_pipe_is_its_row(tmp_path):
    import os
    workdir = _finished_eval(tmp_path, {"gemm": json.dumps(_report(0.8)), "transpose": "{}"})
    report = next((workdir / "runs").glob("*-0001")) / "report.json"
    report.unlink()
    os.mkfifo(report)     # opened without blocking and refused, never read for ever
    bad = suite.summarize(str(workdir), "e9").iloc[1]
    assert bad.status == "unreadable" and "not a regular file" in bad.reason, bad.reason
    report.unlink()
    with open(report, "wb") as handle:
        handle.truncate(suite.MAX_REPORT_BYTES + 1)
    bad = suite.summarize(str(workdir), "e9").iloc[1]
    assert bad.status == "unreadable" and "longer than" in bad.reason, bad.reason


def test_eval_resume_with_a_deep_report_writes_the_table_in_one_line_a_row(tmp_path):
    workdir = _finished_eval(tmp_path, {"gemm": json.dumps(_report(0.8)), "transpose": DEEP})
    start = time.perf_counter()
    proc = swizzleperf("eval", "--resume", "e9", "--workdir", str(workdir), cwd=tmp_path, timeout=300)
    output = proc.stdout + proc.stderr
    assert "Traceback" not in output and "RecursionError" not in output, output
    assert proc.returncode == 1, output          # a row did not finish: the table says why
    table = (tmp_path / "results" / "e9.md").read_text()
    rows = [line for line in table.splitlines() if line.startswith("| transpose |")]
    assert len(rows) == 1 and "unreadable: " in rows[0] and "nests 100000 levels deep" in rows[0], table
    assert any(line.startswith("| gemm | simulated | finished |") for line in table.splitlines()), table
    assert time.perf_counter() - start < 120
