"""The hook ``swizzleperf optimize --app`` installs in the user's process (agent/capture/capture.py copies
this file as ``sitecustomize.py`` into a temporary folder on ``PYTHONPATH``). Self-contained: the
app's interpreter needs only the standard library, torch and triton; nothing of swizzleperf.

Two jobs, each switched on by environment variables:

- ``SWIZZLEPERF_CAPTURE_KERNEL`` (a kernel's function name) and ``SWIZZLEPERF_CAPTURE_DIR``: once
  ``triton`` is imported, wrap ``JITFunction.run`` (compiled) and ``InterpretedFunction.run``
  (``TRITON_INTERPRET=1``, where the JIT's launch hooks do not fire), which every launch goes
  through, the autotuner's included (it calls ``self.fn.run(*args, **config.all_kwargs(), ...)``:
  the arguments seen there are the resolved ones). Launches the autotuner makes while it
  benchmarks are not captured (``Autotuner._bench`` is wrapped to mark them); under the
  interpreter an autotuner without a ``do_bench`` of the app's own benchmarks nothing (Triton's
  needs a GPU driver) and takes its first config, and the snapshot says which config was taken and
  why. Of the kernel's launches the one with the most programs (the first of equals) is snapshot:
  its tensor arguments before the launch (storage spans, so that views, strides and aliasing
  survive) and the tensors it changed after it; then two replays on copies tell write-only outputs
  (same result with the output poisoned first) from read-modify-write ones, and whether the launch
  is deterministic.
  Written to the folder: ``launch-<pid>.json`` and ``tensors-<pid>.pt`` (torch.save), and at exit
  ``seen-<pid>.json`` (every kernel launched, with counts).
- ``SWIZZLEPERF_SUBSTITUTE`` (JSON ``{original path: patched path}``): a module whose file is an
  original is executed from the patched file instead, ``__file__`` left as the original (the
  user's test command runs against the optimized kernel this way).
"""
from __future__ import annotations

import atexit
import dataclasses
import importlib.abc
import importlib.machinery
import importlib.util
import inspect
import json
import math
import os
import sys
import threading

KERNEL_ENV, DIR_ENV, SUBSTITUTE_ENV = "SWIZZLEPERF_CAPTURE_KERNEL", "SWIZZLEPERF_CAPTURE_DIR", "SWIZZLEPERF_SUBSTITUTE"
SNAPSHOT_ALIGN = 128  # bytes: a copied span starts this aligned, so data pointers keep their alignment


class _State(threading.local):
    benchmarking = 0      # inside Autotuner._bench
    autotuners: list      # Autotuner.run frames (the config it picked is the innermost's best_config)
    busy = False          # replaying: launches are not captured

    def __init__(self):
        self.autotuners = []


_state = _State()
_seen: dict = {}
_best = {"programs": -1, "launches": 0}


# -- post-import hook ------------------------------------------------------------------------------

class _AfterImport(importlib.abc.MetaPathFinder):
    """Calls ``callback`` right after module ``name`` has been executed (the first import)."""

    def __init__(self, name: str, callback):
        self.name, self.callback, self.done = name, callback, False

    def find_spec(self, fullname, path=None, target=None):
        if fullname != self.name or self.done:
            return None
        self.done = True
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None:
            return None
        original = spec.loader.exec_module

        def exec_module(module):
            original(module)
            self.callback()
        spec.loader.exec_module = exec_module
        return spec


class _Substitute(importlib.abc.MetaPathFinder):
    """Executes the patched file in place of an original one."""

    def __init__(self, mapping: dict):
        self.mapping = {os.path.realpath(k): v for k, v in mapping.items()}

    def find_spec(self, fullname, path=None, target=None):
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or not spec.origin or os.path.realpath(spec.origin) not in self.mapping:
            return None
        return importlib.util.spec_from_loader(
            fullname, _PatchedLoader(spec.origin, self.mapping[os.path.realpath(spec.origin)]), origin=spec.origin)


