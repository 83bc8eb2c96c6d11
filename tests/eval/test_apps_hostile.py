"""``swizzleperf eval --apps`` against hostile apps and names (issue #41, round four): each ends as
one row with a true one-line reason, the table stays one line a row. Hermetic: a private HOME,
the caches of conftest.py."""
from __future__ import annotations

import os

import pytest

from swizzleperf.eval import app_worker, apps


@pytest.fixture(autouse=True)
def _private_home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "home" / ".cache"))


ODD = "odd\nname 'q\" $(touch PWNED)`touch PWNED2`|x.py"


def test_an_app_whose_path_holds_a_newline_is_refused_in_one_line_and_runs_nothing(tmp_path):
    folder = tmp_path / "apps"
    folder.mkdir()
    (folder / ODD).write_text("import pathlib; pathlib.Path('RAN').write_text('x')\n")
    job = app_worker.RowJob(app=str(folder / ODD), folder=str(tmp_path / "row"),
                            workdir=str(tmp_path / ".swizzleperf"), budget_s=60.0)
    row = app_worker.run_row(job)
    assert row["outcome"] == "refused", row
    assert "newline" in row["reason"] and "\n" not in row["reason"], row["reason"]
    assert not list(folder.glob("RAN")) and not list(folder.glob("PWNED*")) and not list(tmp_path.glob("PWNED*"))


def test_a_name_with_a_newline_or_a_bar_is_one_row_of_the_markdown_table():
    row = {**app_worker.empty_row(ODD), "outcome": "refused", "reason": "r"}
    summary = {"eval_id": "e", "apps_dir": "d", "options": {"iterations": 1, "row_budget_s": 1.0}, "ran": 1,
               "apps": 1, "answered": 1, "answered_share": 1.0, "over_budget": 0, "counts": {"refused": 1},
               "rows": [row]}
    text = apps.markdown(summary)
    rows = [line for line in text.splitlines() if "odd" in line]
    assert len(rows) == 1 and "PWNED2" in rows[0], text   # the whole name on the row's one line
    assert rows[0].count(" | ") == 7, rows[0]              # eight cells: the name's bar escaped


