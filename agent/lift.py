"""Lift a kernel's program-id -> tile mapping into a rewrite target, by AST (issue #15).

A user's kernel computes its tile from ``tl.program_id`` in a few scalar statements at the top of
its body, then builds offsets, pointers and loads from the tile coordinates. The Triton tutorial's
grouped GEMM, for one::

    pid = tl.program_id(axis=0)                      # 1-D launch grid
    num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)             # tile-grid extents: stay in the kernel
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    num_pid_in_group = GROUP_SIZE_M * num_pid_n      # read by the mapping only: moves
    group_id = pid // num_pid_in_group               # derived from the program id: moves
    ...
    pid_n = (pid % num_pid_in_group) // group_size_m
    offs_am = (pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)) % M   # tensors: the mapping ended

becomes ``pid_m, pid_n = swizzle(pid, num_pid_m, num_pid_n, GROUP_SIZE_M)`` and a new
``@triton.jit def swizzle(pid, num_pid_m, num_pid_n, GROUP_SIZE_M)`` holding the moved statements.

What is recognised:

- the *region*: the top-level statements of the body from the start up to the first statement that
  reads a program-id-derived name and is not a scalar assignment (tensors, pointers, ``tl.arange``,
  loads, control flow); scalar assignments that do not read the program id are kept where they are,
  other statements that do not read it are stepped over (``tl.assume`` hints included);
- the *tile coordinates*: the program-id-derived names of the region the rest of the kernel reads;
- the launch grid: ``tl.program_id(a)`` of a 2-D / 3-D grid is linearised as the hardware issues
  programs, axis 0 fastest (``pid = program_id(0) + program_id(1) * num_programs(0) + ...``) and
  de-linearised inside the target from the grid sizes it is given;
- the *extents* of the tile grid (the target's parameters after ``pid``, so that the catalog's
  orders apply): per coordinate, a kernel name, a sub-expression or ``tl.num_programs(a)`` whose
  value at the captured launch is the coordinate's range, preferring names that look like it
  (``num_pid_m`` for ``pid_m``).

Values come from a small evaluator of integer arithmetic over NumPy vectors of program ids
(``_Evaluator``), never from running the user's code here: it finds the extents, checks that the
kernel's own mapping is one tile per program at the captured launch, and finds a *permutation-only
problem* (other extents, a program count that is not a multiple of 8) at which the target is probed
but the kernel never launched.

Refused, with the construct and its line: a persistent kernel (a loop whose start is the program
id, ``for tile_id in range(pid, num_tiles, NUM_SMS)``), a spin-wait (``while tl.atomic_cas(...)``),
control flow inside the mapping (data-dependent or not), the program id read again after the
mapping, a mapping that is not one tile per program at the captured launch.
"""
from __future__ import annotations

import ast
import math
import textwrap
from dataclasses import dataclass, field

import numpy as np

from swizzleperf.agent.candidate import CandidateError, check_candidate

# Calls a scalar statement of the mapping may make (names as written, ``triton.language.`` -> ``tl.``).
SCALAR_CALLS = frozenset({
    "tl.program_id", "tl.num_programs", "tl.cdiv", "triton.cdiv", "tl.minimum", "tl.maximum",
    "tl.where", "tl.abs", "min", "max", "abs", "tl.multiple_of", "tl.max_contiguous", "tl.umulhi",
})
HINTS = frozenset({"tl.assume", "tl.static_assert", "tl.device_assert", "tl.static_print",
                   "tl.device_print", "tl.debug_barrier"})
BUILTIN_NAMES = frozenset({"tl", "triton", "min", "max", "abs", "range", "True", "False", "None"})
RANGE_CALLS = frozenset({"range", "tl.range", "tl.static_range"})
PROBE_EXTENTS = {1: [(7,), (13,), (5,)],
                 2: [(5, 3), (3, 5), (7, 5), (5, 7), (3, 3), (9, 7), (11, 13)],
                 3: [(3, 5, 3), (5, 3, 3), (3, 3, 5), (3, 3, 3)]}


class LiftError(Exception):
    """The kernel's mapping cannot be lifted; the message is one line naming the construct and line."""


