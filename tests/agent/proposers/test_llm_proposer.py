"""The LLM proposer against a real OpenAI-compatible HTTP server on loopback, and its reply parser."""
from __future__ import annotations

import json
import socket
import time

import pytest
from fake_openai import FakeOpenAIServer

from swizzleperf.agent.proposers.base import ProposalContext, ProposerError
from swizzleperf.agent.proposers.llm import LLMProposer, ReplyParseError, parse_reply
from swizzleperf.hwspecs import HardwareSpec

TARGET = """\
@triton.jit
def swizzle(pid, num_pid_m, num_pid_n):
    pid_m = pid // num_pid_n
    pid_n = pid % num_pid_n
    return pid_m, pid_n
"""

ARGS = ["pid", "num_pid_m", "num_pid_n"]

GROUPED = """\
@triton.jit
def swizzle(pid, num_pid_m, num_pid_n):
    GROUP_SIZE_M: tl.constexpr = 8
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_SIZE_M
    group_size_m = tl.minimum(num_pid_m - first_pid_m, GROUP_SIZE_M)
    pid_m = first_pid_m + pid % num_pid_in_group % group_size_m
    pid_n = pid % num_pid_in_group // group_size_m
    return (pid_m, pid_n)
"""

RATIONALE = "Group 8 rows of tiles so that consecutive programs share B columns: L2 hit rate 0.55 -> 0.8."
GOOD_REPLY = f"{RATIONALE}\n\n```python\n{GROUPED}```\n"
REJECTION = "swizzle is not a permutation: tiles (3,1),(3,2) missing, (0,0) computed twice (grid 7x9)"


@pytest.fixture
def context() -> ProposalContext:
    return _context()


def _context() -> ProposalContext:
    h100 = HardwareSpec(
        name="h100", display_name="NVIDIA H100 SXM5 80GB", vendor="nvidia", arch="sm_90",
        compute_units=132, l2_domains=1, l2_partitions=2, l2_bytes_per_domain=50 * 2**20,
        l2_line_bytes=128, l2_sector_bytes=32, l2_associativity=None, llc_bytes=0,
        dram_bytes_per_s=3.35e12, peak_bf16_flops=989e12, shared_memory_per_cu_bytes=228 * 1024, l1_bytes_per_cu=256 * 1024,
        dispatch="in_order", domain_miss_path="memory", match_names=("h100",))
    rejected = {"iteration": 1, "name": "llm", "source": TARGET.replace("//", "%"),
                "verdict": "NOT_PERMUTATION", "reason": REJECTION, "metrics": None,
                "lesson": "pid % num_pid_n twice maps many programs to one tile."}
    return ProposalContext(
        kernel_name="gemm", kernel_source="# the module\n" + TARGET, target_name="swizzle",
        target_source=TARGET, hardware=h100, mode="measured",
        problem={"M": 8192, "N": 8192, "K": 4096}, meta={"BLOCK_M": 128, "BLOCK_N": 256},
        tile_grid=(64, 32), swizzle_args=(64, 32),
        analysis="Each A row-panel is read by 32 programs; each B column-panel by 64.",
        profile={"l2_hit_rate": 0.55, "l2_hit_rate_source": "measured:ncu",
                 "time_ms": 0.612, "time_ms_source": "measured:events"},
        history=[rejected], best=None, iteration=2)


@pytest.fixture
def server():
    with FakeOpenAIServer() as running:
        yield running


def proposer_for(server: FakeOpenAIServer, **options) -> LLMProposer:
    return LLMProposer(model="fake-coder", base_url=server.base_url, api_key="test-key", **options)


def closed_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# ---- the proposer over HTTP ------------------------------------------------------------------

