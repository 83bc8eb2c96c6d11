"""The fallback that always applies: remap the program ids themselves (agent/capture/lift.py calls it where
the program-id -> tile mapping cannot be lifted).

The kernel's first statement becomes a call of a generated rewrite target on the program's linear
id (axis 0 fastest, as the hardware issues programs), and every ``tl.program_id(axis)`` of the
kernel reads the remapped id of its axis instead; ``tl.num_programs`` is unchanged. At first the
target is the identity, so the kernel computes what it did; a candidate order is then any
permutation of the programs. That is correct for every kernel whose programs do not depend on the
order they are launched in (a spin-wait and a persistent loop were refused before:
agent/capture/lift_refuse.py), whatever the kernel does with its program ids afterwards (a stride
multiply, program ids read again deep in the address arithmetic, a data-dependent loop).

The target's tile grid, for the catalog's orders:

- a launch whose programs lie along axis 0 only (at the captured launch): 1-D,
  ``swizzle(pid, num_pids) -> pid``, over all programs;
- otherwise 2-D, ``swizzle(pid, num_pid_0, num_pid_1) -> (pid_0, pid_1)``: axis 0 by the others
  (axes 1 and 2 of a 3-D grid merged, axis 1 fastest), tiles numbered row-major, so the kernel's
  own order (axis 0 fastest) is the column-major one. The merge is kept (``Lifted.
  coordinate_splits``) so that the tracer fits a 3-D kernel's accesses in its three launch axes.

Unlike a lift, the target composes with the kernel's own mapping: an inline grouped order stays in
the kernel, applied after the remap.
"""
from __future__ import annotations

import ast
import math

from swizzleperf.agent.capture.lift_common import (Launch, Lifted, LiftError, axis_of, call_name, first_line, fresh,
                                                   linear_pid, missing_imports, names_in_use, replace_in_lines,
                                                   top_level_names)
from swizzleperf.agent.capture.lift_eval import probe_problem
from swizzleperf.agent.verification.candidate import CandidateError, check_candidate


def remap(tree: ast.Module, func: ast.FunctionDef, source: str, launch: Launch, why: str) -> Lifted:
    """The kernel with its program ids remapped through a generated identity target.

    Args:
        tree / func / source: the parsed module, the kernel's definition, the module's text.
        launch: the captured launch (its grid decides the target's tile grid).
        why: why the mapping was not lifted (kept in the notes).

    Raises:
        LiftError: the kernel reads no program id, a helper it calls reads one itself, the launch
            has one program, or a ``tl.program_id`` axis is not a constant.
    """
    _refuse_helpers(tree, func)
    calls = [n for n in ast.walk(func) if call_name(n) == "tl.program_id"]
    if not calls:
        raise LiftError(f"cannot reorder {func.name}: it never reads tl.program_id, so every program does "
                        f"the same work and no order is different from another (the lift: {why})")
    grid = tuple(int(g) for g in launch.grid)
    if math.prod(grid) <= 1:
        raise LiftError(f"cannot reorder {func.name}: the captured launch has one program (grid "
                        f"{'x'.join(map(str, grid))}): nothing to reorder; capture a larger launch")
    axes = max([len(grid)] + [axis_of(c) + 1 for c in calls])
    two_d = grid[0] > 1 and math.prod(grid[1:]) > 1
    body = func.body[1:] if ast.get_docstring(func, clean=False) is not None else func.body
    if not body or body[0].lineno == func.lineno:
        raise LiftError(f"cannot reorder {func.name}: its body starts on the line of its `def` (line "
                        f"{func.lineno}); put it on lines of its own")
    in_use = names_in_use(tree, func)
    ids = [fresh(f"pid_{a}", in_use) for a in range(axes)]
    name = fresh("swizzle", top_level_names(tree) | in_use)
    target, arg_names, extents, values, outputs = _target(name, grid, two_d)
    try:
        check_candidate(target, name, arg_names)
    except CandidateError as exc:   # a defect of ours: the target is generated here
        raise LiftError(f"cannot reorder {func.name}: the generated target is refused: {exc}") from None
    prologue = _prologue(name, ids, axes, two_d, in_use, " " * body[0].col_offset)
    lines = source.splitlines(keepends=True)
    lines = replace_in_lines(lines, [(c, ids[axis_of(c)]) for c in calls])
    at = body[0].lineno - 1
    lines[at:at] = [prologue]
    insert_at = first_line(func) - 1
    new_source = ("".join(lines[:insert_at]) + missing_imports(tree, target) + target + "\n\n"
                  + "".join(lines[insert_at:]))
    probe_values, probe_grid = probe_problem(target, extents, {}, values)
    note = (f"the program ids are remapped, every tl.program_id of {func.name} read from the target's "
            f"(the tile mapping could not be lifted: {why})")
    return Lifted(source=new_source, target_name=name, target_source=target, arg_names=arg_names,
                  extents=extents, arg_values=values, tile_grid=tuple(values), probe_values=probe_values,
                  probe_grid=probe_grid, outputs=outputs, lines=(body[0].lineno, body[0].lineno), notes=[note],
                  kind="remapped", coordinate_splits={1: grid[1]} if two_d and len(grid) == 3 else {})


