"""Talking to an OpenAI-compatible chat endpoint honestly: time, tokens, the context window.

One *proposal* may take several requests (a re-ask after a reply that cannot be used, a retry after
a transient error). ``Conversation`` holds them:

- **A deadline per proposal** (``ChatSettings.deadline_s``), not per request: every request is
  streamed, and a stream still open at the deadline is closed, which makes llama.cpp and vLLM stop
  generating (an abandoned non-streamed request keeps a one-slot local server busy).
- **Retries under our own policy** (the SDK's own retries are off, they were silent and tripled
  the time): connection errors, HTTP 429 and 5xx are retried ``retries`` times with a doubling
  pause, within the deadline; each try is one entry of the transcript.
- **Tokens of every request**, the failed and the cancelled ones included: the server's ``usage``
  (asked for with ``stream_options.include_usage``) where it gives one, else estimated with the
  server's tokenizer (llama.cpp's ``/tokenize``, llama-cpp-python's ``/extras/tokenize``, vLLM's
  ``/tokenize``), else from the characters; each figure says which (``tokens_source``).
- **The context window**: ``--context-tokens``, else what the server says (llama.cpp's ``/props``,
  vLLM's ``/v1/models`` ``max_model_len``), else what an HTTP 400 for an overlong prompt says;
  ``fits`` tells a proposer whether its messages leave room for ``max_tokens`` of reply, from a
  characters-per-token ratio measured on this server's earlier replies.
- **The transcript**: each request's messages, raw reply, finish reason, time and tokens
  (``Exchange``), for the run folder, the record and the notebook.
- **Nothing the server sends is used unchecked**: every body, streamed event, ``/props``,
  ``/v1/models`` and ``/tokenize`` answer is read within byte bounds (counted on its decoded
  size, a gzip, deflate or zstd body inflated piece by piece: ``_bounded_bodies``), loaded within depth and
  integer bounds (sandbox/untrusted.py) and checked against its shape (wire.py); an answer that
  fails is ``MALFORMED``: kept in the transcript, quoted (first 200 characters) in one line, not
  retried. The endpoint is shown with its credentials redacted (sandbox/redact.py).
"""
from __future__ import annotations

import importlib
import json
import math
import os
import re
import time
from dataclasses import asdict, dataclass, field

import httpx
import openai

from swizzleperf.agent.proposers import wire
from swizzleperf.agent.proposers.base import ProposerError
from swizzleperf.sandbox import untrusted
from swizzleperf.sandbox.redact import redact, remember


def _optional(name: str):
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


#: Characters per token assumed before the server has answered once: code and tables tokenise at
#: about 3-4 characters per token with the BPE vocabularies of current models; 3.0 errs on the side
#: of a prompt that fits. Replaced by the ratio measured on the server's own usage figures.
INITIAL_CHARS_PER_TOKEN = 3.0
#: Tokens a chat template adds per message (role markers, separators): 4-6 in the ChatML,
#: Llama-3 and Mistral templates; used only in estimates, which say so.
TEMPLATE_TOKENS_PER_MESSAGE = 5
#: Tokens of the assistant turn's opening that the template appends (``<|im_start|>assistant\n``).
GENERATION_PROMPT_TOKENS = 3
#: Tokens a chat template adds around the ``tools`` schema it renders into the prompt, besides the
#: schema's own JSON: Qwen2.5's "# Tools ... <tools></tools> ... <tool_call>" preamble is 77 with
#: llama-cpp-python 0.3.36 (2026-12-07: 232 tokens in all, 155 of them ``json.dumps`` of the
#: proposer's two tools); used only in estimates, which say so.
TEMPLATE_TOKENS_FOR_TOOLS = 80
#: Fraction of the window kept free for the reply when no --max-reply-tokens is given, and its bounds.
REPLY_SHARE, REPLY_MIN, REPLY_MAX = 0.25, 384, 2048
#: Added to the temperature at each re-ask of a proposal (capped at 1.0): a model told that its
#: reply repeats an earlier order tends to send the same reply again at a low temperature.
REASK_TEMPERATURE_STEP = 0.3
#: The reply budget while the window is unknown.
REPLY_UNKNOWN_WINDOW = 1024
_TRANSIENT = (429, 500, 502, 503, 504)
#: The HTTP library under the openai SDK: httpx, or httpx2 in openai 3.x; a stream read through the
#: SDK raises that library's own errors.
_HTTP_LIBRARIES = [httpx] + [m for m in (_optional("httpx2"),) if m is not None]
_TIMEOUTS = tuple(m.TimeoutException for m in _HTTP_LIBRARIES)
_TRANSPORT_ERRORS = tuple(c for m in _HTTP_LIBRARIES for c in (m.TransportError, m.StreamError))
_HTTP_ERRORS = tuple(c for m in _HTTP_LIBRARIES for c in (m.HTTPError, m.StreamError))
#: The outcome of a stream that ended with nothing: llama-cpp-python 0.3 answers 200 and then fails
#: inside the stream (an overlong prompt among other causes) without saying why.
EMPTY_STREAM = "empty stream: the server ended the reply without content or a finish reason"
#: The outcome of an answer that is not a chat completion (bad JSON, a field of the wrong type or
#: size: ``wire.py``); never retried, the proposal ends with it.
MALFORMED = "not a chat completion"
#: Bytes we read of one answer (a body, or a whole stream): a reply of ``wire.MAX_TEXT_CHARS``
#: characters streamed a few characters an event is about 150 bytes an event, so 64 MiB; beyond,
#: the connection is closed.
MAX_ANSWER_BYTES = 64 * 2**20
#: Bytes of one line of a stream (one event), and of a side answer (/props, /tokenize...).
MAX_LINE_BYTES = 4 * 2**20
MAX_SIDE_BYTES = 8 * 2**20
#: The shortest API key masked wherever it appears (a real key is 20+ characters; shorter ones are
#: placeholders such as ``EMPTY`` or ``local``, masking which would mangle ordinary text).
MIN_KEY_CHARS = 8
#: Seconds a side request (GET /props, /v1/models; POST /tokenize) may take in all.
SIDE_GET_TIMEOUT_S, SIDE_POST_TIMEOUT_S = 5.0, 10.0
#: What the transcript keeps of an answer that could not be used (the issue: keep what caused it).
KEPT_RECEIVED_CHARS = 100_000
#: Characters of a ``--base-url``: an endpoint is under a hundred, servers and proxies refuse URLs
#: over 8 KiB; httpx itself gives up at 65 536 (with an exception of its own, a traceback, #41).
MAX_URL_CHARS = 2048
_WINDOW_PATTERNS = (re.compile(r"context window of (\d{1,12})\b"),
                    re.compile(r"maximum context length is (\d{1,12})\b"),
                    re.compile(r"context size[^0-9]{0,40}(\d{1,12})\b"), re.compile(r"n_ctx\D{0,5}(\d{1,12})\b"))


