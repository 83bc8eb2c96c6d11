"""A CUDA app run as it is on a machine without a GPU (issue #42): the tensors it puts on ``cuda``
are made on the CPU, where Triton's interpreter (``TRITON_INTERPRET=1``) runs its kernels.

agent/capture/capture.py copies this file beside the hook (``sitecustomize.py``), which imports it
and calls :func:`install` when ``TRITON_INTERPRET=1``; the mode switches itself on once ``torch``
is imported and only if torch sees no GPU. Self-contained: the standard library and torch.

What changes in the app's process, said once on its stderr (``NOTICE``) and in ``cuda-on-cpu-<pid>``
of the capture folder, which the CLI prints as one line:

- a ``TorchFunctionMode`` (entered for good, below any mode the app enters) rewrites every device
  argument that names CUDA (``"cuda"``, ``"cuda:1"``, ``torch.device("cuda")``, positional or
  keyword) to ``"cpu"``, makes ``.cuda()`` and ``.pin_memory()`` return the tensor, and answers
  ``Tensor.is_cuda`` with True (the property goes through ``__torch_function__``), so that the
  app's ``assert x.is_cuda`` holds;
- ``torch.set_default_device("cuda")`` sets the CPU;
- Triton's ``driver.active``, which has no driver to make, answers as a CUDA target of compute
  capability 8.0 (``_CpuDriver``: the tutorials' ``is_cuda()`` reads it at import);
- the ``torch.cuda`` calls with a CPU meaning become harmless: ``synchronize``, ``set_device``,
  ``current_device`` (0), ``device(...)`` and ``_DeviceGuard`` (no-op contexts), ``Event``
  (wall-clock timing), ``Stream`` / ``stream`` / ``current_stream`` (no-ops), the memory counters
  (0), ``get_device_name`` ("cpu"), ``default_generators`` (one generator holding a Philox seed
  and offset, as a CUDA generator's state reads); for Inductor-generated code, ``torch._C._cuda_getCurrentRawStream``
  (0) and ``_empty_strided_cuda`` (on the CPU). ``torch.cuda.is_available()`` stays False: an app that
  branches on it takes its CPU path, which is the truth.

And, under the interpreter whether or not a GPU is present, the common libdevice functions
(``tanh``, ``pow``, ``rsqrt``...: :data:`LIBDEVICE`) run through numpy (:func:`interpreter_libdevice`),
and two places where Triton 3.9.0's interpreter rejects what compiled Triton runs are mended: a
constexpr annotated as a string (:func:`interpreter_string_annotations`) and an ``int1`` mask held
as integers (:func:`interpreter_boolean_masks`). The generated module installs the same in
verification's processes.
"""
from __future__ import annotations

import contextlib
import os
import sys
import time

NOTICE = ("swizzleperf: no GPU here: the app's CUDA tensors are made on the CPU and its Triton kernels run "
          "through the interpreter (TRITON_INTERPRET=1); Triton's driver answers as a CUDA sm_80 target")
SCREEN_LINE = "your app's CUDA tensors ran on the CPU (no GPU here): its Triton kernels through the interpreter"
RECORD_PREFIX = "cuda-on-cpu-"   # <capture folder>/cuda-on-cpu-<pid>: the notice, for the CLI
DIR_ENV = "SWIZZLEPERF_CAPTURE_DIR"

_installed = {"mode": None}


def _is_cuda(value) -> bool:
    import torch
    if isinstance(value, torch.device):
        return value.type == "cuda"
    return isinstance(value, str) and (value == "cuda" or value.startswith("cuda:"))


def _cpu(value):
    import torch
    return torch.device("cpu") if _is_cuda(value) else value


def _make_mode():
    import torch
    from torch.overrides import TorchFunctionMode
    is_cuda_getter = torch._C.TensorBase.is_cuda
    identity = {torch.Tensor.cuda, torch.Tensor.pin_memory}

    class CudaOnCpu(TorchFunctionMode):
        """Device arguments naming CUDA go to the CPU; ``.cuda()`` is the tensor; ``is_cuda`` True."""

        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if getattr(func, "__self__", None) is is_cuda_getter:
                return True
            if func in identity:
                return args[0]
            if func is torch.Tensor.is_pinned:
                return False
            args = tuple(_cpu(a) for a in args)
            kwargs = {k: _cpu(v) for k, v in kwargs.items()}
            return func(*args, **kwargs)
    return CudaOnCpu()


class _Event:
    """``torch.cuda.Event`` on the CPU: wall-clock times, everything already complete."""

    def __init__(self, enable_timing=False, blocking=False, interprocess=False, **_):
        self.t = None

    def record(self, stream=None):
        self.t = time.perf_counter()

    def elapsed_time(self, end) -> float:
        return (end.t - self.t) * 1e3

    def synchronize(self):
        pass

    def wait(self, stream=None):
        pass

    def query(self) -> bool:
        return True


