"""
Stencil2D: one Jacobi step of the 5-point stencil on a 2-D fp32 grid
====================================================================

``out[i, j] = c0 * x[i, j] + c1 * (x[i-1, j] + x[i+1, j] + x[i, j-1] + x[i, j+1])``

with ``c0 = 0.5, c1 = 0.125`` (an explicit heat-equation step, ``x + 0.125 * laplacian(x)``).

Boundary: a fixed zero (Dirichlet) frame. Values outside the grid read as 0, so every element,
the edges included, is computed by the same formula; the masked loads below supply the zeros.

Why this kernel
---------------
A stencil reads every element of ``x`` once and writes every element of ``out`` once, plus a
*halo*: the tile's neighbours one row above and below and one column left and right. The halo
belongs to the neighbouring tiles, so each halo element is read twice, once by its own tile
and once by the neighbour; whether that second read comes from L2 or from DRAM depends on how
long ago (in programs run since) the neighbour ran, that is on the program-id -> tile order,
this file's rewrite target ``swizzle``.

The blocked loop, in pseudo-code (no loop inside a program: one step)::

    for each program pid (all of one wave at once):
        pid_m, pid_n = swizzle(pid, num_pid_m, num_pid_n)
        rows, cols = pid_m*BM : +BM, pid_n*BN : +BN
        c = x[rows, cols]                          # own tile
        u, d = x[rows-1, cols], x[rows+1, cols]    # halo rows: one row of the tiles above / below
        l, r = x[rows, cols-1], x[rows, cols+1]    # halo columns: one column of the tiles left / right
        out[rows, cols] = c0*c + c1*(u + d + l + r)

What a swizzle can and cannot change, counted by hand
------------------------------------------------------
It cannot change the bytes: at the default problem (16384 x 16384, tiles 32 x 128, a grid of
512 x 128 = 65536 tiles) x and out are 1 GiB each, and every program reads its own
32 x 128 x 4 B = 16 KiB tile once. It can only decide whether the halo re-reads hit in L2. A
halo row costs BN x 4 B = 512 B; a halo column is one element per row but costs a whole 32 B L2
sector per row (8 fp32), 32 x 32 B = 1 KiB. Per tile: 16 KiB own + 2 x 512 B + 2 x 1 KiB =
19 KiB read, of which 3 KiB (15.8 %) are halos that a neighbouring tile also reads: the L2 hit
rate any order can reach is about 16 %.

The *reuse distance* of a halo is the number of programs between the tile and its neighbour;
each program in between moves 16 KiB in and 16 KiB out (32 KiB):

* row-major (the baseline): left/right neighbour 1 program apart, above/below
  num_pid_n = 128 programs apart = 4 MiB of traffic in between.
* grouped-m:G: above/below 1 apart, left/right G apart (the group walks down G tile rows).

On an H200 (2 L2 partitions of 30 MiB, the SM placement spreads neighbouring program ids
across them) both orders keep every halo within reuse distance; what is lost is the halo
whose neighbour ran on the other partition (about half), and no order can steer that.

On an MI300X (8 XCDs of 4 MiB, program p on XCD p % 8) what matters is the same XCD *and* a
short distance in that XCD's own queue:

* row-major: left/right neighbours are on other XCDs (p +- 1): the 2 KiB of halo columns miss;
  the 1 KiB of halo rows hits (p +- 128, same XCD, 16 programs = 512 KiB later in its queue):
  1 of 19 KiB, 5.3 %.
* grouped-m:8: left/right are p +- 8, same XCD, next in its queue: the 2 KiB hit; above/below
  are p +- 1, other XCDs: the 1 KiB misses. 2 of 19 KiB, 10.5 %.
* xcd-grouped-m:8:8 (contiguous logical ids per XCD, then groups of 8 tile rows): both
  neighbours in the same XCD queue, 1 and 8 programs (32 and 256 KiB) apart: all 3 KiB hit,
  15.8 %. The simulator (``swizzleperf simulate``) predicts 5.3 %, 10.5 % and 15.1 %.

Expert: ``xcd-grouped-m:8:8``: the only catalog order that keeps both kinds of halo in one L2
domain at a short reuse distance on a chiplet GPU. On an H200 there is nothing to win: measured
0.565 ms row-major and 0.599 ms expert (3.8 TB/s of the 4.8 peak; one do_bench of 100 ms each,
2026-11-22; with 64 x 128 tiles the two came out the other way round, 0.691 and 0.686 ms).
Baseline: row-major, as naive kernels are written.
"""
from __future__ import annotations

