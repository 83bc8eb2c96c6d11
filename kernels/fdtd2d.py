"""
FDTD-2D: one time step of the 2-D finite-difference time-domain kernel (PolyBench fdtd-2d), fp32
===============================================================================================

PolyBench's time step over fields ex, ey, hz of shape [NX, NY], with ``fict`` the step's source
value, is three sweeps::

    ey[0, :]  = fict
    ey[i, j] -= 0.5 * (hz[i, j] - hz[i-1, j])                                   for i >= 1
    ex[i, j] -= 0.5 * (hz[i, j] - hz[i, j-1])                                   for j >= 1
    hz[i, j] -= 0.7 * (ex[i, j+1] - ex[i, j] + ey[i+1, j] - ey[i, j])          for i < NX-1, j < NY-1

where the hz sweep reads the *new* ex and ey. Here the whole step is ONE fused kernel (so the
swizzled kernel is the whole step): one program owns one BLOCK_M x BLOCK_N tile of all three
fields. The new ex and ey of its own tile are computed from the old hz, and so are the two values
the hz update needs from beyond the tile's right and bottom edges (``ex_new[i, j+1]`` and
``ey_new[i+1, j]``): they are recomputed from the old fields instead of being read after a
neighbour wrote them, so programs never wait on each other. That needs the old fields to stay
intact during the launch, so the step is out of place: the new fields go to ``out`` [3, NX, NY]
(ex, ey, hz; the caller swaps buffers between steps). Boundaries are PolyBench's: row 0 of ey
takes ``fict``, column 0 of ex and the last row and column of hz keep their old values.

Why this kernel
---------------
It is the stencil pattern with three fields: each program reads its own tile of ex, ey and hz
once and a halo that belongs to neighbouring tiles: hz one row above and below and one column
left and right, ex one column to the right, ey one row below. Whether a halo re-read hits in L2
depends on which tiles ran shortly before on the same L2, the program-id -> tile order, this
file's rewrite target ``swizzle``.

The blocked loop, in pseudo-code (no loop inside a program: one step)::

    for each program pid:
        pid_m, pid_n = swizzle(pid, num_pid_m, num_pid_n)
        rows, cols = pid_m*BM : +BM, pid_n*BN : +BN
        load ex, ey, hz [rows, cols]; hz [rows-1|rows+1, cols], hz [rows, cols-1|cols+1],
             ex [rows, cols+1], ey [rows+1, cols]
        ey_n = where(row 0, fict, ey - 0.5 (hz - hz_up));  ex_n = where(col 0, ex, ex - 0.5 (hz - hz_left))
        ex_n_right = ex_right - 0.5 (hz_right - hz);       ey_n_down = ey_down - 0.5 (hz_down - hz)
        hz_n = where(interior, hz - 0.7 (ex_n_right - ex_n + ey_n_down - ey_n), hz)
        out[0|1|2, rows, cols] = ex_n, ey_n, hz_n

What a swizzle can and cannot change, counted by hand
------------------------------------------------------
The bytes are fixed: at the default problem (NX = NY = 8192, tiles 16 x 128, a grid of
512 x 64 = 32768 tiles) each field is 256 MiB, 768 MiB read and 768 MiB written. Per tile the
program reads 3 x 8 KiB of its own tiles plus halos: hz rows 2 x 512 B, hz columns
2 x 16 x 32 B = 1 KiB (a one-element column costs a 32 B sector per row), ex's right column
512 B, ey's lower row 512 B: 3 KiB of 27 KiB, 11.1 %, is read a second time by a neighbour;
that is all an order can turn into L2 hits. Of it, 1.5 KiB are columns (shared with the
left/right neighbour) and 1.5 KiB rows (shared with the tile above/below).

Reuse distance (programs between a tile and its neighbour, each moving 24 KiB in and 24 KiB
out): row-major puts left/right neighbours 1 apart and above/below num_pid_n = 64 apart
(3 MiB); grouped-m:G puts above/below 1 apart and left/right G apart.

* H200 (2 L2 partitions of 30 MiB, neighbouring program ids spread over both): every order
  keeps the halos within reuse distance; the halo whose neighbour ran on the other partition
  (about half) misses, and no order steers that.
* MI300X (8 XCDs of 4 MiB, program p on XCD p % 8): row-major sends left/right neighbours to
  other XCDs (the 1.5 KiB of columns miss, the 1.5 KiB of rows hit: 5.6 %); grouped-m:8 the
  reverse (5.6 %); xcd-grouped-m:8:8 (contiguous logical ids per XCD, then groups of 8 tile
  rows) keeps both neighbours in one XCD queue, 1 and 8 programs (48 and 384 KiB) apart: all
  hit, 11.1 %. The simulator (``swizzleperf simulate``) predicts 5.6 %, 5.5 % and 10.3 %; on an
  H200 5.6 %, 5.6 % and 5.3 % (half the halos, as counted above).

Expert: ``xcd-grouped-m:8:8``. Baseline: row-major.
"""
from __future__ import annotations