class _Stream:
    """``torch.cuda.Stream`` on the CPU: work is already in order."""

    def __init__(self, *args, **kwargs):
        self.device = None

    def synchronize(self):
        pass

    def wait_stream(self, other):
        pass

    def wait_event(self, event):
        pass

    def record_event(self, event=None):
        event = event or _Event()
        event.record()
        return event

    def query(self) -> bool:
        return True

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class _Props:
    name, major, minor = "cpu", 0, 0
    multi_processor_count = os.cpu_count() or 1
    total_memory = 0


class _PhiloxGenerator:
    """``torch.cuda.default_generators[i]`` without a GPU: a CUDA generator's state as its API gives
    it, the Philox seed and offset (``get_state()``: 16 bytes, two int64), for apps that derive the
    seed and offset of their own Philox kernels from it (FlagGems-style ``uniform_``). Its numbers are
    the app's kernel's; nothing here draws any."""

    def __init__(self, seed: int = 67280421310721):   # torch's default seed (c10::default_rng_seed_val)
        self._seed, self._offset = seed, 0

    @property
    def device(self):
        import torch
        return torch.device("cpu")

    def get_state(self):
        import torch
        return torch.tensor([self._seed, self._offset], dtype=torch.int64).view(torch.uint8)

    def set_state(self, state) -> None:
        import torch
        self._seed, self._offset = (int(v) for v in state.view(torch.int64)[:2])

    def manual_seed(self, seed: int):
        self._seed, self._offset = int(seed), 0
        return self

    def seed(self) -> int:
        import random
        self.manual_seed(random.getrandbits(63))
        return self._seed

    def initial_seed(self) -> int:
        return self._seed

    def get_offset(self) -> int:
        return self._offset

    def set_offset(self, offset: int) -> None:
        self._offset = int(offset)


def _returning(value):
    return lambda *args, **kwargs: value


def _context():
    return lambda *args, **kwargs: contextlib.nullcontext()


def _patch_cuda() -> None:
    import torch
    cuda = torch.cuda
    # one function object per name: torch._dynamo's trace rules map functions by identity
    for name in ("synchronize", "set_device", "empty_cache", "reset_peak_memory_stats", "ipc_collect",
                 "reset_max_memory_allocated"):
        setattr(cuda, name, _returning(None))
    for name in ("current_device", "memory_allocated", "max_memory_allocated", "memory_reserved",
                 "max_memory_reserved"):
        setattr(cuda, name, _returning(0))
    for name in ("device", "_DeviceGuard", "device_of"):
        setattr(cuda, name, _context())
    cuda.Event, cuda.Stream = _Event, _Stream
    cuda.stream = lambda stream=None: stream if stream is not None else contextlib.nullcontext()
    cuda.current_stream = lambda device=None: _Stream()
    cuda.default_stream = lambda device=None: _Stream()
    cuda.get_device_name = lambda device=None: "cpu"
    cuda.get_device_properties = lambda device=None: _Props()
    if not getattr(cuda, "default_generators", ()):   # an empty tuple without CUDA
        cuda.default_generators = (_PhiloxGenerator(),)
    _inductor_shims()
    set_default = torch.set_default_device
    torch.set_default_device = lambda device: set_default(_cpu(device))


def _inductor_shims() -> None:
    """What Inductor-generated code imports and calls on CUDA, on a torch without CUDA:
    ``torch._C._cuda_getCurrentRawStream`` (0) and ``_empty_strided_cuda`` (a CPU tensor)."""
    import torch
    if not hasattr(torch._C, "_cuda_getCurrentRawStream"):
        torch._C._cuda_getCurrentRawStream = lambda device=None: 0
    guards = getattr(getattr(torch._C, "_dynamo", None), "guards", None)
    if hasattr(guards, "_empty_strided_cuda"):
        guards._empty_strided_cuda = lambda size, stride, dtype: torch.empty_strided(size, stride, dtype=dtype)


def generated_module_shims() -> None:
    """What the generated copy of an app's file needs on a machine without a GPU, where it imports
    what the app's run had: Inductor's CUDA names (where torch has no GPU); under the interpreter,
    libdevice's numpy stand-ins and the interpreter's fixes (string constexprs, int1 masks held as
    integers), so that verification runs the kernel as the app's run did. Only the boxed worker
    processes import the copy (agent/verification/load.py's ``load_kernel``); the agent's own process
    never does (issue #41): it builds the copy's KernelSpec from the capture's checked files
    (agent/verification/load.py's ``load_spec``, agent/capture/capture.py's ``captured_spec``)."""
    interpreter_libdevice()
    interpreter_string_annotations()
    interpreter_boolean_masks()
    interpreter_boolean_operators()
    interpreter_block_pointers()
    interpreter_storageless_arguments()
    from swizzleperf.kernels.interpreter import interpreter_patches
    interpreter_patches()
    if not _gpu_seen():
        _inductor_shims()
        _cpu_driver()


