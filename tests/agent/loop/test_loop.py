"""The whole loop on CPU (simulated MI300X): scripted, LLM (loopback server) and failing proposers.
Every run must end with its record, report and best kernel written, the user's file untouched."""
from __future__ import annotations

import json
import socket
from pathlib import Path

import pandas as pd
import pytest
from fake_openai import FakeOpenAIServer

from swizzleperf.agent.loop import run
from swizzleperf.agent.loop.record import RunRecord
from swizzleperf.agent.proposers.base import ProposerError
from swizzleperf.agent.proposers.scripted import ScriptedProposer
from swizzleperf.agent.verification.swizzles import catalog_source

ARGS = ["pid", "num_pid_m", "num_pid_n"]
NAIVE_XCD = '''@triton.jit
def swizzle(pid, num_pid_m, num_pid_n):
    num_pids = num_pid_m * num_pid_n
    pid = (pid % 8) * (num_pids // 8) + pid // 8
    return pid // num_pid_n, pid % num_pid_n
'''


def _options(tmp_path: Path, gemm_path: Path, **extra) -> run.RunOptions:
    kernel = tmp_path / "gemm.py"
    kernel.write_text(gemm_path.read_text())
    return run.RunOptions(kernel=str(kernel), hw="mi300x", workdir=str(tmp_path / ".swizzleperf"),
                          plateau=10, **extra)


def test_scripted_loop_records_every_verdict_and_reports(tmp_path, gemm_path):
    options = _options(tmp_path, gemm_path, iterations=5)
    user_file_before = Path(options.kernel).read_text()
    marker = tmp_path / "payload-ran"
    # the escape reported in #12: a valid grouped body, code in a default argument
    escape = catalog_source("grouped-m:8", ARGS).replace(
        "num_pid_n):", f"num_pid_n=__import__('builtins').exec(\"open({str(marker)!r}, 'w')\")):", 1)
    proposer = ScriptedProposer([("naive-xcd", NAIVE_XCD),
                                 ("xcd-grouped-m:8", catalog_source("xcd-grouped-m:8:8", ARGS)),
                                 ("escape", escape),
                                 ("garbage", "this is not python"),
                                 ProposerError("LLM endpoint http://127.0.0.1:9/v1 unreachable")])
    outcome = run.start(options, proposer=proposer)

    assert outcome.status == "finished"
    rows = RunRecord(Path(options.workdir)).iterations(outcome.run_id)
    candidates = rows[rows.kind == "candidate"]
    assert list(candidates.verdict) == ["NOT_PERMUTATION", "PASS", "INVALID", "INVALID", "NO_CANDIDATE"]
    assert "default" in candidates.reason.iloc[2] and not marker.exists()
    assert list(rows.kind[:2]) == ["baseline", "expert"]
    assert "never computed" in candidates.reason.iloc[0] and "remainder" in candidates.lesson.iloc[0]
    assert candidates.l2_source.iloc[1] == "simulated:mi300x"
    # The second proposal saw why the first was rejected.
    assert "never computed" in proposer.contexts[1].history[0]["reason"]
    assert "XCD" in proposer.contexts[0].analysis or "domain" in proposer.contexts[0].analysis

    report = json.loads((outcome.run_dir / "report.json").read_text())
    assert report["mode"] == "simulated" and report["hardware"] == "mi300x" and report["iterations"] == 5
    best, baseline = report["best"], report["baseline"]
    assert best["name"] == "xcd-grouped-m:8" and best["permutation_verified"] and best["numerics_verified"]
    assert 0.0 <= baseline["l2_hit_rate"] < best["l2_hit_rate"] <= 1.0
    assert best["time_ms"] is None and best["source"] == "simulated:mi300x"
    assert "NUM_XCDS" in best["swizzle_source"]
    best_kernel = outcome.run_dir / "gemm.py"
    assert "NUM_XCDS" in best_kernel.read_text() and (outcome.run_dir / "best.diff").read_text()
    assert (outcome.run_dir / "report.md").read_text().startswith("# swizzleperf run")
    assert Path(options.kernel).read_text() == user_file_before  # never modified without --in-place


def test_in_place_writes_the_best_back(tmp_path, gemm_path):
    options = _options(tmp_path, gemm_path, iterations=1, in_place=True)
    run.start(options, proposer=ScriptedProposer([("xcd", catalog_source("xcd-grouped-m:8:8", ARGS))]))
    assert "NUM_XCDS" in Path(options.kernel).read_text()


