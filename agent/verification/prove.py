"""The permutation proof: a rewrite target is a permutation of the tile grid on *every* grid the
kernel can be launched with, not only on the grids the probe samples (issue #41: orders that were
permutations except above 32 768 tiles, or only at 97 x 61, or except when ``num_pid_n == 50``,
passed the sampled probe, and ``--in-place`` wrote one of them).

The target is a small function of integer arithmetic (agent/verification/candidate.py checks what
it may hold), so its checked syntax tree translates into an SMT formula over symbolic grid extents
(z3, integer terms): for extents ``E_1 .. E_d`` with ``1 <= E_i <= MAX_EXTENT`` and ``T = E_1 ...
E_d <= MAX_PROGRAMS`` (every grid a launch can have: Triton's program ids are int32), z3 is asked
for a counterexample:

- *range*: a program ``p`` in ``[0, T)`` whose tile lies outside the grid;
- *collision*: two programs ``p != q`` that compute the same tile.

No counterexample (unsat) for both, on a finite set mapped into one of the same size, is a
bijection: **proven**. A model is a **counterexample** (grid, programs, tiles), which the worker
confirms by running the target itself at that grid before it rejects. Otherwise (z3 gives up
within the time budget, or the target uses what is not translated) the target is **not proven**:
the worker checks it exhaustively on every small grid and the written kernel guards itself
(:func:`guarded_source`).

Semantics. Integer terms are exact; int32 (int64 after ``.to(tl.int64)``) is kept exact by
*obligations* proven alongside: no intermediate leaves its width (Triton wraps), every ``//`` and
``%`` has a dividend >= 0 and a divisor > 0 (where truncation, Triton's and C's, equals the
floor of z3's integer division), every cast to a narrower type keeps the value. An obligation that
may fail leaves the target not proven (never a counterexample: a wrapped value may still land
right). Widths are Triton's (``_computation``): a Python int beside an int16 or int8 tensor is
computed in that narrow type (round twelve of #41: ``h * 300`` of an int16 was read as an int32
product, and an order that loses tiles past 112 640 programs was proven). Constants of
``tl.constexpr`` (parameters and names annotated with ``tl.constexpr`` itself, literals, a
``tl.static_range`` variable) fold with Python's own operators, as Triton's front end folds them;
a name assigned without that annotation, and a ``range`` variable, hold a tensor in Triton, so
their value is a term with a tensor's obligations, never folded. Loops of constant bounds unroll.

Decomposition. The catalog's XCD remaps write ``pid = <remap of pid>`` and then a 2-D order of the
new ``pid``. Where nothing after such a statement reads the old ``pid``, the proof splits there:
the remap a bijection of ``[0, T)``, then the rest on its own; z3 proves the parts in about a
second where the whole is out of its reach.
"""
from __future__ import annotations

import ast
import copy
import math
import textwrap
import time
from dataclasses import dataclass, field

MAX_PROGRAMS = 2 ** 31 - 1
#: Largest extent of one axis of a grid of two or more axes: 2^24 tiles are 2^31 elements at 128
#: elements a tile, past the int32 offsets of every bundled kernel (a 1-D grid: ``MAX_PROGRAMS``).
MAX_EXTENT = 1 << 24
#: z3's time for one target, seconds (all its queries together).
TIME_BUDGET_S = 20.0
MAX_UNROLL = 64
_INT = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}


class Unsupported(Exception):
    """What the target does that the translation does not cover (one line)."""


@dataclass
class Proof:
    """What the prover found.

    ``status``: ``"proven"``, ``"counterexample"`` or ``"unknown"``; ``statement``: one line for the
    report; for a counterexample, ``grid`` (extents), ``args`` (the target's arguments after the
    program id), ``programs`` (one program out of range, or two that collide) and ``tiles``."""

    status: str
    statement: str
    seconds: float
    grid: tuple = ()
    args: tuple = ()
    programs: tuple = ()
    tiles: tuple = ()
    detail: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {"status": self.status, "statement": self.statement, "seconds": round(self.seconds, 3),
                "grid": list(self.grid), "programs": list(self.programs),
                "tiles": [list(t) for t in self.tiles]}


@dataclass(frozen=True)
class Role:
    """How one argument after the program id follows the grid: ``"extent"`` (of axis ``value``),
    ``"count"`` (the number of tiles) or ``"held"`` (the constant ``value``)."""

    kind: str
    value: int = 0


def roles_of(real: list) -> list | None:
    """The roles of the target's arguments from the real sites (agent/verification/probe.py's
    ``Site``s): extents where an argument equals an extent at every site (probe.extent_positions),
    the tile count where it equals the product at every site of two grids at least, held where it
    is the same at every site of two grids at least, ``"unknown"`` otherwise (the proof is then not
    attempted, but a guard on the extents can still be written); None when the extents themselves
    cannot be told apart."""
    from swizzleperf.agent.verification.probe import extent_positions
    positions = extent_positions(real)
    if positions is None:
        return None
    base, grids = real[0], {s.grid for s in real}
    roles = []
    for i, value in enumerate(base.args):
        if i in positions:
            roles.append(Role("extent", positions.index(i)))
        elif len(grids) > 1 and all(s.args[i] == math.prod(s.grid) for s in real):
            roles.append(Role("count"))
        elif len(grids) > 1 and all(s.args[i] == value for s in real):
            roles.append(Role("held", int(value)))
        else:
            roles.append(Role("unknown"))
    return roles


# -- translation ----------------------------------------------------------------------------------

@dataclass
class _Int:
    """A symbolic integer: its z3 term and its width in bits (a signed integer tensor of Triton's)."""

    term: object
    width: int = 32


# -- Triton's integer promotion (triton/language/semantic.py, 3.6 and 3.9 alike) -----------------
#
# ``binary_op_type_checking_impl`` -> ``computation_type_impl``: a Python scalar (an int, a bool:
# a literal, a folded tl.constexpr, a tl.static_range variable, a constexpr argument) of a kind
# (bool < int) no higher than the tensor's does not take part in the promotion (3.6
# semantic.py:74, 3.9 semantic.py:81): the operation is computed in the *tensor's* type (``h * 300``
# of an int16 is an int16 product, which wraps), and the scalar must fit that type, else Triton
# raises "Scalar ... is out of range for type int16" (3.6 semantic.py:195, 3.9 semantic.py:204).
# Otherwise ``integer_promote_impl``: the wider of two of one signedness, the unsigned one where it
# is at least as wide. A Python int on its own is ``to_tensor_type``'s int32, uint32, int64 or
# uint64 by its value; int1 (a comparison, a bool) is unsigned (core.py's ``UINT_TYPES``). Shifts
# (``bitwise_op_type_checking_impl``), ``//``, ``%``, tl.where the same. Triton 3.6 converts the
# scalar of a comparison and of tl.minimum/maximum to a tensor first (3.6 core.py:1031, 2519:
# int32 beside an int16, where 3.9 keeps int16 and refuses 100000): the prover takes 3.9's
# narrower type and its range check there; where the check holds the values agree, and the
# narrower type's obligations imply the wider one's.

