"""#41: kernel paths a careless user gives: a symlink loop and a name longer than the file system
takes were a Python traceback from ``optimize`` (``Path.resolve`` raises RuntimeError for a loop
before Python 3.13; ``Path.exists`` raises ENAMETOOLONG); each is one line, nothing started."""
from __future__ import annotations

import pytest
from run_cli import assert_one_line_error, swizzleperf


@pytest.mark.parametrize("command", ["optimize", "simulate", "analyze"])
def test_a_symlink_loop_is_one_line(tmp_path, command):
    (tmp_path / "a.py").symlink_to(tmp_path / "b.py")
    (tmp_path / "b.py").symlink_to(tmp_path / "a.py")
    proc = swizzleperf(command, "a.py", cwd=tmp_path, timeout=120)
    assert_one_line_error(proc, "a.py")
    assert not (tmp_path / ".swizzleperf" / "runs").exists()


@pytest.mark.parametrize("name", ["a" * 5000 + ".py", "/".join(["a" * 255] * 20) + ".py"],
                         ids=["a name of 5000 characters", "a path of 5000 characters"])
def test_a_name_too_long_is_one_line(tmp_path, name):
    proc = swizzleperf("optimize", name, cwd=tmp_path, timeout=120)
    assert_one_line_error(proc, "File name too long")
    assert not (tmp_path / ".swizzleperf" / "runs").exists()
