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
    source_path: Path | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        for required in ("default", "check"):
            if required not in self.problems:
                raise ValueError(f"KernelSpec {self.name!r}: problems must include {required!r}, "
                                 f"got {sorted(self.problems)}")

    def meta_for(self, problem_name: str) -> dict:
        """The launch meta-parameters of a named problem (``check`` has its own)."""
        return dict(self.check_meta if problem_name == "check" else self.meta)

    def num_programs(self, problem_name: str, meta: Meta | None = None) -> int:
        """Programs in the launch grid of a named problem (one per logical tile)."""
        meta = self.meta_for(problem_name) if meta is None else meta
        return math.prod(self.tile_grid(self.problems[problem_name], meta))


def load_kernel(path: str | Path) -> tuple[Any, KernelSpec]:
    """Import a kernel module from a file and return ``(module, its KernelSpec)``.

    Raises:
        KernelLoadError: the path does not exist, is not a ``.py`` file, does not import, holds
            no (or several) module-level KernelSpec, or its rewrite target is not a top-level
            ``@triton.jit`` function.
    """
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
    module = _import_file(path)
    specs = [v for v in vars(module).values() if isinstance(v, KernelSpec)]
    if not specs:
        raise KernelLoadError(f"{path}: defines no KernelSpec (expected a module-level "
                              f"`SPEC = KernelSpec(...)`)")
    if len({id(s) for s in specs}) > 1:
        raise KernelLoadError(f"{path}: defines {len(specs)} KernelSpec objects, expected one")
    spec = specs[0]
    if find_function(tree, spec.rewrite_target) is None:
        raise KernelLoadError(f"{path}: rewrite target {spec.rewrite_target!r} is not a top-level "
                              f"function of the module")
    if not hasattr(getattr(module, spec.rewrite_target, None), "fn"):
        raise KernelLoadError(f"{path}: rewrite target {spec.rewrite_target!r} is not decorated "
                              f"with @triton.jit")
    object.__setattr__(spec, "source_path", path.resolve())
    return module, spec


def _import_file(path: Path) -> Any:
    """Import a module from a file under a unique name, its folder on sys.path for siblings."""
    name = f"_swizzleperf_kernel_{path.stem}_{next(_module_counter)}"
    folder = str(path.resolve().parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    module_spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[name] = module
    try:
        module_spec.loader.exec_module(module)
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
