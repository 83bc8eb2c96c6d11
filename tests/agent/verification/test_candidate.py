"""Static check and AST splice of candidates (pure Python, no kernel runs)."""
import ast
import sys
from pathlib import Path

import pytest

from swizzleperf.agent.verification import candidate as candidates
from swizzleperf.agent.verification.candidate import (MAX_DEPTH, CandidateError, canonical_target, check_candidate,
                                                      splice, target_args, target_source, unified_diff)
from swizzleperf.agent.verification.swizzles import catalog_source

ROOT = Path(__file__).resolve().parents[3]

ARGS = ["pid", "num_pid_m", "num_pid_n"]
GOOD = '''@triton.jit
def swizzle(pid, num_pid_m, num_pid_n):
    """Column-major."""
    GROUP: tl.constexpr = 4
    pid_m = tl.minimum(pid % num_pid_m, num_pid_m - 1)
    pid_n = pid // num_pid_m
    return pid_m, pid_n
'''


def test_accepts_catalog_members_and_a_hand_written_target():
    check_candidate(GOOD, "swizzle", ARGS)
    for name in ("row-major", "column-major", "grouped-m:8", "grouped-n:3", "xcd-contiguous:8",
                 "xcd-grouped-m:8:8"):
        check_candidate(catalog_source(name, ARGS), "swizzle", ARGS)


@pytest.mark.parametrize("source, message", [
    ("def swizzle(pid, num_pid_m, num_pid_n):\n    return pid, 0\n", "@triton.jit"),
    ("@triton.jit\ndef swizzle(pid, m):\n    return pid, 0\n", "must keep its parameters"),
    ("@triton.jit\ndef other(pid, num_pid_m, num_pid_n):\n    return pid, 0\n", "exactly one function"),
    ("import os\n@triton.jit\ndef swizzle(pid, num_pid_m, num_pid_n):\n    return pid, 0\n", "exactly one function"),
    ("@triton.jit\ndef swizzle(pid, num_pid_m, num_pid_n):\n    x = tl.load(pid)\n    return x, 0\n", "tl.load"),
    ("@triton.jit\ndef swizzle(pid, num_pid_m, num_pid_n):\n    import os\n    return pid, 0\n", "Import"),
    ("@triton.jit\ndef swizzle(pid, num_pid_m, num_pid_n):\n    while True:\n        pass\n", "While"),
    ("@triton.jit\ndef swizzle(pid, num_pid_m, num_pid_n):\n    return os.getpid(), 0\n", "os.getpid is not allowed"),
    ("@triton.jit\ndef swizzle(pid, num_pid_m, num_pid_n):\n    return pid.__class__, 0\n", "not allowed"),
    ("@triton.jit\ndef swizzle(pid, num_pid_m, num_pid_n)\n    return pid, 0\n", "does not parse"),
    ("@triton.jit\ndef swizzle(pid, num_pid_m, num_pid_n):\n    if pid < 3:\n        pid = 2 - pid\n    return pid, 0\n", "tl.where"),
    ("@triton.jit\ndef swizzle(pid, num_pid_m, num_pid_n):\n    return (pid if pid < 3 else 0), 0\n", "tl.where"),
    ("@triton.jit\ndef swizzle(pid, num_pid_m, num_pid_n):\n    s = 'x'\n    return pid, 0\n", "numbers only"),
])
def test_rejects_with_a_precise_reason(source, message):
    with pytest.raises(CandidateError, match=message):
        check_candidate(source, "swizzle", ARGS)


BODY = "    return pid // num_pid_n, pid % num_pid_n\n"
PAYLOAD = '__import__("builtins").exec("open(\'/tmp/pwned\', \'w\')")'


