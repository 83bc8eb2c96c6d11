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
  survive) and the tensors it changed after it; then replays on copies tell outputs the kernel
  fully overwrites (the same bits with the outputs poisoned first, by two different poisons) from
  those it adds into or leaves partly alone, and whether the launch is deterministic. Under the
  interpreter a launch slower than ``SWIZZLEPERF_SLOW_REPLAY_S`` (30 s) is not replayed: every output
  then starts from its captured contents in verification, and the record says so.
  Written to the folder: ``launch-<pid>.json`` and ``tensors-<pid>.pt`` (torch.save), and at exit
  ``seen-<pid>.json`` (every kernel launched, with counts).
- ``SWIZZLEPERF_PROFILE`` (``1``, or ``rocprofv3`` where that tool traces the app from outside) and
  ``SWIZZLEPERF_CAPTURE_DIR``: every kernel's launches (key: function name, file, line) counted,
  the largest grid kept with its scalar arguments and pointer names (what the lift needs), and
  the time: under the interpreter the wall time of each launch (``measured:interpreter-wall``, a
  CPU figure that says nothing of GPU time), on a CUDA GPU torch.profiler's CUPTI activity
  started at the first launch and read at exit, an autotuner's benchmark dispatches left out
  (paired with the launches in order) (``measured:cupti``; where it fails to start,
  each launch timed between ``torch.cuda.synchronize()`` calls, ``measured:cuda-synchronized-wall``).
  Written at exit: ``profile-<pid>.json`` (agent/capture/bottleneck.py reads it).
