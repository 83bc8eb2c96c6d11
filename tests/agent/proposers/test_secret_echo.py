"""#41: a server that echoes the agent's own secrets (the API key, a credential of ``--base-url``) in
a candidate: the key had landed in the record's checkpoints, report.json/report.md, best.diff and
the user's kernel (``--in-place``), only the transcript masked. A candidate that holds a secret of
the agent's, however written (plainly, with Python or JSON escapes, a string split in two, a key
with a few characters changed), is refused where the proposer accepts a reply, with a reason that
does not say it; a key written with JSON escapes in a tool call's arguments is masked in the record.
Hermetic: a loopback server, secrets made up for each test."""
from __future__ import annotations

import json
import uuid

import pytest
from fake_openai import FakeOpenAIServer
from test_llm_proposer import GOOD_REPLY, GROUPED, _context

from swizzleperf.agent.loop import run
from swizzleperf.agent.loop.record import RunRecord
from swizzleperf.agent.proposers.base import SECRET_REASON, secret_refusal
from swizzleperf.agent.proposers.llm import LLMProposer
from swizzleperf.agent.verification.swizzles import catalog_source

ARGS = ["pid", "num_pid_m", "num_pid_n"]


def _key() -> str:
    return f"sk-echo-{uuid.uuid4().hex}"   # a fresh secret per test: redact remembers each for the process


def _escaped(text: str) -> str:
    """``text`` as a Python string literal's body, every character a ``\\x`` escape."""
    return "".join(f"\\x{ord(c):02x}" for c in text)


def _with_docstring(doc: str) -> str:
    source = GROUPED.replace("num_pid_n):\n", f'num_pid_n):\n    """{doc}"""\n', 1)
    assert source != GROUPED
    return source


FORMS = {
    "in a docstring": lambda key: _with_docstring(f"grouped; {key}"),
    "in a string constant": lambda key: GROUPED.replace("    GROUP_SIZE_M", f"    note = '{key}'\n    GROUP_SIZE_M", 1),
    "written with \\x escapes": lambda key: _with_docstring(_escaped(key)),
    "split in two strings": lambda key: GROUPED.replace(
        "    GROUP_SIZE_M", f"    note = ('{key[:20]}' '{key[20:]}')\n    GROUP_SIZE_M", 1),   # each part too short to be masked
    "with two characters changed": lambda key: _with_docstring(key[:4] + "XY" + key[6:]),
    "in a comment": lambda key: GROUPED.replace("    GROUP_SIZE_M", f"    # {key}\n    GROUP_SIZE_M", 1),
    # Python reads identifiers NFKC-normalised, and the canonical text drops a docstring's unprintable
    # characters: what is written then holds the key plainly (#41 round six)
    "as a full-width identifier": lambda key: GROUPED.replace(
        "    GROUP_SIZE_M", f"    v{_styled(key[8:], 0xFF10, 0xFF41)} = pid\n    GROUP_SIZE_M", 1),
    "as a mathematical-bold identifier": lambda key: GROUPED.replace(
        "    GROUP_SIZE_M", f"    v{_styled(key[8:], 0x1D7CE, 0x1D41A)} = pid\n    GROUP_SIZE_M", 1),
    "in a docstring with zero-width spaces": lambda key: _with_docstring("\u200b".join(key)),
    "in a docstring with soft hyphens": lambda key: _with_docstring("\u00ad".join(key)),
}


def _styled(hex_text: str, digit_zero: int, letter_a: int) -> str:
    """``hex_text`` in look-alike letters and digits that NFKC turns back into ASCII."""
    return "".join(chr(digit_zero + int(c)) if c.isdigit() else chr(letter_a + ord(c) - ord("a")) for c in hex_text)


@pytest.mark.parametrize("form", list(FORMS))
def test_a_candidate_holding_the_api_key_is_refused_without_saying_it(form):
    key = _key()
    echoed = FORMS[form](key)
    with FakeOpenAIServer() as server:
        server.reply(f"Grouped.\n```python\n{echoed}```\nRationale: {key}", prompt_tokens=5, completion_tokens=5)
        server.reply(GOOD_REPLY + f"\nThe key was {key}.", prompt_tokens=5, completion_tokens=5)
        proposal = LLMProposer("fake", base_url=server.base_url, api_key=key).propose(_context())
        fix = server.requests[-1]["messages"][-1]["content"]
    assert proposal.source == GROUPED                      # the second reply, without the key
    assert key not in proposal.rationale and "***" in proposal.rationale
    assert proposal.exchanges[0]["rejected"] == SECRET_REASON and key not in fix and SECRET_REASON in fix


def test_the_accepted_source_is_the_canonical_text_without_comments():
    """A key split over two comments (each piece too short to be masked) does not reach the pending
    attempt of the record's checkpoints: the proposal carries the canonical text that is written."""
    key = _key()
    split = GROUPED.replace("    GROUP_SIZE_M", f"    # {key[:18]}\n    # {key[18:]}\n    GROUP_SIZE_M", 1)
    split = split.replace("num_pid_n):\n", 'num_pid_n):\n    """Grouped.\n\n    ' + key[18:] + '"""\n', 1)
    with FakeOpenAIServer() as server:
        server.reply(f"```python\n{split}```\nRationale: grouped.", prompt_tokens=5, completion_tokens=5)
        proposal = LLMProposer("fake", base_url=server.base_url, api_key=key).propose(_context())
    assert key[:18] not in proposal.source and key[18:] not in proposal.source
    assert proposal.source == GROUPED.replace("num_pid_n):\n", "num_pid_n):\n    \"\"\"Grouped.\"\"\"\n", 1)