def test_well_formed_reply_gives_the_function_rationale_tokens_and_cost(server, context):
    server.reply(GOOD_REPLY, prompt_tokens=1200, completion_tokens=300)
    proposer = proposer_for(server, price_in_per_mtok=3.0, price_out_per_mtok=15.0)

    proposal = proposer.propose(context)

    assert proposal.source == GROUPED
    assert proposal.rationale == RATIONALE
    assert proposal.name == "llm"
    assert (proposal.prompt_tokens, proposal.completion_tokens) == (1200, 300)
    assert proposal.cost_usd == pytest.approx(1200 * 3.0 / 1e6 + 300 * 15.0 / 1e6)
    request = server.requests[0]
    assert request["model"] == "fake-coder"
    assert request["temperature"] == 0.2
    assert [m["role"] for m in request["messages"]] == ["system", "user"]


def test_rendered_prompt_holds_hardware_rejection_reason_and_target(server, context):
    server.reply(GOOD_REPLY)
    proposer_for(server).propose(context)

    system, user = (m["content"] for m in server.requests[0]["messages"])
    assert "def swizzle(pid, num_pid_m, num_pid_n)" in system
    assert "NVIDIA H100 SXM5 80GB" in user
    assert REJECTION in user
    assert TARGET.strip() in user
    assert "program-id order" in user  # the in_order dispatch, explained
    assert "measured:ncu" in user and context.analysis in user


def test_malformed_then_well_formed_reply_succeeds_and_shows_the_error(server, context):
    server.reply("I would group the rows by 8.", prompt_tokens=1000, completion_tokens=10)
    server.reply(GOOD_REPLY, prompt_tokens=1100, completion_tokens=200)

    proposal = proposer_for(server).propose(context)

    assert proposal.source == GROUPED
    assert (proposal.prompt_tokens, proposal.completion_tokens) == (2100, 210)
    second = server.requests[1]["messages"]
    assert [m["role"] for m in second] == ["system", "user", "assistant", "user"]
    assert second[2]["content"] == "I would group the rows by 8."
    assert "no ```python code block in the reply" in second[3]["content"]


def test_empty_content_is_retried_like_a_parse_error(server, context):
    server.reply(None)
    server.reply(GOOD_REPLY)
    assert proposer_for(server).propose(context).source == GROUPED
    assert "the reply is empty" in server.requests[1]["messages"][-1]["content"]


def test_three_malformed_replies_raise(server, context):
    for _ in range(3):
        server.reply("```python\ndef swizzle(pid):\n    return pid\n```")
    with pytest.raises(ProposerError, match="no usable reply after 3 attempts") as info:
        proposer_for(server).propose(context)
    assert "found `swizzle(pid)`" in str(info.value)
    assert len(server.requests) == 3
    assert len(info.value.exchanges) == 3  # the transcript survives the failure


def test_slow_reply_misses_the_proposal_deadline_in_bounded_time(server, context):
    server.reply(GOOD_REPLY, delay_s=3.0)
    proposer = proposer_for(server, deadline_s=1, retries=0)
    start = time.monotonic()
    with pytest.raises(ProposerError, match="no usable reply within the 1 s deadline of a proposal"):
        proposer.propose(context)
    assert time.monotonic() - start < 2.5


def test_a_stream_still_open_at_the_deadline_is_closed_and_its_tokens_counted(server, context):
    """The server stops generating when the client closes the stream (llama.cpp, vLLM); the
    request's tokens are still counted, estimated and labelled so."""
    server.tokenizer = True
    server.reply(GOOD_REPLY * 20, prompt_tokens=900, completion_tokens=2000, chunk_delay_s=0.05)
    proposer = proposer_for(server, deadline_s=1.5, retries=0)
    start = time.monotonic()
    with pytest.raises(ProposerError, match="deadline") as info:
        proposer.propose(context)
    assert time.monotonic() - start < 3.0
    deadline = time.monotonic() + 3
    while server.cancelled == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.cancelled == 1
    [exchange] = info.value.exchanges
    assert exchange["outcome"].startswith("deadline: cancelled") and exchange["reply"]
    assert exchange["tokens_source"].startswith("estimated: the server's tokenizer")
    assert exchange["prompt_tokens"] > 0 and exchange["completion_tokens"] > 0
    assert info.value.prompt_tokens == exchange["prompt_tokens"]