- Under the interpreter, with ``SWIZZLEPERF_CAPTURE_DIR``: ``running-<pid>.json`` says which
  launch the process is in (kernel, file, line, grid) and how many of its programs have run, rewritten
  every few seconds and removed when the launch returns, so that an app stopped at its time limit
  can be told where it was (agent/capture/capture.py's ``where_stopped``).
- ``TRITON_INTERPRET=1`` on a machine where torch sees no GPU: the app's CUDA tensors are made on
  the CPU (agent/capture/cuda_on_cpu.py, copied beside this file as ``swizzleperf_cuda_on_cpu``).
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
import time

KERNEL_ENV, DIR_ENV, SUBSTITUTE_ENV = "SWIZZLEPERF_CAPTURE_KERNEL", "SWIZZLEPERF_CAPTURE_DIR", "SWIZZLEPERF_SUBSTITUTE"
PROFILE_ENV = "SWIZZLEPERF_PROFILE"
CUDA_ON_CPU_MODULE = "swizzleperf_cuda_on_cpu"   # agent/capture/cuda_on_cpu.py beside the sitecustomize
# an interpreted launch slower than this (seconds) is not replayed
SLOW_REPLAY_S = float(os.environ.get("SWIZZLEPERF_SLOW_REPLAY_S", "30"))
SNAPSHOT_ALIGN = 128  # bytes: a copied span starts this aligned, so data pointers keep their alignment


class _State(threading.local):
    benchmarking = 0      # inside Autotuner._bench
    autotuners: list      # Autotuner.run frames (the config it picked is the innermost's best_config)
    before_bench: list    # per frame: the captured kernel's tensors before its first benchmark launch
    busy = False          # replaying: launches are not captured

    def __init__(self):
        self.autotuners = []
        self.before_bench = []


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
    set_grid_idx = getattr(interpreter.InterpreterBuilder, "set_grid_idx", None)
    if set_grid_idx is not None:
        def counted_grid_idx(self, *args, **kwargs):   # one call per program the interpreter runs
            _running["done"] += 1
            if _running.get("path") and time.monotonic() - _running["written"] > RUNNING_EVERY_S:
                _write_running()
            return set_grid_idx(self, *args, **kwargs)
        interpreter.InterpreterBuilder.set_grid_idx = counted_grid_idx
    run, bench = autotuner.Autotuner.run, autotuner.Autotuner._bench

    def autotuner_run(self, *args, **kwargs):
        _state.autotuners.append(self)
        _state.before_bench.append(None)
        try:
            return run(self, *args, **kwargs)
        finally:
            _state.autotuners.pop()
            _state.before_bench.pop()

    def autotuner_bench(self, *args, **kwargs):
        self._swizzleperf_benched = getattr(self, "_swizzleperf_benched", 0) + 1
        if _untimed(self):   # every config "takes" the same time: the autotuner keeps the first
            self._swizzleperf_untimed = True
            return [0.0, 0.0, 0.0]
        if _state.before_bench and _state.before_bench[-1] is None and not _state.busy and _targets(self):
            _state.before_bench[-1] = _tensor_copies(self, args, kwargs)
        _state.benchmarking += 1
        try:
            return bench(self, *args, **kwargs)
        finally:
            _state.benchmarking -= 1
    autotuner.Autotuner.run, autotuner.Autotuner._bench = autotuner_run, autotuner_bench


def _tuned_fn(autotuner):
    """The Python function of the kernel ``autotuner`` tunes (under any ``heuristics``), or None."""
    return getattr(autotuner, "base_fn", None) or getattr(getattr(autotuner, "fn", None), "fn", None)


def _targets(autotuner) -> bool:
    """Whether ``autotuner`` tunes the kernel this process captures (``KERNEL_ENV``)."""
    return bool(os.environ.get(KERNEL_ENV)) and getattr(_tuned_fn(autotuner), "__name__", None) == os.environ.get(KERNEL_ENV)


def _tensor_copies(autotuner, args: tuple, kwargs: dict) -> list:
    """``[(tensor, its contents on the CPU)]`` of the captured kernel's tensor arguments it may
    store through (``_stored_params``; every tensor where its source does not tell), before its
    autotuner's first benchmark launch (``_Replay.written``)."""
    import torch
    fn = _tuned_fn(autotuner)
    names = list(getattr(autotuner, "arg_names", None) or [])
    stored = _stored_params(fn) if fn is not None else None
    named = list(zip(names, args)) + list(kwargs.items())
    if len(names) < len(args):
        stored = None       # positions without names: every tensor
        named = [(None, v) for v in args] + list(kwargs.items())
    return [(v, v.detach().cpu().clone()) for name, v in named
            if isinstance(v, torch.Tensor) and (stored is None or name in stored)]


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
        grid = _tuple_grid(grid)
        counted = not warmup and not _state.busy and not _state.benchmarking
        if counted:
            _seen[name] = _seen.get(name, 0) + 1
        if os.environ.get(PROFILE_ENV) and not warmup and not _state.busy:
            _dispatches.setdefault(name, []).append(counted)   # False: an autotuner's benchmark launch
        with _running_launch(self, args, grid, kwargs, counted and not warmup):
            if counted and os.environ.get(PROFILE_ENV):
                return _profiled(original, self, args, grid, kwargs)
            if not counted or name != os.environ.get(KERNEL_ENV):
                return original(self, *args, grid=grid, warmup=warmup, **kwargs)
            return _capture(original, self, args, grid, kwargs)
    run.__wrapped__ = original
    return run


RUNNING_PREFIX = "running-"   # running-<pid>.json: the interpreted launch the process is in
RUNNING_EVERY_S = 2.0
_running: dict = {"path": None, "done": 0, "written": 0.0}


class _running_launch:
    """Under the interpreter (with the capture folder): ``running-<pid>.json`` for the launch's
    duration, outermost launch only (a replay inside a capture keeps the capture's record)."""

    def __init__(self, jit_fn, args, grid, kwargs, counted: bool):
        self.active = (counted and os.environ.get("TRITON_INTERPRET") == "1" and bool(os.environ.get(DIR_ENV))
                       and _running["path"] is None)
        if self.active:
            self.record = _launch_record(jit_fn, args, grid, kwargs)

    def __enter__(self):
        if self.active:
            _running.update(path=os.path.join(os.environ[DIR_ENV], f"{RUNNING_PREFIX}{os.getpid()}.json"),
                            done=0, started=time.time(), record=self.record)
            _write_running()
        return self

    def __exit__(self, *exc):
        if self.active:
            path, _running["path"] = _running["path"], None
            try:
                os.unlink(path)
            except OSError:
                pass
        return False


def _launch_record(jit_fn, args, grid, kwargs) -> dict:
    fn = getattr(jit_fn, "fn", None)
    record = {"kernel": getattr(fn, "__name__", "?"), "file": "?", "line": 0, "grid": [], "programs": 0}
    try:
        record.update(file=os.path.realpath(inspect.getsourcefile(fn)), line=fn.__code__.co_firstlineno)
        _, sizes = _resolved(fn, args, grid, kwargs)
        record.update(grid=list(sizes), programs=math.prod(sizes))
    except Exception:   # the record is a courtesy: the launch itself must go on as the app made it
        pass
    return record


def _write_running() -> None:
    path = _running["path"]
    _running["written"] = time.monotonic()
    data = {**_running["record"], "done": _running["done"], "started": _running["started"], "now": time.time()}
    try:
        with open(path + ".tmp", "w") as f:
            json.dump(data, f)
        os.replace(path + ".tmp", path)
    except OSError:
        pass


def _tuple_grid(grid):
    """A grid as a tuple: a list one (``kernel[[B, N]](...)``) runs compiled, but Triton's interpreter
    (3.9) adds a tuple to it and fails ('can only concatenate list (not "tuple") to list')."""
    if isinstance(grid, list):
        return tuple(grid)
    if callable(grid):
        return lambda meta, grid=grid: (lambda g: tuple(g) if isinstance(g, list) else g)(grid(meta))
    return grid


def _capture(original, jit_fn, args, grid, kwargs):
    fn = jit_fn.fn
    if inspect.getsourcefile(fn) is None:   # was a TypeError of the hook's inside the app (#41)
        raise RuntimeError(f"swizzleperf cannot capture {fn.__name__}: it has no source file (defined by exec "
                           f"or in an interactive session); define it in a .py file")
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
    start = time.perf_counter()
    result = original(jit_fn, *args, grid=grid, warmup=False, **kwargs)
    _best["wall_s"] = time.perf_counter() - start   # the replays and every verification launch cost as much
    replay = _Replay(original, jit_fn, args, kwargs, grid, list(signature.parameters), storages, layout, tensors)
    slow = os.environ.get("TRITON_INTERPRET") == "1" and _best["wall_s"] > SLOW_REPLAY_S
    _state.busy = True
    try:
        written = replay.written(probe=not slow, before_bench=_state.before_bench[-1] if _state.before_bench else None)
        outputs = {k: tensors[k].detach().cpu().clone() for k in tensors if k in written}
        roles = {k: {"write_only": False, "deterministic": True} for k in outputs} if slow else replay.roles(outputs)
    finally:
        _state.busy = False
    _best["unreplayed"] = slow
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
        info = torch.iinfo(t.dtype)   # the verifier's integer poison (agent/verification/stages.poison_value)
        t.fill_(info.min if info.min < 0 else info.max)


def _other_poison(t) -> None:
    """A second poison, different from :func:`_first_poison`'s in every element (bytes 0x5A; True for
    booleans): an element a launch leaves alone keeps one of two different values."""
    import torch
    if t.dtype == torch.bool:
        t.fill_(True)
    elif t.numel():
        t.copy_(torch.full((t.element_size(),), 0x5A, dtype=torch.uint8).view(t.dtype).expand(t.shape))


def _first_poison(t) -> None:
    """:func:`_poison`, and False for booleans."""
    if str(t.dtype) == "torch.bool":
        t.fill_(False)
    else:
        _poison(t)


def _holds_poison(t) -> bool:
    import torch
    if t.dtype.is_floating_point:
        return bool(torch.isnan(t).any())
    if t.dtype == torch.bool:
        return False
    info = torch.iinfo(t.dtype)   # the verifier's integer poison (agent/verification/stages.poison_value)
    return bool((t == (info.min if info.min < 0 else info.max)).any())


class _Replay:
    """Launches of the captured kernel on fresh copies of the snapshot (the app's tensors untouched)."""

    def __init__(self, original, jit_fn, args, kwargs, grid, names, storages, layout, tensors):
        self.original, self.jit_fn, self.args, self.kwargs, self.grid = original, jit_fn, args, kwargs, grid
        self.names, self.storages, self.layout, self.tensors = names, storages, layout, tensors

    def launch(self, poisoned=(), fill=_poison) -> dict:
        buffers: dict = {}
        copies = {k: _view(self.storages, self.layout[k], t.device, buffers) for k, t in self.tensors.items()}
        for k in poisoned:
            fill(copies[k])

        def swapped(name, value):
            if _is_descriptor(value) and base_name(name) in copies:
                return rebuilt_descriptor(value, copies[base_name(name)])
            return copies.get(name, value)
        args = [swapped(self.names[i], a) if i < len(self.names) else a for i, a in enumerate(self.args)]
        kwargs = {k: swapped(k, v) for k, v in self.kwargs.items()}
        self.original(self.jit_fn, *args, grid=self.grid, warmup=False, **kwargs)
        return copies

    def written(self, probe: bool = True, before_bench: list | None = None) -> list:
        """The tensors the launch writes: those it changed; those it did not change but the
        autotuner's benchmark launches of this call did (``before_bench``: the tensors as they were
        before the first, ``_tensor_copies``; an int32 product left by the benchmarks, which the
        app's launch rewrites with the same values); and (``probe``) the floating-point ones it did
        not change but writes over NaN (an earlier launch may have left the result there already);
        other integer tensors it did not change count as inputs (poisoning an index array would
        send the kernel out of bounds)."""
        out = []
        stored = _stored_params(self.jit_fn.fn)
        earlier = before_bench or []
        for k, t in self.tensors.items():
            may_store = stored is None or k.split(".")[0] in stored
            if not _same(t, _view(self.storages, self.layout[k], t.device)):
                out.append(k)
            elif may_store and any(e is t and not _same(t.detach().cpu(), copy) for e, copy in earlier):
                out.append(k)
            elif probe and t.dtype.is_floating_point and t.numel() and may_store:
                import torch
                if not bool(torch.isnan(self.launch(poisoned=[k])[k]).all()):
                    out.append(k)
        return out

    def roles(self, outputs: dict) -> dict:
        """Per output: ``write_only`` (the kernel overwrites every element: replays with the outputs
        filled with two different poisons first give the bits of the plain replay; an output it
        adds into, reads, or leaves partly as it was (skipped blocks) is not: verification starts
        it from the captured contents), ``deterministic`` (a replay on the captured inputs gives the
        same bits) and ``holds_poison`` (the result itself holds the poison value: NaN, or the
        integer minimum, written by the kernel or left from before). A kernel whose programs wait
        on each other (atomics in a ``while`` loop) is not replayed with poisoned outputs: a
        poisoned flag would never be raised, and the replay would spin for ever."""
        if not outputs:
            return {}
        plain = self.launch()
        synchronizes = _synchronizes(self.jit_fn.fn)
        first = None if synchronizes else self.launch(poisoned=list(outputs), fill=_first_poison)
        second = None if synchronizes else self.launch(poisoned=list(outputs), fill=_other_poison)
        return {k: {"write_only": first is not None and _same(first[k], plain[k]) and _same(second[k], plain[k]),
                    "deterministic": _same(plain[k].cpu(), expected),
                    **({"holds_poison": True} if _holds_poison(expected) else {})} for k, expected in outputs.items()}


_STORES = {"store", "atomic_add", "atomic_max", "atomic_min", "atomic_and", "atomic_or", "atomic_xor",
           "atomic_xchg", "atomic_cas", "store_tensor_descriptor", "tensor_descriptor_store"}
_PURE = {"load", "make_block_ptr", "advance", "arange", "program_id", "num_programs", "cdiv", "multiple_of",
         "max_contiguous", "range", "static_range", "min", "max", "minimum", "maximum", "where", "zeros", "full",
         "load_tensor_descriptor", "make_tensor_descriptor", "cast", "to", "int", "float", "len"}


def _stored_params(fn):
    """The parameters a kernel may write through (a store or atomic on a pointer derived from
    them, or a call of another function they reach: a helper may store), from its source; None
    where the source cannot be read. Spares the snapshot a full replay per input tensor: the
    interpreter runs a launch of many programs for minutes (issue #42)."""
    import ast
    import textwrap
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError):
        return None
    func = tree.body[0]
    params = {a.arg for a in func.args.args}
    flows = {p: {p} for p in params}

    def reaching(node) -> set:
        return set().union(*(flows.get(n.id, set()) for n in ast.walk(node) if isinstance(n, ast.Name)))
    changed = True
    while changed:   # flow-insensitive: a name carries every parameter any assignment to it does
        changed = False
        for node in ast.walk(func):
            value = getattr(node, "value", None) if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)) else (
                node.iter if isinstance(node, ast.For) else None)
            if value is None:
                continue
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            came = reaching(value)
            for target in targets:
                for name in (n.id for n in ast.walk(target) if isinstance(n, ast.Name)):
                    if not came <= flows.setdefault(name, set()):
                        flows[name] |= came
                        changed = True
    stored = set()
    for node in ast.walk(func):
        if not isinstance(node, ast.Call):
            continue
        callee = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        arguments = list(node.args) + [k.value for k in node.keywords]
        if callee in _STORES:
            receiver = [node.func.value] if isinstance(node.func, ast.Attribute) and callee in ("store",) else []
            stored |= set().union(*(reaching(a) for a in arguments[:1] + receiver))
        elif callee not in _PURE:
            stored |= set().union(*(reaching(a) for a in arguments)) if arguments else set()
    return stored & params


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
        "pid": pid, "launch_wall_s": round(_best.get("wall_s", 0.0), 3), "unreplayed": _best.get("unreplayed", False),
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