@dataclass
class ChatSettings:
    """How to reach and use the model.

    Attributes:
        model: the name the endpoint serves.
        base_url: the endpoint (``http://127.0.0.1:8080/v1``); None for the SDK's default.
        api_key: None reads ``OPENAI_API_KEY``; local servers need none.
        deadline_s: seconds one proposal may take, every request, retry and re-ask included.
        temperature: sampling temperature.
        context_tokens: the model's context window; None asks the server.
        max_reply_tokens: ``max_tokens`` of each request; None: a quarter of the window
            (384..2048), 1024 while the window is unknown.
        retries: extra tries of a request after a connection error, HTTP 429 or 5xx.
        price_in_per_mtok / price_out_per_mtok: USD per million prompt / completion tokens.
    """

    model: str
    base_url: str | None = None
    api_key: str | None = None
    deadline_s: float = 300.0
    temperature: float = 0.2
    context_tokens: int | None = None
    max_reply_tokens: int | None = None
    retries: int = 2
    price_in_per_mtok: float = 0.0
    price_out_per_mtok: float = 0.0

    def __post_init__(self) -> None:
        if self.deadline_s <= 0:
            raise ValueError(f"the LLM deadline must be > 0 s, got {self.deadline_s}")
        if not 0.0 <= self.temperature <= 2.0:
            raise ValueError(f"the temperature must be in [0, 2], got {self.temperature}")
        if self.context_tokens is not None and self.context_tokens < 512:
            raise ValueError(f"the context window must be >= 512 tokens, got {self.context_tokens}")
        if self.retries < 0:
            raise ValueError(f"retries must be >= 0, got {self.retries}")


@dataclass
class Exchange:
    """One HTTP request of a proposal, as the transcript keeps it.

    Attributes:
        n: 1-based number of the request within its proposal.
        started_at: wall-clock start (Unix seconds); ``seconds``: how long it took.
        messages: the messages sent; ``reply``: the text received (possibly cut).
        finish_reason: the server's (``stop``, ``length``...), None when it gave none.
        outcome: ``ok``, or what went wrong in a few words (``deadline: cancelled after 12.0 s``,
            ``HTTP 503: ...``, ``unreachable: ...``).
        max_tokens: the reply budget sent; ``temperature``: the sampling temperature sent.
        prompt_tokens / completion_tokens: tokens the server processed for this request.
        tokens_source: ``server`` (its usage), ``estimated: <how>``, or ``none: not sent``.
        tools_tokens: of ``prompt_tokens``, those of the ``tools`` schema sent with the request
            (estimated: :meth:`ChatClient.tools_tokens`; 0 where none was sent).
        prompt_detail: the level of detail of the proposer's prompt (``llm.DETAIL_LEVELS``, 0 =
            everything), where a proposer says; None otherwise.
        tool_calls: the tools the model called: ``[{id, name, arguments}]`` (arguments: JSON text;
            name ``""`` where the server sent none: the proposer refuses such a call with why);
            a call the proposer could not run also has ``rejected``: why, one line (``llm.reason_line``).
        rejected: why the proposer could not use the reply ('' when it did, or never read it); for
            a reply of tool calls, the refused calls' reasons.
    """

    n: int
    started_at: float
    seconds: float = 0.0
    messages: list = field(default_factory=list)
    reply: str = ""
    finish_reason: str | None = None
    outcome: str = "ok"
    max_tokens: int = 0
    temperature: float | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    tokens_source: str = "none: not sent"
    tools_tokens: int = 0
    prompt_detail: int | None = None
    tool_calls: list = field(default_factory=list)
    rejected: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


class ContextOverflow(ProposerError):
    """The server refused the prompt as longer than its window (HTTP 400); ``window`` is what it
    said, when it said; the proposer shortens the prompt and asks again."""

    def __init__(self, message: str, window: int | None):
        super().__init__(message)
        self.window = window


def endpoint_url(base_url: str) -> httpx.URL:
    """``base_url`` (``--base-url``) parsed: ``http://`` or ``https://``, a host, a port in 1..65535
    where one is given, printable and without blanks, at most ``MAX_URL_CHARS`` characters.

    Raises:
        ValueError: one line saying what is wrong; the URL itself is never quoted (a password in it,
            or in the part httpx would quote, such as ``http://u:pa/ss@h``'s "port", stays unshown).
    """
    if len(base_url) > MAX_URL_CHARS:
        why = f"it is {len(base_url)} characters, more than the {MAX_URL_CHARS} allowed"
    elif not base_url.isprintable() or any(c.isspace() for c in base_url):
        why = "it holds a space or an unprintable character"
    elif not base_url.lower().startswith(("http://", "https://")):
        why = "it does not start with http:// or https://"
    else:
        try:
            url = httpx.URL(base_url)
            host, port = url.host, url.port   # the host decoded here (IDNA)
        except (httpx.InvalidURL, ValueError) as exc:   # ValueError: idna's, for a host such as xn--zz
            url, why = None, ("its port is not a number (an IPv6 host goes in brackets: http://[::1]:8080/v1)"
                              if str(exc).startswith("Invalid port") else "its host is not a valid name")
        else:
            why = ("it names no host" if not host else f"its port {port} is not in 1..65535"
                   if port is not None and not 0 < port < 65536 else "")
        if not why:
            return url
    raise ValueError(f"--base-url is not an endpoint to ask: {why}; give http:// or https://HOST[:PORT][/PATH], "
                     f"e.g. http://127.0.0.1:8080/v1")