def _gpu_seen() -> bool:
    """Whether torch sees a CUDA GPU, without starting CUDA where NVML answers
    (``torch.cuda.device_count``): an interpreted verification worker on a GPU machine runs under an
    address-space limit, and ``cuInit`` there reserved the space its threads needed ("libgomp: Thread
    creation failed: Resource temporarily unavailable", an H100, 2026-12-06)."""
    import torch
    return torch.cuda.device_count() > 0   # ROCm's GPUs too


def _switch_on() -> None:
    """Once torch is imported: the mode and the patches, where torch sees no GPU."""
    import torch
    if torch.cuda.is_available() or _installed["mode"] is not None:
        return
    _patch_cuda()
    mode = _make_mode()
    mode.__enter__()   # for the life of the process: the app's own modes go above it
    _installed["mode"] = mode
    print(NOTICE, file=sys.stderr, flush=True)
    folder = os.environ.get(DIR_ENV)
    if folder and os.path.isdir(folder):
        with open(os.path.join(folder, f"{RECORD_PREFIX}{os.getpid()}"), "w") as f:
            f.write(NOTICE + "\n")


def install(after_import) -> None:
    """Switch the mode on once ``torch`` is imported (now if it already is), and libdevice's numpy
    stand-ins once ``triton`` is (:func:`interpreter_libdevice`); ``after_import(name, callback)``
    is the hook's post-import finder."""
    if os.environ.get("TRITON_INTERPRET") != "1":
        return
    _installed["after_import"] = after_import
    if "triton" in sys.modules:
        _on_triton()
    else:
        sys.meta_path.insert(0, after_import("triton", _on_triton))


def _on_triton() -> None:
    """In the app's process (the hook): libdevice, the driver, and the mode once torch is imported.
    Never from :func:`generated_module_shims`: the workers that import the generated copy run the
    agent's own code beside it (the verifier's poisoning and comparisons), and the mode there would
    answer ``is_cuda`` for the agent's tensors (it leaked into the tests when the agent's own process
    still imported the copy, before issue #41)."""
    interpreter_libdevice()
    interpreter_string_annotations()
    interpreter_boolean_masks()
    interpreter_boolean_operators()
    interpreter_block_pointers()
    interpreter_storageless_arguments()
    from swizzleperf.kernels.interpreter import interpreter_patches
    interpreter_patches()
    _cpu_driver()
    if "torch" in sys.modules:
        _switch_on()
    else:
        sys.meta_path.insert(0, _installed["after_import"]("torch", _switch_on))


class _CpuDriver:
    """Triton's active driver on a machine without one, for what apps ask it at import (the
    tutorials' ``driver.active.get_current_target().backend == "cuda"``): a CUDA target of compute
    capability 8.0 (the interpreter runs the kernels whatever it says; 8.0 takes no Hopper-only path)."""

    def get_current_target(self):
        from triton.backends.compiler import GPUTarget
        return GPUTarget("cuda", 80, 32)

    def get_current_device(self) -> int:
        return 0

    def set_current_device(self, device) -> None:
        pass

    def get_current_stream(self, device=None) -> int:
        return 0

    def get_active_torch_device(self):
        import torch
        return torch.device("cpu")


def _cpu_driver() -> None:
    """Where Triton finds no active driver (no GPU) and torch sees none: :class:`_CpuDriver`."""
    from triton.runtime import driver   # the DriverConfig object
    if _gpu_seen():
        return
    try:
        driver.active
    except RuntimeError:   # "0 active drivers"
        driver.set_active(_CpuDriver())


# -- string annotations under the interpreter ------------------------------------------------------