@dataclass(frozen=True)
class Launch:
    """What lift needs of one captured launch.

    Attributes:
        grid: the launch grid, 1 to 3 sizes.
        values: scalar arguments and constexprs by parameter name (ints, floats, bools, strings).
        pointers: names of the tensor (pointer) parameters.
        globals: module-level scalars the kernel reads, by name.
    """

    grid: tuple
    values: dict
    pointers: frozenset = frozenset()
    globals: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Lifted:
    """The lifted kernel module and its rewrite target.

    Attributes:
        source: the user's module with the call site in the kernel and the target before it.
        target_name / target_source: the generated ``@triton.jit`` rewrite target.
        arg_names: its parameters (``pid`` first); ``extents``: those that are the tile-grid sizes.
        arg_values: the values of ``arg_names[1:]`` at the captured launch.
        tile_grid: the tile grid at the captured launch (one program per tile).
        probe_values / probe_grid: a permutation-only problem (values of ``arg_names[1:]``, tile
            grid whose program count is not a multiple of 8), or None where none was found.
        outputs: the tile coordinates, in the order the target returns them.
        lines: first and last line of the mapping in the user's file.
        notes: what the lift did that a reader should know (hints dropped, synthesized extents).
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


# -- small AST helpers ---------------------------------------------------------------------------

def _call_name(node: ast.AST) -> str | None:
    if not isinstance(node, ast.Call):
        return None
    name = ast.unparse(node.func)
    return "tl." + name[len("triton.language."):] if name.startswith("triton.language.") else name


def _reads(node: ast.AST) -> set:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _assigned(stmt: ast.stmt) -> list:
    """Names a statement assigns, in order (tuple targets flattened; nested statements included)."""
    out = []
    for node in ast.walk(stmt):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and node.id not in out:
            out.append(node.id)
    return out


def _axis(call: ast.Call) -> int:
    arg = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "axis"), None)
    if not isinstance(arg, ast.Constant) or not isinstance(arg.value, int):
        raise LiftError(f"line {call.lineno}: {ast.unparse(call)} with an axis that is not a constant")
    return arg.value


def _has_program_id(node: ast.AST) -> bool:
    return any(_call_name(n) == "tl.program_id" for n in ast.walk(node))


def _text(node: ast.AST) -> str:
    return " ".join(ast.unparse(node).split())


def _statement_text(stmt: ast.stmt) -> str:
    head = stmt.test if isinstance(stmt, (ast.If, ast.While)) else getattr(stmt, "iter", None)
    if isinstance(stmt, ast.For):
        return f"for {_text(stmt.target)} in {_text(stmt.iter)}"
    if head is not None:
        return f"{'if' if isinstance(stmt, ast.If) else 'while'} {_text(head)}"
    return _text(stmt)


# -- refusals over the whole kernel -------------------------------------------------------------

def _pid_taint(func: ast.FunctionDef) -> set:
    """Names derived from ``tl.program_id`` anywhere in the kernel (assignments and loop targets)."""
    return _derived(func, _has_program_id, loop_targets=True)


def _derived(func: ast.FunctionDef, seeds, loop_targets: bool) -> set:
    """Names whose value derives from an expression ``seeds(expr)`` accepts, or from such names:
    a fixed point over assignments (and ``for`` targets, with ``loop_targets``)."""
    derived: set = set()
    changed = True
    while changed:
        changed = False
        for node in ast.walk(func):
            if (isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and node.value is not None
                    and (seeds(node.value) or _reads(node.value) & derived)):
                new = set(_assigned(node)) - derived
            elif loop_targets and isinstance(node, ast.For) and (seeds(node.iter) or _reads(node.iter) & derived):
                new = set(_assigned(node.target)) - derived
            else:
                continue
            if new:
                derived |= new
                changed = True
    return derived


def _refusals(func: ast.FunctionDef, tainted: set) -> list:
    """``(line, kind, message)`` of every construct that makes the kernel unliftable."""
    found = []
    for node in ast.walk(func):
        if isinstance(node, ast.While) and any((_call_name(n) or "").startswith("tl.atomic_")
                                               for n in ast.walk(node.test)):
            found.append((node.lineno, "spin-wait", f"a spin-wait `{_statement_text(node)}` (line "
                          f"{node.lineno}): its programs wait on each other, so their order is not "
                          f"free to change"))
        elif isinstance(node, ast.While) and (_has_program_id(node.test) or _reads(node.test) & tainted):
            found.append((node.lineno, "persistent", f"a persistent kernel: `{_statement_text(node)}` "
                          f"(line {node.lineno}) loops over work items from the program id, so one "
                          f"program computes several tiles"))
        elif isinstance(node, ast.For) and _call_name(node.iter) in RANGE_CALLS and len(node.iter.args) >= 2:
            start = node.iter.args[0]
            if _has_program_id(start) or _reads(start) & tainted:
                found.append((node.lineno, "persistent", f"a persistent kernel: the tile index comes "
                              f"from a loop over tiles `{_statement_text(node)}` (line {node.lineno}), "
                              f"so one program computes several tiles"))
    found.sort()
    return found


def _refuse_unliftable(func: ast.FunctionDef, tainted: set) -> None:
    found = _refusals(func, tainted)
    if not found:
        return
    first = found[0]
    others = sorted({kind for _, kind, _ in found if kind != first[1]})
    also = "".join(f"; also a {kind} (line {next(l for l, k, _ in found if k == kind)})" for kind in others)
    raise LiftError(f"cannot lift {func.name}: {first[2]}{also}")


# -- the region ----------------------------------------------------------------------------------

def _is_scalar_expr(node: ast.AST, tensors: set) -> bool:
    for n in ast.walk(node):
        if isinstance(n, ast.Name) and n.id in tensors:
            return False
        if isinstance(n, ast.Call):
            name = _call_name(n)
            if name not in SCALAR_CALLS and not (isinstance(n.func, ast.Attribute) and n.func.attr == "to"):
                return False
        if isinstance(n, (ast.Subscript, ast.Starred, ast.Lambda, ast.ListComp, ast.List, ast.Dict,
                          ast.Set, ast.GeneratorExp, ast.JoinedStr)):
            return False
    return True


def _is_scalar_assign(stmt: ast.stmt, tensors: set) -> bool:
    if isinstance(stmt, ast.Assign):
        targets_ok = all(isinstance(t, ast.Name) or (isinstance(t, ast.Tuple) and all(isinstance(e, ast.Name) for e in t.elts))
                         for t in stmt.targets)
        return targets_ok and _is_scalar_expr(stmt.value, tensors)
    if isinstance(stmt, (ast.AugAssign, ast.AnnAssign)):
        return isinstance(stmt.target, ast.Name) and stmt.value is not None and _is_scalar_expr(stmt.value, tensors)
    return False


def _is_hint(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Expr) and _call_name(stmt.value) in HINTS


@dataclass
class _Region:
    statements: list     # scalar assignments of the region, in order
    hints: list          # hint statements inside the region's span
    pid_names: set       # names derived from the program id in the region
    moved: list          # the region's statements that read the program id (directly or not)
    end: int             # index in the body of the first statement after the region
    body: list


def _region(func: ast.FunctionDef, pointers: frozenset) -> _Region:
    body = func.body[1:] if ast.get_docstring(func, clean=False) is not None else func.body
    tensors, pid_names = set(pointers), set()
    statements, hints, moved = [], [], []
    end = len(body)
    for i, stmt in enumerate(body):
        if _is_scalar_assign(stmt, tensors):
            statements.append(stmt)
            if _has_program_id(stmt) or _reads(stmt.value) & pid_names:
                pid_names |= set(_assigned(stmt))
                moved.append(stmt)
            continue
        if _is_hint(stmt):
            hints.append(stmt)
            continue
        if (_reads(stmt) & pid_names or _has_program_id(stmt)
                or isinstance(stmt, (ast.If, ast.For, ast.While, ast.With, ast.Return, ast.Try))):
            end = i
            break
        tensors |= set(_assigned(stmt))
    if not any(_has_program_id(s) for s in moved):
        raise LiftError(f"{func.name} (line {func.lineno}): no `tl.program_id` among the scalar "
                        f"statements at the top of its body: no program-id -> tile mapping to lift")
    return _Region(statements, hints, pid_names, moved, end, body)


def _check_after(func: ast.FunctionDef, region: _Region, outputs: list) -> None:
    """Refuse what happens to the mapping after the region: program ids read again, coordinates
    reassigned, control flow that assigns program-id-derived values."""
    after = region.body[region.end:]
    loaded = _loaded_names(func)
    for stmt in after:
        for node in ast.walk(stmt):
            if _call_name(node) == "tl.program_id":
                raise LiftError(f"cannot lift {func.name}: `{_text(node)}` (line {node.lineno}) reads "
                                f"the program id again after the mapping (which ends at line "
                                f"{_last_line(region)}): every tile coordinate must come from the mapping")
        reassigned = set(_assigned(stmt)) & set(outputs)
        if isinstance(stmt, (ast.If, ast.While)) and reassigned:
            data = _reads(stmt.test) & loaded or any(_loads(n) for n in ast.walk(stmt.test))
            kind = "data-dependent control flow" if data else "control flow"
            raise LiftError(f"cannot lift {func.name}: {kind} in the program-id mapping: "
                            f"`{_statement_text(stmt)}` (line {stmt.lineno}) assigns "
                            f"{', '.join(sorted(reassigned))}; write the mapping with tl.where to lift it")
        if reassigned:
            raise LiftError(f"cannot lift {func.name}: the tile coordinate {sorted(reassigned)[0]} is "
                            f"assigned again at line {stmt.lineno}, after the mapping (which ends at "
                            f"line {_last_line(region)})")


def _loads(node: ast.AST) -> bool:
    return (_call_name(node) or "").startswith(("tl.load", "tl.atomic_"))


def _loaded_names(func: ast.FunctionDef) -> set:
    """Names whose value derives from memory (``tl.load``, atomics), through assignments."""
    return _derived(func, lambda expr: any(_loads(n) for n in ast.walk(expr)), loop_targets=False)


def _params(func: ast.FunctionDef) -> list:
    return [a.arg for a in func.args.args]


def _last_line(region: _Region) -> int:
    return max(s.end_lineno for s in region.statements)


# -- the evaluator -------------------------------------------------------------------------------

class _Unsupported(Exception):
    pass


def _c_div(a, b):
    """Integer division truncating toward zero, as Triton's ``//`` on signed integers."""
    q = np.abs(a) // np.abs(b)
    return np.where((np.sign(a) * np.sign(b)) < 0, -q, q) if np.ndim(q) else (-q if (a < 0) != (b < 0) and q else q)