# Every construct that Python evaluates when the `def` statement itself runs (at import of the
# spliced module, before any check of the body matters): each must be refused statically.
@pytest.mark.parametrize("header, message", [
    # the reported escape: a default that runs code, with a valid grouped body
    (f"@triton.jit\ndef swizzle(pid, num_pid_m, num_pid_n={PAYLOAD}):\n", "default"),
    ("@triton.jit\ndef swizzle(pid, num_pid_m, num_pid_n=(lambda: 0)()):\n", "default"),
    ("@triton.jit\ndef swizzle(pid, num_pid_m, num_pid_n=[0][0]):\n", "default"),
    (f"@triton.jit\ndef swizzle(pid, num_pid_m, num_pid_n, *, extra={PAYLOAD}):\n", "must keep its parameters"),
    (f"@triton.jit\ndef swizzle(pid, num_pid_m, num_pid_n: {PAYLOAD}):\n", "annotation"),
    ("@triton.jit\ndef swizzle(pid: print('x'), num_pid_m, num_pid_n):\n", "annotation"),
    (f"@triton.jit\ndef swizzle(pid, num_pid_m, num_pid_n) -> {PAYLOAD}:\n", "return annotation"),
    (f"@triton.jit\n@{PAYLOAD}\ndef swizzle(pid, num_pid_m, num_pid_n):\n", "exactly @triton.jit"),
    ("@triton.jit(debug=True)\ndef swizzle(pid, num_pid_m, num_pid_n):\n", "exactly @triton.jit"),
    ("@(lambda f: f)\ndef swizzle(pid, num_pid_m, num_pid_n):\n", "exactly @triton.jit"),
    ("@triton.jit\ndef swizzle(pid, num_pid_m, /, num_pid_n):\n", "must keep its parameters"),
    ("@triton.jit\ndef swizzle(pid, num_pid_m, num_pid_n, *rest):\n", "must keep its parameters"),
    ("@triton.jit\ndef swizzle(pid, num_pid_m, num_pid_n, **rest):\n", "must keep its parameters"),
])
def test_refuses_code_in_the_function_node_outside_its_body(header, message):
    with pytest.raises(CandidateError, match=message):
        check_candidate(header + BODY, "swizzle", ARGS)


@pytest.mark.skipif(sys.version_info < (3, 12), reason="type parameters are Python 3.12 syntax")
def test_refuses_type_parameters():
    source = f"@triton.jit\ndef swizzle[T: {PAYLOAD}](pid, num_pid_m, num_pid_n):\n" + BODY
    with pytest.raises(CandidateError, match="type parameters"):
        check_candidate(source, "swizzle", ARGS)


@pytest.mark.parametrize("extra", [
    f"x = {PAYLOAD}\n", "import os\n", "class A:\n    pass\n", f"{PAYLOAD}\n",
    "@triton.jit\ndef helper(pid):\n    return pid\n",
])
def test_refuses_anything_else_at_module_level_in_the_reply(extra):
    source = "@triton.jit\ndef swizzle(pid, num_pid_m, num_pid_n):\n" + BODY
    for text in (extra + source, source + extra):
        with pytest.raises(CandidateError, match="exactly one function"):
            check_candidate(text, "swizzle", ARGS)


@pytest.mark.parametrize("line, message", [
    ("    f = tl.where\n    return f(pid < 1, 0, pid), 0\n", "calling 'f'"),
    ("    return max(pid, 0)(pid), 0\n", "calling"),
    ("    __builtins__ = 0\n    return pid, 0\n", "dunder"),
    ("    return triton.jit(pid), 0\n", "triton.jit is not allowed"),
    ("    \"\"\"doc\"\"\"\n    s = \"doc\"\n    return pid, 0\n", "numbers only"),
    ("    return (lambda: pid)(), 0\n", "calling .lambda"),
    ("    return [p for p in range(3)], 0\n", "ListComp"),
    ("    return (x := pid), 0\n", "NamedExpr"),
])
def test_refuses_calls_and_names_that_reach_beyond_the_allowed_set(line, message):
    with pytest.raises(CandidateError, match=message):
        check_candidate("@triton.jit\ndef swizzle(pid, num_pid_m, num_pid_n):\n" + line, "swizzle", ARGS)


def test_accepts_numeric_defaults_and_constexpr_annotations():
    check_candidate("@triton.jit\ndef swizzle(pid, num_pid_m: tl.constexpr, num_pid_n=-1):\n"
                    "    \"\"\"doc\"\"\"\n" + BODY, "swizzle", ARGS)