def test_closed_port_is_unreachable(context):
    proposer = LLMProposer(model="fake-coder", base_url=f"http://127.0.0.1:{closed_port()}/v1",
                           api_key="x", deadline_s=5, retries=0)
    with pytest.raises(ProposerError, match="unreachable") as info:
        proposer.propose(context)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("status, expected", [
    (500, "returned HTTP 500: fake error 500"),
    (401, "rejected the API key"),
    (404, "model 'fake-coder' not found at http://127.0.0.1"),
])
def test_http_errors_become_one_line_proposer_errors(server, context, status, expected):
    server.reply(None, status=status)
    with pytest.raises(ProposerError, match=expected):
        proposer_for(server, retries=0).propose(context)


def test_our_retry_policy_retries_a_transient_error_and_counts_every_request(server, context):
    server.reply(None, status=503)
    server.reply("I would group the rows by 8.", prompt_tokens=1000, completion_tokens=10)
    server.reply(GOOD_REPLY, prompt_tokens=1100, completion_tokens=200)
    proposal = proposer_for(server, retries=1).propose(context)
    assert proposal.source == GROUPED and len(server.requests) == 3
    assert [e["outcome"][:8] for e in proposal.exchanges] == ["HTTP 503", "ok", "ok"]
    assert (proposal.prompt_tokens, proposal.completion_tokens) == (2100, 210)
    assert all(e["tokens_source"] == "server" for e in proposal.exchanges[1:])


def test_requests_are_streamed_with_usage_asked_and_a_reply_budget(server, context):
    server.n_ctx = 4096
    server.reply(GOOD_REPLY, prompt_tokens=1200, completion_tokens=300)
    proposal = proposer_for(server).propose(context)
    request = server.requests[0]
    assert request["stream"] is True and request["stream_options"] == {"include_usage": True}
    assert request["max_tokens"] == 1024  # a quarter of the 4096-token window the server gave
    [exchange] = proposal.exchanges
    assert exchange["finish_reason"] == "stop" and exchange["reply"] == GOOD_REPLY
    assert exchange["messages"] == request["messages"] and exchange["seconds"] >= 0


def test_without_usage_or_tokenizer_tokens_are_estimated_and_labelled(server, context):
    server.reply(GOOD_REPLY, usage=False)
    proposal = proposer_for(server).propose(context)
    assert proposal.prompt_tokens > 0 and proposal.completion_tokens > 0
    assert proposal.exchanges[0]["tokens_source"].startswith("estimated: 3.00 characters per token")


def test_a_small_window_gets_a_shorter_prompt(server, context):
    long_analysis = "Each A row-panel is read by 32 programs. " * 150  # about 2000 tokens
    context.analysis = long_analysis
    server.n_ctx = 2048
    server.reply(GOOD_REPLY)
    proposer_for(server).propose(context)
    user = server.requests[0]["messages"][1]["content"]
    assert long_analysis.strip() not in user
    assert server.requests[0]["max_tokens"] == 512


def test_a_window_too_small_for_any_prompt_is_said_before_asking(server, context):
    context.kernel_source = context.target_source = TARGET
    context.analysis = "x " * 100
    proposer = proposer_for(server, context_tokens=512, max_reply_tokens=500)
    with pytest.raises(ProposerError, match="leaves no room for a 384-token reply in the model.s 512-token window"):
        proposer.propose(context)
    assert server.requests == []


def test_an_overlong_prompt_refused_by_the_server_is_shortened_and_asked_again(server, context):
    context.analysis = "Each A row-panel is read by 32 programs. " * 150
    server.reply(None, status=400, error_message="Requested tokens (3100) exceed context window of 2048")
    server.reply(GOOD_REPLY)
    proposer = proposer_for(server)
    assert proposer.propose(context).source == GROUPED
    assert proposer.chat.window() == 2048 and proposer.chat.window_source == "the server's HTTP 400"
    assert len(server.requests[1]["messages"][1]["content"]) < len(server.requests[0]["messages"][1]["content"])