class ChatClient:
    """One endpoint and model; shared by the proposals of a run (it learns the window and the
    characters-per-token ratio once)."""

    def __init__(self, settings: ChatSettings) -> None:
        self.settings = settings
        given = endpoint_url(settings.base_url) if settings.base_url else None
        key = settings.api_key or os.environ.get("OPENAI_API_KEY")
        if key and len(key) >= MIN_KEY_CHARS:  # a server that echoes the key (in an error, in a
            remember(key)                        # reply) has it masked in all we print and keep
        self._until = math.inf  # the deadline (time.monotonic()) of the request under way
        # no redirect followed: the prompt (your kernel's code) goes to the server you named, not to
        # wherever its 3xx points (the key was never carried, the body would have been)
        http = openai.DefaultHttpxClient(event_hooks={"response": [_bounded_bodies]}, follow_redirects=False)
        _bound_by(http, lambda: self._until)
        self._client = openai.OpenAI(  # a query (?api_key=...) goes on every request, not into the path
            base_url=str(given.copy_with(query=None)) if given is not None else None,
            default_query=dict(given.params) if given is not None and given.query else None,
            api_key=key or "not-needed", max_retries=0, http_client=http)
        self._base = given if given is not None else httpx.URL(str(self._client.base_url))  # credentials kept
        self.url = redact(str(self._base).rstrip("/"))  # what messages, reports and records show
        self._window: int | None = settings.context_tokens
        self.window_source = "--context-tokens" if settings.context_tokens else ""
        self._asked_window = settings.context_tokens is not None
        self._chars_per_token = INITIAL_CHARS_PER_TOKEN
        self._ratio_source = "assumed"
        self._stream_options = True       # dropped for a server that refuses them
        self.tools_supported = True       # likewise
        self._tokenizer: tuple | None = None  # (path, body maker, reader) that worked; () none works
        self._tools_counted: dict[str, int] = {}  # json.dumps(tools) -> its tokens by the server's tokenizer

    @property
    def model(self) -> str:
        return self.settings.model

    def describe(self) -> str:
        return f"llm:{self.model} at {self.url}"

    # -- the window -------------------------------------------------------------------------------

    def window(self) -> int | None:
        """The context window in tokens, or None while unknown (asked of the server once)."""
        if not self._asked_window:
            self._asked_window = True
            self._window, self.window_source = self._discover_window()
        return self._window

    def max_tokens(self) -> int:
        """The reply budget of each request."""
        if self.settings.max_reply_tokens:
            return self.settings.max_reply_tokens
        window = self.window()
        if window is None:
            return REPLY_UNKNOWN_WINDOW
        return int(min(REPLY_MAX, max(REPLY_MIN, window * REPLY_SHARE)))

    def estimate_tokens(self, messages: list, tools: list | None = None) -> int:
        """Prompt tokens of ``messages``, and of the ``tools`` offered with them (which the chat
        template renders into the prompt: :meth:`tools_tokens`): counted by the server's tokenizer
        where it has one (plus the chat template's tokens), else from the characters-per-token
        ratio measured on its earlier answers (3.0 before the first)."""
        overhead = TEMPLATE_TOKENS_PER_MESSAGE * len(messages) + GENERATION_PROMPT_TOKENS
        if self._tokenizer != ():
            counts = [self._count(m.get("content") or "") for m in messages]
            if None not in counts:
                return sum(counts) + overhead + self.tools_tokens(tools)
        chars = sum(len(m.get("content") or "") for m in messages)
        return int(chars / self._chars_per_token) + overhead + self.tools_tokens(tools)

    def tools_tokens(self, tools: list | None) -> int:
        """Prompt tokens of the ``tools`` schema (0: none, or a server that refused them): its
        ``json.dumps`` counted as the messages are (the server's tokenizer, else the ratio), plus
        ``TEMPLATE_TOKENS_FOR_TOOLS``."""
        if not tools or not self.tools_supported:
            return 0
        text = json.dumps(tools)
        count = self._tools_counted.get(text)
        if count is None and self._tokenizer != ():
            count = self._count(text)
            if count is not None:
                self._tools_counted[text] = count
        if count is None:
            count = int(len(text) / self._chars_per_token)
        return count + TEMPLATE_TOKENS_FOR_TOOLS

    def reply_floor(self) -> int:
        """The fewest reply tokens a prompt must leave free: ``REPLY_MIN`` (enough for a rewrite
        target and two sentences), or the reply budget where that is smaller."""
        return min(REPLY_MIN, self.max_tokens())

    def fits(self, messages: list, tools: list | None = None) -> bool:
        """Whether ``messages`` and the ``tools`` offered with them leave room for ``reply_floor()``
        tokens of reply in the window (True while the window is unknown: the server's answer then
        tells)."""
        window = self.window()
        return window is None or self.estimate_tokens(messages, tools) + self.reply_floor() <= window

    def reply_budget(self, messages: list, tools: list | None = None) -> int:
        """``max_tokens`` of a request: ``max_tokens()``, cut to what the window leaves beside
        ``messages`` and ``tools``."""
        window = self.window()
        if window is None:
            return self.max_tokens()
        return max(1, min(self.max_tokens(), window - self.estimate_tokens(messages, tools)))

    def learn_window(self, window: int, source: str) -> None:
        self._window, self.window_source, self._asked_window = window, source, True

    # -- one request ------------------------------------------------------------------------------

    def check(self) -> None:
        """One request of one token, before a run starts (``swizzleperf optimize / eval --model``):
        an endpoint that is down, refuses the key or does not serve the model stops the command
        in one line, before anything is recorded, instead of after the baseline and a stalled run.

        Raises:
            ProposerError: the endpoint gave no usable answer (the message says what it did).
        """
        messages = [{"role": "user", "content": "Reply with the word OK."}]
        exchange = self.request(messages, time.monotonic() + self.settings.deadline_s, 1, max_tokens=1)
        if exchange.outcome.startswith("deadline"):
            raise ProposerError(f"LLM endpoint {self.url}: no answer to a one-token request within the "
                                f"{self.settings.deadline_s:g} s of --llm-timeout ({exchange.outcome})")
        if exchange.outcome != "ok":
            raise ProposerError(_endpoint_message(self, exchange, 1))

    def request(self, messages: list, deadline: float, n: int, tools: list | None = None,
                temperature: float | None = None, max_tokens: int | None = None) -> Exchange:
        """Send ``messages`` once, streamed, and read the reply until it ends or ``deadline``
        (``time.monotonic()`` seconds) passes; ``tools`` are offered to the model (OpenAI's
        ``tools``), dropped for good if the server refuses them; ``max_tokens``: the reply budget
        (default :meth:`reply_budget`). Never raises for the endpoint's
        faults: the exchange's ``outcome`` says what happened, any URL in it redacted; an answer
        that is not a chat completion (JSON too deep, a count that is text or 10^23, a field of the
        wrong type: ``wire.py``) is ``MALFORMED``, what was received kept in ``reply``.

        Raises:
            ContextOverflow: the server refused the prompt as longer than its window.
        """
        exchange = Exchange(n=n, started_at=time.time(), messages=messages,
                            max_tokens=max_tokens or self.reply_budget(messages, tools),
                            temperature=self.settings.temperature if temperature is None else temperature)
        start = time.monotonic()
        remaining = deadline - start
        if remaining <= 0:
            exchange.outcome = "deadline: not sent"
            return exchange
        try:
            self._until = deadline
            self._stream(messages, exchange, deadline, remaining, tools)
        except openai.APITimeoutError:
            exchange.outcome = f"deadline: no answer within {remaining:.1f} s"
        except _TIMEOUTS:
            exchange.outcome = f"deadline: cancelled after {time.monotonic() - start:.1f} s"
        except openai.APIConnectionError as exc:
            exchange.outcome = f"unreachable: {_reason(exc)}"
        except _TRANSPORT_ERRORS as exc:
            exchange.outcome = f"connection lost: {_one_line(str(exc) or type(exc).__name__)}"
        except openai.APIStatusError as exc:
            exchange.outcome = f"HTTP {exc.status_code}: {_short_message(exc)}"
        except _Malformed as exc:
            exchange.outcome = f"{MALFORMED}: {exc}"
            exchange.reply = exc.received[:KEPT_RECEIVED_CHARS]
            exchange.finish_reason, exchange.tool_calls = None, []
        exchange.outcome = redact(exchange.outcome)
        exchange.seconds = time.monotonic() - start
        if not exchange.tokens_source.startswith("server") and exchange.outcome != "ok" and not exchange.reply \
                and not exchange.outcome.startswith("deadline: cancelled"):
            return exchange  # nothing processed that we know of
        if not exchange.tokens_source.startswith("server"):
            self._estimate(exchange)
        return exchange

    def _open(self, options: dict):
        """``(manager, response)`` of one request; the caller closes the manager (which closes the
        connection: a server then stops generating)."""
        manager = self._client.chat.completions.with_streaming_response.create(**options)
        return manager, manager.__enter__()

    def _stream(self, messages: list, exchange: Exchange, deadline: float, remaining: float,
                tools: list | None = None) -> None:
        options = dict(model=self.model, messages=messages, temperature=exchange.temperature,
                       max_tokens=exchange.max_tokens, stream=True,
                       timeout=httpx.Timeout(remaining, connect=min(10.0, remaining)))
        if self._stream_options:
            options["stream_options"] = {"include_usage": True}
        if tools and self.tools_supported:
            options["tools"] = tools
        exchange.tools_tokens = self.tools_tokens(options.get("tools"))
        try:
            manager, response = self._open(options)
        except openai.BadRequestError as exc:
            if self._stream_options and "stream_options" in str(exc):
                self._stream_options = False
                return self._stream(messages, exchange, deadline, remaining, tools)
            if "tools" in options and "tool" in str(exc).lower():
                self.tools_supported = False
                return self._stream(messages, exchange, deadline, remaining, tools)
            self._overflow(str(exc), _short_message(exc))
            raise
        try:
            kind = response.headers.get("content-type", "")
            if "text/event-stream" in kind:
                self._read_events(response, exchange, deadline)
            else:  # a server that ignored stream=True, or garbage
                self._read_whole(_body(response, deadline), exchange)
        finally:
            manager.__exit__(None, None, None)  # closes the connection: the server stops generating
        if exchange.outcome == EMPTY_STREAM:
            self._diagnose(messages, exchange, deadline, options.get("tools"))

    def _diagnose(self, messages: list, exchange: Exchange, deadline: float, tools: list | None = None) -> None:
        """Ask again, not streamed, for one token, to learn why a stream came back empty: an
        overlong prompt is then an HTTP 400 that names the window (raised as ContextOverflow);
        otherwise the stream's outcome stands (the retry policy takes it as transient). The
        ``tools`` the stream carried go with it: they are part of the prompt's length."""
        for _ in range(3):  # the failed stream's connection may still be closing: a new one
            remaining = deadline - time.monotonic()
            if remaining <= 1:
                return
            try:
                manager, response = self._open(dict(
                    model=self.model, messages=messages, max_tokens=1, temperature=self.settings.temperature,
                    timeout=httpx.Timeout(remaining, connect=min(10.0, remaining)),
                    **({"tools": tools} if tools else {})))
                break
            except openai.APIConnectionError:
                time.sleep(0.5)
            except openai.BadRequestError as exc:
                self._overflow(str(exc), _short_message(exc))
                exchange.outcome = f"{EMPTY_STREAM}; asked again: HTTP 400: {_short_message(exc)}"
                return
            except openai.OpenAIError:
                return
        else:
            return
        try:
            answer = self._completion(_body(response, deadline))
        except (_Malformed, *_TRANSPORT_ERRORS, *_TIMEOUTS):
            return
        finally:
            manager.__exit__(None, None, None)
        usage = answer.usage
        if usage is not None and usage.prompt_tokens:  # the second request's prompt was processed
            exchange.prompt_tokens, exchange.completion_tokens = usage.prompt_tokens, usage.completion_tokens or 0
            exchange.tokens_source = "server (the one-token request that asked why the stream was empty)"

    def _overflow(self, text: str, short: str) -> None:
        """Raise ContextOverflow (learning the window where the message names it) when an error's
        ``text`` is about the prompt's length; return otherwise. ``short``: its one-line form."""
        window = _window_in(text)
        if window or _is_overflow(text):
            if window:
                self.learn_window(window, "the server's HTTP 400")
            raise ContextOverflow(redact(f"the prompt does not fit the model's context window: {short}"),
                                  window) from None

    def _read_events(self, response, exchange: Exchange, deadline: float) -> None:
        """The server-sent events of a streamed reply, each checked (``wire.Completion``) before
        use; stops at ``[DONE]``, the deadline, or ``wire.MAX_TEXT_CHARS`` of reply."""
        parts, calls = [], {}
        try:
            self._read_event_data(response, exchange, deadline, parts, calls)
        except _TIMEOUTS:  # a read that the deadline ended (chat.py _bound_by): what came is kept
            exchange.outcome = "deadline: cancelled while the reply was streaming"
        exchange.reply = "".join(parts)
        if exchange.finish_reason is None and exchange.outcome == "ok" and time.monotonic() > deadline:
            exchange.outcome = "deadline: cancelled while the reply was streaming"  # stopped between events
        if not parts and not calls and exchange.finish_reason is None and exchange.outcome == "ok":
            exchange.outcome = EMPTY_STREAM
        # a call with no name is kept (name ""): the proposer answers it with why (#41), never "the reply is empty"
        exchange.tool_calls = [{**c, "id": c["id"] or f"call_{i}"} for i, c in sorted(calls.items())]
        if exchange.tokens_source == "server" and exchange.outcome == "ok":
            self._learn_ratio(exchange)

    def _read_event_data(self, response, exchange: Exchange, deadline: float, parts: list, calls: dict) -> None:
        """The loop of :meth:`_read_events`: ``parts`` (the reply's text) and ``calls`` filled as events come."""
        size = 0
        for data in _events(response.iter_bytes(), deadline):
            if data.strip() == "[DONE]":
                break
            event = self._checked(data, "a streamed event")
            if isinstance(event, wire.StreamError):
                self._stream_error(event, data)
            if event.usage is not None and event.usage.prompt_tokens is not None:
                exchange.prompt_tokens = event.usage.prompt_tokens
                exchange.completion_tokens = event.usage.completion_tokens or 0
                exchange.tokens_source = "server"
            for choice in event.choices:
                delta = choice.delta or choice.message
                if delta is not None and delta.content:
                    parts.append(delta.content)
                    size += len(delta.content)
                for call in (delta.tool_calls or []) if delta is not None else []:
                    size += self._add_call(calls, call, data)
                if choice.finish_reason:
                    exchange.finish_reason = choice.finish_reason
            if size > wire.MAX_TEXT_CHARS:
                raise _Malformed(f"the reply is longer than {wire.MAX_TEXT_CHARS} characters (the stream "
                                 f"was closed)", "".join(parts))
            if time.monotonic() > deadline and exchange.finish_reason is None:
                exchange.outcome = "deadline: cancelled while the reply was streaming"
                break

    def _add_call(self, calls: dict, call: wire.ToolCall, data: str) -> int:
        """Merge one streamed tool-call delta into ``calls``; returns the characters it added."""
        index = call.index if call.index is not None else len(calls)
        if index not in calls and len(calls) >= wire.MAX_ITEMS:
            raise _Malformed(f"more than {wire.MAX_ITEMS} tool calls in one reply", data)
        entry = calls.setdefault(index, {"id": "", "name": "", "arguments": ""})
        entry["id"] = call.id or entry["id"]
        function = call.function
        if function is not None:
            entry["name"] = function.name or entry["name"]
            entry["arguments"] += function.arguments or ""
        return len(function.arguments or "") if function is not None else 0

    def _stream_error(self, event: wire.StreamError, data: str) -> None:
        """An error event in a stream: an overlong prompt is a ContextOverflow, anything else
        ends the request (``MALFORMED`` is not retried)."""
        message = event.error if isinstance(event.error, str) else (event.error.message or "")
        self._overflow(message, _one_line(message))
        raise _Malformed(f"the server sent an error instead of a reply: {_one_line(message) or '(no message)'}; "
                         f"received: {untrusted.preview(data)}", data)

    def _checked(self, data: str, what: str) -> wire.Completion | wire.StreamError:
        """One JSON event or body, loaded within bounds and checked against its shape."""
        try:
            body = untrusted.loads(data, what)
            if isinstance(body, dict) and "error" in body and not body.get("choices"):
                return untrusted.validated(wire.StreamError, body, what, data)
            return untrusted.validated(wire.Completion, body, what, data)
        except untrusted.UntrustedInput as exc:
            raise _Malformed(str(exc), data) from None

    def _completion(self, body: bytes) -> wire.Completion:
        text = body.decode("utf-8", errors="backslashreplace")
        answer = self._checked(text, "the answer")
        if isinstance(answer, wire.StreamError) or not answer.choices:
            raise _Malformed(f"the answer has no choices; received: {untrusted.preview(text)}", text)
        if answer.choices[0].message is None:
            raise _Malformed(f"the answer's choice has no message; received: {untrusted.preview(text)}", text)
        return answer

    def _read_whole(self, body: bytes, exchange: Exchange) -> None:
        """A whole (not streamed) chat completion, checked against ``wire.Completion``."""
        try:
            body.decode("utf-8")
        except UnicodeDecodeError:
            raise _Malformed(f"the answer is not UTF-8; received: {untrusted.preview(body)}",
                             body.decode("utf-8", errors="backslashreplace")) from None
        answer = self._completion(body)
        choice = answer.choices[0]
        exchange.reply, exchange.finish_reason = choice.message.content or "", choice.finish_reason
        exchange.tool_calls = [{"id": c.id or f"call_{i}", "name": (c.function and c.function.name) or "",
                                "arguments": (c.function and c.function.arguments) or ""}
                               for i, c in enumerate(choice.message.tool_calls or [])]
        if answer.usage is not None and answer.usage.prompt_tokens is not None:
            exchange.prompt_tokens = answer.usage.prompt_tokens
            exchange.completion_tokens = answer.usage.completion_tokens or 0
            exchange.tokens_source = "server"
            self._learn_ratio(exchange)

    def _learn_ratio(self, exchange: Exchange) -> None:
        chars = sum(len(m.get("content") or "") for m in exchange.messages)
        text_tokens = (exchange.prompt_tokens - TEMPLATE_TOKENS_PER_MESSAGE * len(exchange.messages)
                       - exchange.tools_tokens)
        if chars > 200 and text_tokens > 0:
            self._chars_per_token = max(1.0, 0.95 * chars / text_tokens)  # 5 % margin
            self._ratio_source = "measured"

    # -- estimates where the server gave no usage --------------------------------------------------

    def _estimate(self, exchange: Exchange) -> None:
        counts = [self._count(m.get("content") or "") for m in exchange.messages]
        counts.append(self._count(exchange.reply) if exchange.reply else 0)
        tools = (f", and {exchange.tools_tokens} for the tools' schema rendered into the prompt"
                 if exchange.tools_tokens else "")
        if None not in counts:
            exchange.prompt_tokens = (sum(counts[:-1]) + TEMPLATE_TOKENS_PER_MESSAGE * len(exchange.messages)
                                      + GENERATION_PROMPT_TOKENS + exchange.tools_tokens)
            exchange.completion_tokens = counts[-1]
            chars = sum(len(m.get("content") or "") for m in exchange.messages)
            if chars > 200 and sum(counts[:-1]) > 0 and self._ratio_source != "measured":
                self._chars_per_token = max(1.0, 0.95 * chars / sum(counts[:-1]))
                self._ratio_source = "measured with the server's tokenizer"
            exchange.tokens_source = (f"estimated: the server's tokenizer, plus {TEMPLATE_TOKENS_PER_MESSAGE} "
                                      f"per message and {GENERATION_PROMPT_TOKENS} for the chat template{tools}")
            return
        exchange.prompt_tokens = self.estimate_tokens(exchange.messages) + exchange.tools_tokens
        exchange.completion_tokens = int(len(exchange.reply) / self._chars_per_token)
        exchange.tokens_source = (f"estimated: {self._chars_per_token:.2f} characters per token "
                                  f"({self._ratio_source}){tools}")

    def _count(self, text: str) -> int | None:
        """Tokens of ``text`` by the server's own tokenizer, or None where it offers none."""
        if not text:
            return 0
        if self._tokenizer == ():
            return None
        candidates = [self._tokenizer] if self._tokenizer else [
            ("/tokenize", lambda t: {"content": t, "add_special": False}),
            ("/extras/tokenize", lambda t: {"input": t, "model": self.model}),
            ("/tokenize", lambda t: {"model": self.model, "prompt": t, "add_special_tokens": False}),
        ]
        for path, body in candidates:
            answer = self._side("POST", self._at_root(path), wire.Tokens, f"the answer of {path}", json=body(text))
            count = answer.number() if answer is not None else None
            if count is None:
                continue
            self._tokenizer = (path, body)
            return count
        self._tokenizer = ()
        return None

    # -- what the server says about itself ---------------------------------------------------------

    def _at_root(self, path: str) -> httpx.URL:
        """``path`` at the server's root (the base URL less its ``/v1``), credentials and query kept."""
        base = self._base.path.rstrip("/")
        return self._base.copy_with(path=(base[:-3] if base.endswith("/v1") else base) + path)

    def _side(self, method: str, url: httpx.URL, model: type, what: str, **options):
        """A side request (/props, /v1/models, /tokenize): its JSON checked against ``model``, or
        None when the server does not answer it usably (any answer over ``MAX_SIDE_BYTES``, too deep,
        of the wrong shape included)."""
        timeout = SIDE_GET_TIMEOUT_S if method == "GET" else SIDE_POST_TIMEOUT_S
        until = time.monotonic() + timeout  # in all: a server that trickles its answer is not waited for
        try:
            with _bound_by(httpx.Client(event_hooks={"response": [_bounded_bodies]}), lambda: until) as client, \
                    client.stream(method, url, timeout=timeout, **options) as answer:
                answer.raise_for_status()
                data = bytearray()
                for chunk in answer.iter_bytes():
                    data += chunk
                    if len(data) > MAX_SIDE_BYTES:
                        return None
            return untrusted.validated(model, untrusted.loads(bytes(data), what), what, bytes(data))
        except (httpx.HTTPError, untrusted.UntrustedInput, _Malformed):
            return None

    def _discover_window(self) -> tuple[int | None, str]:
        """The window as the server states it: llama.cpp's ``/props``, vLLM's ``/v1/models``."""
        props = self._side("GET", self._at_root("/props"), wire.Props, "the answer of /props")
        if props is not None:
            n_ctx = (props.default_generation_settings.n_ctx if props.default_generation_settings else None) \
                or props.n_ctx
            if n_ctx:
                return n_ctx, "the server's /props"
        models = self._side("GET", self._base.copy_with(path=self._base.path.rstrip("/") + "/models"),
                            wire.Models, "the answer of /v1/models")
        for entry in models.data if models is not None else []:
            if entry.id == self.model or len(models.data) == 1:
                length = entry.max_model_len or (entry.meta.n_ctx if entry.meta else None)
                if length:
                    return length, "the server's /v1/models"
        return None, "unknown (the server does not say)"


