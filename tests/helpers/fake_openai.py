"""A real OpenAI-compatible HTTP server on loopback for tests: canned chat replies from a queue.

    with FakeOpenAIServer() as server:
        server.reply("```python\n...\n```", prompt_tokens=100, completion_tokens=20)
        client = openai.OpenAI(base_url=server.base_url, api_key="x")

Every request body is recorded in ``server.requests`` (parsed JSON). A queued reply may carry an
HTTP status (an error body is sent instead), a delay before the answer, a finish reason, tool calls
and no usage. A request with ``stream: true`` is answered as llama.cpp and vLLM do: server-sent
events, a few characters a chunk (``chunk_delay_s`` apart), the usage in a last chunk when
``stream_options.include_usage`` asks for it; a client that closes the stream early is counted in
``server.cancelled``. ``GET /props`` gives ``n_ctx`` when set (llama.cpp), ``POST /tokenize``
counts a token per 4 characters when ``tokenizer`` is set.

Hostile servers (#21): a queued reply may stream ``events`` as given (raw ``data:`` payloads, any
text) or in ``chunk_chars``-character pieces; ``raw_routes`` maps a path (``/props``, ``/v1/models``,
``/tokenize``) to a body sent as it is, and ``encodings`` a path (``/v1/chat/completions`` too) to
the ``Content-Encoding`` its answers declare (compression bombs, #41). Every request's path, query included, is kept in
``server.paths``; routing ignores the query; an error names the path it was asked (as some servers
echo it).
"""
from __future__ import annotations

import collections
import json
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class CannedReply:
    content: str | None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    status: int = 200
    delay_s: float = 0.0
    raw: bytes | None = None          # sent as the body as it is (garbage tests), HTTP 200
    finish_reason: str = "stop"
    usage: bool = True                # False: the server reports no usage (some servers, when streaming)
    chunk_delay_s: float = 0.0        # between streamed chunks
    tool_calls: list | None = None    # [{"name", "arguments"}]
    error_message: str | None = None  # the body's message of an error status
    empty_stream: bool = False        # 200 and an event stream with nothing in it (llama-cpp-python's failures)
    events: list | None = None        # raw SSE data payloads, sent as they are (hostile streams)
    chunk_chars: int = 8              # characters of content per streamed chunk


class FakeOpenAIServer:
    """Serves ``POST /v1/chat/completions`` on 127.0.0.1 from a queue of ``CannedReply``."""

    def __init__(self) -> None:
        self.replies: collections.deque[CannedReply] = collections.deque()
        self.requests: list[dict] = []
        self.cancelled = 0                # streams the client closed before their end
        self.n_ctx: int | None = None     # served at GET /props when set
        self.tokenizer = False            # POST /tokenize answers when True
        self.tokenized = 0
        self.raw_routes: dict[str, bytes] = {}  # path -> body sent as it is (hostile side answers)
        self.encodings: dict[str, str] = {}     # path -> Content-Encoding header of its answers
        self.paths: list[str] = []              # every request's path, query included
        self._stop = threading.Event()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def reply(self, content: str | None, prompt_tokens: int = 0, completion_tokens: int = 0,
              status: int = 200, delay_s: float = 0.0, **options) -> None:
        """Queue the answer to the next request (``options``: the other CannedReply fields)."""
        self.replies.append(CannedReply(content, prompt_tokens, completion_tokens, status, delay_s, **options))

    def reply_raw(self, body: bytes, content_type: str = "application/json") -> None:
        """Queue a body sent as it is with HTTP 200 (not UTF-8, not JSON, JSON of another shape)."""
        self.replies.append(CannedReply(content_type, raw=body))

    def __enter__(self) -> FakeOpenAIServer:
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._stop.set()  # wakes handlers that are still sleeping
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def next_answer(self, body: dict, path: str = "") -> tuple[int, dict, float]:
        """(status, JSON body, delay) for one request; an empty queue answers 500."""
        self.requests.append(body)
        if not self.replies:
            return 500, {"error": {"message": f"fake server: no canned reply queued for {path}"}}, 0.0
        canned = self.replies.popleft()
        if canned.raw is not None:
            return 200, canned, canned.delay_s
        if canned.status != 200:
            error = {"message": canned.error_message or f"fake error {canned.status}", "type": "fake",
                     "code": canned.status}
            return canned.status, {"error": error}, canned.delay_s
        if body.get("stream"):
            return 200, canned, canned.delay_s
        return 200, _completion(body.get("model", "fake"), canned), canned.delay_s


