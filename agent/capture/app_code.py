"""Which top-level statements of a kernel's file are the app's own run rather than the module the
kernel lives in (issue #42): a file that is both (kernels, wrapper, then ``result = test_x()`` at
the bottom, as TritonBench's operators are written) runs that test every time the generated copy
is imported, in the agent's process and in every verification worker, with the app's CUDA
tensors. The generated module (agent/capture/user_kernel.py) keeps the definitions and leaves
these statements out; the user's own file and its patch keep them.

A top-level statement is the app's run when it is not an import, a definition or a block holding
one, nothing the kept code reads is bound by it, and it either calls a function or class of the
file (``test_x()``, ``kernel[grid](...)``, ``Op.apply(...)``), reads a name bound only by such
statements (``print(result)``), or is an assignment or loop whose names nothing kept reads.
Bare calls of other modules (``torch.manual_seed(0)``, ``triton.set_allocator(f)``) stay, but for
``torch.cuda``'s (``torch.cuda.synchronize()``: the app's device bookkeeping).
"""
from __future__ import annotations

import ast

_DEFINITIONS = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def app_statements(tree: ast.Module, needed: set = frozenset()) -> list:
    """The top-level statements of ``tree`` that are the app's own run (see the module docstring);
    ``needed``: names that code outside ``tree`` reads (none of their bindings is the app's)."""
    defined = {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    candidates = [s for s in tree.body if _candidate(s)]
    kept = [s for s in tree.body if s not in candidates]
    needed = set(needed).union(*(_reads(s) for s in kept))
    changed = True
    while changed:   # a candidate binding a name the kept code reads is kept, with what it reads
        changed = False
        for s in [c for c in candidates if _stores(c) & needed]:
            candidates.remove(s)
            needed |= _reads(s)
            changed = True
    app = [s for s in candidates if _calls(s, defined) or not isinstance(s, ast.Expr) or _device_call(s)]
    changed = True
    while changed:   # a bare call reading what the app's run bound
        bound = set().union(*(_stores(s) for s in app)) if app else set()
        late = [s for s in candidates if s not in app and _reads(s) & bound]
        app += late
        changed = bool(late)
    return sorted(app, key=lambda s: s.lineno)


def _candidate(s: ast.stmt) -> bool:
    if isinstance(s, _DEFINITIONS) or any(isinstance(n, _DEFINITIONS) for n in ast.walk(s)):
        return False
    if isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant):   # a docstring
        return False
    return not (isinstance(s, ast.If) and "__name__" in ast.unparse(s.test))   # runs only as a script


def _calls(s: ast.stmt, defined: set) -> bool:
    """``s`` calls a function or class of the file (through attributes and subscripts)."""
    for node in _walk_outside_lambdas(s):
        if isinstance(node, ast.Call):
            func = node.func
            while isinstance(func, (ast.Attribute, ast.Subscript)):
                func = func.value
            if isinstance(func, ast.Name) and func.id in defined:
                return True
    return False


def _device_call(s: ast.Expr) -> bool:
    """A bare ``torch.cuda.*(...)`` call: the app's device bookkeeping (``synchronize``, ...)."""
    return isinstance(s.value, ast.Call) and ast.unparse(s.value.func).startswith("torch.cuda.")


def _walk_outside_lambdas(node):
    todo = [node]
    while todo:
        n = todo.pop()
        yield n
        todo += [c for c in ast.iter_child_nodes(n) if not isinstance(c, ast.Lambda)]


def _reads(s: ast.AST) -> set:
    return {n.id for n in ast.walk(s) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _stores(s: ast.AST) -> set:
    return {n.id for n in ast.walk(s) if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del))}