def test_a_symlinked_app_is_its_own_row_not_pending(tmp_path):
    """A linked app runs under its listed name, and a link loop is the app's failure to start (round
    eight of #41: the worker resolved the path, so a loop was a RuntimeError of ours, "tool
    failure", and a linked app ran as its target's name)."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "target.py").write_text("raise SystemExit('the target ran')\n")
    folder = tmp_path / "apps"
    folder.mkdir()
    (folder / "linked.py").symlink_to(elsewhere / "target.py")
    (folder / "loop.py").symlink_to(folder / "loop.py")
    options = apps.AppsOptions(apps_dir=str(folder), names=apps.list_apps(str(folder)), iterations=1,
                               row_budget_s=60, hw="mi300x", workdir=str(tmp_path / ".swizzleperf"),
                               out=str(tmp_path / "out" / "t"))
    _, summary, _ = apps.run_apps(options, gpus=1, devices=[])
    rows = {r["app"]: r for r in summary["rows"]}
    assert {a: r["outcome"] for a, r in rows.items()} == {"linked.py": "app failed", "loop.py": "app failed"}, rows
    assert summary["counts"]["pending"] == 0 and "the target ran" in rows["linked.py"]["reason"]
    assert "target.py" not in rows["linked.py"]["reason"]


_PEAK = """
import resource, sys
from pathlib import Path
from swizzleperf.agent.capture.capture import last_line
from swizzleperf.eval.app_worker import _last_line
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
lines = last_line(Path(sys.argv[1])), _last_line(Path(sys.argv[1]))
print(lines, (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024)
"""


def test_the_last_line_of_an_apps_huge_log_is_read_from_its_tail(tmp_path):
    """An app that prints a gigabyte of short lines and fails: its last line was found by reading the
    whole log and splitting it (5 GB of memory for 192 MB of output); only the tail is read."""
    import subprocess
    import sys
    log = tmp_path / "app.log"
    with open(log, "wb") as f:
        for _ in range(16):
            f.write(b"AB\n" * (1 << 20))   # 48 MB, 16 M lines
        f.write(b"Error: the last line\n")
    out = subprocess.run([sys.executable, "-c", _PEAK, str(log)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    lines, grown_mb = out.stdout.rsplit(" ", 1)
    assert lines == "('Error: the last line', 'Error: the last line')"
    assert int(grown_mb) < 100, f"{grown_mb} MB to read a 48 MB log's last line"


# -- an app that prints without end: its logs are capped on disk ----------------------------------

_LOUD = """import sys
line = b"x" * 1023 + b"\\n"
for i in range(25 * 1024):   # 50 MiB, half to stdout, half to stderr
    sys.stdout.buffer.write(line)
    sys.stderr.buffer.write(line)
sys.stdout.flush()
raise SystemExit("loud.py: the last line")
"""


def _dropped(log) -> int:
    """The bytes a capped log says it dropped (0 where it holds no such line)."""
    import re
    text = log.read_bytes()
    found = re.findall(rb"\[swizzleperf: (\d+) bytes of output dropped here", text)
    assert len(found) <= 1, log
    return int(found[0]) if found else 0


def test_an_app_that_prints_50_mib_leaves_capped_logs_and_its_row_keeps_its_reason(tmp_path):
    from swizzleperf.agent.capture.capture import LOG_CAP_BYTES
    folder = tmp_path / "apps"
    folder.mkdir()
    (folder / "loud.py").write_text(_LOUD)
    workdir = tmp_path / ".swizzleperf"
    options = apps.AppsOptions(apps_dir=str(folder), names=["loud.py"], iterations=1, row_budget_s=120, hw="mi300x",
                               workdir=str(workdir), out=str(tmp_path / "out" / "t"))
    _, summary, _ = apps.run_apps(options, gpus=1, devices=[])
    row = summary["rows"][0]
    assert row["outcome"] == "app failed" and "loud.py: the last line" in row["reason"], row
    logs = list(workdir.rglob("*.log"))
    assert any(p.name == "app.log" for p in logs), logs
    for log in logs:
        assert log.stat().st_size <= LOG_CAP_BYTES + 200, (log, log.stat().st_size)
    app_log = max(logs, key=lambda p: _dropped(p))
    # the head, the line that says what was dropped, the tail: the whole output accounted for
    assert _dropped(app_log) + LOG_CAP_BYTES >= 50 << 20
    assert app_log.read_bytes().startswith(b"x" * 1023 + b"\n")
    assert app_log.read_bytes().rstrip().endswith(b"loud.py: the last line")


def test_a_worker_that_prints_50_mib_leaves_a_capped_log_and_its_last_line(tmp_path, monkeypatch):
    import sys
    from swizzleperf.agent.capture.capture import LOG_CAP_BYTES
    loud = ("import sys; line = b'y' * 1023 + b'\\n'; [sys.stdout.buffer.write(line) for _ in range(50 * 1024)]; "
            "sys.stdout.flush(); print('Traceback: boom'); sys.exit(3)")
    monkeypatch.setattr(app_worker, "worker_command", lambda job, row_file: [sys.executable, "-c", loud])
    (tmp_path / "app.py").write_text("")
    job = app_worker.RowJob(app=str(tmp_path / "app.py"), folder=str(tmp_path / "row"), workdir=str(tmp_path),
                            budget_s=120.0)
    row = app_worker.run_row(job)
    assert (row["outcome"], row["reason"]) == ("tool failure", "the worker died (exit code 3): Traceback: boom")
    log = tmp_path / "row" / "worker.log"
    assert log.stat().st_size <= LOG_CAP_BYTES + 200 and _dropped(log) + LOG_CAP_BYTES >= 50 << 20


def test_a_capped_log_keeps_the_head_says_what_it_dropped_and_keeps_the_tail(tmp_path):
    import os
    from swizzleperf.agent.capture.capture import CappedLog
    data = os.urandom(100_003)
    log = tmp_path / "x.log"
    with CappedLog(log, head=1000, tail=4000) as capped:
        with os.fdopen(os.dup(capped.fd), "wb") as pipe:   # through the pipe, as a process writes it
            capped.started()
            for i in range(0, len(data), 777):
                pipe.write(data[i:i + 777])
    text = log.read_bytes()
    line = capped.dropped_line()
    assert text[:1000] == data[:1000] and text[1000:1000 + len(line)] == line
    tail = text[1000 + len(line):]
    assert 2000 <= len(tail) <= 4000 and data.endswith(tail) and 1000 + _dropped(log) + len(tail) == len(data)
    small = tmp_path / "small.log"
    with CappedLog(small, head=1000, tail=4000) as capped:
        capped.write(data[:4500])
    assert small.read_bytes() == data[:4500]   # within the cap: the output as it was


def test_a_descendant_holding_the_output_open_does_not_hold_the_log(tmp_path):
    import os
    import signal
    import subprocess
    import time
    from swizzleperf.agent.capture.capture import LOG_DRAIN_S, CappedLog
    started = time.monotonic()
    with CappedLog(tmp_path / "x.log") as capped:
        process = subprocess.Popen(["/bin/sh", "-c", "sleep 60 & echo started"], stdout=capped.fd,
                                   stderr=subprocess.STDOUT, start_new_session=True)
        capped.started()
        process.wait(timeout=30)
    try:
        assert time.monotonic() - started < LOG_DRAIN_S + 5
        assert (tmp_path / "x.log").read_text() == "started\n"
    finally:
        try:
            os.killpg(process.pid, signal.SIGKILL)   # the sleep this test started, in its group
        except ProcessLookupError:
            pass


# -- names and output on the console: text, never markup or escape codes --------------------------

def _eval_apps(tmp_path, folder):
    from run_cli import swizzleperf
    proc = swizzleperf("eval", "--apps", str(folder), "--hw", "mi300x", "--iterations", "1", "--row-budget", "120",
                       "--workdir", str(tmp_path / ".swizzleperf"), "--out", str(tmp_path / "out" / "t"), cwd=tmp_path)
    shown = proc.stdout + proc.stderr
    assert "Traceback" not in shown and "\x1b" not in shown, shown
    return [line for line in proc.stdout.splitlines() if line.startswith("[")]


def test_the_progress_lines_print_an_apps_name_and_output_as_text(tmp_path):
    """A file name holding an escape code is refused in its row before it runs, but its row's line was
    printed with the code raw; a name or an error line holding markup is shown as written, an escape
    code in the app's last line written out."""
    folder = tmp_path / "apps"
    folder.mkdir()
    (folder / "\x1b[31mred.py").write_text("raise SystemExit('never runs')\n")
    (folder / "[bold]x.py").write_text("raise SystemExit('\\x1b[31mboom [red]y[/red] \\x1b[0m')\n")
    lines = _eval_apps(tmp_path, folder)
    assert len(lines) == 2, lines
    refused = [line for line in lines if "refused" in line]
    assert len(refused) == 1 and refused[0][6:].startswith("'\\x1b[31mred.py' (-, "), lines
    failed = [line for line in lines if "app failed" in line]
    assert len(failed) == 1 and failed[0][6:].startswith("[bold]x.py (-, "), lines
    assert "\\x1b[31mboom [red]y[/red] \\x1b[0m" in failed[0], failed


def test_a_folder_whose_path_holds_markup_is_printed_as_text(tmp_path):
    """``running the apps of FOLDER``: a closing tag in its path stopped the eval (rich's MarkupError)."""
    folder = tmp_path / "x[" / "red]apps"   # its path holds the closing tag [/red]
    folder.mkdir(parents=True)
    (folder / "\x1b[31mred.py").write_text("raise SystemExit('never runs')\n")
    lines = _eval_apps(tmp_path, folder)
    assert len(lines) == 1 and lines[0].startswith("[1/1] '\\x1b[31mred.py' (-, ") and "refused" in lines[0], lines


def test_a_files_entry_in_a_subfolder_keeps_its_path_and_runs_in_its_folder(tmp_path):
    """#41: ``--files`` naming ``ops/run.py`` saved its row as ``run.py``, so ``ops/run.py`` stayed
    pending (and two ``run.py`` of two folders shared one row folder). The row keeps the path as
    listed (``./`` and doubled slashes written once), and each app runs in its own folder."""
    folder = tmp_path / "apps"
    for sub in ("a", "b"):
        (folder / sub).mkdir(parents=True)
        (folder / sub / "marker.txt").write_text(f"ran in {sub}")
        (folder / sub / "run.py").write_text("raise SystemExit(open('marker.txt').read())\n")
    listed = tmp_path / "list.txt"
    listed.write_text("a/run.py\n./b//run.py\n")
    names = apps.list_apps(str(folder), str(listed))
    assert names == ["a/run.py", "b/run.py"]
    options = apps.AppsOptions(apps_dir=str(folder), names=names, iterations=1, row_budget_s=60, hw="mi300x",
                               workdir=str(tmp_path / ".swizzleperf"), out=str(tmp_path / "out" / "t"))
    _, summary, _ = apps.run_apps(options, gpus=2, devices=[])
    got = [(r["app"], r["outcome"], r["reason"]) for r in summary["rows"]]
    assert summary["counts"]["pending"] == 0, got
    assert [g[:2] for g in got] == [("a/run.py", "app failed"), ("b/run.py", "app failed")], got
    assert "ran in a" in got[0][2] and "ran in b" in got[1][2], got
    assert len({r["log"] for r in summary["rows"]}) == 2   # a row folder each


@pytest.mark.parametrize("make, why", [
    (lambda folder, outside: "../outside/app.py", "'..'"),
    (lambda folder, outside: "ok/../../outside/app.py", "'..'"),
    (lambda folder, outside: str(outside / "app.py"), "absolute"),
    (lambda folder, outside: (folder / "linked").symlink_to(outside) or "linked/app.py", "a link out of"),
])
def test_a_files_entry_outside_the_folder_is_refused_in_one_line(tmp_path, make, why):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "app.py").write_text("raise SystemExit('outside ran')\n")
    folder = tmp_path / "apps"
    (folder / "ok").mkdir(parents=True)
    entry = make(folder, outside)
    listed = tmp_path / "list.txt"
    listed.write_text(f"{entry}\n")
    with pytest.raises(apps.AppsError) as info:
        apps.list_apps(str(folder), str(listed))
    message = str(info.value)
    assert "\n" not in message and why in message and entry in message, message
    assert message.startswith("--files names a path outside"), message


