#!/usr/bin/env bash
# GEMM + all-scatter with its local GEMM warp-specialized (WS_GEMM, kernels/schedule/ws_gemm.py)
# against the Triton GEMM, at the bench problems, WORLD_SIZE GPUs (default 2): three bench runs
# in one lease, each verifying first then timing paired with torch + NCCL:
#   triton: bulk_sync and producer_consumer with the per-rank GEMM configurations of
#           eval/results/gemm_configs_hopper.json (what runs without WS_GEMM);
#   ws:     the same patterns, WS_GEMM=1 at 128 x 256 x 64, 8 warps, 3 stages, C's whole tile;
#   tall:   bulk_sync, WS_GEMM=1 at 320 x 128 x 32 (256 + 64 rows), 6 stages, C in halves.
# Usage (repository root): WORLD_SIZE=4 bash eval/gpu_ws_all_scatter.sh OUTDIR
set -uo pipefail
OUTDIR=${1:?usage: gpu_ws_all_scatter.sh OUTDIR}
mkdir -p "$OUTDIR"
export KERNELS=gemm_all_scatter BENCH_TIMEOUT=${BENCH_TIMEOUT:-170}
W=${WORLD_SIZE:-2}
PATTERNS=bulk_sync,producer_consumer NAME=triton_w$W bash eval/gpu_dist_gemm.sh "$OUTDIR"
PATTERNS=bulk_sync,producer_consumer NAME=ws_w$W bash eval/gpu_dist_gemm.sh "$OUTDIR" \
  --meta WS_GEMM=1,BLOCK_M=128,BLOCK_N=256,BLOCK_K=64,num_warps=8,num_stages=3,EPILOGUE_SUBTILE=0,STREAM_K=0
PATTERNS=bulk_sync NAME=tall_w$W bash eval/gpu_dist_gemm.sh "$OUTDIR" \
  --meta WS_GEMM=1,BLOCK_M=256,BLOCK_N=128,BLOCK_K=32,num_warps=8,num_stages=6,EPILOGUE_SUBTILE=1,BLOCK_M_LOW=64,STREAM_K=0