def _target(name: str, grid: tuple, two_d: bool) -> tuple:
    """``(source, arg_names, extents, values at the launch, outputs)`` of the identity target."""
    doc = ("Program id -> the program whose work it does: the identity, the kernel's own order "
           "(generated by swizzleperf: the kernel's program ids are read from it).")
    if not two_d:
        source = f"@triton.jit\ndef {name}(pid, num_pids):\n    \"\"\"{doc}\"\"\"\n    return pid\n"
        return source, ["pid", "num_pids"], ["num_pids"], (math.prod(grid),), ["pid"]
    source = (f"@triton.jit\ndef {name}(pid, num_pid_0, num_pid_1):\n    \"\"\"{doc} Tiles: launch axis 0 "
              f"by the others.\"\"\"\n    pid_0 = pid % num_pid_0\n    pid_1 = pid // num_pid_0\n"
              f"    return pid_0, pid_1\n")
    return (source, ["pid", "num_pid_0", "num_pid_1"], ["num_pid_0", "num_pid_1"],
            (grid[0], math.prod(grid[1:])), ["pid_0", "pid_1"])


def _prologue(name: str, ids: list, axes: int, two_d: bool, in_use: set, indent: str) -> str:
    """The kernel's first lines: the target's call on the linear id, the per-axis ids from it."""
    counts = [f"tl.num_programs({a})" for a in range(axes)]
    if axes == 1:
        return f"{indent}{ids[0]} = {name}(tl.program_id(axis=0), tl.num_programs(0))\n"
    linear = fresh("linear_pid", in_use)
    out = [f"{linear} = {linear_pid(axes)}"]
    if two_d:
        rest = fresh("pid_rest", in_use)
        out += [f"{ids[0]}, {rest} = {name}({linear}, tl.num_programs(0), {' * '.join(counts[1:])})"]
        out += _split(rest, ids[1:], counts[1:])
    else:
        remapped = fresh("remapped_pid", in_use)
        out += [f"{remapped} = {name}({linear}, {' * '.join(counts)})"] + _split(remapped, ids, counts)
    return "".join(f"{indent}{line}\n" for line in out)


def _split(linear: str, ids: list, counts: list) -> list:
    """Statements de-linearising ``linear`` over ``counts`` (the first fastest) into ``ids``."""
    out = []
    for i, (name, count) in enumerate(zip(ids, counts)):
        below = " * ".join(counts[:i])
        value = f"{linear} // ({below})" if i > 1 else (f"{linear} // {below}" if i == 1 else linear)
        out.append(f"{name} = {value}" + (f" % {count}" if i < len(ids) - 1 else ""))
    return out


def _refuse_helpers(tree: ast.Module, func: ast.FunctionDef) -> None:
    """A module-level function the kernel calls (directly or not) that reads ``tl.program_id`` itself
    would not see the remap."""
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    seen, todo = {func.name}, [func]
    while todo:
        current = todo.pop()
        for node in ast.walk(current):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in functions:
                helper = functions[node.func.id]
                if helper.name in seen:
                    continue
                seen.add(helper.name)
                reader = next((n for n in ast.walk(helper) if call_name(n) == "tl.program_id"), None)
                if reader is not None:
                    raise LiftError(f"cannot reorder {func.name}: the function {helper.name} it calls (line "
                                    f"{node.lineno}) reads `{ast.unparse(reader)}` itself (line {reader.lineno}), "
                                    f"where a remap of the kernel's program ids does not reach")
                todo.append(helper)
