"""What the two ways of making a user's kernel reorderable share (agent/capture/lift.py lifts the tile
mapping; agent/capture/pid_remap.py remaps the program ids): the result types, the error, and small
helpers over the kernel's AST and text. Imports of the project only agent/verification/load.py's
``module_level_functions`` / ``module_level_statements`` (where a kernel and its imports may be).
"""
from __future__ import annotations

import ast
import textwrap
from dataclasses import dataclass, field

from swizzleperf.agent.verification.load import module_level_functions, module_level_statements


class LiftError(Exception):
    """The kernel cannot be made reorderable; the message is one line naming the construct and line."""


@dataclass(frozen=True)
class Launch:
    """What lift needs of one captured launch.

    Attributes:
        grid: the launch grid, 1 to 3 sizes.
        values: scalar arguments and constexprs by parameter name (ints, floats, bools, strings).
        pointers: names of the tensor (pointer) parameters.
        globals: module-level scalars the kernel reads, by name.
        line: the first line (its first decorator's) of the definition the app launched
            (``co_firstlineno``): the one lifted where the file defines the name more than once.
    """

    grid: tuple
    values: dict
    pointers: frozenset = frozenset()
    globals: dict = field(default_factory=dict)
    line: int | None = None


@dataclass(frozen=True)
class Lifted:
    """The rewritten kernel module and its rewrite target.

    Attributes:
        source: the user's module with the call site in the kernel and the target before it.
        target_name / target_source: the generated ``@triton.jit`` rewrite target.
        arg_names: its parameters (``pid`` first); ``extents``: those that are the tile-grid sizes.
        arg_values: the values of ``arg_names[1:]`` at the captured launch.
        tile_grid: the tile grid at the captured launch (one program per tile).
        probe_values / probe_grid: a permutation-only problem (values of ``arg_names[1:]``, tile
            grid whose program count is not a multiple of 8), or None where none was found.
        outputs: the tile coordinates, in the order the target returns them.
        lines: first and last line of the mapping in the user's file (for a remap: the kernel's
            first body line, twice).
        notes: what the rewrite did that a reader should know (hints dropped, synthesized extents,
            why the program ids were remapped instead of the mapping lifted).
        kind: ``"lifted"`` (the kernel's program-id -> tile mapping moved into the target: the
            target replaces the kernel's own order) or ``"remapped"`` (the program ids themselves
            go through the target, which is the identity at first: an order composes with the
            kernel's own).
        coordinate_splits: ``{tile axis: d}`` where a tile coordinate is two launch axes merged
            (``c = inner + d * outer``), for the tracer's fit (profiling/tracer.py ``extend``).
    """

    source: str
    target_name: str
    target_source: str
    arg_names: list
    extents: list
    arg_values: tuple
    tile_grid: tuple
    probe_values: tuple | None
    probe_grid: tuple | None
    outputs: list
    lines: tuple
    notes: list
    kind: str = "lifted"
    coordinate_splits: dict = field(default_factory=dict)


# -- AST helpers ---------------------------------------------------------------------------------

def kernel_function(tree: ast.Module, name: str, filename: str, line: int | None = None) -> ast.FunctionDef:
    """The module-level function ``name``: at the top level, or inside module-level ``if`` /
    ``try`` / ``with`` blocks (a kernel defined only where Triton imports, as libraries guard it).
    Where ``line`` is given, the definition that starts there (decorators included, as
    ``co_firstlineno`` counts): the one the app launched, not a same-named fallback or a shadowed
    earlier definition. Raises LiftError where there is none."""
    found = [n for n in module_level_functions(tree) if n.name == name]
    if not found:
        raise LiftError(f"{filename}: no top-level function {name!r} (the kernel must be a "
                        f"module-level @triton.jit function)")
    if line is None:
        return found[0]
    func = next((n for n in found if first_line(n) == line), None)
    if func is None:
        raise LiftError(f"{filename}: the app launched {name} defined at line {line}, but the "
                        f"{'definitions' if len(found) > 1 else 'definition'} of {name} there start at line "
                        f"{', '.join(str(first_line(n)) for n in found)} (the file changed since the capture?)")
    return func


def launched_index(tree: ast.Module, name: str, line: int | None) -> int:
    """Which of the module-level definitions of ``name`` (0 for the first) starts at ``line``; 0
    where ``line`` is None. The lift inserts functions of other names only, so the index holds in
    the lifted source too."""
    found = [n for n in module_level_functions(tree) if n.name == name]
    return next((i for i, n in enumerate(found) if line is not None and first_line(n) == line), 0)


def call_name(node: ast.AST) -> str | None:
    """A call's callee as written, ``triton.language.`` shortened to ``tl.``; None for non-calls."""
    if not isinstance(node, ast.Call):
        return None
    name = ast.unparse(node.func)
    return "tl." + name[len("triton.language."):] if name.startswith("triton.language.") else name


def reads(node: ast.AST) -> set:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def assigned(stmt: ast.stmt) -> list:
    """Names a statement assigns, in order (tuple targets flattened; nested statements included)."""
    out = []
    for node in ast.walk(stmt):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and node.id not in out:
            out.append(node.id)
    return out


def axis_of(call: ast.Call) -> int:
    """The constant axis of ``tl.program_id`` / ``tl.num_programs``; LiftError where it is not one."""
    arg = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "axis"), None)
    if not isinstance(arg, ast.Constant) or not isinstance(arg.value, int):
        raise LiftError(f"line {call.lineno}: {ast.unparse(call)} with an axis that is not a constant")
    return arg.value


def has_program_id(node: ast.AST) -> bool:
    return any(call_name(n) == "tl.program_id" for n in ast.walk(node))