class _PatchedLoader(importlib.abc.Loader):
    def __init__(self, original: str, patched: str):
        self.original, self.patched = original, patched

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        with open(self.patched) as f:
            code = compile(f.read(), self.patched, "exec")  # Triton reads the kernel's source by this name
        module.__file__ = self.original
        exec(code, module.__dict__)


# -- the launch hook -------------------------------------------------------------------------------

def _patch_triton() -> None:
    from triton.runtime import autotuner, interpreter, jit
    jit.JITFunction.run = _wrap_run(jit.JITFunction.run)
    interpreter.InterpretedFunction.run = _wrap_run(interpreter.InterpretedFunction.run)
    run, bench = autotuner.Autotuner.run, autotuner.Autotuner._bench

    def autotuner_run(self, *args, **kwargs):
        _state.autotuners.append(self)
        try:
            return run(self, *args, **kwargs)
        finally:
            _state.autotuners.pop()

    def autotuner_bench(self, *args, **kwargs):
        self._swizzleperf_benched = getattr(self, "_swizzleperf_benched", 0) + 1
        if _untimed(self):   # every config "takes" the same time: the autotuner keeps the first
            self._swizzleperf_untimed = True
            return [0.0, 0.0, 0.0]
        _state.benchmarking += 1
        try:
            return bench(self, *args, **kwargs)
        finally:
            _state.benchmarking -= 1
    autotuner.Autotuner.run, autotuner.Autotuner._bench = autotuner_run, autotuner_bench


def _untimed(autotuner) -> bool:
    """Under the interpreter (``TRITON_INTERPRET=1``) Triton's default benchmark needs a GPU driver
    and fails ("0 active drivers"): an autotuner without a ``do_bench`` of the app's own then times
    nothing and takes the first of its configs (after the app's own pruning)."""
    return os.environ.get("TRITON_INTERPRET") == "1" and getattr(autotuner, "_do_bench", None) is None


def _autotuner_choice(autotuner) -> str:
    """Which of an autotuner's configs the captured launch ran, and why (one phrase)."""
    total = len(getattr(autotuner, "configs", []) or [])
    timed = getattr(autotuner, "_swizzleperf_benched", 0)
    pruned = f", {timed} left by its pruning" if timed and timed < total else ""
    if total <= 1:
        return "its only config"
    if getattr(autotuner, "_swizzleperf_untimed", False):
        return (f"the first of its {total} configs{pruned}: Triton's benchmark needs a GPU, so under the "
                f"interpreter no config was timed")
    if timed == 0:
        return f"one of its {total} configs that the app's pruning left alone (nothing to time)"
    how = "the app's own do_bench" if getattr(autotuner, "_do_bench", None) is not None else "Triton's benchmark"
    return f"the fastest of its {total} configs{pruned} by {how}, as the app ran it"


def _wrap_run(original):
    def run(self, *args, grid, warmup, **kwargs):
        name = getattr(getattr(self, "fn", None), "__name__", "?")
        if not warmup and not _state.busy and not _state.benchmarking:
            _seen[name] = _seen.get(name, 0) + 1
        if warmup or _state.busy or _state.benchmarking or name != os.environ.get(KERNEL_ENV):
            return original(self, *args, grid=grid, warmup=warmup, **kwargs)
        return _capture(original, self, args, grid, kwargs)
    run.__wrapped__ = original
    return run


