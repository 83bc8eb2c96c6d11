"""Loading a kernel module from a path: ``load_kernel`` (the worker's: the module as written) and
``load_spec`` (the agent's own process: the rewrite target stood in, never run), and the checks
that the module is one the optimizer can use (one ``KernelSpec`` or ``DistKernelSpec``, its
rewrite target a top-level ``@triton.jit`` function; kernels/spec.py is the contract).
"""
from __future__ import annotations

import ast
import importlib.util
import itertools
import sys
from pathlib import Path
from typing import Any

from swizzleperf.kernels.distributed.spec import DistKernelSpec
from swizzleperf.kernels.spec import KernelLoadError, KernelSpec
from swizzleperf.sandbox import untrusted

_module_counter = itertools.count()


def load_kernel(path: str | Path) -> tuple[Any, KernelSpec]:
    """Import a kernel module from a file and return ``(module, its KernelSpec)``.

    Only for the worker subprocesses (agent/verification/stages.py, the rank processes): the module
    runs as written, its rewrite target included, which after ``--in-place`` may be model-written
    code. The agent's own process uses :func:`load_spec`.

    Raises:
        KernelLoadError: the path does not exist, is not a ``.py`` file, does not import, holds
            no (or several) module-level KernelSpec, or its rewrite target is not a top-level
            ``@triton.jit`` function.
    """
    path, source, tree = _read(path)
    module = _import_file(path)
    return module, _the_spec(module, tree, path)


def load_spec(path: str | Path) -> KernelSpec:
    """The KernelSpec of a kernel module, for the agent's own process.

    The module is imported with its rewrite target (found by name in the source:
    ``rewrite_target="..."`` of its spec, else ``"swizzle"``) replaced by a stand-in of the same
    name, parameters and line span whose body is never run here, so that nothing of the target as
    written (model-written after ``--in-place``, its decorators and defaults included) is executed
    in this process. Everything else of the module (the spec's functions: inputs, grid, access
    model) is the user's code and runs as written.

    Raises:
        KernelLoadError: as :func:`load_kernel`, or the spec names another target than the source.
    """
    path, source, tree = _read(path)
    name = _declared_target(tree)
    node = find_function(tree, name)
    if node is None:  # no target to stand in for: the module's own errors say what is wrong
        return _the_spec(_import_file(path), tree, path)
    if [ast.unparse(d) for d in node.decorator_list] != ["triton.jit"]:
        raise KernelLoadError(f"{path}: rewrite target {name!r} must be decorated with exactly @triton.jit")
    lines = source.splitlines(keepends=True)
    first = min([node.lineno] + [d.lineno for d in node.decorator_list])
    stand_in = _stand_in(name, [a.arg for a in node.args.args], node.end_lineno - first + 1, node.col_offset)
    module = _import_file(path, "".join(lines[:first - 1]) + stand_in + "".join(lines[node.end_lineno:]))
    spec = _the_spec(module, tree, path)
    if spec.rewrite_target != name:
        raise KernelLoadError(f"{path}: the spec's rewrite target {spec.rewrite_target!r} is not "
                              f"declared as rewrite_target=\"...\" in the source")
    return spec


def _declared_target(tree: ast.Module) -> str:
    """The string given as ``rewrite_target=`` to a ``...KernelSpec(...)`` call, else the default."""
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and ast.unparse(node.func).endswith("KernelSpec")):
            for keyword in node.keywords:
                if keyword.arg == "rewrite_target" and isinstance(keyword.value, ast.Constant):
                    return str(keyword.value.value)
    return KernelSpec.__dataclass_fields__["rewrite_target"].default


def _stand_in(name: str, params: list, span: int, column: int = 0) -> str:
    """``@triton.jit def name(params)`` returning its first parameter, padded to ``span`` lines
    (the rest of the module keeps its line numbers, which Triton reads its sources by), at
    ``column`` (a target inside a module-level block)."""
    text = f"@triton.jit\ndef {name}({', '.join(params)}): return {params[0] if params else 0}  # stand-in\n"
    return at_column(text, column) + "\n" * max(0, span - 2)


