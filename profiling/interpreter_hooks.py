"""The tracer's one contact with Triton's interpreter (``triton.runtime.interpreter``): run a
launch's sampled programs only, skip ``tl.dot``, and report every load and store.

Checked on Triton 3.6 (the GPU machines' image, with NumPy 2.5) and 3.9 (the development machine,
NumPy 2.4), by diffing the two ``interpreter.py`` files and running tests/profiling/test_tracer.py
under each (3.6 in a subprocess, from ``SWIZZLEPERF_TRITON36`` or /tmp/tri36). What is hooked, and
what differs:

- ``GridExecutor.__call__`` (one launch: binds the arguments, patches ``triton.language``, then
  loops over ``self.grid``, called with the bound arguments where callable, calling
  ``interpreter_builder.set_grid_idx``): the same in both. The hook swaps ``self.grid`` for a
  callable that notes the real grid and returns ``(len(pids),)``.
- ``interpreter_builder.create_get_program_id`` / ``create_get_num_programs(axis)`` and
  ``create_dot(a, b, d, ...)``: the same in both.
- ``create_masked_load`` / ``create_masked_store``: the trailing cache arguments differ. 3.6 passes
  ``(cache_modifier, eviction_policy, is_volatile)`` / ``(cache_modifier, eviction_policy)``, 3.9
  ``(cache_policy, is_volatile)`` / ``(cache_policy,)``, and 3.9's tensor-descriptor load passes them
  as keywords (``cache_policy=..., is_volatile=False``). The hooks take ``(ptrs, mask, other,
  *rest, **options)`` / ``(ptrs, value, mask, *rest, **options)`` and pass the rest on unread. Unmasked loads and stores
  and block pointers reach them as well (``create_load``, ``create_tensor_pointer_load`` call them in
  both).
- ``tl.tensor.__index__`` (``range(tl.cdiv(K, BLOCK_K))`` calls it on a scalar argument, which the
  interpreter holds as a 1-element array): 3.6 sets it to ``int(handle.data)``, which NumPy 2.4 and
  later refuse ("only 0-dimensional arrays can be converted to Python scalars";
  triton-lang/triton#9171, fixed by #9172 as ``int(handle.data.squeeze())``, which 3.9 has). The
  hook wraps ``_patch_lang`` (which every launch and device-function call runs) and sets the fixed
  ``__index__`` in the patch scope it returns, so the launch undoes it with the rest; on 3.9 it
  sets what is already there. Every other interpreted run (a worker's numerics, an app on the CPU)
  gets the same fix from kernels/interpreter.py.
"""
from __future__ import annotations

import itertools
from contextlib import contextmanager
from typing import Callable, Iterator

import numpy as np

from swizzleperf.kernels.interpreter import scalar_index


@contextmanager
def sampled_launches(pids: list, on_access: Callable, on_divisor: Callable | None = None) -> Iterator[None]:
    """While open, every interpreted launch runs only the programs ``pids`` (ints, or tuples of
    per-axis program ids), reports program ids and grid size as the real launch would, returns the
    accumulator from ``tl.dot``, and calls ``on_access(launch, index, addrs, itemsize, is_store)``
    before each load and store: the launch's number, the index into ``pids``, the byte addresses
    its mask lets through (int64 array) and the element size in bytes. ``on_divisor(d)``, where
    given, is called with the divisor of every integer division or remainder by a scalar
    (``create_sdiv`` / ``create_udiv`` / ``create_srem`` / ``create_urem``, the same in 3.6 and 3.9):
    ``pid // num_pid_n``, ``row % seqlen``, the digits a kernel splits a program id into."""
    from triton.runtime import interpreter
    builder, executor = interpreter.interpreter_builder, interpreter.GridExecutor
    launch_ids, real = itertools.count(), {}

    def call(self, *args, **kwargs):
        grid, real["launch"] = self.grid, next(launch_ids)

        def sampled(bound_args):  # GridExecutor calls a callable grid with the bound arguments
            real["grid"] = tuple(grid(bound_args) if callable(grid) else grid) + (1, 1, 1)
            return (len(pids),)
        self.grid = sampled
        try:
            return original[executor, "__call__"](self, *args, **kwargs)
        finally:
            self.grid = grid

    def patch_lang(fn):
        scope = original[interpreter, "_patch_lang"](fn)
        scope.set_attr(interpreter.tl.core.tensor, "__index__", scalar_index)
        return scope

    def scalar(value):
        return interpreter.TensorHandle(np.array([value], dtype=np.int32), interpreter.tl.int32)

    def program_id(axis):
        pid = pids[builder.grid_idx[0]]
        return scalar(pid[axis] if isinstance(pid, tuple) else (pid if axis == 0 else 0))

    def report(ptrs, mask, is_store):
        addrs = ptrs.data[mask.data] if mask is not None else ptrs.data.ravel()
        itemsize = max(1, ptrs.get_element_ty().primitive_bitwidth // 8)
        on_access(real["launch"], builder.grid_idx[0], addrs.astype(np.int64), itemsize, is_store)

    def masked_load(ptrs, mask, other, *rest, **options):
        report(ptrs, mask, False)
        return original[builder, "create_masked_load"](ptrs, mask, other, *rest, **options)

    def masked_store(ptrs, value, mask, *rest, **options):
        report(ptrs, mask, True)
        return original[builder, "create_masked_store"](ptrs, value, mask, *rest, **options)

    def dividing(name):
        def divide(lhs, rhs):
            data = getattr(rhs, "data", None)
            if isinstance(data, np.ndarray) and data.size == 1 and data.dtype.kind in "iu":
                on_divisor(int(data.reshape(-1)[0]))
            return original[builder, name](lhs, rhs)
        return divide

    hooks = {(executor, "__call__"): call, (interpreter, "_patch_lang"): patch_lang,
             (builder, "create_get_program_id"): program_id,
             (builder, "create_get_num_programs"): lambda axis: scalar(real["grid"][axis]),
             (builder, "create_masked_load"): masked_load, (builder, "create_masked_store"): masked_store,
             (builder, "create_dot"): lambda a, b, d, *rest: d}  # arithmetic skipped: addresses never use it
    if on_divisor is not None:
        hooks.update({(builder, name): dividing(name) for name in ("create_sdiv", "create_udiv", "create_srem",
                                                                    "create_urem")})
    original = {(owner, name): getattr(owner, name) for owner, name in hooks}
    try:
        for (owner, name), hook in hooks.items():
            setattr(owner, name, hook)
        yield
    finally:
        for (owner, name), value in original.items():
            setattr(owner, name, value)
