"""URL credentials and query secrets never printed or stored (#21): one function, every text."""
from __future__ import annotations

import time

import pytest

from swizzleperf.sandbox.redact import has_secret, redact, redact_all


@pytest.mark.parametrize("text, expected", [
    ("http://user:hunter2pw@host:8080/v1", "http://***@host:8080/v1"),
    ("https://tok3nonly@api.example.com/v1/", "https://***@api.example.com/v1/"),
    ("http://u:p@ss-w0rd@host/v1", "http://***@host/v1"),                 # an unencoded @ in the password
    ("http://host/v1?api_key=sk-abc123&model=m", "http://host/v1?api_key=***&model=***"),
    ("http://host/v1?flag&key=", "http://host/v1?flag&key="),              # nothing to hide
    ("http://host/v1#frag-secret", "http://host/v1#***"),
    ("LLM endpoint http://a:bcdefg@h/v1 returned HTTP 500", "LLM endpoint http://***@h/v1 returned HTTP 500"),
    ("'http://x:yyyy@h/v1' and \"https://h2/?token=zzzz\"", "'http://***@h/v1' and \"https://h2/?token=***\""),
    ("no url here: user:pass@host", "no url here: user:pass@host"),
    ("http://127.0.0.1:8080/v1", "http://127.0.0.1:8080/v1"),
])
def test_userinfo_query_values_and_fragments_are_masked(text, expected):
    assert redact(text) == expected
    assert redact(redact(text)) == redact(text)  # idempotent


def test_a_secret_seen_in_a_url_is_masked_in_plain_text_later():
    redact("http://me:Sup3rSecretPw@host/v1?api_key=sk-live-0123456789")
    echoed = "server said: unknown key sk-live-0123456789 for user me (password Sup3rSecretPw)"
    assert "sk-live-0123456789" not in redact(echoed) and "Sup3rSecretPw" not in redact(echoed)


def test_redact_all_walks_dicts_and_lists_and_has_secret_tells():
    value = {"base_url": "http://a:bbbbbb@h/v1", "n": 3, "list": ["x", "http://h/?k=vvvvv"], "none": None}
    assert redact_all(value) == {"base_url": "http://***@h/v1", "n": 3, "list": ["x", "http://h/?k=***"],
                                 "none": None}
    assert has_secret("http://a:b@h/v1") and not has_secret("http://h/v1") and not has_secret(None)


@pytest.mark.parametrize("text", ["a" * 1_000_000, "://" * 300_000, "http://" + "@" * 1_000_000,
                                  "http://h/?" + "&" * 1_000_000, ("x://y@" + " ") * 100_000])
def test_redaction_is_linear(text):
    start = time.perf_counter()
    redact(text)
    assert time.perf_counter() - start < 1.0


def test_a_lone_surrogate_becomes_encodable():
    assert redact("bad \ud800 text") == "bad ? text"
