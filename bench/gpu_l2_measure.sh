#!/usr/bin/env bash
# On one H100 or H200 (wheels of bench/gather_wheels.sh carried in .whl/), issue #43: the L2 model's
# measurement set under ncu (--clock-control none), in two calls of at most 10 minutes each:
#   bash bench/gpu_l2_measure.sh 1     # partition probe (bench/l2_partition_probe.py) + gemm, smith_waterman, stencil2d
#   bash bench/gpu_l2_measure.sh 2     # fdtd2d, transpose, spmv, elementwise, layernorm, softmax, black_scholes
# Results under $OUT (or the folder given second): ncu_orders_<kernel>_<gpu>.json per kernel (the
# format bench/validate_simulator.py compare reads; held-out rows marked), l2_measure_part<N>.json
# (pairs measured, failed, not reached, seconds each), l2_partition_probe_<gpu>.json (+ _map.json, _ncu.csv),
# env.txt. Pairs left unreached: ONLY=kernel:order,... bash bench/gpu_l2_measure.sh N. CALL_S: the seconds
# this script may take of the call (560 by default; less where the same call ran something first).
set -euo pipefail
PART=${1:?usage: gpu_l2_measure.sh PART [OUTDIR]   (PART 1 or 2)}
OUTDIR=${2:-${OUT:?set OUT or give OUTDIR}}
case "$PART" in 1|2) ;; *) echo "PART must be 1 or 2" >&2; exit 2 ;; esac
mkdir -p "$OUTDIR"
T0=$(date +%s)              # the call's 600 s include the setup below
source bench/gpu_setup.sh   # multicast off, wheels and project installed, $GPU
START=$(date +%s)
{ echo "part $PART, started $(date -u +%FT%TZ)"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv || true
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, torch.cuda.get_device_name(), 'L2', torch.cuda.get_device_properties(0).L2_cache_size)"
  NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu); "$NCU" --version | tail -1; } > "$OUTDIR/env.txt" 2>&1
# the held-out list is checked before anything is measured (a changed PAIRS or seed stops here)
python3 -c "from bench.l2_measure_set import load_holdout; print(len(load_holdout()), 'held-out pairs')"
left() { echo $(( ${CALL_S:-560} - ($(date +%s) - T0) )); }
BUDGET=$(left)
if [ "$PART" = 1 ] && [ -z "${ONLY:-}" ]; then
  timeout 240 python3 -m bench.l2_partition_probe measure --out "$OUTDIR/l2_partition_probe_$GPU.json" \
    || echo "partition probe failed or timed out (rc $?)"
  BUDGET=$(left)
fi
python3 -m bench.l2_measure_set measure --part "$PART" --outdir "$OUTDIR" --budget-s "$BUDGET" ${ONLY:+--only "$ONLY"}
echo "part $PART done in $(( $(date +%s) - START )) s" | tee -a "$OUTDIR/env.txt"
