"""The integer evaluator of a program-id mapping (over NumPy vectors of program ids: nothing of the
user's code is executed), and what is computed with it: a target's order, whether it is a
permutation, and a permutation-only problem whose program count is not a multiple of 8.
"""
from __future__ import annotations

import ast
import math

import numpy as np

from swizzleperf.agent.capture.lift_common import LiftError, axis_of, call_name, text

# Tile grids tried for the permutation-only problem, by the number of extents: program counts that
# are not multiples of 8 (a remap that is a permutation only on multiples of 8 shows there).
PROBE_EXTENTS = {1: [(7,), (13,), (5,)],
                 2: [(5, 3), (3, 5), (7, 5), (5, 7), (3, 3), (9, 7), (11, 13)],
                 3: [(3, 5, 3), (5, 3, 3), (3, 3, 5), (3, 3, 3)]}
EVAL_ERRORS = (TypeError, ValueError, ZeroDivisionError, OverflowError)


class Unsupported(Exception):
    """The mapping uses what the evaluator does not know; the message names it."""


def c_div(a, b):
    """Integer division truncating toward zero, as Triton's ``//`` on signed integers."""
    q = np.abs(a) // np.abs(b)
    return np.where((np.sign(a) * np.sign(b)) < 0, -q, q) if np.ndim(q) else (-q if (a < 0) != (b < 0) and q else q)


_BINOPS = {
    ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
    ast.FloorDiv: c_div, ast.Mod: lambda a, b: a - b * c_div(a, b), ast.Div: lambda a, b: a / b,
    ast.LShift: lambda a, b: a << b, ast.RShift: lambda a, b: a >> b, ast.BitAnd: lambda a, b: a & b,
    ast.BitOr: lambda a, b: a | b, ast.BitXor: lambda a, b: a ^ b, ast.Pow: lambda a, b: a ** b,
}
_COMPARE = {ast.Eq: np.equal, ast.NotEq: np.not_equal, ast.Lt: np.less, ast.LtE: np.less_equal,
            ast.Gt: np.greater, ast.GtE: np.greater_equal}


class Evaluator:
    """Integer arithmetic of the mapping over a vector of program ids (NumPy), with Triton's
    meaning: ``tl.program_id(a)`` the per-axis ids of programs ``0..P-1`` (axis 0 fastest),
    ``tl.num_programs(a)`` the grid size, builtin ``min`` / ``max`` elementwise, ``//`` and ``%``
    truncating toward zero. Anything else raises ``Unsupported``."""

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
            raise Unsupported(f"`{text(stmt)}`")

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
                raise Unsupported(f"the value of `{node.id}`")
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
                    raise Unsupported(f"`{text(node)}`")
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
        raise Unsupported(f"`{text(node)}`")

    def _call(self, node: ast.Call):
        name = call_name(node)
        if isinstance(node.func, ast.Attribute) and node.func.attr == "to":
            return self.expr(node.func.value)
        args = node.args
        if name in ("tl.program_id", "tl.num_programs"):
            if self.grid is None:
                raise Unsupported(f"`{text(node)}` outside a launch")
            axis = axis_of(node)
            if axis >= len(self.grid):
                return 0 if name == "tl.program_id" else 1
            return self.program_ids[axis] if name == "tl.program_id" else self.grid[axis]
        values = [self.expr(a) for a in args]
        if name in ("tl.cdiv", "triton.cdiv"):
            return c_div(values[0] + values[1] - 1, values[1])
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
        raise Unsupported(f"`{text(node)}`")


def program_ids(grid: tuple) -> list:
    """Per axis, the program ids of the programs ``0..prod(grid)-1`` (axis 0 fastest)."""
    return Evaluator({}, grid).program_ids


def probe_problem(target_source: str, extents: list, grid_params: dict, arg_values: tuple) -> tuple:
    """Values of the target's arguments at other extents, whose program count is not a multiple of
    8, at which the kernel's own order (the target as generated) is one tile per program; the first
    of a few tries, or ``(None, None)``.

    Args:
        target_source: the target's source; its parameters are ``pid`` then ``arg_values``'s.
        extents: the parameters that are the tile grid's sizes, in the tile grid's order.
        grid_params: parameters that are launch-grid sizes, by name -> axis (one that is no extent
            is derived from the others: the launch's program count is the tile grid's).
    """
    func = ast.parse(target_source).body[0]
    params = [a.arg for a in func.args.args]
    base = dict(zip(params[1:], arg_values))
    free = [p for p in grid_params if p not in extents]
    if len(free) > 1:
        return None, None
    for trial in PROBE_EXTENTS.get(len(extents), []):
        values = {**base, **dict(zip(extents, trial))}
        programs = math.prod(trial)
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
    evaluator = Evaluator({**dict(zip(params[1:], values)), params[0]: np.arange(programs, dtype=np.int64)})
    body = func.body[1:] if ast.get_docstring(func) is not None else func.body
    try:
        for stmt in body[:-1]:
            evaluator.run(stmt)
        result = evaluator.expr(body[-1].value)
    except (Unsupported, *EVAL_ERRORS) as exc:
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
