"""Candidates: the static check of a rewrite target's new source, and its splice into a copy of the
kernel module by AST (the user's file is never edited here).

Only the rewrite target may change. A candidate is the complete ``@triton.jit def <target>(...)``
with the same parameters, written with integer arithmetic and a short list of ``tl`` functions:
nothing that loads, stores, imports, loops without bound or calls arbitrary code.

What is checked is what runs: the text spliced into a kernel module (and so verified, compiled,
measured, reported and written back) is never the reply's text but the *canonical source*
generated from the checked syntax tree (:func:`canonical_target`). The reply's comments, layout
and any multi-line docstring are gone, so nothing hidden in them can be read by a tool that re-reads
the function's text: Triton's interpreter starts at the last line beginning with ``def `` of the
function's source, its compiler at the first, and a docstring holding a second ``def`` line once
made the two run different functions, neither of them the one checked (issue #21).
"""
from __future__ import annotations

import ast
import copy
import difflib
import math
import re
import textwrap
from collections import Counter
from collections.abc import Sequence

from swizzleperf.agent.verification.load import at_column, find_function, module_level_functions
from swizzleperf.sandbox.write_back import _declared_encoding, source_bytes, source_lines

MAX_SOURCE_CHARS = 6000
#: Deepest nesting of the target's syntax tree (function node = 1). The bundled kernels' targets
#: and the catalog's members reach 9; a 2 500-term sum reaches 2 500 and took the agent down with
#: a RecursionError (issue #21).
MAX_DEPTH = 48
#: Largest magnitude of an integer constant: Triton's widest integer is 64 bits.
MAX_INT = 2 ** 63
#: Longest docstring kept in the canonical source (characters of its summary line, on one line).
MAX_DOC_CHARS = 200
#: The docstring of a candidate whose own repeated another order's onto other code (a real 1.5B
#: model wrote grouped orders under the baseline's "(row-major)", 2026-12-07): it names nothing false.
BORROWED_DOC = "Tile order proposed by the model."

ALLOWED_TL = frozenset({
    "minimum", "maximum", "where", "cdiv", "abs", "static_range", "constexpr",
    "int1", "int8", "int16", "int32", "int64", "uint32", "uint64", "umulhi",
})
ALLOWED_TRITON = frozenset({"cdiv"})
CALLABLE_BUILTINS = frozenset({"range", "min", "max", "abs"})
ALLOWED_BUILTINS = CALLABLE_BUILTINS | {"True", "False", "None"}
#: Names a local may not take: they would shadow what the checked calls and attributes mean.
RESERVED_NAMES = ALLOWED_BUILTINS | {"tl", "triton"}
ALLOWED_ANNOTATIONS = frozenset({"tl.constexpr", "triton.language.constexpr"})
ALLOWED_NODES = (
    ast.Expr, ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Return, ast.For, ast.Pass,
    ast.Name, ast.Constant, ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare,
    ast.Call, ast.Attribute, ast.Tuple, ast.Load, ast.Store, ast.keyword,
    ast.operator, ast.unaryop, ast.boolop, ast.cmpop, ast.expr_context,
)


class CandidateError(ValueError):
    """The candidate's source is not an acceptable rewrite target; the message says why."""


def target_source(module_source: str, name: str) -> str:
    """The exact text of top-level function ``name`` in ``module_source``, decorators included.

    Raises:
        CandidateError: no such top-level function.
    """
    tree = ast.parse(module_source)
    node = find_function(tree, name)
    if node is None:
        raise CandidateError(f"no top-level function {name!r} in the kernel module")
    lines = source_lines(module_source)   # as the AST numbers them (#41e)
    return "".join(lines[_first_line(node) - 1:node.end_lineno])


def _first_line(node: ast.FunctionDef) -> int:
    return min([node.lineno] + [d.lineno for d in node.decorator_list])


