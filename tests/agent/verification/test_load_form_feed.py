"""#41, round six, FALSE-REFUSAL: a form feed at the start of the target's ``def`` line
(``@triton.jit`` then ``\\x0cdef swizzle(...)``, which Python compiles: the tokenizer counts a form
feed in a line's indentation as nothing). ``load_spec``'s stand-in was indented by the def's
``col_offset``, 1 for the form feed: an IndentationError, the user's kernel refused.

Compiled Triton itself (not its interpreter) finds a kernel's ``def`` by a pattern of spaces and
tabs only (triton/runtime/jit.py ``INDENT_PATTERN``, 3.9): there such a kernel does not import, and
``load_spec`` says so in Triton's words, one line. Which one this process has is asked of Triton."""
from __future__ import annotations

import pytest

from swizzleperf.agent.verification.load import indent_of, load_spec
from swizzleperf.kernels.spec import KernelLoadError

OWN = "@triton.jit\ndef swizzle(pid, num_pid_m, num_pid_n):\n"


def _triton_takes_a_form_feed_before_def(tmp_path) -> bool:
    """Whether this process's Triton defines a jit function whose ``def`` follows a form feed."""
    import importlib.util
    path = tmp_path / "ff_probe.py"
    path.write_text("import triton\n\n\n@triton.jit\n\x0cdef k(x):\n    pass\n")
    spec = importlib.util.spec_from_file_location("ff_probe", path)
    try:
        spec.loader.exec_module(importlib.util.module_from_spec(spec))
    except ValueError:
        return False
    return True


def _loads_as_triton_allows(tmp_path, path) -> None:
    if _triton_takes_a_form_feed_before_def(tmp_path):
        assert load_spec(path).rewrite_target == "swizzle"
    else:   # compiled Triton refuses the def itself: one line, in its words
        with pytest.raises(KernelLoadError, match="failed to import: ValueError: No function definition found"):
            load_spec(path)


@pytest.mark.parametrize("before", ["\x0c", " \x0c", "\x0c\x0c", "\x0c \x0c"])
def test_a_form_feed_before_the_def_of_the_target_is_accepted(tmp_path, gemm_source, before):
    assert gemm_source.count(OWN) == 1
    source = gemm_source.replace(OWN, OWN.replace("def ", before + "def "))
    compile(source, "gemm.py", "exec")   # Python takes it
    path = tmp_path / "gemm.py"
    path.write_bytes(source.encode())
    _loads_as_triton_allows(tmp_path, path)


def test_a_form_feed_before_the_def_in_a_block_keeps_the_block_s_indentation(tmp_path, gemm_source):
    """Inside ``if True:`` the indentation is what follows the form feed (a tab stays a tab)."""
    block = "if True:\n\t@triton.jit\n\t\x0c\tdef swizzle(pid, num_pid_m, num_pid_n):\n"
    body = gemm_source.split(OWN)[1].split("\n\n\n")[0]
    source = gemm_source.replace(OWN + body, block + "".join("\t" + line if line.strip() else line
                                                             for line in body.splitlines(keepends=True))
                                  + "\n\tAFTER = 1")
    assert block in source and "AFTER" in source
    compile(source, "gemm.py", "exec")
    path = tmp_path / "gemm.py"
    path.write_bytes(source.encode())
    _loads_as_triton_allows(tmp_path, path)


@pytest.mark.parametrize("line, column, indent", [("def f", 0, ""), ("    def f", 4, "    "), ("\x0cdef f", 1, ""),
                                                  ("  \x0c\tdef f", 4, "\t"), ("\tdef f", 1, "\t")])
def test_indent_of_is_the_indentation_python_reads(line, column, indent):
    assert indent_of(line, column) == indent


def test_a_catalog_order_is_spliced_beside_a_def_after_a_form_feed():
    """#41 round six: splice moved the new target to the def's col_offset, 1 for `\\x0cdef` at
    module level, and the module no longer parsed (IndentationError on the bundled GEMM's copy)."""
    import ast

    from swizzleperf.agent.verification.candidate import splice
    module = ("import triton\nimport triton.language as tl\n\n\n@triton.jit\n"
              "\x0cdef swizzle(pid, num_pid_m, num_pid_n):\n    pid_m = pid // num_pid_n\n"
              "    pid_n = pid % num_pid_n\n    return pid_m, pid_n\n\n\nX = 1\n")
    new = ("@triton.jit\ndef swizzle(pid, num_pid_m, num_pid_n):\n    pid_m = pid % num_pid_m\n"
           "    pid_n = pid // num_pid_m\n    return pid_m, pid_n\n")
    out = splice(module, "swizzle", new)
    ast.parse(out)
    assert "pid_m = pid % num_pid_m" in out and out.endswith("X = 1\n")
