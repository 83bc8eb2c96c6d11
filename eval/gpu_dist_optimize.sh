#!/usr/bin/env bash
# The distributed optimize on two GPUs (issue #22), all in one session: for the AG + GEMM, GEMM + RS
# and GEMM + all-scatter benchmark problems at W = 2, the hand bench (kernels/distributed/bench.py:
# every pattern at the default knobs, verified and timed against torch + NCCL), then
# `swizzleperf optimize` (the optimizer starts its own two rank processes), then the table
# OUTDIR/dist_optimize_h100x2.{json,md} (eval/dist_optimize_table.py) from both.
#
#   bash eval/gpu_dist_optimize.sh OUTDIR          # repository root, .whl/ carried, two GPUs
#
# Env: CASES ("kernel:problem ...", default the eight below), ITERATIONS (proposals per run,
# default 5), RUN_TIMEOUT (seconds per optimize run, 70), BENCH_TIMEOUT (seconds per kernel's
# bench, 90), BENCH_ITERATIONS (10), BUDGET_S (an optimize run starts only while at least 45 s of
# it are left; default 500, so the whole ends within about 9 minutes), SMOKE=1 (first the rank
# pool's smoke test, eval/gpu_dist_smoke.py).
#
# Timing seen on two H100s (2026-11-25, eval/results/dist_pool_smoke_h100x2.md): setup 22 s, a pool
# 12 s to start, a candidate about 4 s to verify (check and benchmark problem) and time (15 rounds),
# one optimize run of 2 iterations 53 s; the bench of one problem's four patterns 23 s.
set -uo pipefail
OUTDIR=${1:?usage: gpu_dist_optimize.sh OUTDIR}
mkdir -p "$OUTDIR"
START=$(date +%s)
source eval/gpu_setup.sh   # multicast off, wheels and project installed, $GPU
stamp() { echo "[$(( $(date +%s) - START )) s] $*"; }
stamp "setup done: $(python3 -c 'import torch, triton; print(torch.__version__, triton.__version__, torch.cuda.device_count(), torch.cuda.get_device_name())')"
CASES=${CASES:-"all_gather_gemm:llama70b-up-8k all_gather_gemm:llama70b-qkv-4k all_gather_gemm:llama8b-up-4k \
gemm_reduce_scatter:llama70b-down-8k gemm_reduce_scatter:llama70b-o-4k gemm_reduce_scatter:llama8b-down-4k \
gemm_all_scatter:llama70b-qkv-4k gemm_all_scatter:llama70b-up-1k"}
if [ "${SMOKE:-0}" = 1 ]; then
  timeout ${SMOKE_TIMEOUT:-150} python3 eval/gpu_dist_smoke.py "$OUTDIR/smoke" > "$OUTDIR/smoke.log" 2>&1
  stamp "smoke test: exit $?"; cut -c1-400 "$OUTDIR/smoke.log"
fi
BENCH_FILES=()
for K in all_gather_gemm gemm_reduce_scatter gemm_all_scatter; do
  P=$(for c in $CASES; do [ "${c%%:*}" = "$K" ] && printf '%s,' "${c#*:}"; done)
  [ -z "$P" ] && continue
  timeout ${BENCH_TIMEOUT:-90} torchrun --nproc-per-node 2 -m swizzleperf.kernels.distributed.bench \
    --kernels "$K" --problems "${P%,}" --iterations "${BENCH_ITERATIONS:-10}" --copy-mib 0 \
    --out "$OUTDIR/bench_$K" > "$OUTDIR/bench_$K.log" 2>&1
  stamp "bench $K ${P%,}: exit $?"
  BENCH_FILES+=("$OUTDIR/bench_$K.json")
done
for c in $CASES; do
  K=${c%%:*}; P=${c#*:}
  if [ $(( $(date +%s) - START )) -gt $(( ${BUDGET_S:-500} - 45 )) ]; then
    stamp "optimize $K $P: skipped, the time budget (BUDGET_S=${BUDGET_S:-500}) is spent"; continue
  fi
  timeout ${RUN_TIMEOUT:-70} python3 -m swizzleperf.agent.cli optimize "kernels/distributed/$K.py" \
    --world-size 2 --problem "$P" -n "${ITERATIONS:-5}" --plateau 100 --no-ncu --workdir "$OUTDIR/ws" \
    > "$OUTDIR/optimize_${K}_${P}.log" 2>&1
  stamp "optimize $K $P: exit $?"; grep -m1 "answer" "$OUTDIR/optimize_${K}_${P}.log"
done
python3 eval/dist_optimize_table.py --workdir "$OUTDIR/ws" --bench "${BENCH_FILES[@]}" \
  --out "$OUTDIR/dist_optimize_h100x2" \
  --command "CASES='$CASES' ITERATIONS=${ITERATIONS:-5} bash eval/gpu_dist_optimize.sh OUTDIR"
stamp "done"