@pytest.mark.parametrize("path", sorted((ROOT / "kernels").glob("*.py")) +
                         sorted((ROOT / "kernels" / "distributed").glob("*.py")), ids=lambda p: p.stem)
def test_every_bundled_kernels_own_target_passes(path):
    source = path.read_text()
    if "def swizzle(" in source:
        check_candidate(target_source(source, "swizzle"), "swizzle", target_args(source, "swizzle"))


def test_splice_changes_only_the_target(gemm_source):
    new = splice(gemm_source, "swizzle", GOOD)
    old_tree, new_tree = ast.parse(gemm_source), ast.parse(new)
    assert len(old_tree.body) == len(new_tree.body)
    assert target_source(new, "swizzle") == canonical_target(GOOD, "swizzle", ARGS)
    assert "Column-major" not in gemm_source and "Column-major" in new
    diff = unified_diff(gemm_source, new, "gemm.py")
    assert diff.startswith("--- a/gemm.py") and "+    pid_n = pid // num_pid_m" in diff
    assert target_args(gemm_source, "swizzle") == ARGS


def test_splice_refuses_a_module_without_the_target():
    with pytest.raises(CandidateError, match="no top-level function"):
        splice("x = 1\n", "swizzle", GOOD)


def test_splice_of_the_modules_own_target_is_the_identity(gemm_source):
    assert splice(gemm_source, "swizzle", target_source(gemm_source, "swizzle")) == gemm_source


GUARDED = """import triton
import triton.language as tl

HAS_TRITON = True
if HAS_TRITON:
    @triton.jit
    def swizzle(pid, num_pid_m, num_pid_n):
        return pid // num_pid_n, pid % num_pid_n

    @triton.jit
    def k(x_ptr):
        pid_m, pid_n = swizzle(tl.program_id(0), 4, 4)
        tl.store(x_ptr + pid_m * 4 + pid_n, 1.0)
"""


def test_a_target_inside_a_module_level_block_is_spliced_at_its_column():
    """A kernel defined only where Triton imports (`if HAS_TRITON:`): the new target takes the old
    one's place at its indentation, and a change anywhere else in the block is still refused."""
    new = splice(GUARDED, "swizzle", GOOD)
    ast.parse(new)
    assert "    @triton.jit\n    def swizzle(pid, num_pid_m, num_pid_n):" in new
    assert "Column-major" in target_source(new, "swizzle") and target_args(GUARDED, "swizzle") == ARGS
    assert new.endswith(GUARDED[GUARDED.index("    @triton.jit\n    def k("):])      # the kernel untouched
    sneaky = GUARDED.replace("tl.store(x_ptr + pid_m * 4 + pid_n, 1.0)", "tl.store(x_ptr, 2.0)")
    from swizzleperf.agent.verification import candidate
    with pytest.raises(CandidateError, match="changed more than"):
        candidate._assert_only_target_changed(ast.parse(GUARDED), ast.parse(sneaky), "swizzle")
    candidate._assert_only_target_changed(ast.parse(GUARDED), ast.parse(new), "swizzle")


# -- one canonical source (issue #21): what is checked is what runs -------------------------------

# A docstring that holds a second `def swizzle` line: Triton's interpreter starts at the last line
# beginning with `def ` (the docstring's, whose code it runs), its compiler at the first (the real
# body), and the real body closes the docstring's quotes in what the interpreter reads as a comment.
DOCSTRING_DEF = '''@triton.jit
def swizzle(pid, num_pid_m, num_pid_n):
    """Row-major.
def swizzle(pid, num_pid_m, num_pid_n):
    open("/tmp/pwned", "w").write(str(__import__("os").environ))
    return pid // num_pid_n, pid % num_pid_n
    # """
    return pid % num_pid_m, pid % num_pid_n
'''


