"""``swizzleperf eval --apps DIR --model M`` (eval/apps.py, eval/app_worker.py, agent/cli.py): the rows
propose with the LLM as ``optimize --app "python APP" --model M`` does. Over a folder of two tiny apps
and a loopback OpenAI server (tests/helpers/fake_openai.py): both rows finish naming ``llm:m``, the
model's copy of a catalog order it was shown is credited to the catalog, the endpoint is asked once
before the rows; the apps, which look for the agent's key and the endpoint's password in their own
environment and in every /proc/*/environ they can read, see neither, and no file or printed line
holds either. A dead endpoint is one line, exit 2, no row started; a model whose replies never give
a candidate is a ``proposer failed`` row; a resumed eval keeps its model and asks for the
credentials again; an eval stored before these options resumes with the policy; ``--ray`` tasks get
the same options."""
from __future__ import annotations

import json
import sqlite3
import sys
import types
from pathlib import Path

import pytest

from run_cli import assert_one_line_error, swizzleperf
from swizzleperf.eval import app_worker, apps
from swizzleperf.eval.apps import AppsError, AppsOptions, run_apps

MATMUL = Path(__file__).resolve().parents[1] / "helpers" / "apps" / "suite" / "matmul.py"
KEY, PASSWORD = "sk-apps-7f3a9c2e11d4", "pw-apps-Zx81kq"
#: Appended to the matmul app: it fails, naming where, if it can read the agent's key or the
#: endpoint's password (their prefixes only: the app's text is copied into the run's files).
LOOK_FOR_SECRETS = '''
import glob, os
_seen = [k for k, v in os.environ.items() if "sk-apps-" in v or "pw-apps-" in v or k == "OPENAI_API_KEY"]
for _path in glob.glob("/proc/[0-9]*/environ"):
    try:
        _data = open(_path, "rb").read()
    except OSError:
        continue
    if b"sk-apps-" in _data or b"pw-apps-" in _data:
        _seen.append(_path)
if _seen:
    raise SystemExit(f"the app read the agent's credentials: {_seen}")
'''


def _reply(order: str) -> str:
    from swizzleperf.agent.verification.swizzles import catalog_source
    return f"```python\n{catalog_source(order, ['pid', 'num_pid_m', 'num_pid_n'])}```\n"


def _apps(folder: Path, *names: str) -> Path:
    folder.mkdir()
    for name in names:
        (folder / name).write_text(MATMUL.read_text() + LOOK_FOR_SECRETS)
    return folder


def test_two_apps_with_an_llm_finish_naming_it_and_never_see_its_key(tmp_path, monkeypatch):
    from fake_openai import FakeOpenAIServer
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    _apps(tmp_path / "apps", "a.py", "b.py")
    with FakeOpenAIServer() as server:
        server.reply("OK")   # the one check before the rows
        for _ in range(4):   # a proposal a row; the rest left over
            server.reply(_reply("xcd-contiguous:8"), prompt_tokens=10, completion_tokens=10)
        url = server.base_url.replace("http://", f"http://agent:{PASSWORD}@")
        proc = swizzleperf("eval", "--apps", "apps", "--model", "m", "--base-url", url, "--hw", "mi300x", "-n", "1",
                           "--gpus", "2", "--row-budget", "300", "--out", "out/suite", cwd=tmp_path)
        chats = [r for r in server.requests if "messages" in r]
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "Traceback" not in output, output
    table = json.loads((tmp_path / "out" / "suite.json").read_text())
    rows = {r["app"]: r for r in table["rows"]}
    assert {a: r["outcome"] for a, r in rows.items()} == {"a.py": "verified, no gain", "b.py": "verified, no gain"}
    assert {r["proposer"] for r in rows.values()} == {"llm:m"} and table["proposer"] == "llm:m"
    twin = "llm (= the catalog's xcd-contiguous:8, ranked in its prompt)"
    assert {r["best_order"] for r in rows.values()} == {twin}, rows
    assert all(twin in r["reason"] for r in rows.values())
    assert len(chats) == 3 and chats[0]["max_tokens"] == 1   # the check once, then one proposal a row
    assert output.count("llm:m)") == 2 and "by llm:m" in (tmp_path / "out" / "suite.md").read_text()
    for run_dir in {r["run_dir"] for r in rows.values()}:
        assert json.loads((Path(run_dir) / "report.json").read_text())["proposer"].startswith("llm:m at http://***@")
    assert PASSWORD not in output and KEY not in output
    leaks = [str(p) for p in tmp_path.rglob("*") if p.is_file()
             and (PASSWORD.encode() in p.read_bytes() or KEY.encode() in p.read_bytes())]
    assert leaks == [], f"secrets written into {leaks}"


