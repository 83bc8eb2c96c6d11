"""The contract between a kernel module and the optimizer: `KernelSpec`, and loading one from a path.

A kernel module (``kernels/gemm.py`` and the like) defines a ``@triton.jit`` kernel whose first
step calls the *rewrite target*, a ``@triton.jit`` function (``swizzle(pid, ...)``) that maps the
program id to the logical tile the program computes. The module exports one module-level
``KernelSpec`` instance that tells the optimizer how to build inputs, launch, check and trace it.
"""
from __future__ import annotations

import ast
import importlib.util
import itertools
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

Problem = Mapping[str, int]
Meta = Mapping[str, Any]

_module_counter = itertools.count()


class KernelLoadError(Exception):
    """A path that is not a usable kernel module; the message is one line for the user."""


@dataclass(frozen=True)
class KernelSpec:
    """How to build, launch, check, trace and rewrite one kernel.

    Attributes:
        name: short kernel name, e.g. ``"gemm"``.
        kernel_name: the ``@triton.jit`` kernel's function name, which is the name the profiler
            sees (ncu selects the launch by this exact name).
        problems: named problem sizes; must hold ``"default"`` (the real size) and ``"check"``
            (small, run through the Triton interpreter on CPU, with a tile grid whose program
            count is not a multiple of 8).
        meta: launch meta-parameters for real problems (tile sizes, ``num_warps``, ``num_stages``).
        check_meta: meta-parameters for the ``check`` problem (small tiles for the interpreter).
        make_inputs: ``(problem, seed, device, dtype) -> dict of tensors``; fresh random inputs for
            the seed, the output buffers included (their content is overwritten by the verifier).
        launch: ``(inputs, **meta) -> None``; runs the kernel once into the output buffer(s).
        reference: ``(inputs) -> torch.Tensor``; the expected output, in higher precision.
        output_name: key of ``inputs`` holding the kernel's output.
        tolerance: per dtype name, the largest accepted ``||out - ref||_F / ||ref||_F``.
        tile_grid: ``(problem, meta) -> tuple of ints``, the logical tile grid; one program per tile.
        swizzle_args: ``(problem, meta) -> tuple of ints``, the arguments after ``pid`` with which
            the kernel calls the rewrite target.
        trace: ``(problem, meta) -> profiling.trace.TileTrace``: a hand-written access model (the
            ordered blocks every logical tile's program reads and writes); optional: without
            it the generic tracer (profiling/tracer.py) derives the trace from the kernel itself.
        flops: ``(problem) -> float``: floating-point operations of one launch (for TFLOP/s).
        min_bytes: ``(problem, dtype) -> float``: fewest bytes one launch must move (for GB/s).
        dtypes: dtype names the kernel supports; the first is the default.
        rewrite_target: name of the ``@triton.jit`` function that candidates replace.
        expert: the hand-written reference order: a catalog name (``"grouped-m:8"``) or the full
            source of a rewrite target (for orders outside the catalog); None where none is known.
        output_tile: ``(problem, meta) -> tuple``, elements of the output each program writes per
            dimension (names unwritten tiles in rejections); None when the output is not tiled
            like the grid.
        permutation_only: names of problems at which the rewrite target is only probed, the
            kernel never launched (no inputs exist there: a captured launch, agent/capture.py).
            One whose grid is not a multiple of 8 programs stands in for ``check``'s.
        launch_configs: other launch configurations (dicts of meta-parameters applied over
            ``meta``: tiles, warps, stages, schedule) that the optimizer tunes in measured mode
            for the best order it found, at the default problem (agent/tune_worker.py); every
            one must compute the same output as ``meta``.
        library: ``(inputs) -> None``: the vendor library doing what one launch does, into the
            inputs' output buffer (kernels/gemm.py: ``torch.matmul``, cuBLAS), timed beside the
            tuned kernel in measured mode; None where there is none. ``library_name`` names it.
    """

    name: str
    kernel_name: str
    problems: Mapping[str, Problem]
    meta: Meta
    check_meta: Meta
    make_inputs: Callable[..., dict]
    launch: Callable[..., None]
    reference: Callable[[dict], Any]
    output_name: str
    tolerance: Mapping[str, float]
    tile_grid: Callable[[Problem, Meta], tuple]
    swizzle_args: Callable[[Problem, Meta], tuple]
    flops: Callable[[Problem], float]
    min_bytes: Callable[[Problem, str], float]
    dtypes: tuple = ("bfloat16",)
    trace: Callable[[Problem, Meta], Any] | None = None
    rewrite_target: str = "swizzle"
    expert: str | None = None
    output_tile: Callable[[Problem, Meta], tuple] | None = None
    permutation_only: tuple = ()
    launch_configs: tuple = ()
    library: Callable[[dict], None] | None = None
    library_name: str = ""
    source_path: Path | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        """Refuse a spec the optimizer could not use, naming the field.

        Raises:
            ValueError: ``problems`` lacks ``default`` or ``check``; a declared dtype has no
                tolerance; a problem lacks a size ``tile_grid`` or ``swizzle_args`` reads; the
                check problem's program count is a multiple of 8 (a remap that is a permutation
                only on multiples of 8 would pass there) and so is every permutation-only
                problem's; a permutation-only problem is not in ``problems`` or is ``default``
                or ``check``.
        """
        for required in ("default", "check"):
            if required not in self.problems:
                raise ValueError(f"KernelSpec {self.name!r}: problems must include {required!r}, "
                                 f"got {sorted(self.problems)}")
        missing = [d for d in self.dtypes if d not in self.tolerance]
        if missing:
            raise ValueError(f"KernelSpec {self.name!r}: tolerance must give every dtype of dtypes "
                             f"{list(self.dtypes)}, missing {missing}")
        for name, problem in self.problems.items():
            try:
                self.tile_grid(problem, self.meta_for(name))
                self.swizzle_args(problem, self.meta_for(name))
            except KeyError as exc:
                raise ValueError(f"KernelSpec {self.name!r}: problem {name!r} lacks the size "
                                 f"{exc.args[0]!r} that tile_grid / swizzle_args read (it has "
                                 f"{sorted(problem)})") from None
        bad = [p for p in self.permutation_only if p not in self.problems or p in ("default", "check")]
        if bad:
            raise ValueError(f"KernelSpec {self.name!r}: permutation_only must name problems other than "
                             f"default and check, got {bad}")
        programs = self.num_programs("check")
        if programs % 8 == 0 and all(self.num_programs(p) % 8 == 0 for p in self.permutation_only):
            others = ", ".join(f"{p}: {self.num_programs(p)}" for p in self.permutation_only)
            also = f", nor a permutation-only problem's ({others})" if others else ""
            raise ValueError(f"KernelSpec {self.name!r}: the check problem's grid must not be a "
                             f"multiple of 8 programs (it catches remaps that are permutations "
                             f"only on multiples of 8), got {programs}{also}")

    def meta_for(self, problem_name: str) -> dict:
        """The launch meta-parameters of a named problem (``check`` has its own)."""
        return dict(self.check_meta if problem_name == "check" else self.meta)

    def num_programs(self, problem_name: str, meta: Meta | None = None) -> int:
        """Programs in the launch grid of a named problem (one per logical tile)."""
        meta = self.meta_for(problem_name) if meta is None else meta
        return math.prod(self.tile_grid(self.problems[problem_name], meta))


