"""Faults a user meets (#12): bad options and specs refused in one line, a corrupt record named,
SIGTERM handled like Ctrl-C (run id said, run saved, worker gone), resume from another directory."""
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
from test_cli import _candidate_iterations, _wait_for_candidate_row, _write


@pytest.mark.parametrize("args, expected", [
    (["--target-l2", "0"], "--target-l2 must be in (0, 1], got 0.0"),
    (["--target-l2", "1.5"], "--target-l2 must be in (0, 1], got 1.5"),
    (["--timeout", "0"], "--timeout must be in (0, 604800] seconds, got 0.0"),
    (["--target-speedup", "-1"], "--target-speedup must be in (0, 100], got -1.0"),
])
def test_bad_options_are_one_line(tmp_path, gemm_path, args, expected):
    assert_one_line_error(swizzleperf("optimize", str(gemm_path), *args, cwd=tmp_path), expected)


@pytest.mark.parametrize("edit, expected", [
    # a dtype declared without its tolerance
    (lambda s: s.replace('tolerance={"bfloat16"', 'tolerance={"bfloat1x"'), "tolerance must give every dtype"),
    # a check problem whose grid (8 x 3 tiles of 32) is a multiple of 8 programs
    (lambda s: s.replace('"check": {"M": 100', '"check": {"M": 256'), "must not be a multiple of 8"),
    # a problem that lacks a size the grid reads
    (lambda s: s.replace('"check": {"M": 100, ', '"check": {'), "lacks the size 'M'"),
])
def test_bad_specs_are_refused_at_load_naming_the_field(tmp_path, gemm_path, edit, expected):
    source = gemm_path.read_text()
    assert edit(source) != source, "the edit no longer applies to kernels/gemm.py"
    kernel = _write(tmp_path / "gemm.py", edit(source))
    assert_one_line_error(swizzleperf("optimize", str(kernel), cwd=tmp_path), expected)
    runs = tmp_path / ".swizzleperf" / "runs"
    assert not runs.exists() or not any(runs.iterdir()), "a failed start left a run folder"


def test_a_corrupt_record_is_one_line_naming_the_file(tmp_path, gemm_path):
    (tmp_path / ".swizzleperf").mkdir()
    (tmp_path / ".swizzleperf" / "swizzleperf.db").write_bytes(b"this is not sqlite" * 100)
    assert_one_line_error(swizzleperf("optimize", str(gemm_path), cwd=tmp_path),
                           "swizzleperf.db is not a usable run record")


def test_sigterm_saves_the_run_and_it_resumes_from_another_directory(tmp_path, gemm_path):
    project = tmp_path / "project"
    project.mkdir()
    kernel = _write(project / "gemm.py", gemm_path.read_text())
    workdir = project / ".swizzleperf"
    # The run's temporary folders (each worker's request lives in one) under this test's own
    # folder: the workers looked for below are this run's, never another run's on the machine.
    own_tmp = tmp_path / "tmp"
    own_tmp.mkdir()
    proc = subprocess.Popen(CLI + ["optimize", "gemm.py", "--iterations", "3", "--plateau", "10"],
                            cwd=project, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, TMPDIR=str(own_tmp)))
    run_id = _wait_for_candidate_row(workdir / "swizzleperf.db", timeout_s=300)
    deadline = time.monotonic() + 120  # the signal lands while one of this run's workers runs
    while not _workers_running(own_tmp) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _workers_running(own_tmp), "no worker of this run seen to interrupt"
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert f"run {run_id}" in out  # said at the start
    assert f"--resume {run_id}" in err and "Traceback" not in out + err
    with sqlite3.connect(workdir / "swizzleperf.db") as db:
        status = db.execute("SELECT status FROM runs WHERE run_id = ?", (run_id,)).fetchone()[0]
    assert status == "interrupted"
    time.sleep(1)
    assert not _workers_running(own_tmp), "a worker outlived the interrupted run"

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    resumed = swizzleperf("optimize", "--resume", run_id, "--workdir", str(workdir), cwd=elsewhere)
    assert resumed.returncode == 0, resumed.stderr
    assert _candidate_iterations(workdir / "swizzleperf.db", run_id) == [1, 2, 3]
    report = json.loads((workdir / "runs" / run_id / "report.json").read_text())
    assert report["status"] == "finished" and Path(report["kernel_path"]) == kernel.resolve()
    assert kernel.read_text() == gemm_path.read_text()