def test_the_docstring_def_passes_the_check_but_never_reaches_the_canonical_source():
    check_candidate(DOCSTRING_DEF, "swizzle", ARGS)   # the body is harmless: the check is right
    text = canonical_target(DOCSTRING_DEF, "swizzle", ARGS)
    assert "pwned" not in text and "environ" not in text and "open(" not in text
    assert [line for line in text.splitlines() if line.strip().startswith("def ")] == [
        "def swizzle(pid, num_pid_m, num_pid_n):"]
    assert text.splitlines()[2].strip() == '"""Row-major."""'  # the summary line only
    assert text.rstrip().endswith("return (pid % num_pid_m, pid % num_pid_n)")


@pytest.mark.parametrize("doc", ["'x'", '"""a\n\n   b  """', '"""\\x0c\\u2028 \\" \\\\ q"""', '""""""', ""])
def test_the_canonical_docstring_is_one_plain_line(doc, gemm_source):
    source = f"@triton.jit\ndef swizzle(pid, num_pid_m, num_pid_n):\n    {doc}\n" + BODY
    text = canonical_target(source, "swizzle", ARGS)
    assert len(text.splitlines()) <= 4 and len(text.split("\n")) == len(text.splitlines()) + 1
    again = ast.parse(text).body[0]
    assert ast.dump(again.body[-1]) == ast.dump(ast.parse(BODY.strip()).body[0])
    assert splice(gemm_source, "swizzle", source).count(text) == 1


def test_splice_writes_the_canonical_text_not_the_replys(gemm_source):
    reply = GOOD.replace("    pid_n = pid // num_pid_m\n", "    pid_n = pid // num_pid_m  # a comment\n\n\n")
    new = splice(gemm_source, "swizzle", reply)
    assert "a comment" not in new and canonical_target(reply, "swizzle", ARGS) in new


def test_splice_checks_whatever_it_is_given(gemm_source):
    # every caller (the loop, a distributed configuration's tile order, the user-kernel patch)
    # gets the check and the canonical text from splice itself
    with pytest.raises(CandidateError, match="@triton.jit"):
        splice(gemm_source, "swizzle", "def swizzle(pid, num_pid_m, num_pid_n):\n    return pid, 0\n")
    with pytest.raises(CandidateError, match="must keep its parameters"):
        splice(gemm_source, "swizzle", "@triton.jit\ndef swizzle(pid):\n    return pid, 0\n")


# -- only local names are bound ------------------------------------------------------------------

@pytest.mark.parametrize("line", [
    "    tl.where = tl.minimum\n",
    "    tl.where += 1\n",
    "    triton.cdiv: tl.constexpr = 1\n",
    "    for tl.minimum in range(2):\n        pass\n",
    "    for pid.x in range(2):\n        pass\n",
    "    pid.to = 1\n",
    "    (a, tl.where) = (1, 2)\n",
    "    a, *tl.where = (1, 2)\n",
    "    pid[0] = 1\n",
    "    del pid\n",
    "    del tl.where\n",
    "    global g\n    g = 1\n",
    "    with tl.where as w:\n        pass\n",
    "    tl = 0\n",
    "    min = 0\n",
    "    for range in (1, 2):\n        pass\n",
])
def test_refuses_every_store_that_is_not_a_local_name(line):
    with pytest.raises(CandidateError, match="local|not allowed"):
        check_candidate("@triton.jit\ndef swizzle(pid, num_pid_m, num_pid_n):\n" + line + BODY,
                        "swizzle", ARGS)


def test_local_names_may_be_bound_every_allowed_way():
    check_candidate("@triton.jit\ndef swizzle(pid, num_pid_m, num_pid_n):\n"
                    "    a, b = pid, 1\n    a += b\n    c: tl.constexpr = 2\n"
                    "    for i in range(2):\n        a = a + i * c\n" + BODY, "swizzle", ARGS)


# -- sizes that once took the agent down ----------------------------------------------------------

