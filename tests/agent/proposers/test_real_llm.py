"""Against a real model (``-m llm``; skipped unless SWIZZLEPERF_LLM_BASE_URL is set, e.g. by
``bash bench/real_llm.sh serve qwen``; SWIZZLEPERF_LLM_MODEL names the model, ``qwen`` by default).
What the fake server cannot show: the real server's streaming, its refusal of an overlong prompt,
its tokenizer, and that it stops generating when the deadline closes the stream."""
from __future__ import annotations

import os
import time

import pytest
from test_llm_proposer import _context

from swizzleperf.agent.proposers.base import ProposerError
from swizzleperf.agent.proposers.chat import ChatClient, ChatSettings, Conversation
from swizzleperf.agent.proposers.llm import LLMProposer

pytestmark = pytest.mark.llm
BASE_URL = os.environ.get("SWIZZLEPERF_LLM_BASE_URL", "")
MODEL = os.environ.get("SWIZZLEPERF_LLM_MODEL", "qwen")


def test_a_real_proposal_is_recorded_request_by_request_with_tokens():
    proposer = LLMProposer(MODEL, base_url=BASE_URL, deadline_s=600)
    try:
        outcome = proposer.propose(_context())
    except ProposerError as exc:  # a small model may fail to answer usably: still recorded
        outcome = exc
    assert outcome.exchanges, "no request recorded"
    for exchange in outcome.exchanges:
        assert exchange["outcome"] and exchange["seconds"] > 0
        if exchange["outcome"] == "ok":
            assert exchange["prompt_tokens"] > 0 and exchange["completion_tokens"] > 0
            assert exchange["tokens_source"] == "server" or exchange["tokens_source"].startswith("estimated")
    assert outcome.prompt_tokens == sum(e["prompt_tokens"] for e in outcome.exchanges)


def test_the_server_stops_generating_when_the_deadline_closes_the_stream():
    client = ChatClient(ChatSettings(model=MODEL, base_url=BASE_URL, deadline_s=4, retries=0,
                                     max_reply_tokens=1500))
    essay = [{"role": "system", "content": "You are a writer."},
             {"role": "user", "content": "Write a 1000-word essay about caches."}]
    with pytest.raises(ProposerError, match="deadline"):
        Conversation(client).ask(essay)
    # a one-slot server still generating the essay would make this wait for minutes
    quick = ChatClient(ChatSettings(model=MODEL, base_url=BASE_URL, deadline_s=120, retries=0,
                                    max_reply_tokens=8))
    start = time.monotonic()
    exchange = Conversation(quick).ask([{"role": "user", "content": "Say OK."}])
    assert exchange.outcome == "ok" and time.monotonic() - start < 60


def test_an_overlong_prompt_teaches_the_client_the_window():
    client = ChatClient(ChatSettings(model=MODEL, base_url=BASE_URL, deadline_s=120, retries=0))
    conversation = Conversation(client)
    with pytest.raises(ProposerError, match="context window"):
        conversation.ask([{"role": "user", "content": "cache " * 20_000}])
    assert client.window() is not None and client.window() >= 512
