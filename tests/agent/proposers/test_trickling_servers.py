"""#41: a hostile server that answers a byte at a time, one that echoes the API key, one that redirects.

httpx's timeouts are per read: a server that sends a header line, a byte of a 500's body or of a
``/tokenize`` answer every 0.1 s never trips them, and held the agent for ever, past the proposal's
deadline. Every read now ends by the deadline (chat.py ``_bound_by``): the proposal ends in one
line within it, a side answer is given up within its own time. A key sent in the ``Authorization``
header (``OPENAI_API_KEY``) and echoed back by the server was printed and kept as it is; it is now
masked like a key in the URL.
"""
from __future__ import annotations

import socket
import threading
import time

import pytest
from fake_openai import FakeOpenAIServer
from hang_guard import never_blocks

from swizzleperf.agent.proposers import chat
from swizzleperf.agent.proposers.base import ProposerError
from swizzleperf.agent.proposers.chat import ChatClient, ChatSettings, Conversation
from swizzleperf.sandbox.redact import redact

MESSAGES = [{"role": "user", "content": "hi"}]
CHAT_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n"
ERROR_HEAD = b"HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\n\r\n"


class Trickler:
    """A loopback server that answers every request with ``head`` and then ``drip`` every 0.1 s, for ever."""

    def __init__(self, head: bytes, drip: bytes) -> None:
        self.head, self.drip, self.stop = head, drip, threading.Event()
        self.socket = socket.create_server(("127.0.0.1", 0))
        self.socket.settimeout(0.1)
        self.base_url = f"http://127.0.0.1:{self.socket.getsockname()[1]}/v1"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                connection, _ = self.socket.accept()
            except OSError:
                continue
            threading.Thread(target=self._answer, args=(connection,), daemon=True).start()

    def _answer(self, connection: socket.socket) -> None:
        with connection:
            try:
                connection.recv(65536)
                connection.sendall(self.head)
                while not self.stop.is_set():
                    connection.sendall(self.drip)
                    time.sleep(0.1)
            except OSError:
                pass

    def __enter__(self):
        return self

    def __exit__(self, *_):
        self.stop.set()
        self.socket.close()


@pytest.mark.parametrize("head, drip", [
    (b"HTTP/1.1 200 OK\r\n", b"X-Slow: a\r\n"),   # headers that never end
    (ERROR_HEAD, b" "),                           # a 500 whose body never ends
    (CHAT_HEAD, b": keep-alive\n"),               # a stream of comments, never an event
], ids=["headers", "error body", "comments"])
def test_a_trickling_answer_ends_the_proposal_at_its_deadline(head, drip, monkeypatch):
    # the tokenizer routes trickle too (given up in their own time: the next test)
    monkeypatch.setattr(chat, "SIDE_POST_TIMEOUT_S", 0.3)
    with Trickler(head, drip) as server, never_blocks(40, "a trickling server held the agent"):
        client = ChatClient(ChatSettings(model="m", base_url=server.base_url, retries=0, deadline_s=2.0,
                                         context_tokens=4096, max_reply_tokens=64))
        started = time.monotonic()
        with pytest.raises(ProposerError, match="deadline") as info:
            Conversation(client).ask(MESSAGES)
        elapsed = time.monotonic() - started
    assert elapsed < 6, f"the proposal of a 2 s deadline took {elapsed:.1f} s"
    assert "\n" not in str(info.value)


def test_a_trickling_side_answer_is_given_up_within_its_time(monkeypatch):
    """/props, /v1/models and /tokenize that drip JSON whitespace: the window stays unknown and
    tokens fall back to characters, each side request given up after its own time."""
    monkeypatch.setattr(chat, "SIDE_GET_TIMEOUT_S", 1.0)
    monkeypatch.setattr(chat, "SIDE_POST_TIMEOUT_S", 1.0)
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n"
    with Trickler(head, b" ") as server, never_blocks(40, "a trickling side answer held the agent"):
        client = ChatClient(ChatSettings(model="m", base_url=server.base_url, retries=0))
        started = time.monotonic()
        assert client.window() is None                 # /props, then /v1/models
        assert client._count("some text") is None      # three tokenizer routes
        elapsed = time.monotonic() - started
    assert elapsed < 12, f"five side requests of 1 s took {elapsed:.1f} s"


def test_an_api_key_echoed_by_the_server_is_masked(monkeypatch):
    key = "sk-live-0f9e8d7c6b5a4321"
    monkeypatch.setenv("OPENAI_API_KEY", key)
    with FakeOpenAIServer() as server:
        server.reply(None, status=401, error_message=f"Incorrect API key provided: {key}")
        client = ChatClient(ChatSettings(model="m", base_url=server.base_url, retries=0))
        with pytest.raises(ProposerError) as info:
            client.check()
    assert key not in str(info.value) and "Incorrect API key provided: ***" in str(info.value)
    # the record, the transcript and the report go through redact: a reply quoting the key too
    assert redact(f"the reply said {key}.") == "the reply said ***."


def test_a_redirect_is_not_followed_and_the_prompt_goes_nowhere_else():
    """A server whose answer is a 307 to another host: the chat request (the prompt, your kernel's
    code) is not sent again there; one line says what came back."""
    with Trickler(b"", b"") as elsewhere:
        port = elsewhere.socket.getsockname()[1]
        seen = []
        elsewhere._answer = lambda connection: (seen.append(connection.recv(65536)), connection.close())
        head = (f"HTTP/1.1 307 Temporary Redirect\r\nLocation: http://127.0.0.1:{port}/v1/chat/completions\r\n"
                f"Content-Length: 0\r\n\r\n").encode()
        with Trickler(head, b"") as server, never_blocks(40, "a redirect held the agent"):
            client = ChatClient(ChatSettings(model="m", base_url=server.base_url, retries=0, deadline_s=5.0,
                                             context_tokens=4096, max_reply_tokens=64))
            with pytest.raises(ProposerError) as info:
                Conversation(client).ask([{"role": "user", "content": "the kernel's code"}])
    assert "307" in str(info.value) and "\n" not in str(info.value)
    assert not any(b"the kernel's code" in request for request in seen), seen