# -- the profile mode: every kernel's launches, largest grid and time ------------------------------

_profile: dict = {}   # (name, file, line) -> the kernel's record
_clock: dict = {}     # how launches are timed in this process: source label, note, profiler, sync
_dispatches: dict = {}   # kernel name -> per launch in order: counted (True) or an autotuner's benchmark (False)


def _profiled(original, jit_fn, args, grid, kwargs):
    """One launch in profile mode: counted under its kernel, its grid kept where it is the largest
    yet (with the scalar arguments and pointer names the lift needs), its time taken."""
    fn = jit_fn.fn
    values, sizes = _resolved(fn, args, grid, kwargs)
    entry = _profile_entry(fn)
    entry["calls"] += 1
    if math.prod(sizes) > entry["programs"]:
        described = {k: _describe(v) for k, v in values.items()}
        entry.update(grid=list(sizes), programs=math.prod(sizes),
                     values={k: d["value"] for k, d in described.items() if d["kind"] == "scalar"},
                     pointers=sorted(k for k, d in described.items()
                                     if d["kind"] in ("tensor", "none", "tensor_descriptor")))
    clock = _clock or _start_clock()
    if clock.get("sync"):
        sys.modules["torch"].cuda.synchronize()
    start = time.perf_counter()
    try:
        return original(jit_fn, *args, grid=grid, warmup=False, **kwargs)
    finally:
        if clock.get("sync"):
            sys.modules["torch"].cuda.synchronize()
        entry["wall_s"] += time.perf_counter() - start