_BINOPS = {
    ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
    ast.FloorDiv: _c_div, ast.Mod: lambda a, b: a - b * _c_div(a, b), ast.Div: lambda a, b: a / b,
    ast.LShift: lambda a, b: a << b, ast.RShift: lambda a, b: a >> b, ast.BitAnd: lambda a, b: a & b,
    ast.BitOr: lambda a, b: a | b, ast.BitXor: lambda a, b: a ^ b, ast.Pow: lambda a, b: a ** b,
}
_COMPARE = {ast.Eq: np.equal, ast.NotEq: np.not_equal, ast.Lt: np.less, ast.LtE: np.less_equal,
            ast.Gt: np.greater, ast.GtE: np.greater_equal}


class _Evaluator:
    """Integer arithmetic of the mapping over a vector of program ids (NumPy), with Triton's
    meaning: ``tl.program_id(a)`` the per-axis ids of programs ``0..P-1`` (axis 0 fastest),
    ``tl.num_programs(a)`` the grid size, builtin ``min`` / ``max`` elementwise, ``//`` and ``%``
    truncating toward zero. Anything else raises ``_Unsupported``."""

    def __init__(self, env: dict, grid: tuple | None = None):
        self.env = dict(env)
        self.grid = tuple(grid) if grid else None
        if self.grid:
            linear = np.arange(math.prod(self.grid), dtype=np.int64)
            strides = [math.prod(self.grid[:a]) for a in range(len(self.grid))]
            self.program_ids = [(linear // s) % g for s, g in zip(strides, self.grid)]

    def run(self, stmt: ast.stmt) -> None:
        if isinstance(stmt, ast.Assign):
            value = self.expr(stmt.value)
            for target in stmt.targets:
                self._bind(target, value)
        elif isinstance(stmt, ast.AugAssign):
            self.env[stmt.target.id] = _BINOPS[type(stmt.op)](self.expr(stmt.target), self.expr(stmt.value))
        elif isinstance(stmt, ast.AnnAssign):
            self.env[stmt.target.id] = self.expr(stmt.value)
        else:
            raise _Unsupported(f"`{_text(stmt)}`")

    def _bind(self, target: ast.AST, value) -> None:
        if isinstance(target, ast.Name):
            self.env[target.id] = value
        else:
            values = list(value)
            for element, v in zip(target.elts, values):
                self._bind(element, v)

    def expr(self, node: ast.AST):
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, bool)):
            return node.value
        if isinstance(node, ast.Name):
            if node.id not in self.env:
                raise _Unsupported(f"the value of `{node.id}`")
            return self.env[node.id]
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            return _BINOPS[type(node.op)](self.expr(node.left), self.expr(node.right))
        if isinstance(node, ast.UnaryOp):
            value = self.expr(node.operand)
            ops = {ast.USub: lambda v: -v, ast.UAdd: lambda v: v, ast.Not: np.logical_not, ast.Invert: lambda v: ~v}
            return ops[type(node.op)](value)
        if isinstance(node, ast.Compare):
            result, left = True, self.expr(node.left)
            for op, comparator in zip(node.ops, node.comparators):
                right = self.expr(comparator)
                if type(op) not in _COMPARE:
                    raise _Unsupported(f"`{_text(node)}`")
                result = np.logical_and(result, _COMPARE[type(op)](left, right))
                left = right
            return result
        if isinstance(node, ast.BoolOp):
            values = [self.expr(v) for v in node.values]
            combine = np.logical_and if isinstance(node.op, ast.And) else np.logical_or
            out = values[0]
            for v in values[1:]:
                out = combine(out, v)
            return out
        if isinstance(node, ast.IfExp):
            return np.where(self.expr(node.test), self.expr(node.body), self.expr(node.orelse))
        if isinstance(node, ast.Tuple):
            return tuple(self.expr(e) for e in node.elts)
        if isinstance(node, ast.Call):
            return self._call(node)
        raise _Unsupported(f"`{_text(node)}`")

    def _call(self, node: ast.Call):
        name = _call_name(node)
        if isinstance(node.func, ast.Attribute) and node.func.attr == "to":
            return self.expr(node.func.value)
        args = node.args
        if name in ("tl.program_id", "tl.num_programs"):
            if self.grid is None:
                raise _Unsupported(f"`{_text(node)}` outside a launch")
            axis = _axis(node)
            if axis >= len(self.grid):
                return 0 if name == "tl.program_id" else 1
            return self.program_ids[axis] if name == "tl.program_id" else self.grid[axis]
        values = [self.expr(a) for a in args]
        if name in ("tl.cdiv", "triton.cdiv"):
            return _c_div(values[0] + values[1] - 1, values[1])
        if name in ("min", "tl.minimum", "max", "tl.maximum"):
            op = np.minimum if name in ("min", "tl.minimum") else np.maximum
            out = values[0]
            for v in values[1:]:
                out = op(out, v)
            return out
        if name == "tl.where":
            return np.where(*values)
        if name in ("abs", "tl.abs"):
            return np.abs(values[0])
        if name in ("tl.multiple_of", "tl.max_contiguous"):
            return values[0]
        raise _Unsupported(f"`{_text(node)}`")


