"""Secrets in URLs never leave the agent: ``redact`` is the one function every printed or stored
text goes through (report.md, report.json, the run record, the transcript, failure messages).

In a URL (anything after ``scheme://``) it replaces

- the userinfo (``http://user:password@host`` -> ``http://***@host``), and
- every query value and the fragment (``?api_key=sk-1&model=m`` -> ``?api_key=***&model=***``):
  a query may carry a key under any name, so none is shown.

The secrets it has removed once (a password, a query value of 4 characters or more) are also
removed wherever they appear later as plain text, in this process: a server that echoes the key in
an error message outside a URL is caught too, so is its base64 (a password echoed from the Basic
authorization header the HTTP client made of the URL's userinfo), so is a run of ``FRAGMENT_CHARS`` characters of a long
one (a key echoed with a few characters changed), and so is one written with escapes (``sk-\\u0072...``
in a tool call's JSON arguments, ``\\x72`` in a Python string, the same text JSON-encoded again
when the record stores it): the text is also read with its backslash escapes undone, up to
``ESCAPE_LEVELS`` times, and where a secret appears there its escaped span in the text is masked
(``holds_secret`` says whether a text holds one). What UTF-8 cannot encode (a lone surrogate, which a
JSON ``\\ud800`` escape in a server's message produces) becomes ``?``, so that SQLite, files and
the terminal take every text. A few linear passes per text.
"""
from __future__ import annotations

import array
import base64
import re
import unicodedata
from typing import Any
from urllib.parse import unquote

MASK = "***"
#: Secrets shorter than this are only masked inside URLs (masking a 2-letter value everywhere
#: would mangle ordinary text).
MIN_SECRET_CHARS = 4

#: How many times a text's backslash escapes are undone to find a secret written with them: a key
#: escaped in a tool call's JSON arguments (1), those arguments stored as JSON in the record (2), a
#: Python escape inside them (3).
ESCAPE_LEVELS = 3
#: A secret this long or longer is also masked where only part of it appears: any run of this many
#: of its characters in a row (a server that echoes a key with a few characters changed).
FRAGMENT_CHARS = 24
MAX_FRAGMENTED_CHARS = 4096   # a longer one (a key is at most a few hundred) is masked whole only
_WINDOW = FRAGMENT_CHARS // 2   # every run of FRAGMENT_CHARS holds a window at a multiple of this

_URL_REST = re.compile(r"[^\s\"'<>`]*")
_SEEN: set[str] = set()
_WINDOWS: dict[str, list[tuple[str, int]]] = {}   # each _WINDOW-long piece of a long secret: where in it
#: The escapes of JSON and of Python's string literals; a surrogate pair as one character.
_ESCAPE = re.compile(r"\\(?:u([dD][89abAB][0-9a-fA-F]{2})\\u([dD][c-fC-F][0-9a-fA-F]{2})|u([0-9a-fA-F]{4})"
                     r"|U([0-9a-fA-F]{8})|x([0-9a-fA-F]{2})|([0-7]{1,3})|(.))", re.S)
_SIMPLE = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "v": "\v", "a": "\a"}
#: A byte of a URL's percent-encoding, or an HTML character reference: how an echoed key comes back
#: from a server that quotes it (``sk%2Dkey``, ``sk&#45;key``; #41, round nine). Each decodes to one
#: character (a byte as Latin-1: a key is ASCII).
_QUOTED = re.compile(r"%([0-9a-fA-F]{2})|&#([0-9]{1,7});|&#[xX]([0-9a-fA-F]{1,6});")


def redact(text: str) -> str:
    """``text`` with the userinfo, query values and fragment of every URL in it masked, every
    secret seen before masked wherever it appears, and unencodable characters as ``?``."""
    if not isinstance(text, str) or not text:
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "replace").decode("utf-8")
    out, position = [], 0
    while True:
        found = text.find("://", position)
        if found < 0:
            break
        start = found + 3
        end = _URL_REST.match(text, start).end()
        out.append(text[position:start])
        out.append(_redact_rest(text[start:end]))
        position = end
    out.append(text[position:])
    return _masked("".join(out))


def holds_secret(text: str) -> bool:
    """True when ``text`` holds a secret ``redact`` knows (an API key, a password or query value of
    a URL seen before), as it is or written with backslash escapes (see the module docstring)."""
    return isinstance(text, str) and bool(_SEEN) and bool(_secret_spans(text, ESCAPE_LEVELS))


def _masked(text: str) -> str:
    """``text`` with every known secret, plain or escaped, replaced by ``MASK``."""
    if not _SEEN:
        return text
    spans = sorted(_secret_spans(text, ESCAPE_LEVELS))
    if not spans:
        return text
    out, position = [], 0
    for start, end in spans:
        if end <= position:
            continue
        if start >= position:   # else it overlaps the mask before, which grows to its end
            out.append(text[position:start])
            out.append(MASK)
        position = end
    out.append(text[position:])
    return "".join(out)


