"""Lift a kernel's program-id -> tile mapping into a rewrite target, by AST (issues #15, #24).

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
(``Evaluator``, agent/capture/lift_eval.py), never from running the user's code here: it finds the
extents, checks that the kernel's own mapping is one tile per program at the captured launch, and
finds a *permutation-only problem* (other extents, a program count that is not a multiple of 8) at
which the target is probed but the kernel never launched.

Where the mapping cannot be lifted (control flow inside it, the program id read again after it,
a mapping that is not one tile per program at the captured launch, a stride multiply...), the
program ids themselves are remapped instead (agent/capture/pid_remap.py), which is correct for any kernel
whose programs are independent of their launch order; the reason the lift failed is kept in the
notes. Refused before either is tried (agent/capture/lift_refuse.py): a spin-wait and a persistent loop.

The pieces: agent/capture/lift_common.py (types, AST and text helpers), agent/capture/lift_eval.py
(the evaluator, a target's order, the permutation-only problem), agent/capture/lift_refuse.py,
agent/capture/pid_remap.py.
"""
from __future__ import annotations

import ast
import math
import textwrap
from dataclasses import dataclass

import numpy as np

from swizzleperf.agent.capture.lift_common import (Launch, Lifted, LiftError, assigned, axis_of, call_name, derived,
                                                   first_line, fresh, has_load, has_program_id, kernel_function,
                                                   linear_pid, missing_imports, names_in_use, params, reads, segment,
                                                   statement_text, text, top_level_names)
from swizzleperf.agent.capture.lift_eval import (EVAL_ERRORS, Evaluator, Unsupported, probe_problem, program_ids,
                                                 target_order)
from swizzleperf.agent.capture.lift_refuse import refuse_unorderable
from swizzleperf.agent.capture.pid_remap import helpers_reading_program_id, is_named_program_id, remap
from swizzleperf.agent.verification.candidate import CandidateError, check_candidate
from swizzleperf.agent.verification.load import at_column, indent_of
from swizzleperf.sandbox.write_back import source_lines

__all__ = ["Launch", "Lifted", "LiftError", "lift", "target_order"]

# Calls a scalar statement of the mapping may make (names as written, ``triton.language.`` -> ``tl.``).
SCALAR_CALLS = frozenset({
    "tl.program_id", "tl.num_programs", "tl.cdiv", "triton.cdiv", "tl.minimum", "tl.maximum",
    "tl.where", "tl.abs", "min", "max", "abs", "tl.multiple_of", "tl.max_contiguous", "tl.umulhi",
})
HINTS = frozenset({"tl.assume", "tl.static_assert", "tl.device_assert", "tl.static_print",
                   "tl.device_print", "tl.debug_barrier"})
BUILTIN_NAMES = frozenset({"tl", "triton", "min", "max", "abs", "range", "True", "False", "None"})


# -- the region ----------------------------------------------------------------------------------

def _is_scalar_expr(node: ast.AST, tensors: set) -> bool:
    for n in ast.walk(node):
        if isinstance(n, ast.Name) and n.id in tensors:
            return False
        if isinstance(n, ast.Call):
            name = call_name(n)
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
    return isinstance(stmt, ast.Expr) and call_name(stmt.value) in HINTS


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
            if has_program_id(stmt) or reads(stmt.value) & pid_names:
                pid_names |= set(assigned(stmt))
                moved.append(stmt)
            continue
        if _is_hint(stmt):
            hints.append(stmt)
            continue
        if (reads(stmt) & pid_names or has_program_id(stmt)
                or isinstance(stmt, (ast.If, ast.For, ast.While, ast.With, ast.Return, ast.Try))):
            end = i
            break
        tensors |= set(assigned(stmt))
    if not any(has_program_id(s) for s in moved):
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
            if call_name(node) == "tl.program_id":
                raise LiftError(f"cannot lift {func.name}: `{text(node)}` (line {node.lineno}) reads "
                                f"the program id again after the mapping (which ends at line "
                                f"{_last_line(region)}): every tile coordinate must come from the mapping")
        reassigned = set(assigned(stmt)) & set(outputs)
        if isinstance(stmt, (ast.If, ast.While)) and reassigned:
            data = reads(stmt.test) & loaded or has_load(stmt.test)
            kind = "data-dependent control flow" if data else "control flow"
            raise LiftError(f"cannot lift {func.name}: {kind} in the program-id mapping: "
                            f"`{statement_text(stmt)}` (line {stmt.lineno}) assigns "
                            f"{', '.join(sorted(reassigned))}; write the mapping with tl.where to lift it")
        if reassigned:
            raise LiftError(f"cannot lift {func.name}: the tile coordinate {sorted(reassigned)[0]} is "
                            f"assigned again at line {stmt.lineno}, after the mapping (which ends at "
                            f"line {_last_line(region)})")