def test_the_command_line_refuses_a_files_entry_outside_the_folder_in_one_line(tmp_path):
    from run_cli import assert_one_line_error, swizzleperf
    (tmp_path / "apps").mkdir()
    (tmp_path / "app.py").write_text("raise SystemExit('outside ran')\n")
    (tmp_path / "list.txt").write_text("../app.py\n")
    proc = swizzleperf("eval", "--apps", "apps", "--files", "list.txt", "--hw", "mi300x", cwd=tmp_path, timeout=120)
    assert_one_line_error(proc, "--files names a path outside apps: ../app.py (it holds '..')")
    assert proc.returncode == 2 and not (tmp_path / ".swizzleperf").exists()


def test_an_app_that_writes_over_the_record_ends_the_eval_in_one_line(tmp_path, monkeypatch):
    """Round eight of #41: an app (your code, with your rights) wrote garbage over the record and the
    eval ended in a double sqlite3.DatabaseError traceback. Whether SQLite notices at the row's save
    depends on the connections still open, so the record's failure is made certain here: one
    AppsError line naming the record and where the finished rows are."""
    import sqlite3
    workdir = tmp_path / ".swizzleperf"
    folder = tmp_path / "apps"
    folder.mkdir()
    (folder / "app.py").write_text("raise SystemExit('done')\n")

    def written_over(*args, **kwargs):
        raise sqlite3.DatabaseError("file is not a database")
    monkeypatch.setattr(apps, "_save", written_over)
    options = apps.AppsOptions(apps_dir=str(folder), names=["app.py"], iterations=1, row_budget_s=60,
                               hw="mi300x", workdir=str(workdir), out=str(tmp_path / "out" / "t"))
    with pytest.raises(apps.AppsError, match="became unusable during eval .*did an app write over it") as caught:
        apps.run_apps(options, gpus=1, devices=[])
    assert "\n" not in str(caught.value) and str(workdir / "apps") in str(caught.value)


