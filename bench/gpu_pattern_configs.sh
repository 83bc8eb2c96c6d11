#!/usr/bin/env bash
# The per-pattern GEMM configuration (agent/distributed/problems.tuned_gemm's ``pattern``: a pattern
# that gives its GEMM NUM_SMS - COMM_SMS programs takes the schedule with fewer waves there) on a
# four-GPU lease, in one command:
#   1. GEMM + all-scatter at W = 4, its bench problems, bulk_sync / producer_consumer /
#      workgroup_specialized with the per-pattern defaults: OUTDIR/as_w4.*;
#   2. at W = 2 (GPUs 0 and 1), where the per-pattern choice changed a default, that default (A)
#      against the configuration every pattern took before (B: the WS GEMM, OLD_META), A / B / A:
#      all-gather + GEMM push at qkv-4k and up-4k, GEMM + all-scatter producer_consumer at qkv-4k:
#      OUTDIR/{ag_push,as_pc}_{new,old,new2}_w2.*.
# Needs the diskcache wheel on PYTHONPATH (as the other GPU scripts). Usage (repository root):
#   bash bench/gpu_pattern_configs.sh OUTDIR
set -uo pipefail
OUTDIR=${1:?usage: gpu_pattern_configs.sh OUTDIR}
mkdir -p "$OUTDIR"
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv > "$OUTDIR/gpus.txt" 2>&1

WORLD_SIZE=4 KERNELS=gemm_all_scatter PATTERNS=bulk_sync,producer_consumer,workgroup_specialized NAME=as_w4 \
  BENCH_TIMEOUT=${AS_TIMEOUT:-200} bash bench/gpu_dist_gemm.sh "$OUTDIR"

OLD_META=${OLD_META:-WS_GEMM=1,BLOCK_M=128,BLOCK_N=256,BLOCK_K=64,num_warps=8,num_stages=3,EPILOGUE_SUBTILE=0,STREAM_K=0,BLOCK_M_LOW=0}
for run in new old new2; do
  extra=()
  [ "$run" = old ] && extra=(--meta "$OLD_META")
  WORLD_SIZE=2 KERNELS=all_gather_gemm PATTERNS=push PROBLEMS=llama70b-qkv-4k,llama8b-up-4k NAME=ag_push_${run}_w2 \
    BENCH_TIMEOUT=${AB_TIMEOUT:-90} bash bench/gpu_dist_gemm.sh "$OUTDIR" "${extra[@]}"
  WORLD_SIZE=2 KERNELS=gemm_all_scatter PATTERNS=producer_consumer PROBLEMS=llama70b-qkv-4k NAME=as_pc_${run}_w2 \
    BENCH_TIMEOUT=${AB_TIMEOUT:-90} bash bench/gpu_dist_gemm.sh "$OUTDIR" "${extra[@]}"
done