# -- extents -------------------------------------------------------------------------------------

@dataclass
class _Extent:
    call_arg: str      # what the kernel passes
    param: str         # the target's parameter
    value: int
    axis: int | None   # the launch axis when the extent is tl.num_programs(axis)
    node: ast.AST | None = None   # a sub-expression the target replaces by the parameter


def _similar(output: str, name: str) -> int:
    if output in name:
        return 2
    return 1 if "_" in output and name.endswith("_" + output.rsplit("_", 1)[1]) else 0


def _pick_extents(func, region, outputs, env, launch, names_in_use) -> tuple[list, list]:
    """One extent per tile coordinate (see the module docstring); raises LiftError where a
    coordinate's range is found nowhere."""
    grid, notes = tuple(launch.grid), []
    kernel_names = [s for stmt in region.statements if stmt not in region.moved for s in _assigned(stmt)]
    candidates = [n for n in dict.fromkeys(kernel_names + _params(func) + list(launch.globals))
                  if isinstance(env.get(n), (int, np.integer)) and not isinstance(env.get(n), bool)]
    sub_expressions = _pid_free_calls(region, env)
    values = env
    chosen: list = [None] * len(outputs)
    taken: set = set()
    for i, out in enumerate(outputs):   # the launch axes first: exact and certain
        for axis, ids in enumerate(_program_ids(grid)):
            if np.array_equal(np.broadcast_to(values[out], ids.shape), ids) and axis not in taken:
                chosen[i] = _Extent(f"tl.num_programs({axis})", _fresh(f"num_{out}", names_in_use), grid[axis], axis)
                taken.add(axis)
                break
    for i, out in enumerate(outputs):
        if chosen[i] is not None:
            continue
        extent = int(np.max(values[out])) + 1
        names = [n for n in candidates if int(env[n]) == extent and n not in taken]
        if names:   # names that look like the coordinate first, then the kernel's own over parameters
            best = max(names, key=lambda n: (_similar(out, n), n in kernel_names))
            chosen[i] = _Extent(best, best, extent, None)
            taken.add(best)
            continue
        for node, value in sub_expressions:
            if value == extent and _text(node) not in taken:
                chosen[i] = _Extent(_text(node), _fresh(f"num_{out}", names_in_use), extent, None, node)
                taken.add(_text(node))
                break
    missing = [i for i, c in enumerate(chosen) if c is None]
    free_axes = [a for a in range(len(grid)) if a not in taken]
    if len(missing) == 1 and len(free_axes) == 1:   # the last one: its launch axis over the others on it
        i, axis = missing[0], free_axes[0]
        others = [c for c in chosen if c is not None and c.axis is None]
        product = math.prod(c.value for c in others)
        if others and grid[axis] % product == 0 and grid[axis] // product == int(np.max(values[outputs[i]])) + 1:
            divisor = " * ".join(c.call_arg for c in others)
            divisor = f"({divisor})" if len(others) > 1 else divisor
            chosen[i] = _Extent(f"tl.num_programs({axis}) // {divisor}", _fresh(f"num_{outputs[i]}", names_in_use),
                                grid[axis] // product, None)
            missing = []
    if missing:
        out = outputs[missing[0]]
        raise LiftError(f"cannot lift {func.name}: the tile coordinate {out} spans 0..{int(np.max(values[out]))} "
                        f"at the captured launch, and no name, sub-expression or tl.num_programs of the "
                        f"kernel has the value {int(np.max(values[out])) + 1} (give it a name before the "
                        f"mapping, e.g. num_{out} = tl.cdiv(...))")
    return chosen, notes


def _program_ids(grid: tuple) -> list:
    return _Evaluator({}, grid).program_ids


def _pid_free_calls(region: _Region, env_after: dict) -> list:
    """``(node, value)`` of the calls inside the moved statements that read no program-id-derived
    name (``tl.cdiv(N, BLOCK_N)`` written inline), evaluated at the captured launch."""
    out = []
    for stmt in region.moved:
        for node in ast.walk(stmt.value):
            if (isinstance(node, ast.Call) and not _has_program_id(node) and not _reads(node) & region.pid_names
                    and _call_name(node) in ("tl.cdiv", "triton.cdiv", "min", "max", "tl.minimum", "tl.maximum")):
                try:
                    value = _Evaluator(env_after).expr(node)
                except (_Unsupported, TypeError, ValueError):
                    continue
                if np.ndim(value) == 0 and not isinstance(value, bool):
                    out.append((node, int(value)))
    return out


def _fresh(name: str, in_use: set) -> str:
    candidate, k = name, 1
    while candidate in in_use:
        k += 1
        candidate = f"{name}_{k}"
    in_use.add(candidate)
    return candidate


# -- the lift ------------------------------------------------------------------------------------

def lift(source: str, kernel_name: str, launch: Launch, filename: str = "kernel.py") -> Lifted:
    """Lift the program-id -> tile mapping of ``kernel_name`` in ``source`` (the module's text).

    Raises:
        LiftError: what cannot be lifted, in one line naming the construct and its line.
    """
    tree = ast.parse(source, filename=filename)
    func = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == kernel_name), None)
    if func is None:
        raise LiftError(f"{filename}: no top-level function {kernel_name!r} (the kernel must be a "
                        f"module-level @triton.jit function)")
    _refuse_unliftable(func, _pid_taint(func))
    region = _region(func, launch.pointers)
    after_reads = set().union(*[_reads(s) for s in region.body[region.end:]])
    outputs = list(dict.fromkeys(n for s in region.moved for n in _assigned(s) if n in after_reads))
    if not outputs:
        raise LiftError(f"cannot lift {kernel_name}: nothing after the mapping (lines "
                        f"{region.statements[0].lineno}-{_last_line(region)}) reads the names it derives "
                        f"from the program id")
    _refuse_intermediates(func, region, outputs)
    pid_stmt = _kernel_pid_statement(region, outputs, len(launch.grid))
    _check_after(func, region, outputs)
    env = _evaluate_region(func, region, launch)
    programs = math.prod(launch.grid)
    _check_one_to_one(kernel_name, outputs, [np.broadcast_to(env[o], (programs,)) for o in outputs],
                      tuple(launch.grid))
    names_in_use = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} | set(_params(func))
    extents, notes = _pick_extents(func, region, outputs, env, launch, names_in_use)
    lines = source.splitlines(keepends=True)
    target = _build_target(tree, func, region, outputs, extents, launch, pid_stmt, names_in_use, lines)
    try:
        check_candidate(target["source"], target["name"], target["params"])
    except CandidateError as exc:
        raise LiftError(f"cannot lift {kernel_name}: the mapping (lines {region.statements[0].lineno}-"
                        f"{_last_line(region)}) is not an acceptable rewrite target: {exc}") from None
    arg_values = _arg_values(target, extents, env, launch)
    probe_values, probe_grid = _probe_problem(target, extents, arg_values)
    new_source, kernel_notes = _rewrite_module(tree, lines, func, region, target, outputs, extents, pid_stmt,
                                               len(launch.grid), names_in_use)
    return Lifted(source=new_source, target_name=target["name"], target_source=target["source"],
                  arg_names=target["params"], extents=[e.param for e in extents], arg_values=arg_values,
                  tile_grid=tuple(e.value for e in extents), probe_values=probe_values,
                  probe_grid=probe_grid, outputs=outputs,
                  lines=(region.statements[0].lineno, _last_line(region)), notes=notes + kernel_notes)