#: A fenced code block opened and closed (fences included): a reply cut by the deadline after it
#: still holds a rewrite; a re-ask shows it where the whole reply does not fit.
CLOSED_CODE_BLOCK = re.compile(r"```[^\n`]*\n.*?\n[ \t]*```", re.S)


class Conversation:
    """The requests of one proposal, under one deadline; ``exchanges`` is its transcript."""

    def __init__(self, client: ChatClient) -> None:
        self.client = client
        self.deadline = time.monotonic() + client.settings.deadline_s
        self.exchanges: list[Exchange] = []

    def ask(self, messages: list, tools: list | None = None, reask: int = 0,
            prompt_detail: int | None = None) -> Exchange:
        """One reply (``outcome == "ok"``), retrying transient faults within the deadline; the
        ``reask``-th re-ask of a proposal samples ``REASK_TEMPERATURE_STEP`` x ``reask`` hotter;
        every request it makes records ``prompt_detail`` (the proposer's level of detail).

        Raises:
            ProposerError: the deadline passed, the endpoint is unreachable or refuses after the
                retries, or it answered with something that is not a chat completion; the
                message says which, and what it took.
            ContextOverflow: the prompt is longer than the server's window.
        """
        settings = self.client.settings
        temperature = min(max(1.0, settings.temperature), settings.temperature + REASK_TEMPERATURE_STEP * reask)
        pause = 1.0
        for attempt in range(1 + settings.retries):
            try:
                exchange = self.client.request(messages, self.deadline, len(self.exchanges) + 1, tools,
                                               temperature)
            except ProposerError as exc:
                self.exchanges.append(Exchange(n=len(self.exchanges) + 1, started_at=time.time(),
                                               messages=messages, outcome=str(exc), prompt_detail=prompt_detail))
                raise self.error(str(exc), type(exc), getattr(exc, "window", None)) from None  # ContextOverflow
            exchange.prompt_detail = prompt_detail
            self.exchanges.append(exchange)
            if exchange.outcome == "ok":
                return exchange
            if exchange.outcome.startswith("deadline: cancelled") and CLOSED_CODE_BLOCK.search(exchange.reply or ""):
                # the code came first, as asked, and was whole before the deadline cut the rationale
                # (a real 1.5B model on a CPU, 2026-12-07): read, not thrown away
                exchange.outcome = f"ok: {exchange.outcome}, after a closed code block"
                exchange.finish_reason = exchange.finish_reason or "deadline"
                return exchange
            if exchange.outcome.startswith("deadline"):
                raise self.error(f"LLM endpoint {self.client.url}: no usable reply within the "
                                 f"{settings.deadline_s:g} s deadline of a proposal "
                                 f"({len(self.exchanges)} request(s); {exchange.outcome})")
            transient = exchange.outcome.startswith(("unreachable", "connection lost", EMPTY_STREAM)) or any(
                exchange.outcome.startswith(f"HTTP {code}") for code in _TRANSIENT)
            if not transient or attempt == settings.retries or \
                    time.monotonic() + pause >= self.deadline:
                break
            time.sleep(pause)
            pause *= 2
        raise self.error(_endpoint_message(self.client, exchange, len(self.exchanges)))

    def error(self, message: str, kind: type = ProposerError, window: int | None = None) -> ProposerError:
        """The error that ends a proposal, with what it spent and its requests; URLs redacted."""
        message, totals = redact(message), self.totals()
        if kind is ContextOverflow:
            error = ContextOverflow(message, window)
            error.prompt_tokens, error.completion_tokens, error.cost_usd = (
                totals["prompt_tokens"], totals["completion_tokens"], totals["cost_usd"])
        else:
            error = ProposerError(message, **totals)
        error.exchanges = [e.to_dict() for e in self.exchanges]
        return error

    def totals(self) -> dict:
        """Tokens and cost of every request so far, failed ones included."""
        s = self.client.settings
        prompt = sum(e.prompt_tokens for e in self.exchanges)
        completion = sum(e.completion_tokens for e in self.exchanges)
        return {"prompt_tokens": prompt, "completion_tokens": completion,
                "cost_usd": prompt * s.price_in_per_mtok / 1e6 + completion * s.price_out_per_mtok / 1e6}

    def transcript(self) -> list:
        return [e.to_dict() for e in self.exchanges]