import numpy as np
import torch
import triton
import triton.language as tl

from swizzleperf.kernels.spec import KernelSpec
from swizzleperf.kernels.trace import TileTrace, new_keys

C0, C1 = 0.5, 0.125  # out = C0 * x + C1 * (sum of the 4 neighbours)
SECTOR_BYTES = 32  # one L2 sector (NVIDIA): what a one-element-wide halo column costs per row


@triton.jit
def swizzle(pid, num_pid_m, num_pid_n):
    """Map program id ``pid`` to the tile ``(pid_m, pid_n)`` it computes (row-major)."""
    pid_m = pid // num_pid_n
    pid_n = pid % num_pid_n
    return pid_m, pid_n


@triton.jit
def stencil2d_kernel(
    x_ptr, out_ptr,  # x [M, N], out [M, N], unit column stride
    M, N, stride_xm, stride_om,
    c0, c1,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):
    """One program computes one ``BLOCK_M x BLOCK_N`` tile of out from its tile of x and the halo."""
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    pid_m, pid_n = swizzle(pid, num_pid_m, num_pid_n)

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)  # [BLOCK_M]
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)  # [BLOCK_N]
    in_m = offs_m < M
    in_n = offs_n < N
    x_ptrs = x_ptr + offs_m[:, None] * stride_xm + offs_n[None, :]  # [BLOCK_M, BLOCK_N]
    mask = in_m[:, None] & in_n[None, :]
    # Neighbours outside the grid are the zero frame (other=0.0).
    center = tl.load(x_ptrs, mask=mask, other=0.0).to(tl.float32)
    up = tl.load(x_ptrs - stride_xm, mask=mask & (offs_m[:, None] >= 1), other=0.0).to(tl.float32)
    down = tl.load(x_ptrs + stride_xm, mask=mask & (offs_m[:, None] + 1 < M), other=0.0).to(tl.float32)
    left = tl.load(x_ptrs - 1, mask=mask & (offs_n[None, :] >= 1), other=0.0).to(tl.float32)
    right = tl.load(x_ptrs + 1, mask=mask & (offs_n[None, :] + 1 < N), other=0.0).to(tl.float32)
    result = c0 * center + c1 * ((up + down) + (left + right))

    out_ptrs = out_ptr + offs_m[:, None] * stride_om + offs_n[None, :]
    tl.store(out_ptrs, result.to(out_ptr.dtype.element_ty), mask=mask)


def launch(inputs: dict, BLOCK_M: int, BLOCK_N: int, num_warps: int = 4, num_stages: int = 1) -> None:
    """Compute ``inputs["out"]``, one Jacobi step of ``inputs["x"]`` ([M, N] each, zero frame)."""
    x, out = inputs["x"], inputs["out"]
    M, N = x.shape
    if x.stride(1) != 1 or out.stride(1) != 1:
        raise ValueError(f"x and out must have unit column stride, got {x.stride()} and {out.stride()}")
    grid = (triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N),)
    stencil2d_kernel[grid](x, out, M, N, x.stride(0), out.stride(0), C0, C1,
                           BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, num_warps=num_warps, num_stages=num_stages)