def _workers_running(tmp: Path) -> bool:
    """Whether a live verification worker whose request lies under ``tmp`` is still running."""
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                cmdline = (proc / "cmdline").read_bytes()
                if b"swizzleperf.agent.verification.worker" in cmdline and str(tmp).encode() in cmdline \
                        and "State:\tZ" not in (proc / "status").read_text():
                    return True
            except OSError:
                continue
    return False


def test_a_model_that_never_gives_a_candidate_exits_non_zero_saying_why(tmp_path, gemm_path):
    """#14: SmolLM2-like garbage every time: each iteration NO_CANDIDATE with its reason, and the
    command fails in one line naming the last reason and the transcript."""
    from fake_openai import FakeOpenAIServer
    with FakeOpenAIServer() as server:
        for _ in range(7):   # the first answers the one-token check before the run
            server.reply("Sure! Here is a poem about GPUs.", prompt_tokens=50, completion_tokens=9)
        proc = swizzleperf("optimize", str(gemm_path), "--model", "tiny", "--base-url", server.base_url,
                           "--iterations", "2", cwd=tmp_path)
    assert proc.returncode != 0 and "Traceback" not in proc.stdout + proc.stderr
    assert "gave no candidate in any of its 2 proposals" in proc.stderr
    assert "no ```python code block" in proc.stderr and "transcript.jsonl" in proc.stderr
    assert "(no candidate)" in proc.stdout


@pytest.mark.parametrize("args, expected", [
    (["--temperature", "3"], "--temperature"),
    (["--context-tokens", "100"], "--context-tokens"),
])
def test_bad_llm_options_are_refused(tmp_path, gemm_path, args, expected):
    proc = swizzleperf("optimize", str(gemm_path), "--model", "m", *args, cwd=tmp_path)
    assert proc.returncode != 0 and expected in proc.stderr and "Traceback" not in proc.stderr


def test_url_secrets_reach_no_output_and_hostile_replies_end_as_records(tmp_path, gemm_path):
    """#21: ``--base-url http://user:password@host/v1?api_key=...``: the password and the key appear in
    no file the run writes (report.md, report.json, the record, the transcript, error.log) nor in
    what it prints, though the server echoes the key and every proposal fails; hostile replies
    (an echo in an HTTP 400, an event nested 100 000 deep, a 2 500-term sum) are each a recorded
    NO_CANDIDATE quoting what was received, never `internal error`; the query reaches the server."""
    from fake_openai import FakeOpenAIServer
    password, key = "pw-Zx81kq", "sk-test-7f3a9c2e"
    sum_reply = ("```python\n@triton.jit\ndef swizzle(pid, num_pid_m, num_pid_n):\n    return "
                 + " + ".join(["pid"] * 2500) + ", 0\n```\n")
    kernel = _write(tmp_path / "gemm.py", gemm_path.read_text())
    with FakeOpenAIServer() as server:
        url = server.base_url.replace("http://", f"http://agent:{password}@") + f"?api_key={key}"
        server.reply("OK")   # the one-token check before the run
        server.reply(None, status=400, error_message=f"no such key {key} for agent:{password} at {url}")
        server.reply("", events=["[" * 100_000 + "]" * 100_000])
        for _ in range(3):
            server.reply(sum_reply, prompt_tokens=10, completion_tokens=10)
        proc = swizzleperf("optimize", str(kernel), "--model", "m", "--base-url", url, "--iterations", "3",
                           "--llm-retries", "0", cwd=tmp_path)
        paths = list(server.paths)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 2 and "Traceback" not in output and "internal error" not in output, output
    assert "the proposer produced no candidate 3 times in a row" in proc.stderr
    assert password not in output and key not in output and "http://***@127.0.0.1" in output
    leaks = [str(p) for p in tmp_path.rglob("*") if p.is_file()
             and (password.encode() in p.read_bytes() or key.encode() in p.read_bytes())]
    assert leaks == [], f"secrets written into {leaks}"
    assert any(f"api_key={key}" in p for p in paths if p.startswith("/v1/chat/completions"))

    workdir = tmp_path / ".swizzleperf"
    with sqlite3.connect(workdir / "swizzleperf.db") as db:
        run_id, config = db.execute("SELECT run_id, config_json FROM runs").fetchone()
        reasons = [r for (r,) in db.execute("SELECT reason FROM iterations WHERE kind = 'candidate' ORDER BY iteration")]
        replies = [r for (r,) in db.execute("SELECT reply FROM requests ORDER BY started_at")]
    assert json.loads(config)["base_url"].startswith("http://***@127.0.0.1") and "api_key=***" in config
    assert "HTTP 400: no such key *** for agent:***" in reasons[0]
    assert "nests 100000 levels deep" in reasons[1] and "received: '[[[[" in reasons[1]
    assert "more than 64 levels deep" in reasons[2] and "the last reply began: '```python" in reasons[2]
    assert replies[1].startswith("[[[[") and replies[2] == sum_reply  # what was received is kept
    report = json.loads((workdir / "runs" / run_id / "report.json").read_text())
    assert [a["verdict"] for a in report["attempts"]] == ["NO_CANDIDATE"] * 3

    # the record keeps no credentials: --resume asks for the URL again, and only the same one
    assert_one_line_error(swizzleperf("optimize", "--resume", run_id, cwd=tmp_path),
                           "credentials are not kept in the record: give the same --base-url again")
    other = url.replace(password, "other-password").replace("127.0.0.1", "localhost")
    assert_one_line_error(swizzleperf("optimize", "--resume", run_id, "--base-url", other, cwd=tmp_path),
                           "is not the endpoint run")