def _refuse_intermediates(func, region: _Region, outputs: list) -> None:
    """A name the mapping derives the coordinates from (the program id itself, say) must not be
    read after it: the swizzle would change the coordinates and leave that name as it was."""
    for out in outputs:
        readers = [s for s in region.moved if out in _reads(s.value)]
        if readers and len(outputs) > 1:
            where = next(s.lineno for s in region.body[region.end:] if out in _reads(s))
            defining = next(s for s in region.moved if out in _assigned(s))
            what = "the program id" if _call_name(getattr(defining, "value", None)) == "tl.program_id" else "the mapping's intermediate"
            raise LiftError(f"cannot lift {func.name}: {what} {out} is read again at line {where}, after the "
                            f"mapping (which ends at line {_last_line(region)}): only the tile coordinates "
                            f"may leave it")


def _kernel_pid_statement(region: _Region, outputs: list, ndim: int) -> ast.Assign | None:
    """On a 1-D launch, the region's ``NAME = tl.program_id(0)`` whose name is no coordinate: it
    stays in the kernel, and NAME is the target's first parameter."""
    if ndim != 1:
        return None
    for stmt in region.moved:
        if (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)
                and _call_name(stmt.value) == "tl.program_id" and _axis(stmt.value) == 0
                and stmt.targets[0].id not in outputs):
            return stmt
    return None


