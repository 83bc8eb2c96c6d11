"""The ``tools`` schema is part of the prompt: counted in every estimate, budget and record.

A chat template renders the tools into the prompt (Qwen2.5's added 232 tokens on llama-cpp-python,
2026-12-07), but the estimates counted only the messages: ``fits()`` passed prompts the server
refused, and the reply budget overran the window. The loopback server's ``/tokenize`` counts a
token per 4 characters, so every expected figure here is computed by hand from the same rule.
"""
from __future__ import annotations

import json

import pytest
from fake_openai import FakeOpenAIServer
from test_llm_proposer import GOOD_REPLY, GROUPED, _context

from swizzleperf.agent.proposers import chat
from swizzleperf.agent.proposers.chat import (GENERATION_PROMPT_TOKENS, TEMPLATE_TOKENS_PER_MESSAGE, ChatClient,
                                              ChatSettings)
from swizzleperf.agent.proposers.llm import DETAIL_LEVELS, TOOLS, LLMProposer


@pytest.fixture
def server():
    with FakeOpenAIServer() as running:
        running.tokenizer = True
        yield running


def _by_hand(messages: list, tools: list | None) -> int:
    """The estimate, computed as the server's tokenizer (4 characters a token) counts."""
    tokens = sum(len(m["content"]) // 4 + TEMPLATE_TOKENS_PER_MESSAGE for m in messages) + GENERATION_PROMPT_TOKENS
    return tokens + (len(json.dumps(tools)) // 4 + chat.TEMPLATE_TOKENS_FOR_TOOLS if tools else 0)


def test_the_tools_schema_is_counted_with_the_servers_tokenizer(server):
    client = ChatClient(ChatSettings(model="fake", base_url=server.base_url, context_tokens=4096))
    messages = [{"role": "user", "content": "x" * 4000}]
    assert client.estimate_tokens(messages) == _by_hand(messages, None)
    assert client.estimate_tokens(messages, TOOLS) == _by_hand(messages, TOOLS)
    assert client.tools_tokens(TOOLS) == len(json.dumps(TOOLS)) // 4 + chat.TEMPLATE_TOKENS_FOR_TOOLS
    assert client.tools_tokens(None) == 0


def test_without_a_tokenizer_the_tools_are_counted_at_the_same_ratio_as_the_messages():
    with FakeOpenAIServer() as bare:
        client = ChatClient(ChatSettings(model="fake", base_url=bare.base_url, context_tokens=4096))
        messages = [{"role": "user", "content": "x" * 3000}]
        assert client.estimate_tokens(messages, TOOLS) - client.estimate_tokens(messages) == \
            int(len(json.dumps(TOOLS)) / 3.0) + chat.TEMPLATE_TOKENS_FOR_TOOLS


def test_fits_and_the_reply_budget_leave_room_for_the_tools(server):
    """A prompt that fits alone but not beside the tools is said not to fit with them, and the
    reply budget is what the window leaves once the tools are counted."""
    window = 2048
    client = ChatClient(ChatSettings(model="fake", base_url=server.base_url, context_tokens=window))
    tools = client.tools_tokens(TOOLS)
    chars = 4 * (window - client.reply_floor() - tools // 2 - TEMPLATE_TOKENS_PER_MESSAGE - GENERATION_PROMPT_TOKENS)
    messages = [{"role": "user", "content": "x" * chars}]
    assert client.fits(messages) and not client.fits(messages, TOOLS)
    assert client.reply_budget(messages, TOOLS) == window - _by_hand(messages, TOOLS)
    assert client.reply_budget(messages, TOOLS) == client.reply_budget(messages) - tools


def test_a_request_with_tools_records_their_tokens_and_says_so(server):
    """llama-cpp-python gives no usage when streaming: the estimate is the record, and it counts
    the tools it sent (the transcript's token record says it does)."""
    server.n_ctx = 4096
    server.reply(GOOD_REPLY, usage=False)
    proposal = LLMProposer(model="fake", base_url=server.base_url).propose(_context())
    assert proposal.source == GROUPED
    [exchange], [request] = proposal.exchanges, server.requests
    assert request["tools"] == TOOLS
    assert exchange["prompt_tokens"] == _by_hand(request["messages"], TOOLS)
    assert "tools" in exchange["tokens_source"]
    assert request["max_tokens"] + exchange["prompt_tokens"] <= 4096

    server.reply(GOOD_REPLY, usage=False)   # no tools offered: none counted
    proposal = LLMProposer(model="fake", base_url=server.base_url, max_tool_calls=0).propose(_context())
    [exchange], request = proposal.exchanges, server.requests[-1]
    assert "tools" not in request
    assert exchange["prompt_tokens"] == _by_hand(request["messages"], None)
    assert "tools" not in exchange["tokens_source"]


def test_the_prompt_detail_is_chosen_with_the_tools_counted(server):
    """An analysis that fits the window at full detail only without the tools: the proposer offers
    the tools, so it sends a shorter prompt, whose messages and tools leave the reply its floor."""
    context = _context()
    proposer = LLMProposer(model="fake", base_url=server.base_url, context_tokens=2048)
    full = proposer.messages(context, 0)
    room = 2048 - proposer.chat.reply_floor() - proposer.chat.estimate_tokens(full)
    context.analysis += " " + "x" * (4 * (room - proposer.chat.tools_tokens(TOOLS) // 2))
    assert proposer.chat.fits(proposer.messages(context, 0))
    assert not proposer.chat.fits(proposer.messages(context, 0), TOOLS)
    server.reply(GOOD_REPLY, usage=False)
    proposal = proposer.propose(context)
    [exchange], [request] = proposal.exchanges, server.requests
    sent = next(d for d in DETAIL_LEVELS if proposer.chat.fits(proposer.messages(context, d), TOOLS))
    assert sent > 0 and request["messages"] == proposer.messages(context, sent)
    assert exchange["prompt_tokens"] + proposer.chat.reply_floor() <= 2048
