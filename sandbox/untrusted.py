"""Reading what a server or a model sent: bounded in size, depth and type before anything uses it.

A reply or a server's answer is hostile until proven otherwise (a 100 000-deep JSON body, a
3 600-digit literal, a 2 500-term sum, usage counts of 10^23). Each reader here refuses such input
with ``UntrustedInput``, one line that says what was wrong and quotes the first 200 characters of
what was received, instead of letting ``RecursionError``, ``MemoryError`` or Python's int-string
conversion limit escape from deep inside ``json`` or ``ast``:

- ``loads``: JSON, its nesting depth measured by a linear scan *before* ``json.loads``, integers of
  at most ``MAX_INT_DIGITS`` digits, finite floats, no NaN/Infinity.
- ``validated``: a pydantic model (the shape of each answer we read) applied to loaded JSON.
- ``parse_python``: a model-written function, its size capped before ``ast.parse``, the tree's depth
  and node count measured without recursion, integer literals within 64 bits.
- ``decoded``: an HTTP body's raw bytes undone of their ``Content-Encoding`` (gzip, deflate, zstd;
  at most ``MAX_CODINGS`` of them) in pieces of at most ``DECODE_CHUNK`` bytes, so that the caller's cap on the decompressed size
  stops a bomb (32 KB of zstd that inflate to gigabytes) before it is inflated, not after.
- ``load_json_checked``: a cache, record or results file (or its text) read within a byte bound,
  loaded by ``loads`` and checked against a pydantic model: what a file on disk holds is as
  untrusted as what a server sends (#41); the caller takes ``UntrustedInput`` as a cache miss.
- ``read_source``: a Python source file as Python reads it (its PEP 263 coding line honoured),
  refused in one line above ``MAX_KERNEL_BYTES``.

Nothing here imports the rest of the agent (only the standard library, pydantic, and zstandard
where it is installed).
"""
from __future__ import annotations

import ast
import errno
import io
import json
import math
import os
import re
import sqlite3
import stat
import time
import tokenize
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pydantic

#: Preview length of received text in messages (the issue's "first 200 characters").
PREVIEW_CHARS = 200
#: JSON nesting we accept: every shape we read (chat completions, SSE chunks, tool arguments,
#: /props, /v1/models, /tokenize, a distributed configuration) nests 6 levels at most.
MAX_JSON_DEPTH = 32
#: Digits of a JSON integer: 18 keep every value inside a signed 64-bit integer (SQLite's INTEGER),
#: far below Python's int-string conversion limit (4 300 digits).
MAX_INT_DIGITS = 18
#: Characters of a model-written function (a rewrite target is a few hundred; the longest catalog
#: order, xcd-grouped-m, is under 1 000).
MAX_SOURCE_CHARS = 20_000
#: Syntax-tree nesting of a model-written function. ``ast.unparse``, ``compile`` and Triton's code
#: generator recurse once or more per level; 64 levels stay far inside Python's default recursion
#: limit of 1 000 (a 1 000-term sum already exceeds it). The catalog orders nest 9 levels at most.
MAX_AST_DEPTH = 64
#: Syntax-tree nodes of a model-written function (the catalog orders have at most ~250).
MAX_AST_NODES = 5_000
#: Magnitude of an integer literal: 64 bits (what Triton's int64 holds).
MAX_LITERAL_BITS = 63
#: Characters of a string literal (a docstring) in a model-written function.
MAX_STRING_CHARS = 4_000
#: Largest piece ``decoded`` inflates at once: the caller counts pieces against its cap, so at most
#: this much is held beyond it.
DECODE_CHUNK = 64 * 1024
#: Content codings of one body that ``decoded`` undoes. RFC 9110 (section 8.4) lets a body list
#: the codings applied in order, but real servers send one (a proxy that compresses again, two);
#: each listed coding stacks a decoder (a generator and up to ``MAX_ZSTD_WINDOW`` of state) on the
#: last, so 4 000 of them were a RecursionError at the first read (#41). Three, ``identity`` not
#: counted; a longer list is refused in one line.
MAX_CODINGS = 3
#: Largest zstd window we allocate for a body (RFC 8878's limit for HTTP content coding is 8 MiB;
#: libzstd's default would let a 20-byte frame header ask for 128 MiB).
MAX_ZSTD_WINDOW = 8 << 20
#: Bytes of a kernel file we read. The bundled kernels are 1-76 KB (kernels/distributed/
#: gemm_reduce_scatter.py the largest) and a user's Triton module a few tens of KB; 2 MiB is over
#: 25 times the largest, and small enough that every pass over the source (the static check, the
#: analysis, the prompt) stays short even where one is not linear (a 17 MB file ran 15 minutes, #41).
MAX_KERNEL_BYTES = 2 << 20