def _resolved(fn, args, grid, kwargs) -> tuple:
    """``(arguments by parameter name, grid sizes)`` of a launch (the grid function evaluated)."""
    signature = inspect.signature(fn)
    bound = signature.bind_partial(*args, **{k: v for k, v in kwargs.items() if k in signature.parameters})
    bound.apply_defaults()
    values = dict(bound.arguments)
    options = {k: v for k, v in kwargs.items() if k not in signature.parameters}
    return values, tuple(int(g) for g in (grid({**options, **values}) if callable(grid) else grid))


def _profile_entry(fn) -> dict:
    try:
        where = (os.path.realpath(inspect.getsourcefile(fn)), fn.__code__.co_firstlineno)
    except (TypeError, OSError):
        where = ("?", 0)
    key = (fn.__name__, *where)
    if key not in _profile:
        _profile[key] = {"kernel": fn.__name__, "file": where[0], "line": where[1], "calls": 0, "grid": [],
                         "programs": -1, "values": {}, "pointers": [], "globals": _scalar_globals(fn), "wall_s": 0.0}
    return _profile[key]


def _start_clock() -> dict:
    """How this process times launches, chosen at its first profiled launch (see the docstring)."""
    if os.environ.get("TRITON_INTERPRET") == "1":
        _clock.update(source="measured:interpreter-wall",
                      note="wall time of each launch under Triton's interpreter, on the CPU: says nothing of GPU time")
    elif os.environ.get(PROFILE_ENV) == "rocprofv3":
        _clock.update(source="measured:rocprofv3", note="rocprofv3 --kernel-trace timed the kernels")
    else:
        import torch
        if not torch.cuda.is_available():
            _clock.update(source="measured:launch-wall",
                          note="no GPU visible to torch: the host's time in each launch call")
        else:
            _clock.update(_start_profiler(torch))
    return _clock