def test_a_credential_of_the_base_url_in_a_candidate_is_refused():
    password = f"pw-{uuid.uuid4().hex}"
    with FakeOpenAIServer() as server:
        url = server.base_url.replace("http://", f"http://me:{password}@", 1)
        server.reply(f"```python\n{_with_docstring(password)}```\n")
        server.reply(GOOD_REPLY)
        proposal = LLMProposer("fake", base_url=url, api_key="unused-key-0").propose(_context())
    assert proposal.source == GROUPED and proposal.exchanges[0]["rejected"] == SECRET_REASON


def test_secret_refusal_reads_a_configuration_and_its_function():
    key = _key()
    function = _with_docstring(_escaped(key))
    LLMProposer("fake", base_url="http://127.0.0.1:9/v1", api_key=key)   # the key, as a run configures it
    assert secret_refusal(json.dumps({"pattern": "ring", "swizzle": function})) == SECRET_REASON
    assert secret_refusal(json.dumps({"pattern": "ring", "note": key[:20]})) is None
    assert secret_refusal(json.dumps({"pattern": "ring", "swizzle": GROUPED})) is None
    assert secret_refusal(GROUPED) is None and key not in SECRET_REASON


def test_simulate_is_not_run_on_a_source_holding_the_key():
    key = _key()
    context, seen = _context(), []
    context.simulate = lambda source: seen.append(source) or {"predicted_l2_hit_rate": 0.5}
    with FakeOpenAIServer() as server:
        server.reply(None, tool_calls=[{"name": "simulate", "arguments": json.dumps({"source": _with_docstring(key)})}])
        server.reply(GOOD_REPLY)
        proposal = LLMProposer("fake", base_url=server.base_url, api_key=key).propose(context)
    assert proposal.source == GROUPED and seen == []
    assert SECRET_REASON in proposal.exchanges[0]["tool_calls"][0]["rejected"]


def _json_escaped(key: str) -> str:
    """``key`` with two of its characters written as JSON ``\\u`` escapes (it reads the same once decoded)."""
    return key[:5] + f"\\u{ord(key[5]):04x}" + key[6:-1] + f"\\u{ord(key[-1]):04x}"


def _decoded_all(text: str, times: int = 4) -> str:
    """``text`` with its JSON and Python escapes undone ``times`` times, as a reader of the record could."""
    for _ in range(times):
        text = text.encode("latin-1", "backslashreplace").decode("unicode_escape", "ignore")
    return text


def test_a_key_written_with_json_escapes_in_tool_calls_is_masked_in_the_record(tmp_path):
    key = _key()
    escaped = _json_escaped(key)
    assert json.loads(f'"{escaped}"') == key and key not in escaped
    with FakeOpenAIServer() as server:
        server.reply(None, tool_calls=[{"name": "nosuch", "arguments": '{"source": "' + escaped + '"}'},
                                       {"name": "simulate", "arguments": '[1, "' + escaped + '"]'}])
        server.reply(GOOD_REPLY)
        proposal = LLMProposer("fake", base_url=server.base_url, api_key=key).propose(_context())
    record = RunRecord(tmp_path / ".sp")
    record.save_requests("run", 1, proposal.exchanges)
    rows = record.requests("run")
    stored = json.dumps(rows.astype(str).values.tolist())
    assert "***" in stored and key not in _decoded_all(stored)
    assert all(key not in _decoded_all(c.get("rejected", "")) for c in proposal.exchanges[0]["tool_calls"])


def test_optimize_with_a_server_echoing_the_key_writes_it_nowhere(tmp_path, gemm_path, monkeypatch):
    """The red team's replay: the key in a candidate's docstring, ``--in-place``; it reached the
    checkpoints, report.json/.md, best.diff, the candidate file and the user's kernel."""
    key = _key()
    monkeypatch.setenv("OPENAI_API_KEY", key)
    kernel = tmp_path / "gemm.py"
    kernel.write_text(gemm_path.read_text())
    echoed = catalog_source("grouped-n:32", ARGS).replace(
        '"""grouped-n with groups of 32 tile columns."""', f'"""grouped-n order; {key}"""')
    assert key in echoed
    with FakeOpenAIServer() as server:
        for _ in range(3):
            server.reply(f"```python\n{echoed}```\nRationale: group.", prompt_tokens=5, completion_tokens=5)
        options = run.RunOptions(kernel=str(kernel), hw="mi300x", workdir=str(tmp_path / ".sp"), iterations=1,
                                 model="fake", base_url=server.base_url, in_place=True)
        outcome = run.start(options)
    assert [a["verdict"] for a in outcome.report["attempts"]] == ["NO_CANDIDATE"]
    assert "holds a secret" in outcome.report["attempts"][0]["reason"]
    assert kernel.read_text() == gemm_path.read_text()
    for path in [kernel, *(tmp_path / ".sp").rglob("*")]:
        if path.is_file():
            data = path.read_bytes()
            assert key.encode() not in data and key[8:].encode() not in data, path
