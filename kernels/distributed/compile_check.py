"""Compile every launch of a distributed kernel for an NVIDIA GPU without one (CPU, no driver).

    python -m swizzleperf.kernels.distributed.compile_check gemm_all_scatter [--arch 90]

Runs the kernel's steps for every pattern at world size 2 on CPU heaps, but instead of launching
each ``@triton.jit`` kernel it compiles it with ``triton.compile`` for ``cuda:ARCH`` (PTX and
cubin through the ptxas that ships with Triton), with the argument types of the real launch.
This catches what the interpreter does not see (non-constexpr globals, unsupported ops,
type errors in code generation) before a GPU machine is used. Exit status 1 on any failure.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import sys

import torch

_TYPES = {torch.bfloat16: "bf16", torch.float16: "fp16", torch.float32: "fp32",
          torch.float64: "fp64", torch.int32: "i32", torch.int64: "i64", torch.uint8: "u8",
          torch.int8: "i8", torch.int16: "i16", torch.bool: "i1"}


def _type(value) -> str:
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor as GluonDescriptor
    from triton.runtime.jit import mangle_type
    from triton.tools.tensor_descriptor import TensorDescriptor
    if isinstance(value, GluonDescriptor):   # a Gluon descriptor: its type names its layout
        return mangle_type(value)
    if isinstance(value, TensorDescriptor):   # a host-side tensor descriptor (TMA)
        return f"tensordesc<{_TYPES[value.base.dtype]}[{','.join(map(str, value.block_shape))}]>"
    if isinstance(value, torch.Tensor):
        return "*" + _TYPES[value.dtype]
    if isinstance(value, bool):
        return "i1"
    if isinstance(value, int):
        return "i32" if -2**31 <= value < 2**31 else "i64"
    if isinstance(value, float):
        return "fp32"
    raise TypeError(f"argument type {type(value).__name__} has no Triton signature type")


def compile_launch(fn, args, kwargs, arch: int):
    """Compile ``fn`` as ``fn[grid](*args, **kwargs)`` would, for ``cuda:arch``; returns Triton's
    compiled kernel (``.asm``, ``.metadata``)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from triton.experimental.gluon._runtime import GluonASTSource, GluonJITFunction

    options = {k: kwargs.pop(k) for k in ("num_warps", "num_stages", "maxnreg") if k in kwargs}
    for name, value in options.items():   # a Gluon kernel may also take them as parameters
        if name in fn.arg_names:
            kwargs[name] = value
    bound = fn.signature.bind(*args, **kwargs)
    bound.apply_defaults()
    signature, constexprs, attrs = {}, {}, {}
    for index, param in enumerate(fn.params):
        value = bound.arguments[param.name]
        integer = isinstance(value, int) and not isinstance(value, bool)
        # the JIT's specialisation: an integer 1 is a constant (a unit stride: the launch's stores
        # and loads vectorise on it), 16-byte aligned tensors and integers divisible by 16 say so
        if param.is_constexpr or (integer and value == 1 and not param.do_not_specialize):
            signature[param.name] = "constexpr"
            constexprs[param.name] = value
            continue
        signature[param.name] = _type(value)
        if isinstance(value, torch.Tensor) or (integer and value % 16 == 0):
            attrs[(index,)] = [["tt.divisibility", 16]]
    source = GluonASTSource if isinstance(fn, GluonJITFunction) else ASTSource
    return triton.compile(source(fn=fn, signature=signature, constexprs=constexprs, attrs=attrs),
                          target=GPUTarget("cuda", arch, 32), options=options)


@contextlib.contextmanager
def compiling_launches(arch: int = 90):
    """Within it, every ``kernel[grid](...)`` launch (Triton and Gluon) is compiled for
    ``cuda:arch`` instead of run; yields ``{(kernel name, its keyword arguments): Triton's
    compiled kernel}``, each distinct launch compiled once."""
    from triton.runtime.jit import JITFunction
    compiled = {}

    def fake_run(self, *args, grid, warmup, **kwargs):
        key = (self.__name__, tuple(sorted((k, str(v)) for k, v in kwargs.items())))
        if key not in compiled:
            compiled[key] = None   # a launch that fails to compile is not tried again
            compiled[key] = compile_launch(self, args, dict(kwargs), arch)

    original = JITFunction.run
    JITFunction.run = fake_run
    try:
        yield compiled
    finally:
        JITFunction.run = original


@contextlib.contextmanager
def descriptors_as_on_hopper(name: str):
    """Within it, kernel ``name`` takes its tensor-descriptor (TMA) paths for CPU tensors as it
    does for CUDA tensors on sm_90: its ``tma_supported`` checks alignment only, not the device
    (on CPU every launch would otherwise build its pointer paths, not what runs on Hopper)."""
    import importlib

    from swizzleperf.kernels.schedule import ws_gemm
    from swizzleperf.kernels.schedule.persistent_gemm import tma_aligned
    module = importlib.import_module(f"swizzleperf.kernels.distributed.{name}")
    original, runs_here = module.tma_supported, ws_gemm.runs_here
    module.tma_supported = tma_aligned
    ws_gemm.runs_here = lambda: True   # the Gluon kernels too, as on Hopper
    try:
        yield
    finally:
        module.tma_supported, ws_gemm.runs_here = original, runs_here


