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
    # a "/", "?" or "#" in an unencoded password: read as a URL the password would be the port
    # and a path (round nine of #41's leftovers); a port with an "@" later is masked too
    ("http://user:pa/ss@host/v1", "http://***@host/v1"),
    ("http://user:pa?ss@host/v1?k=vvvv", "http://***@host/v1?k=***"),
    ("http://user:pa#ss@host", "http://***@host"),
    ("http://host:8080/v1/a@b", "http://***@b"),
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
    start = time.process_time()
    redact(text)
    assert time.process_time() - start < 1.0


def test_a_lone_surrogate_becomes_encodable():
    assert redact("bad \ud800 text") == "bad ? text"


# -- #41: a known secret written with escapes, or in part ---------------------------------------------

def _known() -> str:
    import uuid
    from swizzleperf.sandbox.redact import remember
    key = f"sk-esc-{uuid.uuid4().hex}"
    remember(key)
    return key


def test_a_secret_written_with_json_or_python_escapes_is_masked_as_a_whole():
    import json
    key = _known()
    json_escaped = key[:3] + "".join(f"\\u{ord(c):04x}" for c in key[3:6]) + key[6:]
    assert json.loads(f'"{json_escaped}"') == key
    arguments = '{"source": "' + json_escaped + '"}'          # a tool call's arguments
    assert redact(arguments) == '{"source": "***"}'
    assert redact(json.dumps([arguments])) == json.dumps(['{"source": "***"}'])   # stored as JSON again
    python = "".join(f"\\x{ord(c):02x}" for c in key)         # a Python string's escapes, in the arguments
    assert redact(json.dumps({"source": f'"""{python}"""'})) == json.dumps({"source": '"""***"""'})
    assert redact(r"\n ok \u0041 \x41 \q \\ " + "\\") == r"\n ok \u0041 \x41 \q \\ " + "\\"   # nothing to hide


def test_a_run_of_24_characters_of_a_long_secret_is_masked_and_holds_secret_tells():
    from swizzleperf.sandbox.redact import FRAGMENT_CHARS, holds_secret
    key = _known()
    changed = key[:5] + "Z" + key[6:]                         # a key echoed with one character changed
    assert key[6:] not in redact(changed) and redact(f"x {key[8:8 + FRAGMENT_CHARS]} y") == "x *** y"
    assert redact(key[8:8 + FRAGMENT_CHARS - 1]) == key[8:8 + FRAGMENT_CHARS - 1]   # shorter: left
    assert holds_secret(changed) and holds_secret(key[:6] + "\\u00" + format(ord(key[6]), "02x") + key[7:])
    assert not holds_secret("sk-esc-0123") and not holds_secret(key[:10])


@pytest.mark.parametrize("text", ["\\" * 1_000_000, "\\u0041" * 160_000, ("\\\\\\\\u") * 200_000,
                                  "\\x" * 500_000])
def test_undoing_escapes_stays_linear(text):
    _known()
    start = time.process_time()
    redact(text)
    assert time.process_time() - start < 3.0


def test_undoing_escapes_takes_little_memory():
    """Backslashes (a tool call's arguments) took ~170 bytes a character (#41 round six, at 8 MiB);
    1 MiB shows it (about 6 bytes a character now) in a few seconds under tracemalloc, not 30."""
    import tracemalloc
    _known()
    text = "\\" * (1 << 20)
    tracemalloc.start()
    try:
        redact(text)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 20 * len(text)


def test_a_password_echoed_in_its_basic_authorization_form_is_masked():
    """The HTTP client sends a URL's userinfo as `Authorization: Basic base64(user:password)`; a
    server that echoes that header (seen in round seven of #41: `400 rejected request from alice
    (Authorization: Basic <b64>)`) put the password into the record and reports unmasked."""
    import base64

    from swizzleperf.sandbox.redact import holds_secret, remember
    redact("http://alice:S3cr3t%40Passw0rd9xyz@127.0.0.1:9/v1")
    basic = base64.b64encode(b"alice:S3cr3t@Passw0rd9xyz").decode()
    echoed = f"rejected request from alice (Authorization: Basic {basic})"
    assert basic not in redact(echoed) and holds_secret(echoed)
    assert redact(echoed) == "rejected request from alice (Authorization: Basic ***)"
    key = "sk-round7-0123456789abcdef"            # an API key given apart from the URL, echoed as base64
    remember(key)
    for encoded in (base64.b64encode(key.encode()), base64.urlsafe_b64encode(key.encode())):
        assert encoded.decode().rstrip("=") not in redact(f"token {encoded.decode()} refused")


@pytest.mark.parametrize("form", ["percent", "percent-some", "hex", "HEX", "decimal-entities", "hex-entities",
                                  "upper", "bearer-base64", "b-base64"])
def test_a_key_echoed_quoted_encoded_or_upper_cased_is_masked(form):
    """Round nine of #41: a server answering `400 bad key sk%2Dredteam%2D...` put the key into the
    record, report.md, report.json and the transcript; its hex, HTML references, upper-cased form and
    base64 inside a longer base64 text ("Bearer " + key) went through too."""
    import base64

    from swizzleperf.sandbox.redact import holds_secret, remember
    key = "sk-round9-Quoted-0123456789abcdef"
    remember(key)
    raw = key.encode()
    text = {"percent": "".join(f"%{b:02X}" for b in raw), "percent-some": key.replace("-", "%2D"),
            "hex": raw.hex(), "HEX": raw.hex().upper(), "decimal-entities": "".join(f"&#{b};" for b in raw),
            "hex-entities": "".join(f"&#x{b:x};" for b in raw), "upper": key.upper(),
            "bearer-base64": base64.b64encode(b"Bearer " + raw).decode(),
            "b-base64": base64.b64encode(b"B" + raw + b" tail").decode()}[form]
    echoed = f"400 bad key {text} (try again)"
    assert holds_secret(echoed)
    masked = redact(echoed)
    assert masked.startswith("400 bad key ") and masked.endswith(" (try again)") and "***" in masked
    assert text not in masked and len(masked) < len(echoed) - len(text) // 2
    assert redact("100% sure &#38; 0xdeadbeef, nothing quoted here") == "100% sure &#38; 0xdeadbeef, nothing quoted here"


@pytest.mark.parametrize("text", ["%" * 1_000_000, "%41" * 300_000, "&#65;" * 200_000, "&#x" * 300_000])
def test_undoing_quoting_stays_linear(text):
    _known()
    start = time.process_time()
    redact(text)
    assert time.process_time() - start < 3.0


@pytest.mark.parametrize("form", ["full-width", "zero-width", "soft-hyphens"])
def test_a_key_echoed_in_compatibility_letters_or_with_invisible_characters_is_masked(form):
    """Round ten of #41: a 401 echoing the key in full-width letters reached the console line."""
    from swizzleperf.sandbox.redact import holds_secret, remember
    key = "sk-round10-FullWidth-0123456789abcdef"
    remember(key)
    text = {"full-width": "".join(chr(ord(c) + 0xFEE0) for c in key),
            "zero-width": "\u200b".join(key), "soft-hyphens": "\u00ad".join(key)}[form]
    echoed = f"401 key={text} (rejected)"
    assert holds_secret(echoed)
    assert redact(echoed) == "401 key=*** (rejected)"
    assert redact("café, 中文 and ｆｕｌｌ-width words stay") == "café, 中文 and ｆｕｌｌ-width words stay"


def test_normalising_stays_linear():
    _known()
    text = "中" * 1_000_000
    start = time.process_time()
    redact(text)
    assert time.process_time() - start < 5.0
