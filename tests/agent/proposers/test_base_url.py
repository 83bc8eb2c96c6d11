"""A ``--base-url`` that is not an endpoint (red team 41i): ``http://[::1`` was an 87-line traceback
ending in httpx's ``InvalidURL`` (``ChatClient`` parsed it unguarded), and a port of 99999 or 0, no
host, a space or another scheme were each a request sent to nowhere. Each is one line now, before
any request, and never shows a password of the URL. Hermetic: a private HOME; no server is asked."""
from __future__ import annotations

import pytest
from run_cli import assert_one_line_error, swizzleperf

from swizzleperf.agent.proposers.chat import MAX_URL_CHARS, ChatClient, ChatSettings, endpoint_url

PASSWORD = "s3cretPW77"


@pytest.fixture(autouse=True)
def _private_home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "home" / ".cache"))


BAD = {
    "an unclosed IPv6 bracket": ("http://[::1", "its port is not a number"),
    "an unclosed bracket, with a password": (f"http://u:{PASSWORD}@[::1/v1", "its port is not a number"),
    "a port that is not a number": (f"http://u:{PASSWORD}@host:abc/v1", "its port is not a number"),
    "a password holding a slash": (f"http://u:pa/{PASSWORD}@host/v1", "its port is not a number"),
    "a port over 65535": ("http://127.0.0.1:99999/v1", "its port 99999 is not in 1..65535"),
    "port 0": ("http://127.0.0.1:0/v1", "its port 0 is not in 1..65535"),
    "a negative port": ("http://h:-1/v1", "its port -1 is not in 1..65535"),
    "no host": ("http://:80", "it names no host"),
    "no host, with a password": (f"https://u:{PASSWORD}@/v1", "it names no host"),
    "a space": (f"http://u:{PASSWORD} x@h/v1", "it holds a space or an unprintable character"),
    "another scheme": ("ftp://x/v1", "it does not start with http:// or https://"),
    "no scheme": (f"u:{PASSWORD}@localhost:8080", "it does not start with http:// or https://"),
    "a host that is no name": ("http://xn--zz/v1", "its host is not a valid name"),
    "too long": ("http://x/" + "a" * 70_000, f"it is 70009 characters, more than the {MAX_URL_CHARS} allowed"),
}


@pytest.mark.parametrize("url, why", BAD.values(), ids=BAD.keys())
def test_a_bad_endpoint_is_one_value_error_without_its_password(url, why):
    with pytest.raises(ValueError) as info:
        endpoint_url(url)
    message = str(info.value)
    assert message.startswith("--base-url ") and why in message, message
    assert PASSWORD not in message and "\n" not in message and len(message) < 400, message
    with pytest.raises(ValueError):
        ChatClient(ChatSettings(model="m", base_url=url))


@pytest.mark.parametrize("url", ["http://127.0.0.1:8080/v1", "http://[::1]:8080/v1", "HTTPS://Host/v1",
                                 f"https://u:{PASSWORD}@host:443/v1?api_key=k", "http://localhost:65535"])
def test_a_good_endpoint_is_taken(url):
    assert endpoint_url(url).host


@pytest.mark.parametrize("url, why", [BAD["an unclosed IPv6 bracket"], BAD["a port that is not a number"],
                                      BAD["a port over 65535"], BAD["no host, with a password"], BAD["too long"]])
@pytest.mark.parametrize("command", ["optimize", "eval"])
def test_the_command_line_refuses_a_bad_endpoint_in_one_line(tmp_path, gemm_path, command, url, why):
    kernel = [str(gemm_path)] if command == "optimize" else ["--kernels", "gemm"]
    proc = swizzleperf(command, *kernel, "--model", "m", "--base-url", url, cwd=tmp_path, timeout=120)
    assert_one_line_error(proc, why)
    assert PASSWORD not in proc.stdout + proc.stderr
    assert not (tmp_path / ".swizzleperf").exists(), "a refused endpoint left a record"


def test_a_resumed_run_refuses_a_bad_endpoint_in_one_line(tmp_path):
    proc = swizzleperf("optimize", "--resume", "20260101-000000-abcd", "--base-url", "http://[::1",
                       cwd=tmp_path, timeout=120)
    assert_one_line_error(proc, "its port is not a number")