def check_candidate(source: str, name: str, arg_names: list[str]) -> ast.FunctionDef:
    """Static check of a candidate rewrite target; returns its parsed definition.

    The whole function node is checked, not only its body: everything Python evaluates when a
    ``def`` statement runs (decorators, parameter defaults, annotations, type parameters) could
    otherwise run the model's code at import. So: the reply is exactly one function and nothing
    else; its decorator is exactly ``@triton.jit``; its parameters are ``arg_names``, plain
    positional ones, each without a default or with a number, annotated at most with
    ``tl.constexpr``; no return annotation, no type parameters; the body holds only the allowed
    names and operations (a docstring first is allowed, no other string), binds only local names
    (no store into an attribute or an item of anything, no ``del``, no local that shadows ``tl``,
    ``triton`` or an allowed builtin), nests at most ``MAX_DEPTH`` deep, its integers are below
    ``MAX_INT`` in magnitude, and its loops run over bounds the check computes (numbers, or locals
    set once to one), ``MAX_CONSTANT_STEPS`` steps in all at most.

    The text that may run is :func:`canonical_target`'s, generated from the node returned here.

    Raises:
        CandidateError: the source does not parse, is not exactly one ``@triton.jit`` function
            ``name`` with parameters ``arg_names``, or uses a name or construct outside the
            allowed set (message: line, construct, what is allowed).
    """
    if not isinstance(source, str):
        raise CandidateError(f"candidate must be source text, got {type(source).__name__}")
    if len(source) > MAX_SOURCE_CHARS:
        raise CandidateError(f"candidate is {len(source)} characters, the limit is {MAX_SOURCE_CHARS}")
    tree = _parse(textwrap.dedent(source))
    funcs = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    if len(tree.body) != 1 or len(funcs) != 1 or funcs[0].name != name:
        wrong_form = next((m for m in (not_a_plain_def(n, name) for n in tree.body) if m), None)
        if wrong_form and not any(f.name == name for f in funcs):
            raise CandidateError(wrong_form)
        found = ", ".join(_statement_label(n) for n in tree.body) or "nothing"
        raise CandidateError(f"candidate must be exactly one function {name!r}, found: {found[:200]}")
    func = funcs[0]
    _check_depth(func)
    if [ast.unparse(d) for d in func.decorator_list] != ["triton.jit"]:
        raise CandidateError(f"{name} must be decorated with exactly @triton.jit, found "
                             f"{', '.join('@' + ast.unparse(d) for d in func.decorator_list)[:200] or 'none'}")
    _check_signature(func, name, list(arg_names))
    _check_body(func, {a.arg for a in func.args.args})
    return func


