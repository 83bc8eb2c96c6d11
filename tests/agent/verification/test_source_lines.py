"""Source lines as Python counts them (#41): the tokenizer and the AST's line numbers break lines only
at ``\\n``, ``\\r\\n`` and ``\\r``, while ``str.splitlines`` also breaks at ``\\x0b``, ``\\x0c``,
``\\x1c``-``\\x1e``, ``\\x85``, ``\\u2028`` and ``\\u2029``. Code that cut a module at the target's
AST lines with ``splitlines`` cut the wrong lines: text after a form feed in a comment on the
target's last line became a statement of the module the agent imports (``load_spec``), and a page
break before the target (a ``\\x0c`` line, as editors write them) was refused with an
IndentationError."""
from __future__ import annotations

import ast

import pytest

from swizzleperf.agent.loop import run
from swizzleperf.agent.verification.candidate import canonical_target, splice, target_source, unified_diff
from swizzleperf.agent.verification.load import load_spec
from swizzleperf.agent.verification.swizzles import catalog_source
from swizzleperf.sandbox import write_back
from swizzleperf.sandbox.write_back import digest, write_sealed

ARGS = ["pid", "num_pid_m", "num_pid_n"]
ORDER = "xcd-grouped-m:8:8"
OWN = '@triton.jit\ndef swizzle(pid, num_pid_m, num_pid_n):\n'
LAST = "    return pid_m, pid_n\n"
BREAKS = ["\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]


@pytest.mark.parametrize("text", ["", "a", "a\n", "a\nb", "a\r\nb\rc\n\n", "\r\r\n\n", "a\x0cb\u2028c\n\x85\r\nd"])
def test_source_lines_break_only_where_python_does(text):
    lines = write_back.source_lines(text)
    assert "".join(lines) == text
    assert all(line for line in lines)
    ends = [line for line in lines[:-1] if not line.endswith(("\n", "\r"))]
    assert not ends
    normalised = text.replace("\r\n", "\n").replace("\r", "\n")
    assert len(lines) == normalised.count("\n") + (not normalised.endswith("\n") and bool(normalised))
    if all(c not in text for c in BREAKS):
        assert lines == text.splitlines(keepends=True)


def test_source_lines_agree_with_the_ast_line_numbers():
    text = "a = 1  # x\x0cb = 2\nc = '\u2028'\r\nd = 3 # \x85\re = 4\n"
    tree = ast.parse(text)
    lines = write_back.source_lines(text)
    assert [lines[n.lineno - 1].split("=")[0].strip() for n in tree.body] == ["a", "c", "d", "e"]


@pytest.mark.parametrize("brk", BREAKS)
def test_text_after_a_line_break_character_in_a_comment_of_the_target_never_runs(tmp_path, gemm_source, brk):
    """#41, ESCAPED: ``return pid_m, pid_n  # see notes<FF>open(...)`` on the target's last line. The
    stand-in ``load_spec`` imports cut the target's span with ``splitlines``, which broke at the form
    feed: the comment's tail was left as a statement after the stand-in and ran in the agent."""
    marker = tmp_path / "PWNED"
    assert gemm_source.count(LAST) == 1
    payload = f"open({str(marker)!r}, 'w').close()"
    hostile = gemm_source.replace(LAST, f"    return pid_m, pid_n  # see notes{brk}{payload}\n")
    path = tmp_path / "gemm.py"
    path.write_text(hostile)
    spec = load_spec(path)
    assert spec.rewrite_target == "swizzle" and not marker.exists()
    spliced = splice(hostile, "swizzle", catalog_source(ORDER, ARGS))
    assert "PWNED" not in spliced and "see notes" not in spliced
    path.write_text(spliced)
    load_spec(path)
    assert not marker.exists()


@pytest.mark.parametrize("before", ["\x0c\n", "# page\x0c break\n", "# note \u2028 x\n", "# note \x85 x\n",
                                    "X = 'a\x0cb\u2029c'\n"])
def test_a_page_break_before_the_target_is_accepted_and_only_the_target_changes(tmp_path, gemm_source, before):
    """#41, FALSE-REFUSAL: a ``\\x0c`` line before the target (and a ``\\x85`` / ``\\u2028`` in a
    comment) shifted ``splitlines``' count: the stand-in went in a line early, an IndentationError."""
    assert gemm_source.count("\n\n" + OWN) == 1
    source = gemm_source.replace("\n\n" + OWN, "\n" + before + OWN)
    path = tmp_path / "gemm.py"
    path.write_text(source)
    assert load_spec(path).rewrite_target == "swizzle"
    own = target_source(source, "swizzle")
    assert own.startswith(OWN) and own.endswith(LAST)
    head, tail = source.split(own)
    spliced = splice(source, "swizzle", catalog_source(ORDER, ARGS))
    assert spliced == head + canonical_target(catalog_source(ORDER, ARGS), "swizzle", ARGS) + tail
    assert head.endswith(before)


def _with_breaks(gemm_source: str) -> str:
    """kernels/gemm.py with form feeds and line separators in comments and strings, in the target
    and beside it, as a genuine kernel may have them."""
    source = gemm_source.replace("\n\n" + OWN, "\n\x0c\n# section\x0c two \u2028 \x85 end\n"
                                 "NOTE = 'a\x0cb\u2028c\x85d'\n\n" + OWN.replace(":\n", ":  # \x0c target\u2029\n"))
    source = source.replace(LAST, "    return pid_m, pid_n  # \x0c last \u2028\n# after\x0c the target\n", 1)
    assert source.count("\x0c") == 6
    return source


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
def test_a_kernel_with_form_feeds_and_line_separators_round_trips_byte_exact(tmp_path, gemm_source, newline):
    """A genuine best of such a kernel is spliced and written back with every byte outside the
    target as it was: the form feeds, the separators and the line endings."""
    source = _with_breaks(gemm_source)
    kernel = tmp_path / "gemm.py"
    kernel.write_bytes(source.replace("\n", newline).encode())
    assert load_spec(kernel).rewrite_target == "swizzle"
    own = target_source(source, "swizzle")
    assert own.startswith("@triton.jit\n") and own.endswith("# \x0c last \u2028\n")
    head, tail = source.split(own)
    spliced = splice(source, "swizzle", catalog_source(ORDER, ARGS))
    canonical = canonical_target(catalog_source(ORDER, ARGS), "swizzle", ARGS)
    assert spliced == head + canonical + tail
    assert target_source(spliced, "swizzle") == canonical
    diff = unified_diff(source, spliced, "gemm.py")
    assert "\n+# after\x0c the target" not in diff and "-    return pid_m, pid_n  # \x0c last \u2028\n" in diff
    run_dir = tmp_path / ".sp" / "runs" / "r1"
    (run_dir / "candidates").mkdir(parents=True)
    best_file = run_dir / "candidates" / "candidate001_gemm.py"
    best = {"name": ORDER, "kind": "candidate", "kernel_file": str(best_file),
            "kernel_sha256": write_sealed(best_file, spliced)}
    options = run.RunOptions(kernel=str(kernel), kernel_sha256=digest(kernel.read_bytes()), in_place=True)
    line = run._write_back(kernel, best, options, run_dir, "swizzle")
    assert line == f"wrote the best kernel ({ORDER}) into {kernel}"
    assert kernel.read_bytes() == spliced.replace("\n", newline).encode()


def test_the_redteam_payload_through_the_command_line_runs_nothing(tmp_path, gemm_source, monkeypatch):
    """The replay's own command, ``swizzleperf optimize gemm.py -n 1``: the run goes on (no refusal of
    the user's kernel) and the comment's tail never runs, in the agent or its workers."""
    from run_cli import swizzleperf
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "home" / ".cache"))
    marker = tmp_path / "PWNED"
    hostile = gemm_source.replace(LAST, f"    return pid_m, pid_n  # see notes\x0cimport os; "
                                        f"os.system('id > {marker}')\n")
    (tmp_path / "gemm.py").write_text(hostile)
    proc = swizzleperf("optimize", "gemm.py", "-n", "1", "--hw", "mi300x", "--workdir", str(tmp_path / "wd"),
                       cwd=tmp_path)
    assert not marker.exists(), proc.stdout + proc.stderr
    assert proc.returncode == 0 and "Traceback" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
