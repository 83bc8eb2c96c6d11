"""Every memory access of an interpreted launch checked against the launch's own tensors.

A kernel that reads or writes outside the tensors it is given works by accident in its app (the
memory next to its tensors is mapped and holds something), and its replay on the captured
tensors then reads other bytes or faults: on a GPU that looks like a wrong answer of ours.
``checked_accesses`` runs a launch under Triton's interpreter (``TRITON_INTERPRET=1``) with every
load, store and atomic checked, element by element where the mask is on, against the storages of
the launch's tensor arguments; the first access outside all of them raises ``OutsideTensors``,
which names the access, its line of the kernel, the program, and where it landed.

Used by the verification worker's ``bounds`` stage (agent/verification/worker.py), which
agent/verification/verify.py runs after a numerics failure. Works on Triton 3.6 and the newest:
both route every pointer access (block pointers and tensor descriptors included) through the
interpreter builder's ``create_masked_load`` / ``create_masked_store`` / ``create_atomic_rmw`` /
``create_atomic_cas``, and copy a launch's tensors to the host in ``GridExecutor._init_args_hst``.
"""
from __future__ import annotations

import contextlib
import linecache
import os
import sys
from dataclasses import dataclass

import numpy as np

#: The phrase a failure carries when the kernel itself reaches outside its tensors (eval/app_worker.py
#: refuses such a launch: the kernel, not the tool, is at fault).
OUTSIDE_ITS_TENSORS = "the kernel reaches memory outside its tensors"


class OutsideTensors(Exception):
    """An access of the launch outside every tensor argument's storage; ``str()`` says where."""


@dataclass(frozen=True)
class _Storage:
    name: str
    start: int          # host address of the storage's first byte
    nbytes: int
    itemsize: int       # the tensor's element size (bytes), to say offsets in elements


_launch: list = []      # the storages of the launch being run (one launch at a time: the interpreter's way)


def _storages(arg_names, args_hst, kwargs_hst) -> list:
    found: list = []

    def add(name, value):
        if isinstance(value, tuple):
            for i, item in enumerate(value):
                add(f"{name}[{i}]", item)
            return
        base = getattr(value, "base", None)
        if base is not None and not hasattr(value, "data_ptr") and hasattr(base, "data_ptr"):
            value = base          # a tensor descriptor: its base tensor
        if hasattr(value, "untyped_storage") and hasattr(value, "element_size"):
            storage = value.untyped_storage()
            found.append(_Storage(name, int(storage.data_ptr()), int(storage.nbytes()), int(value.element_size())))
    for i, value in enumerate(args_hst):
        add(arg_names[i] if i < len(arg_names) else f"argument {i}", value)
    for name, value in kwargs_hst.items():
        add(name, value)
    return found


def _where() -> str:
    """The kernel's line that made the access: the innermost frame outside Triton and this module,
    with its text where the file can be read (at most 80 characters)."""
    frame = sys._getframe(2)
    triton_dir = os.path.dirname(os.path.dirname(sys.modules["triton"].__file__))
    while frame is not None:
        path = frame.f_code.co_filename
        if not path.startswith(triton_dir) and path != __file__:
            # the line's text too: a lifted module's line numbers are not the user's file's
            text = " ".join(linecache.getline(path, frame.f_lineno).split())
            text = f": `{text[:77] + '...' if len(text) > 80 else text}`" if text else ""
            return f"line {frame.f_lineno} of {os.path.basename(path)} ({frame.f_code.co_name}{text})"
        frame = frame.f_back
    return "an unknown line"