def interpreter_string_annotations() -> bool:
    """Under ``TRITON_INTERPRET=1``, a parameter annotated with a string (``BLOCK: "tl.constexpr"``,
    which compiled Triton reads as a constexpr) stays a constexpr in the interpreter too. Triton
    3.9.0's interpreter compiles its rewritten copy of a kernel inside ``interpreter.py``, whose
    ``from __future__ import annotations`` the ``compile`` call inherits: the copy's annotation is
    then the source text ``"'tl.constexpr'"``, no constexpr, and ``tl.arange(0, BLOCK)`` fails with
    "arange's arguments must be of type tl.constexpr" (seen on TritonBench-G's sin_computation.py
    and triton_mul2.py). The copy gets the original function's annotations back. Returns whether
    the interpreter was patched (False: not interpreting, or a Triton without that rewriter)."""
    if os.environ.get("TRITON_INTERPRET") != "1":
        return False
    try:
        from triton.runtime.interpreter import FunctionRewriter
    except ImportError:
        return False
    compile_and_exec = getattr(FunctionRewriter, "_compile_and_exec", None)
    if compile_and_exec is None or getattr(compile_and_exec, "_keeps_annotations", False):
        return compile_and_exec is not None

    def keeping_annotations(self, transformed_ast):
        rewritten = compile_and_exec(self, transformed_ast)
        original = getattr(self.fn, "__annotations__", None)
        if original and callable(rewritten):
            rewritten.__annotations__ = dict(original)
        return rewritten
    keeping_annotations._keeps_annotations = True
    FunctionRewriter._compile_and_exec = keeping_annotations
    return True


def interpreter_boolean_masks() -> bool:
    """Under ``TRITON_INTERPRET=1``, a load's or store's mask whose Triton type is ``int1`` reaches
    the interpreter's C++ load and store as numpy booleans. Triton 3.9.0's interpreter can hold such
    a mask as int32 data (a scalar comparison ``pid < H`` and-ed with a block, broadcast to the
    pointers: TritonBench-G's rotary_emb_nopad.py), and its load then raises "mask has unsupported
    dtype", where compiled Triton runs it. Nonzero is True, as the type says. Returns whether the
    interpreter was patched."""
    if os.environ.get("TRITON_INTERPRET") != "1":
        return False
    try:
        import numpy as np
        from triton.runtime.interpreter import InterpreterBuilder, TensorHandle
    except ImportError:
        return False
    load, store = (getattr(InterpreterBuilder, n, None) for n in ("create_masked_load", "create_masked_store"))
    if load is None or store is None:
        return False
    if getattr(load, "_boolean_masks", False):
        return True

    def boolean(mask):
        data = getattr(mask, "data", None)
        if isinstance(data, np.ndarray) and data.dtype != np.bool_:
            return TensorHandle(data.astype(np.bool_), mask.dtype)
        return mask

    def masked_load(self, ptrs, mask, *args, **kwargs):
        return load(self, ptrs, boolean(mask), *args, **kwargs)

    def masked_store(self, ptrs, value, mask, *args, **kwargs):
        return store(self, ptrs, value, boolean(mask), *args, **kwargs)
    masked_load._boolean_masks = masked_store._boolean_masks = True
    InterpreterBuilder.create_masked_load, InterpreterBuilder.create_masked_store = masked_load, masked_store
    return True


def interpreter_boolean_operators() -> bool:
    """Under ``TRITON_INTERPRET=1``, ``a and b`` / ``a or b`` of Triton tensors are the elementwise
    logical operations, as compiled Triton makes them (its code generator turns ``and`` / ``or`` into
    ``logical_and`` / ``logical_or``). Triton 3.9.0's interpreter leaves them to Python, which takes
    the truth of a whole block and returns one operand: ``tl.store(out + offs, x, mask=(select and
    mask))`` then stored through the unmasked lanes of ``select`` (TritonBench-G's masked_select.py
    wrote outside its output and died with SIGSEGV). Operands that are not tensors keep Python's own
    meaning. Returns whether the interpreter was patched."""
    if os.environ.get("TRITON_INTERPRET") != "1":
        return False
    try:
        import ast
        import triton.runtime.interpreter as interpreter
    except ImportError:
        return False
    transformer = getattr(interpreter, "ASTTransformer", None)
    if transformer is None:
        return False
    if getattr(transformer, "_swizzleperf_boolean_operators", False):
        return True

    def visit_BoolOp(self, node):
        node = self.generic_visit(node)
        helper = "_swizzleperf_logical_and" if isinstance(node.op, ast.And) else "_swizzleperf_logical_or"
        result = node.values[0]
        for value in node.values[1:]:   # a and b and c: and(and(a, lambda: b), lambda: c), left to right
            later = ast.Lambda(args=ast.arguments(posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[], defaults=[]),
                               body=value)
            result = ast.Call(func=ast.Name(id=helper, ctx=ast.Load()), args=[result, later], keywords=[])
        return ast.copy_location(result, node)
    transformer.visit_BoolOp = visit_BoolOp
    transformer._swizzleperf_boolean_operators = True
    # the rewritten kernel's globals receive the interpreter module's names (FunctionRewriter._compile_and_exec)
    interpreter._swizzleperf_logical_and = _logical("and")
    interpreter._swizzleperf_logical_or = _logical("or")
    return True


