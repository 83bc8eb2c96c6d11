"""``swizzleperf eval --gpus N`` on a CPU: real workers running two kernels at once on a simulated
MI300X (one iteration each, the two fastest kernels) beside a worker that crashes, one merged
table, a resume that redoes only the crashed kernel; several processes writing one record at once;
pinning, longest-first order and the reasons of dead workers, with stand-in worker commands."""
from __future__ import annotations

import _thread
import subprocess
import sys
import threading
import time

import pandas as pd
import pytest

from swizzleperf.eval import evals_table, suite, workers
from swizzleperf.eval.suite import MAX_WORKERS, EvalError, EvalOptions, resolve_gpus, run_eval

CRASH = "import sys; sys.exit('boom: the worker crashed')"


def _crashing(kernels: set, code: str = CRASH):
    """A worker command that runs ``code`` instead of the real worker for ``kernels``."""
    real = workers.worker_command
    return lambda workdir, eval_id, kernel: ([sys.executable, "-c", code] if kernel in kernels
                                             else real(workdir, eval_id, kernel))


@pytest.fixture(scope="module")
def parallel_eval(tmp_path_factory):
    folder = tmp_path_factory.mktemp("parallel")
    options = EvalOptions(kernels=["softmax", "layernorm", "black_scholes"], hw="mi300x", iterations=1,
                          workdir=str(folder / ".swizzleperf"), out_dir=str(folder / "results"))
    events = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(workers, "worker_command", _crashing({"black_scholes"}))
        eval_id, table, files = run_eval(options, on_event=lambda kind, data: events.append((kind, data)), gpus=2)
    return options, eval_id, table, files, events


def test_two_workers_one_table(parallel_eval):
    options, eval_id, table, files, events = parallel_eval
    assert [f.name for f in files] == [f"{eval_id}.csv", f"{eval_id}.md", f"{eval_id}_l2.png"]
    assert table.kernel.tolist() == ["softmax", "layernorm", "black_scholes"]  # the eval's order
    done = table[table.kernel != "black_scholes"]
    assert (done.status == "finished").all() and (done["mode"] == "simulated").all()
    assert done.baseline_l2_hit_rate.notna().all() and done.run_id.nunique() == 2
    assert pd.read_csv(files[0]).shape[0] == 3
    lines = [d["name"] for kind, d in events if kind == "worker"]
    assert [line.split(" on ")[0] for line in lines[:2]] == ["softmax: started", "layernorm: started"]  # at once
    assert lines[2].startswith(("softmax: finished", "layernorm: finished"))


def test_a_crashed_worker_fails_its_kernel_only(parallel_eval):
    options, eval_id, table, files, _ = parallel_eval
    crashed = table.set_index("kernel").loc["black_scholes"]
    assert crashed.status == "failed" and pd.isna(crashed.run_id)
    assert crashed.reason.startswith("boom: the worker crashed (worker exit code 1; log ")
    assert "\n" not in crashed.reason
    assert f"| black_scholes | n/a |" in files[1].read_text()
    assert "failed: boom: the worker crashed" in files[1].read_text()


def test_resume_redoes_only_what_did_not_finish(parallel_eval, monkeypatch):
    options, eval_id, table, _, _ = parallel_eval
    monkeypatch.setattr(workers, "worker_command", _crashing({"black_scholes"}, "import sys; sys.exit('boom again')"))
    events = []
    again_id, again, _ = run_eval(EvalOptions(workdir=options.workdir), eval_id,
                                  on_event=lambda kind, data: events.append((kind, data["name"])), gpus=2)
    assert again_id == eval_id
    assert [name for kind, name in events if kind == "skip"] == ["softmax", "layernorm"]
    assert [name.split(":")[0] for kind, name in events if kind == "worker"] == ["black_scholes"] * 2
    assert again.run_id.tolist()[:2] == table.run_id.tolist()[:2]
    assert again.set_index("kernel").loc["black_scholes"].reason.startswith("boom again")