def _capture(original, jit_fn, args, grid, kwargs):
    fn = jit_fn.fn
    signature = inspect.signature(fn)
    bound = signature.bind_partial(*args, **{k: v for k, v in kwargs.items() if k in signature.parameters})
    bound.apply_defaults()
    values = dict(bound.arguments)
    options = {k: v for k, v in kwargs.items() if k not in signature.parameters}
    sizes = tuple(int(g) for g in (grid({**options, **values}) if callable(grid) else grid))
    programs = math.prod(sizes)
    _best["launches"] += 1
    if programs <= _best["programs"]:
        return original(jit_fn, *args, grid=grid, warmup=False, **kwargs)
    import torch
    tensors = {k: v for k, v in values.items() if isinstance(v, torch.Tensor)}
    tensors.update({base_name(k): v.base for k, v in values.items()
                    if _is_descriptor(v) and isinstance(v.base, torch.Tensor)})
    storages, layout = _snapshot(tensors)
    result = original(jit_fn, *args, grid=grid, warmup=False, **kwargs)
    replay = _Replay(original, jit_fn, args, kwargs, grid, list(signature.parameters), storages, layout, tensors)
    _state.busy = True
    try:
        written = replay.written()
        outputs = {k: tensors[k].detach().cpu().clone() for k in tensors if k in written}
        roles = replay.roles(outputs)
    finally:
        _state.busy = False
    _best["programs"] = programs
    _write(fn, values, options, sizes, storages, layout, outputs, roles)
    return result


def _snapshot(tensors: dict) -> tuple[list, dict]:
    """Copies (CPU, uint8) of the storage spans the tensors cover, one per storage, and each
    tensor's place in its copy: ``{name: (copy index, byte offset, dtype, size, stride)}``."""
    import torch
    groups: dict = {}
    for name, t in tensors.items():
        key = t.untyped_storage().data_ptr()
        start = t.storage_offset() * t.element_size()
        extent = (1 + sum((s - 1) * st for s, st in zip(t.shape, t.stride()))) * t.element_size() if t.numel() else 0
        groups.setdefault(key, []).append((name, start, start + extent, t))
    storages, layout = [], {}
    for members in groups.values():
        lo = min(m[1] for m in members) // SNAPSHOT_ALIGN * SNAPSHOT_ALIGN
        hi = max(m[2] for m in members)
        storage = members[0][3].untyped_storage()
        whole = torch.empty(0, dtype=torch.uint8, device=members[0][3].device).set_(storage)
        storages.append(whole[lo:hi].detach().cpu().clone())
        for name, start, _, t in members:
            layout[name] = (len(storages) - 1, start - lo, t.dtype, tuple(t.shape), tuple(t.stride()))
    return storages, layout