def test_an_empty_stream_is_diagnosed_and_an_overlong_prompt_shortened(server, context):
    """llama-cpp-python answers an overlong streamed prompt with 200 and an empty stream: the
    client asks again for one token, not streamed, and learns the window from the HTTP 400."""
    context.analysis = "Each A row-panel is read by 32 programs. " * 150
    server.reply(None, empty_stream=True)
    server.reply(None, status=400, error_message="This model's maximum context length is 2048 tokens. "
                                                 "However, you requested 3030 tokens")
    server.reply(GOOD_REPLY)
    proposal = proposer_for(server).propose(context)
    assert proposal.source == GROUPED
    assert server.requests[1]["max_tokens"] == 1 and not server.requests[1].get("stream")
    assert server.requests[2]["max_tokens"] == 512
    assert "read by 32 programs. " * 150 not in server.requests[2]["messages"][1]["content"]


def test_a_reply_cut_at_the_length_limit_is_answered_as_such(server, context):
    server.reply("Rationale first, at length...\n```python\n@triton.jit\ndef swizzle(pid,",
                 finish_reason="length")
    server.reply(GOOD_REPLY)
    proposal = proposer_for(server).propose(context)
    assert proposal.source == GROUPED
    fix = server.requests[1]["messages"][-1]["content"]
    assert "the reply was cut at the" in fix and "token limit" in fix


def test_a_repeat_found_by_the_precheck_costs_a_reask_not_an_iteration(server, context):
    reasons = iter(["this maps every program to the same tile as the baseline", None])
    context.precheck = lambda source: next(reasons)
    server.reply(GOOD_REPLY)
    server.reply(GOOD_REPLY)
    assert proposer_for(server).propose(context).source == GROUPED
    assert "same tile as the baseline" in server.requests[1]["messages"][-1]["content"]
    assert server.requests[1]["temperature"] == pytest.approx(0.5)  # a re-ask samples hotter


def test_the_model_may_simulate_a_candidate_before_proposing(server, context):
    seen = []
    context.simulate = lambda source: seen.append(source) or {"predicted_l2_hit_rate": 0.81}
    server.reply(None, tool_calls=[{"name": "simulate", "arguments": json.dumps({"source": GROUPED})}])
    server.reply(GOOD_REPLY)
    proposal = proposer_for(server).propose(context)
    assert proposal.source == GROUPED and seen == [GROUPED]
    assert server.requests[0]["tools"][0]["function"]["name"] == "simulate"
    messages = server.requests[1]["messages"]
    assert messages[-2]["tool_calls"][0]["function"]["name"] == "simulate"
    assert messages[-1]["role"] == "tool" and "0.81" in messages[-1]["content"]
    assert proposal.exchanges[0]["tool_calls"][0]["name"] == "simulate"


def test_a_tool_call_written_as_text_turns_the_tools_off(server, context):
    server.reply('<tool_call>{"name": "simulate", "arguments": {"source": "..."}}</tool_call>')
    server.reply(GOOD_REPLY)
    proposer = proposer_for(server)
    assert proposer.propose(context).source == GROUPED
    assert "tools" not in server.requests[1] and proposer.max_tool_calls == 0


def test_describe_names_model_and_endpoint(server):
    assert proposer_for(server).describe() == f"llm:fake-coder at {server.base_url}"


# ---- parse_reply -----------------------------------------------------------------------------

def block(code: str, language: str = "python") -> str:
    return f"```{language}\n{code}```"


def test_parse_takes_the_last_block_that_defines_the_target():
    reply = (f"First try:\n{block(TARGET)}\nBetter:\n{block(GROUPED)}\n"
             f"Check:\n{block('print(swizzle(3, 4, 5))' + chr(10))}")
    source, rationale = parse_reply(reply, "swizzle", ARGS)
    assert source == GROUPED
    assert rationale.startswith("First try:") and "print(swizzle" in rationale
    assert "GROUP_SIZE_M" not in rationale