def _evaluate_region(func, region: _Region, launch: Launch) -> dict:
    """Every name of the region at the captured launch (vectors over the programs where they
    derive from the program id)."""
    evaluator = _Evaluator({**launch.globals, **launch.values}, tuple(launch.grid))
    for stmt in region.statements:
        try:
            evaluator.run(stmt)
        except _Unsupported as exc:
            raise LiftError(f"cannot lift {func.name}: cannot evaluate {exc} (line {stmt.lineno}) of the "
                            f"mapping at the captured launch") from None
        except (TypeError, ValueError, ZeroDivisionError, OverflowError) as exc:
            raise LiftError(f"cannot lift {func.name}: evaluating line {stmt.lineno} of the mapping at the "
                            f"captured launch failed: {type(exc).__name__}: {exc}") from None
    return evaluator.env


def _check_one_to_one(kernel: str, outputs: list, tile_values: list, grid: tuple) -> None:
    coords = np.stack([np.asarray(v, dtype=np.int64) for v in tile_values], axis=1)
    programs = coords.shape[0]
    if coords.min() < 0:
        raise LiftError(f"cannot lift {kernel}: the mapping gives negative tile coordinates at the captured launch")
    extents = tuple(int(c) + 1 for c in coords.max(axis=0))
    distinct = np.unique(np.ravel_multi_index(tuple(coords.T), extents)).size
    if math.prod(extents) != programs or distinct != programs:
        raise LiftError(f"cannot lift {kernel}: at the captured launch (grid {'x'.join(map(str, grid))}, "
                        f"{programs} programs) the mapping's ({', '.join(outputs)}) covers {distinct} "
                        f"distinct tiles of a {'x'.join(map(str, extents))} grid: not one tile per program")


def _arg_values(target: dict, extents: list, env: dict, launch: Launch) -> tuple:
    values = []
    for name in target["params"][1:]:
        extent = next((e for e in extents if e.param == name), None)
        if extent is not None:
            value = extent.value
        elif name in target["grid_params"]:
            value = launch.grid[target["grid_params"][name]]
        else:
            value = env.get(name)
        if isinstance(value, (bool, np.bool_)):
            value = int(value)
        if not isinstance(value, (int, np.integer)):
            raise LiftError(f"cannot lift: the mapping reads {name} = {value!r}; the rewrite target's "
                            f"arguments must be integers")
        values.append(int(value))
    return tuple(values)


def _build_target(tree, func, region: _Region, outputs: list, extents: list, launch: Launch,
                  pid_stmt, names_in_use: set, lines: list) -> dict:
    """The target: parameters (pid, extents, grid sizes it needs, extras it reads), the statements
    that derive the coordinates (the user's text, program ids de-linearised) and its source."""
    extent_names = {e.param for e in extents if e.node is None and e.axis is None}
    needed, keep = set(outputs), []
    for stmt in reversed(region.statements):
        assigned = set(_assigned(stmt))
        if assigned & needed and not assigned <= extent_names:
            keep.append(stmt)
            needed |= _reads(stmt.value) | (assigned if isinstance(stmt, ast.AugAssign) else set())
    keep.reverse()
    inner = {n for s in keep for n in _assigned(s)}
    taken = names_in_use | inner
    if pid_stmt is not None:
        pid_name = pid_stmt.targets[0].id
    else:
        pid_name = "pid" if "pid" not in inner | {e.param for e in extents} else _fresh("linear_pid", taken)
    grid_params = {e.param: e.axis for e in extents if e.axis is not None}
    axis_param = {axis: p for p, axis in grid_params.items()}
    ndim = len(launch.grid)

    def grid_param(axis: int) -> str:
        if axis not in axis_param:
            axis_param[axis] = _fresh(f"num_programs_{axis}", taken)
            grid_params[axis_param[axis]] = axis
        return axis_param[axis]

    by_expression = {ast.dump(e.node): e.param for e in extents if e.node is not None}
    replacements = {}
    for stmt in keep:
        for node in ast.walk(stmt):
            name = _call_name(node)
            if name == "tl.program_id":
                replacements[node] = _delinearised(_axis(node), ndim, pid_name, grid_param)
            elif name == "tl.num_programs":
                replacements[node] = grid_param(_axis(node))
            elif isinstance(node, ast.Call) and ast.dump(node) in by_expression:
                replacements[node] = by_expression[ast.dump(node)]
    texts = [_segment(stmt, replacements, lines) for stmt in keep if stmt is not pid_stmt]
    parsed = [ast.parse(t).body[0] for t in texts]
    defined = {n for s in parsed for n in _assigned(s)}
    reads = set().union(*[_reads(s) for s in parsed]) | (set(outputs) - defined)
    head = [pid_name] + [e.param for e in extents]
    grid_extra = [p for p, _ in sorted(grid_params.items(), key=lambda kv: kv[1]) if p not in head]
    order = _params(func) + list(launch.globals)
    extras = [n for n in dict.fromkeys(order) if n in reads - defined and n not in head + grid_extra]
    unknown = sorted(reads - defined - set(head + grid_extra + extras) - BUILTIN_NAMES)
    if unknown:
        raise LiftError(f"cannot lift {func.name}: the mapping reads {', '.join(unknown)}, which is neither "
                        f"a kernel parameter nor a module-level scalar")
    params = head + grid_extra + extras
    top = ({n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
           | {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
           | {(a.asname or a.name).split(".")[0] for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))
              for a in n.names})
    name = _fresh("swizzle", top)
    first, last = region.statements[0].lineno, _last_line(region)
    where = f"line {first}" if first == last else f"lines {first}-{last}"
    body = "".join(textwrap.indent(t, "    ") + "\n" for t in texts)
    source = (f"@triton.jit\ndef {name}({', '.join(params)}):\n"
              f"    \"\"\"Program id -> tile of {func.name} (lifted from its {where}).\"\"\"\n"
              f"{body}    return {', '.join(outputs)}\n")
    return {"name": name, "params": params, "source": source, "grid_params": grid_params,
            "pid": pid_name, "extras": extras}


