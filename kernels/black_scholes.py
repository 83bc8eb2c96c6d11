"""
Black-Scholes: European call and put prices, the science control kernel
=======================================================================

Why this kernel
---------------
The optimizer claims that block swizzles help where programs *share* data. A claim like that needs
a control: a kernel where no program shares anything with any other, so that no order can change
the traffic, and a well-behaved optimizer must report "no change". This is that kernel. It must
come out "no change" in the suite; an "improvement" here measures the noise of the
measurement, not a swizzle.

Each option i has a spot price S, strike K, time to expiry T (years), risk-free rate r and
volatility sigma, all float32 arrays of N options. With ``Phi`` the standard normal CDF,
``Phi(d) = (1 + erf(d / sqrt(2))) / 2``::

    d1   = (ln(S / K) + (r + sigma^2 / 2) T) / (sigma sqrt(T))
    d2   = d1 - sigma sqrt(T)
    call = S Phi(d1) - K exp(-r T) Phi(d2)
    put  = K exp(-r T) Phi(-d2) - S Phi(-d1)

Both prices go into one output ``[2, N]`` (row 0 call, row 1 put), so that the verifier's NaN
poisoning covers both.

The blocked loop, in pseudo-code::

    for each program pid:
        tile = swizzle(pid, num_pids)              # num_pids = cdiv(N, BLOCK)
        offs = tile * BLOCK + arange(BLOCK)        # masked at N
        load S, K, T, r, sigma [offs]; compute; store out[0, offs], out[1, offs]

What a swizzle can and cannot change, counted by hand
-----------------------------------------------------
Default problem: N = 2^25 options, BLOCK = 1024: 32768 programs. Program t reads block t of each
of the 5 inputs (5 x 4 KiB) and writes block t of each output row (2 x 4 KiB); no byte is read
by two programs. Every order therefore reads the 640 MiB of inputs once from DRAM and writes the
256 MiB of outputs once: 0 % of reads can hit in L2, row-major or any permutation, on every GPU
and every dispatch policy (the simulator agrees: hit rate 0 under every order). The only thing an
order moves is which DRAM pages are open at once, and both the identity and the chiplet remap
stream each array in contiguous ranges of many pages. Expected: "no change". Measured on an H200
(2026-11-22, interleaved do_bench medians +- interquartile range): row-major 263.6 +- 11.2 us
(3.6 TB/s, 84 % of a plain device copy's 4.25 TB/s), xcd-contiguous:8 266.2 +- 3.5 us: the same
within the noise, as a control must be.

Baseline: row-major (the identity), as naive kernels are written; there is no expert order.
"""
from __future__ import annotations

import math

import numpy as np
import torch
import triton
import triton.language as tl

from swizzleperf.kernels.spec import KernelSpec
from swizzleperf.kernels.trace import TileTrace, new_keys

INPUTS = ("S", "K", "T", "r", "sigma")  # the five float32 input arrays, in trace block order


@triton.jit
def swizzle(pid, num_pids):
    """Map program id ``pid`` to the block ``tile`` of options it prices (the identity)."""
    return pid


@triton.jit
def _normal_cdf(d):
    """Phi(d) = (1 + erf(d / sqrt(2))) / 2, in fp32."""
    return 0.5 * (1.0 + tl.erf(d * 0.7071067811865476))


@triton.jit
def black_scholes_kernel(
    s_ptr, k_ptr, t_ptr, r_ptr, sigma_ptr,  # [N] each, float32
    out_ptr,  # [2, N] float32: row 0 call, row 1 put
    N,
    BLOCK: tl.constexpr,
):
    """One program prices ``BLOCK`` consecutive options, in fp32."""
    pid = tl.program_id(axis=0)
    num_pids = tl.cdiv(N, BLOCK)
    tile = swizzle(pid, num_pids)

    offs = tile.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)  # [BLOCK]
    mask = offs < N
    # `other` values keep masked lanes finite (S = K = T = sigma = 1); they are never stored.
    s = tl.load(s_ptr + offs, mask=mask, other=1.0)
    k = tl.load(k_ptr + offs, mask=mask, other=1.0)
    t = tl.load(t_ptr + offs, mask=mask, other=1.0)
    r = tl.load(r_ptr + offs, mask=mask, other=0.0)
    sigma = tl.load(sigma_ptr + offs, mask=mask, other=1.0)

    vol = sigma * tl.sqrt(t)  # sigma sqrt(T)
    d1 = (tl.log(s / k) + (r + 0.5 * sigma * sigma) * t) / vol
    d2 = d1 - vol
    discounted_k = k * tl.exp(-r * t)
    call = s * _normal_cdf(d1) - discounted_k * _normal_cdf(d2)
    put = discounted_k * _normal_cdf(-d2) - s * _normal_cdf(-d1)
    tl.store(out_ptr + offs, call, mask=mask)
    tl.store(out_ptr + N + offs, put, mask=mask)


def launch(inputs: dict, BLOCK: int, num_warps: int = 8, num_stages: int = 1) -> None:
    """Price every option: ``inputs["out"][0]`` calls, ``inputs["out"][1]`` puts."""
    out = inputs["out"]
    N = inputs["S"].numel()
    grid = (triton.cdiv(N, BLOCK),)
    black_scholes_kernel[grid](*(inputs[name] for name in INPUTS), out, N, BLOCK=BLOCK,
                               num_warps=num_warps, num_stages=num_stages)