def has_load(node: ast.AST) -> bool:
    """Whether an expression reads memory (``tl.load``, atomics)."""
    return any((call_name(n) or "").startswith(("tl.load", "tl.atomic_")) for n in ast.walk(node))


def text(node: ast.AST) -> str:
    return " ".join(ast.unparse(node).split())


def statement_text(stmt: ast.stmt) -> str:
    """A statement in one line; a compound one by its head (``for x in range(...)``)."""
    if isinstance(stmt, ast.For):
        return f"for {text(stmt.target)} in {text(stmt.iter)}"
    if isinstance(stmt, (ast.If, ast.While)):
        return f"{'if' if isinstance(stmt, ast.If) else 'while'} {text(stmt.test)}"
    return text(stmt)


def params(func: ast.FunctionDef) -> list:
    return [a.arg for a in func.args.args]


def derived(func: ast.FunctionDef, seeds, loop_targets: bool, through_loads: bool = True) -> set:
    """Names whose value derives from an expression ``seeds(expr)`` accepts, or from such names:
    a fixed point over assignments (and ``for`` targets, with ``loop_targets``). Without
    ``through_loads``, a value read from memory (``tl.load(p + pid)``) does not carry the taint."""
    found: set = set()
    changed = True

    def tainted(expr) -> bool:
        return (seeds(expr) or bool(reads(expr) & found)) and (through_loads or not has_load(expr))
    while changed:
        changed = False
        for node in ast.walk(func):
            if (isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and node.value is not None
                    and tainted(node.value)):
                new = set(assigned(node)) - found
            elif loop_targets and isinstance(node, ast.For) and tainted(node.iter):
                new = set(assigned(node.target)) - found
            else:
                continue
            if new:
                found |= new
                changed = True
    return found


def fresh(name: str, in_use: set) -> str:
    """``name``, or ``name_2``, ``name_3``... the first not in ``in_use`` (which it joins)."""
    candidate, k = name, 1
    while candidate in in_use:
        k += 1
        candidate = f"{name}_{k}"
    in_use.add(candidate)
    return candidate


def names_in_use(tree: ast.Module, func: ast.FunctionDef) -> set:
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} | set(params(func))


def top_level_names(tree: ast.Module) -> set:
    """Names the module binds at its top level (functions, classes, assignments, imports)."""
    return ({n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
            | {f.name for f in module_level_functions(tree)}
            | {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
            | {(a.asname or a.name).split(".")[0] for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))
               for a in n.names})


# -- text edits ----------------------------------------------------------------------------------

def segment(stmt: ast.AST, replacements: dict, lines: list) -> str:
    """The node's own text (trailing comment excluded, continuation lines dedented) with the
    sub-expressions of ``replacements`` (node -> text) replaced; a replaced right-hand side loses
    its outer parentheses."""
    rows = [line.encode() for line in lines[stmt.lineno - 1:stmt.end_lineno]]
    rows[-1] = rows[-1][:stmt.end_col_offset]
    inside = set(map(id, ast.walk(stmt)))
    edits = []
    for node, new in replacements.items():
        if id(node) not in inside:
            continue
        if getattr(stmt, "value", None) is node and new.startswith("(") and new.endswith(")"):
            new = new[1:-1]
        edits.append((node.lineno - stmt.lineno, node.col_offset, node.end_lineno - stmt.lineno,
                      node.end_col_offset, new))
    edits = [e for e in edits if not any(o is not e and _inside(e, o) for o in edits)]
    for row, col, end_row, end_col, new in sorted(edits, reverse=True):
        rows[row:end_row + 1] = [rows[row][:col] + new.encode() + rows[end_row][end_col:]]
    joined = b"".join(rows).decode()
    return textwrap.dedent(" " * stmt.col_offset + joined[stmt.col_offset:]).rstrip()


def _inside(inner: tuple, outer: tuple) -> bool:
    return inner[:2] >= outer[:2] and inner[2:4] <= outer[2:4] and inner[:4] != outer[:4]


def replace_in_lines(lines: list, replacements: list) -> list:
    """``lines`` (with line ends) with each ``(node, text)`` replaced in place (positions from the
    AST; nodes must not overlap); the other text is untouched."""
    rows = [line.encode() for line in lines]
    for node, new in sorted(replacements, key=lambda r: (r[0].lineno, r[0].col_offset), reverse=True):
        first, last = node.lineno - 1, node.end_lineno - 1
        rows[first:last + 1] = [rows[first][:node.col_offset] + new.encode() + rows[last][node.end_col_offset:]]
        rows[first + 1:first + 1] = [b""] * (last - first)   # keep the line numbering of the rest
    return [r.decode() for r in rows]


def missing_imports(tree: ast.Module, target_source: str) -> str:
    """``import triton`` / ``import triton.language as tl`` where the module does not bind the names
    the target is written with (a module written ``from triton import jit``, say)."""
    bound = {a.asname or a.name.split(".")[0] for n in module_level_statements(tree)
             if isinstance(n, (ast.Import, ast.ImportFrom)) for a in n.names}
    out = [] if "triton" in bound else ["import triton\n"]
    if "tl" not in bound and "tl." in target_source:
        out.append("import triton.language as tl\n")
    return "".join(out) + ("\n\n" if out else "")


def linear_pid(ndim: int) -> str:
    """The program's linear id as the hardware issues programs: axis 0 fastest."""
    if ndim == 1:
        return "tl.program_id(axis=0)"
    terms = ["tl.program_id(0)"]
    for axis in range(1, ndim):
        terms.append(f"tl.program_id({axis}) * " + " * ".join(f"tl.num_programs({a})" for a in range(axis)))
    return " + ".join(terms)


def first_line(func: ast.FunctionDef) -> int:
    """The first line of a function with its decorators."""
    return min([func.lineno] + [d.lineno for d in func.decorator_list])