# -- a file name that is not UTF-8 (red team 11, A08) ---------------------------------------------

NOT_UTF8 = b"\xff\xfe.py"
NOT_UTF8_SHOWN = "b'\\xff\\xfe.py'"   # its row's name: the bytes as Python writes them


def _eval_id(stdout: str) -> str:
    return next(line.split()[1] for line in stdout.splitlines() if line.startswith("eval apps-"))


def test_a_file_name_that_is_not_utf8_is_one_refused_row_and_the_eval_resumes(tmp_path):
    """A08: the row of ``\\xff\\xfe.py`` (a str with lone surrogates) crashed the eval where it was
    stored (UnicodeEncodeError in ``_save``, exit 1, the other rows and the tables lost), and again
    on ``--resume``; a newline in a name made the eval unresumable. Such a name is now one refused
    row, named as text, before any worker; the rest run, the tables are written, the eval resumes."""
    from run_cli import swizzleperf
    folder = tmp_path / "apps"
    folder.mkdir()
    for name in (NOT_UTF8, b"a\nb.py"):
        (folder / os.fsdecode(name)).write_text("raise SystemExit('never runs')\n")
    (folder / "ok.py").write_text("raise SystemExit('ok ran')\n")
    workdir = tmp_path / ".swizzleperf"
    proc = swizzleperf("eval", "--apps", str(folder), "--hw", "mi300x", "--iterations", "1", "--row-budget", "120",
                       "--workdir", str(workdir), "--out", str(tmp_path / "out" / "t"), cwd=tmp_path)
    assert proc.returncode == 0 and "Traceback" not in proc.stdout + proc.stderr, proc.stderr
    lines = [line for line in proc.stdout.splitlines() if line.startswith("[")]
    assert len(lines) == 3, lines
    bad = [line for line in lines if NOT_UTF8_SHOWN in line]
    assert len(bad) == 1 and "refused" in bad[0] and "not UTF-8" in bad[0], lines
    assert any(line[6:].startswith("'a\\nb.py' (-, ") and "refused" in line for line in lines), lines
    assert any("ok.py" in line and "ok ran" in line for line in lines), lines
    table = (tmp_path / "out" / "t.md").read_bytes().decode("utf-8")   # written, and UTF-8
    assert NOT_UTF8_SHOWN in table and "pending" not in table, table
    eval_id = _eval_id(proc.stdout)
    again = swizzleperf("eval", "--resume", eval_id, "--again", "refused", "--workdir", str(workdir), cwd=tmp_path)
    assert again.returncode == 0 and "Traceback" not in again.stdout + again.stderr, again.stderr
    assert "refused 2" in again.stdout and "pending" not in again.stdout, again.stdout
    summary = apps.summarize(apps.stored_options(str(workdir), eval_id), eval_id)
    assert [r["app"] for r in summary["rows"]] == ["'a\\nb.py'", "ok.py", NOT_UTF8_SHOWN], summary["rows"]