def compile_steps(name: str, problem: dict, meta: dict, pattern: str, world_size: int = 2,
                  arch: int = 90, streams: tuple = ("main", "comm")) -> dict:
    """``{kernel name: Triton's compiled kernel}`` of one launch of ``pattern`` of kernel ``name``
    for rank 0 of ``world_size`` CPU heaps at ``problem`` with ``meta``, compiled for ``cuda:arch``
    with the tensor-descriptor and Gluon paths taken as on Hopper (``descriptors_as_on_hopper``);
    steps on other streams than ``streams`` and barriers are not run. A problem large enough
    for the bench's tiles, unlike ``check``'s."""
    from swizzleperf.kernels.distributed import load_spec
    from swizzleperf.kernels.distributed.heap import Heap
    spec = load_spec(name)
    heaps = Heap.group(world_size, spec.heap_bytes(problem, world_size, spec.dtypes[0]))
    inputs = spec.make_inputs(problem, 0, world_size, 0, "cpu", spec.dtypes[0])
    with compiling_launches(arch) as launches, descriptors_as_on_hopper(name):
        state = spec.setup(heaps[0], inputs, problem, meta)
        for step in spec.steps(heaps[0], state, pattern, 1, meta):
            if not step.barrier and step.stream in streams:
                step.run()
    return {kernel: compiled for (kernel, _), compiled in launches.items()}


def check(name: str, arch: int = 90, space: bool = False) -> list:
    """Compile every launch of every pattern of kernel ``name`` (with ``space``: of every
    configuration the optimizer's policy may propose, ``spec.space`` at each bench problem and
    W = 2, 4, 8), through its pointer paths and, where it has them, its tensor-descriptor paths
    (``descriptors_as_on_hopper``); returns the failures. Launches that compile alike are
    compiled once."""
    import importlib

    from swizzleperf.kernels.distributed import load_spec

    spec = load_spec(name)
    failures = []
    with compiling_launches(arch) as compiled:
        descriptors = hasattr(importlib.import_module(f"swizzleperf.kernels.distributed.{name}"),
                              "tma_supported")
        for world_size, pattern, config in _configurations(spec, space):
            label = f"{name} W={world_size} {pattern} {config}" if space else f"{name} {pattern}"
            for tma in (False, True) if descriptors else (False,):
                try:
                    with descriptors_as_on_hopper(name) if tma else contextlib.nullcontext():
                        _launch(spec, world_size, pattern, config)
                    print(f"{label}{' (tensor descriptors)' if tma else ''}: compiled for sm_{arch}",
                          flush=True)
                except Exception as exc:  # report every configuration's failure, then exit 1
                    failures.append(f"{label}{' (tensor descriptors)' if tma else ''}: "
                                    f"{type(exc).__name__}: {exc}")
                    print(failures[-1], flush=True)
    print(f"{name}: {len(compiled)} distinct launches compiled, {len(failures)} failures", flush=True)
    return failures


def _configurations(spec, space: bool) -> list:
    if not space:
        return [(2, pattern, {}) for pattern in spec.patterns]
    out, seen = [], set()
    for problem in spec.bench_problems:
        for world_size in (2, 4, 8):
            for config in spec.space(problem, world_size, 132):
                knobs = {k: v for k, v in config.items() if k != "pattern"}
                key = (world_size, config["pattern"], tuple(sorted(knobs.items())))
                if key not in seen:
                    seen.add(key)
                    out.append((world_size, config["pattern"], knobs))
    return out


def _launch(spec, world_size: int, pattern: str, config: dict) -> None:
    """One launch of ``pattern`` at the check problem on CPU heaps, with the configuration's
    compile-time knobs (tiles, splits) and 132 SMs: what changes the compiled code, at the sizes
    of a cheap problem."""
    from swizzleperf.kernels.distributed.heap import Heap, barrier_all
    problem = spec.problems["check"]
    heaps = Heap.group(world_size, spec.heap_bytes(problem, world_size, spec.dtypes[0]))
    meta = dict(spec.meta_for("check", config), NUM_SMS=132)
    inputs = spec.make_inputs(problem, 0, world_size, 0, "cpu", spec.dtypes[0])
    state = spec.setup(heaps[0], inputs, problem, meta)
    for step in spec.steps(heaps[0], state, pattern, 1, meta):
        if step.barrier:
            barrier_all(heaps)
        else:
            step.run()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("kernels", nargs="+")
    parser.add_argument("--arch", type=int, default=90)
    parser.add_argument("--space", action="store_true",
                        help="every configuration of the policy's space at the bench problems, W = 2, 4, 8")
    args = parser.parse_args(argv)
    if os.environ.get("TRITON_INTERPRET") == "1":
        print("compile_check: unset TRITON_INTERPRET (kernels must be compiled)", file=sys.stderr)
        return 2
    failures = [f for name in args.kernels for f in check(name, args.arch, args.space)]
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