def _dead_port() -> int:
    """A loopback port with nothing listening (bound, then closed)."""
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_dead_endpoint_is_one_line_and_no_row_starts(tmp_path):
    (tmp_path / "apps").mkdir()
    marker = tmp_path / "ran"
    (tmp_path / "apps" / "app.py").write_text(f"open({str(marker)!r}, 'w')\n")
    proc = swizzleperf("eval", "--apps", "apps", "--model", "m", "--base-url",
                       f"http://127.0.0.1:{_dead_port()}/v1", cwd=tmp_path, timeout=120)
    assert_one_line_error(proc, "unreachable")
    assert proc.returncode == 2 and "nothing was started" in proc.stderr
    assert not marker.exists() and not (tmp_path / ".swizzleperf").exists()


def test_a_model_that_never_gives_a_candidate_is_a_proposer_failed_row(tmp_path, monkeypatch):
    """The endpoint answers, but with no code: the run ends as optimize ends it ('no candidate'),
    and the row says so, never a traceback nor a lost row."""
    from fake_openai import FakeOpenAIServer
    folder = _apps(tmp_path / "apps", "a.py")
    with FakeOpenAIServer() as server:
        for _ in range(3):   # the proposal and its two re-asks
            server.reply("Sure! Here is a poem about GPUs.", prompt_tokens=5, completion_tokens=9)
        options = AppsOptions(apps_dir=str(folder), names=["a.py"], iterations=1, row_budget_s=300, hw="mi300x",
                              workdir=str(tmp_path / ".swizzleperf"), out=str(tmp_path / "suite"), model="tiny",
                              base_url=server.base_url, llm_retries=0)
        _, summary, _ = run_apps(options, devices=[])
    row = summary["rows"][0]
    assert (row["outcome"], row["proposer"]) == ("proposer failed", "llm:tiny"), row
    assert row["reason"].startswith("the run ended 'no candidate': ") and "no ```python code block" in row["reason"]
    assert "Traceback" not in Path(row["log"]).read_text()
    assert summary["counts"]["proposer failed"] == 1 and summary["answered"] == 0


def _fake_rows(monkeypatch, outcome: str = "proposer failed") -> list:
    """``run_row`` replaced: each job kept, its row given at once."""
    jobs = []

    def run_row(job, on_start=lambda process: None):
        jobs.append(job)
        return {**app_worker.empty_row(job.name), "outcome": outcome, "seconds": 0.0,
                "proposer": app_worker.proposer_name(job.llm.get("model"))}
    monkeypatch.setattr(apps, "run_row", run_row)
    return jobs


def test_a_resumed_eval_keeps_its_model_and_asks_for_the_credentials_again(tmp_path, monkeypatch):
    jobs = _fake_rows(monkeypatch)
    url = f"http://agent:{PASSWORD}@127.0.0.1:9/v1"
    workdir = str(tmp_path / ".swizzleperf")
    options = AppsOptions(apps_dir=str(MATMUL.parent), names=["matmul.py"], workdir=workdir, out=str(tmp_path / "t"),
                          model="m", base_url=url, temperature=0.7, evidence=False, context_tokens=4096)
    eval_id, summary, files = run_apps(options, devices=[])
    assert jobs[0].llm == {"model": "m", "base_url": url, "llm_timeout_s": 300.0, "temperature": 0.7,
                           "context_tokens": 4096, "llm_retries": 2, "evidence": False, "price_in_per_mtok": 0.0,
                           "price_out_per_mtok": 0.0}
    assert PASSWORD not in repr(jobs[0])
    with sqlite3.connect(Path(workdir) / "swizzleperf.db") as db:
        stored = db.execute("SELECT options_json FROM app_evals").fetchone()[0]
    assert PASSWORD not in stored and json.loads(stored)["base_url"] == "http://***@127.0.0.1:9/v1"
    assert all(PASSWORD not in f.read_text() for f in files)

    with pytest.raises(AppsError, match="give the same --base-url again with --resume"):
        run_apps(AppsOptions(apps_dir="", workdir=workdir), eval_id, devices=[], again=("proposer failed",))
    with pytest.raises(AppsError, match="is not the endpoint apps eval"):
        run_apps(AppsOptions(apps_dir="", workdir=workdir, base_url=url.replace("127.0.0.1", "localhost")), eval_id,
                 devices=[], again=("proposer failed",))
    _, resumed, _ = run_apps(AppsOptions(apps_dir="", workdir=workdir, base_url=url), eval_id, devices=[],
                             again=("proposer failed",))
    assert len(jobs) == 2 and jobs[1].llm == jobs[0].llm
    assert resumed["proposer"] == "llm:m" and resumed["rows"][0]["proposer"] == "llm:m"