@dataclass(frozen=True)
class _Type:
    width: int
    signed: bool
    scalar: bool          # a Python int or bool, not (yet) a tensor

    @property
    def kind(self) -> int:  # tl.dtype.KIND: BOOLEAN (int1) < INTEGRAL
        return 0 if self.width == 1 else 1


def _promote(a: _Type, b: _Type) -> _Type:
    """semantic.integer_promote_impl."""
    if a.signed == b.signed:
        return a if a.width > b.width else b
    unsigned, signed = (a, b) if not a.signed else (b, a)
    return unsigned if unsigned.width >= signed.width else signed


def _computation(a: _Type, b: _Type) -> _Type:
    """semantic.computation_type_impl for two integers: a scalar of a kind no higher than the
    tensor's does not take part."""
    if a.scalar != b.scalar:
        scalar, tensor = (a, b) if a.scalar else (b, a)
        if scalar.kind <= tensor.kind:
            a = b = tensor
    return _promote(a, b)


def _fits(value: int, t: _Type) -> bool:
    low, high = (-2 ** (t.width - 1), 2 ** (t.width - 1)) if t.signed else (0, 2 ** t.width)
    return low <= value < high


class _Translator:
    """Symbolic evaluation of a checked rewrite target over z3 integer terms."""

    def __init__(self, z3, func: ast.FunctionDef, params: dict, cut: bool):
        self.z3, self.func, self.env, self.cut = z3, func, dict(params), cut
        self.pid = func.args.args[0].arg
        self.obligations: list = []          # (z3 Bool that must be unsatisfiable, what)
        self.stages: list = []               # [(input _Int, output _Int)] of each cut
        self.unrolled = 0

    # statements
    def run(self):
        body = self.func.body
        if ast.get_docstring(self.func, clean=False) is not None:
            body = body[1:]
        result = self._block(body, top=True)
        if result is None:
            raise Unsupported("the target returns nothing")
        return result

    def _block(self, body: list, top: bool):
        for stmt in body:
            if isinstance(stmt, ast.Return):
                if not top:
                    raise Unsupported(f"line {stmt.lineno}: return inside a loop")
                return self.value(stmt.value) if stmt.value is not None else None
            self._statement(stmt, top)
        return None

    def _statement(self, stmt, top: bool) -> None:
        if isinstance(stmt, (ast.Pass, ast.Expr)):
            if isinstance(stmt, ast.Expr) and not isinstance(stmt.value, ast.Constant):
                self.value(stmt.value)
            return
        if isinstance(stmt, ast.Assign):
            value = self._runtime(self.value(stmt.value))
            for target in stmt.targets:
                self._bind(target, value, top and len(stmt.targets) == 1)
        elif isinstance(stmt, ast.AnnAssign):
            if stmt.value is None:
                raise Unsupported(f"line {stmt.lineno}: annotation without a value")
            value = self.value(stmt.value)
            if not _is_constexpr(stmt.annotation):
                # Triton folds only where the annotation evaluates to tl.constexpr itself
                # (code_generator.visit_AnnAssign: ``annotation == constexpr``); a dtype annotation is a
                # plain assignment; anything else (a local named ``my_constexpr``...) is not translated
                if not _is_dtype(stmt.annotation):
                    raise Unsupported(f"line {stmt.lineno}: the annotation {ast.unparse(stmt.annotation)[:40]!r} "
                                      f"(only tl.constexpr is folded)")
                value = self._runtime(value)
            self._bind(stmt.target, value, top)
        elif isinstance(stmt, ast.AugAssign):
            load = ast.Name(stmt.target.id, ast.Load()) if isinstance(stmt.target, ast.Name) else None
            if load is None:
                raise Unsupported(f"line {stmt.lineno}: augmented assignment to {ast.unparse(stmt.target)}")
            self._bind(stmt.target, self._runtime(self._binop(stmt.op, self.value(load), self.value(stmt.value))),
                       False)
        elif isinstance(stmt, ast.For):
            self._loop(stmt)
        else:
            raise Unsupported(f"line {stmt.lineno}: {type(stmt).__name__}")

    def _runtime(self, value):
        """``value`` as Triton holds it once assigned to a name not annotated ``tl.constexpr``: a
        Python int becomes a tensor of int32 (int64 beyond int32's range), whose ``//`` and ``%``
        truncate and whose arithmetic wraps (code_generator's ``_sanitize_target_value`` ->
        ``semantic.to_tensor``; the interpreter the same): so from here on it is a term with the
        obligations of one, never folded with Python's floor division and unbounded integers
        (#41, round seven: ``c = -1; e = c // 2 + 1`` is 1 in Triton, 0 folded in Python). An int
        that only uint32 holds is not translated. A bool becomes an int1 tensor (a z3 Bool), whose
        arithmetic is int1's: ``c = True; d = -c`` is true (1 widened) in Triton, not -1."""
        if isinstance(value, tuple):
            return tuple(self._runtime(v) for v in value)
        if isinstance(value, bool):
            return self.z3.BoolVal(value)
        if not isinstance(value, int):
            return value
        if 2 ** 31 <= value < 2 ** 32:
            raise Unsupported(f"the constant {value}, which Triton holds as uint32")
        if not -2 ** 63 <= value < 2 ** 63:
            raise Unsupported(f"the constant {value}, beyond int64")
        return _Int(self.z3.IntVal(value), 32 if -2 ** 31 <= value < 2 ** 31 else 64)

    def _numeral(self, value) -> int | None:
        """The integer ``value`` is whatever the grid, a constant or a term of constants only, else None."""
        if isinstance(value, bool):
            return None
        if isinstance(value, int):
            return value
        if isinstance(value, _Int):
            term = self.z3.simplify(value.term)
            return term.as_long() if self.z3.is_int_value(term) else None
        return None

    def _bind(self, target, value, may_cut: bool) -> None:
        if isinstance(target, ast.Name):
            if may_cut and self.cut and target.id == self.pid and isinstance(value, _Int) and _stages(self.z3, value.term):
                fresh = _Int(self.z3.Int(f"stage{len(self.stages) + 1}"), value.width)
                self.stages.append((value, fresh))
                value = fresh
            self.env[target.id] = value
            return
        if isinstance(target, ast.Tuple) and isinstance(value, tuple) and len(value) == len(target.elts):
            for t, v in zip(target.elts, value):
                self._bind(t, v, False)
            return
        raise Unsupported(f"assignment to {ast.unparse(target)}")

    def _loop(self, stmt: ast.For) -> None:
        call = stmt.iter
        if (stmt.orelse or not isinstance(call, ast.Call) or ast.unparse(call.func) not in
                ("range", "tl.static_range") or not isinstance(stmt.target, ast.Name)):
            raise Unsupported(f"line {stmt.lineno}: a loop other than `for i in range(<constants>)`")
        bounds = [self._numeral(self.value(a)) for a in call.args]
        if any(b is None for b in bounds):
            raise Unsupported(f"line {stmt.lineno}: a loop whose bounds are not constants")
        # tl.static_range's variable is a constexpr; range's a tensor (an scf.for's int32 induction
        # variable), whose arithmetic is a tensor's (``_runtime``)
        static = ast.unparse(call.func) == "tl.static_range"
        try:  # a step of 0, bounds whose length leaves a C integer: refused, never raised
            steps = range(*bounds)
            self.unrolled += len(steps)
        except (TypeError, ValueError, OverflowError):
            raise Unsupported(f"line {stmt.lineno}: a loop over {ast.unparse(call)[:60]}") from None
        if self.unrolled > MAX_UNROLL:
            raise Unsupported(f"line {stmt.lineno}: loops of more than {MAX_UNROLL} steps in all")
        for i in steps:
            self.env[stmt.target.id] = i if static else self._runtime(i)
            self._block(stmt.body, top=False)

    # expressions
    def value(self, node):
        z3 = self.z3
        if isinstance(node, ast.Constant):
            if isinstance(node.value, (bool, int)):
                return node.value
            raise Unsupported(f"constant {node.value!r}")
        if isinstance(node, ast.Name):
            if node.id in self.env:
                return self.env[node.id]
            if node.id in ("True", "False"):
                return node.id == "True"
            raise Unsupported(f"name {node.id}")
        if isinstance(node, ast.Tuple):
            return tuple(self.value(e) for e in node.elts)
        if isinstance(node, ast.BinOp):
            return self._binop(node.op, self.value(node.left), self.value(node.right))
        if isinstance(node, ast.UnaryOp):
            return self._unary(node.op, self.value(node.operand))
        if isinstance(node, ast.BoolOp):
            operands = [self.value(v) for v in node.values]
            if not all(self._is_bool(v) for v in operands):
                # Python's and Triton's `and` / `or` give an operand, not its truth value: `1 and 2`
                # is 2, `0 or 3` is 3 (#41 round fourteen: read as 1, a wrong order was proven)
                if all(isinstance(v, int) for v in operands):
                    for v in operands[:-1]:
                        if bool(v) != isinstance(node.op, ast.And):
                            return v
                    return operands[-1]
                raise Unsupported(f"line {node.lineno}: `{ast.unparse(node)[:60]}` gives one of its "
                                  f"operands, not a truth value, and they are not all constants")
            values = [self._bool(v) for v in operands]
            if all(isinstance(v, bool) for v in values):
                return all(values) if isinstance(node.op, ast.And) else any(values)
            return (z3.And if isinstance(node.op, ast.And) else z3.Or)(*values)
        if isinstance(node, ast.Compare):
            left, parts = self.value(node.left), []
            for op, comparator in zip(node.ops, node.comparators):
                right = self.value(comparator)
                parts.append(self._compare(op, left, right))
                left = right
            if all(isinstance(p, bool) for p in parts):
                return all(parts)
            return parts[0] if len(parts) == 1 else z3.And(*[z3.BoolVal(p) if isinstance(p, bool) else p
                                                             for p in parts])
        if isinstance(node, ast.Call):
            return self._call(node)
        raise Unsupported(f"{type(node).__name__} ({ast.unparse(node)[:60]})")

    def _int(self, v, width: int | None = None) -> _Int:
        """``v`` as a term; a Python int or a boolean of width ``width`` where given (the width
        Triton computes in beside the other operand: :meth:`_operands`), else as
        ``semantic.to_tensor`` makes it (int32, int64 beyond; a boolean 32, widened as 0 or 1)."""
        z3 = self.z3
        if isinstance(v, _Int):
            return v
        if isinstance(v, bool):
            return _Int(z3.IntVal(int(v)), width or 32)
        if isinstance(v, int):
            return _Int(z3.IntVal(v), width or (32 if -2 ** 31 <= v < 2 ** 31 else 64))
        if isinstance(v, tuple):
            raise Unsupported("a tuple used as a number")
        return _Int(z3.If(v, z3.IntVal(1), z3.IntVal(0)), width or 32)   # a z3 Bool used as a number

    def _type_of(self, v) -> _Type:
        """The type Triton gives ``v`` in a binary operation (``semantic.to_tensor_type`` for a
        Python scalar)."""
        if isinstance(v, bool):
            return _Type(1, False, True)
        if isinstance(v, int):
            for width, signed in ((32, True), (32, False), (64, True), (64, False)):
                t = _Type(width, signed, True)
                if _fits(v, t):
                    return t
            raise Unsupported(f"the constant {v}, beyond 64 bits")
        if isinstance(v, _Int):
            return _Type(v.width, True, False)
        if isinstance(v, tuple):
            raise Unsupported("a tuple used as a number")
        return _Type(1, False, False)      # a z3 Bool: an int1 tensor

    def _operands(self, a, b, what: str) -> tuple:
        """``(x, y, width)``: ``a`` and ``b`` as terms of the width Triton computes ``what`` of them
        in (module comment above ``_Type``), a Python int or bool given the tensor's width.

        An int32 the grid alone decides (no program id in its term: an argument, arithmetic of
        arguments) may be a Python int in Triton although the prover holds it as a tensor: a caller
        may pass a constexpr, and Triton specialises an int argument equal to 1 into one (the
        interpreter: ``hi * (K * 300)`` of an int16 is an int16 product where K is a constexpr 1).
        Beside a narrower tensor it then takes that tensor's type: the narrower width is taken (its
        obligations hold for both) and the value must fit it.

        Raises:
            Unsupported: unsigned arithmetic; a scalar out of the range of the computation type
                (Triton raises); two booleans where a number is wanted."""
        ta, tb = self._type_of(a), self._type_of(b)
        common = _computation(ta, tb)
        if common.width == 1:
            raise Unsupported(f"{what} of two booleans (Triton computes it in int1, which wraps)")
        if not common.signed:
            raise Unsupported(f"{what} in uint{common.width} (a constant that only an unsigned type holds)")
        for v, t in ((a, ta), (b, tb)):
            if t.scalar and not _fits(int(v), common):
                raise Unsupported(f"the constant {v} beside an int{common.width} (Triton refuses it: "
                                  f"out of range)")
        width = common.width
        if isinstance(a, _Int) and isinstance(b, _Int) and a.width != b.width:
            wide, narrow = (a, b) if a.width > b.width else (b, a)
            if wide.width == 32 and not _stages(self.z3, wide.term):
                width = narrow.width
                self._result(wide.term, width, f"a value of the grid beside an int{width} (a Python int "
                                               f"to Triton where the caller passes a constexpr)")
        return self._int(a, width), self._int(b, width), width

    def _is_bool(self, v) -> bool:
        return isinstance(v, bool) or (not isinstance(v, (_Int, int, tuple)) and self.z3.is_bool(v))

    def _bool(self, v):
        if isinstance(v, bool) or not isinstance(v, (_Int, int)):
            return v
        if isinstance(v, int):
            return v != 0
        return v.term != 0

    def _result(self, term, width: int, what: str) -> _Int:
        low, high = -2 ** (width - 1), 2 ** (width - 1)
        self.obligations.append((self.z3.Or(term < low, term >= high), f"{what} overflows int{width}"))
        return _Int(term, width)

    def _binop(self, op, a, b):
        if isinstance(a, int) and isinstance(b, int) and not isinstance(a, bool) and not isinstance(b, bool):
            return _fold(op, a, b)
        if isinstance(op, (ast.BitAnd, ast.BitOr, ast.BitXor)) and (self._is_bool(a) or self._is_bool(b)):
            if not (self._is_bool(a) and self._is_bool(b)):
                raise Unsupported("a bitwise operation of a boolean and a number")
            a, b = (self.z3.BoolVal(x) if isinstance(x, bool) else x for x in (a, b))
            return {ast.BitAnd: self.z3.And, ast.BitOr: self.z3.Or, ast.BitXor: self.z3.Xor}[type(op)](a, b)
        # a comparison's result is an int1 tensor, and so is a bool constant beside it: Triton does
        # their arithmetic in int1, where 1 + 1 wraps to 0 (round nine of #41: `c + c - 2 * c` was -2
        # in Triton, 0 here, and an order that breaks at 40 000 tiles was proven): _operands refuses.
        # A Python int beside an int16 or int8 is computed in that type, and wraps there (round
        # twelve: `h * 300` of an int16 was read as an int32 product, and proven)
        x, y, width = self._operands(a, b, "arithmetic")
        if isinstance(op, ast.Add):
            return self._result(x.term + y.term, width, "a sum")
        if isinstance(op, ast.Sub):
            return self._result(x.term - y.term, width, "a difference")
        if isinstance(op, ast.Mult):
            return self._result(x.term * y.term, width, "a product")
        if isinstance(op, (ast.FloorDiv, ast.Mod)):
            if any(self._is_bool(v) and not isinstance(v, bool) for v in (a, b)):
                # an int1 tensor (unsigned) beside a signed type: computation_type_impl raises
                raise Unsupported("// or % of a boolean and a number (Triton refuses their mixed signedness)")
            return self._divmod(x, y, width, isinstance(op, ast.Mod))
        # a shift by the operand's width or more is undefined in Triton (poison in MLIR's arith, a
        # warning of Triton's front end; numpy in the interpreter gives 0): never proven
        n = self._numeral(b)
        if isinstance(op, (ast.LShift, ast.RShift)) and n is not None and 0 <= n < width:
            if isinstance(op, ast.LShift):
                return self._result(x.term * 2 ** n, width, "a shift")
            return self._divmod(x, self._int(2 ** n), width, False)
        if isinstance(op, ast.BitAnd) and n is not None and n > 0 and n & (n + 1) == 0:
            return self._divmod(x, self._int(n + 1), width, True)
        raise Unsupported(f"operator {type(op).__name__} on these operands")

    def _divmod(self, x: _Int, y: _Int, width: int, mod: bool) -> _Int:
        z3 = self.z3
        self.obligations.append((z3.Or(x.term < 0, y.term <= 0), "a dividend may be negative or a divisor not positive"))
        return _Int(x.term % y.term if mod else x.term / y.term, width)

    def _unary(self, op, v):
        if isinstance(op, ast.Not):
            b = self._bool(v)
            return (not b) if isinstance(b, bool) else self.z3.Not(b)
        if isinstance(v, int) and not isinstance(v, bool):
            return {ast.USub: lambda: -v, ast.UAdd: lambda: v, ast.Invert: lambda: ~v}[type(op)]()
        if not isinstance(v, (bool, _Int)) and self._is_bool(v):   # an int1 tensor: ~ is its not, - wraps
            if isinstance(op, ast.USub):
                raise Unsupported("the negation of a boolean (Triton computes it in int1, which wraps)")
            return self.z3.Not(v) if isinstance(op, ast.Invert) else v
        x = self._int(v)
        if isinstance(op, ast.UAdd):
            return x
        term = -x.term if isinstance(op, ast.USub) else -x.term - 1
        return self._result(term, x.width, "a negation")

    def _compare(self, op, a, b):
        if not isinstance(a, _Int) and not isinstance(b, _Int) and isinstance(a, int) and isinstance(b, int):
            return _fold_compare(op, a, b)
        # exact on the values; the computation type only for Triton 3.9's range check of a scalar
        # (3.6 widens it instead: never proven where they disagree), and two int1 compare as 0 and 1
        if self._is_bool(a) and self._is_bool(b):
            x, y = self._int(a).term, self._int(b).term
        else:
            x, y = (v.term for v in self._operands(a, b, "a comparison")[:2])
        return {ast.Lt: lambda: x < y, ast.LtE: lambda: x <= y, ast.Gt: lambda: x > y,
                ast.GtE: lambda: x >= y, ast.Eq: lambda: x == y, ast.NotEq: lambda: x != y}.get(
            type(op), lambda: (_ for _ in ()).throw(Unsupported(f"comparison {type(op).__name__}")))()

    def _select(self, cond, a, b, what: str = "tl.where"):
        """``tl.where(cond, a, b)`` (and tl.minimum/maximum, abs, which select): a tensor whatever
        its operands, of the type ``semantic.where``'s binary_op_type_checking_impl(a, b) gives, as
        arithmetic does (3.6 and 3.9); a condition known here picks without making it a constant
        (``tl.where(True, 200, h) * 300`` of an int16 h is an int16 product)."""
        cond = self._bool(cond)
        if self._is_bool(a) and self._is_bool(b):      # tl.where of two int1: an int1
            a, b = (self.z3.BoolVal(v) if isinstance(v, bool) else v for v in (a, b))
            return (a if cond else b) if isinstance(cond, bool) else self.z3.If(cond, a, b)
        x, y, width = self._operands(a, b, what)
        if isinstance(cond, bool):
            return _Int((x if cond else y).term, width)
        return _Int(self.z3.If(cond, x.term, y.term), width)

    def _call(self, node: ast.Call):
        name = ast.unparse(node.func)
        if node.keywords:
            raise Unsupported(f"keyword arguments of {name}")
        if isinstance(node.func, ast.Attribute) and node.func.attr == "to" and name.split(".")[0] not in ("tl", "triton"):
            return self._cast(self.value(node.func.value), node)
        args = [self.value(a) for a in node.args]
        if name in ("tl.minimum", "tl.maximum", "min", "max") and len(args) >= 2:
            smaller = name in ("tl.minimum", "min")
            if name in ("min", "max") and all(_both_const(v, 0) for v in args):
                return min(args) if smaller else max(args)    # builtin_min of constexprs: Python's
            # tl.minimum, and builtin min of anything not all constexpr, call semantic.minimum pair by
            # pair: a tensor even of two constants (whose type _select checks)
            out = args[0]
            for b in args[1:]:
                out = self._select(self._compare(ast.Lt() if smaller else ast.Gt(), out, b), out, b, name)
            return out
        if name == "tl.where" and len(args) == 3:
            return self._select(*args)
        if name == "tl.cdiv" and len(args) == 2:      # triton/language/standard.py: (x + (div - 1)) // div
            if _both_const(*args):
                # a @jit function: whether Triton hands back a constexpr or a tensor, the arithmetic of
                # a tensor with its obligations gives the value both do (never Python's -2 // 3)
                args = [self._runtime(a) for a in args]
            return self._binop(ast.FloorDiv(), self._binop(ast.Add(), args[0], self._binop(ast.Sub(), args[1], 1)),
                               args[1])
        if name == "triton.cdiv" and len(args) == 2:   # a constexpr function: (x + y - 1) // y
            return self._binop(ast.FloorDiv(), self._binop(ast.Sub(), self._binop(ast.Add(), args[0], args[1]), 1),
                               args[1])
        if name in ("abs", "tl.abs") and len(args) == 1:
            if _both_const(args[0], 0):
                # builtin abs of a constexpr is Python's; tl.abs makes a tensor of it first (math.abs)
                return abs(args[0]) if name == "abs" else self._runtime(args[0] if isinstance(args[0], bool)
                                                                         else abs(args[0]))
            return self._select(self._compare(ast.Lt(), args[0], 0), self._unary(ast.USub(), args[0]), args[0], name)
        raise Unsupported(f"call {name}({len(args)} arguments)")

    def _cast(self, v, node: ast.Call):
        dtype = ast.unparse(node.args[0]) if len(node.args) == 1 and not node.keywords else ""
        bits = _INT.get(dtype.removeprefix("tl.").removeprefix("triton.language."))
        if bits is None:
            raise Unsupported(f"cast {ast.unparse(node)[:60]} (only to a signed integer type)")
        x = self._int(v)
        if bits < x.width:
            return self._result(x.term, bits, f"a cast to int{bits}")
        return _Int(x.term, bits)