def not_a_plain_def(node: ast.stmt, name: str) -> str | None:
    """Why a top-level statement that defines ``name`` in another form than a plain ``def`` (an
    ``async def``, a class, a lambda assigned to it) is not the rewrite target, in one line; None
    for any other statement. The parser of a model's reply (``llm.parse_reply``) and the static
    check say it alike: "found AsyncFunctionDef" or a signature equal to the expected one told
    a model nothing (#41)."""
    where = f"line {getattr(node, 'lineno', '?')}"
    if isinstance(node, ast.AsyncFunctionDef) and node.name == name:
        return f"the rewrite target must be a plain `def`, got `async def {name}` ({where})"
    if isinstance(node, ast.ClassDef) and node.name == name:
        return (f"the rewrite target must be a function, `@triton.jit def {name}(...)`, got `class {name}` "
                f"({where})")
    if isinstance(node, (ast.Assign, ast.AnnAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            what = "a lambda" if any(isinstance(n, ast.Lambda) for n in ast.walk(node)) else "a value"
            return (f"the rewrite target must be a `def` statement, `@triton.jit def {name}(...)`, got an "
                    f"assignment of {what} to `{name}` ({where})")
    return None


def _statement_label(node: ast.stmt) -> str:
    """A top-level statement in a few words: ``def helper``, ``class A``, ``import os``, else its
    kind (``Assign``)."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        keyword = {ast.FunctionDef: "def", ast.AsyncFunctionDef: "async def", ast.ClassDef: "class"}[type(node)]
        return f"{keyword} {node.name}"
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return "import"
    return type(node).__name__


def _parse(source: str) -> ast.Module:
    """``ast.parse``, every way it can fail turned into one CandidateError line."""
    try:
        return ast.parse(source)
    except SyntaxError as exc:
        raise CandidateError(f"candidate does not parse: {exc.msg} (line {exc.lineno})") from None
    except (RecursionError, MemoryError):
        raise CandidateError("candidate does not parse: nested too deeply for Python's parser") from None
    except ValueError as exc:  # e.g. a NUL byte
        raise CandidateError(f"candidate does not parse: {exc}") from None


def _check_depth(func: ast.FunctionDef) -> None:
    """Refuse a tree deeper than ``MAX_DEPTH`` (iteratively: a recursive walk is what would fail)."""
    stack = [(func, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise CandidateError(f"line {getattr(node, 'lineno', '?')}: the target nests more than {MAX_DEPTH} "
                                 f"levels deep (a very long sum or a deep expression); write it in "
                                 f"several assignments")
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))


def canonical_target(source: str, name: str, arg_names: list[str], others: Sequence[str] = ()) -> str:
    """The text of a candidate that is spliced, verified, compiled, reported and written back:
    :func:`check_candidate`, then :func:`canonical_source` of the checked node. ``others``: the
    sources of orders whose docstrings the candidate's author saw (the baseline, the catalog
    orders in a model's prompt): a docstring copied from one of them onto other code is replaced
    (:func:`canonical_source`). The result is its own canonical text again, with or without
    ``others`` (a replaced docstring is no longer any of theirs).

    Raises:
        CandidateError: as :func:`check_candidate`.
    """
    return canonical_source(check_candidate(source, name, arg_names), others)


def canonical_source(func: ast.FunctionDef, others: Sequence[str] = ()) -> str:
    """``ast.unparse`` of a checked rewrite target, its docstring (if any) cut to its summary line
    and re-emitted as one plain line of printable characters (at most ``MAX_DOC_CHARS``; none when
    empty): no comment, no layout and no other line of the reply's docstring survives. A summary
    line that is one of ``others``' (sources of functions) while the statements are none of those
    functions' is not this code's: it becomes the summary of the one of ``others`` whose statements
    these are, else ``BORROWED_DOC``. The result holds exactly one line that begins with
    ``def`` and one decorator line, so every tool that re-reads the function's text (Triton's
    interpreter and compiler, ``inspect``) reads this very function.

    Raises:
        CandidateError: the generated text does not read back as the same function (a defect of
            ours; refused rather than run).
    """
    node = copy.deepcopy(func)
    doc = ast.get_docstring(node, clean=True)
    body = node.body[1:] if doc is not None else list(node.body)
    line = _summary(doc)
    if line and others:
        line = _true_summary(line, body, others)
    if line:
        body.insert(0, ast.Expr(ast.Constant(line)))
    node.body = body or [ast.Pass()]
    text = ast.unparse(ast.fix_missing_locations(node)) + "\n"
    _assert_reads_back(text, node)
    return text


def _summary(doc: str | None) -> str:
    """A docstring's first non-blank line, as one line of printable characters (``MAX_DOC_CHARS``)."""
    summary = next((line for line in (doc or "").splitlines() if line.strip()), "")
    return "".join(c for c in " ".join(summary.split()) if c.isprintable())[:MAX_DOC_CHARS].strip()


def _true_summary(line: str, body: list, others: Sequence[str]) -> str:
    """``line``, a candidate's summary over ``body`` (its statements, the docstring's excluded),
    unless one of ``others`` has that summary over other statements: then the summary of the one
    of ``others`` with these very statements (a copy of a shown order), else ``BORROWED_DOC``."""
    statements = [ast.dump(s) for s in body]
    described = {}   # summary -> the statements of each of others that has it
    for source in others:
        try:
            function = next(n for n in ast.parse(textwrap.dedent(source)).body if isinstance(n, ast.FunctionDef))
        except (SyntaxError, ValueError, RecursionError, MemoryError, StopIteration):
            continue   # not a function: it describes nothing
        doc = ast.get_docstring(function, clean=True)
        own = function.body[1:] if doc is not None else function.body
        described.setdefault(_summary(doc), []).append([ast.dump(s) for s in own])
    if line not in described or statements in described[line]:
        return line
    return next((summary for summary, bodies in described.items() if summary and statements in bodies),
                BORROWED_DOC)


def _assert_reads_back(text: str, node: ast.FunctionDef) -> None:
    """The canonical text parses to ``node`` again, and no second line of it can be taken for a
    ``def`` or a decorator."""
    again = ast.parse(text).body
    lines = [line.strip() for line in text.splitlines()]
    defs = [line for line in lines if line.startswith("def ") or line.startswith("async def")]
    decorators = [line for line in lines if line.startswith("@")]
    if (len(again) != 1 or ast.dump(again[0]) != ast.dump(node) or len(defs) != 1
            or len(decorators) != 1 or len(text.rstrip("\n").split("\n")) != len(text.splitlines())):
        raise CandidateError(f"the canonical source of {node.name} does not read back as the checked "
                             f"function; refused")


def _check_signature(func: ast.FunctionDef, name: str, arg_names: list[str]) -> None:
    """Parameters exactly ``arg_names``; only numbers as defaults, only ``tl.constexpr`` as
    annotation; no return annotation, no type parameters (all evaluated when ``def`` runs)."""
    args = func.args
    params = [a.arg for a in args.args]
    if (params != arg_names or args.posonlyargs or args.vararg or args.kwarg or args.kwonlyargs):
        found = ast.unparse(args)
        raise CandidateError(f"{name} must keep its parameters ({', '.join(arg_names)}), "
                             f"found ({found})")
    for default in args.defaults:
        if not _is_number(default):
            raise CandidateError(f"line {default.lineno}: default {ast.unparse(default)!r} is not "
                                 f"allowed (a parameter default may only be a number)")
    for arg in args.args:
        if arg.annotation is not None and ast.unparse(arg.annotation) not in ALLOWED_ANNOTATIONS:
            raise CandidateError(f"line {arg.lineno}: annotation {ast.unparse(arg.annotation)!r} of "
                                 f"{arg.arg!r} is not allowed (only tl.constexpr)")
    if func.returns is not None:
        raise CandidateError(f"line {func.lineno}: return annotation {ast.unparse(func.returns)!r} "
                             f"is not allowed")
    if getattr(func, "type_params", None):
        raise CandidateError(f"line {func.lineno}: type parameters are not allowed")


def _is_number(node: ast.AST) -> bool:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        node = node.operand
    return (isinstance(node, ast.Constant) and isinstance(node.value, (int, float))
            and not isinstance(node.value, bool))


def _check_body(func: ast.FunctionDef, params: set[str]) -> None:
    """Walk the body: allowed node types, names and calls only (a leading docstring aside); loops
    over bounds the checker computes, within ``MAX_CONSTANT_STEPS`` in all."""
    local_names = params | {n.id for stmt in func.body for n in ast.walk(stmt)
                            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    body = func.body
    if ast.get_docstring(func, clean=False) is not None:
        body = body[1:]
    for stmt in body:
        for node in ast.walk(stmt):
            _check_node(node, local_names)
    _check_loop_steps(body, 1, 0, _constant_locals(body, params))


def _constant_locals(body: list, params: set[str]) -> dict[str, int]:
    """The locals a loop may run to: each bound once, by ``=`` (annotated or not), to an integer the
    checker computes (``NUM_XCDS: tl.constexpr = 8``, ``HALF = GROUPS // 2``); never a parameter,
    whose value is the kernel's (a ``tl.constexpr`` annotation on it is the candidate's own word)."""
    nodes = [node for stmt in body for node in ast.walk(stmt)]
    stores = Counter(n.id for n in nodes if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store))
    constants: dict[str, int] = {}
    for node in nodes:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target = node.target
        else:
            continue
        if isinstance(target, ast.Name) and target.id not in params and stores[target.id] == 1:
            value = _constant_int(node.value, constants)
            if value is not None:
                constants[target.id] = value
    return constants


def _check_loop_steps(body: list, outer: int, total: int, constants: dict[str, int]) -> int:
    """The steps that the loops of ``body`` take in all, a nested loop's times its enclosing loops'
    (``outer``), added to ``total`` and returned (a ``for ... else`` block's loops counted too).
    Raises CandidateError past ``MAX_CONSTANT_STEPS``: two nested loops of 65 536 steps each (then
    the bound of one loop) passed a check of each loop alone and held a worker to its timeout (#41, round seven); and for a loop
    whose steps cannot be counted (``_loop_steps``)."""
    for stmt in body:
        if isinstance(stmt, ast.For):
            inner = outer * _loop_steps(stmt, constants)
            total += inner
            if total > MAX_CONSTANT_STEPS:
                raise CandidateError(f"line {stmt.lineno}: loops over constant bounds of more than "
                                     f"{MAX_CONSTANT_STEPS} steps in all (nested loops multiply) are not allowed")
            total = _check_loop_steps(stmt.body, inner, total, constants)
            total = _check_loop_steps(stmt.orelse, outer, total, constants)
    return total


def _loop_steps(stmt: ast.For, constants: dict[str, int]) -> int:
    """The steps of loop ``stmt``: a tuple's length, or the length of a ``range`` or
    ``tl.static_range`` over bounds the checker computes (numbers, ``constants``, their arithmetic);
    ``MAX_CONSTANT_STEPS + 1`` for bounds that make no range (a step of 0).

    Raises:
        CandidateError: any other loop: over a parameter, the grid, a loop's variable, a value.
            ``for i in range(num_pid_m * num_pid_n * 10**8)`` held each verification worker to its
            timeout, and a ``simulate`` call to the proposal's deadline (red team 11, M01/M08).
    """
    call = stmt.iter
    if isinstance(call, ast.Tuple):
        return len(call.elts)
    bounds = [None]
    if (isinstance(call, ast.Call) and ast.unparse(call.func) in ("range", "tl.static_range")
            and 1 <= len(call.args) <= 3 and not call.keywords):
        bounds = [_constant_int(a, constants) for a in call.args]
    if None in bounds:
        loop = f"for {ast.unparse(stmt.target)} in {ast.unparse(call)}"
        raise CandidateError(f"line {stmt.lineno}: a loop whose bound is not a constant (`{loop[:100]}`) is not "
                             f"allowed: its steps cannot be counted before it runs (one over the grid ran until "
                             f"the worker's timeout); loop over range(...) or tl.static_range(...) of numbers or "
                             f"of locals set once to a number (`NUM_XCDS: tl.constexpr = 8`), at most "
                             f"{MAX_CONSTANT_STEPS} steps in all")
    try:
        return len(range(*bounds))   # O(1)
    except (ValueError, OverflowError):
        return MAX_CONSTANT_STEPS + 1


def _check_node(node: ast.AST, local_names: set[str]) -> None:
    where = f"line {getattr(node, 'lineno', '?')}"
    if isinstance(node, (ast.If, ast.IfExp)):
        raise CandidateError(f"{where}: `if` is not allowed: the target is verified on a vector of "
                             f"program ids, where a branch on pid has no single truth value; "
                             f"select with tl.where(condition, a, b)")
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
        what = (f"a nested `{_statement_label(node)}`" if not isinstance(node, ast.Lambda) else "a lambda")
        raise CandidateError(f"{where}: {what} is not allowed: the rewrite target is one function with no "
                             f"function, lambda or class inside it; write its steps inline")
    _check_binding(node, where)
    if not isinstance(node, ALLOWED_NODES):
        raise CandidateError(f"{where}: {type(node).__name__} is not allowed in the rewrite target "
                             f"(integer arithmetic, assignments, tl.where/minimum/maximum, "
                             f"bounded for-loops and return only)")
    if isinstance(node, ast.Constant):
        _check_constant(node, where)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow):
        _check_power(node, where)
    if isinstance(node, ast.Name):
        if node.id.startswith("__"):
            raise CandidateError(f"{where}: name {node.id[:60]!r} is not allowed (no dunder names)")
        if node.id not in local_names | ALLOWED_BUILTINS | {"tl", "triton"}:
            raise CandidateError(f"{where}: name {node.id[:60]!r} is not defined in the rewrite target "
                                 f"(only its parameters, its locals, tl and triton)")
    if isinstance(node, ast.Attribute):
        _check_attribute(node, where)
    if isinstance(node, ast.Call):
        _check_call(node, where)


