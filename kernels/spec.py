"""The contract between a kernel module and the optimizer: ``KernelSpec``.

A kernel module (``kernels/gemm.py`` and the like) defines a ``@triton.jit`` kernel whose first
step calls the *rewrite target*, a ``@triton.jit`` function (``swizzle(pid, ...)``) that maps the
program id to the logical tile the program computes. The module exports one module-level
``KernelSpec`` instance that tells the optimizer how to build inputs, launch, check and trace it
(agent/verification/load.py loads one from a path). A distributed kernel exports a
``DistKernelSpec`` instead (kernels/distributed/spec.py).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

Problem = Mapping[str, int]
Meta = Mapping[str, Any]

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
        trace: ``(problem, meta) -> kernels.trace.TileTrace``: a hand-written access model (the
            ordered blocks every logical tile's program reads and writes); optional: without
            it the generic tracer (profiling/tracer.py) derives the trace from the kernel itself.
        flops: ``(problem) -> float``: floating-point operations of one launch (for TFLOP/s).
        min_bytes: ``(problem, dtype) -> float``: fewest bytes one launch must move (for GB/s).
        compute: which units do ``flops``: ``"matrix"`` (``tl.dot`` on tensor / matrix cores: the
            dtype's dense matrix peak) or ``"vector"`` (the fp32 vector peak); picks the compute
            roof a measured time is compared with (profiling/roof.py).
        dtypes: dtype names the kernel supports; the first is the default.
        rewrite_target: name of the ``@triton.jit`` function that candidates replace.
        expert: the hand-written reference order: a catalog name (``"grouped-m:8"``) or the full
            source of a rewrite target (for orders outside the catalog); None where none is known.
        output_tile: ``(problem, meta) -> tuple``, elements of the output each program writes per
            dimension (names unwritten tiles in rejections); None when the output is not tiled
            like the grid.
        permutation_only: names of problems at which the rewrite target is only probed, the
            kernel never launched (no inputs exist there: a captured launch, agent/capture/capture.py).
            One whose grid is not a multiple of 8 programs stands in for ``check``'s.
        launch_configs: other launch configurations (dicts of meta-parameters applied over
            ``meta``: tiles, warps, stages, schedule) that the optimizer tunes in measured mode
            for the best order it found, at the default problem (agent/verification/tune_worker.py); every
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
    compute: str = "vector"
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
