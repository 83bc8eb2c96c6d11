"""A server that lists thousands of content codings (``Content-Encoding: gzip,gzip,...``, red team
41i): the startup check printed an 80-line RecursionError traceback, a run stopped with "internal
error: RecursionError", and a ``/props`` answer so encoded ended the run the same way. Now the
reply is ``not a chat completion`` in one line (sandbox/untrusted.py ``MAX_CODINGS``), a side
answer so encoded is ignored, and any other fault while decoding is one line too
(agent/proposers/chat.py ``_bounded_bodies``). Hermetic: a loopback server, a private HOME."""
from __future__ import annotations

import time

import httpx
import pytest
from fake_openai import FakeOpenAIServer
from run_cli import assert_one_line_error, swizzleperf
from test_llm_proposer import _context

from swizzleperf.agent.proposers.base import ProposerError
from swizzleperf.agent.proposers.chat import MALFORMED, ChatClient, ChatSettings
from swizzleperf.agent.proposers.llm import LLMProposer
from swizzleperf.sandbox import untrusted

CODINGS = ",".join(["gzip"] * 4000)


@pytest.fixture(autouse=True)
def _private_home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "home" / ".cache"))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-coding-lists-0123456789")


def test_a_reply_with_4000_codings_is_one_line_no_candidate():
    with FakeOpenAIServer() as server:
        server.encodings["/v1/chat/completions"] = CODINGS
        server.reply_raw(b"\x1f\x8b junk")
        with pytest.raises(ProposerError) as info:
            LLMProposer("fake", base_url=server.base_url, retries=0, max_parse_retries=0).propose(_context())
    message = str(info.value)
    assert MALFORMED in message and "4000 content codings" in message, message
    assert "\n" not in message and len(message) < 1200


def test_a_props_answer_with_4000_codings_is_ignored():
    with FakeOpenAIServer() as server:
        server.raw_routes["/props"] = server.raw_routes["/v1/models"] = b"junk"
        server.encodings["/props"] = server.encodings["/v1/models"] = CODINGS
        proposer = LLMProposer("fake", base_url=server.base_url)
        assert proposer.chat.window() is None and "unknown" in proposer.chat.window_source


def test_the_startup_check_of_a_reply_with_4000_codings_is_one_line(tmp_path, gemm_path):
    with FakeOpenAIServer() as server:
        server.encodings["/v1/chat/completions"] = CODINGS
        server.reply_raw(b"\x1f\x8b junk")
        proc = swizzleperf("optimize", str(gemm_path), "--model", "fake", "--base-url", server.base_url,
                           cwd=tmp_path, timeout=300)
    assert_one_line_error(proc, "4000 content codings")
    assert "nothing was started" in proc.stderr and not (tmp_path / ".swizzleperf" / "runs").exists()


def _ask_once(server: FakeOpenAIServer):
    client = ChatClient(ChatSettings(model="fake", base_url=server.base_url, retries=0))
    return client.request([{"role": "user", "content": "hi"}], time.monotonic() + 60, 1, max_tokens=1)


def _decoding_that_raises(fault: BaseException):
    def decoded(raw, coding, what):
        yield b'{"id": "x", '
        raise fault
    return decoded


@pytest.mark.parametrize("fault", [RecursionError("maximum recursion depth exceeded"),
                                   MemoryError(), EOFError("compressed file ended early")])
def test_any_other_fault_while_decoding_is_one_line(monkeypatch, fault):
    monkeypatch.setattr(untrusted, "decoded", _decoding_that_raises(fault))
    with FakeOpenAIServer() as server:
        server.reply_raw(b"{}")
        exchange = _ask_once(server)
    assert exchange.outcome.startswith(f"{MALFORMED}: the answer does not decode"), exchange.outcome
    assert type(fault).__name__ in exchange.outcome and "\n" not in exchange.outcome


def test_a_connection_lost_while_decoding_is_still_a_connection_lost(monkeypatch):
    monkeypatch.setattr(untrusted, "decoded", _decoding_that_raises(httpx.ReadError("peer reset")))
    with FakeOpenAIServer() as server:
        server.reply_raw(b"{}")
        exchange = _ask_once(server)
    assert exchange.outcome.startswith("connection lost"), exchange.outcome   # retried, not MALFORMED