@pytest.mark.parametrize("expression, message", [
    ("+".join(["1"] * 2500), "nest|parse"),                       # RecursionError before
    ("(" * 300 + "pid" + ")" * 300, "parse|nest"),
    ("9" * 3600, "characters|bits"),
    (str(2 ** 64), "bits"),
    ("pid + 1e400", "finite"),
    ("(" * 60 + "pid" + " + 1)" * 60, "nests more than"),
    ("9 ** 9 ** 9 ** 9", "constant exponent"),                   # minutes in the verifier before (#41)
    ("pid ** num_pid_m", "constant exponent"),
    ("9 ** 63", "63 bits"),
    ("0\n    for i in tl.static_range(1000000000):\n        pid = pid + 0", "steps over constant bounds"),
    ("0\n    for i in range(0, 10 ** 18, 2):\n        pid = pid + 0", "steps over constant bounds"),
    # each loop within the bound, nested or one after another past it (#41, round seven: 4.3e9 steps)
    ("0\n    for i in tl.static_range(4096):\n        for j in tl.static_range(4096):\n            pid = pid + 0",
     "steps in all"),
    ("0\n    for i in range(64):\n        for j in range(65):\n            pid = pid + 0", "steps in all"),
    ("0\n    for i in range(65536):\n        pid = pid + 0", "steps over constant bounds"),   # the bound before
    ("0\n" + "".join(f"    for i{k} in range(3000):\n        pid = pid + 0\n" for k in range(2)), "steps in all"),
    ("0\n    for i in range(num_pid_m):\n        for j in range(64):\n            for k in range(2):\n"
     "                pid = pid + 0", "a loop whose bound is not a constant"),
])
def test_huge_and_deep_targets_are_one_clear_refusal(expression, message):
    source = f"@triton.jit\ndef swizzle(pid, num_pid_m, num_pid_n):\n    x = {expression}\n" + BODY
    with pytest.raises(CandidateError, match=message):
        canonical_target(source, "swizzle", ARGS)


def test_loops_within_the_step_bound_in_all_are_allowed():
    """63 + 63 x 64 nested steps (4 095, the bound 4 096) pass the static check, and so do loops over a
    bound the checker computes: a local set once to a number (a loop over 8 XCDs), its arithmetic,
    a tuple's length."""
    for loops in ("    for i in range(63):\n        for j in range(64):\n            pid = pid + 0\n",
                  "    NUM_XCDS: tl.constexpr = 8\n    for i in tl.static_range(NUM_XCDS):\n        pid = pid + 0\n",
                  "    GROUPS = 2 * 4\n    HALF = GROUPS // 2\n"
                  "    for g in range(1, HALF + 1, 2):\n        pid = pid + g\n",
                  "    for x in (1, 2, 3):\n        for k in range(16):\n            pid = pid + x * k\n"):
        canonical_target(f"@triton.jit\ndef swizzle(pid, num_pid_m, num_pid_n):\n{loops}" + BODY, "swizzle", ARGS)


def test_a_deep_decorator_is_one_clear_refusal():
    source = "@" + "a." * 3000 + "b\ndef swizzle(pid, num_pid_m, num_pid_n):\n" + BODY
    with pytest.raises(CandidateError):
        check_candidate(source, "swizzle", ARGS)


def test_the_catalog_and_the_bundled_targets_stay_within_the_depth_limit():
    deepest = 0
    for name in ("xcd-grouped-m:8:8", "grouped-n:3", "column-major"):
        func = check_candidate(catalog_source(name, ARGS), "swizzle", ARGS)
        stack = [(func, 1)]
        while stack:
            node, depth = stack.pop()
            deepest = max(deepest, depth)
            stack.extend((c, depth + 1) for c in ast.iter_child_nodes(node))
    assert deepest <= MAX_DEPTH // 2


# -- the function's form (#41): an `async def`, a class, a lambda, a nested function are each
# refused in one line that names the form; they were "found: AsyncFunctionDef", "found: Assign",
# "found: ClassDef", "FunctionDef is not allowed" -------------------------------------------------