def make_inputs(problem: dict, seed: int, device: str = "cpu", dtype: str = "float32") -> dict:
    """Fresh x [M, N] ~ N(0, 1) in ``dtype`` for ``seed``; out [M, N] uninitialised."""
    generator = torch.Generator(device=device).manual_seed(seed)
    torch_dtype = getattr(torch, dtype)
    M, N = problem["M"], problem["N"]
    x = torch.randn(M, N, generator=generator, device=device, dtype=torch.float32).to(torch_dtype)
    return {"x": x, "out": torch.empty(M, N, device=device, dtype=torch_dtype)}


def reference(inputs: dict) -> torch.Tensor:
    """The same step in float64 on the zero-padded grid, [M, N] float64."""
    x = torch.nn.functional.pad(inputs["x"].double(), (1, 1, 1, 1))  # [M+2, N+2], zero frame
    neighbours = (x[:-2, 1:-1] + x[2:, 1:-1]) + (x[1:-1, :-2] + x[1:-1, 2:])
    return C0 * x[1:-1, 1:-1] + C1 * neighbours


def tile_grid(problem: dict, meta: dict) -> tuple:
    """Logical tile grid ``(num_pid_m, num_pid_n)``."""
    return (triton.cdiv(problem["M"], meta["BLOCK_M"]), triton.cdiv(problem["N"], meta["BLOCK_N"]))


# -- the access model ------------------------------------------------------------------------------

def tile_parts(M: int, N: int, BM: int, BN: int, elt: int, first_id: int) -> tuple:
    """Split every ``BM x BN`` tile of an ``[M, N]`` tensor into the 3 x 3 parts a 5-point halo
    touches: rows (top row, middle rows, bottom row) x columns (left sector, middle, right
    sector), a sector being ``SECTOR_BYTES // elt`` elements. A tile reads the bottom-row parts
    of the tile above, the top-row parts of the tile below, the right-sector parts of the tile to
    its left and the left-sector parts of the tile to its right (``halo_ids``); every part is
    read whole.

    Returns ``(ids, nbytes)``: ``ids`` int64 ``[num_m, num_n, 3, 3]``, block id of each part
    (numbered from ``first_id``, tile-major, -1 for an empty part of a thin edge tile), and
    ``nbytes`` int64 ``[num_m * num_n * 9]``, bytes of each block (0 for empty parts).
    """
    num_m, num_n = triton.cdiv(M, BM), triton.cdiv(N, BN)
    sector = SECTOR_BYTES // elt
    rows = np.minimum(BM, M - np.arange(num_m) * BM)  # [num_m] rows in each tile row
    cols = np.minimum(BN, N - np.arange(num_n) * BN)  # [num_n]
    top = np.minimum(1, rows)
    bottom = np.minimum(1, rows - top)
    left = np.minimum(sector, cols)
    right = np.minimum(sector, cols - left)
    row_parts = np.stack([top, rows - top - bottom, bottom], axis=1)  # [num_m, 3]
    col_parts = np.stack([left, cols - left - right, right], axis=1)  # [num_n, 3]
    nbytes = (row_parts[:, None, :, None] * col_parts[None, :, None, :] * elt).astype(np.int64)
    ids = first_id + np.arange(nbytes.size, dtype=np.int64).reshape(nbytes.shape)
    return np.where(nbytes > 0, ids, -1), nbytes.ravel()


def halo_ids(ids: np.ndarray) -> dict:
    """The parts each tile reads of its neighbours, from ``tile_parts``'s ``ids``: a dict of
    int64 ``[num_m, num_n, 3]`` per direction ("up", "down", "left", "right"), -1 outside the grid."""
    num_m, num_n = ids.shape[:2]
    padded = np.full((num_m + 2, num_n + 2, 3, 3), -1, dtype=np.int64)
    padded[1:-1, 1:-1] = ids
    return {"up": padded[:-2, 1:-1, 2, :],      # the bottom row of the tile above
            "down": padded[2:, 1:-1, 0, :],     # the top row of the tile below
            "left": padded[1:-1, :-2, :, 2],    # the right sector column of the tile to the left
            "right": padded[1:-1, 2:, :, 0]}    # the left sector column of the tile to the right