_JSON_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"?|[\[\]{}]', re.S)
Model = TypeVar("Model", bound=pydantic.BaseModel)


class UntrustedInput(ValueError):
    """Input from a server or a model that cannot be used; the message is one line, quoting what
    was received."""


def file_kind(mode: int) -> str:
    """What a file of ``mode`` (``stat``'s or ``lstat``'s) is, in words: "a link", "a named pipe",
    "a character device", "a block device", "a socket", "a folder", "a regular file"."""
    kinds = ((stat.S_ISLNK, "a link"), (stat.S_ISFIFO, "a named pipe"), (stat.S_ISCHR, "a character device"),
             (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a folder"),
             (stat.S_ISREG, "a regular file"))
    return next((words for test, words in kinds if test(mode)), "not a regular file")


def preview(data: str | bytes, limit: int = PREVIEW_CHARS) -> str:
    """The first ``limit`` characters of ``data`` as a Python literal (undecodable bytes as
    escapes), `` ...`` appended when there was more."""
    if isinstance(data, (bytes, bytearray)):
        text = bytes(data[:limit * 4]).decode("utf-8", errors="backslashreplace")
        more = len(data) > limit * 4 or len(text) > limit
    else:
        text, more = data[:limit], len(data) > limit
    return repr(text[:limit]) + (" ..." if more else "")


def shown(text: str) -> str:
    """``text`` from outside (an app's file name, a line of its output, a reason, a name) for a table
    or the console: as it is where every character is printable, else as ``ascii()`` writes it
    (quoted, the escape codes and newlines written out), as the rows refuse such a path
    (eval/app_worker.evaluate, #41)."""
    return text if text.isprintable() else ascii(text)


def json_depth(text: str) -> int:
    """The deepest nesting of ``[`` and ``{`` in JSON text, strings skipped; one linear pass."""
    depth = deepest = 0
    for token in _JSON_TOKENS.finditer(text):
        char = token.group()[0]
        if char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def loads(data: str | bytes, what: str, max_chars: int | None = None, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """JSON ``data`` (``what`` names it in messages: "the chat completion", "a streamed event").

    Raises:
        UntrustedInput: not UTF-8, over ``max_chars``, nested deeper than ``max_depth``, an
            integer of more than ``MAX_INT_DIGITS`` digits, a float that is not finite, NaN or
            Infinity, or not JSON at all; the message quotes the first 200 characters.
    """
    try:
        text = data.decode("utf-8") if isinstance(data, (bytes, bytearray)) else data
    except UnicodeDecodeError:
        raise UntrustedInput(f"{what} is not UTF-8; received: {preview(data)}") from None
    if max_chars is not None and len(text) > max_chars:
        raise UntrustedInput(f"{what} is {len(text)} characters, more than the {max_chars} allowed; "
                             f"received: {preview(text)}")
    brackets = text.count("[") + text.count("{")  # an upper bound of the depth, counted in C
    depth = json_depth(text) if brackets > max_depth else brackets
    if depth > max_depth:
        raise UntrustedInput(f"{what} nests {depth} levels deep, more than the {max_depth} allowed; "
                             f"received: {preview(text)}")
    try:
        return json.loads(text, parse_int=_bounded_int, parse_float=_finite_float,
                          parse_constant=_no_constant)
    except UntrustedInput as exc:
        raise UntrustedInput(f"{what}: {exc}; received: {preview(text)}") from None
    except (ValueError, RecursionError, MemoryError) as exc:
        reason = exc.msg if isinstance(exc, json.JSONDecodeError) else type(exc).__name__
        where = f" (line {exc.lineno}, column {exc.colno})" if isinstance(exc, json.JSONDecodeError) else ""
        raise UntrustedInput(f"{what} is not JSON: {reason}{where}; received: {preview(text)}") from None


def _bounded_int(digits: str) -> int:
    if len(digits.lstrip("-")) > MAX_INT_DIGITS:
        raise UntrustedInput(f"an integer of {len(digits.lstrip('-'))} digits (at most {MAX_INT_DIGITS})")
    return int(digits)


def _finite_float(text: str) -> float:
    value = float(text) if len(text) <= 64 else float("inf")
    if value in (float("inf"), float("-inf")):
        raise UntrustedInput(f"a number out of range ({text[:40]}{'...' if len(text) > 40 else ''})")
    return value


def _no_constant(name: str) -> float:
    raise UntrustedInput(f"{name} is not a JSON number")


def validated(model: type[Model], data: Any, what: str, received: str | bytes) -> Model:
    """``data`` (loaded JSON) checked against the pydantic ``model``.

    Raises:
        UntrustedInput: the first field that does not fit, by its path, what it must be and the
            value found (cut), and the first 200 characters of ``received``.
    """
    try:
        return model.model_validate(data)
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        path = ".".join(str(p) for p in first["loc"]) or "the body"
        found = preview(json.dumps(first.get("input"), default=str)[:400], 60) if "input" in first else ""
        raise UntrustedInput(f"{what}: {path}: {first['msg']}" + (f", found {found}" if found else "")
                             + f"; received: {preview(received)}") from None


def parse_python(code: str, what: str = "the code block") -> ast.Module:
    """``ast.parse`` of model-written ``code`` within the limits above.

    Raises:
        SyntaxError: the code does not parse (the caller says where).
        UntrustedInput: over ``MAX_SOURCE_CHARS``, nested deeper than ``MAX_AST_DEPTH`` (``ast.parse``
            itself giving up included), over ``MAX_AST_NODES``, an integer literal beyond 64 bits
            or a string literal over ``MAX_STRING_CHARS``.
    """
    if len(code) > MAX_SOURCE_CHARS:
        raise UntrustedInput(f"{what} is {len(code)} characters, more than the {MAX_SOURCE_CHARS} a "
                             f"rewrite target may have")
    try:
        tree = ast.parse(code)
    except (RecursionError, MemoryError):
        raise UntrustedInput(f"{what} nests too deeply for Python's parser (at most {MAX_AST_DEPTH} "
                             f"levels of expressions and statements)") from None
    except ValueError as exc:  # a null byte, among others
        raise UntrustedInput(f"{what} cannot be parsed: {exc}") from None
    check_tree(tree, what)
    return tree


def check_tree(tree: ast.AST, what: str = "the code block") -> None:
    """Depth, node count and literals of a syntax tree, walked with an explicit stack.

    Raises:
        UntrustedInput: see ``parse_python``.
    """
    stack, nodes = [(tree, 1)], 0
    while stack:
        node, depth = stack.pop()
        nodes += 1
        if depth > MAX_AST_DEPTH:
            line = getattr(node, "lineno", None)
            raise UntrustedInput(f"{what} nests expressions more than {MAX_AST_DEPTH} levels deep"
                                 + (f" (line {line})" if line else "") + ": write the order in steps")
        if nodes > MAX_AST_NODES:
            raise UntrustedInput(f"{what} has more than {MAX_AST_NODES} syntax nodes: a rewrite target is "
                                 f"a few arithmetic statements")
        if isinstance(node, ast.Constant):
            _check_literal(node, what)
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))