def test_an_eval_stored_before_the_llm_options_resumes_with_the_policy(tmp_path, monkeypatch):
    """A record of an older version: its options without the LLM's, its rows table without the
    proposer column; the eval resumes, the policy proposes, the new column is added."""
    jobs = _fake_rows(monkeypatch, outcome="verified, no gain")
    workdir = tmp_path / ".swizzleperf"
    workdir.mkdir()
    old_columns = [c for c in apps.COLUMNS if c != "proposer"]
    with sqlite3.connect(workdir / "swizzleperf.db") as db:
        db.execute("CREATE TABLE app_evals (eval_id TEXT PRIMARY KEY, options_json TEXT, started_at REAL)")
        db.execute(f"CREATE TABLE app_rows (eval_id TEXT, finished_at REAL, {', '.join(old_columns)}, "
                   f"PRIMARY KEY (eval_id, app))")
        old = {"apps_dir": str(MATMUL.parent), "names": ["matmul.py"], "iterations": 1, "row_budget_s": 60.0,
               "hw": "mi300x", "use_ncu": True, "workdir": str(workdir), "out": str(tmp_path / "t")}
        db.execute("INSERT INTO app_evals VALUES ('apps-old', ?, 0)", (json.dumps(old),))
    _, summary, _ = run_apps(AppsOptions(apps_dir="", workdir=str(workdir)), "apps-old", devices=[])
    assert jobs[0].llm == {} and summary["proposer"] == "policy"
    assert summary["rows"][0]["outcome"] == "verified, no gain" and summary["rows"][0]["proposer"] == "policy"


def test_the_endpoint_travels_in_the_workers_environment_never_on_its_command_line(tmp_path, monkeypatch):
    url = f"http://agent:{PASSWORD}@127.0.0.1:9/v1"
    job = app_worker.RowJob(app=str(MATMUL), folder=str(tmp_path / "row"), workdir=str(tmp_path), budget_s=60.0,
                            llm={"model": "m", "base_url": url, "temperature": 0.5, "evidence": False})
    command = app_worker.worker_command(job, tmp_path / "row.json")
    assert PASSWORD not in " ".join(command) and "127.0.0.1" not in " ".join(command)
    assert json.loads(command[command.index("--llm") + 1]) == {"model": "m", "temperature": 0.5, "evidence": False}
    assert "--llm" not in app_worker.worker_command(app_worker.RowJob(app="a", folder="f", workdir="w"), Path("r"))
    seen = ("import json, os, sys; json.dump({'outcome': 'refused', 'reason': str(os.environ.get(%r) == %r)}, "
            "open(sys.argv[1], 'w'))" % (app_worker.BASE_URL_VARIABLE, url))
    monkeypatch.setattr(app_worker, "worker_command", lambda job, row_file: [sys.executable, "-c", seen, str(row_file)])
    assert app_worker.run_row(job)["reason"] == "True"


def test_the_worker_takes_the_endpoint_out_of_its_environment(tmp_path, monkeypatch):
    got = {}
    monkeypatch.setenv(app_worker.BASE_URL_VARIABLE, "http://127.0.0.1:9/v1")
    monkeypatch.setattr(app_worker, "evaluate", lambda *args: got.update(llm=args[-1]))
    monkeypatch.setattr(app_worker.signal, "signal", lambda *args: None)
    monkeypatch.chdir(tmp_path)
    app_worker.main([str(MATMUL), "--workdir", str(tmp_path), "--row", str(tmp_path / "row.json"),
                     "--llm", json.dumps({"model": "m"})])
    assert got["llm"] == {"model": "m", "base_url": "http://127.0.0.1:9/v1"}
    assert app_worker.BASE_URL_VARIABLE not in __import__("os").environ


def test_a_stopped_proposer_is_named_and_a_catalog_copy_is_credited_to_the_catalog():
    from swizzleperf.agent.loop import run
    assert app_worker.PROPOSER_STOPS == (run.STALLED, run.NO_CANDIDATE)
    report = {"status": run.STALLED, "stop_reason": "the proposer produced no candidate 3 times in a row",
              "baseline": {"verdict": "PASS", "name": "baseline"},
              "best": {"kind": "candidate", "name": "llm", "catalog_twin": "grouped-m:8"}}
    row = app_worker.verdict(report, {"lift_notes": []})
    assert row["outcome"] == "proposer failed"
    assert row["best_order"] == "llm (= the catalog's grouped-m:8, ranked in its prompt)"
    assert row["reason"] == ("the run ended 'stalled': the proposer produced no candidate 3 times in a row; "
                             "the best so far: llm (= the catalog's grouped-m:8, ranked in its prompt)")


