#!/usr/bin/env bash
# One device-machine session for the main job: install the carried wheels and the project, print the
# detected hardware, benchmark the GEMM against torch.matmul, then run the main job as a user would.
# Usage (from the repository root on the GPU machine, .whl/ carried): bash bench/gpu_run.sh OUTDIR
set -uo pipefail
OUTDIR=${1:?usage: gpu_run.sh OUTDIR}
mkdir -p "$OUTDIR"
source bench/gpu_setup.sh   # multicast off, wheels and project installed, $GPU
swizzleperf hw 2>&1 | tee "$OUTDIR/hw.txt"
if [ "${SKIP_BENCH:-0}" != 1 ]; then
  python3 -m bench.bench_gemm --out "$OUTDIR/gemm_bench_$GPU.json" 2>&1 | tee "$OUTDIR/gemm_bench_$GPU.md"
fi
start=$(date +%s)
swizzleperf optimize kernels/gemm.py --iterations ${ITERATIONS:-8} 2>&1 | tee "$OUTDIR/optimize_$GPU.log"
status=$?
echo "wall time of optimize: $(( $(date +%s) - start )) s" | tee -a "$OUTDIR/optimize_$GPU.log"
run=$(ls -td .swizzleperf/runs/* | head -1)
cp "$run/report.json" "$OUTDIR/report_$GPU.json"; cp "$run/report.md" "$OUTDIR/report_$GPU.md"
cp "$run/best.diff" "$OUTDIR/best_$GPU.diff" 2>/dev/null
exit $status