def _delinearised(axis: int, ndim: int, pid: str, grid_param) -> str:
    """``tl.program_id(axis)`` of an ``ndim``-D launch from the linear id (axis 0 fastest)."""
    if ndim == 1:
        return pid if axis == 0 else "0"
    if axis >= ndim:
        return "0"
    if axis == 0:
        return f"({pid} % {grid_param(0)})"
    below = " * ".join(grid_param(a) for a in range(axis))
    below = f"({below})" if axis > 1 else below
    return f"({pid} // {below})" if axis == ndim - 1 else f"({pid} // {below} % {grid_param(axis)})"


def _segment(stmt: ast.stmt, replacements: dict, lines: list) -> str:
    """The statement's own text (trailing comment excluded, continuation lines dedented) with the
    sub-expressions of ``replacements`` replaced; a replaced right-hand side loses its outer
    parentheses."""
    rows = [line.encode() for line in lines[stmt.lineno - 1:stmt.end_lineno]]
    rows[-1] = rows[-1][:stmt.end_col_offset]
    inside = set(map(id, ast.walk(stmt)))
    edits = []
    for node, text in replacements.items():
        if id(node) not in inside:
            continue
        if getattr(stmt, "value", None) is node and text.startswith("(") and text.endswith(")"):
            text = text[1:-1]
        edits.append((node.lineno - stmt.lineno, node.col_offset, node.end_lineno - stmt.lineno,
                      node.end_col_offset, text))
    edits = [e for e in edits if not any(o is not e and _inside(e, o) for o in edits)]
    for row, col, end_row, end_col, text in sorted(edits, reverse=True):
        rows[row:end_row + 1] = [rows[row][:col] + text.encode() + rows[end_row][end_col:]]
    text = b"".join(rows).decode()
    return textwrap.dedent(" " * stmt.col_offset + text[stmt.col_offset:]).rstrip()


def _inside(inner: tuple, outer: tuple) -> bool:
    return inner[:2] >= outer[:2] and inner[2:4] <= outer[2:4] and inner[:4] != outer[:4]


def _rewrite_module(tree: ast.Module, lines: list, func, region: _Region, target: dict, outputs: list, extents: list,
                    pid_stmt, ndim: int, names_in_use: set) -> tuple[str, list]:
    """The user's text with the moved statements gone from the kernel, the call after the region's
    last statement and the target before the kernel's decorators. Line-based: everything else
    keeps its text. Returns ``(source, notes)``."""
    notes = []
    kept_pid = {pid_stmt.targets[0].id} if pid_stmt is not None else set()
    moved_names = region.pid_names - kept_pid
    last = _last_line(region)
    dropped = [h for h in region.hints
               if _reads(h) & (moved_names - set(outputs)) or (h.lineno < last and _reads(h) & set(outputs))]
    if dropped:
        notes.append("dropped from the kernel (they read names the target now computes): "
                     + "; ".join(f"line {h.lineno}: {_text(h)}" for h in dropped))
    if pid_stmt is not None:
        first_arg = pid_stmt.targets[0].id
        pid_line = ""
    elif ndim == 1:
        first_arg, pid_line = _linear_pid(1), ""
    else:
        first_arg = _fresh(target["pid"], names_in_use)
        pid_line = f"{' ' * region.statements[0].col_offset}{first_arg} = {_linear_pid(ndim)}\n"
    grid_args = [f"tl.num_programs({target['grid_params'][p]})" for p in target["params"][1 + len(extents):]
                 if p in target["grid_params"]]
    call_args = [first_arg] + [e.call_arg for e in extents] + grid_args + target["extras"]
    skipped = [s for s in region.body[:region.end] if s not in region.statements and s not in region.hints]
    needed = set().union(*[_reads(s) for s in region.body[region.end:] + skipped])
    needed |= {n for a in call_args for n in _reads(ast.parse(a, mode="eval"))}
    needed |= {n for h in region.hints if h not in dropped for n in _reads(h)}
    kept = []
    for stmt in reversed(region.statements):
        if stmt is pid_stmt or (stmt not in region.moved and set(_assigned(stmt)) & needed):
            kept.append(stmt)
            needed |= _reads(stmt.value)
    removed = [s for s in region.statements if s not in kept] + dropped
    _check_own_lines(func, region.statements + dropped)
    indent = " " * region.statements[0].col_offset
    call = f"{indent}{', '.join(outputs)} = {target['name']}({', '.join(call_args)})\n"
    drop = {n for s in removed for n in range(s.lineno, s.end_lineno + 1)}
    out = []
    for number, line in enumerate(lines, start=1):
        if number not in drop:
            out.append(line)
        if number == last:
            out.append(pid_line + call)
    first = min([func.lineno] + [d.lineno for d in func.decorator_list])
    insert_at = sum(1 for n in range(1, first) if n not in drop)
    return ("".join(out[:insert_at]) + _missing_imports(tree, target["source"]) + target["source"] + "\n\n"
            + "".join(out[insert_at:]), notes)