def _start_profiler(torch) -> dict:
    label = "measured:roctracer" if getattr(torch.version, "hip", None) else "measured:cupti"
    try:
        from torch.profiler import ProfilerActivity, profile
        profiler = profile(activities=[ProfilerActivity.CUDA])
        profiler.start()
    except Exception as exc:  # noqa: BLE001 -- any profiler failure: time each launch synchronized instead
        return {"source": "measured:cuda-synchronized-wall", "sync": True,
                "note": f"torch.profiler did not start ({type(exc).__name__}: {exc}); each launch timed "
                        f"between torch.cuda.synchronize() calls"}
    atexit.register(_stop_profiler)   # registered after torch's own exit handlers: runs before them
    return {"source": label, "profiler": profiler,
            "note": "GPU time of each kernel from torch.profiler's device activity"}


def device_times(profiler) -> dict:
    """``{kernel name: [(start us, seconds), ...]}`` of the GPU kernels a stopped torch.profiler
    recorded, in start order (Triton names a compiled kernel after its function)."""
    out: dict = {}
    for event in profiler.events():
        kind = getattr(event.device_type, "name", str(event.device_type))
        if not kind.endswith("CPU"):
            out.setdefault(event.name, []).append((event.time_range.start, event.time_range.elapsed_us() * 1e-6))
    return {name: sorted(runs) for name, runs in out.items()}