def _endpoint_message(client: ChatClient, exchange: Exchange, count: int) -> str:
    outcome = exchange.outcome
    if outcome.startswith("unreachable"):
        text = f"LLM endpoint {client.url} {outcome}"
    elif outcome.startswith("HTTP 401"):
        text = f"LLM endpoint {client.url} rejected the API key (set OPENAI_API_KEY): {outcome}"
    elif outcome.startswith("HTTP 404"):
        text = f"model '{client.model}' not found at {client.url}: {outcome}"
    elif outcome.startswith(MALFORMED):
        text = f"LLM endpoint {client.url} answered with something that is {outcome}"
    else:
        text = f"LLM endpoint {client.url} returned {outcome}"
    return text + (f" ({count} requests)" if count > 1 else "")


class _Malformed(Exception):
    """An answer that is not a chat completion; ``received``: what came (for the transcript)."""

    def __init__(self, message: str, received: str):
        super().__init__(message)
        self.received = received


def _bounded_bodies(response) -> None:
    """A response hook of the HTTP client (httpx, or httpx2 under the openai SDK) that takes the
    answer's decoding from the library: the library inflates a gzip, deflate or zstd body one
    network read at a time, whole (32 KB of zstd became 2 GB before any cap was checked, #41);
    here each read is inflated in pieces of at most ``untrusted.DECODE_CHUNK`` bytes
    (``untrusted.decoded``), so that every reader's cap counts decoded bytes as they come, and no
    answer decodes past ``MAX_ANSWER_BYTES`` (the SDK's own read of an error's body included).

    Reading the answer then raises ``_Malformed``: a coding not decoded here, more codings than
    ``untrusted.MAX_CODINGS``, a body that does not decode (any fault of the decoders, in one line),
    or one that decodes past ``MAX_ANSWER_BYTES``; the connection's own errors pass as they are."""
    coding = response.headers.get("content-encoding")
    library = importlib.import_module(type(response).__module__.split(".")[0])

    class Decoded(library.SyncByteStream):
        def __init__(self, raw) -> None:
            self._raw = raw

        def __iter__(self):
            total = 0
            try:
                for piece in untrusted.decoded(self._raw, coding, "the answer"):
                    total += len(piece)
                    if total > MAX_ANSWER_BYTES:
                        raise _Malformed(f"the answer decodes to more than {MAX_ANSWER_BYTES} bytes "
                                         f"(Content-Encoding {coding or 'none'}; the connection was closed)", "")
                    yield piece
            except untrusted.UntrustedInput as exc:
                raise _Malformed(str(exc), "") from None
            except (_Malformed, *_HTTP_ERRORS):
                raise   # the connection's own faults: timeouts, a lost connection (the callers' cases)
            except Exception as exc:   # zlib's or zstandard's C code on a hostile body: one line, not a traceback
                raise _Malformed(f"the answer does not decode (Content-Encoding {coding or 'none'}): "
                                 f"{type(exc).__name__}{': ' + _one_line(str(exc)) if str(exc) else ''}",
                                 "") from None

        def close(self) -> None:
            self._raw.close()

    response.stream = Decoded(response.stream)
    if coding:
        del response.headers["content-encoding"]