def test_parse_accepts_a_bare_fence_an_indented_block_and_triton_imports():
    indented = "\n".join("    " + line for line in GROUPED.splitlines()) + "\n"
    source, rationale = parse_reply(block(indented, language=""), "swizzle", ARGS)
    assert source == GROUPED and rationale == ""
    with_imports = "import triton\nimport triton.language as tl\n\n" + GROUPED
    assert parse_reply(block(with_imports), "swizzle", ARGS)[0] == GROUPED


@pytest.mark.parametrize("reply, message", [
    ("Use a grouped order.", "no ```python code block in the reply"),
    ("```python\n" + TARGET, "no ```python code block in the reply (a fence is not closed"),
    ("", "the reply is empty"),
    (block("@triton.jit\ndef swizzle(pid, num_pid_m, num_pid_n):\n    pid_m = = pid\n"),
     "the code block does not parse: invalid syntax (line 3)"),
    (block("@triton.jit\ndef swizzle(pid, num_pid_m, num_pid_n)\n    return 0\n"),
     "the code block does not parse: expected ':' (line 2)"),
    (block("@triton.jit\ndef swizzle(pid, m):\n    return pid, m\n"),
     "expected one function `swizzle(pid, num_pid_m, num_pid_n)`, found `swizzle(pid, m)`"),
    (block("@triton.jit\ndef remap(pid, m):\n    return pid, m\n"),
     "expected one function `swizzle(pid, num_pid_m, num_pid_n)`, found `remap(pid, m)`"),
    (block("x = 1\n"), "found no function definition"),
    (block("@triton.jit\ndef helper(x):\n    return x\n\n" + GROUPED),
     "the code block also defines `helper`: only `swizzle` may be written"),
    (block("GROUP = 8\n\n" + GROUPED), "the code block also contains `GROUP = 8` (line 1)"),
    (block(GROUPED + "\n" + GROUPED), "defines `swizzle` 2 times"),
    (block(GROUPED.replace("@triton.jit\n", "")), "`swizzle` lacks the @triton.jit decorator"),
    (block("@functools.cache\n" + GROUPED), "may carry only the @triton.jit decorator"),
])
def test_parse_errors_say_what_is_wrong(reply, message):
    with pytest.raises(ReplyParseError) as info:
        parse_reply(reply, "swizzle", ARGS)
    assert message in str(info.value)


def test_parse_error_for_other_parameters_is_exact():
    with pytest.raises(ReplyParseError, match=r"^expected one function `swizzle\(pid, num_pid_m, "
                                              r"num_pid_n\)`, found `swizzle\(pid, m\)`$"):
        parse_reply(block("@triton.jit\ndef swizzle(pid, m):\n    return pid, m\n"), "swizzle", ARGS)


@pytest.mark.parametrize("body, seen", [
    (b"\xff\xfe\x00garbage \x80\x81", "\\xff"),                        # not UTF-8
    (b"<html>502 bad gateway</html>", "<html>502 bad gateway"),          # not JSON
    (b'{"result": "ok", "choices": 3}', '"choices": 3'),                 # JSON of another shape
    (b'{"choices": [{"message": {"content": 42}}]}', "content"),         # content not text
    (b"[]", "[]"),
])
def test_garbage_bodies_are_no_candidate_with_what_was_received(body, seen):
    """HTTP 200 with garbage (#12): a ProposerError quoting the body, not a crash, not 'empty'."""
    from fake_openai import FakeOpenAIServer
    from swizzleperf.agent.proposers.base import ProposerError
    from swizzleperf.agent.proposers.llm import LLMProposer
    with FakeOpenAIServer() as server:
        for _ in range(3):
            server.reply_raw(body)
        proposer = LLMProposer("fake", base_url=server.base_url, retries=0)
        with pytest.raises(ProposerError) as info:
            proposer.propose(_context())
    message = str(info.value)
    assert "not a chat completion" in message and seen in message and "empty" not in message