def _view(storages: list, place: tuple, device, buffers: dict | None = None):
    """The tensor at ``place`` over a device copy of its storage span (``buffers`` shares one copy
    between the tensors of a storage; without it, a fresh copy)."""
    import torch
    index, offset, dtype, size, stride = place
    if buffers is None or index not in buffers:
        buffer = storages[index].to(device, copy=True)
        if buffers is not None:
            buffers[index] = buffer
    else:
        buffer = buffers[index]
    itemsize = torch.empty(0, dtype=dtype).element_size()
    return torch.empty(0, dtype=dtype, device=device).set_(buffer.untyped_storage(), offset // itemsize, size, stride)


def _same(a, b) -> bool:
    """Bitwise equality (NaN equals NaN)."""
    return a.shape == b.shape and bool((_bits(a) == _bits(b)).all())


def _bits(t):
    import torch
    flat = t.detach().contiguous().reshape(-1)
    return flat.view(torch.uint8) if flat.element_size() > 0 else flat


def _poison(t) -> None:
    import torch
    if t.dtype.is_floating_point:
        t.fill_(float("nan"))
    elif t.dtype != torch.bool:
        t.fill_(torch.iinfo(t.dtype).min)


class _Replay:
    """Launches of the captured kernel on fresh copies of the snapshot (the app's tensors untouched)."""

    def __init__(self, original, jit_fn, args, kwargs, grid, names, storages, layout, tensors):
        self.original, self.jit_fn, self.args, self.kwargs, self.grid = original, jit_fn, args, kwargs, grid
        self.names, self.storages, self.layout, self.tensors = names, storages, layout, tensors

    def launch(self, poisoned=()) -> dict:
        buffers: dict = {}
        copies = {k: _view(self.storages, self.layout[k], t.device, buffers) for k, t in self.tensors.items()}
        for k in poisoned:
            _poison(copies[k])

        def swapped(name, value):
            if _is_descriptor(value) and base_name(name) in copies:
                return rebuilt_descriptor(value, copies[base_name(name)])
            return copies.get(name, value)
        args = [swapped(self.names[i], a) if i < len(self.names) else a for i, a in enumerate(self.args)]
        kwargs = {k: swapped(k, v) for k, v in self.kwargs.items()}
        self.original(self.jit_fn, *args, grid=self.grid, warmup=False, **kwargs)
        return copies

    def written(self) -> list:
        """The tensors the launch writes: those it changed, and the floating-point ones it did not
        change but writes over NaN (the autotuner's benchmark launches, or an earlier launch, may
        have left the result there already); integer tensors it did not change count as inputs
        (poisoning an index array would send the kernel out of bounds)."""
        out = []
        for k, t in self.tensors.items():
            if not _same(t, _view(self.storages, self.layout[k], t.device)):
                out.append(k)
            elif t.dtype.is_floating_point and t.numel():
                import torch
                if not bool(torch.isnan(self.launch(poisoned=[k])[k]).all()):
                    out.append(k)
        return out

    def roles(self, outputs: dict) -> dict:
        """Per output: ``write_only`` (the same result with the outputs poisoned first) and
        ``deterministic`` (a replay on the captured inputs gives the same bits). A kernel whose
        programs wait on each other (atomics in a ``while`` loop) is not replayed with poisoned
        outputs: a poisoned flag would never be raised, and the replay would spin for ever."""
        if not outputs:
            return {}
        plain = self.launch()
        poisoned = None if _synchronizes(self.jit_fn.fn) else self.launch(poisoned=list(outputs))
        return {k: {"write_only": poisoned is not None and _same(poisoned[k].cpu(), expected),
                    "deterministic": _same(plain[k].cpu(), expected)} for k, expected in outputs.items()}


def _synchronizes(fn) -> bool:
    try:
        source = inspect.getsource(fn)
    except (OSError, TypeError):
        return True
    return "atomic_cas" in source or ("while" in source and "atomic_" in source)


def _is_descriptor(value) -> bool:
    """A host tensor descriptor (``triton.tools.tensor_descriptor.TensorDescriptor``: TMA on Hopper)."""
    return type(value).__name__ == "TensorDescriptor" and dataclasses.is_dataclass(value) and hasattr(value, "base")


def base_name(name: str) -> str:
    """The snapshot's name for the tensor under descriptor argument ``name``."""
    return f"{name}.base"


def descriptor_fields(value) -> dict:
    """A descriptor's fields but its base (shape, strides, block shape, padding...) as plain values."""
    return {f.name: ([int(x) for x in getattr(value, f.name)] if f.name in ("shape", "strides", "block_shape")
                     else getattr(value, f.name))
            for f in dataclasses.fields(value) if f.name != "base"}


def rebuilt_descriptor(value, base):
    """``value`` (a descriptor, or its fields as a dict) over another base tensor."""
    if isinstance(value, dict):
        from triton.tools.tensor_descriptor import TensorDescriptor
        known = {f.name for f in dataclasses.fields(TensorDescriptor)}
        return TensorDescriptor(base, **{k: v for k, v in value.items() if k in known})
    return dataclasses.replace(value, base=base)


def _describe(value) -> dict:
    import torch
    if value is None:
        return {"kind": "none"}
    if isinstance(value, torch.Tensor):
        return {"kind": "tensor"}
    if _is_descriptor(value) and isinstance(value.base, torch.Tensor):
        return {"kind": "tensor_descriptor", "base": None, "descriptor": descriptor_fields(value)}
    if type(value).__name__ == "constexpr" and hasattr(value, "value"):
        value = value.value
    if isinstance(value, (bool, int, float, str)):
        return {"kind": "scalar", "value": value}
    if type(value).__name__ in ("dtype", "pointer_type") and type(value).__module__.startswith("triton"):
        return {"kind": "tl_dtype", "value": str(value)}
    return {"kind": "unsupported", "type": f"{type(value).__module__}.{type(value).__qualname__}"}


def _write(fn, values, options, sizes, storages, layout, outputs, roles) -> None:
    import torch
    folder, pid = os.environ[DIR_ENV], os.getpid()
    annotations = {k: str(v) for k, v in getattr(fn, "__annotations__", {}).items()}
    params, bases = [], []
    for name, value in values.items():
        entry = {"name": name, "constexpr": "constexpr" in annotations.get(name, ""), **_describe(value)}
        if entry["kind"] == "tensor":
            entry.update(_placed(name, layout, value))
        elif entry["kind"] == "tensor_descriptor":
            entry["base"] = base_name(name)
            bases.append({"name": base_name(name), "kind": "tensor", **_placed(base_name(name), layout, value.base)})
        params.append(entry)
    autotuner = _state.autotuners[-1] if _state.autotuners else None
    config = getattr(autotuner, "best_config", None)
    launch = {
        "kernel": fn.__name__, "file": os.path.realpath(inspect.getsourcefile(fn)),
        "line": fn.__code__.co_firstlineno, "grid": list(sizes), "programs": math.prod(sizes),
        "launch_index": _best["launches"], "params": params, "descriptor_bases": bases,
        "options": {k: _describe(v).get("value") for k, v in options.items()
                    if _describe(v)["kind"] == "scalar" and k not in ("grid", "warmup")},
        "autotuned": None if config is None else {
            "kwargs": {k: _describe(v).get("value") for k, v in config.kwargs.items()},
            "num_warps": config.num_warps, "num_stages": config.num_stages,
            "choice": _autotuner_choice(autotuner)},
        "globals": _scalar_globals(fn),
        "outputs": [{"name": k, **roles.get(k, {})} for k in outputs],
        "storage_bytes": [int(s.numel()) for s in storages],
        "triton": sys.modules["triton"].__version__, "interpreter": os.environ.get("TRITON_INTERPRET") == "1",
        "pid": pid,
    }
    torch.save({"storages": storages, "outputs": outputs}, os.path.join(folder, f"tensors-{pid}.pt"))
    with open(os.path.join(folder, f"launch-{pid}.json"), "w") as f:
        json.dump(launch, f, indent=1)


def _placed(name: str, layout: dict, tensor) -> dict:
    """Where a snapshot tensor lies in its storage copy, and what it is."""
    index, offset, dtype, size, stride = layout[name]
    return dict(storage=index, byte_offset=offset, dtype=str(dtype).replace("torch.", ""),
                shape=list(size), stride=list(stride), device=str(tensor.device))


def _scalar_globals(fn) -> dict:
    """Module-level numbers the kernel reads (a constexpr global such as ``GROUP_M = 8``)."""
    out = {}
    for name in fn.__code__.co_names:
        value = fn.__globals__.get(name)
        if type(value).__name__ == "constexpr" and hasattr(value, "value"):
            value = value.value
        if isinstance(value, (bool, int, float)):
            out[name] = value
    return out


def _write_seen() -> None:
    folder = os.environ.get(DIR_ENV)
    if folder and os.path.isdir(folder):
        with open(os.path.join(folder, f"seen-{os.getpid()}.json"), "w") as f:
            json.dump(_seen, f)


def install() -> None:
    """Switch on what the environment asks for (see the module docstring)."""
    if os.environ.get(SUBSTITUTE_ENV):
        sys.meta_path.insert(0, _Substitute(json.loads(os.environ[SUBSTITUTE_ENV])))
    if os.environ.get(KERNEL_ENV) and os.environ.get(DIR_ENV):
        if "triton" in sys.modules:
            _patch_triton()
        else:
            sys.meta_path.insert(0, _AfterImport("triton", _patch_triton))
        atexit.register(_write_seen)