def interpreter_block_pointers() -> bool:
    """Under ``TRITON_INTERPRET=1``, on a Triton without block pointers (3.9.0 removed
    ``tl.make_block_ptr`` / ``tl.advance``, triton-lang/triton#10833, and its ``tl.load`` /
    ``tl.store`` take no ``boundary_check`` or ``padding_option``), the app's block pointers run as
    the pointer blocks they stand for (:class:`_BlockPointer`), so that a kernel written for Triton
    3.8 or earlier runs on a CPU as it is (14 of TritonBench-G's 78 development operators stopped
    there, 2026-12-06). A block pointer's element ``(i_0, .., i_{r-1})`` of the block is the address
    ``base + sum_d (offsets[d] + i_d) * strides[d]``; ``boundary_check`` masks, along each dimension
    it names, the elements outside ``[0, shape[d])``, which a load gives as ``padding_option``
    ("zero": 0, "nan": NaN; "" leaves them undefined: the interpreter gives 0); ``order`` is a
    layout hint, with no effect on which elements are touched (Triton's documentation of
    ``make_block_ptr``, ``load`` and ``advance`` in 3.8). The loads and stores go through Triton's
    own ones, so what the tracer and the verifier see is what they see of any kernel. Returns
    whether the interpreter was patched (False: not interpreting, or a Triton whose ``tl.load``
    takes ``boundary_check``: it has block pointers of its own)."""
    if os.environ.get("TRITON_INTERPRET") != "1":
        return False
    try:
        import inspect
        import triton.language as tl
    except ImportError:
        return False
    core = tl.core
    if getattr(core.load, "_swizzleperf_block_pointers", False):
        return True
    try:
        parameters = inspect.signature(core.load).parameters
    except (TypeError, ValueError):
        return False
    if "boundary_check" in parameters:
        return False
    replacements = {"make_block_ptr": _block_builtin(_make_block_ptr), "advance": _block_builtin(_advance),
                    "load": _block_load(core.load), "store": _block_store(core.store)}
    for module in (tl, core):   # 3.9.0's triton.language has no advance at all
        for name, fn in replacements.items():
            setattr(module, name, fn)
    for name in ("advance", "store"):   # x.advance(...), x.store(...): tensor methods in Triton
        if hasattr(core.tensor, name):
            setattr(core.tensor, name, getattr(core, name))
    return True


def interpreter_storageless_arguments() -> bool:
    """Under ``TRITON_INTERPRET=1``, a pointer argument that is no torch tensor but has what compiled
    Triton reads of one (``data_ptr()`` and ``dtype``: FlagGems' ``StridedBuffer``, a view with
    negative strides over a tensor's memory) is passed to the kernel as its address, where it lies in
    the CPU's memory. Triton's interpreter (3.6 and 3.9 alike) copies every pointer argument's
    storage to the host first and raised "object has no attribute 'untyped_storage'" for such a
    one (TritonBench-G's relu_strided_buffer.py). One on a GPU's memory is left to the interpreter
    (it cannot be read from the host). Returns whether the interpreter was patched."""
    if os.environ.get("TRITON_INTERPRET") != "1":
        return False
    try:
        from triton.runtime.interpreter import GridExecutor
    except ImportError:
        return False
    init, restore = (getattr(GridExecutor, n, None) for n in ("_init_args_hst", "_restore_args_dev"))
    if init is None or restore is None:
        return False
    if getattr(init, "_storageless", False):
        return True

    def storageless(value) -> bool:
        device = getattr(value, "device", None)
        return (callable(getattr(value, "data_ptr", None)) and not hasattr(value, "untyped_storage")
                and hasattr(value, "dtype") and getattr(device, "type", "cpu") == "cpu")

    def init_args(self, args_dev, kwargs):
        kept = {i for i, a in enumerate(args_dev) if storageless(a)}
        kept_kw = {k for k, v in kwargs.items() if storageless(v)}
        if not kept and not kept_kw:
            return init(self, args_dev, kwargs)
        args_hst, kwargs_hst = init(self, [None if i in kept else a for i, a in enumerate(args_dev)],
                                    {k: None if k in kept_kw else v for k, v in kwargs.items()})
        args_hst = [args_dev[i] if i in kept else a for i, a in enumerate(args_hst)]
        return args_hst, {k: kwargs[k] if k in kept_kw else v for k, v in kwargs_hst.items()}

    def restore_args(self, args_dev, args_hst, kwargs, kwargs_hst):
        kept = {i for i, a in enumerate(args_dev) if storageless(a)}
        kept_kw = {k for k, v in kwargs.items() if storageless(v)}
        return restore(self, [None if i in kept else a for i, a in enumerate(args_dev)],
                       [None if i in kept else a for i, a in enumerate(args_hst)],
                       {k: None if k in kept_kw else v for k, v in kwargs.items()},
                       {k: None if k in kept_kw else v for k, v in kwargs_hst.items()})
    init_args._storageless = True
    GridExecutor._init_args_hst, GridExecutor._restore_args_dev = init_args, restore_args
    return True


