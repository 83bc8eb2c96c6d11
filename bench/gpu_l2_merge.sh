#!/usr/bin/env bash
# On one H100 or H200 (wheels of bench/gather_wheels.sh carried in .whl/), issue #43: which reads of a
# line the L2 merges before its lookup (bench/l2_merge_probe.py, under ncu), then, on an H200, the
# GEMM's orders of the measurement set (bench/l2_measure_set.py, ONLY_H200, default the four the issue
# and the held-out ranking name) while CALL_S (default 560) seconds of the call are left. Results under
# $OUT/r as one tar (a call returns 8 files): l2_merge_probe_<gpu>.json (+ _ncu.csv, _served.json),
# l2_merge_summary.txt, ncu_orders_gemm_<gpu>.json and l2_measure_part1.json (H200 only), env.txt.
set -uo pipefail
T0=$(date +%s)
mkdir -p "$OUT/r"
source bench/gpu_setup.sh || exit 1
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, torch.cuda.get_device_name(), 'L2', torch.cuda.get_device_properties(0).L2_cache_size)"
  NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu); "$NCU" --version | tail -1; git log --oneline -1 2>/dev/null; } > "$OUT/r/env.txt" 2>&1
timeout 520 python3 -m bench.l2_merge_probe measure --out "$OUT/r/l2_merge_probe_$GPU.json" > "$OUT/r/merge_console.txt" 2>&1
echo "merge probe exit $? after $(( $(date +%s) - T0 )) s" >> "$OUT/r/env.txt"
python3 -m bench.l2_merge_probe summary "$OUT/r/l2_merge_probe_$GPU.json" > "$OUT/r/l2_merge_summary.txt" 2>&1
cp "$OUT/r/l2_merge_summary.txt" "$OUT/" 2>/dev/null
LEFT=$(( ${CALL_S:-560} - ($(date +%s) - T0) ))
if [ "$GPU" = h200 ] && [ "$LEFT" -gt 60 ]; then
  timeout "$LEFT" python3 -m bench.l2_measure_set measure --part 1 --outdir "$OUT/r" --budget-s $(( LEFT - 20 )) \
    --only "${ONLY_H200:-gemm:row-major,gemm:column-major,gemm:grouped-m:8,gemm:grouped-m:4}" > "$OUT/r/gemm_console.txt" 2>&1
  echo "gemm orders exit $? at $(( $(date +%s) - T0 )) s" >> "$OUT/r/env.txt"
fi
cd "$OUT" && tar czf r.tgz r && rm -rf r