def _check_binding(node: ast.AST, where: str) -> None:
    """Only local names are bound: a store or a ``del`` of anything else (an attribute of ``tl``
    or of a value, an item, a starred target) could change a module the worker shares with the
    reference and the kernel; and a local may not shadow ``tl``, ``triton`` or an allowed builtin.
    Assignment, augmented and annotated assignment, for-loop targets, ``with ... as``, walrus and
    comprehension targets all store through an expression context, so one rule covers them."""
    ctx = getattr(node, "ctx", None)
    if isinstance(ctx, ast.Del) or isinstance(node, ast.Delete):
        raise CandidateError(f"{where}: `del` is not allowed (only local names are bound)")
    if isinstance(node, (ast.Global, ast.Nonlocal)):
        raise CandidateError(f"{where}: {type(node).__name__.lower()} is not allowed (only local names "
                             f"are bound)")
    if not isinstance(ctx, ast.Store):
        return
    if isinstance(node, (ast.Tuple, ast.List)):
        return  # unpacking: each element is checked as a node of its own
    if not isinstance(node, ast.Name):
        raise CandidateError(f"{where}: storing into {ast.unparse(node)[:80]!r} is not allowed (only "
                             f"local names are bound; no attribute or item of anything is assigned)")
    if node.id in RESERVED_NAMES:
        raise CandidateError(f"{where}: a local may not be named {node.id!r} (it would shadow "
                             f"{'the module' if node.id in ('tl', 'triton') else 'the builtin'})")