def _check(kind: str, ptrs, mask, element_bytes: int) -> None:
    addresses = np.asarray(ptrs.data, dtype=np.uint64).reshape(-1)
    if mask is not None:
        active = np.broadcast_to(np.asarray(mask.data, dtype=bool), np.asarray(ptrs.data).shape).reshape(-1)
        addresses = addresses[active]
    if addresses.size == 0 or not _launch:
        return
    storages = sorted(_launch, key=lambda s: s.start)
    starts = np.asarray([s.start for s in storages], dtype=np.uint64)
    ends = np.asarray([s.start + s.nbytes for s in storages], dtype=np.uint64)
    index = np.searchsorted(starts, addresses, side="right").astype(np.int64) - 1
    inside = (index >= 0) & (addresses + np.uint64(element_bytes) <= ends[np.maximum(index, 0)])
    if bool(inside.all()):
        return
    address = int(addresses[~inside][0])
    nearest = min(storages, key=lambda s: min(abs(address - s.start), abs(address - (s.start + s.nbytes))))
    size = nearest.nbytes // max(1, nearest.itemsize)
    element = (address - nearest.start) // nearest.itemsize   # negative: before its start
    from triton.runtime import interpreter
    program = tuple(int(i) for i in getattr(interpreter.interpreter_builder, "grid_idx", ()) or ())
    raise OutsideTensors(f"{OUTSIDE_ITS_TENSORS}: {kind} at {_where()}"
                         f"{f' in program {program}' if program else ''}: {int((~inside).sum())} of its "
                         f"{addresses.size} active elements fall outside every tensor argument, the first at "
                         f"element {element} counted from the start of the nearest, {nearest.name}'s storage "
                         f"({size} elements of {nearest.itemsize} bytes)")


def _element_bytes(handle) -> int:
    try:
        return max(1, handle.get_element_ty().primitive_bitwidth // 8)
    except AttributeError:
        return 1


@contextlib.contextmanager
def checked_accesses():
    """Within the block, every interpreted launch checks its accesses (``OutsideTensors``, or
    Triton's ``InterpreterError`` wrapping it where the version wraps a kernel's exceptions).
    Raises RuntimeError outside ``TRITON_INTERPRET=1``."""
    if os.environ.get("TRITON_INTERPRET") != "1":
        raise RuntimeError("checked accesses need Triton's interpreter (TRITON_INTERPRET=1 before triton is imported)")
    from triton.runtime import interpreter
    builder, executor = interpreter.InterpreterBuilder, interpreter.GridExecutor
    saved = {name: getattr(builder, name) for name in
             ("create_masked_load", "create_masked_store", "create_atomic_rmw", "create_atomic_cas")}
    init_args = executor._init_args_hst

    def init_args_hst(self, args_dev, kwargs):
        args_hst, kwargs_hst = init_args(self, args_dev, kwargs)
        _launch[:] = _storages(list(self.arg_names), args_hst, kwargs_hst)
        return args_hst, kwargs_hst

    def masked_load(self, ptrs, mask, *rest, **kw):
        _check("the load", ptrs, mask, _element_bytes(ptrs))
        return saved["create_masked_load"](self, ptrs, mask, *rest, **kw)

    def masked_store(self, ptrs, value, mask, *rest, **kw):
        _check("the store", ptrs, mask, _element_bytes(ptrs))
        return saved["create_masked_store"](self, ptrs, value, mask, *rest, **kw)

    def atomic_rmw(self, op, ptr, val, mask, *rest, **kw):
        _check("the atomic", ptr, mask, _element_bytes(ptr))
        return saved["create_atomic_rmw"](self, op, ptr, val, mask, *rest, **kw)

    def atomic_cas(self, ptr, cmp, val, *rest, **kw):
        _check("the atomic compare-and-swap", ptr, None, _element_bytes(ptr))
        return saved["create_atomic_cas"](self, ptr, cmp, val, *rest, **kw)

    builder.create_masked_load, builder.create_masked_store = masked_load, masked_store
    builder.create_atomic_rmw, builder.create_atomic_cas = atomic_rmw, atomic_cas
    executor._init_args_hst = init_args_hst
    try:
        yield
    finally:
        for name, method in saved.items():
            setattr(builder, name, method)
        executor._init_args_hst = init_args
        _launch.clear()


def outside_finding(exc: BaseException) -> str | None:
    """The ``OutsideTensors`` message in ``exc`` or its chain (Triton wraps a kernel's exceptions
    in ``InterpreterError(repr(e)) from e``), else None; from the wrapper's text where the chain
    was lost."""
    chain, seen = [], set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        chain.append(exc)
        exc = exc.__cause__ or exc.__context__
    found = next((e for e in chain if isinstance(e, OutsideTensors)), None)
    if found is not None:
        return str(found)
    for e in chain:
        text = str(e)
        if OUTSIDE_ITS_TENSORS in text:
            text = text[text.index(OUTSIDE_ITS_TENSORS):]
            return text[:-2] if text.endswith(("')", '")')) else text
    return None