def _check_literal(node: ast.Constant, what: str) -> None:
    value = node.value
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > MAX_LITERAL_BITS:
        raise UntrustedInput(f"{what} has an integer literal of {value.bit_length()} bits (line {node.lineno}): "
                             f"literals must fit in 64 bits")
    if isinstance(value, (str, bytes)) and len(value) > MAX_STRING_CHARS:
        raise UntrustedInput(f"{what} has a string of {len(value)} characters (line {node.lineno}), more than "
                             f"the {MAX_STRING_CHARS} allowed")


# ------------------------------------------------------------------------------ compressed bodies
def decoded(raw: Iterable[bytes], content_encoding: str | None, what: str) -> Iterator[bytes]:
    """The bytes of an HTTP body whose raw (still encoded) chunks are ``raw``, undone of each
    coding named in ``content_encoding`` (last applied, first undone), yielded in pieces of at
    most ``DECODE_CHUNK`` bytes and only as the caller asks for them: a caller that stops at its
    cap never inflates more than a piece beyond it.

    Raises:
        UntrustedInput: more than ``MAX_CODINGS`` codings, a coding other than gzip, deflate,
            zstd (with the ``zstandard`` module) or identity, or a body that does not decode.
    """
    codings = [c.strip().lower() for c in (content_encoding or "").split(",")]
    codings = [c for c in codings if c not in ("", "identity")]
    if len(codings) > MAX_CODINGS:
        raise UntrustedInput(f"{what} lists {len(codings)} content codings, at most {MAX_CODINGS} are decoded "
                             f"here; received: Content-Encoding {preview(content_encoding, 60)}")
    stream: Iterable[bytes] = raw
    for coding in reversed(codings):
        if coding in ("gzip", "x-gzip"):
            stream = _inflate(stream, zlib.MAX_WBITS | 16, coding, what)
        elif coding == "deflate":
            stream = _inflate(stream, zlib.MAX_WBITS | 32, coding, what)  # zlib-wrapped or gzip
        elif coding == "zstd" and _zstandard() is not None:
            stream = _unzstd(stream, what)
        else:
            raise UntrustedInput(f"{what} is encoded as {coding!r}, which is not decoded here (gzip, "
                                 f"deflate{', zstd' if _zstandard() else ''} or none)")
    return iter(stream)


