"""The kernels no reordering of programs may touch, found in the kernel's AST before anything else
is tried (agent/capture/lift.py): each refusal is one line naming the construct and its line.

- A **spin-wait**: a ``while`` loop whose condition reads memory that other programs write (an
  atomic, a volatile load): its programs wait on each other, so their order is not free.
- A **persistent loop**: a loop over work items that starts at the program id and steps by the
  program count, ``for tile in range(pid, num_tiles, tl.num_programs(0))`` (or by a constant whose
  value at the captured launch is the grid's size, ``NUM_SMS``), or the same written as a ``while``
  loop whose counter grows by such a step. One program computes several tiles; the order of its
  tiles is the kernel's own loop, which a block swizzle does not reach. Nothing else is
  persistent: a loop over data-dependent bounds (a CSR row, ``for i in range(row_start, row_end,
  BLOCK)`` with ``row_start = tl.load(indptr + row)``) or over a tile's K blocks is a loop *inside*
  one program's tile.
"""
from __future__ import annotations

import ast
import math

from swizzleperf.agent.capture.lift_common import (Launch, LiftError, call_name, derived, has_load, has_program_id,
                                                   reads, statement_text)
from swizzleperf.agent.capture.lift_eval import EVAL_ERRORS, Evaluator, Unsupported

RANGE_CALLS = frozenset({"range", "tl.range", "tl.static_range"})


def refuse_unorderable(func: ast.FunctionDef, launch: Launch) -> None:
    """Raise LiftError (one line: the first construct found, then the other kinds with their lines)
    for a spin-wait or a persistent loop in ``func``."""
    found = refusals(func, launch)
    if not found:
        return
    first = found[0]
    others = sorted({kind for _, kind, _ in found if kind != first[1]})
    also = "".join(f"; also a {kind} (line {next(l for l, k, _ in found if k == kind)})" for kind in others)
    raise LiftError(f"cannot reorder {func.name}: {first[2]}{also}")


def refusals(func: ast.FunctionDef, launch: Launch) -> list:
    """``(line, kind, message)`` of every spin-wait and persistent loop, by line."""
    # program-id-derived scalars, not through memory: a value loaded at a pid-derived address
    # (a CSR row's bounds) is data, not a position in the launch
    from_pid = derived(func, has_program_id, loop_targets=False, through_loads=False)
    counts = derived(func, lambda e: any(call_name(n) == "tl.num_programs" for n in ast.walk(e)),
                     loop_targets=False, through_loads=False)
    step = _GridStep(counts, launch)
    found = []
    for node in ast.walk(func):
        if isinstance(node, ast.While) and _waits(node.test):
            found.append((node.lineno, "spin-wait", f"a spin-wait `{statement_text(node)}` (line "
                          f"{node.lineno}): its programs wait on each other, so their order is not "
                          f"free to change"))
        elif isinstance(node, ast.While) and _persistent_while(node, from_pid, step):
            found.append((node.lineno, "persistent loop", f"a persistent kernel: `{statement_text(node)}` "
                          f"(line {node.lineno}) loops over work items from the program id by the "
                          f"program count, so one program computes several tiles"))
        elif isinstance(node, ast.For) and _persistent_for(node, from_pid, step):
            found.append((node.lineno, "persistent loop", f"a persistent kernel: the tile index comes "
                          f"from a loop over tiles `{statement_text(node)}` (line {node.lineno}) that "
                          f"starts at the program id and steps by the program count, so one program "
                          f"computes several tiles"))
    found.sort()
    return found


def _waits(test: ast.AST) -> bool:
    """A loop condition that reads what other programs write: an atomic or a volatile load."""
    for node in ast.walk(test):
        name = call_name(node) or ""
        if name.startswith("tl.atomic_"):
            return True
        if name == "tl.load" and any(k.arg == "volatile" and not (isinstance(k.value, ast.Constant)
                                                                  and not k.value.value) for k in node.keywords):
            return True
    return False


class _GridStep:
    """Whether an expression is the launch's program count: it reads ``tl.num_programs`` (or a
    name derived from it), or its value at the captured launch is the grid's program count or one
    of its sizes (a ``NUM_SMS`` the app sized the grid with)."""

    def __init__(self, counts: set, launch: Launch):
        self.counts, self.launch = counts, launch
        self.sizes = {math.prod(launch.grid), *launch.grid} - {1}

    def __call__(self, node: ast.AST) -> bool:
        if any(call_name(n) == "tl.num_programs" for n in ast.walk(node)) or reads(node) & self.counts:
            return True
        try:
            value = Evaluator({**self.launch.globals, **self.launch.values}).expr(node)
        except (Unsupported, *EVAL_ERRORS):
            return False
        return isinstance(value, int) and not isinstance(value, bool) and value in self.sizes


def _persistent_for(node: ast.For, from_pid: set, step: _GridStep) -> bool:
    if call_name(node.iter) not in RANGE_CALLS or len(node.iter.args) < 3:
        return False
    start, stride = node.iter.args[0], node.iter.args[2]
    return (has_program_id(start) or bool(reads(start) & from_pid)) and not has_load(start) and step(stride)


def _persistent_while(node: ast.While, from_pid: set, step: _GridStep) -> bool:
    """``while t < n: ... t += step`` with ``t`` from the program id and a grid-sized step."""
    counters = reads(node.test) & from_pid
    for inner in ast.walk(node):
        if (isinstance(inner, ast.AugAssign) and isinstance(inner.op, ast.Add)
                and isinstance(inner.target, ast.Name) and inner.target.id in counters and step(inner.value)):
            return True
        if (isinstance(inner, ast.Assign) and len(inner.targets) == 1 and isinstance(inner.targets[0], ast.Name)
                and inner.targets[0].id in counters and isinstance(inner.value, ast.BinOp)
                and isinstance(inner.value.op, ast.Add)
                and any(step(side) for side in (inner.value.left, inner.value.right))):
            return True
    return False