def _missing_imports(tree: ast.Module, target_source: str) -> str:
    """``import triton`` / ``import triton.language as tl`` where the module does not bind the names
    the target is written with (a module written ``from triton import jit``, say)."""
    bound = {a.asname or a.name.split(".")[0] for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom)) for a in n.names}
    lines = [] if "triton" in bound else ["import triton\n"]
    if "tl" not in bound and "tl." in target_source:
        lines.append("import triton.language as tl\n")
    return "".join(lines) + ("\n\n" if lines else "")


def _linear_pid(ndim: int) -> str:
    """The program's linear id as the hardware issues programs: axis 0 fastest."""
    if ndim == 1:
        return "tl.program_id(axis=0)"
    terms = ["tl.program_id(0)"]
    for axis in range(1, ndim):
        terms.append(f"tl.program_id({axis}) * " + " * ".join(f"tl.num_programs({a})" for a in range(axis)))
    return " + ".join(terms)


def _check_own_lines(func, statements: list) -> None:
    """Every statement moved or kept whole must have its lines to itself (the edit is by lines)."""
    owners: dict = {}
    for node in ast.walk(func):
        if isinstance(node, ast.stmt) and node is not func:
            for n in range(node.lineno, node.end_lineno + 1):
                owners.setdefault(n, set()).add(id(node))
    for stmt in statements:
        nested = set(map(id, ast.walk(stmt)))
        for n in range(stmt.lineno, stmt.end_lineno + 1):
            if owners.get(n, set()) - nested:
                raise LiftError(f"cannot lift {func.name}: line {n} holds several statements; put the "
                                f"mapping's statements on lines of their own")


# -- the permutation-only problem ---------------------------------------------------------------

def _probe_problem(target: dict, extents: list, arg_values: tuple) -> tuple:
    """Values of the target's arguments at other extents, whose program count is not a multiple of
    8, at which the kernel's own order (the target as lifted) is one tile per program; the first of
    a few tries, or ``(None, None)``."""
    func = ast.parse(target["source"]).body[0]
    params = target["params"]
    base = dict(zip(params[1:], arg_values))
    grid_params = target["grid_params"]
    for trial in PROBE_EXTENTS.get(len(extents), []):
        values = dict(base)
        for e, size in zip(extents, trial):
            values[e.param] = size
        programs = math.prod(trial)
        free = [p for p in grid_params if p not in {e.param for e in extents}]
        if len(free) > 1:
            return None, None
        if free:
            covered = math.prod(values[p] for p in grid_params if p != free[0])
            if programs % covered:
                continue
            values[free[0]] = programs // covered
        if programs % 8 and _is_permutation(func, params, values, trial):
            return tuple(values[p] for p in params[1:]), tuple(trial)
    return None, None


def target_order(target_source: str, values: tuple, programs: int) -> np.ndarray:
    """int64 ``[programs, ndim]``: the tile of each program id under a lifted target (its source, the
    values of its parameters after ``pid``), by the evaluator (nothing of it is executed).

    Raises:
        LiftError: the target uses what the evaluator does not know.
    """
    func = ast.parse(target_source).body[0]
    params = [a.arg for a in func.args.args]
    evaluator = _Evaluator({**dict(zip(params[1:], values)), params[0]: np.arange(programs, dtype=np.int64)})
    body = func.body[1:] if ast.get_docstring(func) is not None else func.body
    try:
        for stmt in body[:-1]:
            evaluator.run(stmt)
        result = evaluator.expr(body[-1].value)
    except (_Unsupported, TypeError, ValueError, ZeroDivisionError) as exc:
        raise LiftError(f"cannot evaluate the target: {exc}") from None
    coords = result if isinstance(result, tuple) else (result,)
    return np.stack([np.broadcast_to(np.asarray(c, dtype=np.int64), (programs,)) for c in coords], axis=1)


def _is_permutation(func: ast.FunctionDef, params: list, values: dict, grid: tuple) -> bool:
    programs = math.prod(grid)
    try:
        coords = target_order(ast.unparse(func), tuple(values[p] for p in params[1:]), programs)
    except LiftError:
        return False
    if coords.min() < 0 or np.any(coords >= np.asarray(grid)):
        return False
    return np.unique(np.ravel_multi_index(tuple(coords.T), grid)).size == programs
