"""Hostile model replies and hostile servers through the loopback OpenAI server.

#12: code that would run when the `def` executes is refused statically, never spliced, never run,
never written into the user's file.

#21: every value a server or a reply sends is checked by type and size before use. JSON nested
100 000 deep (a body, a streamed event, tool-call arguments, /props, /v1/models, /tokenize), token
counts of 10^23 or text, a finish reason that is an object, a target of a 2 500-term sum, a
3 600-digit literal or a deep decorator, a distributed reply with deep JSON, a 5 000-digit integer,
a number for a swizzle or a list for a pattern: each ends as a recorded NO_CANDIDATE / INVALID /
OUTSIDE_SPACE quoting the first 200 characters received, never a crash; a 1 MB reply parses in
well under a second.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from fake_openai import FakeOpenAIServer
from test_llm_proposer import GOOD_REPLY, GROUPED, _context

from swizzleperf.agent.loop import run
from swizzleperf.agent.proposers.base import ProposerError
from swizzleperf.agent.proposers.llm import LLMProposer, ReplyParseError, parse_reply
from swizzleperf.agent.proposers.overlap_reply import parse_overlap_reply
from swizzleperf.agent.verification.swizzles import catalog_source

ARGS = ["pid", "num_pid_m", "num_pid_n"]
DEEP = "[" * 100_000 + "]" * 100_000
DEEP_OBJECT = '{"source": ' + DEEP + "}"


def _hostile(marker: Path) -> list:
    grouped = catalog_source("grouped-m:8", ARGS)
    payload = f"__import__('builtins').exec(\"open({str(marker)!r}, 'w')\")"
    return [
        grouped.replace("num_pid_n):", f"num_pid_n={payload}):", 1),            # default argument
        grouped.replace("num_pid_n):", f"num_pid_n) -> {payload}:", 1),         # return annotation
        grouped.replace("@triton.jit\n", f"@triton.jit\n@{payload}\n", 1),      # extra decorator
        grouped + f"\n{payload}\n",                                            # module level
    ]


@pytest.mark.parametrize("index", range(4))
def test_hostile_replies_are_invalid_and_never_run(tmp_path, gemm_path, index):
    marker = tmp_path / "payload-ran"
    kernel = tmp_path / "gemm.py"
    kernel.write_text(gemm_path.read_text())
    reply = "Grouped order.\n```python\n" + _hostile(marker)[index] + "```\n"
    with FakeOpenAIServer() as server:
        for _ in range(3):
            server.reply(reply, prompt_tokens=10, completion_tokens=10)
        options = run.RunOptions(kernel=str(kernel), hw="mi300x", workdir=str(tmp_path / ".sp"),
                                 iterations=1, model="fake", base_url=server.base_url, in_place=True)
        outcome = run.start(options)
    verdicts = [a["verdict"] for a in outcome.report["attempts"]]
    assert verdicts in (["INVALID"], ["NO_CANDIDATE"]), verdicts  # refused: statically or as a reply
    assert not marker.exists(), "model-written code ran"
    assert kernel.read_text() == gemm_path.read_text()  # --in-place wrote nothing: no candidate won


# ---- hostile servers: every field we read is checked ----------------------------------------------

def _chunk(delta: dict | None = None, finish=None, **extra) -> str:
    return json.dumps({"id": "c", "object": "chat.completion.chunk", "model": "m",
                       "choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish}], **extra})


def _usage_chunk(prompt, completion=1) -> str:
    return json.dumps({"id": "c", "choices": [], "usage": {"prompt_tokens": prompt, "completion_tokens": completion}})


def _body(**message) -> bytes:
    usage = message.pop("usage", {"prompt_tokens": 5, "completion_tokens": 5})
    finish = message.pop("finish_reason", "stop")
    return json.dumps({"id": "c", "object": "chat.completion", "usage": usage,
                       "choices": [{"index": 0, "finish_reason": finish,
                                    "message": {"role": "assistant", **message}}]}).encode()


HOSTILE_STREAMS = {
    "an event nested 100 000 deep": ([DEEP], "nests 100000 levels deep"),
    "usage of 10^23 tokens": ([_chunk({"content": "hi"}), _usage_chunk(10**23)], "an integer of 24 digits"),
    "usage as text": ([_chunk({"content": "hi"}), _usage_chunk("12")], "usage.prompt_tokens: Input should be a valid integer"),
    "usage over 10^9": ([_chunk({"content": "hi"}), _usage_chunk(10**12)], "less than or equal to 1000000000"),
    "a finish reason that is an object": ([_chunk({"content": "hi"}, {"why": "stop"})], "finish_reason: Input should be a valid string"),
    "content that is a list": ([_chunk({"content": ["a", "b"]})], "content: Input should be a valid string"),
    "an error event": ([json.dumps({"error": {"message": "out of memory"}})], "an error instead of a reply: out of memory"),
    "a tool call index of 10^6": ([_chunk({"tool_calls": [{"index": 10**6, "function": {"name": "simulate"}}]})], "index"),
}


@pytest.mark.parametrize("name", list(HOSTILE_STREAMS))
def test_a_hostile_stream_is_no_candidate_quoting_what_was_received(name):
    events, expected = HOSTILE_STREAMS[name]
    with FakeOpenAIServer() as server:
        server.reply("", events=events)
        proposer = LLMProposer("fake", base_url=server.base_url, retries=0, max_parse_retries=0)
        with pytest.raises(ProposerError) as info:
            proposer.propose(_context())
    message = str(info.value)
    assert "not a chat completion" in message and expected in message, message
    assert "received: '" in message and "\n" not in message and len(message) < 1200
    assert info.value.exchanges[-1]["reply"], "what was received is kept for the transcript"


HOSTILE_BODIES = {
    "a body nested 100 000 deep": (DEEP.encode(), "nests 100000 levels deep"),
    "usage of 10^23 tokens": (_body(content=GOOD_REPLY, usage={"prompt_tokens": 10**23}), "an integer of 24 digits"),
    "usage as text": (_body(content=GOOD_REPLY, usage={"prompt_tokens": "many"}), "Input should be a valid integer"),
    "a finish reason that is an object": (_body(content=GOOD_REPLY, finish_reason={"a": 1}), "finish_reason"),
    "tool calls that are text": (_body(content="", tool_calls="simulate"), "tool_calls"),
    "no choices": (b'{"choices": []}', "has no choices"),
}


@pytest.mark.parametrize("name", list(HOSTILE_BODIES))
def test_a_hostile_body_is_no_candidate_quoting_what_was_received(name):
    body, expected = HOSTILE_BODIES[name]
    with FakeOpenAIServer() as server:
        server.reply_raw(body)
        proposer = LLMProposer("fake", base_url=server.base_url, retries=0, max_parse_retries=0)
        with pytest.raises(ProposerError) as info:
            proposer.propose(_context())
    message = str(info.value)
    assert "not a chat completion" in message and expected in message and "received: " in message, message
    assert len(message) < 1200


def test_a_server_message_with_a_lone_surrogate_is_stored_and_printed_as_text():
    with FakeOpenAIServer() as server:
        server.reply(None, status=400, error_message="bad \ud800 request")
        with pytest.raises(ProposerError) as info:
            LLMProposer("fake", base_url=server.base_url, retries=0).propose(_context())
    assert "HTTP 400: bad ? request" in str(info.value)
    str(info.value).encode("utf-8")  # SQLite, files and the terminal take it
    assert info.value.exchanges[-1]["outcome"] == "HTTP 400: bad ? request"


@pytest.mark.parametrize("route, body", [
    ("/props", DEEP.encode()),
    ("/props", b'{"default_generation_settings": {"n_ctx": 100000000000000000000000}}'),
    ("/props", b'{"n_ctx": "4096"}'),
    ("/props", b'{"n_ctx": [4096]}'),
    ("/v1/models", DEEP.encode()),
    ("/v1/models", b'{"data": [{"id": "fake", "max_model_len": 1e30}]}'),
    ("/v1/models", b'{"data": "all of them"}'),
])
def test_a_hostile_side_answer_is_ignored_and_the_window_stays_unknown(route, body):
    with FakeOpenAIServer() as server:
        server.raw_routes[route] = body
        server.reply(GOOD_REPLY, prompt_tokens=900, completion_tokens=100)
        proposer = LLMProposer("fake", base_url=server.base_url)
        assert proposer.propose(_context()).source == GROUPED
        assert proposer.chat.window() is None and "unknown" in proposer.chat.window_source


@pytest.mark.parametrize("body", [DEEP.encode(), b'{"tokens": "abc"}', b'{"count": 1e400}', b'{"count": -3}'])
def test_a_hostile_tokenizer_answer_falls_back_to_characters(body):
    with FakeOpenAIServer() as server:
        server.raw_routes["/tokenize"] = body
        server.reply(GOOD_REPLY, usage=False)
        proposal = LLMProposer("fake", base_url=server.base_url).propose(_context())
    assert proposal.source == GROUPED
    assert proposal.exchanges[-1]["tokens_source"].startswith("estimated: ") and "characters per token" in \
        proposal.exchanges[-1]["tokens_source"]


def test_tool_call_arguments_nested_100000_deep_are_answered_with_the_reason():
    context, seen = _context(), []
    context.simulate = lambda source: seen.append(source) or {"predicted_l2_hit_rate": 0.5}
    with FakeOpenAIServer() as server:
        server.reply(None, tool_calls=[{"name": "simulate", "arguments": DEEP_OBJECT}])
        server.reply(GOOD_REPLY)
        proposal = LLMProposer("fake", base_url=server.base_url).propose(context)
        tool_answer = server.requests[1]["messages"][-1]
    assert proposal.source == GROUPED and seen == []
    assert tool_answer["role"] == "tool" and "nests 100001 levels deep" in tool_answer["content"]


_NAMELESS = "a tool call with no tool name: the tools are simulate and analyze"
NAMELESS_CALLS = {
    "a streamed call whose name is empty":
        lambda server: server.reply(None, tool_calls=[{"name": "", "arguments": "{}"}]),
    "a streamed call of argument deltas only": lambda server: server.reply("", events=[
        _chunk({"tool_calls": [{"index": 0, "id": "call_7", "function": {"arguments": '{"source": '}}]}),
        _chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"x"}'}}]}),
        _chunk({}, "tool_calls")]),
    "a whole answer's call with no function name": lambda server: server.reply_raw(
        _body(content="", tool_calls=[{"id": "call_7", "type": "function", "function": {"arguments": "{}"}}],
              finish_reason="tool_calls")),
}


@pytest.mark.parametrize("name", list(NAMELESS_CALLS))
def test_a_tool_call_with_no_name_is_answered_with_the_reason_not_dropped(name):
    """#41: a call with no function name was dropped, so the model was told "the reply is empty";
    it is kept (an empty name), refused with a reason it can act on, and recorded as rejected."""
    context, seen = _context(), []
    context.simulate = lambda source: seen.append(source) or {"predicted_l2_hit_rate": 0.5}
    with FakeOpenAIServer() as server:
        NAMELESS_CALLS[name](server)
        server.reply(GOOD_REPLY)
        proposal = LLMProposer("fake", base_url=server.base_url).propose(context)
        told = server.requests[1]["messages"]
    assert proposal.source == GROUPED and seen == []
    call = proposal.exchanges[0]["tool_calls"][0]
    assert call["name"] == "" and call["rejected"] == _NAMELESS, call
    assert proposal.exchanges[0]["rejected"] == f"1 of 1 tool call(s) refused: {call['id']}: {_NAMELESS}"
    assert told[-2]["tool_calls"][0]["function"]["name"] == ""
    assert told[-1]["role"] == "tool" and json.loads(told[-1]["content"]) == {"error": _NAMELESS}
    assert not any("empty" in (m.get("content") or "") for m in told if m["role"] == "user")


# ---- hostile rewrite targets: refused before anything recurses -----------------------------------

def _reply(body: str, decorator: str = "@triton.jit") -> str:
    return f"Here.\n```python\n{decorator}\ndef swizzle(pid, num_pid_m, num_pid_n):\n{body}```\n"


HOSTILE_TARGETS = {
    "a 2 500-term sum": (_reply("    return " + " + ".join(["pid"] * 2500) + ", 0\n"), "more than 64 levels deep"),
    "a 3 600-digit literal": (_reply("    return pid % " + "7" * 3600 + ", 0\n"), "integer literal of"),
    "a deep decorator": (_reply("    return pid, 0\n", "@triton.jit\n@" + ".".join(["a"] * 5000)), "nest"),
    "a deep call decorator": (_reply("    return pid, 0\n", "@triton.jit\n@" + "f(" * 150 + ")" * 150),
                              "more than 64 levels deep"),
    "a 25 000-character body": (_reply("    x = pid\n" * 2200 + "    return pid, 0\n"), "more than the 20000"),
}


@pytest.mark.parametrize("name", list(HOSTILE_TARGETS))
def test_a_hostile_target_is_a_parse_error(name):
    reply, expected = HOSTILE_TARGETS[name]
    with pytest.raises(ReplyParseError, match=expected):
        parse_reply(reply, "swizzle", ARGS)


def test_a_hostile_target_three_times_is_no_candidate_with_the_reason_and_the_reply():
    reply, _ = HOSTILE_TARGETS["a 2 500-term sum"]
    with FakeOpenAIServer() as server:
        for _ in range(3):
            server.reply(reply, prompt_tokens=10, completion_tokens=10)
        with pytest.raises(ProposerError) as info:
            LLMProposer("fake", base_url=server.base_url).propose(_context())
    message = str(info.value)
    assert "no usable reply after 3 attempts" in message and "more than 64 levels deep" in message
    assert "the last reply began: 'Here.\\n```python" in message and len(message) < 1200
    assert info.value.prompt_tokens == 30  # what the failed proposal spent is kept


# ---- linear parsing: the 1 MB replies of #21 ------------------------------------------------------

MEGABYTE = 1_000_000
HUGE_REPLIES = {
    "unclosed fences": ("```python\n" * (MEGABYTE // 10)),
    "alternating fences": ("```\n" * (MEGABYTE // 4)),
    "one line of backticks": "`" * MEGABYTE,
    "unclosed braces": "{" * MEGABYTE,
    "a json fence of brackets": "```json\n" + "[" * (MEGABYTE - 20) + "\n```\n",
    "def without a name": ("def" + " " * 997) * (MEGABYTE // 1000),
    "a fence then a million newlines": "```python\n@triton.jit\ndef swizzle(" + "\n" * (MEGABYTE - 40),
}


@pytest.mark.parametrize("name", list(HUGE_REPLIES))
def test_a_1_mb_hostile_reply_parses_in_well_under_a_second(name):
    reply = HUGE_REPLIES[name]
    for parse in (lambda: parse_reply(reply, "swizzle", ARGS), lambda: parse_overlap_reply(reply, "swizzle", ARGS)):
        start = time.process_time()
        with pytest.raises(ReplyParseError):
            parse()
        assert time.process_time() - start < 0.8, f"{name}: {time.process_time() - start:.2f} s"


def test_a_1_mb_reply_of_unclosed_fences_ends_within_the_deadline():
    """The 240 KB reply that kept the agent 335 s past a 45 s deadline, at four times the size."""
    with FakeOpenAIServer() as server:
        for _ in range(3):
            server.reply(HUGE_REPLIES["unclosed fences"], chunk_chars=65536)
        proposer = LLMProposer("fake", base_url=server.base_url, deadline_s=10.0)
        start = time.monotonic()
        with pytest.raises(ProposerError, match="code fences, more than 200"):
            proposer.propose(_context())
        resent = [m["content"] for m in server.requests[-1]["messages"] if m["role"] == "assistant"]
    assert time.monotonic() - start < 10.0
    assert resent and max(len(m) for m in resent) <= 8003  # the re-ask shows the reply's end, not 1 MB


# ---- hostile distributed replies --------------------------------------------------------------------

@pytest.mark.parametrize("config, expected", [
    (DEEP, "characters, more than the 60000 allowed"),
    ("[" * 25_000 + "]" * 25_000, "nests 25000 levels deep"),
    ('{"pattern": "push", "COMM_SMS": ' + "9" * 5000 + "}", "an integer of 5000 digits"),
    ('{"pattern": "push", "swizzle": 5}', "'swizzle' must be"),
    ('{"pattern": ["push"]}', "'pattern' must be the name of a pattern"),
    ('{"pattern": {"name": "push"}}', "'pattern' must be"),
    ('{"COMM_SMS": 8}', 'no "pattern"'),
])
def test_a_distributed_reply_of_the_wrong_shape_is_a_parse_error(config, expected):
    reply = f"Overlap more.\n```json\n{config}\n```\n"
    with pytest.raises(ReplyParseError) as info:
        parse_overlap_reply(reply, "swizzle", ARGS)
    assert expected in str(info.value) and len(str(info.value)) < 700


def test_knobs_of_the_wrong_type_reach_the_evaluator_and_are_outside_the_space(tmp_path):
    """``"COMM_SMS": 32.0`` and ``"CE_GROUPS": true`` passed and one was chosen best before #21."""
    from swizzleperf.agent.distributed.evaluator import DistEvaluator, resolve_target
    from swizzleperf.agent.verification.load import load_spec
    path = Path(__file__).resolve().parents[3] / "kernels" / "distributed" / "all_gather_gemm.py"
    spec = load_spec(path)
    evaluator = DistEvaluator(kernel_path=path, module_source=path.read_text(), spec=spec,
                              problem_name=spec.bench_problems[0], world_size=4,
                              target=resolve_target("h200", 4), candidates_dir=tmp_path, timeout_s=60)
    for config, knob in (('{"pattern": "push", "COMM_SMS": 32.0}', "COMM_SMS"),
                         ('{"pattern": "push_copy_engine", "CE_GROUPS": true}', "CE_GROUPS")):
        text, _ = parse_overlap_reply(f"```json\n{config}\n```", "swizzle", ARGS)  # the shape is fine
        prepared = evaluator.prepare("hostile", text)
        assert prepared["verdict"] == "OUTSIDE_SPACE" and f"{knob} must be one of" in prepared["reason"]
        assert not prepared["kernel_file"] and not list(tmp_path.iterdir())
