#!/usr/bin/env bash
# On one H100 or H200 (wheels of bench/gather_wheels.sh carried in .whl/), issue #43: which reads of a
# line the L2 merges before its lookup, and when the GEMM's programs read each tile, on one chip:
#   1. this chip's merge groups (bench/l2_merge_probe.py discover, under ncu; DISCOVER_S seconds, 220)
#   2. the partition map (profiling/dispatch_probe.py), then the probe's cases of CASES (case-name
#      prefixes, default the noise and TMA ones; "all": every case), noise readers from SM 0's group
#   3. the bundled GEMM's schedule per tile under ORDERS (bench/gemm_schedule_probe.py)
#   4. on an H200, the GEMM's orders of the measurement set under ncu (ONLY_H200) while time is left
# Results under $OUT/r as one tar (a call returns 8 files) and l2_merge_summary.txt beside it.
# CALL_S: the seconds of the call this script may take (default 560).
set -uo pipefail
T0=$(date +%s)
mkdir -p "$OUT/r"
source bench/gpu_setup.sh || exit 1
left() { echo $(( ${CALL_S:-560} - ($(date +%s) - T0) )); }
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, torch.cuda.get_device_name(), 'L2', torch.cuda.get_device_properties(0).L2_cache_size)"
  NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu); "$NCU" --version | tail -1; } > "$OUT/r/env.txt" 2>&1
timeout "${DISCOVER_S:-220}" python3 -m bench.l2_merge_probe discover --out "$OUT/r/l2_merge_groups_$GPU.json" \
  --budget-s $(( ${DISCOVER_S:-220} - 20 )) > "$OUT/r/discover_console.txt" 2>&1
echo "discover exit $? at $(( $(date +%s) - T0 )) s" >> "$OUT/r/env.txt"
timeout 60 python3 -c "import json, torch; from swizzleperf.profiling import dispatch_probe; print(json.dumps(dispatch_probe.partitions(torch.cuda.get_device_properties(0).multi_processor_count, repeats=1)))" \
  > "$OUT/r/partition_map_$GPU.json" 2> "$OUT/r/partition_map_console.txt"
SELECT=${CASES:-noise-,tma-}; [ "$SELECT" = all ] && SELECT=""
timeout $(( $(left) - 120 > 60 ? $(left) - 120 : 60 )) python3 -m bench.l2_merge_probe measure \
  --out "$OUT/r/l2_merge_probe_$GPU.json" --select "$SELECT" --groups "$OUT/r/l2_merge_groups_$GPU.json" \
  > "$OUT/r/merge_console.txt" 2>&1
echo "merge probe exit $? at $(( $(date +%s) - T0 )) s" >> "$OUT/r/env.txt"
python3 -m bench.l2_merge_probe summary "$OUT/r/l2_merge_probe_$GPU.json" > "$OUT/r/l2_merge_summary.txt" 2>&1
cp "$OUT/r/l2_merge_summary.txt" "$OUT/" 2>/dev/null
timeout $(( $(left) > 30 ? $(left) - 10 : 20 )) python3 -m bench.gemm_schedule_probe \
  --orders "${ORDERS:-row-major,column-major,grouped-m:4,grouped-m:8,grouped-n:32}" \
  --out "$OUT/r/gemm_schedule_$GPU.json.gz" > "$OUT/r/schedule_console.txt" 2>&1
echo "schedule exit $? at $(( $(date +%s) - T0 )) s" >> "$OUT/r/env.txt"
if [ "$GPU" = h200 ] && [ "$(left)" -gt 90 ]; then
  timeout $(( $(left) - 10 )) python3 -m bench.l2_measure_set measure --part 1 --outdir "$OUT/r" --budget-s $(( $(left) - 30 )) \
    --only "${ONLY_H200:-gemm:row-major,gemm:column-major,gemm:grouped-m:8,gemm:grouped-m:4}" > "$OUT/r/gemm_console.txt" 2>&1
  echo "gemm orders exit $? at $(( $(date +%s) - T0 )) s" >> "$OUT/r/env.txt"
fi
cd "$OUT" && tar czf r.tgz r && rm -rf r