class _BlockPointer:
    """A block pointer of :func:`interpreter_block_pointers`: ``base`` (a scalar pointer tensor),
    ``shape``, ``strides``, ``offsets`` (per dimension: ints or scalar tensors, in elements),
    ``block_shape`` (ints) and the semantic it was made with (for ``p.store(...)``). ``type`` and
    ``dtype`` are Triton's own: a pointer to a block of the element type (``p.dtype.element_ty`` is
    that block type, which ``x.to(...)`` casts to by its element type)."""

    def __init__(self, base, shape, strides, offsets, block_shape, semantic=None):
        import triton.language as tl
        self.base, self.shape, self.strides, self.offsets, self.block_shape = (
            base, tuple(shape), tuple(strides), tuple(offsets), tuple(block_shape))
        self._semantic = semantic
        if not (len(self.shape) == len(self.strides) == len(self.offsets) == len(self.block_shape)):
            raise ValueError(f"make_block_ptr: shape, strides, offsets and block_shape must have one entry per "
                             f"dimension, got {len(self.shape)}, {len(self.strides)}, {len(self.offsets)} and "
                             f"{len(self.block_shape)}")
        self.type = self.dtype = tl.pointer_type(tl.block_type(base.type.element_ty, list(self.block_shape)))

    @property
    def element_ty(self):
        return self.base.type.element_ty

    def advance(self, offsets, _semantic=None):
        return _advance(self, offsets)

    def store(self, value, mask=None, boundary_check=(), cache_modifier="", eviction_policy="", _semantic=None):
        import triton.language as tl
        return tl.core.store(self, value, mask, boundary_check=boundary_check, cache_modifier=cache_modifier,
                             eviction_policy=eviction_policy, _semantic=_semantic or self._semantic)


def _unwrapped(value):
    """``value`` without Triton's constexpr wrapper; a list, a tuple or a ``tl.tuple`` as a tuple."""
    import triton.language as tl
    value = value.value if isinstance(value, tl.constexpr) else value
    if isinstance(value, (list, tuple)):
        return tuple(_unwrapped(v) for v in value)
    if isinstance(getattr(value, "values", None), (list, tuple)):   # tl.tuple
        return tuple(_unwrapped(v) for v in value.values)
    return value


def _block_builtin(fn):
    """``fn`` marked as Triton builtins are (the interpreter passes them its semantic), flagged as ours."""
    import triton.language as tl
    wrapped = tl.core.builtin(fn)
    wrapped._swizzleperf_block_pointers = True
    return wrapped


def _as_tuple(value) -> tuple:
    value = _unwrapped(value)
    return tuple(value) if isinstance(value, tuple) else (value,)


def _offsets(offsets) -> tuple:
    """Block offsets as Triton 3.8 and earlier take them: ints or 32-bit integer scalars."""
    import triton.language as tl
    offsets = _as_tuple(offsets)
    for offset in offsets:
        if isinstance(offset, tl.tensor) and offset.dtype not in (tl.int32, tl.uint32, tl.int16, tl.int8, tl.int1):
            raise ValueError(f"Block pointers only support 32 bit offsets, got one of {offset.dtype}")
    return offsets


def _make_block_ptr(base, shape, strides, offsets, block_shape, order=None, _semantic=None):
    import triton.language as tl
    if not isinstance(base, tl.tensor) or not base.type.is_ptr() or base.type.element_ty.is_block():
        raise ValueError("Expected `base` to be a pointer type (but not a block pointer type or others)")
    if base.type.element_ty == tl.int1:   # as Triton: an int1 block reads and writes int8
        base = tl.core.cast(base, tl.pointer_type(tl.int8), _semantic=_semantic)
    block_shape = _as_tuple(block_shape)
    if not all(isinstance(b, int) and -2 ** 31 <= b < 2 ** 31 for b in block_shape):
        raise ValueError("Expected a list of constant integers (`int32_t` range) in `block_shape`")
    order = _as_tuple(order if order is not None else tuple(range(len(block_shape))))
    if sorted(order) != list(range(len(order))):
        raise ValueError("Expected a permutation of (0, 1, ..., len(order)-1) in order")
    if len(order) != len(block_shape):
        raise ValueError("Expected `order` to have one entry per dimension of `block_shape`")
    return _BlockPointer(base, _as_tuple(shape), _as_tuple(strides), _offsets(offsets), block_shape, _semantic)