def test_llm_loop_against_a_loopback_server(tmp_path, gemm_path):
    good = ("Group 8 rows per XCD.\n```python\n" + catalog_source("xcd-grouped-m:8:8", ARGS) + "```\n")
    with FakeOpenAIServer() as server:
        server.reply(good, prompt_tokens=1200, completion_tokens=300)
        for _ in range(3):  # one proposal: the reply and its two retries are all malformed
            server.reply("I would rather not write code.", prompt_tokens=100, completion_tokens=10)
        options = _options(tmp_path, gemm_path, iterations=2, model="fake-coder",
                           base_url=server.base_url, price_in_per_mtok=1.0, price_out_per_mtok=2.0)
        outcome = run.start(options)
        assert "Memory-access analysis" in server.requests[0]["messages"][1]["content"]
    rows = RunRecord(Path(options.workdir)).iterations(outcome.run_id)
    candidates = rows[rows.kind == "candidate"]
    assert list(candidates.verdict) == ["PASS", "NO_CANDIDATE"]
    assert candidates.prompt_tokens.iloc[0] == 1200 and candidates.completion_tokens.iloc[0] == 300
    assert candidates.cost_usd.iloc[0] == pytest.approx(1200e-6 + 600e-6)
    assert "no usable reply after 3 attempts" in candidates.reason.iloc[1]
    report = json.loads((outcome.run_dir / "report.json").read_text())
    assert report["prompt_tokens"] == 1500 and report["best"]["name"] == "llm"