def trace(problem: dict, meta: dict) -> TileTrace:
    """The access model of this kernel, one step per program: tile (m, n) reads the 9 parts of its
    own tile of x (``tile_parts``), then the halo parts of its 4 neighbours (3 each, -1 at the
    grid's edge), then writes its tile of out. Block ids: x's parts first (tile-major, 9 per
    tile), then out's tiles (m * num_n + n). Bytes for fp32; edge tiles at their clipped size.

    Two programs per SM: a program of 4 warps (128 threads) uses 209 registers a thread (measured
    on an H200, triton 3.6, 32 x 128 tiles): 27 K of the SM's 64 K registers.
    """
    M, N, BM, BN = problem["M"], problem["N"], meta["BLOCK_M"], meta["BLOCK_N"]
    elt = 4
    keys = new_keys(triton.cdiv(M, BM) * triton.cdiv(N, BN), 1, 22)
    ids, x_bytes = tile_parts(M, N, BM, BN, elt, 0)
    num_m, num_n = ids.shape[:2]
    halo = halo_ids(ids)
    base_out = x_bytes.size
    rows = np.minimum(BM, M - np.arange(num_m) * BM)
    cols = np.minimum(BN, N - np.arange(num_n) * BN)
    out_ids = base_out + np.arange(num_m * num_n, dtype=np.int64).reshape(num_m, num_n)
    keys[:, 0, :] = np.concatenate([ids.reshape(num_m, num_n, 9), halo["up"], halo["down"], halo["left"],
                                    halo["right"], out_ids[:, :, None]], axis=2).reshape(num_m * num_n, 22)
    out_bytes = (rows[:, None] * cols[None, :] * elt).ravel().astype(np.int64)
    block_bytes = np.concatenate([x_bytes, out_bytes])
    return TileTrace.reads_then_writes(keys, block_bytes, first_write=base_out,
                                       programs_per_cu=2, source="access model in kernels/stencil2d.py")


SPEC = KernelSpec(
    name="stencil2d",
    kernel_name="stencil2d_kernel",
    problems={
        "default": {"M": 16384, "N": 16384},  # x and out 1 GiB each
        # 3 x 4 = 12 programs (not a multiple of 8), ragged edges in M (8 rows) and N (8 columns).
        "check": {"M": 40, "N": 56},
    },
    # 32 x 128, 4 warps: 0.57 ms at the default problem on an H200 (3.8 TB/s), ahead of 64 x 128 / 8
    # warps (0.69 ms) and 32 x 256 / 8 warps (0.71 ms); 16 x 256 / 4 warps alike (do_bench, 2026-11-22).
    meta={"BLOCK_M": 32, "BLOCK_N": 128, "num_warps": 4, "num_stages": 1},
    check_meta={"BLOCK_M": 16, "BLOCK_N": 16, "num_warps": 4, "num_stages": 1},
    make_inputs=make_inputs,
    launch=launch,
    reference=reference,
    output_name="out",
    # ||out - ref|| / ||ref||: five fp32 inputs, four additions and two (possibly fused)
    # multiplications, each rounded to fp32 (2^-24 relative): a few 1e-8 (3e-8 measured on CPU);
    # 1e-6 leaves a margin of 30x and still catches one wrong element in a 16 x 16 tile.
    tolerance={"float32": 1e-6},
    tile_grid=tile_grid,
    swizzle_args=tile_grid,
    trace=trace,
    flops=lambda p: 6.0 * p["M"] * p["N"],  # 4 additions, 2 multiplications per element
    min_bytes=lambda p, dtype: 2.0 * p["M"] * p["N"] * getattr(torch, dtype).itemsize,
    dtypes=("float32",),
    rewrite_target="swizzle",
    # Both halos (rows and sector columns) in one L2 domain at short reuse distance: see the docstring.
    expert="xcd-grouped-m:8:8",
    output_tile=lambda p, meta: (meta["BLOCK_M"], meta["BLOCK_N"]),
)