def _check_constant(node: ast.Constant, where: str) -> None:
    """Numbers (integers below ``MAX_INT``, finite floats), booleans and None only."""
    value = node.value
    if isinstance(value, (bool, type(None))):
        return
    if not _is_number(node):
        raise CandidateError(f"{where}: constant {repr(value)[:60]} is not allowed (numbers only)")
    if isinstance(value, int) and abs(value) >= MAX_INT:
        raise CandidateError(f"{where}: integer constant of {value.bit_length()} bits is not allowed "
                             f"(at most 63 bits: Triton's integers are 64-bit at most)")
    if isinstance(value, float) and not math.isfinite(value):
        raise CandidateError(f"{where}: constant {value!r} is not allowed (finite numbers only)")


def _check_power(node: ast.BinOp, where: str) -> None:
    """``a ** b`` only with ``b`` an integer constant 0..63, and of two constants only below ``MAX_INT``:
    ``9 ** 9 ** 9 ** 9`` would take the verifier minutes and gigabytes to evaluate (issue #41)."""
    exponent = node.right
    if not (isinstance(exponent, ast.Constant) and type(exponent.value) is int and 0 <= exponent.value < 64):
        raise CandidateError(f"{where}: `**` is allowed only with a constant exponent 0..63, found "
                             f"{ast.unparse(exponent)[:60]!r}")
    base = node.left.operand if isinstance(node.left, ast.UnaryOp) else node.left
    if (isinstance(base, ast.Constant) and type(base.value) is int
            and abs(base.value) ** exponent.value >= MAX_INT):   # below 2**63 and 64: cheap to compute
        raise CandidateError(f"{where}: {ast.unparse(node)[:60]} is above 63 bits (Triton's integers are "
                             f"64-bit at most)")


