"""Candidates: the static check of a rewrite target's new source, and its splice into a copy of the
kernel module by AST (the user's file is never edited here).

Only the rewrite target may change. A candidate is the complete ``@triton.jit def <target>(...)``
with the same parameters, written with integer arithmetic and a short list of ``tl`` functions:
nothing that loads, stores, imports, loops without bound or calls arbitrary code.
"""
from __future__ import annotations

import ast
import difflib
import textwrap

from swizzleperf.agent.spec import find_function

MAX_SOURCE_CHARS = 6000

ALLOWED_TL = frozenset({
    "minimum", "maximum", "where", "cdiv", "abs", "static_range", "constexpr",
    "int1", "int8", "int16", "int32", "int64", "uint32", "uint64", "umulhi",
})
ALLOWED_TRITON = frozenset({"cdiv"})
CALLABLE_BUILTINS = frozenset({"range", "min", "max", "abs"})
ALLOWED_BUILTINS = CALLABLE_BUILTINS | {"True", "False", "None"}
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
    lines = module_source.splitlines(keepends=True)
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
    names and operations (a docstring first is allowed, no other string).

    Raises:
        CandidateError: the source does not parse, is not exactly one ``@triton.jit`` function
            ``name`` with parameters ``arg_names``, or uses a name or construct outside the
            allowed set (message: line, construct, what is allowed).
    """
    if len(source) > MAX_SOURCE_CHARS:
        raise CandidateError(f"candidate is {len(source)} characters, the limit is {MAX_SOURCE_CHARS}")
    try:
        tree = ast.parse(textwrap.dedent(source))
    except SyntaxError as exc:
        raise CandidateError(f"candidate does not parse: {exc.msg} (line {exc.lineno})") from None
    funcs = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    if len(tree.body) != 1 or len(funcs) != 1 or funcs[0].name != name:
        found = ", ".join(type(n).__name__ if not isinstance(n, ast.FunctionDef) else n.name
                          for n in tree.body) or "nothing"
        raise CandidateError(f"candidate must be exactly one function {name!r}, found: {found}")
    func = funcs[0]
    if [ast.unparse(d) for d in func.decorator_list] != ["triton.jit"]:
        raise CandidateError(f"{name} must be decorated with exactly @triton.jit, found "
                             f"{', '.join('@' + ast.unparse(d) for d in func.decorator_list) or 'none'}")
    _check_signature(func, name, list(arg_names))
    _check_body(func, {a.arg for a in func.args.args})
    return func


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
    """Walk the body: allowed node types, names and calls only (a leading docstring aside)."""
    local_names = params | {n.id for stmt in func.body for n in ast.walk(stmt)
                            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    body = func.body
    if ast.get_docstring(func, clean=False) is not None:
        body = body[1:]
    for stmt in body:
        for node in ast.walk(stmt):
            _check_node(node, local_names)


def _check_node(node: ast.AST, local_names: set[str]) -> None:
    where = f"line {getattr(node, 'lineno', '?')}"
    if isinstance(node, (ast.If, ast.IfExp)):
        raise CandidateError(f"{where}: `if` is not allowed: the target is verified on a vector of "
                             f"program ids, where a branch on pid has no single truth value; "
                             f"select with tl.where(condition, a, b)")
    if not isinstance(node, ALLOWED_NODES):
        raise CandidateError(f"{where}: {type(node).__name__} is not allowed in the rewrite target "
                             f"(integer arithmetic, assignments, tl.where/minimum/maximum, "
                             f"bounded for-loops and return only)")
    if isinstance(node, ast.Constant) and not _is_number(node) and not isinstance(node.value, (bool, type(None))):
        raise CandidateError(f"{where}: constant {node.value!r} is not allowed (numbers only)")
    if isinstance(node, ast.Name):
        if node.id.startswith("__"):
            raise CandidateError(f"{where}: name {node.id!r} is not allowed (no dunder names)")
        if node.id not in local_names | ALLOWED_BUILTINS | {"tl", "triton"}:
            raise CandidateError(f"{where}: name {node.id!r} is not defined in the rewrite target "
                                 f"(only its parameters, its locals, tl and triton)")
    if isinstance(node, ast.Attribute):
        _check_attribute(node, where)
    if isinstance(node, ast.Call):
        _check_call(node, where)


def _check_call(node: ast.Call, where: str) -> None:
    """Calls go to an allowed builtin or an allowed attribute (checked on its own), nothing else:
    not to a local, not to the result of another call."""
    func = node.func
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
    """A copy of ``module_source`` whose top-level function ``name`` is replaced by ``new_target``.

    Raises:
        CandidateError: the module has no such function, or anything besides it would change
            (compared on the AST).
    """
    tree = ast.parse(module_source)
    node = find_function(tree, name)
    if node is None:
        raise CandidateError(f"no top-level function {name!r} in the kernel module")
    lines = module_source.splitlines(keepends=True)
    replacement = textwrap.dedent(new_target).rstrip("\n") + "\n"
    new_source = "".join(lines[:_first_line(node) - 1]) + replacement + "".join(lines[node.end_lineno:])
    _assert_only_target_changed(tree, ast.parse(new_source), name)
    return new_source


def _assert_only_target_changed(old: ast.Module, new: ast.Module, name: str) -> None:
    def others(tree: ast.Module) -> list[str]:
        return [ast.dump(n) for n in tree.body
                if not (isinstance(n, ast.FunctionDef) and n.name == name)]
    if others(old) != others(new) or find_function(new, name) is None:
        raise CandidateError(f"the splice changed more than {name!r}; rejected")


def unified_diff(old_source: str, new_source: str, filename: str) -> str:
    """``diff -u`` of two versions of a module, as text."""
    return "".join(difflib.unified_diff(old_source.splitlines(keepends=True),
                                        new_source.splitlines(keepends=True),
                                        fromfile=f"a/{filename}", tofile=f"b/{filename}"))


def target_args(module_source: str, name: str) -> list[str]:
    """Parameter names of the rewrite target in the original module."""
    node = find_function(ast.parse(module_source), name)
    if node is None:
        raise CandidateError(f"no top-level function {name!r} in the kernel module")
    return [a.arg for a in node.args.args]
