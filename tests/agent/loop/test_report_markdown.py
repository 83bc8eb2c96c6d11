"""report.md cannot be rewritten by a reply (issue #21): sources sit in fences that nothing inside
them can close, and a reply's names and reasons render as the characters they are. Checked by
parsing report.md as CommonMark with GFM tables and strikethrough (markdown-it-py, rich's parser)."""
from __future__ import annotations

import pytest
from markdown_it import MarkdownIt

from swizzleperf.agent.loop import report

HOSTILE = ("x **bold** _em_ [link](http://evil.example) ![img](http://e/i.png) <img src=x onerror=alert(1)> "
           "`code` ~~gone~~ | cell | www.evil.example a@b.example http://evil.example $x$ &amp; # h")
SOURCE = ('@triton.jit\ndef swizzle(pid, num_pid_m, num_pid_n):\n    """Row-major. ```` ``` ~~~"""\n'
          "    return (pid // num_pid_n, pid % num_pid_n)\n```\n\n# Not a heading\n[link](http://evil.example)\n")

#: Tokens that would mean something from a reply rendered as Markdown.
RENDERED = {"link_open", "image", "html_inline", "html_block", "em_open", "strong_open", "code_inline",
            "s_open", "heading_open"}


def _order(name: str, reason: str = "") -> dict:
    return {"name": name, "iteration": 1, "verdict": "PASS", "reason": reason, "l2_hit_rate": 0.5,
            "source": "simulated:mi300x", "dram_bytes": 1e9, "dram_source": "simulated:mi300x",
            "time_ms": None, "time_spread_ms": None, "time_source": None}


def _report(name: str, reason: str, source: str) -> dict:
    best = {**_order(name), "swizzle_source": source, "permutation_verified": True, "numerics_verified": True}
    attempts = [{"iteration": 1, "name": name, "verdict": "INVALID", "reason": reason, "lesson": reason},
                {"iteration": 2, "name": name, "verdict": "PASS", "reason": "", "lesson": reason}]
    # the proposer is the tool's text (llm:MODEL at URL, from the user's options): written as it is (#15);
    # the stop reason may quote a proposal's reason
    return {"run_id": "r1", "kernel": "gemm", "hardware": "mi300x", "mode": "simulated", "target": "t",
            "proposer": "llm:qwen at http://127.0.0.1:8089/v1", "iterations": 2, "stop_reason": reason, "prompt_tokens": 0,
            "completion_tokens": 0, "cost_usd": 0.0, "baseline": _order("baseline"), "expert": None,
            "best": best, "attempts": attempts, "workload": None}


def _tokens(text: str) -> list:
    parser = MarkdownIt("commonmark").enable("table").enable("strikethrough")
    out, stack = [], parser.parse(text)
    while stack:
        token = stack.pop(0)
        out.append(token)
        stack[:0] = token.children or []
    return out


def _row_widths(tokens: list) -> list:
    widths = []
    for token in tokens:
        if token.type == "tr_open":
            widths.append(0)
        elif token.type in ("th_open", "td_open"):
            widths[-1] += 1
    return widths


@pytest.mark.parametrize("name, reason", [(HOSTILE, HOSTILE), ("grouped-n:32", "plain reason (ok)")],
                         ids=["hostile", "plain"])
def test_nothing_from_a_reply_renders_as_markdown(name, reason):
    text = report.render_markdown(_report(name, reason, SOURCE))
    tokens = _tokens(text)
    headings = [t for t in tokens if t.type == "heading_open"]
    assert [t.tag for t in headings] == ["h1", "h2", "h2"]  # the run's title, Attempts, Best swizzle
    assert not RENDERED - {"heading_open"} & {t.type for t in tokens}
    fences = [t for t in tokens if t.type == "fence"]
    assert len(fences) == 1 and fences[0].content == SOURCE.rstrip("\n") + "\n" and fences[0].info == "python"
    widths = _row_widths(tokens)   # a reply's `|` adds no cell: every row as wide as its header
    assert widths == [6, 6, 6, 8, 8, 8], widths  # orders: header, baseline, best; attempts: header, two
    if name == HOSTILE:
        rendered = MarkdownIt("commonmark").enable("table").enable("strikethrough").render(text)
        assert "<a " not in rendered and "<img" not in rendered and "<em>" not in rendered
        assert "&lt;img src=x onerror=alert(1)&gt;" in rendered and "http://evil.example" in rendered
    assert "- proposer: llm:qwen at http://127.0.0.1:8089/v1\n" in text


def test_a_plain_name_reads_as_it_is():
    assert report.md_text("xcd-grouped-m:8:8") == "xcd-grouped-m:8:8"
    assert report.md_text("a  b\n c") == "a b c"


@pytest.mark.parametrize("source", ["plain", "a ``` b", "````\nx\n````", "`" * 40])
def test_a_fence_is_longer_than_any_backtick_run_inside(source):
    lines = report.fenced(source, "python")
    assert lines[0].startswith("```") and lines[0] == lines[2] + "python"
    longest = max((len(run) for run in source.replace("\n", " ").split(" ") if set(run) == {"`"}), default=0)
    assert len(lines[2]) > max(longest, 2)
    fences = [t for t in _tokens("\n".join(lines) + "\n") if t.type == "fence"]
    assert len(fences) == 1 and fences[0].content == source + "\n"