#: Most steps of a loop over constant bounds: ``tl.static_range(10**9)`` kept a worker busy until each
#: stage's timeout, minutes per candidate (issue #41); a tile order loops over a few XCDs or groups.
#: 4096 (64 x 64): each step runs over every program of every probed grid, and a loop of 65 536 steps,
#: the bound before, took about 70 s of the interpreted precheck, a whole proposal's deadline (#41,
#: round thirteen, on this project's 2-core CPU machine).
MAX_CONSTANT_STEPS = 1 << 12


_FOLDED = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
           ast.Pow: lambda a, b: a ** b if 0 <= b < 64 else None,
           ast.LShift: lambda a, b: a << b if 0 <= b < 128 else None,
           ast.FloorDiv: lambda a, b: a // b if b else None, ast.Mod: lambda a, b: a % b if b else None}


def _constant_int(node: ast.AST, names: dict[str, int] | None = None) -> int | None:
    """The value of an integer expression of constants only (``10 ** 9``), of ``names`` (locals of a
    known value, ``_constant_locals``) and ``tl.constexpr(...)`` of one, else None; nothing big computed."""
    names = names or {}
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.Name):
        return names.get(node.id)
    if (isinstance(node, ast.Call) and ast.unparse(node.func) == "tl.constexpr" and len(node.args) == 1
            and not node.keywords):
        return _constant_int(node.args[0], names)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = _constant_int(node.operand, names)
        return None if value is None else (-value if isinstance(node.op, ast.USub) else value)
    if isinstance(node, ast.BinOp) and type(node.op) in _FOLDED:
        a, b = _constant_int(node.left, names), _constant_int(node.right, names)
        if a is None or b is None or a.bit_length() > 4096 or b.bit_length() > 4096:
            return None
        return _FOLDED[type(node.op)](a, b)
    return None