# ---- the target's form (#41): told in one line what is wrong ------------------------------------

@pytest.mark.parametrize("code, message", [
    (GROUPED.replace("def swizzle", "async def swizzle"),
     "the rewrite target must be a plain `def`, got `async def swizzle` (line 2)"),
    ("swizzle = triton.jit(lambda pid, num_pid_m, num_pid_n: (pid, 0))\n",
     "the rewrite target must be a `def` statement, `@triton.jit def swizzle(...)`, got an assignment of "
     "a lambda to `swizzle` (line 1)"),
    ("class swizzle:\n    pass\n",
     "the rewrite target must be a function, `@triton.jit def swizzle(...)`, got `class swizzle` (line 1)"),
])
def test_parse_names_another_form_of_the_target(code, message):
    """An `async def` was 'expected `swizzle(pid, ...)`, found `swizzle(pid, ...)`' (the same text),
    a class or a lambda 'found no function definition'."""
    with pytest.raises(ReplyParseError) as info:
        parse_reply(block(code), "swizzle", ARGS)
    assert str(info.value) == message


def test_an_async_def_reply_is_rejected_with_its_reason_recorded_and_told(server, context):
    server.reply(block(GROUPED.replace("def swizzle", "async def swizzle")))
    server.reply(GOOD_REPLY)
    proposal = proposer_for(server).propose(context)
    assert proposal.source == GROUPED
    reason = "the rewrite target must be a plain `def`, got `async def swizzle` (line 2)"
    assert proposal.exchanges[0]["rejected"] == reason
    assert reason in server.requests[1]["messages"][-1]["content"]


# ---- malformed tool calls (#41): re-asked with the reason, which the transcript keeps ------------

SECRET_KEY = "sk-test-0123456789abcdef"


@pytest.mark.parametrize("name, arguments, reason", [
    ("simulate", '{"source": "@triton.jit', "the arguments of simulate is not JSON: Unterminated string"),
    ("simulate", '["@triton.jit"]',
     'the arguments of simulate must be a JSON object {"source": "<the function>"}, got an array'),
    ("simulate", '{"code": "x"}',
     "simulate needs the argument \"source\" (the complete @triton.jit function as text), got only 'code'"),
    ("simulate", "{}", "simulate needs the argument \"source\" (the complete @triton.jit function as text), "
                       "got no arguments"),
    ("simulate", '{"source": 42}',
     "the argument \"source\" of simulate must be a string (the function's text), got a number"),
    ("analyze", "not json", "the arguments of analyze is not JSON: Expecting value"),
    ("run_shell", '{"cmd": "ls"}', "no tool 'run_shell': the tools are simulate and analyze"),
])
def test_a_malformed_tool_call_is_answered_and_recorded_with_the_reason(server, context, name, arguments, reason):
    seen = []
    context.simulate = lambda source: seen.append(source) or {"predicted_l2_hit_rate": 0.8}
    server.reply(None, tool_calls=[{"name": name, "arguments": arguments}])
    server.reply(GOOD_REPLY)
    proposal = proposer_for(server).propose(context)

    assert proposal.source == GROUPED and seen == []          # the run goes on; nothing was simulated
    call = proposal.exchanges[0]["tool_calls"][0]
    assert call["rejected"].startswith(reason), call["rejected"]
    assert "\n" not in call["rejected"] and len(call["rejected"]) <= 300
    assert proposal.exchanges[0]["rejected"] == f"1 of 1 tool call(s) refused: call_0: {call['rejected']}"
    answer = server.requests[1]["messages"][-1]                 # what the model is told
    assert answer["role"] == "tool" and json.loads(answer["content"]) == {"error": call["rejected"]}