import numpy as np
import torch
import triton
import triton.language as tl

from swizzleperf.kernels.spec import KernelSpec
from swizzleperf.kernels.stencil2d import halo_ids, tile_parts  # the same 5-point halo model
from swizzleperf.kernels.trace import TileTrace, new_keys


@triton.jit
def swizzle(pid, num_pid_m, num_pid_n):
    """Map program id ``pid`` to the tile ``(pid_m, pid_n)`` it computes (row-major)."""
    pid_m = pid // num_pid_n
    pid_n = pid % num_pid_n
    return pid_m, pid_n


@triton.jit
def fdtd2d_kernel(
    ex_ptr, ey_ptr, hz_ptr, fict_ptr, out_ptr,  # ex, ey, hz [NX, NY]; fict [1]; out [3, NX, NY]
    NX, NY, stride_row, stride_field,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):
    """One program computes one ``BLOCK_M x BLOCK_N`` tile of the new ex, ey and hz."""
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(NX, BLOCK_M)
    num_pid_n = tl.cdiv(NY, BLOCK_N)
    pid_m, pid_n = swizzle(pid, num_pid_m, num_pid_n)

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)  # [BLOCK_M]
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)  # [BLOCK_N]
    mask = (offs_m[:, None] < NX) & (offs_n[None, :] < NY)  # [BLOCK_M, BLOCK_N]
    has_up = mask & (offs_m[:, None] >= 1)
    has_down = mask & (offs_m[:, None] + 1 < NX)
    has_left = mask & (offs_n[None, :] >= 1)
    has_right = mask & (offs_n[None, :] + 1 < NY)
    offs = offs_m[:, None] * stride_row + offs_n[None, :]
    hz = tl.load(hz_ptr + offs, mask=mask, other=0.0)
    hz_up = tl.load(hz_ptr + offs - stride_row, mask=has_up, other=0.0)
    hz_down = tl.load(hz_ptr + offs + stride_row, mask=has_down, other=0.0)
    hz_left = tl.load(hz_ptr + offs - 1, mask=has_left, other=0.0)
    hz_right = tl.load(hz_ptr + offs + 1, mask=has_right, other=0.0)
    ex = tl.load(ex_ptr + offs, mask=mask, other=0.0)
    ex_right = tl.load(ex_ptr + offs + 1, mask=has_right, other=0.0)
    ey = tl.load(ey_ptr + offs, mask=mask, other=0.0)
    ey_down = tl.load(ey_ptr + offs + stride_row, mask=has_down, other=0.0)
    fict = tl.load(fict_ptr)

    ey_new = tl.where(offs_m[:, None] == 0, fict, ey - 0.5 * (hz - hz_up))
    ex_new = tl.where(offs_n[None, :] == 0, ex, ex - 0.5 * (hz - hz_left))
    ex_new_right = ex_right - 0.5 * (hz_right - hz)  # ex_new[i, j+1]; used where j+1 < NY
    ey_new_down = ey_down - 0.5 * (hz_down - hz)     # ey_new[i+1, j]; used where i+1 < NX
    interior = (offs_m[:, None] + 1 < NX) & (offs_n[None, :] + 1 < NY)
    hz_new = tl.where(interior, hz - 0.7 * (ex_new_right - ex_new + ey_new_down - ey_new), hz)

    out_ptrs = out_ptr + offs
    tl.store(out_ptrs, ex_new, mask=mask)
    tl.store(out_ptrs + stride_field, ey_new, mask=mask)
    tl.store(out_ptrs + 2 * stride_field, hz_new, mask=mask)