def _advance(base, offsets, _semantic=None):
    if not isinstance(base, _BlockPointer):
        raise TypeError("tl.advance takes a block pointer (tl.make_block_ptr)")
    deltas = _offsets(offsets)
    if len(deltas) != len(base.offsets):
        raise ValueError(f"tl.advance: {len(deltas)} offsets for a block pointer of {len(base.offsets)} dimensions")
    return _BlockPointer(base.base, base.shape, base.strides, tuple(o + d for o, d in zip(base.offsets, deltas)),
                         base.block_shape, _semantic or base._semantic)


def _checked_dimensions(boundary_check, rank: int) -> set:
    """``boundary_check`` as Triton 3.8 and earlier read it (a bare 0 or an empty one: none)."""
    if not boundary_check:
        return set()
    dims = [int(d) for d in _as_tuple(boundary_check)]
    if any(d < 0 or d >= rank for d in dims):
        raise ValueError(f"boundary_check {dims} names a dimension outside the block's {rank}")
    if len(dims) != len(set(dims)):
        raise ValueError("Duplicate dimension in `boundary_check`")
    return set(dims)


def _pointers(block: _BlockPointer, boundary_check, _semantic):
    """``(pointers, mask)`` of a block pointer's elements, in 64-bit arithmetic (an offset near 2**31
    plus the block's index does not wrap); mask None where nothing is checked."""
    import triton.language as tl
    core = tl.core
    rank = len(block.block_shape)
    checked = _checked_dimensions(_unwrapped(boundary_check), rank)
    pointers, mask = block.base, None
    for d, (size, stride, offset, extent) in enumerate(zip(block.shape, block.strides, block.offsets,
                                                          block.block_shape)):
        index = core.cast(core.arange(0, extent, _semantic=_semantic), tl.int64, _semantic=_semantic) + offset
        others = [a for a in range(rank) if a != d]
        if others:
            index = core.expand_dims(index, others, _semantic=_semantic)
        pointers = pointers + index * stride
        if d in checked:
            inside = (index >= 0) & (index < size)
            mask = inside if mask is None else mask & inside
    if rank and pointers.type.is_block() and list(pointers.shape) != list(block.block_shape):
        pointers = core.broadcast_to(pointers, *block.block_shape, _semantic=_semantic)
    if mask is not None and list(mask.shape) != list(block.block_shape):
        mask = core.broadcast_to(mask, *block.block_shape, _semantic=_semantic)
    return pointers, mask


def _block_load(original):
    def load(pointer, mask=None, other=None, boundary_check=(), padding_option="", cache_modifier="",
             eviction_policy="", volatile=False, _semantic=None):
        options = dict(cache_modifier=cache_modifier, eviction_policy=eviction_policy, volatile=volatile)
        padding_option = _unwrapped(padding_option)
        if not isinstance(pointer, _BlockPointer):
            if _unwrapped(boundary_check) or padding_option:
                raise ValueError("`boundary_check` and `padding_option` apply to block pointers only "
                                 "(tl.make_block_ptr), not to a tensor of pointers")
            return original(pointer, mask, other, **options, _semantic=_semantic)
        if _unwrapped(mask) is not None or _unwrapped(other) is not None:
            raise ValueError("`mask` and `other` arguments cannot be specified for loading block pointers")
        if padding_option not in ("", "zero", "nan"):
            raise ValueError(f"Padding option {padding_option} not supported")
        if padding_option == "nan" and pointer.element_ty.is_int():
            raise ValueError("Padding option `nan` is not supported for integer block pointers")
        pointers, checked = _pointers(pointer, boundary_check, _semantic)
        fill = None if checked is None or not padding_option else (0.0 if padding_option == "zero" else float("nan"))
        return original(pointers, checked, fill, **options, _semantic=_semantic)
    return _block_builtin(load)