def test_a_tool_calls_reason_is_one_bounded_line_with_secrets_masked(server, context):
    """What the model sent is quoted masked (the key it was given), escaped (a newline, a terminal
    escape, a NUL) and cut, in the record's line and in the answer the model gets."""
    hostile = "\x1b[2J\n" + SECRET_KEY + "\x00" + "x" * 5000
    server.reply(None, tool_calls=[{"name": "simulate", "arguments": '{"source": ' + hostile},
                                   {"name": "shell" + "\n" + SECRET_KEY, "arguments": "{}"}])
    server.reply(GOOD_REPLY)
    proposal = proposer_for_key(server).propose(context)
    exchange = proposal.exchanges[0]
    for line in [c["rejected"] for c in exchange["tool_calls"]] + [exchange["rejected"]]:
        assert SECRET_KEY not in line and SECRET_KEY[:10] not in line and "***" in line
        assert line.isprintable() and len(line) <= 1200
    assert all(len(c["rejected"]) <= 300 for c in exchange["tool_calls"])
    assert "\\x1b[2J\\n" in exchange["tool_calls"][0]["rejected"]
    assert exchange["tool_calls"][1]["rejected"].startswith("no tool 'shell\\n***'")
    told = [m["content"] for m in server.requests[1]["messages"] if m["role"] == "tool"]
    assert [json.loads(t)["error"] for t in told] == [c["rejected"] for c in exchange["tool_calls"]]


def proposer_for_key(server: FakeOpenAIServer) -> LLMProposer:
    return LLMProposer(model="fake-coder", base_url=server.base_url, api_key=SECRET_KEY)


def test_tool_calls_over_the_budget_are_not_run_and_say_so(server, context):
    seen = []
    context.simulate = lambda source: seen.append(source) or {"predicted_l2_hit_rate": 0.8}
    server.reply(None, tool_calls=[{"name": "simulate", "arguments": json.dumps({"source": GROUPED})}] * 5)
    server.reply(GOOD_REPLY)
    proposal = proposer_for(server, max_tool_calls=3).propose(context)
    assert proposal.source == GROUPED and len(seen) == 3
    calls = proposal.exchanges[0]["tool_calls"]
    assert ["rejected" in c for c in calls] == [False] * 3 + [True] * 2
    assert calls[4]["rejected"] == "not run: over the 3 tool calls a proposal may make (this reply made 5)"
    assert proposal.exchanges[0]["rejected"].startswith("2 of 5 tool call(s) refused: call_3: not run")
def test_a_reply_with_a_form_feed_in_a_comment_is_cut_where_python_cuts_it():
    """#41 round five: the reply's function was cut by str.splitlines, which also splits at \\x0c;
    AST line numbers do not: a form feed in a comment above the function moved the cut."""
    from swizzleperf.agent.proposers.llm import parse_reply
    reply = ("```python\n# note\x0c more\n@triton.jit\ndef swizzle(pid, num_pid_m, num_pid_n):\n"
             "    pid_m = pid // num_pid_n\n    pid_n = pid % num_pid_n\n    return pid_m, pid_n\n```\n")
    source, _ = parse_reply(reply, "swizzle", ["pid", "num_pid_m", "num_pid_n"])
    assert source.startswith("@triton.jit\ndef swizzle(") and source.rstrip().endswith("return pid_m, pid_n")


def test_a_closed_code_block_before_the_deadline_is_read_though_the_rationale_was_cut(server, context):
    """The prompt asks for the code block first; a real Qwen2.5-Coder-1.5B on a CPU (2026-12-07)
    sent it whole, then the deadline cut its rationale, and the proposal was thrown away as
    NO_CANDIDATE. The closed block is read now, and the exchange says the deadline cut it."""
    server.reply(f"```python\n{GROUPED}```\n" + "The groups share the B columns. " * 400, chunk_delay_s=0.02,
                 chunk_chars=40)
    proposal = proposer_for(server, deadline_s=2.0, retries=0).propose(context)
    assert "GROUP_SIZE_M" in proposal.source
    [exchange] = proposal.exchanges
    assert exchange["outcome"].startswith("ok: deadline: cancelled") and exchange["finish_reason"] == "deadline"