def launch(inputs: dict, BLOCK_M: int, BLOCK_N: int, num_warps: int = 4, num_stages: int = 1) -> None:
    """One time step: ``inputs["out"]`` [3, NX, NY] = the new (ex, ey, hz) from the old fields."""
    ex, ey, hz, out = inputs["ex"], inputs["ey"], inputs["hz"], inputs["out"]
    NX, NY = hz.shape
    for name, t in (("ex", ex), ("ey", ey), ("hz", hz), ("out[0]", out[0])):
        if t.stride() != (NY, 1):
            raise ValueError(f"{name} must be contiguous [NX, NY] = [{NX}, {NY}], got strides {t.stride()}")
    grid = (triton.cdiv(NX, BLOCK_M) * triton.cdiv(NY, BLOCK_N),)
    fdtd2d_kernel[grid](ex, ey, hz, inputs["fict"], out, NX, NY, NY, out.stride(0),
                        BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, num_warps=num_warps, num_stages=num_stages)


def make_inputs(problem: dict, seed: int, device: str = "cpu", dtype: str = "float32") -> dict:
    """Fresh ex, ey, hz [NX, NY] ~ N(0, 1) and fict [1] ~ N(0, 1) for ``seed``; out [3, NX, NY]
    uninitialised."""
    generator = torch.Generator(device=device).manual_seed(seed)
    torch_dtype = getattr(torch, dtype)
    NX, NY = problem["NX"], problem["NY"]
    fields = {name: torch.randn(NX, NY, generator=generator, device=device, dtype=torch_dtype)
              for name in ("ex", "ey", "hz")}
    fict = torch.randn(1, generator=generator, device=device, dtype=torch_dtype)
    return {**fields, "fict": fict, "out": torch.empty(3, NX, NY, device=device, dtype=torch_dtype)}


def reference(inputs: dict) -> torch.Tensor:
    """PolyBench's three sweeps in float64, in order; returns the new (ex, ey, hz) [3, NX, NY]."""
    ex, ey, hz = (inputs[name].double() for name in ("ex", "ey", "hz"))
    ey_new = ey.clone()
    ey_new[0, :] = inputs["fict"].double()[0]
    ey_new[1:, :] = ey[1:, :] - 0.5 * (hz[1:, :] - hz[:-1, :])
    ex_new = ex.clone()
    ex_new[:, 1:] = ex[:, 1:] - 0.5 * (hz[:, 1:] - hz[:, :-1])
    hz_new = hz.clone()
    hz_new[:-1, :-1] = hz[:-1, :-1] - 0.7 * (ex_new[:-1, 1:] - ex_new[:-1, :-1]
                                             + ey_new[1:, :-1] - ey_new[:-1, :-1])
    return torch.stack([ex_new, ey_new, hz_new])


def tile_grid(problem: dict, meta: dict) -> tuple:
    """Logical tile grid ``(num_pid_m, num_pid_n)``."""
    return (triton.cdiv(problem["NX"], meta["BLOCK_M"]), triton.cdiv(problem["NY"], meta["BLOCK_N"]))


