#!/usr/bin/env bash
# GEMM + reduce-scatter's push_copy_engine on two GPUs: first each meta of VERIFY_META (space-separated
# bench --meta values) verified by the bench (bench/dist_bench.py --verify-only: synchronised launches,
# then launches back to back), then the whole launch's variants and its steps alone timed against
# cuBLAS (bench/gpu_rs_ce_parts.py, extra arguments go to it). Results: OUTDIR/verify_<i>.{json,md},
# OUTDIR/rs_ce_parts.json.
# Usage (repository root, two GPUs or more): bash bench/gpu_rs_ce_parts.sh OUTDIR [gpu_rs_ce_parts.py args]
set -uo pipefail
OUTDIR=${1:?usage: gpu_rs_ce_parts.sh OUTDIR [gpu_rs_ce_parts.py args]}; shift
mkdir -p "$OUTDIR"
i=0
for meta in ${VERIFY_META:-}; do
  i=$((i + 1))
  echo "verify_$i: --meta $meta"
  KERNELS=gemm_reduce_scatter PATTERNS=push_copy_engine NAME=verify_$i \
    bash bench/gpu_dist_gemm.sh "$OUTDIR" --verify-only --meta "$meta"
done
timeout ${PARTS_TIMEOUT:-420} bash bench/gpu_torchrun.sh -m bench.gpu_rs_ce_parts \
  --out "$OUTDIR/rs_ce_parts.json" "$@" 2>&1 | grep -vE "^(W|E)[0-9]{4} " | tail -30