def test_workers_are_pinned_longest_first_and_deaths_explained(tmp_path, monkeypatch):
    """Stand-in workers print the device and TMPDIR they were given; one is killed by a signal."""
    monkeypatch.setattr(workers, "visible_devices", lambda: ["3", "5"])
    from swizzleperf import sandbox
    shielded = []   # the eval's process (the LLM's key in its environment) shielded from the workers' boxes
    monkeypatch.setattr(sandbox, "shield_from_boxes", lambda: shielded.append(True) or True)
    show = "import os; print(os.environ.get('CUDA_VISIBLE_DEVICES'), os.environ['TMPDIR']); raise SystemExit(1)"
    kill = "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"
    monkeypatch.setattr(workers, "worker_command", lambda workdir, eval_id, kernel: [
        sys.executable, "-c", kill if kernel == "spmv" else show])
    events = []
    options = EvalOptions(kernels=["softmax", "spmv", "gemm"], hw="mi300x", workdir=str(tmp_path / "w"),
                          out_dir=str(tmp_path / "out"))
    eval_id, table, _ = run_eval(options, on_event=lambda kind, data: events.append((kind, data["name"])), gpus=2)
    started = [name.split(":")[0] for kind, name in events if kind == "worker" and "started" in name]
    assert started == ["gemm", "spmv", "softmax"]  # longest first
    reasons = table.set_index("kernel").reason
    assert reasons.gemm.startswith("3 ") and "tmp-0" in reasons.gemm  # slot 0: the first visible GPU
    assert reasons.spmv.startswith("(no output) (worker killed by SIGKILL")
    assert (table.status == "failed").all()
    assert shielded == [True]


def test_an_interrupted_eval_stops_its_workers_and_writes_its_table(tmp_path, monkeypatch):
    """Ctrl-C in the eval: workers get SIGTERM, one that ignores it SIGKILL; the partial table is written."""
    stubborn = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)"
    monkeypatch.setattr(workers, "worker_command", lambda workdir, eval_id, kernel: [
        sys.executable, "-c", stubborn if kernel == "gemm" else "import time; time.sleep(60)"])
    monkeypatch.setattr(workers, "STOP_GRACE_S", 1.0)
    started = []

    def interrupt_when_both_run(kind, data):
        started.append(data["name"])
        if len(started) == 3:  # the eval id, then two workers
            threading.Timer(1.0, _thread.interrupt_main).start()
    options = EvalOptions(kernels=["gemm", "softmax"], hw="mi300x", workdir=str(tmp_path / "w"),
                          out_dir=str(tmp_path / "out"))
    begun = time.time()
    with pytest.raises(KeyboardInterrupt):
        run_eval(options, on_event=interrupt_when_both_run, gpus=2)
    assert time.time() - begun < 20
    table = pd.read_csv(next((tmp_path / "out").glob("*.csv")))
    assert table.status.tolist() == ["interrupted", "interrupted"]
    assert "| gemm | n/a |" in next((tmp_path / "out").glob("*.md")).read_text()


def test_gpus_option(monkeypatch):
    assert resolve_gpus("3") == 3
    assert resolve_gpus("auto") == max(1, len(workers.visible_devices()))
    assert resolve_gpus(str(MAX_WORKERS)) == MAX_WORKERS
    for bad in ("0", "-1", "two", str(MAX_WORKERS + 1), "99999999999999999999"):   # the last: #41 round ten
        with pytest.raises(EvalError, match=rf"--gpus must be an integer in \[1, {MAX_WORKERS}\] or auto"):
            resolve_gpus(bad)
    from swizzleperf import hwspecs
    measured = hwspecs.Target(hwspecs.load_spec("h200"), "measured", None, "fake H200")
    monkeypatch.setattr(hwspecs, "resolve_target", lambda hw: measured)
    monkeypatch.setattr(workers, "visible_devices", lambda: ["0"])
    with pytest.raises(EvalError, match="at most the 1 visible GPU"):
        run_eval(EvalOptions(), gpus=2)