def test_a_reply_cut_inside_its_code_block_at_the_deadline_is_still_no_candidate(server, context):
    server.reply(f"```python\n{GROUPED}" + "    # more\n" * 2000, chunk_delay_s=0.02, chunk_chars=40)
    with pytest.raises(ProposerError, match="deadline"):
        proposer_for(server, deadline_s=1.5, retries=0).propose(context)


def test_a_reask_that_cannot_show_the_whole_reply_shows_its_code_block(context):
    """A re-ask once showed the model the last 400 characters of its reply (its closing sentence)
    while the reason named line 10 of its code (a real 1.5B model, 2026-12-07): where the whole
    reply does not fit, its code block is shown before any cut tail."""
    from types import SimpleNamespace
    proposer = LLMProposer(model="fake-coder", base_url="http://127.0.0.1:9/v1", api_key="test-key")
    reply = f"```python\n{GROUPED}```\n" + "Why this order works. " * 300
    proposer.chat.fits = lambda messages, tools=None: all(len(m.get("content") or "") <= 2500 for m in messages
                                                          if m["role"] == "assistant")
    _, messages = proposer._reask(context, 0, SimpleNamespace(reply=reply), "line 10: `if` is not allowed", None)
    assert messages[-2] == {"role": "assistant", "content": f"```python\n{GROUPED}```"}


# ---- which prompt was sent (a real 1.5B model at a 2048-token window never saw the analysis) -------

def test_every_request_records_the_detail_level_of_its_prompt(server, context):
    server.reply("I would group the rows by 8.")
    server.reply(GOOD_REPLY)
    proposal = proposer_for(server).propose(context)
    assert [e["prompt_detail"] for e in proposal.exchanges] == [0, 0]


def test_a_shortened_prompt_records_its_level_in_a_failed_proposal_too(server, context):
    context.analysis = "Each A row-panel is read by 32 programs. " * 150
    server.n_ctx = 2048
    for _ in range(3):
        server.reply("I would group the rows by 8.")
    with pytest.raises(ProposerError) as info:
        proposer_for(server).propose(context)
    levels = [e["prompt_detail"] for e in info.value.exchanges]
    assert len(levels) == 3 and levels[0] == 3 and all(level == 3 for level in levels)
    assert "(Left out to fit the model's context window.)" in server.requests[0]["messages"][1]["content"]


def test_a_reask_at_a_shorter_level_records_that_level(context):
    """The re-ask's messages are built at the first level, from the one of the first attempt, at
    which they fit: that level is the one recorded."""
    from types import SimpleNamespace
    proposer = LLMProposer(model="fake-coder", base_url="http://127.0.0.1:9/v1", api_key="test-key")
    full = sum(len(m["content"]) for m in proposer.messages(context, 0))
    proposer.chat.fits = lambda messages, tools=None: sum(len(m.get("content") or "") for m in messages) < full
    level, messages = proposer._reask(context, 0, SimpleNamespace(reply="no code"), "no code block", None)
    assert level > 0 and messages[:2] == proposer.messages(context, level)


# ---- a copied docstring (a real 1.5B model, 2026-12-07: "(row-major)" on a grouped order) ---------

def test_a_candidate_under_the_baselines_docstring_is_written_without_it(server, context):
    from swizzleperf.agent.verification import candidate
    baseline = TARGET.replace("):\n", '):\n    """Map program id pid to its tile (row-major)."""\n', 1)
    context.target_source = context.kernel_source = baseline
    copied = GROUPED.replace("):\n", '):\n    """Map program id pid to its tile (row-major)."""\n', 1)
    server.reply(f"```python\n{copied}```\n")
    proposal = proposer_for(server).propose(context)
    assert "row-major" not in proposal.source and candidate.BORROWED_DOC in proposal.source
    own = copied.replace("(row-major)", "(grouped by 8 rows)")
    server.reply(f"```python\n{own}```\n")
    assert "(grouped by 8 rows)" in proposer_for(server).propose(context).source