def make_inputs(problem: dict, seed: int, device: str = "cpu", dtype: str = "float32") -> dict:
    """Fresh options for ``seed``, uniform in the ranges of NVIDIA's CUDA sample (S 5-30, K 1-100,
    T 0.25-10 years) with r 1-5 % and sigma 10-50 % drawn per option; out [2, N] uninitialised.
    Deep in- and out-of-the-money options are included (prices from ~0 to ~S)."""
    generator = torch.Generator(device=device).manual_seed(seed)
    torch_dtype = getattr(torch, dtype)
    N = problem["N"]

    def uniform(low: float, high: float) -> torch.Tensor:
        u = torch.rand(N, generator=generator, device=device, dtype=torch.float32)
        return (low + (high - low) * u).to(torch_dtype)

    inputs = {"S": uniform(5.0, 30.0), "K": uniform(1.0, 100.0), "T": uniform(0.25, 10.0),
              "r": uniform(0.01, 0.05), "sigma": uniform(0.1, 0.5)}
    inputs["out"] = torch.empty(2, N, device=device, dtype=torch_dtype)
    return inputs


def reference(inputs: dict) -> torch.Tensor:
    """float64 call and put prices of the upcast inputs (erf-based normal CDF), [2, N]."""
    s, k, t, r, sigma = (inputs[name].double() for name in INPUTS)

    def normal_cdf(d: torch.Tensor) -> torch.Tensor:
        return 0.5 * (1.0 + torch.erf(d / math.sqrt(2.0)))

    vol = sigma * torch.sqrt(t)
    d1 = (torch.log(s / k) + (r + 0.5 * sigma * sigma) * t) / vol
    d2 = d1 - vol
    discounted_k = k * torch.exp(-r * t)
    call = s * normal_cdf(d1) - discounted_k * normal_cdf(d2)
    put = discounted_k * normal_cdf(-d2) - s * normal_cdf(-d1)
    return torch.stack([call, put])


def tile_grid(problem: dict, meta: dict) -> tuple:
    """Logical tile grid ``(num_pids,)``: blocks of ``BLOCK`` options."""
    return (triton.cdiv(problem["N"], meta["BLOCK"]),)


def trace(problem: dict, meta: dict) -> TileTrace:
    """The access model of this kernel: block t reads block t of S, K, T, r, sigma and writes block
    t of the call row and of the put row; one step. Block ids: input i's block t is
    ``i * num_tiles + t`` (i in S, K, T, r, sigma order), then calls (5 * num_tiles + t), then puts
    (6 * num_tiles + t). 4 bytes an element; the last block at its clipped size. No block is
    touched by two tiles.

    programs_per_cu = 6: a program is 8 warps (256 threads) of 40 registers each (triton 3.6 on an
    H200), no shared memory; 64K registers per SM / (256 x 40) = 6.4, so 6 programs.
    """
    N, B = problem["N"], meta["BLOCK"]
    num_tiles = triton.cdiv(N, B)
    keys = new_keys(num_tiles, 1, 7)
    tiles = np.arange(num_tiles, dtype=np.int64)
    tile_bytes = np.minimum(B, N - tiles * B) * 4                    # [num_tiles]
    keys[:, 0, :] = np.arange(7, dtype=np.int64)[None, :] * num_tiles + tiles[:, None]
    block_bytes = np.tile(tile_bytes, 7).astype(np.int64)             # 5 inputs, call, put
    return TileTrace.reads_then_writes(keys, block_bytes, first_write=5 * num_tiles,
                                       programs_per_cu=8, source="access model in kernels/black_scholes.py")


SPEC = KernelSpec(
    name="black_scholes",
    kernel_name="black_scholes_kernel",
    problems={
        # 2^25 options: 640 MiB read, 256 MiB written (0.94 GB, ~15x an H200's 60 MB L2).
        "default": {"N": 1 << 25},
        # 1100 options in blocks of 128: 9 programs (not a multiple of 8), the last one ragged
        # (76 options).
        "check": {"N": 1100},
    },
    # BLOCK 1024, 8 warps: 4 options per thread, 40 registers, 257 us on an H200 (3.7 TB/s). With
    # 16 options per thread (BLOCK 4096) the kernel needs 149 registers, one program per SM fits,
    # and it takes 399 us. Measured 2026-11-22 over BLOCK 512-4096 x 2, 4, 8 warps (do_bench).
    meta={"BLOCK": 1024, "num_warps": 8, "num_stages": 1},
    check_meta={"BLOCK": 128, "num_warps": 4, "num_stages": 1},
    make_inputs=make_inputs,
    launch=launch,
    reference=reference,
    output_name="out",
    # ||out - ref|| / ||ref|| against float64 on the same (float32) inputs: a few fp32 ulps per
    # operation (log, exp, erf, sqrt, divisions), amplified where call / put is a difference of two
    # near-equal terms; the norm is dominated by the large prices (~S): 7.5e-8 on an H200, 8.6e-8
    # on CPU (2026-11-22). The tolerance leaves a 100x margin.
    tolerance={"float32": 1e-5},
    tile_grid=tile_grid,
    swizzle_args=tile_grid,
    trace=trace,
    # per option, counting each of log, exp, sqrt, erf (x 4) as one: ~40 operations
    flops=lambda p: 40.0 * p["N"],
    min_bytes=lambda p, dtype: 4.0 * 7 * p["N"],
    dtypes=("float32",),
    rewrite_target="swizzle",
    # None: no program shares a byte with another, so no order can change L2 traffic (module
    # docstring). The control: the suite's verdict must be "no change".
    expert=None,
    output_tile=None,
)
