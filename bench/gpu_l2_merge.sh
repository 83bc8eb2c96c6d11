#!/usr/bin/env bash
# On one H100 or H200 (wheels of bench/gather_wheels.sh carried in .whl/), issue #43: which reads of a
# line the L2 merges before its lookup, and when the GEMM's programs read each tile, on one chip, in
# two calls on the same machine (env.txt names the GPU's UUID: the two must agree):
#   bash bench/gpu_l2_merge.sh A   # the chip's merge groups (bench/l2_merge_probe.py discover, DISCOVER_S
#                                  # seconds, 240), then the probe's cases of CASES (name prefixes, default
#                                  # the noise and TMA ones; "all": every case), noise readers from SM 0's group
#   bash bench/gpu_l2_merge.sh B   # the bundled GEMM's schedule per tile under ORDERS (bench/gemm_schedule_probe.py),
#                                  # then ncu of the same orders (bench/l2_measure_set.py) while time is left
# Both measure the partition map (profiling/dispatch_probe.py). Results under $OUT/r as one tar (a call
# returns 8 files), l2_merge_summary.txt beside it (A). CALL_S: the seconds this script may take (570).
#   bash bench/gpu_l2_merge.sh C   # all in one short call, each file straight under $OUT as it is done (a
#                                  # call cut short keeps what it finished): groups (DISCOVER_S, 150), the
#                                  # schedules and ncu of ORDERS (default two build and two held-out orders)
set -uo pipefail
STEP=${1:?usage: gpu_l2_merge.sh A|B|C}
T0=$(date +%s)
mkdir -p "$OUT/r"
source bench/gpu_setup.sh || exit 1
left() { echo $(( ${CALL_S:-570} - ($(date +%s) - T0) )); }
{ echo "step $STEP"; nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,clocks.max.sm --format=csv
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, torch.cuda.get_device_name(), 'L2', torch.cuda.get_device_properties(0).L2_cache_size)"
  NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu); "$NCU" --version | tail -1; } > "$OUT/r/env.txt" 2>&1
timeout 60 python3 -c "import json, torch; from swizzleperf.profiling import dispatch_probe; print(json.dumps(dispatch_probe.partitions(torch.cuda.get_device_properties(0).multi_processor_count, repeats=1)))" \
  > "$OUT/r/partition_map_$GPU.json" 2> "$OUT/r/partition_map_console.txt"
if [ "$STEP" = C ]; then
  cp "$OUT/r/env.txt" "$OUT/r/partition_map_$GPU.json" "$OUT/"
  timeout "${DISCOVER_S:-150}" python3 -m bench.l2_merge_probe discover --out "$OUT/r/l2_merge_groups_$GPU.json" \
    --budget-s $(( ${DISCOVER_S:-150} - 15 )) > "$OUT/r/discover_console.txt" 2>&1
  echo "discover exit $? at $(( $(date +%s) - T0 )) s" >> "$OUT/env.txt"
  cp "$OUT/r/l2_merge_groups_$GPU.json" "$OUT/"
  ORDERS=${ORDERS:-grouped-m:16,grouped-n:32,column-major,grouped-m:4}
  timeout $(( $(left) > 150 ? $(left) - 60 : 90 )) python3 -m bench.gemm_schedule_probe --orders "$ORDERS" \
    --out "$OUT/gemm_schedule_$GPU.json.gz" > "$OUT/r/schedule_console.txt" 2>&1
  echo "schedule exit $? at $(( $(date +%s) - T0 )) s" >> "$OUT/env.txt"
  ONLY=$(echo "$ORDERS" | sed 's/\([^,]*\)/gemm:\1/g')
  timeout $(( $(left) > 30 ? $(left) - 10 : 20 )) python3 -m bench.l2_measure_set measure --part 1 --outdir "$OUT" \
    --budget-s $(( $(left) > 40 ? $(left) - 30 : 10 )) --only "$ONLY" > "$OUT/r/gemm_console.txt" 2>&1
  echo "gemm orders exit $? at $(( $(date +%s) - T0 )) s" >> "$OUT/env.txt"
  rm -f "$OUT"/r/*_ncu.csv
elif [ "$STEP" = A ]; then
  timeout "${DISCOVER_S:-240}" python3 -m bench.l2_merge_probe discover --out "$OUT/r/l2_merge_groups_$GPU.json" \
    --budget-s $(( ${DISCOVER_S:-240} - 20 )) > "$OUT/r/discover_console.txt" 2>&1
  echo "discover exit $? at $(( $(date +%s) - T0 )) s" >> "$OUT/r/env.txt"
  rm -f "$OUT"/r/l2_merge_groups_"$GPU"_round*_ncu.csv   # the rounds' metrics are in the JSON
  SELECT=${CASES:-noise-,tma-}; [ "$SELECT" = all ] && SELECT=""
  timeout $(( $(left) > 40 ? $(left) - 20 : 20 )) python3 -m bench.l2_merge_probe measure \
    --out "$OUT/r/l2_merge_probe_$GPU.json" --select "$SELECT" --groups "$OUT/r/l2_merge_groups_$GPU.json" \
    > "$OUT/r/merge_console.txt" 2>&1
  echo "merge probe exit $? at $(( $(date +%s) - T0 )) s" >> "$OUT/r/env.txt"
  python3 -m bench.l2_merge_probe summary "$OUT/r/l2_merge_probe_$GPU.json" > "$OUT/r/l2_merge_summary.txt" 2>&1
  cp "$OUT/r/l2_merge_summary.txt" "$OUT/" 2>/dev/null
else
  ORDERS=${ORDERS:-grouped-m:16,grouped-m:64,grouped-n:8,grouped-n:32,row-major,column-major,grouped-m:4,grouped-m:8}
  timeout $(( $(left) > 200 ? $(left) - 120 : 80 )) python3 -m bench.gemm_schedule_probe --orders "$ORDERS" \
    --out "$OUT/r/gemm_schedule_$GPU.json.gz" > "$OUT/r/schedule_console.txt" 2>&1
  echo "schedule exit $? at $(( $(date +%s) - T0 )) s" >> "$OUT/r/env.txt"
  ONLY=$(echo "$ORDERS" | sed 's/\([^,]*\)/gemm:\1/g')
  timeout $(( $(left) > 30 ? $(left) - 10 : 20 )) python3 -m bench.l2_measure_set measure --part 1 --outdir "$OUT/r" \
    --budget-s $(( $(left) > 40 ? $(left) - 30 : 10 )) --only "$ONLY" > "$OUT/r/gemm_console.txt" 2>&1
  echo "gemm orders exit $? at $(( $(date +%s) - T0 )) s" >> "$OUT/r/env.txt"
fi
cd "$OUT" && tar czf r.tgz r && rm -rf r
