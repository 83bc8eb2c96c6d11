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


@pytest.mark.parametrize("workdir", ["loop", "/proc/self/runs-here", "gemm.py/sub"],
                         ids=["a --workdir that is a link loop", "a --workdir in /proc", "a --workdir under a file"])
def test_a_workdir_that_cannot_be_made_is_one_line(tmp_path, workdir):
    """#41, replayed from outside: a --workdir whose run folder cannot be made (a link loop,
    /proc, a path under a regular file) was a traceback from ``Path.mkdir``."""
    import shutil
    from pathlib import Path
    shutil.copy(Path(__file__).resolve().parents[2] / "kernels" / "gemm.py", tmp_path / "gemm.py")
    (tmp_path / "loop").symlink_to("loop")
    proc = swizzleperf("optimize", "gemm.py", "-n", "1", "--workdir", workdir, cwd=tmp_path, timeout=300)
    assert_one_line_error(proc, "cannot make the run folder")
