#!/usr/bin/env bash
# One device call (about 9 minutes, the wheels of bench/gather_wheels.sh carried in .whl/), for two
# GPU steps that never got a machine: #44's main job with its confirmation rounds (the chosen order
# and the launch configuration against cuBLAS timed again in fresh rounds of another process), then
# #43's out-of-sample measurement of the GEMM at 8192^3 (bench/oos_square8k.sh M), each within the
# time left. Everything under $OUT/r as one tar (a call returns few files), the two summaries and
# the console beside it:
#   bash bench/gpu_main_and_oos.sh        # CALL_S: the seconds this may take (570)
set -uo pipefail
T0=$(date +%s)
left() { echo $(( ${CALL_S:-570} - ($(date +%s) - T0) )); }
mkdir -p "$OUT/r"
source bench/gpu_setup.sh || exit 1
{ git rev-parse HEAD 2>/dev/null; nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,clocks.max.sm --format=csv
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; } > "$OUT/r/env.txt" 2>&1
SKIP_BENCH=1 timeout $(( $(left) - 200 )) bash bench/gpu_run.sh "$OUT/r/main_job" > "$OUT/r/main_job_console.txt" 2>&1
echo "main job exit $? at $(( $(date +%s) - T0 )) s" >> "$OUT/r/env.txt"
timeout $(( $(left) - 20 )) bash bench/oos_square8k.sh M "$OUT/r/oos_square8k" > "$OUT/r/oos_console.txt" 2>&1
echo "oos exit $? at $(( $(date +%s) - T0 )) s" >> "$OUT/r/env.txt"
cp "$OUT/r/env.txt" "$OUT/r/main_job/report_$GPU.md" "$OUT/" 2>/dev/null
tail -40 "$OUT/r/main_job_console.txt" > "$OUT/main_job_tail.txt"
tar -C "$OUT" -czf "$OUT/r.tgz" r && rm -rf "$OUT/r"