def trace(problem: dict, meta: dict) -> TileTrace:
    """The access model of this kernel, one step per program. Every field's tiles are split into
    the 3 x 3 parts a one-element halo touches (``stencil2d.tile_parts``: top/middle/bottom rows
    x left sector/middle/right sector). Tile (m, n) reads hz's 9 parts and the halo parts of its
    4 hz neighbours (3 each), ex's 9 parts and the left-sector parts of the ex tile to its right,
    ey's 9 parts and the top-row parts of the ey tile below (-1 at the grid's edge), then writes
    its tile of out's ex, ey and hz. Block ids: ex parts, ey parts, hz parts (9 per tile,
    tile-major, each field after the other), then out (field * tiles + m * num_n + n). fp32.

    Four programs per SM: a program of 4 warps (128 threads) uses 128 registers a thread
    (measured on an H200, triton 3.6, 16 x 128 tiles): 16 K of the SM's 64 K registers.
    """
    NX, NY, BM, BN = problem["NX"], problem["NY"], meta["BLOCK_M"], meta["BLOCK_N"]
    elt = 4
    keys = new_keys(triton.cdiv(NX, BM) * triton.cdiv(NY, BN), 1, 48)
    ex_ids, part_bytes = tile_parts(NX, NY, BM, BN, elt, 0)
    parts = part_bytes.size
    ey_ids, hz_ids = ex_ids + parts * (ex_ids >= 0), ex_ids + 2 * parts * (ex_ids >= 0)
    num_m, num_n = ex_ids.shape[:2]
    tiles = num_m * num_n
    hz_halo, ex_halo, ey_halo = halo_ids(hz_ids), halo_ids(ex_ids), halo_ids(ey_ids)
    out_ids = 3 * parts + np.arange(3 * tiles, dtype=np.int64).reshape(3, num_m, num_n).transpose(1, 2, 0)
    keys[:, 0, :] = np.concatenate([hz_ids.reshape(num_m, num_n, 9), hz_halo["up"], hz_halo["down"],
                                    hz_halo["left"], hz_halo["right"], ex_ids.reshape(num_m, num_n, 9),
                                    ex_halo["right"], ey_ids.reshape(num_m, num_n, 9), ey_halo["down"],
                                    out_ids], axis=2).reshape(tiles, 48)  # [m, n, 48]
    rows = np.minimum(BM, NX - np.arange(num_m) * BM)
    cols = np.minimum(BN, NY - np.arange(num_n) * BN)
    out_bytes = np.tile((rows[:, None] * cols[None, :] * elt).ravel(), 3).astype(np.int64)
    block_bytes = np.concatenate([part_bytes, part_bytes, part_bytes, out_bytes])
    return TileTrace.reads_then_writes(keys, block_bytes, first_write=3 * parts,
                                       programs_per_cu=4, source="access model in kernels/fdtd2d.py")


SPEC = KernelSpec(
    name="fdtd2d",
    kernel_name="fdtd2d_kernel",
    problems={
        "default": {"NX": 8192, "NY": 8192},  # 3 fields of 256 MiB in, 768 MiB out
        # 3 x 4 = 12 programs (not a multiple of 8), ragged edges in NX (8 rows) and NY (8 columns).
        "check": {"NX": 40, "NY": 56},
    },
    # 16 x 128, 4 warps: 0.42 ms at the default problem on an H200 (3.9 TB/s), against 0.43 ms
    # for 32 x 128 / 4 warps and 0.51 ms for 64 x 128 / 8 warps (255 registers, spilling)
    # (do_bench, 2026-11-22).
    meta={"BLOCK_M": 16, "BLOCK_N": 128, "num_warps": 4, "num_stages": 1},
    check_meta={"BLOCK_M": 16, "BLOCK_N": 16, "num_warps": 4, "num_stages": 1},
    make_inputs=make_inputs,
    launch=launch,
    reference=reference,
    output_name="out",
    # ||out - ref|| / ||ref|| over all three fields: each new value is a few fp32 additions and
    # multiplications of O(1) inputs (2^-24 relative rounding each): about 1e-7 (measured on
    # CPU: ~6e-8); 1e-6 leaves a 10x margin and catches one wrong element in a 16 x 16 tile.
    tolerance={"float32": 1e-6},
    tile_grid=tile_grid,
    swizzle_args=tile_grid,
    trace=trace,
    flops=lambda p: 11.0 * p["NX"] * p["NY"],  # ey 3, ex 3, hz 5 per point (PolyBench's sweeps)
    min_bytes=lambda p, dtype: 6.0 * p["NX"] * p["NY"] * getattr(torch, dtype).itemsize,
    dtypes=("float32",),
    rewrite_target="swizzle",
    # Row and column halos in one L2 domain at short reuse distance: see the docstring.
    expert="xcd-grouped-m:8:8",
    output_tile=None,  # out is [3, NX, NY]: three fields per tile of the 2-D grid
)
