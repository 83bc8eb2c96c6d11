"""What an OpenAI-compatible server sends, as pydantic models: every field we read, with its type and
bounds; everything else is ignored. ``chat.py`` loads each body with ``untrusted.loads`` (depth,
integer size) and validates it with ``untrusted.validated`` against one of these, so a count that is
a string or 10^23, a ``finish_reason`` that is an object, or a list where text belongs is refused in
one line naming the field, never used.

Sources of the shapes: OpenAI's chat completion and chunk objects (``choices[].message`` /
``choices[].delta``, ``usage``, ``tool_calls[].function``), llama.cpp's ``/props``
(``default_generation_settings.n_ctx``) and ``/tokenize`` (``tokens``), llama-cpp-python's
``/extras/tokenize`` (``tokens``), vLLM's ``/tokenize`` (``count``) and ``/v1/models``
(``data[].max_model_len``).
"""
from __future__ import annotations

from typing import Annotated, Optional

from pydantic import BaseModel, ConfigDict, Field

#: The most tokens any one request may report (prompt or completion): 10^9 is three orders of
#: magnitude above the largest context windows served today (1-2 M tokens).
MAX_TOKENS = 10**9
#: The largest context window we believe (10^8 tokens, 50x today's largest).
MAX_WINDOW = 10**8
#: Characters of a name, id or finish reason (OpenAI's are under 64; generous).
MAX_NAME_CHARS = 256
#: Characters of a whole reply or of one tool call's arguments.
MAX_TEXT_CHARS = 1_000_000
#: Choices and tool calls of one answer (we ask for one choice; a model calls a few tools).
MAX_ITEMS = 64

Count = Annotated[int, Field(strict=True, ge=0, le=MAX_TOKENS)]
Name = Annotated[str, Field(strict=True, max_length=MAX_NAME_CHARS)]
Text = Annotated[str, Field(strict=True, max_length=MAX_TEXT_CHARS)]
Index = Annotated[int, Field(strict=True, ge=0, lt=MAX_ITEMS)]


class _Read(BaseModel):
    """A shape we read: unknown fields ignored, known ones strictly typed."""

    model_config = ConfigDict(extra="ignore", strict=True)


class Usage(_Read):
    prompt_tokens: Optional[Count] = None
    completion_tokens: Optional[Count] = None


class Function(_Read):
    name: Optional[Name] = None
    arguments: Optional[Text] = None


class ToolCall(_Read):
    index: Optional[Index] = None
    id: Optional[Name] = None
    function: Optional[Function] = None


class Message(_Read):
    """``choices[].message`` of a completion, or ``choices[].delta`` of a streamed chunk."""

    content: Optional[Text] = None
    tool_calls: Optional[Annotated[list[ToolCall], Field(max_length=MAX_ITEMS)]] = None


class Choice(_Read):
    message: Optional[Message] = None
    delta: Optional[Message] = None
    finish_reason: Optional[Name] = None


class Completion(_Read):
    """A chat completion, or one chunk of a streamed one (``choices`` may then be empty)."""

    choices: Annotated[list[Choice], Field(max_length=MAX_ITEMS)] = []
    usage: Optional[Usage] = None


class StreamError(_Read):
    """An error event in a stream (llama.cpp, vLLM): ``{"error": {"message": ...}}``."""

    class Detail(_Read):
        message: Optional[Text] = None

    error: Detail | Text


class Props(_Read):
    """llama.cpp's ``GET /props``."""

    class Settings(_Read):
        n_ctx: Optional[Annotated[int, Field(strict=True, ge=1, le=MAX_WINDOW)]] = None

    default_generation_settings: Optional[Settings] = None
    n_ctx: Optional[Annotated[int, Field(strict=True, ge=1, le=MAX_WINDOW)]] = None


class Models(_Read):
    """``GET /v1/models`` (vLLM gives ``max_model_len``, llama-cpp-python ``meta.n_ctx``)."""

    class Entry(_Read):
        class Meta(_Read):
            n_ctx: Optional[Annotated[int, Field(strict=True, ge=1, le=MAX_WINDOW)]] = None

        id: Optional[Name] = None
        max_model_len: Optional[Annotated[int, Field(strict=True, ge=1, le=MAX_WINDOW)]] = None
        meta: Optional[Meta] = None

    data: Annotated[list[Entry], Field(max_length=4096)] = []


class Tokens(_Read):
    """A tokenizer's answer: llama.cpp and llama-cpp-python list the ``tokens``, vLLM gives ``count``."""

    tokens: Optional[Annotated[list, Field(max_length=MAX_TEXT_CHARS)]] = None
    count: Optional[Count] = None

    def number(self) -> int | None:
        if self.tokens is not None:
            return len(self.tokens)
        return self.count