def _counted_seconds(name: str, runs: list) -> tuple:
    """``(seconds, note)``: the device time of the app's own launches of ``name``, without its
    autotuner's benchmark launches: dispatches paired with the launches in order where their
    counts agree, else the mean dispatch times the app's launches (the note says so)."""
    flags = _dispatches.get(name, [])
    if len(flags) == len(runs):
        return sum(seconds for (_, seconds), kept in zip(runs, flags) if kept), ""
    launches = sum(flags) if flags else len(runs)
    mean = sum(seconds for _, seconds in runs) / len(runs)
    return mean * launches, (f" (the mean of {len(runs)} dispatches x {launches} launches: the dispatches "
                             f"did not pair up with the {len(flags)} launches)")


def _stop_profiler() -> None:
    if "times" in _clock or "stop_error" in _clock:
        return
    try:
        _clock["profiler"].stop()
        _clock["times"] = device_times(_clock["profiler"])
    except Exception as exc:  # noqa: BLE001 -- said in the record: the launch calls' host time stands in
        _clock["stop_error"] = f"{type(exc).__name__}: {exc}"


def _kernel_times(entries: list) -> tuple:
    """Each entry's ``time_s`` and ``source`` from the clock; ``(entries, other device seconds)``."""
    other = None
    if _clock.get("profiler") is not None:
        _stop_profiler()
    if _clock.get("profiler") is None or "stop_error" in _clock:
        if "stop_error" in _clock:
            _clock.update(source="measured:launch-wall", note=f"torch.profiler failed at exit "
                          f"({_clock['stop_error']}): the host's time in each launch call stands in")
        for e in entries:
            e.update(time_s=e["wall_s"], source=_clock.get("source", "measured:launch-wall"))
        return entries, other
    times = _clock["times"]
    names = {e["kernel"] for e in entries}
    for e in entries:
        if e["kernel"] not in times:
            e.update(time_s=None, source=f"unmeasured: {_clock['source']} recorded no GPU kernel named {e['kernel']}")
            continue
        seconds, note = _counted_seconds(e["kernel"], times[e["kernel"]])
        sharing = [x for x in entries if x["kernel"] == e["kernel"]]
        if len(sharing) > 1:
            note += f" (split by calls among {len(sharing)} kernels named {e['kernel']})"
        e.update(time_s=seconds * e["calls"] / max(1, sum(x["calls"] for x in sharing)), source=_clock["source"] + note)
    return entries, sum(s for n, runs in times.items() if n not in names for _, s in runs)


