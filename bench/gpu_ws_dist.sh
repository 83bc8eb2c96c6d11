#!/usr/bin/env bash
# A distributed kernel with its GEMM warp-specialized (WS_GEMM, kernels/schedule/ws_gemm.py) against
# the Triton GEMM, at the bench problems, WORLD_SIZE GPUs (default 2): three bench runs in one lease,
# each verifying first then timing paired with torch + NCCL:
#   triton: PATTERNS with the per-rank GEMM configurations of bench/results/gemm_configs_hopper.json
#           (what runs without WS_GEMM);
#   ws:     PATTERNS, WS_GEMM=1 at 128 x 256 x 64, 8 warps, 3 stages, C's whole tile;
#   tall:   TALL_PATTERNS, WS_GEMM=1 at 320 x 128 x 32 (256 + 64 rows), 6 stages, C in halves.
# KERNEL: gemm_all_scatter (default; PATTERNS bulk_sync,producer_consumer, TALL_PATTERNS bulk_sync)
# or all_gather_gemm (push_copy_engine,bulk_sync for both).
# Usage (repository root): KERNEL=all_gather_gemm WORLD_SIZE=2 bash bench/gpu_ws_dist.sh OUTDIR
set -uo pipefail
OUTDIR=${1:?usage: gpu_ws_dist.sh OUTDIR}
mkdir -p "$OUTDIR"
export KERNELS=${KERNEL:-gemm_all_scatter} BENCH_TIMEOUT=${BENCH_TIMEOUT:-170}
if [ "$KERNELS" = all_gather_gemm ]; then both=push_copy_engine,bulk_sync; tall=$both
else both=bulk_sync,producer_consumer; tall=bulk_sync; fi
W=${WORLD_SIZE:-2}
PATTERNS=${PATTERNS:-$both} NAME=triton_w$W bash bench/gpu_dist_gemm.sh "$OUTDIR"
PATTERNS=${PATTERNS:-$both} NAME=ws_w$W bash bench/gpu_dist_gemm.sh "$OUTDIR" \
  --meta WS_GEMM=1,BLOCK_M=128,BLOCK_N=256,BLOCK_K=64,num_warps=8,num_stages=3,EPILOGUE_SUBTILE=0,STREAM_K=0,BLOCK_M_LOW=0
PATTERNS=${TALL_PATTERNS:-$tall} NAME=tall_w$W bash bench/gpu_dist_gemm.sh "$OUTDIR" \
  --meta WS_GEMM=1,BLOCK_M=256,BLOCK_N=128,BLOCK_K=32,num_warps=8,num_stages=6,EPILOGUE_SUBTILE=1,BLOCK_M_LOW=64,STREAM_K=0