def test_ray_tasks_get_the_same_options(monkeypatch):
    """A stand-in for Ray that runs each task at once: the job a task gets is the eval's, LLM included."""
    from swizzleperf.eval import apps_ray
    done = []

    class Task:
        def __init__(self, fn):
            self.fn = fn

        def remote(self, job):
            return self.fn(job)
    ray = types.SimpleNamespace(is_initialized=lambda: True, cluster_resources=lambda: {},
                                remote=lambda **kw: Task, wait=lambda refs, num_returns: (refs[:1], refs[1:]),
                                get=lambda ref: ref, cancel=lambda ref, force: None)
    monkeypatch.setitem(sys.modules, "ray", ray)
    monkeypatch.setattr(apps_ray, "run_row", lambda job: {"app": job.name, "llm": job.llm})
    job = app_worker.RowJob(app="a.py", folder="f", workdir="w", name="a.py", llm={"model": "m", "base_url": "u"})
    apps_ray.run_on_ray([job], None, done.append)
    assert done == [{"app": "a.py", "llm": {"model": "m", "base_url": "u"}}]


def test_a_resumed_eval_checks_its_own_endpoint_once_through_the_command_line(tmp_path, monkeypatch):
    """``eval --resume ID`` of an LLM eval: the stored model and endpoint are asked for one token
    before any row, a dead one is one line (exit 2); nothing is left to run here, so a live one
    answers that one request and the eval ends."""
    from fake_openai import FakeOpenAIServer
    _fake_rows(monkeypatch, outcome="verified, no gain")
    workdir = tmp_path / ".swizzleperf"
    options = AppsOptions(apps_dir=str(MATMUL.parent), names=["matmul.py"], workdir=str(workdir), model="m",
                          base_url=f"http://127.0.0.1:{_dead_port()}/v1", out=str(tmp_path / "t"))
    dead_id, _, _ = run_apps(options, devices=[])
    assert_one_line_error(swizzleperf("eval", "--resume", dead_id, cwd=tmp_path, timeout=120), "unreachable")
    with FakeOpenAIServer() as server:
        options.base_url = server.base_url
        live_id, _, _ = run_apps(options, devices=[])
        server.reply("OK")
        proc = swizzleperf("eval", "--resume", live_id, cwd=tmp_path, timeout=120)
        chats = [r for r in server.requests if "messages" in r]
    assert proc.returncode == 0 and f"eval {live_id}: 1 of 1 answered" in proc.stdout, proc.stdout + proc.stderr
    assert len(chats) == 1 and chats[0]["model"] == "m" and chats[0]["max_tokens"] == 1


def test_the_llm_options_are_one_set_for_optimize_and_both_evals():
    """``_llm_options`` (agent/cli.py) gives what run.RunOptions, EvalOptions and AppsOptions take, and
    what a row hands its worker (LLM_OPTIONS): one proposer, built by agent/loop/run.py."""
    from swizzleperf.agent import cli
    from swizzleperf.agent.loop.run import RunOptions
    from swizzleperf.eval.suite import EvalOptions
    llm = cli._llm_options("m", "http://127.0.0.1:9/v1", 60.0, 0.5, 4096, 1, False, 1.0, 2.0)
    assert set(llm) == set(app_worker.LLM_OPTIONS)
    for options in (RunOptions(kernel="k", **llm), EvalOptions(**llm), AppsOptions(apps_dir="d", **llm)):
        assert {n: getattr(options, n) for n in llm} == llm


def test_where_boxes_share_its_pid_namespace_the_eval_process_makes_itself_non_dumpable(tmp_path, monkeypatch):
    """An apps eval's main process holds the LLM's key in its environment; where the apps' boxes get
    no PID namespace of their own, it is made non-dumpable (its /proc/PID/environ unreadable to
    them) before any row starts: ``sandbox.shield_from_boxes``."""
    from swizzleperf import sandbox
    shielded = []
    monkeypatch.setattr(sandbox, "isolation", lambda: (False, "no PID namespace here (the test)"))
    monkeypatch.setattr(sandbox, "_protect_agent", lambda why: shielded.append(why))
    assert sandbox.shield_from_boxes() is False and shielded == ["no PID namespace here (the test)"]

    order = []
    monkeypatch.setattr(sandbox, "shield_from_boxes", lambda: order.append("shield") or False)
    monkeypatch.setattr(apps, "_register", lambda *a: order.append("register") or (_ for _ in ()).throw(SystemExit))
    options = AppsOptions(apps_dir=str(tmp_path), names=[], iterations=1, row_budget_s=60, hw=None, use_ncu=False,
                          workdir=str(tmp_path / "w"), out=None)
    with pytest.raises(SystemExit):
        run_apps(options)
    assert order == ["shield", "register"]