def _check_call(node: ast.Call, where: str) -> None:
    """Calls go to an allowed builtin or an allowed attribute (checked on its own), nothing else:
    not to a local, not to the result of another call."""
    func = node.func
    bounds = [_constant_int(a) for a in node.args]
    if ast.unparse(func) in ("range", "tl.static_range") and 1 <= len(bounds) <= 3 and None not in bounds:
        try:
            steps = len(range(*bounds))   # O(1); a step of 0 raises
        except (ValueError, OverflowError):
            steps = MAX_CONSTANT_STEPS + 1
        if steps > MAX_CONSTANT_STEPS:
            raise CandidateError(f"{where}: a loop of more than {MAX_CONSTANT_STEPS} steps over constant bounds "
                                 f"is not allowed")
    if isinstance(func, ast.Name) and func.id in CALLABLE_BUILTINS:
        return
    if isinstance(func, ast.Attribute):
        return
    raise CandidateError(f"{where}: calling {ast.unparse(func)!r} is not allowed (only "
                         f"{', '.join(sorted(CALLABLE_BUILTINS))}, tl.* functions and x.to(...))")


def _check_attribute(node: ast.Attribute, where: str) -> None:
    base = node.value.id if isinstance(node.value, ast.Name) else None
    if base == "tl" and node.attr in ALLOWED_TL:
        return
    if base == "triton" and node.attr in ALLOWED_TRITON:
        return
    if node.attr == "to" and base not in ("tl", "triton"):
        return  # x.to(tl.int64): a cast
    raise CandidateError(f"{where}: {ast.unparse(node)} is not allowed (allowed: "
                         f"{', '.join('tl.' + a for a in sorted(ALLOWED_TL))}, triton.cdiv, x.to(...))")


def splice(module_source: str, name: str, new_target: str) -> str:
    """A copy of ``module_source`` whose top-level function ``name`` is replaced by the canonical
    source of ``new_target`` (:func:`canonical_target`, checked against the module's own
    parameters), whatever the caller: a loop candidate, a distributed configuration's tile order,
    a catalog member or a lifted target. ``new_target`` equal to the module's own target text
    returns the module unchanged (nothing new to check: the user's own code).

    Raises:
        CandidateError: the module has no such function, ``new_target`` fails the static check, or
            anything besides the target would change (compared on the AST).
    """
    tree = ast.parse(module_source)
    node = find_function(tree, name)
    if node is None:
        raise CandidateError(f"no top-level function {name!r} in the kernel module")
    lines = source_lines(module_source)   # as the AST numbers them (#41e)
    own = "".join(lines[_first_line(node) - 1:node.end_lineno])
    if isinstance(new_target, str) and textwrap.dedent(new_target).strip() == textwrap.dedent(own).strip():
        return module_source
    replacement = canonical_target(new_target, name, [a.arg for a in node.args.args])
    from swizzleperf.agent.verification.load import indent_of   # (load imports this module)
    # a target inside a module-level block; a form feed before `def` is no indentation (#41, round six)
    replacement = at_column(replacement, indent_of(lines[node.lineno - 1], node.col_offset))
    new_source = "".join(lines[:_first_line(node) - 1]) + replacement + "".join(lines[node.end_lineno:])
    _assert_only_target_changed(tree, ast.parse(new_source), name)
    _assert_encodable(new_source, replacement)
    return new_source


