"""The lines the lift inserts into the user's module (agent/capture/lift.py) are indented as the
lines they align with are written: the rewrite target as the kernel's ``def`` line, the linear pid
and the target's call as the first statement of the mapping. They were indented by that many
spaces as the AST's ``col_offset`` counts, which counts a form feed as a column (Python's
tokenizer counts it as nothing) and a tab as one: ``\\x0cdef k`` put the target at column 1 of the
module (IndentationError), a body indented with tabs got a call indented with one space (TabError).

By AST and text, nothing imported: compiled Triton refuses a ``def`` after a form feed itself
(tests/agent/verification/test_load_form_feed.py), which is no concern of the text checked here.
A non-ASCII character never stands before the nodes indented from: a ``def`` and the mapping's
statements (on lines of their own, or the lift refuses) follow only their line's indentation."""
from __future__ import annotations

import ast

import pytest

from swizzleperf.agent.capture.lift import Launch, lift
from swizzleperf.sandbox.write_back import source_lines

HEADER = "import triton\nimport triton.language as tl\n\n\n"
DEF = "def k(x_ptr, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):\n"
# 1-D: `pid` stays in the kernel, the call replaces the rest of the mapping
GROUPED = ["pid = tl.program_id(0)", "num_pid_n = tl.cdiv(N, BLOCK_N)", "pid_m = pid // num_pid_n",
           "pid_n = pid % num_pid_n", "tl.store(x_ptr + pid_m * N + pid_n + tl.arange(0, BLOCK_M), 0.0)"]
# 2-D: a linear pid line goes before the call
TWO_D = ["pid_m = tl.program_id(0)", "pid_n = tl.program_id(1)",
         "tl.store(x_ptr + pid_m * N + pid_n + tl.arange(0, BLOCK_M), 0.0)"]
VALUES = dict(M=96, N=128, BLOCK_M=32, BLOCK_N=32)
LAUNCHES = {"1-D": (GROUPED, Launch(grid=(12,), values=VALUES, pointers=frozenset({"x_ptr"}))),
            "2-D": (TWO_D, Launch(grid=(4, 3), values=VALUES, pointers=frozenset({"x_ptr"})))}


def _module(body: list, outer: str = "", before_def: str = "", indent: str = "    ", first: str = "") -> str:
    """The kernel ``k`` with ``body`` indented by ``indent`` (``first`` before the first line's),
    ``before_def`` between the def's indentation ``outer`` and ``def``, inside ``if True:`` where
    ``outer`` is not empty."""
    lines = [f"{outer}{first if i == 0 else ''}{indent}{line}\n" for i, line in enumerate(body)]
    kernel = f"{outer}@triton.jit\n{outer}{before_def}{DEF}" + "".join(lines)
    return HEADER + ("if True:\n" if outer else "") + kernel


# (module, the def's indentation as Python reads it, the body's); a form feed on a line of its own
# is a blank line and moves no column: those two kept beside the others, they lifted before the fix too
LAYOUTS = {
    "a form feed starts the def line": (dict(before_def="\x0c"), "", "    "),
    "form feeds and a space start the def line": (dict(before_def="\x0c \x0c"), "", "    "),
    "a form feed on its own line before the def": (dict(before_def="\x0c\n"), "", "    "),
    "a form feed starts the body": (dict(first="\x0c"), "", "    "),
    "a form feed on its own line before the body": (dict(first="\x0c\n"), "", "    "),
    "spaces and a form feed start the body": (dict(first="  \x0c"), "", "    "),
    "the body is indented with tabs": (dict(indent="\t"), "", "\t"),
    "the body is indented with a tab and spaces": (dict(indent="\t  "), "", "\t  "),
    "a kernel in a block indented with tabs": (dict(outer="\t", indent="\t"), "\t", "\t\t"),
    "a form feed inside the def's tab indentation": (dict(outer="\t", before_def="\x0c\t", indent="\t"), "\t", "\t\t"),
}


@pytest.mark.parametrize("launch", list(LAUNCHES))
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_inserted_lines_are_indented_as_the_lines_they_align_with(layout, launch):
    options, def_indent, body_indent = LAYOUTS[layout]
    body, captured = LAUNCHES[launch]
    source = _module(body, **options)
    compile(source, "kernel.py", "exec")   # the user's module is Python
    lifted = lift(source, "k", captured)
    assert lifted.kind == "lifted", lifted.notes
    compile(lifted.source, "kernel.py", "exec")
    block = ast.parse(lifted.source).body
    if options.get("outer"):
        block = block[-1].body   # the `if True:` block
    names = [getattr(node, "name", None) for node in block]
    assert names[-2:] == [lifted.target_name, "k"]   # the target beside the kernel, in its block
    kernel = block[-1].body
    call = next(s for s in kernel if isinstance(s, ast.Assign) and isinstance(s.value, ast.Call)
                and getattr(s.value.func, "id", None) == lifted.target_name)   # a statement of the kernel's body
    assert [t.id for t in call.targets[0].elts] == ["pid_m", "pid_n"]
    lines = source_lines(lifted.source)   # as the AST numbers them: a form feed breaks no line
    assert lines[call.lineno - 1].startswith(f"{body_indent}pid_m, pid_n = {lifted.target_name}(")
    assert f"\n{def_indent}@triton.jit\n{def_indent}def {lifted.target_name}(" in lifted.source
    if launch == "2-D":   # the linear pid, just before the call
        linear = kernel[kernel.index(call) - 1]
        assert ast.unparse(linear) == "pid = tl.program_id(0) + tl.program_id(1) * tl.num_programs(0)"
        assert lines[linear.lineno - 1] == f"{body_indent}{ast.unparse(linear)}\n"


REMAP_HEADER = HEADER + "@triton.jit\ndef _row():\n    return tl.program_id(0)\n\n\n"


@pytest.mark.parametrize("indent", ["\t", "\t  ", "\x0c    ", "  \x0c\t"])
def test_the_remap_prologue_is_indented_as_the_body_is(indent):
    """A kernel whose program id is also read through a function of its own is remapped, not
    lifted (agent/capture/pid_remap.py): its prologue goes before the body's first line, indented as
    that line is (after its last form feed), not by one space per ``col_offset`` column."""
    body = ["pid = _row()", "tl.store(x_ptr + pid * BLOCK_M + tl.arange(0, BLOCK_M), 0.0)"]
    source = REMAP_HEADER + "@triton.jit\n" + DEF + "".join(f"{indent}{line}\n" for line in body)
    compile(source, "kernel.py", "exec")
    lifted = lift(source, "k", LAUNCHES["1-D"][1])
    assert lifted.kind == "remapped", lifted.notes
    compile(lifted.source, "kernel.py", "exec")
    kernel = next(node for node in ast.parse(lifted.source).body if getattr(node, "name", None) == "k")
    first = kernel.body[0]   # the prologue: the target's call on the linear id
    assert lifted.target_name in ast.unparse(first)
    assert source_lines(lifted.source)[first.lineno - 1].startswith(indent.rsplit("\x0c", 1)[-1] + "pid_0 = ")
