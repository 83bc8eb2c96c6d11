"""The per-rank GEMM of the distributed kernels on ONE GPU: every tile configuration the
built-in policy searches, at the per-rank shapes of the bench problems at W = 2, 4 and 8,
on all SMs and on the SMs an SM split leaves (132 - COMM_SMS); cuBLAS alongside.

    python3 eval/gpu_rank_gemm.py --out $OUT/rank_gemm_h200.json

Runs with torch and triton alone (no project install): it loads kernels/distributed/tiles.py
by path and builds the same persistent GEMM as the distributed kernels' ``_gemm_worker`` in
MODE 0 (tiles ``pid, pid + P, ...`` in row-major order, fp32 accumulation, bf16 C). Timing as
the distributed bench's ``runner.time_rank``: a sample is 10 launches back to back between two
CUDA events (caches not flushed, the inputs stay the same), the median and interquartile
range over 10 samples after 3 warm-up launches. The overlap model (profiling/overlap_model.py)
takes its per-tile rates from these figures (eval/results/rank_gemm_h200.json).
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import time
from pathlib import Path

import torch
import triton
import triton.language as tl

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("dist_tiles", ROOT / "kernels" / "distributed" / "tiles.py")
tiles = importlib.util.module_from_spec(_spec)
sys.modules["dist_tiles"] = tiles
_spec.loader.exec_module(tiles)
gemm_tile, tile_pointers = tiles.gemm_tile, tiles.tile_pointers

#: (kernel, problem, M, N, K, how the shard is taken) of the distributed bench problems.
PROBLEMS = [
    ("gemm_all_scatter", "iris-4096", 4096, 4096, 4096, "N"),
    ("gemm_all_scatter", "iris-8192x3584x14336", 8192, 3584, 14336, "N"),
    ("gemm_all_scatter", "llama70b-qkv-4k", 4096, 10240, 8192, "N"),
    ("gemm_all_scatter", "llama70b-up-1k", 1024, 28672, 8192, "N"),
    ("all_gather_gemm", "llama70b-up-8k", 8192, 28672, 8192, "N"),
    ("all_gather_gemm", "llama8b-up-4k", 4096, 14336, 4096, "N"),
    ("gemm_reduce_scatter", "llama70b-down-8k", 8192, 8192, 28672, "K"),
    ("gemm_reduce_scatter", "llama70b-o-4k", 4096, 8192, 8192, "K"),
    ("gemm_reduce_scatter", "llama8b-down-4k", 4096, 4096, 14336, "K"),
]
#: SM counts an SM split leaves the GEMM (COMM_SMS 8, 16, 24, 32, 48 of 132).
SPLIT_PROGRAMS = (124, 116, 108, 100, 84)


@triton.jit
def rank_gemm(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
              stride_cm, stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
              BLOCK_K: tl.constexpr):
    """Persistent GEMM C [M, N] = A [M, K] @ B [K, N]: tiles pid, pid + P, ... row-major."""
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    for tile in range(tl.program_id(0), num_pid_m * num_pid_n, tl.num_programs(0)):
        pid_m = tile // num_pid_n
        pid_n = tile % num_pid_n
        acc = gemm_tile(a_ptr, b_ptr, pid_m, pid_n, M, N, K, stride_am, stride_ak, stride_bk,
                        stride_bn, BLOCK_M, BLOCK_N, BLOCK_K, False)
        c_ptrs, mask = tile_pointers(c_ptr, pid_m, pid_n, M, N, stride_cm, stride_cn, BLOCK_M, BLOCK_N)
        tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=mask)


def time_ms(fn, samples: int = 10, launches: int = 10, warmup: int = 3) -> dict:
    """Median and IQR (ms per launch) of ``samples`` samples of ``launches`` back-to-back launches."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(samples):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(launches):
            fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / launches)
    q = statistics.quantiles(times, n=4)
    return {"median_ms": statistics.median(times), "iqr_ms": q[2] - q[0]}


def shapes() -> list:
    out, seen = [], set()
    for kernel, problem, m, n, k, split in PROBLEMS:
        for w in (2, 4, 8):
            shape = (m, n // w, k) if split == "N" else (m, n, k // w)
            out.append({"kernel": kernel, "problem": problem, "world_size": w, "M": shape[0],
                        "N": shape[1], "K": shape[2]})
            seen.add(shape)
    # shared/HARDWARE.md's two cuBLAS figures at 8 ranks' shapes
    out.append({"kernel": "-", "problem": "hardware.md", "world_size": 0, "M": 4096, "N": 2560, "K": 8192})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    rows, started = [], time.time()
    cache = {}
    for s in shapes():
        key = (s["M"], s["N"], s["K"])
        if key not in cache:
            a = torch.randn(s["M"], s["K"], device="cuda", dtype=torch.bfloat16)
            b = torch.randn(s["K"], s["N"], device="cuda", dtype=torch.bfloat16)
            c = torch.empty(s["M"], s["N"], device="cuda", dtype=torch.bfloat16)
            ref = a.float() @ b.float()
            cache.clear()
            cache[key] = (a, b, c, ref)
        a, b, c, ref = cache[key]
        cublas = time_ms(lambda: torch.matmul(a, b, out=c))
        rows.append({**s, "impl": "cublas", "programs": None, **cublas})
        print(f"{s['problem']} W={s['world_size']} {key} cuBLAS {cublas['median_ms']:.4f}", flush=True)
        for cfg in tiles.GEMM_TILE_CONFIGS:
            programs = [sms] + (list(SPLIT_PROGRAMS) if cfg == tiles.GEMM_META else [])
            num_tiles = triton.cdiv(s["M"], cfg["BLOCK_M"]) * triton.cdiv(s["N"], cfg["BLOCK_N"])
            for p in programs:
                grid = (min(p, num_tiles),)

                def launch():
                    rank_gemm[grid](a, b, c, s["M"], s["N"], s["K"], a.stride(0), a.stride(1),
                                    b.stride(0), b.stride(1), c.stride(0), c.stride(1),
                                    BLOCK_M=cfg["BLOCK_M"], BLOCK_N=cfg["BLOCK_N"],
                                    BLOCK_K=cfg["BLOCK_K"], num_warps=cfg["num_warps"],
                                    num_stages=cfg["num_stages"])
                try:
                    launch()
                    torch.cuda.synchronize()
                    err = float((c.float() - ref).norm() / ref.norm())
                    t = time_ms(launch)
                except Exception as exc:  # recorded per row: a config that does not build
                    rows.append({**s, "impl": "triton", "meta": cfg, "programs": p, "error": repr(exc)[:200]})
                    continue
                rows.append({**s, "impl": "triton", "meta": cfg, "programs": p, "tiles": num_tiles,
                             "rel_error": err, **t})
                print(f"   {cfg['BLOCK_M']}x{cfg['BLOCK_N']}x{cfg['BLOCK_K']} w{cfg['num_warps']} "
                      f"s{cfg['num_stages']} P={p} tiles={num_tiles} {t['median_ms']:.4f} "
                      f"(iqr {t['iqr_ms']:.4f}) err {err:.1e}", flush=True)
    out = {"command": "python3 eval/gpu_rank_gemm.py --out " + args.out,
           "device": torch.cuda.get_device_name(), "sms": sms, "torch": torch.__version__,
           "triton": triton.__version__, "date": time.strftime("%Y-%m-%d"),
           "seconds": time.time() - started, "rows": rows}
    Path(args.out).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