def test_a_files_list_naming_a_file_that_is_not_utf8_lists_it_as_text(tmp_path):
    """``--files`` holding the bytes ``\\xff\\xfe.py``: a UnicodeDecodeError traceback before; now
    the name as the folder's listing gives it, and a missing one named in one line."""
    folder = tmp_path / "apps"
    folder.mkdir()
    (folder / os.fsdecode(NOT_UTF8)).write_text("raise SystemExit('never runs')\n")
    listed = tmp_path / "list.txt"
    listed.write_bytes(NOT_UTF8 + b"\n")
    assert apps.list_apps(str(folder), str(listed)) == [NOT_UTF8_SHOWN] == apps.list_apps(str(folder))
    listed.write_bytes(b"\xfe\xff.py\n")
    with pytest.raises(apps.AppsError) as caught:
        apps.list_apps(str(folder), str(listed))
    message = str(caught.value)
    assert message.startswith("--files names 1 file(s) not in") and "b'\\xfe\\xff.py'" in message, message
    message.encode("utf-8")


def test_an_apps_folder_whose_path_is_not_printable_text_is_refused_in_one_line(tmp_path):
    """Every row of such a folder was refused by its worker, and its path went into the tables'
    title as is (a lone surrogate there: no table written). One line now, before any row."""
    for name in (b"\xff", b"new\nline"):
        folder = tmp_path / os.fsdecode(name)
        folder.mkdir()
        (folder / "app.py").write_text("raise SystemExit('never runs')\n")
        with pytest.raises(apps.AppsError) as caught:
            apps.list_apps(str(folder))
        message = str(caught.value)
        assert message.startswith("--apps ") and "rename" in message and "\n" not in message, message
        message.encode("utf-8")