def _bound_by(client, until):
    """``client`` (an httpx or httpx2 client) with every socket read and write of its connections
    ending by ``until()`` (``time.monotonic()`` seconds), the response's headers and an error's
    body included: the libraries' timeouts are per read, so a server that sends a byte a second
    (of headers, of a 500's body, of a /tokenize answer) held the agent past any deadline (#41)."""
    for transport in [client._transport, *client._mounts.values()]:
        pool = getattr(transport, "_pool", None)
        if pool is None or not hasattr(pool, "_network_backend"):
            continue
        pool._network_backend = _DeadlineBackend(pool._network_backend, until)
    return client


class _DeadlineBackend:
    """httpcore's (or httpcore2's) network backend whose streams end by ``until()``."""

    def __init__(self, backend, until) -> None:
        self._backend, self._until = backend, until

    def connect_tcp(self, *args, **kwargs):
        return _DeadlineStream(self._backend.connect_tcp(*args, **kwargs), self._until)

    def connect_unix_socket(self, *args, **kwargs):
        return _DeadlineStream(self._backend.connect_unix_socket(*args, **kwargs), self._until)

    def sleep(self, seconds: float) -> None:
        self._backend.sleep(seconds)


class _DeadlineStream:
    """A connection whose reads and writes wait at most until ``until()``; past it, the library's
    own ``ReadTimeout`` / ``WriteTimeout`` (which the callers take as the deadline)."""

    def __init__(self, stream, until) -> None:
        self._stream, self._until = stream, until
        self._library = importlib.import_module(type(stream).__module__.split(".")[0])

    def _left(self, timeout: float | None, error: str) -> float:
        left = self._until() - time.monotonic()
        if left <= 0:
            raise getattr(self._library, error)("the deadline passed")
        return left if timeout is None else min(timeout, left)

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._stream.read(max_bytes, self._left(timeout, "ReadTimeout"))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._stream.write(buffer, self._left(timeout, "WriteTimeout"))

    def close(self) -> None:
        self._stream.close()

    def start_tls(self, ssl_context, server_hostname: str | None = None, timeout: float | None = None):
        tls = self._stream.start_tls(ssl_context, server_hostname, self._left(timeout, "ConnectTimeout"))
        return _DeadlineStream(tls, self._until)

    def get_extra_info(self, info: str):
        return self._stream.get_extra_info(info)


