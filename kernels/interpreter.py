"""Triton's interpreter (``TRITON_INTERPRET=1``) mended where the versions this project runs on
differ: Triton 3.6 (the GPU machines' image) and the newest; and spared the integer-overflow checks
whose verdict it throws away (:func:`interpreter_without_discarded_overflow_checks`).

Applied once per process by ``swizzleperf.kernels`` at import (kernels/__init__.py), so every interpreted launch
of a kernel module (a verification worker's numerics, a rank process, a test) has it; the app's
process on a CPU gets it from agent/capture/cuda_on_cpu.py, and the tracer's sampled launches
(profiling/interpreter_hooks.py) set the same ``__index__``.
"""
from __future__ import annotations

import os


def scalar_index(tensor) -> int:
    """``tl.tensor.__index__`` under the interpreter, for a scalar held as a 1-element array."""
    return int(tensor.handle.data.squeeze())


def _interpreter():
    """Triton's ``triton.runtime.interpreter`` module where kernels are interpreted
    (``TRITON_INTERPRET=1``) and it imports, else None."""
    if os.environ.get("TRITON_INTERPRET") != "1":
        return None
    try:
        from triton.runtime import interpreter
    except ImportError:
        return None
    return interpreter


def interpreter_patches() -> None:
    """Both of this module's changes to the interpreter (:func:`interpreter_scalar_index`,
    :func:`interpreter_without_discarded_overflow_checks`); each a no-op when not interpreting and
    when already applied."""
    interpreter_without_discarded_overflow_checks()
    interpreter_scalar_index()


def interpreter_without_discarded_overflow_checks() -> bool:
    """Under ``TRITON_INTERPRET=1``, integer ``+``, ``-`` and ``*`` of 32 bits or fewer skip Triton's
    overflow check (``sanitize_overflow``): its builder computes every such operation again in int64,
    compares the result with the type's bounds and hands the verdict to ``device_assert``, which drops
    it unless ``options.debug`` is set, and the interpreter's builder never sets it (``InterpreterOptions()``
    in Triton 3.6 and 3.9). The check's cost was about half of every interpreted launch of a copy
    kernel (TritonBench-G's destindex_copy_kv2, this 2-core CPU, 2026-12-08: 10.0 s of 512 programs,
    5.2 s of them in the check); what the kernel computes is unchanged. Where ``debug`` is set (a
    Triton that reads it), the checks stay. Returns whether the builder's options were changed."""
    import dataclasses
    interpreter = _interpreter()
    builder = getattr(interpreter, "interpreter_builder", None)
    options = getattr(builder, "options", None)
    if (options is None or not dataclasses.is_dataclass(options) or getattr(options, "debug", True)
            or not getattr(options, "sanitize_overflow", False)):
        return False
    builder.options = dataclasses.replace(options, sanitize_overflow=False)
    return True


def interpreter_scalar_index() -> bool:
    """Under ``TRITON_INTERPRET=1``, a scalar tensor used as a Python index (``range(pid, n, step)``,
    ``range(tl.cdiv(K, BLOCK_K))``) converts as in Triton 3.9 (triton-lang/triton#9172): Triton
    3.6's interpreter sets ``__index__`` to ``int(handle.data)``, which NumPy 2.4 and later refuse
    ("only 0-dimensional arrays can be converted to Python scalars": kernels/gemm.py's persistent
    loop failed its numerics on an H100 machine's image, Triton 3.6 and NumPy 2.5, 2026-12-06).
    Every launch's language patch (``_patch_lang``) sets it, and the launch undoes it with the
    rest. Returns whether the interpreter was patched (False: not interpreting, or a Triton
    without that patch step)."""
    interpreter = _interpreter()
    if interpreter is None:
        return False
    patch = getattr(interpreter, "_patch_lang", None)
    if patch is None or not hasattr(interpreter, "tl"):
        return False
    if getattr(patch, "_scalar_index", False):
        return True

    def patch_lang(fn):
        scope = patch(fn)
        scope.set_attr(interpreter.tl.core.tensor, "__index__", scalar_index)
        return scope
    patch_lang._scalar_index = True
    interpreter._patch_lang = patch_lang
    return True