def test_a_record_holding_text_that_is_not_utf8_resumes(tmp_path):
    """A record written by other means (an app writing over it, a tool of one's own) whose rows hold
    bytes that are not UTF-8: reading them raised sqlite3.OperationalError ("Could not decode to
    UTF-8") out of the resume. They are read as text with the bytes written out; the eval resumes."""
    import sqlite3
    folder = tmp_path / "apps"
    folder.mkdir()
    os.mkfifo(folder / "fifo.py")   # a row without a worker
    workdir = tmp_path / ".swizzleperf"
    options = apps.AppsOptions(apps_dir=str(folder), names=["fifo.py"], iterations=1, row_budget_s=60,
                               hw="mi300x", workdir=str(workdir), out=str(tmp_path / "out" / "t"))
    eval_id, _, _ = apps.run_apps(options, gpus=1, devices=[])
    with sqlite3.connect(workdir / "swizzleperf.db") as db:
        db.execute("UPDATE app_rows SET reason = CAST(X'FF6F6F70730A' AS TEXT)")
        db.execute("INSERT INTO app_rows (eval_id, app, outcome) VALUES (?, CAST(X'FFFE2E7079' AS TEXT), 'refused')",
                   (eval_id,))
    db.close()
    _, summary, files = apps.run_apps(apps.AppsOptions(apps_dir="", workdir=str(workdir)), eval_id, gpus=1, devices=[])
    assert [(r["app"], r["reason"]) for r in summary["rows"]] == [("fifo.py", "\\xffoops\n")], summary["rows"]
    assert set(apps.rows(str(workdir), eval_id).app) == {"fifo.py", "\\xff\\xfe.py"}
    assert all(f.read_bytes().decode("utf-8") for f in files)


def test_an_app_whose_name_begins_with_a_dash_runs_as_its_file_not_as_code(tmp_path):
    """#41 round fourteen: ``python '-cprint(...)#.py'`` took the name for ``-c`` and ran it as code
    (and a record edited to name such a file ran it on ``--resume`` though no file had that name).
    The name is run as ``./-c...#.py``: the file's text runs, the name's never."""
    folder = tmp_path / "apps"
    folder.mkdir()
    name = "-cimport pathlib;pathlib.Path('NAME_RAN').write_text('x')#.py"
    (folder / name).write_text("import pathlib\npathlib.Path('FILE_RAN').write_text('x')\n")
    job = app_worker.RowJob(app=str(folder / name), folder=str(tmp_path / "row"),
                            workdir=str(tmp_path / ".swizzleperf"), budget_s=120.0)
    row = app_worker.run_row(job)
    assert not list(tmp_path.rglob("NAME_RAN")) and list(folder.glob("FILE_RAN")), row
    assert "./-cimport" in row["reason"], row["reason"]


def test_a_row_edited_to_hold_text_in_a_number_column_resumes_without_a_traceback(tmp_path):
    """#41 round fourteen: ``speedup='abc'`` in a row of the record ended ``eval --resume`` in a
    traceback from the table's formatting; the row is read with the number missing."""
    import json
    import sqlite3

    from run_cli import swizzleperf
    folder = tmp_path / "apps"
    folder.mkdir()
    (folder / "a.py").write_text("print(1)\n")
    workdir = tmp_path / "wd"
    proc = swizzleperf("eval", "--apps", str(folder), "-n", "1", "--row-budget", "120", "--workdir", str(workdir),
                       cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (folder / "b.py").write_text("print(2)\n")
    with sqlite3.connect(workdir / "swizzleperf.db") as db:
        eval_id, options = db.execute("SELECT eval_id, options_json FROM app_evals").fetchone()
        options = json.loads(options)
        options["names"].append("b.py")
        db.execute("UPDATE app_evals SET options_json = ?", (json.dumps(options),))
        db.execute("UPDATE app_rows SET speedup = 'abc', seconds = 'x', reason = 7")
    proc = swizzleperf("eval", "--resume", eval_id, "--workdir", str(workdir), cwd=tmp_path, timeout=300)
    assert proc.returncode == 0 and "Traceback" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    assert "2 of 2 answered" in proc.stdout