def _loaded_names(func: ast.FunctionDef) -> set:
    """Names whose value derives from memory (``tl.load``, atomics), through assignments."""
    return derived(func, has_load, loop_targets=False)


def _last_line(region: _Region) -> int:
    return max(s.end_lineno for s in region.statements)


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
    kernel_names = [s for stmt in region.statements if stmt not in region.moved for s in assigned(stmt)]
    candidates = [n for n in dict.fromkeys(kernel_names + params(func) + list(launch.globals))
                  if isinstance(env.get(n), (int, np.integer)) and not isinstance(env.get(n), bool)]
    sub_expressions = _pid_free_calls(region, env)
    values = env
    chosen: list = [None] * len(outputs)
    taken: set = set()
    for i, out in enumerate(outputs):   # the launch axes first: exact and certain
        for axis, ids in enumerate(program_ids(grid)):
            if np.array_equal(np.broadcast_to(values[out], ids.shape), ids) and axis not in taken:
                chosen[i] = _Extent(f"tl.num_programs({axis})", fresh(f"num_{out}", names_in_use), grid[axis], axis)
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
            if value == extent and text(node) not in taken:
                chosen[i] = _Extent(text(node), fresh(f"num_{out}", names_in_use), extent, None, node)
                taken.add(text(node))
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
            chosen[i] = _Extent(f"tl.num_programs({axis}) // {divisor}", fresh(f"num_{outputs[i]}", names_in_use),
                                grid[axis] // product, None)
            missing = []
    if missing:
        out = outputs[missing[0]]
        raise LiftError(f"cannot lift {func.name}: the tile coordinate {out} spans 0..{int(np.max(values[out]))} "
                        f"at the captured launch, and no name, sub-expression or tl.num_programs of the "
                        f"kernel has the value {int(np.max(values[out])) + 1} (give it a name before the "
                        f"mapping, e.g. num_{out} = tl.cdiv(...))")
    return chosen, notes


def _pid_free_calls(region: _Region, env_after: dict) -> list:
    """``(node, value)`` of the calls inside the moved statements that read no program-id-derived
    name (``tl.cdiv(N, BLOCK_N)`` written inline), evaluated at the captured launch."""
    out = []
    for stmt in region.moved:
        for node in ast.walk(stmt.value):
            if (isinstance(node, ast.Call) and not has_program_id(node) and not reads(node) & region.pid_names
                    and call_name(node) in ("tl.cdiv", "triton.cdiv", "min", "max", "tl.minimum", "tl.maximum")):
                try:
                    value = Evaluator(env_after).expr(node)
                except (Unsupported, TypeError, ValueError):
                    continue
                if np.ndim(value) == 0 and not isinstance(value, bool):
                    out.append((node, int(value)))
    return out


# -- the lift ------------------------------------------------------------------------------------

def lift(source: str, kernel_name: str, launch: Launch, filename: str = "kernel.py") -> Lifted:
    """Make ``kernel_name`` in ``source`` (the module's text) reorderable: lift its program-id ->
    tile mapping into a rewrite target where it can be lifted, else remap its program ids
    (agent/capture/pid_remap.py; ``Lifted.kind`` says which, ``Lifted.notes`` why).

    Raises:
        LiftError: one line naming the construct and its line: a spin-wait or a persistent loop
            (agent/capture/lift_refuse.py), or what stops the remap as well (no program id read, a
            launch of one program).
    """
    tree = ast.parse(source, filename=filename)
    func = kernel_function(tree, kernel_name, filename, launch.line)
    refuse_unorderable(func, launch)
    elsewhere = ([f"{h.name} (line {h.lineno})" for h in helpers_reading_program_id(tree, func)]
                 + [f"`{ast.unparse(n)}` (line {n.lineno})" for n in ast.walk(func) if is_named_program_id(n)])
    if elsewhere:   # a lifted mapping would leave those reads in the kernel's own order
        return remap(tree, func, source, launch, "the program id is also read through " + ", ".join(elsewhere))
    try:
        return lift_mapping(tree, func, source, launch)
    except LiftError as exc:
        why = str(exc).removeprefix(f"cannot lift {kernel_name}: ")
    except Exception as exc:  # noqa: BLE001 -- a construct the lift does not know: the remap takes any kernel
        why = f"the lift stopped at a construct it does not know ({type(exc).__name__}: {exc})"
    return remap(tree, func, source, launch, why)


def lift_mapping(tree: ast.Module, func: ast.FunctionDef, source: str, launch: Launch) -> Lifted:
    """The lift proper (the module docstring); LiftError where the mapping cannot be lifted."""
    kernel_name = func.name
    region = _region(func, launch.pointers)
    after_reads = set().union(*[reads(s) for s in region.body[region.end:]])
    outputs = list(dict.fromkeys(n for s in region.moved for n in assigned(s) if n in after_reads))
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
    in_use = names_in_use(tree, func)
    extents, notes = _pick_extents(func, region, outputs, env, launch, in_use)
    lines = source_lines(source)   # as the AST numbers them (#41e)
    target = _build_target(tree, func, region, outputs, extents, launch, pid_stmt, in_use, lines)
    try:
        check_candidate(target["source"], target["name"], target["params"])
    except CandidateError as exc:
        raise LiftError(f"cannot lift {kernel_name}: the mapping (lines {region.statements[0].lineno}-"
                        f"{_last_line(region)}) is not an acceptable rewrite target: {exc}") from None
    arg_values = _arg_values(target, extents, env, launch)
    probe_values, probe_grid = probe_problem(target["source"], [e.param for e in extents], target["grid_params"],
                                             arg_values)
    new_source, kernel_notes = _rewrite_module(tree, lines, func, region, target, outputs, extents, pid_stmt,
                                               len(launch.grid), in_use)
    return Lifted(source=new_source, target_name=target["name"], target_source=target["source"],
                  arg_names=target["params"], extents=[e.param for e in extents], arg_values=arg_values,
                  tile_grid=tuple(e.value for e in extents), probe_values=probe_values,
                  probe_grid=probe_grid, outputs=outputs,
                  lines=(region.statements[0].lineno, _last_line(region)), notes=notes + kernel_notes)


def _refuse_intermediates(func, region: _Region, outputs: list) -> None:
    """A name the mapping derives the coordinates from (the program id itself, say) must not be
    read after it: the swizzle would change the coordinates and leave that name as it was."""
    for out in outputs:
        readers = [s for s in region.moved if out in reads(s.value)]
        if readers and len(outputs) > 1:
            where = next(s.lineno for s in region.body[region.end:] if out in reads(s))
            defining = next(s for s in region.moved if out in assigned(s))
            what = "the program id" if call_name(getattr(defining, "value", None)) == "tl.program_id" else "the mapping's intermediate"
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
                and call_name(stmt.value) == "tl.program_id" and axis_of(stmt.value) == 0
                and stmt.targets[0].id not in outputs):
            return stmt
    return None


