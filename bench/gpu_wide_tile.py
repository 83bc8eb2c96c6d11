"""Tiles whose width is not a power of two, against cuBLAS and the tuned schedule (measured).

Triton's block shapes are powers of two, so the schedule's tiles are 128 x 256, 256 x 128, ...
At N = 1280 that is 160 tiles of 128 x 256 on 132 SMs (1.2 waves), where the tuned schedule
(all tiles stream-K) ran at 0.87-0.89x of cuBLAS (bench/results/rank_gemm_hopper.md). A tile
``BLOCK_M x (BN0 + BN1 [+ BN2])``, one accumulator per power-of-two part sharing each A tile,
makes 256 x 160 tiles: 128 of them at N = 1280, one wave of 132 SMs with no hand-over.
Likewise ``(BM0 + BM1) x BLOCK_N`` tiles, two accumulators sharing each B tile, make cuBLAS's
own 320 x 128 tile there (``tall_kernel``). And kernels/gemm.py's tail of narrower tiles
(``TAIL_BLOCK_N``) is timed beside them. This script asks whether such tiles run at the
128 x 256 tile's speed per FLOP:

1. cuBLAS's own kernel at each shape (its name, from torch.profiler: the tile it chose);
2. every configuration checked on fresh random inputs with C poisoned (fp32 reference);
3. cuBLAS, the tuned schedule (kernels/gemm.py with ``grouped-m:8`` and the configuration of
   bench/results/gemm_configs_hopper.json for this device) and the other tiles timed interleaved
   launch by launch (kernels/schedule/gemm_tuning.py's ``interleaved``: L2 flushed, medians, IQR).

Usage (repository root, project on the path as bench/gpu_rank_gemm.sh sets it):
``python3 -m bench.gpu_wide_tile --out OUT.json``; ``--interpret-check`` runs the numerics of
small wide and tall tiles through the Triton interpreter (CPU) instead. Results and what they
showed: bench/results/wide_tile/README.md.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

from swizzleperf.kernels.schedule.persistent_gemm import store_tile

#: (M, N, K): the per-rank shapes below 0.95x of cuBLAS in the tables of 2026-11-26 (4096 x 1280
#: and 2560 x 8192, 8192 x 896 x 14336), one whose waves are full (4096 x 5120 x 8192), and the
#: others where kernels/gemm.py's tail applies (``tail_rows``), the bundled GEMM's default last.
SHAPES = ((4096, 1280, 8192), (4096, 2560, 8192), (8192, 896, 14336), (4096, 5120, 8192),
          (4096, 3584, 4096), (8192, 1792, 14336), (1024, 14336, 8192), (8192, 14336, 8192),
          (16384, 16384, 4096))
#: Wide configurations: (BLOCK_M, parts of BLOCK_N, BLOCK_K, num_warps, num_stages). The first
#: part's C goes out in two halves (its shared memory halved, reused by the next
#: store), so that three stages of 256 x 160 fit.
WIDE = (
    (256, (128, 32), 64, 8, 3),
    (256, (128, 32), 64, 8, 2),
    (256, (128, 32), 32, 8, 6),
    (128, (128, 32), 64, 8, 4),
    (128, (128, 32), 64, 8, 5),
    (256, (128, 64, 32), 64, 8, 2),
    (128, (128, 64, 32), 64, 8, 4),
)
#: Tall configurations: (parts of BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages); cuBLAS's
#: kernel at 4096 x 1280 x 8192 on an H100 is nvjet_sm90_tst_320x128_64x3_1x2 (this script's
#: first run): 320 x 128 tiles, 130 of them, one wave.
TALL = (
    ((256, 64), 128, 64, 8, 3),
    ((256, 64), 128, 64, 8, 2),
    ((256, 64), 128, 32, 8, 5),
    ((256, 64), 128, 32, 8, 6),
)
#: kernels/gemm.py's own tail of narrower tiles (``TAIL_BLOCK_N``, the schedule's version of the
#: mixed prototype of commit 38927d5): the 128 x 256 x 64 tiles with 4 stages and C in halves, or
#: 3 stages and C whole, and a tail 128 wide.
TAIL = ({"num_stages": 4, "EPILOGUE_SUBTILE": 1}, {"num_stages": 3, "EPILOGUE_SUBTILE": 0})


@triton.jit
def _grouped(tile, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
    """grouped-m order: tile index -> (pid_m, pid_n), GROUP_M rows at a time."""
    group = GROUP_M * num_pid_n
    first_m = (tile // group) * GROUP_M
    rows = tl.minimum(num_pid_m - first_m, GROUP_M)
    return first_m + (tile % group) % rows, (tile % group) // rows


@triton.jit
def wide_kernel(a, b0, b1, b2, c0, c1, c2, M, N, K,
                BLOCK_M: tl.constexpr, BN0: tl.constexpr, BN1: tl.constexpr, BN2: tl.constexpr,
                BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, DOT_IN_FP32: tl.constexpr,
                FLATTEN: tl.constexpr):
    """Persistent over tiles of BLOCK_M x (BN0 + BN1 + BN2) (BN2 0: two parts); A [M, K], B [K,
    N], C [M, N] through tensor descriptors, one per part of B and C."""
    pid = tl.program_id(0)
    num_programs = tl.num_programs(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BN0 + BN1 + BN2)
    k_iters = tl.cdiv(K, BLOCK_K)
    for tile in tl.range(pid, num_pid_m * num_pid_n, num_programs, flatten=FLATTEN):
        pid_m, pid_n = _grouped(tile, num_pid_m, num_pid_n, GROUP_M)
        row = pid_m * BLOCK_M
        col = pid_n * (BN0 + BN1 + BN2)
        acc0 = tl.zeros((BLOCK_M, BN0), dtype=tl.float32)
        acc1 = tl.zeros((BLOCK_M, BN1), dtype=tl.float32)
        if BN2 > 0:
            acc2 = tl.zeros((BLOCK_M, BN2), dtype=tl.float32)
        for k in range(k_iters):
            a_tile = a.load([row, k * BLOCK_K])
            t0 = b0.load([k * BLOCK_K, col])
            t1 = b1.load([k * BLOCK_K, col + BN0])
            if DOT_IN_FP32:
                a_tile = a_tile.to(tl.float32)
                t0 = t0.to(tl.float32)
                t1 = t1.to(tl.float32)
            acc0 = tl.dot(a_tile, t0, acc0)
            acc1 = tl.dot(a_tile, t1, acc1)
            if BN2 > 0:
                t2 = b2.load([k * BLOCK_K, col + BN0 + BN1])
                if DOT_IN_FP32:
                    t2 = t2.to(tl.float32)
                acc2 = tl.dot(a_tile, t2, acc2)
        store_tile(c0, acc0, row, col, M, N, 0, 0, BLOCK_M, BN0, True, 1)   # in halves
        c1.store([row, col + BN0], acc1.to(c1.dtype))
        if BN2 > 0:
            c2.store([row, col + BN0 + BN1], acc2.to(c2.dtype))


@triton.jit
def tall_kernel(a0, a1, b, c0, c1, M, N, K,
                BM0: tl.constexpr, BM1: tl.constexpr, BLOCK_N: tl.constexpr,
                BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, DOT_IN_FP32: tl.constexpr,
                FLATTEN: tl.constexpr):
    """Persistent over tiles of (BM0 + BM1) x BLOCK_N (cuBLAS's 320 x 128 is 256 + 64): two
    accumulators sharing each B tile; A, B, C through tensor descriptors, one per part of A and C."""
    pid = tl.program_id(0)
    num_programs = tl.num_programs(0)
    num_pid_m = tl.cdiv(M, BM0 + BM1)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    k_iters = tl.cdiv(K, BLOCK_K)
    for tile in tl.range(pid, num_pid_m * num_pid_n, num_programs, flatten=FLATTEN):
        pid_m, pid_n = _grouped(tile, num_pid_m, num_pid_n, GROUP_M)
        row = pid_m * (BM0 + BM1)
        col = pid_n * BLOCK_N
        acc0 = tl.zeros((BM0, BLOCK_N), dtype=tl.float32)
        acc1 = tl.zeros((BM1, BLOCK_N), dtype=tl.float32)
        for k in range(k_iters):
            b_tile = b.load([k * BLOCK_K, col])
            t0 = a0.load([row, k * BLOCK_K])
            t1 = a1.load([row + BM0, k * BLOCK_K])
            if DOT_IN_FP32:
                b_tile = b_tile.to(tl.float32)
                t0 = t0.to(tl.float32)
                t1 = t1.to(tl.float32)
            acc0 = tl.dot(t0, b_tile, acc0)
            acc1 = tl.dot(t1, b_tile, acc1)
        store_tile(c0, acc0, row, col, M, N, 0, 0, BM0, BLOCK_N, True, 1)   # in halves
        c1.store([row + BM0, col], acc1.to(c1.dtype))


def launch_tall(inputs: dict, parts: tuple, BLOCK_N: int, BLOCK_K: int, num_warps: int,
                num_stages: int, programs: int, flatten: bool = False) -> None:
    """``inputs["c"] = inputs["a"] @ inputs["b"]`` with tiles of sum(parts) x BLOCK_N rows."""
    from triton.tools.tensor_descriptor import TensorDescriptor
    a, b, c = inputs["a"], inputs["b"], inputs["c"]
    M, K = a.shape
    N = b.shape[1]
    tiles = triton.cdiv(M, sum(parts)) * triton.cdiv(N, BLOCK_N)
    dot_in_fp32 = os.environ.get("TRITON_INTERPRET") == "1" and a.dtype == torch.bfloat16
    tall_kernel[(min(programs, tiles),)](
        TensorDescriptor.from_tensor(a, [parts[0], BLOCK_K]), TensorDescriptor.from_tensor(a, [parts[1], BLOCK_K]),
        TensorDescriptor.from_tensor(b, [BLOCK_K, BLOCK_N]),
        TensorDescriptor.from_tensor(c, [parts[0], BLOCK_N // 2]), TensorDescriptor.from_tensor(c, [parts[1], BLOCK_N]),
        M, N, K, BM0=parts[0], BM1=parts[1], BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, GROUP_M=8,
        DOT_IN_FP32=dot_in_fp32, FLATTEN=flatten, num_warps=num_warps, num_stages=num_stages)


def launch_wide(inputs: dict, BLOCK_M: int, parts: tuple, BLOCK_K: int, num_warps: int,
                num_stages: int, programs: int, flatten: bool = False) -> None:
    """``inputs["c"] = inputs["a"] @ inputs["b"]`` with wide tiles on ``programs`` programs."""
    from triton.tools.tensor_descriptor import TensorDescriptor
    a, b, c = inputs["a"], inputs["b"], inputs["c"]
    M, K = a.shape
    N = b.shape[1]
    bn = list(parts) + [0] * (3 - len(parts))
    width = sum(bn)
    tiles = triton.cdiv(M, BLOCK_M) * triton.cdiv(N, width)
    desc_b = [TensorDescriptor.from_tensor(b, [BLOCK_K, max(n, 16)]) for n in bn]
    desc_c = [TensorDescriptor.from_tensor(c, [BLOCK_M, max(n, 16) // (2 if i == 0 else 1)])
              for i, n in enumerate(bn)]
    dot_in_fp32 = os.environ.get("TRITON_INTERPRET") == "1" and a.dtype == torch.bfloat16
    wide_kernel[(min(programs, tiles),)](
        TensorDescriptor.from_tensor(a, [BLOCK_M, BLOCK_K]), *desc_b, *desc_c, M, N, K,
        BLOCK_M=BLOCK_M, BN0=bn[0], BN1=bn[1], BN2=bn[2], BLOCK_K=BLOCK_K, GROUP_M=8,
        DOT_IN_FP32=dot_in_fp32, FLATTEN=flatten, num_warps=num_warps, num_stages=num_stages)


def _inputs(M: int, N: int, K: int, device: str, seed: int = 7) -> dict:
    g = torch.Generator(device=device).manual_seed(seed)
    a = torch.randn(M, K, generator=g, device=device).to(torch.bfloat16)
    b = torch.randn(K, N, generator=g, device=device).to(torch.bfloat16)
    return {"a": a, "b": b, "c": torch.full((M, N), float("nan"), device=device, dtype=torch.bfloat16)}


def interpret_check() -> int:
    """Small ragged problems through the interpreter: both kernels, every part layout, C
    poisoned (kernels/gemm.py's tail runs in tests/kernels/schedule/test_persistent_gemm.py)."""
    runs = []
    for parts in ((32, 16), (32, 16, 16)):
        for M, N, K in ((80, 3 * sum(parts) - 8, 96), (3 * sum(parts) - 8, 64, 64)):
            runs.append((f"wide {parts}", (M, N, K), lambda i, p=parts: launch_wide(i, 32, p, 32, 4, 1, 3)))
            runs.append((f"tall {parts[:2]}", (M, N, K), lambda i, p=parts[:2]: launch_tall(i, p, 32, 32, 4, 1, 3)))
    worst = 0.0
    for label, (M, N, K), launch in runs:
        inputs = _inputs(M, N, K, "cpu")
        launch(inputs)
        expected = inputs["a"].float() @ inputs["b"].float()
        error = float((inputs["c"].float() - expected).norm() / expected.norm())
        print(f"interpret {label} {M}x{N}x{K}: rel error {error:.2e}")
        worst = max(worst, error) if error == error else float("inf")
    return 0 if worst < 1e-2 else 1


def cublas_kernels(M: int, N: int, K: int) -> list:
    """Names of the CUDA kernels torch.matmul launches at this shape (torch.profiler)."""
    inputs = _inputs(M, N, K, "cuda")
    out = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
    torch.matmul(inputs["a"], inputs["b"], out=out)
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        torch.matmul(inputs["a"], inputs["b"], out=out)
        torch.cuda.synchronize()
    return sorted({e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="")
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--interpret-check", action="store_true")
    parser.add_argument("--launch", default="", metavar="MxNxK:CONFIG",
                        help="launch kernels/gemm.py (grouped-m:8) with the JSON configuration "
                             "--times times at that shape, time nothing (for ncu)")
    parser.add_argument("--times", type=int, default=10)
    args = parser.parse_args()
    if args.interpret_check:
        return interpret_check()
    from bench.gpu_rank_gemm import gemm_module
    from swizzleperf.kernels.schedule import gemm_tuning
    spec = gemm_module()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    if args.launch:
        shape, config = args.launch.split(":", 1)
        M, N, K = map(int, shape.split("x"))
        inputs = _inputs(M, N, K, "cuda")
        for _ in range(args.times):
            spec.launch(inputs, **json.loads(config), NUM_SMS=sms)
        torch.cuda.synchronize()
        print(f"launched {args.launch} {args.times} times", flush=True)
        return 0
    device = torch.cuda.get_device_name()
    rows = []
    for M, N, K in SHAPES:
        row = {"M": M, "N": N, "K": K, "cublas_kernels": cublas_kernels(M, N, K)}
        print(f"{M}x{N}x{K} cuBLAS: {row['cublas_kernels']}", flush=True)
        inputs = _inputs(M, N, K, "cuda")
        expected = inputs["a"].float() @ inputs["b"].float()
        reference = torch.empty_like(inputs["c"])
        launches = {"cuBLAS": lambda: torch.matmul(inputs["a"], inputs["b"], out=reference)}
        tuned = gemm_tuning.best_config(M, N, K, "bfloat16", device, sms,
                                        path=Path("bench/results/gemm_configs_hopper.json"))
        row["tuned_config"] = tuned
        if tuned:
            launches["tuned"] = lambda: spec.launch(inputs, **tuned, NUM_SMS=sms)
        row["rel_error"], row["failed"] = {}, {}
        variants = {}
        for BM, parts, BK, warps, stages in WIDE:
            if N % sum(parts) == 0:
                variants[f"{BM}x{'+'.join(map(str, parts))}x{BK} w{warps} s{stages}"] = (
                    lambda BM=BM, parts=parts, BK=BK, w=warps, s=stages:
                    launch_wide(inputs, BM, parts, BK, w, s, sms))
        for parts, BN, BK, warps, stages in TALL:
            variants[f"{'+'.join(map(str, parts))}x{BN}x{BK} w{warps} s{stages}"] = (
                lambda parts=parts, BN=BN, BK=BK, w=warps, s=stages:
                launch_tall(inputs, parts, BN, BK, w, s, sms))
        row["schedule"] = {}
        for knobs in TAIL:
            config = {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "num_warps": 8, **knobs,
                      "STREAM_K": 0, "TAIL_BLOCK_N": 128}
            label = "gemm.py " + gemm_tuning.name(config)
            row["schedule"][label] = gemm_tuning.schedule_words(M, N, config, sms)
            variants[label] = lambda config=config: spec.launch(inputs, **config, NUM_SMS=sms)
        for label, launch in variants.items():
            try:
                inputs["c"].fill_(float("nan"))
                launch()
                torch.cuda.synchronize()
            except Exception as exc:   # recorded; that configuration is left out of the timing
                row["failed"][label] = f"{type(exc).__name__}: {str(exc)[:300]}"
                print(f"  {label} FAILED {row['failed'][label]}", flush=True)
                continue
            error = gemm_tuning.relative_error(inputs["c"], expected)
            row["rel_error"][label] = error
            if error < 1e-2:
                launches[label] = launch
            else:
                print(f"  {label} WRONG rel error {error}", flush=True)
        timed = gemm_tuning.interleaved(launches, args.rounds)
        row["ms"] = {k: round(v["median_ms"], 5) for k, v in timed.items()}
        row["spread_ms"] = {k: round(v["spread_ms"], 5) for k, v in timed.items()}
        row["cublas_over"] = {k: round(timed["cuBLAS"]["median_ms"] / v["median_ms"], 4)
                              for k, v in timed.items()}
        rows.append(row)
        print(f"  cublas/ours: {json.dumps(row['cublas_over'])}", flush=True)
        if args.out:
            Path(args.out).write_text(json.dumps({
                "device": device, "sms": sms, "torch": torch.__version__, "triton": triton.__version__,
                "command": "python3 -m bench.gpu_wide_tile --out OUT", "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
