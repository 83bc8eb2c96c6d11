#!/usr/bin/env bash
# The distributed kernels at W = 4 on a four-GPU lease, in one command (each step bounded):
#   1. the multi-GPU tests at W = 4 (every kernel and pattern verified at the check problem, the
#      dead rank): OUTDIR/pytest_w4.txt;
#   2. GEMM + RS at its bench problems (RS_PATTERNS; push_copy_engine runs its warp-specialized own
#      rows by default), every pattern verified then timed paired with torch + NCCL: OUTDIR/rs_w4.*;
#   3. GEMM + all-scatter producer_consumer at iris-8192x3584x14336 three times in a row: the
#      configuration cache's GEMM (WS at 8192 x 896 x 14336), the Triton GEMM with its tuned tiles
#      (TRITON_META), the cache again (A / B / A, to see drift): OUTDIR/as_{cache,triton,cache2}_w4.*.
# Needs the diskcache wheel on PYTHONPATH (as the other GPU scripts). Usage (repository root):
#   bash bench/gpu_w4_checks.sh OUTDIR
set -uo pipefail
OUTDIR=${1:?usage: gpu_w4_checks.sh OUTDIR}
mkdir -p "$OUTDIR"
export WORLD_SIZE=4
nvidia-smi topo -m > "$OUTDIR/topo.txt" 2>&1
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv > "$OUTDIR/gpus.txt" 2>&1

SITE=$(mktemp -d)/site   # swizzleperf.<folder> -> ./<folder>, for pytest's torchrun children
mkdir -p "$SITE/swizzleperf"
for folder in agent kernels sandbox profiling hwspecs prompts eval; do ln -s "$PWD/$folder" "$SITE/swizzleperf/$folder"; done
SWIZZLEPERF_WORLD_SIZES=4 PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}" timeout -k 10 ${TEST_TIMEOUT:-200} \
  python3 -m pytest -q -p no:xdist -p no:cacheprovider -m multigpu --durations=5 \
  tests/kernels/distributed/test_multigpu.py > "$OUTDIR/pytest_w4.txt" 2>&1
echo "pytest exit $?" | tee -a "$OUTDIR/pytest_w4.txt"

KERNELS=gemm_reduce_scatter PATTERNS=${RS_PATTERNS:-push_copy_engine,bulk_sync,epilogue_reduce} NAME=rs_w4 \
  BENCH_TIMEOUT=${RS_TIMEOUT:-200} bash bench/gpu_dist_gemm.sh "$OUTDIR"

TRITON_META=${TRITON_META:-WS_GEMM=0,BLOCK_M=256,BLOCK_N=128,BLOCK_K=64,num_warps=8,num_stages=3,STREAM_K=0,EPILOGUE_SUBTILE=0,BLOCK_M_LOW=0}
for run in cache triton cache2; do
  extra=()
  [ "$run" = triton ] && extra=(--meta "$TRITON_META")
  KERNELS=gemm_all_scatter PATTERNS=producer_consumer PROBLEMS=iris-8192x3584x14336 NAME=as_${run}_w4 \
    BENCH_TIMEOUT=${AS_TIMEOUT:-90} bash bench/gpu_dist_gemm.sh "$OUTDIR" "${extra[@]}"
done
