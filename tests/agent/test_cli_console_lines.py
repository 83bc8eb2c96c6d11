"""The console's lines (the real-LLM report of 2026-12-07, finding 14): a reason cut for the attempt
line says it was cut, and a log or a pipe gets each line whole (a reason broken mid-phrase at 150
columns read "... of a proposal (2 \\nrequest(s); deadline: ..."), while a terminal still wraps at
its width."""
from __future__ import annotations

import fcntl
import os
import struct
import subprocess
import sys
import termios

from swizzleperf.agent import cli

LONG = ("LLM endpoint http://127.0.0.1:8089/v1: no usable reply within the 300 s deadline of a proposal "
        "(2 request(s); deadline: cancelled while the reply was streaming) and 8122 more never come back")


def _failed(reason: str) -> dict:
    return {"kind": "candidate", "iteration": 3, "name": "none", "verdict": "NO_CANDIDATE", "reason": reason}


def test_a_cut_reason_ends_with_an_ellipsis():
    """196 characters: cut, and the cut says so; 160 fit whole, with no mark."""
    for reason, shown in ((LONG, LONG[:159] + "…"), (LONG[:160], LONG[:160]), ("short", "short")):
        line = cli._attempt_line(_failed(reason))
        assert line.endswith(": " + cli._text(shown)), line


def _print_long_line(env: dict, stdout) -> None:
    code = "from swizzleperf.agent import cli; cli.console.print('word ' * 60 + 'end', markup=False)"
    subprocess.run([sys.executable, "-c", code], stdout=stdout, stderr=subprocess.PIPE, env=env, timeout=120,
                   check=True)


def test_a_log_gets_each_line_whole_and_a_terminal_wraps_it(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "FORCE_COLOR", "TTY_COMPATIBLE")}
    env["HOME"] = str(tmp_path)
    log = tmp_path / "log.txt"
    with log.open("wb") as f:
        _print_long_line(env, f)
    assert log.read_text().splitlines() == ["word " * 60 + "end"]
    master, slave = os.openpty()   # a terminal 80 columns wide: rich wraps as before
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    try:
        _print_long_line(env, slave)
    finally:
        os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:   # EIO: the terminal's other end is closed
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    lines = [line for line in out.decode().replace("\r", "").split("\n") if line.strip()]
    assert len(lines) == 4 and all(len(line.rstrip()) <= 80 for line in lines), lines
