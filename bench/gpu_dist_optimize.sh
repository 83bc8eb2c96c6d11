#!/usr/bin/env bash
# The distributed optimize on two GPUs (issue #22), all in one session: for the AG + GEMM, GEMM + RS
# and GEMM + all-scatter benchmark problems at W = 2, the hand bench (bench/dist_bench.py:
# every pattern at the default knobs, the kernels' own tile order and the per-rank GEMM configuration
# tuned for the shape where bench/results/gemm_configs_hopper.json has one for this GPU, as the
# optimizer starts from; verified and timed against torch + NCCL), then
# `swizzleperf optimize` (the optimizer starts its own two rank processes), then the table
# OUTDIR/dist_optimize_h100x2.{json,md} (bench/dist_optimize_table.py) from both.
#
#   bash bench/gpu_dist_optimize.sh OUTDIR          # repository root, .whl/ carried, two GPUs
#
# Env: CASES ("kernel:problem ...", default the eight below), WORLD_SIZE (GPUs, default 2),
# ITERATIONS (proposals per run,
# default 10), BENCH_TIMEOUT (seconds per kernel's bench, 90), BENCH_ITERATIONS (10), BUDGET_S (the
# whole script's seconds, default 560, so that it ends within a 10-minute device call), SMOKE=1
# (first the rank pool's smoke test, bench/gpu_dist_smoke.py), PACK (a folder, e.g. $OUT on the
# device machine: the table, the logs and the runs' reports packed there in four files, since a
# device call brings back only a few files two folders deep).
#
# Each optimize run gets an equal share of what is left of BUDGET_S (less a reserve for the table)
# over the runs left, capped at RUN_MAX (150 s): `--time-budget` that share less START_S (10 s:
# the process and its imports before the loop starts), so that the run stops proposing in time
# and ends finished, with its head-to-head and its answer from what it measured; `timeout` at the
# share plus 25 s is only the backstop (then the report says it was cut short, and by what). A run
# whose share is under RUN_MIN (40 s) is skipped and said so.
#
# Timing seen on two H100s (2026-11-25, bench/results/dist_optimize_h100x2/, the run of
# bench/results/dist_optimize_h100x2.md): setup 13-22 s, the three benches 21 s, each optimize run of
# 10 iterations 20-32 s (the ranks' start, the references, ten candidates, the head-to-head): 242 s
# for all eight problems. With 5 iterations two of the eight missed the hand bench's best (its
# earlier_call*.md).
set -uo pipefail
OUTDIR=${1:?usage: gpu_dist_optimize.sh OUTDIR}
mkdir -p "$OUTDIR"
START=$(date +%s)
source bench/gpu_setup.sh   # multicast off, wheels and project installed, $GPU
stamp() { echo "[$(( $(date +%s) - START )) s] $*"; }
stamp "setup done: $(python3 -c 'import torch, triton; print(torch.__version__, triton.__version__, torch.cuda.device_count(), torch.cuda.get_device_name())')"
CASES=${CASES:-"all_gather_gemm:llama70b-up-8k all_gather_gemm:llama70b-qkv-4k all_gather_gemm:llama8b-up-4k \
gemm_reduce_scatter:llama70b-down-8k gemm_reduce_scatter:llama70b-o-4k gemm_reduce_scatter:llama8b-down-4k \
gemm_all_scatter:llama70b-qkv-4k gemm_all_scatter:llama70b-up-1k"}
if [ "${SMOKE:-0}" = 1 ]; then
  timeout ${SMOKE_TIMEOUT:-150} python3 -m bench.gpu_dist_smoke "$OUTDIR/smoke" > "$OUTDIR/smoke.log" 2>&1
  stamp "smoke test: exit $?"; cut -c1-400 "$OUTDIR/smoke.log"
fi
BENCH_FILES=()
for K in all_gather_gemm gemm_reduce_scatter gemm_all_scatter; do
  P=$(for c in $CASES; do [ "${c%%:*}" = "$K" ] && printf '%s,' "${c#*:}"; done)
  [ -z "$P" ] && continue
  timeout ${BENCH_TIMEOUT:-90} torchrun --nproc-per-node ${WORLD_SIZE:-2} -m bench.dist_bench \
    --kernels "$K" --problems "${P%,}" --iterations "${BENCH_ITERATIONS:-10}" --copy-mib 0 \
    --gemm-configs bench/results/gemm_configs_hopper.json --out "$OUTDIR/bench_$K" > "$OUTDIR/bench_$K.log" 2>&1
  stamp "bench $K ${P%,}: exit $?"
  BENCH_FILES+=("$OUTDIR/bench_$K.json")
done
set -- $CASES
RUNS_LEFT=$#
for c in $CASES; do
  K=${c%%:*}; P=${c#*:}
  LEFT=$(( ${BUDGET_S:-560} - 15 - ($(date +%s) - START) ))   # 15 s kept for the table
  SHARE=$(( LEFT / RUNS_LEFT )); RUNS_LEFT=$(( RUNS_LEFT - 1 ))
  [ "$SHARE" -gt "${RUN_MAX:-150}" ] && SHARE=${RUN_MAX:-150}
  if [ "$SHARE" -lt "${RUN_MIN:-40}" ]; then
    stamp "optimize $K $P: skipped, $LEFT s of BUDGET_S=${BUDGET_S:-560} left for $(( RUNS_LEFT + 1 )) runs"; continue
  fi
  timeout -k 15 $(( SHARE + 25 )) python3 -m swizzleperf.agent.cli optimize "kernels/distributed/$K.py" \
    --world-size ${WORLD_SIZE:-2} --problem "$P" -n "${ITERATIONS:-10}" --plateau 100 --no-ncu --workdir "$OUTDIR/ws" \
    --time-budget $(( SHARE - ${START_S:-10} )) > "$OUTDIR/optimize_${K}_${P}.log" 2>&1
  stamp "optimize $K $P (time budget $(( SHARE - ${START_S:-10} )) s): exit $?"
  grep -m1 -E "answer|stopped" "$OUTDIR/optimize_${K}_${P}.log"
done
python3 -m bench.dist_optimize_table --workdir "$OUTDIR/ws" --bench "${BENCH_FILES[@]}" \
  --out "$OUTDIR/dist_optimize_h100x2" \
  --command "CASES='$CASES' WORLD_SIZE=${WORLD_SIZE:-2} ITERATIONS=${ITERATIONS:-10} bash bench/gpu_dist_optimize.sh OUTDIR"
stamp "done"
if [ -n "${PACK:-}" ]; then
  mkdir -p "$PACK" && cp "$OUTDIR"/dist_optimize_h100x2.* "$PACK"/ 2>/dev/null
  tar czf "$PACK/logs.tgz" -C "$OUTDIR" --exclude=ws . 2>/dev/null
  (cd "$OUTDIR" && find ws -name '*.json' -o -name '*.md' -o -name '*.jsonl' -size -4M | tar czf "$PACK/ws.tgz" -T -)
  stamp "packed into $PACK: $(ls "$PACK" | tr '\n' ' ')"
fi
