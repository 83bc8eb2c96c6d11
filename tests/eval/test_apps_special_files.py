"""An apps folder holding a file that is not a regular file (red team 41i): a named pipe ``fifo.py``
sat at the stage "profile" until the row's budget (900 s by default), since ``python fifo.py`` blocks
opening it. A named pipe, a socket or a device (a link to one included) is now the app's recorded
failure, its kind the reason, up front: no worker is started and the file is never opened.
Hermetic: a private HOME, the caches of conftest.py."""
from __future__ import annotations

import os
import socket
import time

import pytest
from run_cli import swizzleperf

from swizzleperf.eval import apps


@pytest.fixture(autouse=True)
def _private_home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "home" / ".cache"))


#: A row's budget in these tests: the hang, before, ended here as "timeout".
BUDGET_S = 20


def _special_folder(tmp_path):
    folder = tmp_path / "apps"
    folder.mkdir()
    os.mkfifo(folder / "fifo.py")
    (folder / "null.py").symlink_to("/dev/null")
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(folder / "sock.py"))
    return folder, listener


@pytest.mark.parametrize("listed", [False, True], ids=["every *.py", "--files"])
def test_a_pipe_a_socket_and_a_device_are_each_the_apps_failure_without_running(tmp_path, listed):
    folder, listener = _special_folder(tmp_path)
    files = None
    if listed:
        files = tmp_path / "files.txt"
        files.write_text("fifo.py\nnull.py\nsock.py\n")
    try:
        options = apps.AppsOptions(apps_dir=str(folder), names=apps.list_apps(str(folder), files and str(files)),
                                   iterations=1, row_budget_s=BUDGET_S, hw="mi300x",
                                   workdir=str(tmp_path / ".swizzleperf"), out=str(tmp_path / "out" / "t"))
        started = time.monotonic()
        _, summary, _ = apps.run_apps(options, gpus=3, devices=[])
    finally:
        listener.close()
    rows = {r["app"]: r for r in summary["rows"]}
    assert {a: r["outcome"] for a, r in rows.items()} == dict.fromkeys(["fifo.py", "null.py", "sock.py"],
                                                                        "app failed"), rows
    assert "is a named pipe" in rows["fifo.py"]["reason"]
    assert "is a character device" in rows["null.py"]["reason"]
    assert "is a socket" in rows["sock.py"]["reason"]
    assert all("not a regular file: not opened" in r["reason"] and "\n" not in r["reason"] for r in rows.values())
    assert time.monotonic() - started < BUDGET_S / 2, "a row waited on its special file"
    assert not (tmp_path / ".swizzleperf" / "apps").exists() or not any(
        (tmp_path / ".swizzleperf" / "apps").rglob("worker.log")), "a worker was started for a special file"


def test_the_command_line_prints_one_line_for_a_named_pipe_and_ends(tmp_path):
    folder = tmp_path / "apps"
    folder.mkdir()
    os.mkfifo(folder / "fifo.py")
    proc = swizzleperf("eval", "--apps", str(folder), "-n", "1", "--hw", "mi300x", "--row-budget", str(BUDGET_S),
                       cwd=tmp_path, timeout=300)
    assert "Traceback" not in proc.stdout + proc.stderr
    lines = [line for line in proc.stdout.splitlines() if "fifo.py" in line and "app failed" in line]
    assert len(lines) == 1 and "is a named pipe, not a regular file: not opened" in lines[0], proc.stdout
