"""A real OpenAI-compatible HTTP server on loopback for tests: canned chat replies from a queue.

    with FakeOpenAIServer() as server:
        server.reply("```python\n...\n```", prompt_tokens=100, completion_tokens=20)
        client = openai.OpenAI(base_url=server.base_url, api_key="x")

Every request body is recorded in ``server.requests`` (parsed JSON). A queued reply may carry an
HTTP status (an error body is sent instead) and a delay before the answer.
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


class FakeOpenAIServer:
    """Serves ``POST /v1/chat/completions`` on 127.0.0.1 from a queue of ``CannedReply``."""

    def __init__(self) -> None:
        self.replies: collections.deque[CannedReply] = collections.deque()
        self.requests: list[dict] = []
        self._stop = threading.Event()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def reply(self, content: str | None, prompt_tokens: int = 0, completion_tokens: int = 0,
              status: int = 200, delay_s: float = 0.0) -> None:
        """Queue the answer to the next request."""
        self.replies.append(CannedReply(content, prompt_tokens, completion_tokens, status, delay_s))

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

    def next_answer(self, body: dict) -> tuple[int, dict, float]:
        """(status, JSON body, delay) for one request; an empty queue answers 500."""
        self.requests.append(body)
        if not self.replies:
            return 500, {"error": {"message": "fake server: no canned reply queued"}}, 0.0
        canned = self.replies.popleft()
        if canned.raw is not None:
            return 200, canned, canned.delay_s
        if canned.status != 200:
            error = {"message": f"fake error {canned.status}", "type": "fake", "code": canned.status}
            return canned.status, {"error": error}, canned.delay_s
        return 200, _completion(body.get("model", "fake"), canned), canned.delay_s


def _completion(model: str, canned: CannedReply) -> dict:
    """A chat completion in the OpenAI response format."""
    return {
        "id": "chatcmpl-fake", "object": "chat.completion", "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": canned.content}}],
        "usage": {"prompt_tokens": canned.prompt_tokens,
                  "completion_tokens": canned.completion_tokens,
                  "total_tokens": canned.prompt_tokens + canned.completion_tokens},
    }


def _handler_for(server: FakeOpenAIServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:  # noqa: N802 (the stdlib's name)
            length = int(self.headers.get("Content-Length", 0))
            body = json.loads(self.rfile.read(length) or b"{}")
            if self.path.rstrip("/") != "/v1/chat/completions":
                return self._send(404, {"error": {"message": f"no route {self.path}"}})
            status, answer, delay_s = server.next_answer(body)
            if delay_s and server._stop.wait(delay_s):
                return
            self._send(status, answer)

        def _send(self, status: int, answer) -> None:
            raw = isinstance(answer, CannedReply)
            data = answer.raw if raw else json.dumps(answer).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", answer.content if raw else "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (a timeout test); nothing to answer

        def log_message(self, format: str, *args) -> None:  # keep test output clean
            pass

    return Handler