def _is_constexpr(annotation: ast.expr) -> bool:
    """Whether an annotation is Triton's ``tl.constexpr`` itself (by its node: a local whose name
    ends in "constexpr" is no such annotation to Triton, which compares the annotation's value)."""
    return ast.unparse(annotation) in ("tl.constexpr", "triton.language.constexpr")


def _is_dtype(annotation: ast.expr) -> bool:
    """``tl.int32`` and the like: an annotation Triton evaluates and then ignores (a plain assignment)."""
    text = ast.unparse(annotation)
    return any(text.startswith(prefix) and text.removeprefix(prefix) in _INT for prefix in ("tl.", "triton.language."))


def _both_const(a, b) -> bool:
    return all(isinstance(v, int) and not isinstance(v, _Int) for v in (a, b))


def _fold(op, a: int, b: int) -> int:
    ops = {ast.Add: lambda: a + b, ast.Sub: lambda: a - b, ast.Mult: lambda: a * b,
           ast.FloorDiv: lambda: a // b, ast.Mod: lambda: a % b, ast.LShift: lambda: a << b if b < 64 else None,
           ast.RShift: lambda: a >> b, ast.BitAnd: lambda: a & b, ast.BitOr: lambda: a | b,
           ast.BitXor: lambda: a ^ b, ast.Pow: lambda: a ** b if 0 <= b < 64 else None}
    if type(op) not in ops:
        raise Unsupported(f"operator {type(op).__name__} on constants")
    try:
        out = ops[type(op)]()
    except (ZeroDivisionError, ValueError):
        raise Unsupported("a constant expression that divides by zero") from None
    if out is None or abs(out) >= 2 ** 63:
        raise Unsupported("a constant expression beyond 64 bits")
    return out