def _evaluate_region(func, region: _Region, launch: Launch) -> dict:
    """Every name of the region at the captured launch (vectors over the programs where they
    derive from the program id)."""
    evaluator = Evaluator({**launch.globals, **launch.values}, tuple(launch.grid))
    for stmt in region.statements:
        try:
            evaluator.run(stmt)
        except Unsupported as exc:
            raise LiftError(f"cannot lift {func.name}: cannot evaluate {exc} (line {stmt.lineno}) of the "
                            f"mapping at the captured launch") from None
        except EVAL_ERRORS as exc:
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
        targets = set(assigned(stmt))
        if targets & needed and not targets <= extent_names:
            keep.append(stmt)
            needed |= reads(stmt.value) | (targets if isinstance(stmt, ast.AugAssign) else set())
    keep.reverse()
    inner = {n for s in keep for n in assigned(s)}
    taken = names_in_use | inner
    if pid_stmt is not None:
        pid_name = pid_stmt.targets[0].id
    else:
        pid_name = "pid" if "pid" not in inner | {e.param for e in extents} else fresh("linear_pid", taken)
    grid_params = {e.param: e.axis for e in extents if e.axis is not None}
    axis_param = {axis: p for p, axis in grid_params.items()}
    ndim = len(launch.grid)

    def grid_param(axis: int) -> str:
        if axis not in axis_param:
            axis_param[axis] = fresh(f"num_programs_{axis}", taken)
            grid_params[axis_param[axis]] = axis
        return axis_param[axis]

    by_expression = {ast.dump(e.node): e.param for e in extents if e.node is not None}
    replacements = {}
    for stmt in keep:
        for node in ast.walk(stmt):
            name = call_name(node)
            if name == "tl.program_id":
                replacements[node] = _delinearised(axis_of(node), ndim, pid_name, grid_param)
            elif name == "tl.num_programs":
                replacements[node] = grid_param(axis_of(node))
            elif isinstance(node, ast.Call) and ast.dump(node) in by_expression:
                replacements[node] = by_expression[ast.dump(node)]
    texts = [segment(stmt, replacements, lines) for stmt in keep if stmt is not pid_stmt]
    parsed = [ast.parse(t).body[0] for t in texts]
    defined = {n for s in parsed for n in assigned(s)}
    read = set().union(*[reads(s) for s in parsed]) | (set(outputs) - defined)
    head = [pid_name] + [e.param for e in extents]
    grid_extra = [p for p, _ in sorted(grid_params.items(), key=lambda kv: kv[1]) if p not in head]
    order = params(func) + list(launch.globals)
    extras = [n for n in dict.fromkeys(order) if n in read - defined and n not in head + grid_extra]
    unknown = sorted(read - defined - set(head + grid_extra + extras) - BUILTIN_NAMES)
    if unknown:
        raise LiftError(f"cannot lift {func.name}: the mapping reads {', '.join(unknown)}, which is neither "
                        f"a kernel parameter nor a module-level scalar")
    target_params = head + grid_extra + extras
    name = fresh("swizzle", top_level_names(tree))
    first, last = region.statements[0].lineno, _last_line(region)
    where = f"line {first}" if first == last else f"lines {first}-{last}"
    body = "".join(textwrap.indent(t, "    ") + "\n" for t in texts)
    source = (f"@triton.jit\ndef {name}({', '.join(target_params)}):\n"
              f"    \"\"\"Program id -> tile of {func.name} (lifted from its {where}).\"\"\"\n"
              f"{body}    return {', '.join(outputs)}\n")
    return {"name": name, "params": target_params, "source": source, "grid_params": grid_params,
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


def _rewrite_module(tree: ast.Module, lines: list, func, region: _Region, target: dict, outputs: list, extents: list,
                    pid_stmt, ndim: int, names_in_use: set) -> tuple[str, list]:
    """The user's text with the moved statements gone from the kernel, the call after the region's
    last statement and the target before the kernel's decorators, each indented as written where
    it aligns (the region's first statement, the kernel's ``def``). Line-based: everything else
    keeps its text. Returns ``(source, notes)``."""
    notes = []
    first_stmt = region.statements[0]
    body_indent = indent_of(lines[first_stmt.lineno - 1], first_stmt.col_offset)
    kept_pid = {pid_stmt.targets[0].id} if pid_stmt is not None else set()
    moved_names = region.pid_names - kept_pid
    last = _last_line(region)
    dropped = [h for h in region.hints
               if reads(h) & (moved_names - set(outputs)) or (h.lineno < last and reads(h) & set(outputs))]
    if dropped:
        notes.append("dropped from the kernel (they read names the target now computes): "
                     + "; ".join(f"line {h.lineno}: {text(h)}" for h in dropped))
    if pid_stmt is not None:
        first_arg = pid_stmt.targets[0].id
        pid_line = ""
    elif ndim == 1:
        first_arg, pid_line = linear_pid(1), ""
    else:
        first_arg = fresh(target["pid"], names_in_use)
        pid_line = f"{body_indent}{first_arg} = {linear_pid(ndim)}\n"
    grid_args = [f"tl.num_programs({target['grid_params'][p]})" for p in target["params"][1 + len(extents):]
                 if p in target["grid_params"]]
    call_args = [first_arg] + [e.call_arg for e in extents] + grid_args + target["extras"]
    skipped = [s for s in region.body[:region.end] if s not in region.statements and s not in region.hints]
    needed = set().union(*[reads(s) for s in region.body[region.end:] + skipped])
    needed |= {n for a in call_args for n in reads(ast.parse(a, mode="eval"))}
    needed |= {n for h in region.hints if h not in dropped for n in reads(h)}
    kept = []
    for stmt in reversed(region.statements):
        if stmt is pid_stmt or (stmt not in region.moved and set(assigned(stmt)) & needed):
            kept.append(stmt)
            needed |= reads(stmt.value)
    removed = [s for s in region.statements if s not in kept] + dropped
    _check_own_lines(func, region.statements + dropped)
    call = f"{body_indent}{', '.join(outputs)} = {target['name']}({', '.join(call_args)})\n"
    drop = {n for s in removed for n in range(s.lineno, s.end_lineno + 1)}
    out = []
    for number, line in enumerate(lines, start=1):
        if number not in drop:
            out.append(line)
        if number == last:
            out.append(pid_line + call)
    first = first_line(func)
    insert_at = sum(1 for n in range(1, first) if n not in drop)
    def_indent = indent_of(lines[func.lineno - 1], func.col_offset)
    return ("".join(out[:insert_at]) + at_column(missing_imports(tree, target["source"]) + target["source"] + "\n\n",
                                                def_indent)
            + "".join(out[insert_at:]), notes)


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