@pytest.mark.parametrize("source, message", [
    ("@triton.jit\nasync def swizzle(pid, num_pid_m, num_pid_n):\n" + BODY,
     "the rewrite target must be a plain `def`, got `async def swizzle` (line 2)"),
    ("async def swizzle(pid):\n    return pid, 0\n",
     "the rewrite target must be a plain `def`, got `async def swizzle` (line 1)"),
    ("swizzle = triton.jit(lambda pid, num_pid_m, num_pid_n: (pid, 0))\n",
     "the rewrite target must be a `def` statement, `@triton.jit def swizzle(...)`, got an assignment of "
     "a lambda to `swizzle` (line 1)"),
    ("class swizzle:\n    pass\n",
     "the rewrite target must be a function, `@triton.jit def swizzle(...)`, got `class swizzle` (line 1)"),
])
def test_another_form_of_the_target_is_named_in_one_line(source, message):
    with pytest.raises(CandidateError) as info:
        check_candidate(source, "swizzle", ARGS)
    assert str(info.value) == message


@pytest.mark.parametrize("inner, form", [
    ("    def inner(x):\n        return x\n", "a nested `def inner`"),
    ("    async def inner(x):\n        return x\n", "a nested `async def inner`"),
    ("    class Inner:\n        pass\n", "a nested `class Inner`"),
    ("    f = lambda x: x\n", "a lambda"),
])
def test_a_function_or_class_inside_the_target_is_named(inner, form):
    with pytest.raises(CandidateError) as info:
        check_candidate("@triton.jit\ndef swizzle(pid, num_pid_m, num_pid_n):\n" + inner + BODY, "swizzle", ARGS)
    assert str(info.value) == (f"line 3: {form} is not allowed: the rewrite target is one function with no "
                               f"function, lambda or class inside it; write its steps inline")


def test_a_plain_target_beside_an_assignment_of_its_name_is_not_called_a_lambda():
    source = "@triton.jit\ndef swizzle(pid, num_pid_m, num_pid_n):\n" + BODY + "swizzle = triton.jit(lambda p: p)\n"
    with pytest.raises(CandidateError, match=r"^candidate must be exactly one function 'swizzle', found: "
                                             r"def swizzle, Assign$"):
        check_candidate(source, "swizzle", ARGS)


# -- a copied docstring names nothing false (a real 1.5B model, 2026-12-07) -------------------------

BASELINE = catalog_source("row-major", ARGS).replace('"""', '"""Map program id ``pid`` to the tile it computes '
                                                           '(row-major).\n\n    Longer text.\n    ', 1)
SHOWN = catalog_source("grouped-n:32", ARGS)


def _doc(text: str) -> str:
    return ast.get_docstring(ast.parse(text).body[0])


def test_a_docstring_copied_from_another_order_is_replaced_before_anything_is_checked():
    """The model copied grouped-n:32's code under the baseline's "(row-major)" docstring, then
    xcd-grouped-m:9:8's under its own docstring with GROUP_SIZE_M changed: neither docstring
    was true of the code written."""
    copied_onto_shown = SHOWN.replace(_doc(SHOWN), "Map program id ``pid`` to the tile it computes (row-major).")
    assert _doc(canonical_target(copied_onto_shown, "swizzle", ARGS, others=[BASELINE, SHOWN])) == _doc(SHOWN)
    changed = SHOWN.replace("GROUP_SIZE_N: tl.constexpr = 32", "GROUP_SIZE_N: tl.constexpr = 12")
    assert _doc(canonical_target(changed, "swizzle", ARGS, others=[BASELINE, SHOWN])) == candidates.BORROWED_DOC
    on_baseline = GOOD.replace('"""Column-major."""',
                               '"""Map program id ``pid`` to the tile it computes (row-major)."""')
    assert _doc(canonical_target(on_baseline, "swizzle", ARGS, others=[BASELINE])) == candidates.BORROWED_DOC


def test_a_docstring_true_of_its_code_or_the_models_own_is_kept():
    assert _doc(canonical_target(SHOWN, "swizzle", ARGS, others=[BASELINE, SHOWN])) == _doc(SHOWN)
    assert _doc(canonical_target(BASELINE, "swizzle", ARGS, others=[BASELINE])).endswith("(row-major).")
    assert _doc(canonical_target(GOOD, "swizzle", ARGS, others=[BASELINE, SHOWN])) == "Column-major."
    assert canonical_target(GOOD, "swizzle", ARGS) == canonical_target(GOOD, "swizzle", ARGS, others=[BASELINE])


