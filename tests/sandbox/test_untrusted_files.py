"""sandbox/untrusted.py's readers of files and compressed bodies (#41): ``decoded`` undoes gzip
(several members), deflate (zlib-wrapped or raw) and zstd in pieces of at most ``DECODE_CHUNK``
and only as they are asked for; ``load_json_checked`` bounds a file's bytes and depth and checks
its shape; ``read_source`` reads a Python file as Python does and refuses one over its bound."""
from __future__ import annotations

import gzip
import itertools
import zlib

import pydantic
import pytest

from swizzleperf.sandbox import untrusted

PAYLOAD = b"".join(b"line %d\n" % i for i in range(50_000))


def _chunks(data: bytes, size: int = 1000) -> list:
    return [data[i:i + size] for i in range(0, len(data), size)]


def _zstd(data: bytes) -> bytes:
    zstandard = pytest.importorskip("zstandard", reason="the zstandard module is not installed")
    return zstandard.ZstdCompressor().compress(data)


@pytest.mark.parametrize("coding, encode", [
    ("gzip", lambda d: gzip.compress(d[:1000]) + gzip.compress(d[1000:])),   # two members
    ("x-gzip", gzip.compress),
    ("deflate", zlib.compress),
    ("deflate", lambda d: zlib.compress(d)[2:-4]),                           # raw, as some servers send
    ("zstd", _zstd),
    ("identity", lambda d: d),
    ("gzip, deflate", lambda d: zlib.compress(gzip.compress(d))),            # deflate applied last
])
def test_each_coding_decodes_in_bounded_pieces(coding, encode):
    pieces = list(untrusted.decoded(_chunks(encode(PAYLOAD)), coding, "the answer"))
    assert b"".join(pieces) == PAYLOAD
    assert max(map(len, pieces)) <= max(untrusted.DECODE_CHUNK, 1000)


def test_a_bomb_is_inflated_only_as_far_as_it_is_read():
    bomb = gzip.compress(b"\0" * (64 << 20), 9)
    read = sum(len(p) for p in itertools.islice(untrusted.decoded([bomb], "gzip", "x"), 4))
    assert read <= 4 * untrusted.DECODE_CHUNK


@pytest.mark.parametrize("coding, body, expected", [
    ("br", b"\x1b", "'br', which is not decoded here"),
    ("gzip", b"not gzip", "does not decode as gzip"),
    ("compress", b"x", "'compress'"),
])
def test_a_coding_not_decoded_or_a_body_that_does_not_decode_is_one_line(coding, body, expected):
    with pytest.raises(untrusted.UntrustedInput) as info:
        list(untrusted.decoded([body], coding, "the answer"))
    assert expected in str(info.value) and "\n" not in str(info.value)


class _Shape(pydantic.BaseModel):
    n: int


def test_load_json_checked_bounds_bytes_and_depth_and_checks_the_shape(tmp_path):
    path = tmp_path / "f.json"
    path.write_text('{"n": 3}')
    assert untrusted.load_json_checked(path, _Shape, "f", 100).n == 3
    with pytest.raises(untrusted.UntrustedInput, match="longer than the 4 bytes allowed"):
        untrusted.load_json_checked(path, _Shape, "f", 4)
    with pytest.raises(untrusted.UntrustedInput, match="nests 3 levels deep, more than the 2 allowed"):
        untrusted.load_json_checked('{"n": [[1]]}', _Shape, "f", 100, max_depth=2)
    with pytest.raises(untrusted.UntrustedInput, match="n: Input should be a valid integer"):
        untrusted.load_json_checked('{"n": "three"}', _Shape, "f", 100)
    with pytest.raises(untrusted.UntrustedInput, match="nests 100000 levels deep"):
        untrusted.load_json_checked("[" * 100_000 + "]" * 100_000, _Shape, "f", 1 << 20)


def test_read_source_honours_the_coding_line_and_its_bound(tmp_path):
    path = tmp_path / "k.py"
    path.write_bytes("# -*- coding: latin-1 -*-\nx = 'für'\n".encode("latin-1"))
    assert "für" in untrusted.read_source(path)
    path.write_bytes(b"\xef\xbb\xbfx = 1\r\n")            # a BOM and Windows newlines
    assert untrusted.read_source(path) == "x = 1\n"
    path.write_bytes(b"x = 1\n" * 10)
    with pytest.raises(untrusted.UntrustedInput, match="longer than the 20 bytes allowed"):
        untrusted.read_source(path, max_bytes=20)
    path.write_bytes(b"x = '\xff'\n")
    with pytest.raises(untrusted.UntrustedInput, match="cannot be read as Python source"):
        untrusted.read_source(path)
