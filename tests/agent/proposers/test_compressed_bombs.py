"""Compression bombs from a hostile server (#41): a gzip, deflate or zstd answer to ``/props``,
``/tokenize`` or the chat completion is inflated in pieces and capped on its *decoded* size as it
streams (agent/proposers/chat.py ``_bounded_bodies``, sandbox/untrusted.py ``decoded``); before,
the HTTP library inflated each network read whole (32 KB of zstd took the agent from 0.44 to
2.56 GB). Each bomb here decodes to 256 MiB; while the proposer reads it the test process may
allocate at most 48 MiB for a side answer (capped at 8 MiB), the answer's cap (64 MiB) and 16 MiB
for a chat completion (tracemalloc counts every bytes object the decoders make; before the fix:
142 MiB for gzip, 512 MiB for zstd), and the result is the ordinary one-line refusal or the
fallback (window unknown, tokens estimated)."""
from __future__ import annotations

import tracemalloc
import zlib

import pytest
from fake_openai import FakeOpenAIServer
from test_llm_proposer import GOOD_REPLY, GROUPED, _context

from swizzleperf.agent.proposers.base import ProposerError
from swizzleperf.agent.proposers.chat import MAX_ANSWER_BYTES
from swizzleperf.agent.proposers.llm import LLMProposer

try:
    import zstandard
except ImportError:  # the test of zstd is then skipped with the reason
    zstandard = None

DECODED_BYTES = 256 << 20
PEAK_BYTES = 48 << 20
ANSWER_PEAK_BYTES = MAX_ANSWER_BYTES + (16 << 20)
CODINGS = ["gzip", "deflate", pytest.param("zstd", marks=pytest.mark.skipif(
    zstandard is None, reason="the zstandard module is not installed: neither httpx nor we decode zstd"))]


def _bomb(coding: str) -> bytes:
    """``DECODED_BYTES`` of ``{`` (a JSON body that never ends) compressed, built a MiB at a time."""
    block = b"{" * (1 << 20)
    if coding == "zstd":
        packer = zstandard.ZstdCompressor(level=3).compressobj()
        return b"".join(packer.compress(block) for _ in range(DECODED_BYTES >> 20)) + packer.flush()
    packer = zlib.compressobj(9, zlib.DEFLATED, 31 if coding == "gzip" else 15)
    return b"".join(packer.compress(block) for _ in range(DECODED_BYTES >> 20)) + packer.flush()


@pytest.fixture(scope="module")
def bombs() -> dict:
    return {}


def _peak(action) -> tuple[object, int]:
    tracemalloc.start()
    try:
        result = action()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("coding", CODINGS)
def test_a_props_bomb_is_ignored_within_bounded_memory(coding, bombs):
    bomb = bombs.setdefault(coding, _bomb(coding))
    with FakeOpenAIServer() as server:
        server.raw_routes["/props"] = server.raw_routes["/v1/models"] = bomb
        server.encodings["/props"] = server.encodings["/v1/models"] = coding
        proposer = LLMProposer("fake", base_url=server.base_url)
        window, peak = _peak(proposer.chat.window)
    assert window is None and "unknown" in proposer.chat.window_source
    assert peak < PEAK_BYTES, f"{peak / 2**20:.0f} MiB allocated reading a {len(bomb)}-byte {coding} answer"


@pytest.mark.parametrize("coding", CODINGS)
def test_a_tokenizer_bomb_falls_back_to_characters_within_bounded_memory(coding, bombs):
    bomb = bombs.setdefault(coding, _bomb(coding))
    with FakeOpenAIServer() as server:
        server.raw_routes["/tokenize"] = server.raw_routes["/extras/tokenize"] = bomb
        server.encodings["/tokenize"] = server.encodings["/extras/tokenize"] = coding
        server.reply(GOOD_REPLY, usage=False)
        proposal, peak = _peak(lambda: LLMProposer("fake", base_url=server.base_url).propose(_context()))
    assert proposal.source == GROUPED and proposal.exchanges[-1]["tokens_source"].startswith("estimated: ")
    assert peak < PEAK_BYTES, f"{peak / 2**20:.0f} MiB allocated reading a {len(bomb)}-byte {coding} answer"


@pytest.mark.parametrize("coding", CODINGS)
def test_a_completion_bomb_is_one_line_no_candidate_within_bounded_memory(coding, bombs):
    bomb = bombs.setdefault(coding, _bomb(coding))
    with FakeOpenAIServer() as server:
        server.encodings["/v1/chat/completions"] = coding
        server.reply_raw(bomb)
        proposer = LLMProposer("fake", base_url=server.base_url, retries=0, max_parse_retries=0)

        def refused():
            with pytest.raises(ProposerError) as info:
                proposer.propose(_context())
            return info
        info, peak = _peak(refused)
    message = str(info.value)
    assert "not a chat completion" in message and "than 67108864 bytes" in message, message  # MAX_ANSWER_BYTES
    assert "\n" not in message and len(message) < 1200
    assert peak < ANSWER_PEAK_BYTES, f"{peak / 2**20:.0f} MiB allocated reading a {len(bomb)}-byte {coding} answer"


def test_an_encoding_not_decoded_here_is_refused_in_one_line():
    with FakeOpenAIServer() as server:
        server.encodings["/v1/chat/completions"] = "br"
        server.reply_raw(b"\x1b\x00\x00")
        with pytest.raises(ProposerError) as info:
            LLMProposer("fake", base_url=server.base_url, retries=0, max_parse_retries=0).propose(_context())
    message = str(info.value)
    assert "not a chat completion" in message and "'br', which is not decoded here" in message, message
    assert "\n" not in message