def _body(response, deadline: float) -> bytes:
    """A whole answer, read within the deadline and ``MAX_ANSWER_BYTES``.

    Raises:
        httpx.ReadTimeout: the deadline passed while reading.
        _Malformed: the answer is longer than ``MAX_ANSWER_BYTES``.
    """
    data = bytearray()
    for chunk in response.iter_bytes():
        data += chunk
        if len(data) > MAX_ANSWER_BYTES:
            raise _Malformed(f"the answer is longer than {MAX_ANSWER_BYTES} bytes (the connection was "
                             f"closed); received: {untrusted.preview(bytes(data[:4096]))}",
                             bytes(data[:KEPT_RECEIVED_CHARS]).decode("utf-8", errors="backslashreplace"))
        if time.monotonic() > deadline:
            raise httpx.ReadTimeout("the deadline passed while the answer was being read")
    return bytes(data)


def _events(chunks, deadline: float):
    """The ``data`` of each server-sent event in a byte stream (lines joined with newlines), one
    linear pass; comments and other fields skipped.

    Raises:
        _Malformed: a line over ``MAX_LINE_BYTES``, a stream over ``MAX_ANSWER_BYTES``, or data
            that is not UTF-8.
    """
    buffer, data, total, scanned = bytearray(), [], 0, 0
    for chunk in chunks:
        total += len(chunk)
        if total > MAX_ANSWER_BYTES:
            raise _Malformed(f"the stream is longer than {MAX_ANSWER_BYTES} bytes (it was closed)", "")
        buffer += chunk
        while True:
            end = buffer.find(b"\n", scanned)
            if end < 0:
                scanned = len(buffer)
                if scanned > MAX_LINE_BYTES:
                    raise _Malformed(f"a streamed line is longer than {MAX_LINE_BYTES} bytes; received: "
                                     f"{untrusted.preview(bytes(buffer[:4096]))}",
                                     bytes(buffer[:KEPT_RECEIVED_CHARS]).decode("utf-8", errors="backslashreplace"))
                break
            line = bytes(buffer[:end]).rstrip(b"\r")
            del buffer[:end + 1]
            scanned = 0
            if not line:
                if data:
                    yield _decoded(b"\n".join(data))
                    data = []
            elif not line.startswith(b":"):
                field, _, value = line.partition(b":")
                if field == b"data":
                    data.append(value[1:] if value.startswith(b" ") else value)
        if time.monotonic() > deadline:
            break
    if buffer.strip():
        field, _, value = bytes(buffer).rstrip(b"\r").partition(b":")
        if field == b"data":
            data.append(value[1:] if value.startswith(b" ") else value)
    if data:
        yield _decoded(b"\n".join(data))


