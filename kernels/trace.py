"""The memory-access trace the L2 simulator consumes: for every logical tile, the ordered blocks
its program touches, loop step by loop step.

A *block* is a piece of one tensor that a program loads or stores whole in one step (a
``BLOCK_M x BLOCK_K`` tile of A, say; in a trace from profiling/tracer.py, a rectangle of L2
lines or sectors that no access touches only in part, so that accesses sharing lines share
blocks). Blocks are numbered ``0 .. num_blocks-1``; the trace keeps their sizes in bytes and
whether they are written.

It lives with the kernels: a kernel's hand-written access model (``KernelSpec.trace``) returns
one, and the simulator and the access analysis (profiling/) read it. Its size is bounded
(``MAX_ACCESSES``): an access model allocates its keys with :func:`new_keys`, which refuses a trace
past the bound before any memory is taken.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

#: The most accesses a trace may hold: programs x accesses a program (``keys.size``: steps x
#: accesses a step, padding included), 2^24. Why: the simulator replays every access one by one
#: (profiling/l2sim.py's ``_replay``, a Python loop) at about 1 us and 110 B each (the default
#: GEMM's 1.1 M accesses in 0.6 s; with BLOCK_K 8, 8.4 M in 7.6 s and 1.3 GB; one CPU core),
#: so the bound is about 15 s and 2 GB. Past it, tiles of one element at the default
#: GEMM (268 M programs of 8 194 accesses) took minutes and gigabytes to end in a MemoryError (#41).
#: The bundled kernels' default traces hold at most 1.6 M (fdtd2d's access model) and 3.4 M
#: (stencil2d through the generic tracer at 32 B sectors): a tenth and a fifth of it.
MAX_ACCESSES = 1 << 24


class TraceTooLarge(ValueError):
    """A trace past ``MAX_ACCESSES``; the message is one line giving the count and the bound."""


def check_size(programs: int, per_program: int, at_least: bool = False) -> None:
    """Refuse the trace of ``programs`` programs of ``per_program`` accesses each (``at_least``:
    a lower bound, where the exact count is not known yet) past ``MAX_ACCESSES``.

    Raises:
        TraceTooLarge: ``programs * per_program > MAX_ACCESSES``."""
    total = int(programs) * int(per_program)
    if total > MAX_ACCESSES:
        raise TraceTooLarge(f"{int(programs):,} programs x {'at least ' if at_least else ''}{int(per_program):,} "
                            f"access{'es' if per_program != 1 else ''} each = {total:,} accesses to simulate, "
                            f"more than the simulator's bound of {MAX_ACCESSES:,} accesses (2^24: about 15 s "
                            f"and 2 GB of replay)")


def new_keys(num_tiles: int, num_steps: int, width: int) -> np.ndarray:
    """``TileTrace.keys`` to fill in: int64 ``[num_tiles, num_steps, width]`` of -1 (no access),
    checked against the bound before it is allocated.

    Raises:
        TraceTooLarge: more than ``MAX_ACCESSES`` slots."""
    check_size(num_tiles, num_steps * width)
    return np.full((num_tiles, num_steps, width), -1, dtype=np.int64)


@dataclass(frozen=True)
class TileTrace:
    """Ordered block accesses of every logical tile's program.

    Attributes:
        keys: int64 ``[num_tiles, num_steps, accesses_per_step]``; ``keys[t, s, j]`` is the block
            id of the j-th access of step s of the program that computes logical tile t (tiles
            numbered row-major over the spec's tile grid); -1 where a step has fewer accesses.
        block_bytes: int64 ``[num_blocks]``, bytes of each block.
        block_is_write: bool ``[num_blocks]``, True for blocks the kernel stores (at any access).
        programs_per_cu: programs resident at once on one SM / CU (occupancy).
        source: where the trace comes from, e.g. ``"access model in gemm.py"``.
        l1_cached: the reads go through the SM's / CU's L1 (plain global loads); False where
            they are copied into shared memory past it (see :func:`l1_cached_reads`).
        access_is_write: bool ``[num_tiles, num_steps, accesses_per_step]`` or None: which
            accesses are stores, where a block is both stored and loaded (a kernel reading back
            what it or an earlier launch wrote: those reads hit where the store allocated). None:
            an access is a store exactly when its block is written (``block_is_write``).
    """

    keys: np.ndarray
    block_bytes: np.ndarray
    block_is_write: np.ndarray
    programs_per_cu: int
    source: str
    l1_cached: bool = False
    access_is_write: np.ndarray | None = None

    @classmethod
    def reads_then_writes(cls, keys: np.ndarray, block_bytes: np.ndarray, first_write: int,
                          programs_per_cu: int, source: str) -> "TileTrace":
        """A trace whose blocks are numbered reads first: blocks ``first_write`` and above are the
        ones the kernel stores (the numbering every bundled access model uses)."""
        block_bytes = np.asarray(block_bytes, dtype=np.int64)
        is_write = np.zeros(block_bytes.size, dtype=bool)
        is_write[first_write:] = True
        return cls(keys=keys, block_bytes=block_bytes, block_is_write=is_write,
                   programs_per_cu=programs_per_cu, source=source)

    def with_l1(self, meta: dict) -> "TileTrace":
        """This trace with ``l1_cached`` set as :func:`l1_cached_reads` decides for ``meta``."""
        return dataclasses.replace(self, l1_cached=l1_cached_reads(meta))

    def writes(self) -> np.ndarray:
        """bool ``[num_tiles, num_steps, accesses_per_step]``: True where an access is a store
        (False for the -1 padding)."""
        if self.access_is_write is not None:
            return self.access_is_write & (self.keys >= 0)
        return self.block_is_write[np.maximum(self.keys, 0)] & (self.keys >= 0)

    @property
    def num_tiles(self) -> int:
        return int(self.keys.shape[0])

    def footprint_bytes(self) -> int:
        """Bytes of all distinct blocks touched (the compulsory traffic)."""
        return int(self.block_bytes.sum())


def l1_cached_reads(meta: dict) -> bool:
    """Whether a Triton kernel's loads go through L1, from its launch meta-parameters.

    With ``num_stages > 1`` Triton's software pipeliner turns the loads of a loop into
    asynchronous copies into shared memory (``cp.async.cg`` on Hopper, which caches in L2 only);
    with one stage (every bundled kernel but the GEMM) loads are plain ``ld.global``, cached in
    the L1 (CUDA C++ Programming Guide, compute capability 9.0: global loads are cached in L1 by
    default)."""
    return int(meta.get("num_stages", 1)) <= 1
