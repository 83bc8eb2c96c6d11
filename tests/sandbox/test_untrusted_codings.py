"""A body's list of content codings from a hostile server (#41, red team 41i): ``decoded`` stacked one
generator per listed coding, so ``Content-Encoding: gzip,gzip,...`` (4 000 of them) was a
RecursionError at the first read instead of a one-line refusal; and a zlib error while draining
output still held inside zlib escaped as ``zlib.error``. Both are ``UntrustedInput`` now."""
from __future__ import annotations

import gzip
import zlib

import pytest

from swizzleperf.sandbox import untrusted


@pytest.mark.parametrize("count", [untrusted.MAX_CODINGS + 1, 4000])
def test_more_codings_than_the_bound_are_one_line(count):
    header = ",".join(["gzip"] * count)
    with pytest.raises(untrusted.UntrustedInput) as info:
        list(untrusted.decoded([b"\x1f\x8b junk"], header, "the answer"))
    message = str(info.value)
    assert f"{count} content codings" in message and f"at most {untrusted.MAX_CODINGS}" in message, message
    assert "\n" not in message and len(message) < 400, message


def test_identity_entries_do_not_count_and_a_stack_within_the_bound_decodes():
    body = b'{"ok": true}'
    packed = body
    for _ in range(untrusted.MAX_CODINGS):
        packed = gzip.compress(packed)
    header = ", ".join(["identity"] * 50 + ["gzip"] * untrusted.MAX_CODINGS)
    assert b"".join(untrusted.decoded([packed], header, "the answer")) == body


class _StuckInflater:
    """A decompressor whose first call fills the piece from input it consumed whole, and whose
    next call (the drain of output still inside zlib) finds the data corrupt."""

    eof, unused_data, unconsumed_tail = False, b"", b""

    def __init__(self) -> None:
        self.calls = 0

    def decompress(self, data: bytes, max_length: int) -> bytes:
        self.calls += 1
        if self.calls > 1:
            raise zlib.error("Error -3 while decompressing data: invalid distance too far back")
        return b"x" * max_length


def test_a_zlib_error_while_draining_is_one_line(monkeypatch):
    monkeypatch.setattr(untrusted.zlib, "decompressobj", lambda wbits: _StuckInflater())
    with pytest.raises(untrusted.UntrustedInput) as info:
        list(untrusted.decoded([b"anything"], "gzip", "the answer"))
    message = str(info.value)
    assert "does not decode as gzip" in message and "invalid distance" in message and "\n" not in message
