"""Two persistent programs per SM at the short per-rank shapes where the GEMM misses cuBLAS (issue
#23): on one GPU, each shape tuned by kernels/schedule/gemm_tuning.tune twice, with one program
per SM (the usual candidates) and with two (``NUM_SMS`` = 2 x the SMs: tiles whose shared memory
lets two programs share an SM, data-parallel only, so no program waits for another), each time
against ``torch.matmul`` interleaved in the same call. Nothing is cached.

    python3 -m bench.gpu_gemm_occupancy --out OUT/occupancy.json [--shapes 4096x512x4096,...]
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from swizzleperf.kernels.gemm import launch
from swizzleperf.kernels.schedule.gemm_tuning import candidates, name, tune
from swizzleperf.kernels.schedule.persistent_gemm import SM90_SHARED_BYTES, num_sms, shared_bytes

#: The per-rank shapes below 0.95x of cuBLAS on an H100 or an H200 (bench/results/rank_gemm_hopper.md).
SHAPES = ("4096x512x4096", "4096x1280x8192", "4096x2560x8192", "8192x896x14336", "4096x8192x2048")
#: Tiles for two programs per SM: each within half of sm_90's shared memory.
TWO_PER_SM = (
    {"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 64, "num_warps": 4, "num_stages": 4},
    {"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 64, "num_warps": 4, "num_stages": 3},
    {"BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 64, "num_warps": 4, "num_stages": 4},
    {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "num_warps": 8, "num_stages": 2},
    {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "num_warps": 4, "num_stages": 2},
    {"BLOCK_M": 64, "BLOCK_N": 256, "BLOCK_K": 64, "num_warps": 4, "num_stages": 2},
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--shapes", default=",".join(SHAPES))
    args = parser.parse_args()
    sms = num_sms(torch.device("cuda", 0))
    two = [{**t, "STREAM_K": 0} for t in TWO_PER_SM if shared_bytes(t, 2) <= SM90_SHARED_BYTES // 2]
    rows = []
    for shape in args.shapes.split(","):
        M, N, K = map(int, shape.split("x"))
        row = {"shape": shape}
        for label, programs, configs in (("one_per_sm", sms, candidates(M, N, K, sms)),
                                         ("two_per_sm", 2 * sms, two)):
            result = tune(launch, M, N, K, programs=programs, configs=configs, cache=False,
                          log=lambda *a: None)
            row[label] = {"config": name(result["config"]), "programs": programs,
                          "ours_ms": result["ours_ms"], "cublas_ms": result["cublas_ms"],
                          "spread_ms": result["spread_ms"], "ratio": result["cublas_ms"] / result["ours_ms"],
                          "rejected": result["rejected"]}
        rows.append(row)
        print(shape, {k: (v["config"], round(v["ratio"], 3)) for k, v in row.items() if k != "shape"}, flush=True)
    Path(args.out).write_text(json.dumps({"device": torch.cuda.get_device_name(), "sms": sms, "rows": rows,
                                          "command": "python3 -m bench.gpu_gemm_occupancy --out OUT"}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