def _block_store(original):
    def store(pointer, value, mask=None, boundary_check=(), cache_modifier="", eviction_policy="", _semantic=None):
        import triton.language as tl
        options = dict(cache_modifier=cache_modifier, eviction_policy=eviction_policy)
        if not isinstance(pointer, _BlockPointer):
            if _unwrapped(boundary_check):
                raise ValueError("`boundary_check` applies to block pointers only (tl.make_block_ptr), not to a "
                                 "tensor of pointers")
            return original(pointer, value, mask, **options, _semantic=_semantic)
        if _unwrapped(mask) is not None:
            raise ValueError("`mask` and `other` arguments cannot be specified for storing through block pointers")
        if isinstance(value, tl.tensor) and value.type.is_block():   # as Triton 3.8 and earlier check it
            if list(value.shape) != list(pointer.block_shape):
                raise ValueError(f"Block shape({list(pointer.block_shape)}) and value shape({list(value.shape)}) "
                                 f"mismatch")
            if value.dtype != pointer.element_ty:
                raise ValueError(f"Block element type({pointer.element_ty}) and value element type({value.dtype}) "
                                 f"mismatch")
        pointers, checked = _pointers(pointer, boundary_check, _semantic)
        return original(pointers, value, checked, **options, _semantic=_semantic)
    return _block_builtin(store)


def _logical(op: str):
    """``a and later()`` (``or``) as compiled Triton means it: elementwise where either is a tensor."""
    def truth(value):
        import triton.language as tl
        if isinstance(value, tl.tensor):
            return value if value.dtype == tl.int1 else value != 0
        return bool(value)

    def apply(a, later):
        import triton.language as tl
        if not isinstance(a, tl.tensor):
            return (a and later()) if op == "and" else (a or later())
        b = later()
        return truth(a) & truth(b) if op == "and" else truth(a) | truth(b)
    return apply


# -- libdevice under the interpreter --------------------------------------------------------------

#: libdevice functions run through numpy under the interpreter (no Triton's interpreter runs
#: libdevice: 3.7.1's, 3.8.0's and 3.9.0's ``create_extern_elementwise`` raise, and 3.9.0's
#: ``triton.language.extra.libdevice`` stubs return None), each the function of its name.
LIBDEVICE = {
    "tanh": "tanh", "exp": "exp", "exp2": "exp2", "log": "log", "log2": "log2", "sqrt": "sqrt",
    "pow": "power", "sin": "sin", "cos": "cos", "floor": "floor", "ceil": "ceil", "abs": "abs",
    "fabs": "abs", "isnan": "isnan", "isinf": "isinf", "rint": "rint", "trunc": "trunc",
    "fmax": "fmax", "fmin": "fmin", "atan": "arctan", "atan2": "arctan2", "asin": "arcsin", "acos": "arccos",
    "sinh": "sinh", "cosh": "cosh", "log1p": "log1p", "expm1": "expm1", "rsqrt": None, "fast_expf": "exp",
}


def interpreter_libdevice() -> list:
    """Under ``TRITON_INTERPRET=1``, the LIBDEVICE functions of ``triton.language.extra.libdevice``
    (and its ``cuda`` / ``hip`` modules) replaced by numpy ones in the interpreter's terms, before
    the app imports them by name (``from triton.language.extra.libdevice import tanh``). The hook
    installs them in the app's process and the generated module in verification's, so that both
    compute the same bits. Returns the modules patched."""
    import importlib
    if os.environ.get("TRITON_INTERPRET") != "1":
        return []
    patched = []
    for name in ("triton.language.extra.libdevice", "triton.language.extra.cuda.libdevice",
                 "triton.language.extra.hip.libdevice"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        for fn, numpy_name in LIBDEVICE.items():
            if hasattr(module, fn):
                setattr(module, fn, _numpy_elementwise(fn, numpy_name))
        patched.append(name)
    return patched


def _numpy_elementwise(name: str, numpy_name):
    import numpy as np

    def apply(*args, _semantic=None, **kwargs):
        import triton.language as tl
        from triton.runtime.interpreter import TensorHandle
        tensors = [a for a in args if isinstance(a, tl.tensor)]
        datas = [a.handle.data if isinstance(a, tl.tensor) else a for a in args]
        floating = [t for t in tensors if t.dtype.is_floating()]
        out_type = (floating or tensors)[0].type if (floating or tensors) else None
        if out_type is not None and not out_type.scalar.is_floating():
            out_type = tl.block_type(tl.float32, out_type.shape) if out_type.is_block() else tl.float32
        with np.errstate(all="ignore"):
            if numpy_name is None:   # rsqrt
                result = 1.0 / np.sqrt(datas[0])
            else:
                result = getattr(np, numpy_name)(*datas)
        if out_type is None:
            return result
        scalar = out_type.scalar
        numpy_dtype = {tl.float16: np.float16, tl.float32: np.float32, tl.float64: np.float64}.get(scalar, np.float32)
        if name in ("isnan", "isinf"):
            scalar, numpy_dtype = tl.int1, np.bool_
            out_type = tl.block_type(tl.int1, out_type.shape) if out_type.is_block() else tl.int1
        return tl.tensor(TensorHandle(np.asarray(result).astype(numpy_dtype), scalar), out_type)
    apply.__name__ = name
    return apply