#: A PEP 263 coding declaration, its name as written (``latin-1``, where Python says ``iso-8859-1``).
_CODING = re.compile(r"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)")
#: Most characters a refusal lists.
_SHOWN_CHARS = 8


def _assert_encodable(new_source: str, replacement: str) -> None:
    """The spliced module can be written in the encoding its own coding line declares (PEP 263: a
    Latin-1 kernel stays Latin-1, ``sandbox/write_back.source_bytes``). A rewrite holding a
    character that encoding cannot hold (a euro sign, a CJK character or an emoji in the docstring
    of a Latin-1 kernel's target; a local named with one) is refused here, with the encoding and
    the characters named: written in other bytes it would be verified as other text than its own,
    and nothing the user's file cannot hold is ever written into it (red team #41j, K02).

    Raises:
        CandidateError: the module's declared encoding cannot hold ``new_source``.
    """
    try:
        source_bytes(new_source)
        return
    except ValueError:
        pass
    head = source_lines(new_source)[:2]
    encoding = _declared_encoding("".join(head).encode("utf-8", "surrogateescape"))
    declared = next((m.group(1) for m in map(_CODING.match, head) if m), encoding)
    bad: list[str] = []
    for text in (replacement, new_source):   # the rewrite's own characters first
        for char in dict.fromkeys(text):
            try:
                char.encode(encoding)
            except (UnicodeEncodeError, LookupError):
                if char not in bad:
                    bad.append(char)
        if bad:
            break
    shown = ", ".join(f"{char!r} (U+{ord(char):04X})" for char in bad[:_SHOWN_CHARS])
    more = f" and {len(bad) - _SHOWN_CHARS} more" if len(bad) > _SHOWN_CHARS else ""
    raise CandidateError(f"the kernel file is {declared}: the rewrite holds characters it cannot encode: "
                         f"{shown or '(unknown)'}{more}; write the target with characters {declared} can "
                         f"hold (ASCII always can)")


def _assert_only_target_changed(old: ast.Module, new: ast.Module, name: str) -> None:
    """``old`` and ``new`` are equal, node for node (as ``ast.dump`` compares them: no positions),
    once their module-level functions ``name`` (those ``find_function`` finds) are cut out.
    Compared without recursion: a module of the user's may nest deeper (a 500-term sum) than
    Python's recursion limit lets ``copy.deepcopy`` or ``ast.dump`` walk (#41e).

    Raises:
        CandidateError: they differ, or ``new`` has no function ``name``.
    """
    if not _same_outside(old, new, name) or find_function(new, name) is None:
        raise CandidateError(f"the splice changed more than {name!r}; rejected")


def _same_outside(old: ast.Module, new: ast.Module, name: str) -> bool:
    cut = {id(f) for tree in (old, new) for f in module_level_functions(tree) if f.name == name}
    pending = [(old, new)]
    while pending:
        a, b = pending.pop()
        if id(a) in cut or id(b) in cut:
            if not (id(a) in cut and id(b) in cut):
                return False
            continue
        if type(a) is not type(b):
            return False
        if isinstance(a, ast.AST):
            pending.extend((getattr(a, field, None), getattr(b, field, None)) for field in a._fields)
        elif isinstance(a, list):
            if len(a) != len(b):
                return False
            pending.extend(zip(a, b))
        elif a != b or repr(a) != repr(b):   # a constant: 0.0 and -0.0 differ, as they do to ast.dump
            return False
    return True


def unified_diff(old_source: str, new_source: str, filename: str) -> str:
    """``diff -u`` of two versions of a module, as text."""
    return "".join(difflib.unified_diff(source_lines(old_source), source_lines(new_source),
                                        fromfile=f"a/{filename}", tofile=f"b/{filename}"))


def target_args(module_source: str, name: str) -> list[str]:
    """Parameter names of the rewrite target in the original module."""
    node = find_function(ast.parse(module_source), name)
    if node is None:
        raise CandidateError(f"no top-level function {name!r} in the kernel module")
    return [a.arg for a in node.args.args]