def _decoded(data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise _Malformed(f"a streamed event is not UTF-8; received: {untrusted.preview(data)}",
                         data[:KEPT_RECEIVED_CHARS].decode("utf-8", errors="backslashreplace")) from None


def _window_in(message: str) -> int | None:
    for pattern in _WINDOW_PATTERNS:
        found = pattern.search(message)
        if found and 0 < int(found.group(1)) <= wire.MAX_WINDOW:
            return int(found.group(1))
    return None


def _is_overflow(message: str) -> bool:
    text = message.lower()
    return "context" in text and any(w in text for w in ("exceed", "too long", "maximum", "length"))


def _reason(exc: openai.APIConnectionError) -> str:
    """The underlying cause of a connection error (``[Errno 111] Connection refused``)."""
    cause = exc.__cause__
    while cause is not None and cause.__cause__ is not None and not str(cause):
        cause = cause.__cause__
    return _one_line(str(cause) if cause is not None and str(cause) else exc.message)


def _short_message(exc: openai.APIStatusError) -> str:
    """The error's own message from the body when it is text, else the SDK's text; one line."""
    body = exc.body
    if isinstance(body, dict):
        error = body.get("error", body)
        message = error.get("message") if isinstance(error, dict) else error
        if isinstance(message, str) and message:
            return _one_line(message)
    return _one_line(exc.message if isinstance(exc.message, str) else type(exc).__name__)


def _one_line(text: str, limit: int = 200) -> str:
    line = " ".join(text[:limit * 8].split())
    return line if len(line) <= limit else line[:limit - 3] + "..."