def test_llm_endpoint_down_ends_the_run_cleanly(tmp_path, gemm_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    options = _options(tmp_path, gemm_path, iterations=5, model="m", base_url=f"http://127.0.0.1:{port}/v1",
                       llm_timeout_s=2.0)
    outcome = run.start(options)
    assert outcome.status == "stalled"  # not finished: resumable once the endpoint is back
    assert "no candidate 3 times in a row" in outcome.report["stop_reason"]
    assert "unreachable" in outcome.report["stop_reason"]
    rows = pd.DataFrame(outcome.report["attempts"])
    assert list(rows.verdict) == ["NO_CANDIDATE"] * 3
    assert outcome.report["best"]["name"] == "baseline"
    lines = (outcome.run_dir / "transcript.jsonl").read_text().splitlines()
    rows = [json.loads(line, parse_constant=lambda c: pytest.fail(f"{c} in the transcript")) for line in lines]
    assert rows and all(r["finish_reason"] is None and r["outcome"].startswith(("unreachable", "deadline")) for r in rows)

    back = ScriptedProposer([("xcd", catalog_source("xcd-grouped-m:8:8", ARGS)),
                             ("col", catalog_source("column-major", ARGS))])
    resumed = run.resume(outcome.run_id, workdir=options.workdir, proposer=back)
    assert resumed.status == "finished" and len(back.contexts) == 2
    assert [a["verdict"] for a in resumed.report["attempts"]] == ["NO_CANDIDATE"] * 3 + ["PASS"] * 2


def test_a_stored_probe_that_does_not_fit_is_reported_not_fatal(tmp_path, gemm_path):
    options = _options(tmp_path, gemm_path, iterations=1)
    workdir = Path(options.workdir)
    workdir.mkdir(parents=True)
    (workdir / "probe_mi300x.json").write_text(json.dumps({"device": "x", "sm_of_program": [0, 1]}))
    events = []
    outcome = run.start(options, on_event=lambda kind, data: events.append((kind, data.get("name", ""))),
                        proposer=ScriptedProposer([("xcd", catalog_source("xcd-grouped-m:8:8", ARGS))]))
    assert outcome.status == "finished"
    assert any("no partition map" in name and "by the spec instead" in name for _, name in events)


def test_cheap_checks_cost_a_reask_not_an_iteration(tmp_path, gemm_path):
    """#14: a reply that fails the static check, or repeats the baseline's order, goes back to the
    model at once with the reason; the iteration is spent on the first one worth verifying."""
    with_if = "```python\n@triton.jit\ndef swizzle(pid, num_pid_m, num_pid_n):\n    if pid < 3:\n" \
              "        pid = 2 - pid\n    return pid // num_pid_n, pid % num_pid_n\n```\n"
    baseline = "```python\n" + catalog_source("row-major", ARGS) + "```\n"
    good = "```python\n" + catalog_source("xcd-grouped-m:8:8", ARGS) + "```\n"
    with FakeOpenAIServer() as server:
        for reply in (with_if, baseline, good):
            server.reply(reply, prompt_tokens=100, completion_tokens=10)
        outcome = run.start(_options(tmp_path, gemm_path, iterations=1, model="fake", base_url=server.base_url))
        reasks = [r["messages"][-1]["content"] for r in server.requests[1:]]
    assert [a["verdict"] for a in outcome.report["attempts"]] == ["PASS"]
    assert "`if` is not allowed" in reasks[0] and "same as the baseline" in reasks[1]
    assert outcome.report["prompt_tokens"] == 300  # all three requests counted


def test_the_same_tile_order_written_otherwise_is_a_reask_and_every_request_is_in_the_transcript(
        tmp_path, gemm_path):
    """#14: row-major dressed up with offsets that are always 0 has the baseline's tile map: caught
    by the map's hash before an iteration is spent; the transcript keeps all requests."""
    dressed = ("```python\n@triton.jit\ndef swizzle(pid, num_pid_m, num_pid_n):\n    offset = pid * 0\n"
               "    pid_m = pid // num_pid_n + offset\n    pid_n = pid % num_pid_n - offset\n"
               "    return pid_m, pid_n\n```\n")
    good = "```python\n" + catalog_source("xcd-grouped-m:8:8", ARGS) + "```\n"
    with FakeOpenAIServer() as server:
        server.reply(dressed, prompt_tokens=100, completion_tokens=30)
        server.reply(good, prompt_tokens=120, completion_tokens=40)
        options = _options(tmp_path, gemm_path, iterations=1, model="fake", base_url=server.base_url)
        outcome = run.start(options)
        reask = server.requests[1]["messages"][-1]["content"]
    assert "same tile as the baseline" in reask
    assert [a["verdict"] for a in outcome.report["attempts"]] == ["PASS"]
    lines = [json.loads(line) for line in (outcome.run_dir / "transcript.jsonl").read_text().splitlines()]
    assert [(r["iteration"], r["n"], r["outcome"]) for r in lines] == [(1, 1, "ok"), (1, 2, "ok")]
    assert lines[0]["reply"] == dressed and lines[0]["messages"][0]["role"] == "system"
    assert sum(r["prompt_tokens"] for r in lines) == outcome.report["prompt_tokens"] == 220
    requests = RunRecord(Path(options.workdir)).requests(outcome.run_id)
    assert list(requests.completion_tokens) == [30, 40]
    # the report knows where its tokens come from and what each proposal's prompt held (#real-LLM 4, 11)
    assert [r["prompt_detail"] for r in lines] == [0, 0] and outcome.report["tokens_source"].startswith("the server")
    assert [(p["detail"], p["requests"]) for p in outcome.report["prompt_detail"]] == [([0], 2)]
    assert "## Prompt detail" in (outcome.run_dir / "report.md").read_text()


def test_a_model_that_never_gives_a_candidate_ends_the_run_non_zero(tmp_path, gemm_path):
    """#14: every proposal NO_CANDIDATE (a garbage model) is not 'finished'."""
    with FakeOpenAIServer() as server:
        for _ in range(6):
            server.reply("I like turtles.", prompt_tokens=10, completion_tokens=3)
        outcome = run.start(_options(tmp_path, gemm_path, iterations=2, model="tiny", base_url=server.base_url))
    assert outcome.status == run.NO_CANDIDATE
    assert [a["verdict"] for a in outcome.report["attempts"]] == ["NO_CANDIDATE"] * 2
    assert all("no ```python code block" in a["reason"] for a in outcome.report["attempts"])


def test_a_malformed_tool_call_is_re_asked_and_its_reason_is_in_the_record_and_transcript(tmp_path, gemm_path):
    """#41: the model calls simulate with arguments that are not JSON, is answered with why, and then
    proposes; the record's requests and transcript.jsonl keep the reason with the call."""
    good = "```python\n" + catalog_source("xcd-grouped-m:8:8", ARGS) + "```\n"
    with FakeOpenAIServer() as server:
        server.reply(None, tool_calls=[{"name": "simulate", "arguments": "{source: @triton.jit\n"}],
                     prompt_tokens=100, completion_tokens=10)
        server.reply(good, prompt_tokens=120, completion_tokens=40)
        options = _options(tmp_path, gemm_path, iterations=1, model="fake", base_url=server.base_url)
        outcome = run.start(options)
        told = server.requests[1]["messages"][-1]
    assert [a["verdict"] for a in outcome.report["attempts"]] == ["PASS"]
    reason = ("the arguments of simulate is not JSON: Expecting property name enclosed in double quotes "
              "(line 1, column 2); received: '{source: @triton.jit\\n'")
    assert told["role"] == "tool" and json.loads(told["content"]) == {"error": reason}
    lines = [json.loads(line) for line in (outcome.run_dir / "transcript.jsonl").read_text().splitlines()]
    assert [r["tool_calls"][0].get("rejected") for r in lines[:1]] == [reason]
    assert lines[0]["rejected"] == f"1 of 1 tool call(s) refused: call_0: {reason}" and lines[1]["rejected"] == ""
    requests = RunRecord(Path(options.workdir)).requests(outcome.run_id)
    assert json.loads(requests.tool_calls_json.iloc[0])[0]["rejected"] == reason