def _secret_spans(text: str, levels: int) -> list[tuple[int, int]]:
    """``[(start, end)]`` of ``text`` that hold a known secret: as written, or (``levels`` > 0) once
    its escapes are undone, the span mapped back to the escaped text."""
    spans = []
    lower = text.lower()
    folded = lower if len(lower) == len(text) else text   # a key upper-cased by the server too
    for secret in _SEEN:
        wanted = secret.lower() if folded is lower else secret
        found = folded.find(wanted)
        while found >= 0:
            spans.append((found, found + len(secret)))
            found = folded.find(wanted, found + len(secret))
    if _WINDOWS:
        spans += _fragment_spans(text)
    if levels == ESCAPE_LEVELS and not text.isascii():
        # full-width or other compatibility letters (NFKC), invisible format characters (a zero-width
        # space) between the key's: #41 round ten, a 401 echoing the key in full-width letters
        normalized, starts = _normalized(text)
        if normalized != text:
            spans += [(starts[a], starts[b - 1] + 1) for a, b in _secret_spans(normalized, levels - 1)]
    for mark, pattern, decode in (("\\", _ESCAPE, _character), ("%", _QUOTED, _unquoted), ("&#", _QUOTED, _unquoted)):
        if not levels or mark not in text or (mark == "&#" and "%" in text):   # _QUOTED has both: one pass
            continue
        decoded = pattern.sub(decode, text)
        if decoded != text:
            found = _secret_spans(decoded, levels - 1)
            del decoded   # the mapping back is streamed: no per-character table is kept
            if found:
                raw = _raw_places(text, [(start, False) for start, _ in found] + [(end - 1, True) for _, end in found],
                                  pattern)
                spans += [(raw[(start, False)], raw[(end - 1, True)]) for start, end in found]
    return spans


def _normalized(text: str) -> tuple:
    """``text`` with each non-ASCII character NFKC-normalised (a format character, category Cf,
    dropped), and for each character of that the index in ``text`` of the character it came from."""
    pieces, starts = [], array.array("Q")
    for i, char in enumerate(text):
        if char.isascii():
            pieces.append(char)
            starts.append(i)
            continue
        form = "" if unicodedata.category(char) == "Cf" else unicodedata.normalize("NFKC", char)
        pieces.append(form)
        starts.extend([i] * len(form))
    return "".join(pieces), starts


def _fragment_spans(text: str) -> list[tuple[int, int]]:
    """Runs of ``FRAGMENT_CHARS`` or more characters of a long secret in ``text``: the windows of
    ``text`` at multiples of ``_WINDOW`` looked up, each hit grown while the secret goes on."""
    spans, covered = [], 0
    for i in range(0, len(text) - _WINDOW + 1, _WINDOW):
        if i < covered:
            continue
        for secret, offset in _WINDOWS.get(text[i:i + _WINDOW], ()):
            left, j = i, offset
            while left > 0 and j > 0 and text[left - 1] == secret[j - 1]:
                left, j = left - 1, j - 1
            right, j = i + _WINDOW, offset + _WINDOW
            while right < len(text) and j < len(secret) and text[right] == secret[j]:
                right, j = right + 1, j + 1
            if right - left >= FRAGMENT_CHARS:
                spans.append((left, right))
                covered = max(covered, right)
    return spans


def _raw_places(text: str, places: list[tuple[int, bool]], pattern: re.Pattern = _ESCAPE) -> dict[tuple[int, bool], int]:
    """Where each ``(index, end)`` of ``places`` lies in ``text``: the ``index``-th character of
    ``text`` with its escapes (``pattern``'s matches, one character each) undone begins there
    (``end``: ends there). One pass over the escapes, in order, keeping only the answers."""
    wanted, out = sorted(set(places)), {}
    k, length, position = 0, 0, 0   # wanted[k] is next; ``length`` characters decoded up to ``position``

    def literal(upto: int) -> int:
        """Answers in the plain run ``text[position:upto]``; returns the next ``k``."""
        i, stop = k, length + upto - position
        while i < len(wanted) and wanted[i][0] < stop:
            index, end = wanted[i]
            out[wanted[i]] = position + index - length + (1 if end else 0)
            i += 1
        return i

    for match in pattern.finditer(text):
        if k == len(wanted):
            break
        k = literal(match.start())
        length += match.start() - position
        while k < len(wanted) and wanted[k][0] == length:
            out[wanted[k]] = match.end() if wanted[k][1] else match.start()
            k += 1
        length, position = length + 1, match.end()
    literal(len(text))
    return out


