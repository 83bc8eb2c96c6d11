#!/usr/bin/env bash
# The distributed GEMM kernels at W = 2 with the Hopper GEMM schedule (bench/dist_bench.py):
# every pattern of all-gather + GEMM, GEMM + reduce-scatter and GEMM + all-scatter (KERNELS, PATTERNS)
# verified and timed against torch + NCCL at their bench problems, with each kernel's expert tile
# order (grouped-m:8 for these three; flash decode, where KERNELS names it, keeps its own)
# and the per-rank GEMM configurations measured per shape on this GPU kind
# (bench/results/gemm_configs_hopper.json; a shape not in it keeps the kernel's default).
# Extra arguments go to the bench (e.g. --meta FLATTEN=1). Results: OUTDIR/dist_2gpu.{json,md}.
# Usage (repository root, two GPUs or more): bash bench/gpu_dist_gemm.sh OUTDIR [bench args]
set -uo pipefail
OUTDIR=${1:?usage: gpu_dist_gemm.sh OUTDIR [bench args]}; shift
mkdir -p "$OUTDIR"
timeout ${BENCH_TIMEOUT:-400} bash bench/gpu_torchrun.sh -m bench.dist_bench \
  --kernels "${KERNELS:-all_gather_gemm,gemm_reduce_scatter,gemm_all_scatter}" --patterns "${PATTERNS:-all}" \
  --problems "${PROBLEMS:-bench}" --order expert --gemm-configs bench/results/gemm_configs_hopper.json \
  --copy-mib 0 --out "$OUTDIR/${NAME:-dist_2gpu}" "$@" 2>&1 | grep -vE "^(W|E)[0-9]{4} " | tail -40