def _read(path: str | Path) -> tuple[Path, str, ast.Module]:
    path = Path(path)
    if not path.exists():
        raise KernelLoadError(f"{path}: no such file")
    if path.is_dir() or path.suffix != ".py":
        raise KernelLoadError(f"{path}: not a Python kernel module (expected a .py file)")
    try:
        source = untrusted.read_source(path)   # within MAX_KERNEL_BYTES, in its PEP 263 encoding
    except untrusted.UntrustedInput as exc:
        raise KernelLoadError(str(exc)) from None
    try:
        tree = ast.parse(source, filename=str(path))
    except SyntaxError as exc:
        raise KernelLoadError(f"{path}: does not parse: {exc.msg} (line {exc.lineno})") from None
    except (RecursionError, MemoryError, ValueError) as exc:
        raise KernelLoadError(f"{path}: does not parse: {type(exc).__name__} ({str(exc)[:100]})") from None
    return path, source, tree


def _the_spec(module: Any, tree: ast.Module, path: Path) -> KernelSpec:
    specs = [v for v in vars(module).values() if isinstance(v, (KernelSpec, DistKernelSpec))]
    if not specs:
        raise KernelLoadError(f"{path}: defines no KernelSpec (expected a module-level "
                              f"`SPEC = KernelSpec(...)`, or a DistKernelSpec)")
    if len({id(s) for s in specs}) > 1:
        raise KernelLoadError(f"{path}: defines {len(specs)} KernelSpec objects, expected one")
    spec = specs[0]
    if find_function(tree, spec.rewrite_target) is None:
        raise KernelLoadError(f"{path}: rewrite target {spec.rewrite_target!r} is not a top-level "
                              f"function of the module")
    if not hasattr(getattr(module, spec.rewrite_target, None), "fn"):
        raise KernelLoadError(f"{path}: rewrite target {spec.rewrite_target!r} is not decorated "
                              f"with @triton.jit")
    if isinstance(spec, KernelSpec):
        object.__setattr__(spec, "source_path", path.resolve())
    return spec


def _import_file(path: Path, source: str | None = None) -> Any:
    """Import a module from a file under a unique name, its folder on sys.path for siblings;
    with ``source``, that text is executed in place of the file's (same file name)."""
    name = f"_swizzleperf_kernel_{path.stem}_{next(_module_counter)}"
    folder = str(path.resolve().parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    module_spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[name] = module
    try:
        if source is None:
            module_spec.loader.exec_module(module)
        else:
            exec(compile(source, str(path), "exec"), module.__dict__)
    except Exception as exc:  # the user's module failed to import: say how, in one line
        sys.modules.pop(name, None)
        raise KernelLoadError(f"{path}: failed to import: {type(exc).__name__}: {exc}") from None
    return module


def find_function(tree: ast.Module, name: str) -> ast.FunctionDef | None:
    """The module-level function definition called ``name`` in a parsed module (``module_level_
    functions``), or None."""
    return next((node for node in module_level_functions(tree) if node.name == name), None)


def module_level_functions(tree: ast.Module) -> list:
    """The functions a module defines when it runs: its top-level ``def`` statements and those in
    module-level ``if`` / ``try`` / ``with`` blocks (a kernel defined only where Triton imports, as
    libraries guard it), in source order; not those of classes or of other functions."""
    return [n for n in module_level_statements(tree) if isinstance(n, ast.FunctionDef)]


def at_column(text: str, column: int) -> str:
    """``text`` (definitions written at column 0) moved to ``column``, blank lines kept blank: for
    a definition that goes beside a function defined inside a module-level block."""
    pad = " " * column
    return "".join(pad + line if line.strip() else line for line in text.splitlines(keepends=True)) if pad else text


def module_level_statements(tree: ast.Module) -> list:
    """The statements a module runs at its own level, in source order: the top level and the
    bodies of its ``if`` / ``try`` / ``with`` blocks (an ``import triton`` guarded by ``try``),
    not those of functions or classes."""
    out, todo = [], list(tree.body)
    while todo:
        node = todo.pop(0)
        out.append(node)
        if isinstance(node, (ast.If, ast.With, ast.Try)):
            blocks = [node.body, getattr(node, "orelse", []), getattr(node, "finalbody", [])]
            todo = [n for block in blocks + [h.body for h in getattr(node, "handlers", [])] for n in block] + todo
    return sorted(out, key=lambda n: n.lineno)