def _completion(model: str, canned: CannedReply) -> dict:
    """A chat completion in the OpenAI response format."""
    message = {"role": "assistant", "content": canned.content}
    if canned.tool_calls:
        message["tool_calls"] = [{"id": f"call_{i}", "type": "function", "function": call}
                                 for i, call in enumerate(canned.tool_calls)]
    answer = {"id": "chatcmpl-fake", "object": "chat.completion", "created": int(time.time()),
              "model": model, "choices": [{"index": 0, "finish_reason": canned.finish_reason,
                                           "message": message}]}
    if canned.usage:
        answer["usage"] = _usage(canned)
    return answer


def _usage(canned: CannedReply) -> dict:
    return {"prompt_tokens": canned.prompt_tokens, "completion_tokens": canned.completion_tokens,
            "total_tokens": canned.prompt_tokens + canned.completion_tokens}


def _chunks(model: str, canned: CannedReply, include_usage: bool) -> list:
    """The server-sent events of one streamed reply."""
    def chunk(delta: dict, finish: str | None = None) -> dict:
        return {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": int(time.time()),
                "model": model, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    text = canned.content or ""
    events = [chunk({"role": "assistant", "content": ""})]
    size = canned.chunk_chars
    events += [chunk({"content": text[i:i + size]}) for i in range(0, len(text), size)]
    for i, call in enumerate(canned.tool_calls or []):
        events.append(chunk({"tool_calls": [{"index": i, "id": f"call_{i}", "type": "function",
                                             "function": {"name": call["name"], "arguments": ""}}]}))
        events.append(chunk({"tool_calls": [{"index": i, "function": {"arguments": call["arguments"]}}]}))
    events.append(chunk({}, canned.finish_reason))
    if include_usage and canned.usage:
        events.append({**chunk({}), "choices": [], "usage": _usage(canned)})
    return events


def _handler_for(server: FakeOpenAIServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:  # noqa: N802
            server.paths.append(self.path)
            self.path = self.path.split("?")[0]
            if self.path in server.raw_routes:
                return self._send(200, CannedReply("application/json", raw=server.raw_routes[self.path]))
            if self.path == "/props" and server.n_ctx:
                return self._send(200, {"default_generation_settings": {"n_ctx": server.n_ctx}})
            if self.path.rstrip("/") == "/v1/models":
                return self._send(200, {"object": "list", "data": [{"id": "fake", "object": "model"}]})
            self._send(404, {"error": {"message": f"no route {self.path}"}})

        def do_POST(self) -> None:  # noqa: N802 (the stdlib's name)
            length = int(self.headers.get("Content-Length", 0))
            body = json.loads(self.rfile.read(length) or b"{}")
            asked, self.path = self.path, self.path.split("?")[0]
            server.paths.append(asked)
            if self.path in server.raw_routes:
                return self._send(200, CannedReply("application/json", raw=server.raw_routes[self.path]))
            if self.path == "/tokenize" and server.tokenizer:
                server.tokenized += 1
                return self._send(200, {"tokens": list(range(len(body.get("content", "")) // 4))})
            if self.path.rstrip("/") != "/v1/chat/completions":
                return self._send(404, {"error": {"message": f"no route {self.path}"}})
            status, answer, delay_s = server.next_answer(body, asked)
            if delay_s and server._stop.wait(delay_s):
                return
            if isinstance(answer, CannedReply) and answer.raw is None:
                include = bool((body.get("stream_options") or {}).get("include_usage"))
                if answer.empty_stream:
                    return self._stream([], 0.0, done=False)
                if answer.events is not None:
                    return self._stream(answer.events, answer.chunk_delay_s)
                return self._stream(_chunks(body.get("model", "fake"), answer, include), answer.chunk_delay_s)
            self._send(status, answer)

        def _stream(self, events: list, delay_s: float, done: bool = True) -> None:
            self.close_connection = True
            try:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                for event in events:
                    data = event if isinstance(event, str) else json.dumps(event)
                    self.wfile.write(f"data: {data}\n\n".encode())
                    self.wfile.flush()
                    if delay_s and server._stop.wait(delay_s):
                        return
                if done:
                    self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                server.cancelled += 1

        def _send(self, status: int, answer) -> None:
            raw = isinstance(answer, CannedReply)
            data = answer.raw if raw else json.dumps(answer).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", answer.content if raw else "application/json")
                if self.path.rstrip("/") in server.encodings:
                    self.send_header("Content-Encoding", server.encodings[self.path.rstrip("/")])
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (a timeout test); nothing to answer

        def log_message(self, format: str, *args) -> None:  # keep test output clean
            pass

    return Handler