def _character(match: re.Match) -> str:
    high, low, four, eight, two, octal, simple = match.groups()
    if high:
        return chr(0x10000 + ((int(high, 16) - 0xD800) << 10) + int(low, 16) - 0xDC00)
    if four or eight or two:
        code = int(four or eight or two, 16)
        return chr(code) if code <= 0x10FFFF else "\ufffd"
    if octal:
        return chr(int(octal, 8))
    return _SIMPLE.get(simple, simple)


def _unquoted(match: re.Match) -> str:
    byte, decimal, hexadecimal = match.groups()
    if byte:
        return chr(int(byte, 16))
    code = int(decimal or hexadecimal, 16 if hexadecimal else 10)
    return chr(code) if code <= 0x10FFFF else "\ufffd"


def redact_all(value: Any) -> Any:
    """Every string inside ``value`` (dicts, lists, tuples) through ``redact``."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {k: redact_all(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(redact_all(v) for v in value)
    return value


def has_secret(url: str | None) -> bool:
    """True when ``url`` carries userinfo, a query or a fragment (what ``redact`` masks)."""
    return bool(url) and redact(url) != url


def _redact_rest(rest: str) -> str:
    """What follows ``scheme://``: authority, path, query, fragment."""
    authority_end = len(rest)
    for mark in "/?#":
        index = rest.find(mark)
        if 0 <= index < authority_end:
            authority_end = index
    last_at = rest.rfind("@")
    if last_at > authority_end and ":" in rest[:authority_end] and "@" not in rest[:authority_end]:
        # ``user:pa/ss@host``, ``user:pa?ss@host``: a "/", "?" or "#" in an unencoded password ends
        # the authority as URLs are read, which would leave the password showing ("pa" read as the
        # port); ``name:`` and then an "@" is taken for userinfo (a port and a path or query holding
        # an "@" are masked too: shown less, never more)
        ends = [i for i in (rest.find(mark, last_at) for mark in "/?#") if i >= 0]
        authority_end = min(ends) if ends else len(rest)
    authority, tail = rest[:authority_end], rest[authority_end:]
    at = authority.rfind("@")
    if at >= 0:
        userinfo = authority[:at]
        _remember(userinfo.partition(":")[2] or userinfo)
        # the HTTP client sends it as Basic authorization, base64 of "user:password" (RFC 7617),
        # which a server may echo back (#41, round seven)
        _remember_base64(unquote(userinfo.partition(":")[0]) + ":" + unquote(userinfo.partition(":")[2]))
        _remember_base64(userinfo)
        authority = MASK + authority[at:]
    path, hash_mark, fragment = tail.partition("#")
    path, question, query = path.partition("?")
    if question:
        parts = []
        for item in query.split("&"):
            name, equals, value = item.partition("=")
            if equals and value:
                _remember(value)
                parts.append(f"{name}={MASK}")
            else:
                parts.append(item)
        query = "&".join(parts)
    if hash_mark and fragment:
        _remember(fragment)
        fragment = MASK
    return authority + path + question + query + hash_mark + fragment


def remember(secret: str) -> None:
    """Mask ``secret`` (and its percent-decoded form, and its base64) wherever ``redact`` meets it
    from now on, in this process: an API key given apart from the URL, which a server may echo back."""
    _remember(secret)
    _remember_base64(secret)


def _remember_base64(text: str) -> None:
    """Mask ``text``'s base64 (standard and URL-safe alphabets, padded and not) from now on: how a
    password travels in a Basic authorization header."""
    if len(text) < MIN_SECRET_CHARS:
        return
    raw = text.encode("utf-8", "surrogateescape")
    for encoded in {base64.b64encode(raw), base64.urlsafe_b64encode(raw)}:
        _remember(encoded.decode("ascii"))
        _remember(encoded.decode("ascii").rstrip("="))
    # inside a longer base64 text ("Bearer " + key, #41 round nine) it starts 1 or 2 bytes into a
    # 3-byte group: the groups wholly its own, at each alignment (long enough not to be a word)
    for shift in (1, 2):
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            core = encode(b"\0" * shift + raw + b"\0\0")[4:-4].decode("ascii")
            if len(core) >= 16:
                _remember(core)


def _remember(secret: str) -> None:
    for form in {secret, unquote(secret), unquote(secret).encode("utf-8", "surrogateescape").hex()}:
        if len(form) >= MIN_SECRET_CHARS and form != MASK and form not in _SEEN:
            _SEEN.add(form)
            if FRAGMENT_CHARS <= len(form) <= MAX_FRAGMENTED_CHARS:
                for offset in range(len(form) - _WINDOW + 1):
                    places = _WINDOWS.setdefault(form[offset:offset + _WINDOW], [])
                    if len(places) < 4:   # a secret of repeats ("aaaa..."): a few places do
                        places.append((form, offset))
