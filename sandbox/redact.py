"""Secrets in URLs never leave the agent: ``redact`` is the one function every printed or stored
text goes through (report.md, report.json, the run record, the transcript, failure messages).

In a URL (anything after ``scheme://``) it replaces

- the userinfo (``http://user:password@host`` -> ``http://***@host``), and
- every query value and the fragment (``?api_key=sk-1&model=m`` -> ``?api_key=***&model=***``):
  a query may carry a key under any name, so none is shown.

The secrets it has removed once (a password, a query value of 4 characters or more) are also
removed wherever they appear later as plain text, in this process: a server that echoes the key in
an error message outside a URL is caught too. What UTF-8 cannot encode (a lone surrogate, which a
JSON ``\\ud800`` escape in a server's message produces) becomes ``?``, so that SQLite, files and
the terminal take every text. One linear pass per text.
"""
from __future__ import annotations

import re
from typing import Any
from urllib.parse import unquote

MASK = "***"
#: Secrets shorter than this are only masked inside URLs (masking a 2-letter value everywhere
#: would mangle ordinary text).
MIN_SECRET_CHARS = 4

_URL_REST = re.compile(r"[^\s\"'<>`]*")
_SEEN: set[str] = set()


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
    result = "".join(out)
    for secret in _SEEN:
        if secret in result:
            result = result.replace(secret, MASK)
    return result


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
    authority, tail = rest[:authority_end], rest[authority_end:]
    at = authority.rfind("@")
    if at >= 0:
        _remember(authority[:at].partition(":")[2] or authority[:at])
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
    """Mask ``secret`` (and its percent-decoded form) wherever ``redact`` meets it from now on, in
    this process: an API key given apart from the URL, which a server may echo back."""
    _remember(secret)


def _remember(secret: str) -> None:
    for form in {secret, unquote(secret)}:
        if len(form) >= MIN_SECRET_CHARS and form != MASK:
            _SEEN.add(form)