def _write_profile() -> None:
    folder = os.environ.get(DIR_ENV)
    if not (folder and os.path.isdir(folder) and _profile):
        return
    entries, other = _kernel_times(list(_profile.values()))
    record = {"pid": os.getpid(), "source": _clock.get("source"), "note": _clock.get("note"),
              "interpreter": os.environ.get("TRITON_INTERPRET") == "1", "other_device_s": other,
              "triton": getattr(sys.modules.get("triton"), "__version__", None), "kernels": entries}
    with open(os.path.join(folder, f"profile-{os.getpid()}.json"), "w") as f:
        json.dump(record, f, indent=1)


def _write_seen() -> None:
    folder = os.environ.get(DIR_ENV)
    if folder and os.path.isdir(folder):
        with open(os.path.join(folder, f"seen-{os.getpid()}.json"), "w") as f:
            json.dump(_seen, f)


def _cuda_on_cpu() -> None:
    """Under the interpreter with no GPU, the app's CUDA tensors go to the CPU: the mode of
    agent/capture/cuda_on_cpu.py, copied beside this file (as sitecustomize) under CUDA_ON_CPU_MODULE."""
    try:
        module = importlib.import_module(CUDA_ON_CPU_MODULE)
    except ImportError:   # the hook imported as a module of swizzleperf, not as a sitecustomize
        return
    module.install(_AfterImport)


def install() -> None:
    """Switch on what the environment asks for (see the module docstring)."""
    _cuda_on_cpu()
    if os.environ.get(SUBSTITUTE_ENV):
        sys.meta_path.insert(0, _Substitute(json.loads(os.environ[SUBSTITUTE_ENV])))
    if (os.environ.get(KERNEL_ENV) or os.environ.get(PROFILE_ENV)) and os.environ.get(DIR_ENV):
        if "triton" in sys.modules:
            _patch_triton()
        else:
            sys.meta_path.insert(0, _AfterImport("triton", _patch_triton))
        atexit.register(_write_seen)
        if os.environ.get(PROFILE_ENV):
            atexit.register(_write_profile)