def load_kernel(path: str | Path) -> tuple[Any, KernelSpec]:
    """Import a kernel module from a file and return ``(module, its KernelSpec)``.

    Only for the worker subprocess (agent/worker.py): the module runs as written, its rewrite
    target included, which after ``--in-place`` may be model-written code. The agent's own process
    uses :func:`load_spec`.

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
    stand_in = _stand_in(name, [a.arg for a in node.args.args], node.end_lineno - first + 1)
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


def _stand_in(name: str, params: list, span: int) -> str:
    """``@triton.jit def name(params)`` returning its first parameter, padded to ``span`` lines
    (the rest of the module keeps its line numbers, which Triton reads its sources by)."""
    text = f"@triton.jit\ndef {name}({', '.join(params)}): return {params[0] if params else 0}  # stand-in\n"
    return text + "\n" * max(0, span - 2)


def _read(path: str | Path) -> tuple[Path, str, ast.Module]:
    path = Path(path)
    if not path.exists():
        raise KernelLoadError(f"{path}: no such file")
    if path.is_dir() or path.suffix != ".py":
        raise KernelLoadError(f"{path}: not a Python kernel module (expected a .py file)")
    source = path.read_text()
    try:
        tree = ast.parse(source, filename=str(path))
    except SyntaxError as exc:
        raise KernelLoadError(f"{path}: does not parse: {exc.msg} (line {exc.lineno})") from None
    return path, source, tree


def _the_spec(module: Any, tree: ast.Module, path: Path) -> KernelSpec:
    from swizzleperf.kernels.distributed.spec import DistKernelSpec
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
    """The top-level function definition called ``name`` in a parsed module, or None."""
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    return None