# ------------------------------------------------------------------------------ the LLM endpoint first
def _dead_port() -> int:
    """A loopback port with nothing listening (bound, then closed)."""
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("command", [["optimize", "KERNEL"], ["eval", "--kernels", "gemm", "--hw", "mi300x"]])
def test_a_dead_endpoint_is_one_line_before_anything_is_recorded(tmp_path, gemm_path, command):
    """#45: with --model, one request before the baseline; a dead endpoint was 38 s and a run folder."""
    args = [str(gemm_path) if a == "KERNEL" else a for a in command]
    started = time.monotonic()
    proc = swizzleperf(*args, "--model", "m", "--base-url", f"http://127.0.0.1:{_dead_port()}/v1", cwd=tmp_path)
    assert_one_line_error(proc, "unreachable")
    assert "nothing was started" in proc.stderr and time.monotonic() - started < 30
    assert not (tmp_path / ".swizzleperf").exists()


@pytest.mark.parametrize("command", [["optimize", "KERNEL"], ["eval", "--kernels", "gemm"]])
def test_base_url_without_model_is_one_line(tmp_path, gemm_path, command):
    args = [str(gemm_path) if a == "KERNEL" else a for a in command]
    proc = swizzleperf(*args, "--base-url", "http://127.0.0.1:9/v1", cwd=tmp_path)
    assert_one_line_error(proc, "goes with --model")
    assert not (tmp_path / ".swizzleperf").exists()


def test_the_check_is_one_short_request(tmp_path):
    """A live endpoint answers the check: one request, one token, nothing else asked of it."""
    from fake_openai import FakeOpenAIServer
    from swizzleperf.agent.proposers.base import ProposerError
    from swizzleperf.agent.proposers.chat import ChatClient, ChatSettings
    with FakeOpenAIServer() as server:
        server.reply("OK")
        ChatClient(ChatSettings(model="m", base_url=server.base_url, retries=0)).check()
        server.reply(None, status=404, error_message="model 'm' not found")
        with pytest.raises(ProposerError, match="model 'm' not found"):
            ChatClient(ChatSettings(model="m", base_url=server.base_url, retries=0)).check()
        chats = [r for r in server.requests if "messages" in r]
    assert len(chats) == 2 and chats[0]["max_tokens"] == 1