def test_the_replaced_docstring_is_what_is_spliced_verified_and_written_back(gemm_source):
    """The canonical text reads back as itself: splicing it gives the kernel file whose target
    is that very text, and rebuilding that file from its own target (as --in-place checks the
    best kernel before writing it) gives the same file again."""
    own = target_source(gemm_source, "swizzle")
    changed = SHOWN.replace("GROUP_SIZE_N: tl.constexpr = 32", "GROUP_SIZE_N: tl.constexpr = 12")
    copied = changed.replace(_doc(SHOWN), _doc(own).splitlines()[0])
    written = canonical_target(copied, "swizzle", ARGS, others=[own, SHOWN])
    assert candidates.BORROWED_DOC in written and "row-major" not in written
    assert canonical_target(written, "swizzle", ARGS) == written
    module = splice(gemm_source, "swizzle", written)
    assert target_source(module, "swizzle") == written
    assert splice(gemm_source, "swizzle", target_source(module, "swizzle")) == module


# -- loops whose steps cannot be counted (red team 11, M01/M08) ------------------------------------

@pytest.mark.parametrize("loops, line", [
    # the red team's payload: each verification worker held to its timeout, a simulate call to the
    # proposal's deadline
    ("    for i in range(num_pid_m * num_pid_n * 100000000):\n        pid = pid + 0\n", 3),
    ("    for i in range(num_pid_m):\n        for j in tl.static_range(8):\n            pid = pid + 0\n", 3),
    ("    for i in tl.static_range(0, pid, 1):\n        pid = pid + 0\n", 3),
    ("    n = 8\n    n = num_pid_m * 10 ** 8\n    for i in range(n):\n        pid = pid + 0\n", 5),
    ("    n: tl.constexpr = num_pid_m\n    for i in range(n):\n        pid = pid + 0\n", 4),
    ("    for i in range(8):\n        for j in range(i * 10 ** 9):\n            pid = pid + 0\n", 4),
    ("    for i in pid:\n        pid = pid + 0\n", 3),
])
def test_a_loop_whose_bound_is_not_a_constant_is_refused_naming_its_line(loops, line):
    """The prover refuses such a loop; the static check let it run, and only a worker's timeout
    stopped it. Refused now in one line, as the model is re-asked."""
    source = "@triton.jit\ndef swizzle(pid, num_pid_m, num_pid_n):\n" + loops + BODY
    with pytest.raises(CandidateError) as caught:
        check_candidate(source, "swizzle", ARGS)
    message = str(caught.value)
    assert message.startswith(f"line {line}: a loop whose bound is not a constant (`for "), message
    assert "\n" not in message and "tl.constexpr = 8" in message, message


def test_a_constexpr_parameter_does_not_bound_a_loop():
    """A parameter's annotation is the candidate's own word, and its value the kernel's."""
    source = ("@triton.jit\ndef swizzle(pid, num_pid_m: tl.constexpr, num_pid_n):\n"
              "    for i in range(num_pid_m * 10 ** 9):\n        pid = pid + 0\n" + BODY)
    with pytest.raises(CandidateError, match="^line 3: a loop whose bound is not a constant"):
        check_candidate(source, "swizzle", ARGS)


def test_loops_in_a_for_else_count_toward_the_steps_in_all():
    """The loops of a ``for ... else`` block ran uncounted: 65 536 x 65 536 steps passed (the bound is
    4 096 in all now: 64 x 65 past it)."""
    source = ("@triton.jit\ndef swizzle(pid, num_pid_m, num_pid_n):\n    for i in range(1):\n        pid = pid + 0\n"
              "    else:\n        for j in range(64):\n            for k in range(65):\n"
              "                pid = pid + 0\n" + BODY)
    with pytest.raises(CandidateError, match="^line 7: loops over constant bounds of more than 4096 steps in all"):
        check_candidate(source, "swizzle", ARGS)
