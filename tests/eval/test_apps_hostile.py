"""``swizzleperf eval --apps`` against hostile apps and names (issue #41, round four): each ends as
one row with a true one-line reason, the table stays one line a row. Hermetic: a private HOME,
the caches of conftest.py."""
from __future__ import annotations

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
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "target.py").write_text("raise SystemExit('the target ran')\n")
    folder = tmp_path / "apps"
    folder.mkdir()
    (folder / "linked.py").symlink_to(elsewhere / "target.py")
    options = apps.AppsOptions(apps_dir=str(folder), names=apps.list_apps(str(folder)), iterations=1,
                               row_budget_s=60, hw="mi300x", workdir=str(tmp_path / ".swizzleperf"),
                               out=str(tmp_path / "out" / "t"))
    _, summary, _ = apps.run_apps(options, gpus=1, devices=[])
    assert [(r["app"], r["outcome"]) for r in summary["rows"]] == [("linked.py", "app failed")], summary["rows"]
    assert summary["counts"]["pending"] == 0 and "the target ran" in summary["rows"][0]["reason"]


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