def _inflate(stream: Iterable[bytes], wbits: int, coding: str, what: str) -> Iterator[bytes]:
    """zlib's inflate with ``max_length``: gzip members one after another, a deflate body's
    trailing bytes ignored (as browsers and httpx do); a raw deflate body (no zlib header) too."""
    inflater, started = zlib.decompressobj(wbits), False
    for data in stream:
        while data:
            try:
                out = inflater.decompress(data, DECODE_CHUNK)
            except zlib.error as exc:
                if coding == "deflate" and not started:  # no zlib header: raw deflate
                    inflater, wbits, started = zlib.decompressobj(-zlib.MAX_WBITS), -zlib.MAX_WBITS, True
                    continue
                raise UntrustedInput(f"{what} does not decode as {coding}: {exc}") from None
            started = True
            if out:
                yield out
            if inflater.eof:
                data = inflater.unused_data
                if wbits & 16 and data:  # another gzip member
                    inflater = zlib.decompressobj(wbits)
                    continue
                return
            data = inflater.unconsumed_tail
            if not data and len(out) == DECODE_CHUNK:
                data = b""
                while len(out) == DECODE_CHUNK and not inflater.eof:  # output still inside zlib
                    try:
                        out = inflater.decompress(b"", DECODE_CHUNK)
                    except zlib.error as exc:  # the input it holds turned out corrupt
                        raise UntrustedInput(f"{what} does not decode as {coding}: {exc}") from None
                    if out:
                        yield out


def _zstandard():
    try:
        import zstandard
    except ImportError:
        return None
    return zstandard


class _ChunkReader(io.RawIOBase):
    """A read-only file over an iterator of byte chunks (what ``zstandard.stream_reader`` reads)."""

    def __init__(self, chunks: Iterable[bytes]):
        self._chunks, self._rest = iter(chunks), b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        while not self._rest:
            self._rest = next(self._chunks, None)
            if self._rest is None:
                self._rest = b""
                return 0
        count = min(len(buffer), len(self._rest))
        buffer[:count], self._rest = self._rest[:count], self._rest[count:]
        return count