def _fold_compare(op, a: int, b: int) -> bool:
    return {ast.Lt: a < b, ast.LtE: a <= b, ast.Gt: a > b, ast.GtE: a >= b, ast.Eq: a == b,
            ast.NotEq: a != b}[type(op)]


# -- the proof ------------------------------------------------------------------------------------

def prove_permutation(source: str, roles: list, ndim: int, budget_s: float = TIME_BUDGET_S) -> Proof:
    """Whether the rewrite target ``source`` (one ``@triton.jit`` function, checked by
    agent/verification/candidate.py) is a permutation of the tile grid on every grid of ``ndim``
    axes (extents ``1 .. MAX_EXTENT``, ``MAX_PROGRAMS`` tiles at most), its arguments after the
    program id following the grid as ``roles`` say (:class:`Role`). Never raises for a target it
    cannot translate: that is ``"unknown"`` with the reason."""
    started = time.monotonic()
    try:
        import z3
    except ImportError:
        return Proof("unknown", "not proven: z3 (z3-solver) is not installed", 0.0)
    func = next(n for n in ast.parse(textwrap.dedent(source)).body if isinstance(n, ast.FunctionDef))
    try:
        z3ctx = _Problem(z3, func, roles, ndim)
        proof = z3ctx.decomposed(started + budget_s) if z3ctx.has_cuts() else None
        if proof is None or proof.status != "proven":
            proof = z3ctx.whole(started + budget_s)
    except Unsupported as exc:
        return Proof("unknown", f"not proven: the prover does not translate {exc}", time.monotonic() - started)
    proof.seconds = time.monotonic() - started
    return proof


