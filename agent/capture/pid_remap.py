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

Program ids read elsewhere. A module-level ``@triton.jit`` function the kernel calls (directly or
not) that reads ``tl.program_id`` itself (``pid_m, pid_n = _tile_coords(n)``) is copied under a
fresh name, its reads replaced by generated functions that recompute the remapped id of their axis
(``<target>_program_id_<axis>()``), and the kernel calls the copy: the user's function stays as it
is for their other kernels. A call of a function named ``program_id`` from another module (FlagGems'
``tle.program_id(0)``, which returns ``tl.program_id(0)`` as int64) is read as the program id of its
axis, in the dtype it returns; the baseline's bitwise check confirms the kernel computes the same
outputs so. A function of another module that reads the program id under another name is not seen:
a candidate order then computes something else and is rejected (MISMATCH), never kept.
"""
from __future__ import annotations

import ast
import copy as copy_module
import math

from swizzleperf.agent.capture.lift_common import (Launch, Lifted, LiftError, axis_of, call_name, first_line, fresh,
                                                   linear_pid, missing_imports, module_level_functions,
                                                   names_in_use, replace_in_lines, top_level_names)
from swizzleperf.agent.capture.lift_eval import probe_problem
from swizzleperf.agent.verification.candidate import CandidateError, check_candidate
from swizzleperf.agent.verification.load import at_column, indent_of
from swizzleperf.sandbox.write_back import source_lines


def remap(tree: ast.Module, func: ast.FunctionDef, source: str, launch: Launch, why: str) -> Lifted:
    """The kernel with its program ids remapped through a generated identity target.

    Args:
        tree / func / source: the parsed module, the kernel's definition, the module's text.
        launch: the captured launch (its grid decides the target's tile grid).
        why: why the mapping was not lifted (kept in the notes).

    Raises:
        LiftError: the kernel reads no program id (nor do the functions it calls), the launch has
            one program, or a ``tl.program_id`` axis is not a constant.
    """
    helpers = helpers_reading_program_id(tree, func)
    calls = [n for n in ast.walk(func) if call_name(n) == "tl.program_id"]
    helper_reads = [n for n in ast.walk(func) if is_named_program_id(n)]
    if not calls and not helper_reads and not helpers:
        raise LiftError(f"cannot reorder {func.name}: it never reads tl.program_id, so every program does "
                        f"the same work and no order is different from another (the lift: {why})")
    grid = tuple(int(g) for g in launch.grid)
    if math.prod(grid) <= 1:
        raise LiftError(f"cannot reorder {func.name}: the captured launch has one program (grid "
                        f"{'x'.join(map(str, grid))}): nothing to reorder; capture a larger launch")
    helper_axes = [axis_of(c) + 1 for h in helpers for c in ast.walk(h) if _reads_program_id(c)]
    axes = max([len(grid)] + [axis_of(c) + 1 for c in calls + helper_reads] + helper_axes)
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
    lines = source_lines(source)   # as the AST numbers them (#41e)
    prologue = _prologue(name, ids, axes, two_d, in_use, indent_of(lines[body[0].lineno - 1], body[0].col_offset))
    renamed = {h.name: fresh(f"{h.name}_remapped", top_level_names(tree) | in_use | {name}) for h in helpers}
    taken = top_level_names(tree) | in_use | {name} | set(renamed.values())
    copies = _copies(helpers, renamed, name, axes, two_d, taken) if helpers else ""
    # a read through a function named program_id (another module's, e.g. FlagGems' `tle.program_id`)
    # becomes the remapped id in the dtype that function returns; the baseline's bitwise check then
    # confirms that the function returned the program id
    lines = replace_in_lines(lines, [(c, ids[axis_of(c)]) for c in calls]
                             + [(c, f"{ids[axis_of(c)]}.to({ast.unparse(c)}.dtype)") for c in helper_reads]
                             + [(n.func, renamed[n.func.id]) for n in ast.walk(func) if isinstance(n, ast.Call)
                                and isinstance(n.func, ast.Name) and n.func.id in renamed])
    at = body[0].lineno - 1
    lines[at:at] = [prologue]
    insert_at = first_line(func) - 1
    new_source = ("".join(lines[:insert_at]) + at_column(missing_imports(tree, target) + target + "\n\n" + copies,
                                                          indent_of(lines[func.lineno - 1], func.col_offset))
                  + "".join(lines[insert_at:]))
    probe_values, probe_grid = probe_problem(target, extents, {}, values)
    note = (f"the program ids are remapped, every tl.program_id of {func.name} read from the target's "
            f"(the tile mapping could not be lifted: {why})")
    if helpers:
        note += ("; the functions it calls that read the program id themselves run as remapped copies: "
                 + ", ".join(f"{h.name} (line {h.lineno}) as {renamed[h.name]}" for h in helpers))
    if helper_reads:
        note += ("; read as program ids too: " + ", ".join(f"`{ast.unparse(c)}` (line {c.lineno})" for c in helper_reads)
                 + ", each a function named program_id, read as the program id of its axis: the baseline's "
                   "bitwise check confirms the kernel computes the same outputs so (where that function permutes "
                   "the ids rather than returning them, the baseline is the identity order, not the kernel's)")
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


def is_named_program_id(node: ast.AST) -> bool:
    """A call of a function named ``program_id`` other than ``tl.program_id`` (``tle.program_id(0)``,
    an imported ``program_id(1)``) with a constant axis: read as the program id of that axis."""
    name = call_name(node)
    if name is None or name == "tl.program_id" or not (name == "program_id" or name.endswith(".program_id")):
        return False
    try:
        axis_of(node)
    except LiftError:
        return False
    return True


def _reads_program_id(node: ast.AST) -> bool:
    """``tl.program_id(axis)``, or a call ``is_named_program_id`` reads as one."""
    return call_name(node) == "tl.program_id" or is_named_program_id(node)


def helpers_reading_program_id(tree: ast.Module, func: ast.FunctionDef) -> list:
    """The module-level functions the kernel calls, directly or through one another, that read the
    program id themselves or call one that does (in the order of the module)."""
    functions = {n.name: n for n in module_level_functions(tree)}
    calls = {name: {n.func.id for n in ast.walk(f) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
                    and n.func.id in functions and n.func.id != name} for name, f in functions.items()}
    reachable, todo = set(), [func.name]
    while todo:
        for callee in calls.get(todo.pop(), ()):
            if callee not in reachable and callee != func.name:
                reachable.add(callee)
                todo.append(callee)
    reading = {name for name in reachable if any(_reads_program_id(n) for n in ast.walk(functions[name]))}
    while True:     # and those that reach one of them
        more = {name for name in reachable - reading if calls[name] & reading}
        if not more:
            break
        reading |= more
    return [f for f in module_level_functions(tree) if f.name in reading]


def _copies(helpers: list, renamed: dict, name: str, axes: int, two_d: bool, taken: set) -> str:
    """The source of the generated per-axis program-id functions (named clear of ``taken``) and of
    the helpers' copies.

    Raises:
        LiftError: a helper reads ``tl.program_id`` with an axis that is not a constant."""
    used_axes = sorted({axis_of(c) for h in helpers for c in ast.walk(h) if _reads_program_id(c)})
    ids = [f"pid_{a}" for a in range(axes)]
    functions = {a: fresh(f"{name}_program_id_{a}", taken) for a in used_axes}
    out = []
    for a in used_axes:
        prologue = _prologue(name, ids, axes, two_d, set(), "    ")
        out.append(f"@triton.jit\ndef {functions[a]}():\n    \"\"\"The remapped program id of axis {a} "
                   f"(generated by swizzleperf for the functions below).\"\"\"\n{prologue}    return {ids[a]}\n\n\n")

    def remapped_id(axis: int) -> ast.Call:
        return ast.Call(ast.Name(functions[axis], ast.Load()), [], [])

    class _Remap(ast.NodeTransformer):
        def visit_Call(self, node: ast.Call) -> ast.AST:
            self.generic_visit(node)
            if call_name(node) == "tl.program_id":
                return remapped_id(axis_of(node))
            if is_named_program_id(node):
                return ast.Call(ast.Attribute(remapped_id(axis_of(node)), "to", ast.Load()),
                                [ast.Attribute(node, "dtype", ast.Load())], [])
            if isinstance(node.func, ast.Name) and node.func.id in renamed:
                node.func = ast.Name(renamed[node.func.id], ast.Load())
            return node

    for helper in helpers:
        copy = _Remap().visit(copy_module.deepcopy(helper))
        copy.name = renamed[helper.name]
        out.append(ast.unparse(ast.fix_missing_locations(copy)) + "\n\n\n")
    return "".join(out)