def test_a_bad_gpus_option_is_one_line(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "swizzleperf.agent.cli", "eval", "--gpus", "two"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip() == f"error: --gpus must be an integer in [1, {MAX_WORKERS}] or auto, got 'two'"


def test_visible_devices_follow_cuda_visible_devices(monkeypatch):
    import torch
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert workers.visible_devices() == ["0", "1"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    assert workers.visible_devices() == ["3", "5"]


_WRITER = """
import sqlite3, sys, time
from pathlib import Path
from typing import TypedDict
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, StateGraph
from swizzleperf.agent.loop.record import RunRecord
from swizzleperf.eval.evals_table import set_status

workdir, eval_id, n, writers = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
record = RunRecord(workdir)


class State(TypedDict):
    i: int


def step(state: State) -> dict:  # what a run's node does: a checkpoint, an iteration row, a status
    record.save_attempt(f"run{n}", {"kind": "candidate", "iteration": state["i"], "name": "x", "verdict": "PASS"},
                        "test", is_best=False)
    set_status(workdir, eval_id, f"k{n}", "running", run_id=f"run{n}")
    return {"i": state["i"] + 1}


graph = StateGraph(State)
graph.add_node("step", step)
graph.set_entry_point("step")
graph.add_conditional_edges("step", lambda s: END if s["i"] >= 40 else "step")
saver = SqliteSaver(sqlite3.connect(record.db_path, check_same_thread=False, timeout=30))
(Path(workdir) / f"ready{n}").touch()  # imports done: start together
while len(list(Path(workdir).glob("ready*"))) < writers:
    time.sleep(0.01)
graph.compile(checkpointer=saver).invoke({"i": 0}, {"configurable": {"thread_id": f"run{n}"}, "recursion_limit": 200})
set_status(workdir, eval_id, f"k{n}", "finished")
"""


def test_several_processes_write_one_record(tmp_path):
    """Three processes at once, each a checkpointed graph writing iterations and its eval row at every
    step: nothing is lost and no writer gives up on a lock."""
    workdir = str(tmp_path / ".swizzleperf")
    kernels = [f"k{n}" for n in range(3)]
    suite._register(EvalOptions(kernels=kernels, workdir=workdir), "eval-x")
    procs = [subprocess.Popen([sys.executable, "-c", _WRITER, workdir, "eval-x", str(n), "3"],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for n in range(3)]
    outputs = [p.communicate(timeout=120)[0] for p in procs]
    assert [p.returncode for p in procs] == [0] * 3, outputs
    with evals_table.connect(workdir) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert db.execute("SELECT COUNT(*) FROM iterations").fetchone()[0] == 3 * 40
        assert db.execute("SELECT COUNT(DISTINCT thread_id) FROM checkpoints").fetchone()[0] == 3
        rows = db.execute("SELECT kernel, status, run_id FROM evals ORDER BY rowid").fetchall()
    assert rows == [(k, "finished", f"run{n}") for n, k in enumerate(kernels)]


@pytest.mark.multigpu
def test_each_worker_sees_one_gpu(tmp_path, monkeypatch):
    """On a machine of several GPUs: stand-in workers report what torch sees under their pinning."""
    devices = workers.visible_devices()
    if len(devices) < 2:
        pytest.skip(f"needs 2 CUDA devices, {len(devices)} present")
    report = ("import os, torch; print(os.environ['CUDA_VISIBLE_DEVICES'], torch.cuda.device_count(), "
              "torch.cuda.get_device_properties(0).uuid); raise SystemExit(1)")
    monkeypatch.setattr(workers, "worker_command", lambda workdir, eval_id, kernel: [sys.executable, "-c", report])
    options = EvalOptions(kernels=["softmax", "layernorm"], hw="mi300x", workdir=str(tmp_path / "w"),
                          out_dir=str(tmp_path / "out"))
    _, table, _ = run_eval(options, gpus=2)
    seen = [reason.split(" (worker")[0].split() for reason in table.reason]
    assert sorted(s[0] for s in seen) == sorted(devices[:2]) and [s[1] for s in seen] == ["1", "1"]
    assert seen[0][2] != seen[1][2]  # two different GPUs