class _Problem:
    """The grid's symbols and domain, and the queries of one target."""

    def __init__(self, z3, func: ast.FunctionDef, roles: list, ndim: int):
        self.z3, self.func, self.roles, self.ndim = z3, func, roles, ndim
        if len(func.args.args) != len(roles) + 1:
            raise Unsupported(f"{len(func.args.args) - 1} arguments after the program id, {len(roles)} roles")
        self.extents = [z3.Int(f"extent{d}") for d in range(ndim)]
        self.tiles = math.prod(self.extents) if ndim > 1 else self.extents[0]
        bound = MAX_EXTENT if ndim > 1 else MAX_PROGRAMS
        self.domain = [e >= 1 for e in self.extents] + [e <= bound for e in self.extents] + [self.tiles <= MAX_PROGRAMS]

    def _params(self, pid) -> dict:
        params = {self.func.args.args[0].arg: _Int(pid, 32)}
        for arg, role in zip(self.func.args.args[1:], self.roles):
            constexpr = arg.annotation is not None and _is_constexpr(arg.annotation)
            if role.kind == "held" and constexpr:
                params[arg.arg] = role.value            # a compile-time constant: folded like one
                continue
            term = (self.extents[role.value] if role.kind == "extent" else self.tiles if role.kind == "count"
                    else self.z3.IntVal(role.value))
            params[arg.arg] = _Int(term, 32)
        return params

    def _translate(self, cut: bool):
        pid = self.z3.Int("pid")
        tr = _Translator(self.z3, self.func, self._params(pid), cut)
        out = tr.run()
        out = out if isinstance(out, tuple) else (out,)
        if len(out) != self.ndim:
            raise Unsupported(f"the target returns {len(out)} coordinates for a grid of {self.ndim} axes")
        return pid, tr, [tr._int(o) for o in out]

    def has_cuts(self) -> bool:
        try:
            return bool(self._translate(cut=True)[1].stages)
        except Unsupported:
            return False

    def _check(self, facts: list, deadline: float):
        solver = self.z3.Solver()
        solver.set("timeout", max(1, int((deadline - time.monotonic()) * 1000)))
        solver.add(*self.domain, *facts)
        verdict = solver.check()
        return verdict, (solver.model() if verdict == self.z3.sat else None)

    def _obligations(self, tr: _Translator, stage: int, pid, deadline: float):
        """'' when every obligation of ``stage`` holds for every program id, else what may fail."""
        z3 = self.z3
        mine = [(bad, what) for bad, what in tr.obligations if max(_stages(z3, bad), default=0) == stage]
        if not mine:
            return ""
        verdict, model = self._check([pid >= 0, pid < self.tiles, z3.Or(*[b for b, _ in mine])], deadline)
        if verdict == z3.unsat:
            return ""
        if verdict == z3.sat:
            failing = next(w for b, w in mine if z3.is_true(model.eval(b, model_completion=True)))
            return f"{failing} at {self._grid_text(model)}"
        return "z3 could not settle the int32 range and the signs of // and % in time"

    def decomposed(self, deadline: float) -> Proof | None:
        """Proof by the cuts at ``pid = ...`` (module docstring), or None where they do not apply."""
        z3 = self.z3
        pid, tr, out = self._translate(cut=True)
        inputs = [pid] + [fresh.term for _, fresh in tr.stages]
        outputs = [[value] for value, _ in tr.stages] + [out]
        for stage, (x, values) in enumerate(zip(inputs, outputs)):
            last = stage == len(tr.stages)
            if any(_stages(z3, v.term) - {stage} for v in values):
                return None    # a stage reads an earlier program id: no cut
            why = self._obligations(tr, stage, x, deadline)
            if why:
                return None
            limits = self.extents if last else [self.tiles]
            y = z3.Int(f"other{stage}")
            if not self._proven(x, y, [v.term for v in values], limits, deadline):
                return None
        return Proof("proven", self._proven_text(), 0.0, detail={"stages": len(inputs)})

    def _proven(self, x, y, values: list, limits: list, deadline: float) -> bool:
        z3 = self.z3
        inside = [x >= 0, x < self.tiles]
        outside = z3.Or(*[z3.Or(v < 0, v >= e) for v, e in zip(values, limits)])
        if self._check(inside + [outside], deadline)[0] != z3.unsat:
            return False
        others = [z3.substitute(v, (x, y)) for v in values]
        collide = [y >= 0, y < self.tiles, x != y] + [a == b for a, b in zip(values, others)]
        return self._check(inside + collide, deadline)[0] == z3.unsat

    def whole(self, deadline: float) -> Proof:
        z3 = self.z3
        pid, tr, out = self._translate(cut=False)
        values = [o.term for o in out]
        other = z3.Int("other")
        # counterexamples only where the integer terms are Triton's values (no obligation fails
        # there): a counterexample is then a real one; the obligations themselves are proven below
        exact = z3.Not(z3.Or(*[bad for bad, _ in tr.obligations])) if tr.obligations else z3.BoolVal(True)
        inside = [pid >= 0, pid < self.tiles, exact]
        outside = z3.Or(*[z3.Or(v < 0, v >= e) for v, e in zip(values, self.extents)])
        verdict, model = self._check(inside + [outside], deadline)
        if verdict == z3.sat:
            model = self._smaller(inside + [outside], model, deadline)
            return self._counterexample(model, [pid], values, "maps outside the grid")
        ranged = verdict == z3.unsat
        others = [z3.substitute(v, (pid, other)) for v in values]
        collide = [other >= 0, other < self.tiles, pid < other, z3.substitute(exact, (pid, other))] + [
            a == b for a, b in zip(values, others)]
        verdict, model = self._check(inside + collide, deadline)
        if verdict == z3.sat:
            model = self._smaller(inside + collide, model, deadline)
            return self._counterexample(model, [pid, other], values, "compute the same tile")
        why = self._obligations(tr, 0, pid, deadline) if verdict == z3.unsat and ranged else ""
        if verdict == z3.unsat and ranged and not why:
            return Proof("proven", self._proven_text(), 0.0)
        reason = why or f"z3 found neither a proof nor a counterexample within {TIME_BUDGET_S:.0f} s"
        return Proof("unknown", f"not proven: {reason}", 0.0)

    def _smaller(self, facts: list, model, deadline: float, rounds: int = 8):
        """A model of ``facts`` on a smaller grid where z3 finds one quickly (a counterexample at
        97 x 61 reads better than one at 16777216 x 2): the tile count halved while it can be."""
        z3 = self.z3
        for _ in range(rounds):
            tiles = model.eval(self.tiles, model_completion=True).as_long()
            if tiles <= 1:
                break
            verdict, smaller = self._check(facts + [self.tiles <= tiles // 2], min(deadline, time.monotonic() + 1.0))
            if verdict != z3.sat:
                break
            model = smaller
        return model

    def _counterexample(self, model, pids: list, values: list, what: str) -> Proof:
        z3 = self.z3
        grid = tuple(model.eval(e, model_completion=True).as_long() for e in self.extents)
        programs = tuple(model.eval(p, model_completion=True).as_long() for p in pids)
        tiles = tuple(tuple(model.eval(z3.substitute(v, (pids[0], z3.IntVal(p))), model_completion=True).as_long()
                            for v in values) for p in programs)
        args = tuple(grid[r.value] if r.kind == "extent" else math.prod(grid) if r.kind == "count" else r.value
                     for r in self.roles)
        shown = ", ".join(_tile_text(t) for t in tiles[:1])
        text = (f"programs {programs[0]} and {programs[1]} both compute tile {shown}" if len(programs) == 2 else
                f"program {programs[0]} maps to {shown}, outside the grid")
        return Proof("counterexample", f"not a permutation at grid {' x '.join(map(str, grid))} "
                                       f"({math.prod(grid)} programs): {text}", 0.0, grid, args, programs, tiles)

    def _grid_text(self, model) -> str:
        return "grid " + " x ".join(str(model.eval(e, model_completion=True)) for e in self.extents)

    def _proven_text(self) -> str:
        bound = (f"every extent up to {MAX_EXTENT}, " if self.ndim > 1 else "")
        return f"permutation proven for all grids ({bound}up to {MAX_PROGRAMS} programs; z3)"


def _stages(z3, term) -> set:
    """The stages whose input ``term`` reads: 0 for the program id ``pid``, k for ``stage<k>``."""
    found, seen, stack = set(), set(), [term]
    while stack:
        t = stack.pop()
        if t.get_id() in seen:
            continue
        seen.add(t.get_id())
        if z3.is_const(t) and t.decl().kind() == z3.Z3_OP_UNINTERPRETED:
            name = t.decl().name()
            if name == "pid":
                found.add(0)
            elif name.startswith("stage"):
                found.add(int(name[5:]))
        stack.extend(t.children())
    return found


def _tile_text(tile: tuple) -> str:
    return "(" + ", ".join(map(str, tile)) + ")" if len(tile) > 1 else str(tile[0])


# -- the guard ------------------------------------------------------------------------------------

def guard_condition(arg_names: list, roles: list, box: int, real_grids: list) -> str:
    """The scalar condition under which a target not proven runs its new order: every extent at
    most ``box`` (the grids checked exhaustively) or the grid one of ``real_grids``."""
    extent_of = {r.value: arg_names[i + 1] for i, r in enumerate(roles) if r.kind == "extent"}
    dims = sorted(extent_of)
    parts = ["(" + " & ".join(f"({extent_of[d]} <= {box})" for d in dims) + ")"] if box else []
    for grid in real_grids:
        parts.append("(" + " & ".join(f"({extent_of[d]} == {int(grid[d])})" for d in dims) + ")")
    return " | ".join(parts) or "False"


def guarded_source(new_source: str, own_source: str, name: str, condition: str, note: str) -> str:
    """A rewrite target that computes the order of ``new_source`` where ``condition`` holds (a
    scalar condition on the grid: the grids proven or checked) and the kernel's own order
    (``own_source``) elsewhere: both bodies inlined with their locals renamed, the result chosen by
    ``tl.where`` on the scalar condition (a few integer instructions per program; the checker allows
    no ``if``, and a call to another function could not be spliced). The result is a candidate like
    any other (agent/verification/candidate.py checks it).

    Raises:
        Unsupported: a body that does not end in its only ``return``.
    """
    new = _function(new_source)
    own = _function(own_source)
    params = [a.arg for a in new.args.args]
    body: list = [ast.Expr(ast.Constant(note))]
    outs = []
    for prefix, func in (("new", new), ("own", own)):
        statements, values = _inlined(func, prefix, params)
        body += statements
        outs.append(values)
    if len(outs[0]) != len(outs[1]):
        raise Unsupported("the two orders return different numbers of coordinates")
    body.append(ast.parse(f"use_new = {condition}").body[0])
    chosen = [ast.parse(f"tl.where(use_new, {a}, {b})", mode="eval").body for a, b in zip(*outs)]
    body.append(ast.Return(ast.Tuple(chosen, ast.Load()) if len(chosen) > 1 else chosen[0]))
    func = copy.deepcopy(new)
    func.body = body
    return "@triton.jit\n" + ast.unparse(ast.fix_missing_locations(
        ast.FunctionDef(name, func.args, body, [], None, None, type_params=[]))) + "\n"


def _function(source: str) -> ast.FunctionDef:
    return next(n for n in ast.parse(textwrap.dedent(source)).body if isinstance(n, ast.FunctionDef))


def _inlined(func: ast.FunctionDef, prefix: str, params: list) -> tuple:
    """``(statements, result names)``: the body with every local and every parameter it assigns
    renamed ``<prefix>_<name>`` (an assigned parameter first copied), its return bound to names."""
    body = func.body[1:] if ast.get_docstring(func, clean=False) is not None else list(func.body)
    if not body or not isinstance(body[-1], ast.Return) or any(
            isinstance(n, ast.Return) for stmt in body[:-1] for n in ast.walk(stmt)):
        raise Unsupported(f"the {prefix} order does not end in its only return")
    own_params = [a.arg for a in func.args.args]
    stored = {n.id for stmt in body for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    renamed = {n: f"{prefix}_{n}" for n in stored} | {p: q for p, q in zip(own_params, params) if p not in stored}
    copies = [ast.parse(f"{prefix}_{q} = {p}").body[0] for q, p in zip(own_params, params) if q in stored]

    class _Rename(ast.NodeTransformer):
        def visit_Name(self, node: ast.Name) -> ast.Name:
            return ast.copy_location(ast.Name(renamed.get(node.id, node.id), node.ctx), node)

    statements = [_Rename().visit(copy.deepcopy(s)) for s in body[:-1]]
    returned = _Rename().visit(copy.deepcopy(body[-1].value))
    elts = returned.elts if isinstance(returned, ast.Tuple) else [returned]
    names = [f"{prefix}_out{i}" for i in range(len(elts))]
    bind = ast.Assign([ast.Tuple([ast.Name(n, ast.Store()) for n in names], ast.Store())],
                      ast.Tuple(elts, ast.Load())) if len(elts) > 1 else ast.Assign([ast.Name(names[0], ast.Store())], elts[0])
    return copies + statements + [bind], names


# -- in the worker: the proof, its counterexample run, the exhaustive check and the guard ---------

#: Largest extent of the grids checked exhaustively where the proof does not settle a target, per
#: number of axes (about 0.3-0.5 million tile indices, a second or two interpreted).
GUARD_BOX = {1: 1024, 2: 32, 3: 8}
GUARD_BOX_MORE_DIMS = 4


def every_grid(module, target: str, source: str, real: list, reference_path: str | None,
               what: str = "swizzle") -> dict:
    """The worker's check of ``module``'s rewrite target ``target`` (its text ``source``) on every
    grid (module docstring), given the ``real`` sites (agent/verification/probe.py's ``Site``s):

    - proven: ``{"proof": ..., "scope": "permutation proven for all grids ..."}``;
    - a counterexample that the target, run at that grid, reproduces (and where the kernel's own
      target at ``reference_path`` is a permutation): NOT_PERMUTATION naming grid, programs, tile;
    - otherwise every grid up to ``GUARD_BOX`` per axis is probed, and the result carries the
      ``guard``: the new order is to run on those grids and the real ones only.

    Raises:
        StageFailure: NOT_PERMUTATION (a counterexample, or a grid of the box), RUNTIME_ERROR where
            the target raised at a grid of the box.
    """
    from swizzleperf.agent.verification import probe
    from swizzleperf.agent.verification.stages import StageFailure
    ndim = len(real[0].grid)
    roles = roles_of(real)
    if roles is None or any(r.kind == "unknown" for r in roles):
        proof = Proof("unknown", "not proven: how the target's arguments follow the grid cannot be told from "
                                 "the kernel's problems", 0.0)
    else:
        proof = prove_permutation(source, roles, ndim)
    held = ", ".join(f"{name} = {r.value}" for name, r in zip(_arg_names(source)[1:], roles or [])
                     if r.kind == "held")
    if proof.status == "counterexample":
        site = probe.Site(proof.grid, proof.args, f"grid {'x'.join(map(str, proof.grid))}", real=False)
        if _reproduced(module, target, site, proof) and _reference_fine(reference_path, site, proof):
            raise StageFailure("NOT_PERMUTATION", f"{what} is not a permutation at grid "
                                                  f"{' x '.join(map(str, proof.grid))} ({math.prod(proof.grid)} programs), "
                                                  f"a grid the kernel may be launched with (found by the proof "
                                                  f"over every grid, z3): {proof.statement.split(': ', 1)[1]}")
        proof = Proof("unknown", f"not proven: the proof's counterexample at grid "
                                 f"{' x '.join(map(str, proof.grid))} is not one when the target runs "
                                 f"(or the kernel's own order fails there too)", proof.seconds)
    if proof.status == "proven":
        return {"proof": proof.as_dict(), "scope": proof.statement + (f", {held} as at every problem" if held else ""),
                "guard": None}
    box, grids = _checked_box(module, target, real, roles, reference_path)
    scope = (f"{proof.statement}; checked exhaustively on every grid up to {box} per axis and at the "
             f"kernel's problems; guarded beyond (the kernel's own order runs there)" if box else
             f"{proof.statement}; checked at the kernel's problems only; guarded beyond")
    return {"proof": proof.as_dict(), "scope": scope,
            "guard": {"box": box, "real_grids": grids, "roles": [[r.kind, r.value] for r in roles or []]}}


def _arg_names(source: str) -> list:
    return [a.arg for a in _function(source).args.args]


def _reproduced(module, target: str, site, proof: Proof) -> bool:
    """The target, run under the interpreter at the counterexample's grid, maps its programs as the
    proof says (two programs to one tile, or one outside the grid)."""
    from swizzleperf.agent.verification import probe
    try:
        tiles = probe.probe_programs(module, target, site, list(proof.programs))
    except probe.ProbeError:
        return False
    if len(proof.programs) == 2:
        return bool((tiles[0] == tiles[1]).all())
    return not bool(((tiles[0] >= 0) & (tiles[0] < site.grid)).all())


def _reference_fine(reference_path: str | None, site, proof: Proof) -> bool:
    """Whether the kernel's own target (the module at ``reference_path``) does not fail where the
    counterexample does (no reference: the counterexample stands)."""
    if not reference_path:
        return True
    from swizzleperf.agent.verification import probe
    from swizzleperf.agent.verification.load import load_kernel
    from swizzleperf.kernels.spec import KernelLoadError
    try:
        ref_module, ref_spec = load_kernel(reference_path)
        tiles = probe.probe_programs(ref_module, ref_spec.rewrite_target, site, list(proof.programs))
    except (KernelLoadError, probe.ProbeError):
        return True
    inside = ((tiles >= 0) & (tiles < site.grid)).all(axis=1)
    return bool(inside.all()) and (len(tiles) < 2 or not (tiles[0] == tiles[1]).all())


def _checked_box(module, target: str, real: list, roles: list | None, reference_path: str | None) -> tuple:
    """``(box, real grids)``: every grid up to ``box`` tiles per axis probed (0 where the grids
    cannot be synthesised: the roles are unknown, or the kernel's own order fails in the box too).

    Raises:
        StageFailure: NOT_PERMUTATION at a grid of the box, RUNTIME_ERROR where the target raised.
    """
    from swizzleperf.agent.verification import probe
    from swizzleperf.agent.verification.stages import StageFailure
    ndim = len(real[0].grid)
    grids = sorted({tuple(int(g) for g in s.grid) for s in real})
    if roles is None or any(r.kind == "unknown" for r in roles):
        return 0, [list(g) for g in grids]
    box = GUARD_BOX.get(ndim, GUARD_BOX_MORE_DIMS)
    sites = []
    for grid in probe._grids(ndim, box):
        args = tuple(grid[r.value] if r.kind == "extent" else math.prod(grid) if r.kind == "count" else r.value
                     for r in roles)
        sites.append(probe.Site(grid, args, f"grid {'x'.join(map(str, grid))}", real=False))
    try:
        coords = probe.probe_sites(module, target, sites)
        if reference_path:
            from swizzleperf.agent.verification.load import load_kernel
            ref_module, ref_spec = load_kernel(reference_path)
            ref = probe.probe_sites(ref_module, ref_spec.rewrite_target, sites)
            if not all(probe.is_permutation(c, s.grid) for c, s in zip(ref, sites)):
                return 0, [list(g) for g in grids]
    except probe.ProbeError as exc:
        raise StageFailure("RUNTIME_ERROR", str(exc)) from None
    for site, c in zip(sites, coords):
        message = probe.permutation_errors(c, site.grid)
        if message:
            raise StageFailure("NOT_PERMUTATION", f"swizzle is not a permutation at {site.label} "
                                                  f"({math.prod(site.grid)} programs), a grid the kernel may be "
                                                  f"launched with (every grid up to {box} per axis is checked "
                                                  f"where the proof does not settle the order): {message}")
    return box, [list(g) for g in grids]
