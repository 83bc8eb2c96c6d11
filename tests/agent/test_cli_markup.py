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


def _captured(monkeypatch, name: str) -> io.StringIO:
    """The CLI's console ``name`` (``console`` or ``errors``) written into a buffer, plain."""
    buffer = io.StringIO()
    monkeypatch.setattr(cli, name, Console(file=buffer, width=400, highlight=False, color_system=None))
    return buffer


@pytest.fixture
def printed(monkeypatch):
    return _captured(monkeypatch, "console")


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


# -- #41, the fifth replay: an error line quoting an app, and the --app lines --------------------------

#: The red team's app (payloads/appsdir/g_ansi_last_line.py): its last line clears the screen, retitles
#: the terminal, turns red and blinks, and holds rich markup.
ANSI_APP = ('import sys\nprint("hello")\n'
            'print("\\x1b[2J\\x1b[H\\x1b]0;owned\\x07\\x1b[31m[red]markup[/red] \\x1b[5mBLINK")\nsys.exit(1)\n')
ANSI_LINE = "\x1b[2J\x1b[H\x1b]0;owned\x07\x1b[31m[red]markup[/red] \x1b[5mBLINK"


@pytest.fixture
def failed(monkeypatch):
    return _captured(monkeypatch, "errors")


def test_an_error_line_quoting_outside_text_is_text(failed):
    message = f"`python app.py` failed (exit code 1): {ANSI_LINE}"
    with pytest.raises(cli.typer.Exit):
        cli._fail(message)
    assert failed.getvalue() == f"error: {ascii(message)}\n"
    with pytest.raises(cli.typer.Exit):
        cli._fail(f"plain {MARKUP}")
    assert failed.getvalue().endswith(f"error: plain {MARKUP}\n")


def test_optimize_app_whose_last_line_holds_escape_codes_prints_them_spelled_out(tmp_path):
    from run_cli import swizzleperf
    (tmp_path / "g_ansi_last_line.py").write_text(ANSI_APP)
    proc = swizzleperf("optimize", "--app", "python g_ansi_last_line.py", "--kernel", "foo",
                       "--workdir", str(tmp_path / ".sp"), cwd=tmp_path, timeout=300)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert "\x1b" not in proc.stdout + proc.stderr and "\x07" not in proc.stderr, repr(proc.stderr)
    assert "failed (exit code 1)" in proc.stderr and "\\x1b[2J" in proc.stderr and "[red]markup[/red]" in proc.stderr


def test_a_distributed_summary_and_the_best_lines_are_text(printed, monkeypatch, tmp_path):
    from swizzleperf.agent.loop import report as report_module
    monkeypatch.setattr(report_module, "distributed_table", lambda r: [HOSTILE])
    report = {"kernel": MARKUP, "hardware": "h100", "mode": "simulated", "stop_reason": HOSTILE,
              "distributed": {"world_size": 4}}
    cli._print_distributed_summary(SimpleNamespace(report=report, run_dir=tmp_path))
    text = printed.getvalue()
    assert "\x1b" not in text and text.count(SHOWN) == 2 and f"stopped: {SHOWN}" in text, text
    cli.Progress(1)("target", {"name": HOSTILE})
    assert printed.getvalue().endswith(f"{SHOWN}\n")
