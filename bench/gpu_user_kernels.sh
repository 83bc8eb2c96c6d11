#!/usr/bin/env bash
# On a GPU machine (wheels of bench/gather_wheels.sh carried in .whl/): every example user kernel of
# examples/user_kernels/ optimized through `swizzleperf optimize --app ... --kernel ...` at its GPU
# size, the simulator against ncu on each, the measured speedup (bench/gpu_user_kernels.py says
# how). One example per visible GPU at a time; the whole script bounded by BUDGET_S (install
# included); examples not reached are listed as such. Writes OUTDIR/user_kernels_<gpu>.{md,json},
# OUTDIR/user_kernels_<gpu>_runs.tar.gz and OUTDIR/user_kernels.log (4 files).
# Usage: [BUDGET_S=290] [ITERATIONS=1] [EXAMPLES=transpose_2d,stencil_2d] bash bench/gpu_user_kernels.sh OUTDIR
set -uo pipefail
OUTDIR=${1:?usage: gpu_user_kernels.sh OUTDIR}
BUDGET_S=${BUDGET_S:-290}
mkdir -p "$OUTDIR"
source bench/gpu_setup.sh   # multicast off, wheels and project installed, $GPU
left=$(( BUDGET_S - SECONDS - 10 ))
(( left >= 60 )) || { echo "only $left s left after the install"; exit 1; }
echo "install took $SECONDS s; $left s left for the examples on $GPU" | tee "$OUTDIR/user_kernels.log"
timeout -k 10 "$left" python3 -m bench.gpu_user_kernels "$OUTDIR" --iterations "${ITERATIONS:-1}" \
  --budget-s "$(( left - 5 ))" ${EXAMPLES:+--examples "$EXAMPLES"} 2>&1 | tee -a "$OUTDIR/user_kernels.log"
status=${PIPESTATUS[0]}
echo "script wall time: $SECONDS s (exit $status)" | tee -a "$OUTDIR/user_kernels.log"
exit "$status"