def _unzstd(stream: Iterable[bytes], what: str) -> Iterator[bytes]:
    zstandard = _zstandard()
    decompressor = zstandard.ZstdDecompressor(max_window_size=MAX_ZSTD_WINDOW)
    try:
        with decompressor.stream_reader(_ChunkReader(stream), read_across_frames=True) as reader:
            while out := reader.read(DECODE_CHUNK):
                yield out
    except zstandard.ZstdError as exc:
        raise UntrustedInput(f"{what} does not decode as zstd: {exc}") from None


# ------------------------------------------------------------------------ files read at run time
def read_bounded(path: str | Path, max_bytes: int, what: str, follow_links: bool = True) -> bytes:
    """The bytes of ``path``, at most ``max_bytes`` of them read; only a regular file (a named
    pipe, a terminal or a device, where code we do not trust left a link to one, such as
    ``/proc/self/fd/0``, would block the agent for ever or never end: opened without blocking
    and refused). ``follow_links`` False: ``path`` itself must not be a symbolic link (a file that
    code we do not trust wrote: a worker's ``result.json`` linked to the agent's own
    ``/proc/<pid>/environ`` would have put the agent's credentials into the record's error text).

    Raises:
        UntrustedInput: the file is longer than ``max_bytes``, not a regular file, or (without
            ``follow_links``) a symbolic link.
        OSError: it cannot be read.
    """
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | (0 if follow_links else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if not follow_links and exc.errno == errno.ELOOP and os.path.islink(path):
            raise UntrustedInput(f"{what} ({path}) is a symbolic link, not a file of its own") from None
        raise
    try:
        regular = stat.S_ISREG(os.fstat(fd).st_mode)
    except OSError:
        os.close(fd)
        raise
    if not regular:
        os.close(fd)
        raise UntrustedInput(f"{what} ({path}) is not a regular file")
    with open(fd, "rb") as handle:
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise UntrustedInput(f"{what} ({path}) is longer than the {max_bytes} bytes allowed")
    return data


def read_json(path: str | Path, max_bytes: int, what: str, max_depth: int = MAX_JSON_DEPTH,
              follow_links: bool = True) -> Any:
    """JSON that code we do not trust wrote into a file we read back (a hook's profile, a worker's
    result): at most ``max_bytes``, UTF-8, at most ``max_depth`` deep, then ``json.loads`` with NaN
    and infinities kept (Python's ``json.dump`` writes them; :func:`loads` refuses them).

    Raises:
        UntrustedInput: longer than ``max_bytes`` or deeper than ``max_depth``; a link where
            ``follow_links`` is False (``read_bounded``).
        UnicodeDecodeError, json.JSONDecodeError: not UTF-8, not JSON (both ValueError).
        OSError: it cannot be read.
    """
    text = read_bounded(path, max_bytes, what, follow_links).decode("utf-8")
    depth = json_depth(text)   # one linear pass, before json.loads recurses into it
    if depth > max_depth:
        raise UntrustedInput(f"{what} nests {depth} levels deep, more than the {max_depth} allowed")
    return json.loads(text)


def load_json_checked(source: str | bytes | Path, model: type[Model], what: str, max_bytes: int,
                      max_depth: int = MAX_JSON_DEPTH) -> Model:
    """A cache, record or results file (a ``Path``) or its text, loaded as JSON within
    ``max_bytes`` and ``max_depth`` (``loads``'s bounds on integers and floats too) and checked
    against the pydantic ``model``.

    Raises:
        UntrustedInput: too long, not UTF-8, not JSON, too deep, or not of the model's shape (a
            value that is not text at all, a database cell of another type, too); one line naming
            ``what`` and quoting what was found.
        OSError: a path that cannot be read (the caller decides whether a missing file is a miss).
    """
    if isinstance(source, Path):
        data: str | bytes = read_bounded(source, max_bytes, what)
    elif not isinstance(source, (str, bytes)):
        raise UntrustedInput(f"{what} holds {type(source).__name__}, not JSON text")
    else:
        data = source
        if len(data) > max_bytes:
            raise UntrustedInput(f"{what} is longer than the {max_bytes} bytes allowed; "
                                 f"received: {preview(data)}")
    return validated(model, loads(data, what, max_depth=max_depth), what, data)


def read_source(path: str | Path, max_bytes: int = MAX_KERNEL_BYTES, what: str = "the kernel file") -> str:
    """A Python source file's text as Python reads it: the encoding of its PEP 263 coding line
    (or its BOM), else UTF-8 (``tokenize.open``), universal newlines; refused above ``max_bytes``
    before anything else reads it.

    Raises:
        UntrustedInput: longer than ``max_bytes``, or not text in its declared encoding (one line).
        OSError: it cannot be read.
    """
    data = read_bounded(path, max_bytes, what)
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        return io.TextIOWrapper(io.BytesIO(data), encoding, newline=None).read()
    except (SyntaxError, UnicodeDecodeError, LookupError) as exc:
        raise UntrustedInput(f"{what} ({path}) cannot be read as Python source: "
                             f"{_one_line(str(exc))}") from None


def _one_line(text: str) -> str:
    return " ".join(text.split())[:300]


# -- SQLite files another process may have written: every statement bounded ----------------------

#: SQLite VM instructions between two calls of a ``StatementBound``.
_PROGRESS_STEPS = 10_000
#: A pause longer than this (s) between two calls of the progress handler starts a new stretch of
#: work (the previous statement ended, or it waited on a lock, which is not work).
_IDLE_GAP_S = 0.25


def sqlite_file_not_its_own(path: str | Path) -> str | None:
    """Why the SQLite database ``path`` or a file of SQLite beside it (``-wal``, ``-shm``,
    ``-journal``) is not a file of its folder's own, or None: a symbolic link (dangling or not) or a
    regular file with a second name elsewhere would have SQLite write over another file (a run
    record linked to a user's empty ``__init__.py`` made it a database, #41 round thirteen; git
    keeps such links in a committed workdir). The words name the file, e.g. ``"/w/x.db is a
    symbolic link (to /home/u/pkg/__init__.py)"``."""
    path = Path(path)
    for each in (path, *(path.with_name(path.name + end) for end in ("-wal", "-shm", "-journal"))):
        try:
            seen = os.lstat(each)
        except OSError:
            continue
        if stat.S_ISLNK(seen.st_mode):
            try:
                target = os.readlink(each)
            except OSError:
                target = "?"
            return f"{shown(preview(str(each)))} is a symbolic link (to {shown(preview(target))})"
        if stat.S_ISREG(seen.st_mode) and seen.st_nlink > 1:
            return f"{shown(preview(str(each)))} has {seen.st_nlink} names (a hard link)"
    return None


class StatementBound:
    """A connection's progress handler (``sqlite3.Connection.set_progress_handler(bound,
    _PROGRESS_STEPS)``) that aborts a statement after ``seconds`` of continuous work (seconds, > 0).

    A stretch of work starts at ``arm()`` (called before each statement where the caller issues
    them) or at a handler call that comes more than ``_IDLE_GAP_S`` after the previous one (a new
    statement on a connection whose statements another library issues). Returning true makes
    SQLite abort the statement: ``sqlite3.OperationalError`` ("interrupted"), which the caller's
    ``sqlite3.Error`` handling then meets.
    """

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._start = self._last = -math.inf

    def arm(self) -> None:
        """Start a new stretch of work now (before a statement)."""
        self._start = self._last = time.monotonic()

    def __call__(self) -> int:
        now = time.monotonic()
        if now - self._last > _IDLE_GAP_S:
            self._start = now
        self._last = now
        return int(now - self._start > self.seconds)

    def install(self, connection: sqlite3.Connection) -> "StatementBound":
        """Set this bound as ``connection``'s progress handler; returns self."""
        connection.set_progress_handler(self, _PROGRESS_STEPS)
        return self
