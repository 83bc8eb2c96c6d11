"""#41: text from outside that the command line prints (a bundled kernel's failure reason, a
candidate's name, a stop reason quoting a server, a path, an eval's names) is printed as text:
never read as rich markup (a ``[/red]`` crashed the line, a ``[bold]`` restyled it), and a string
holding an unprintable character (an escape code) written as ``ascii()`` writes it, as the
``--apps`` lines do (eval/apps.py ``shown``)."""
from __future__ import annotations

import io
from types import SimpleNamespace

import pytest
from rich.console import Console

from swizzleperf.agent import cli

HOSTILE = "boom [/red] [bold]x[/bold] \x1b[2J"
SHOWN = ascii(HOSTILE)          # the markup as written, the escape code spelled out
MARKUP = "[bold]plain[/bold] [/red]"   # printable: shown as it is


@pytest.fixture
def printed(monkeypatch):
    buffer = io.StringIO()
    monkeypatch.setattr(cli, "console", Console(file=buffer, width=400, highlight=False, color_system=None))
    return buffer


def test_a_bundled_kernels_failure_reason_is_printed_as_text(printed):
    cli._eval_events(SimpleNamespace())("failed", {"name": "gemm", "reason": HOSTILE})
    assert printed.getvalue() == f"gemm failed: {SHOWN}\n"


@pytest.mark.parametrize("kind, expected", [
    ("eval", f"eval {MARKUP} (continue it with --resume {MARKUP})"),
    ("kernel", MARKUP),
    ("run", f"run {MARKUP}"),
    ("worker", MARKUP),
])
def test_an_evals_names_are_printed_as_text(printed, kind, expected):
    progress = cli.Progress(1)
    cli._eval_events(progress)(kind, {"name": MARKUP, "running": [MARKUP, HOSTILE]})
    assert expected in printed.getvalue(), printed.getvalue()
    if kind == "worker":
        assert progress.status.renderable.text.plain == f"running: {MARKUP}, {SHOWN}"


@pytest.mark.parametrize("kind", ["verify", "measure", "confirm"])
def test_a_candidates_name_in_the_status_line_is_text(printed, kind):
    progress = cli.Progress(1)
    progress(kind, {"name": HOSTILE, "kind": "candidate", "iteration": 1})
    assert progress.status.renderable.text.plain.endswith(SHOWN)


def test_an_attempts_name_and_reason_are_text(printed):
    cli.Progress(1)("attempt", {"kind": "candidate", "iteration": 2, "name": HOSTILE, "verdict": "INVALID",
                                "reason": HOSTILE, "metrics": None})
    line = printed.getvalue()
    assert "\x1b" not in line and line.count(SHOWN) == 2 and "INVALID" in line, line


def test_the_summarys_stop_reason_kernel_and_paths_are_text(printed, tmp_path):
    report = {"kernel": MARKUP, "hardware": "no-such-spec", "mode": "simulated", "stop_reason": HOSTILE,
              "baseline": {"name": MARKUP, "l2_hit_rate": 0.5, "source": "simulated:mi300x"}}
    run_dir = tmp_path / "[bold]runs[/bold]"
    cli._print_summary(SimpleNamespace(report=report, run_id="r[/red]", status="finished", run_dir=run_dir))
    text = printed.getvalue()
    assert f"stopped: {SHOWN}" in text and f"run r[/red] (finished): {run_dir}" in text, text
    assert f"{MARKUP} on no-such-spec (simulated)" in text and f"baseline: {MARKUP}" in text, text
