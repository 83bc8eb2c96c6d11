#!/usr/bin/env bash
# The per-rank GEMM against cuBLAS on a machine of one or more Hopper GPUs (bench/gpu_rank_gemm.py):
# every configuration compiled in parallel, checked on ragged shapes with C poisoned, then every
# per-rank shape tuned and timed against torch.matmul, the shapes dealt out over the GPUs (one
# process each), the warp-specialized GEMM timed against the tuned one at the shapes of the kernels
# that have it, the persistent loop's options probed, and the report written (with the winning
# configurations as a cache file for bench/dist_bench.py --gemm-configs). With DIST=1 and
# two GPUs or more, then the distributed kernels at W = 2: every pattern verified at the check
# problem, and AG + GEMM and GEMM + RS verified and timed at their bench problems with the
# grouped-m:8 order and the tuned configurations (bench/dist_bench.py).
# Everything lands in OUTDIR (run.log, JSON files, rank_gemm_hopper.{json,md},
# gemm_configs_hopper.json); the short tables are printed last.
# Usage (repository root): bash bench/gpu_rank_gemm.sh OUTDIR
set -uo pipefail
OUTDIR=${1:?usage: gpu_rank_gemm.sh OUTDIR}
mkdir -p "$OUTDIR"
LOG="$OUTDIR/run.log"
export TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
# The project on the path without touching site-packages: swizzleperf.<folder> -> ./<folder>
# (pyproject's package-dir), through links in a folder of its own.
SITE=$(mktemp -d)/site
mkdir -p "$SITE/swizzleperf"
for folder in agent kernels sandbox profiling hwspecs prompts eval; do ln -s "$PWD/$folder" "$SITE/swizzleperf/$folder"; done
export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
{
  nvidia-smi --query-gpu=index,name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, torch.cuda.get_device_name(), 'x', torch.cuda.device_count())"
} 2>&1 | tee -a "$LOG"
GPUS=$(python3 -c "import torch; print(torch.cuda.device_count())")
timeout ${WARM_TIMEOUT:-150} python3 -m bench.gpu_rank_gemm warm --jobs ${JOBS:-16} >> "$LOG" 2>&1
grep -E "FAILED|^warm:" "$LOG" | tail -5
timeout ${CHECK_TIMEOUT:-150} python3 -m bench.gpu_rank_gemm check --out "$OUTDIR/check.json" 2>&1 | tee -a "$LOG" | tail -4
# With OPTIMIZE=1 (and .whl/ carried: bench/gather_wheels.sh) the last GPU runs
# `swizzleperf optimize kernels/gemm.py` (measured, the built-in policy, no ncu) meanwhile, and
# the shapes are tuned on the others.
TUNERS=$GPUS
if [ "${OPTIMIZE:-0}" = 1 ] && [ "$GPUS" -ge 2 ]; then
  TUNERS=$((GPUS - 1))
  timeout 120 python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target "$SITE/../wheels" .whl/*.whl >> "$LOG" 2>&1
  ( cd "$OUTDIR" && CUDA_VISIBLE_DEVICES=$TUNERS PYTHONPATH="$PYTHONPATH:$SITE/../wheels" \
    timeout -k 20 ${OPTIMIZE_TIMEOUT:-240} python3 -m swizzleperf.agent.cli optimize "$OLDPWD/kernels/gemm.py" \
    --iterations ${ITERATIONS:-3} --no-ncu --workdir "$OUTDIR/sp" > "$OUTDIR/optimize.log" 2>&1 ) &
  OPTIMIZER=$!
fi
for ((i = 0; i < TUNERS; i++)); do
  CUDA_VISIBLE_DEVICES=$i SWIZZLEPERF_GEMM_CACHE="$SITE/../gemm_configs_$i.json" \
    timeout ${TUNE_TIMEOUT:-240} python3 -m bench.gpu_rank_gemm tune --part "$i/$TUNERS" \
    --out "$OUTDIR/tune_$i.json" > "$OUTDIR/tune_$i.log" 2>&1 &
  TUNING="${TUNING:-} $!"
done
wait $TUNING
cat "$OUTDIR"/tune_*.log >> "$LOG"; rm -f "$OUTDIR"/tune_*.log
if [ "${PROBE:-1}" = 1 ]; then
  timeout 90 python3 -m bench.gpu_rank_gemm probe --out "$OUTDIR/loop_options.json" 2>&1 | tee -a "$LOG" | tail -3
fi
# The warp-specialized GEMM against the tuned one where the kernels have it (WS=0 skips it).
TUNED=$(ls "$OUTDIR"/tune_*.json)
if [ "${WS:-1}" = 1 ]; then
  timeout ${WS_TIMEOUT:-200} python3 -m bench.gpu_rank_gemm ws $TUNED --out "$OUTDIR/ws.json" 2>&1 | tee -a "$LOG" | grep "^ws "
  [ -s "$OUTDIR/ws.json" ] && TUNED="$OUTDIR/ws.json"
fi
python3 -m bench.gpu_rank_gemm report $TUNED --out "$OUTDIR/rank_gemm_hopper" \
  --configs-out "$OUTDIR/gemm_configs_hopper.json" 2>&1 | tee -a "$LOG" | tail -34
if [ -n "${OPTIMIZER:-}" ]; then
  wait "$OPTIMIZER"; echo "optimize: exit $?" | tee -a "$LOG"
  cat "$OUTDIR/optimize.log" >> "$LOG"
  report=$(ls -t "$OUTDIR"/sp/runs/*/report.md 2>/dev/null | head -1)
  [ -n "$report" ] && cp "$report" "$OUTDIR/optimize_report.md" && grep -A8 "Against the library" "$report"
  tail -3 "$OUTDIR/optimize.log"
fi
if [ "${DIST:-0}" = 1 ] && [ "$GPUS" -ge 2 ]; then
  RUN="torchrun --nproc-per-node 2 -m bench.dist_bench"
  timeout ${VERIFY_TIMEOUT:-150} $RUN --verify-only --problems check --copy-mib 0 --kernels all_gather_gemm,gemm_reduce_scatter,gemm_all_scatter \
    --out "$OUTDIR/dist_verify_check" > "$OUTDIR/dist.log" 2>&1; echo "dist verify (check problem): exit $?" | tee -a "$LOG"
  grep -E "FAILED|verified|failed" "$OUTDIR/dist.log" | tail -12
  timeout ${BENCH_TIMEOUT:-200} $RUN --kernels all_gather_gemm,gemm_reduce_scatter --patterns ${BENCH_PATTERNS:-push,push_copy_engine,bulk_sync,producer_consumer} \
    --order grouped-m:8 --gemm-configs "$OUTDIR/gemm_configs_hopper.json" --copy-mib 0 --iterations 20 \
    --out "$OUTDIR/dist_2gpu" >> "$OUTDIR/dist.log" 2>&1; echo "dist bench: exit $?" | tee -a "$LOG"
  grep -E "FAILED|x  |failed" "$OUTDIR/dist.log" | tail -16
  cat "$OUTDIR/dist.log" >> "$LOG"; rm -f "$OUTDIR/dist.log"
fi
