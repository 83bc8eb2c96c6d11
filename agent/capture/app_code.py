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
    """The names ``s`` reads from the module's scope: a function's (or lambda's, comprehension's)
    own parameters and locals are not (a kernel's local ``a`` reads no global ``a``: the app's
    ``a, b = torch.randn(..., device="cuda")`` at the bottom of the file is still its run), but its
    decorators, defaults and annotations are, and so is a name it declares ``global`` (at any
    depth) or updates (``x += 1``)."""
    free, declared = _scoped_reads(s)
    return free | declared


def _scoped_reads(s: ast.AST) -> tuple:
    """``(free, declared)``: the names ``s`` reads from the scopes around it, and those it reads as
    declared ``global`` in a function within it (no enclosing function's local hides those)."""
    if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        args = s.args
        every_arg = [a for a in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg) if a]
        outer = [*getattr(s, "decorator_list", ()), *args.defaults, *(d for d in args.kw_defaults if d is not None),
                 *(a.annotation for a in every_arg if a.annotation is not None),
                 *([s.returns] if getattr(s, "returns", None) is not None else [])]
        body = s.body if isinstance(s.body, list) else [s.body]
        declared = {name for node in body for n in _same_scope(node) if isinstance(n, ast.Global) for name in n.names}
        local = ({a.arg for a in every_arg} | {name for node in body for name in _binds(node)}) - declared
        free_o, glob_o = _union(outer)
        free_b, glob_b = _union(body)
        return free_o | (free_b - local - declared), glob_o | glob_b | (free_b & declared)
    if isinstance(s, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
        first, *rest = s.generators
        targets = {name for g in s.generators for name in _stores(g.target)}
        inner = [*(g.iter for g in rest), *(i for g in s.generators for i in g.ifs),
                 *([s.key, s.value] if isinstance(s, ast.DictComp) else [s.elt])]
        free_f, glob_f = _scoped_reads(first.iter)
        free_i, glob_i = _union(inner)
        return free_f | (free_i - targets), glob_f | glob_i
    if isinstance(s, ast.Name):
        return ({s.id} if isinstance(s.ctx, ast.Load) else set()), set()
    free, glob = _union(list(ast.iter_child_nodes(s)))
    if isinstance(s, ast.AugAssign) and isinstance(s.target, ast.Name):   # x += 1 reads x
        free |= {s.target.id}
    return free, glob


def _union(nodes: list) -> tuple:
    pairs = [_scoped_reads(n) for n in nodes]
    return set().union(*(p[0] for p in pairs)), set().union(*(p[1] for p in pairs))


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.ListComp, ast.SetComp,
           ast.GeneratorExp, ast.DictComp)
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)


def _same_scope(node: ast.AST):
    """``node`` and the nodes below it in the same scope: a nested function, class or comprehension
    (``node`` itself too) is yielded, never entered."""
    todo = [node]
    while todo:
        n = todo.pop()
        yield n
        if not isinstance(n, _SCOPES):
            todo += list(ast.iter_child_nodes(n))


def _binds(node: ast.AST) -> set:
    """The names a statement binds in its own scope: assignments, loop and ``with`` targets, nested
    definitions' names, imports, ``except ... as`` names, match captures, and the targets of a
    walrus inside a comprehension (which binds in the enclosing scope)."""
    names = set()
    for n in _same_scope(node):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(n.name)
        elif isinstance(n, _COMPREHENSIONS):
            names |= {w.target.id for w in ast.walk(n) if isinstance(w, ast.NamedExpr)
                      and isinstance(w.target, ast.Name)}
        elif isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
            names.add(n.id)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in n.names)
        elif isinstance(n, ast.ExceptHandler) and n.name:
            names.add(n.name)
        elif isinstance(n, (ast.MatchAs, ast.MatchStar)) and n.name:
            names.add(n.name)
        elif isinstance(n, ast.MatchMapping) and n.rest:
            names.add(n.rest)
    return names


def _stores(s: ast.AST) -> set:
    return {n.id for n in ast.walk(s) if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del))}
