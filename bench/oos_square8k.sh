#!/usr/bin/env bash
# Issue #43, an out-of-sample test of the simulator (no parameter of it chosen at this problem): the
# bundled GEMM at 8192 x 8192 x 8192 (its "square8k" problem made the default of a copy), predicted
# on a CPU first (P), then measured by ncu on a GPU (M, after bench/gpu_setup.sh), the same orders:
#   bash bench/oos_square8k.sh P OUTDIR     # swizzleperf simulate --hw h100 --json per order
#   bash bench/oos_square8k.sh M OUTDIR     # bench/validate_simulator.py measure (ncu, 3 launches)
set -uo pipefail
STEP=${1:?P or M}; OUTDIR=${2:?an output folder}
ORDERS=${ORDERS:-row-major,column-major,grouped-m:8,grouped-m:4}
mkdir -p "$OUTDIR" build/oos
sed 's/"default": {"M": 16384, "N": 16384, "K": 4096}/"default": {"M": 8192, "N": 8192, "K": 8192}/' kernels/gemm.py \
  > build/oos/gemm_square8k.py
grep -q '"default": {"M": 8192, "N": 8192, "K": 8192}' build/oos/gemm_square8k.py || { echo "the default problem was not replaced"; exit 1; }
if [ "$STEP" = P ]; then
  for o in ${ORDERS//,/ }; do
    SWIZZLEPERF_SIM_CACHE=off swizzleperf simulate build/oos/gemm_square8k.py --hw h100 --swizzle "$o" --json \
      > "$OUTDIR/predicted_${o//:/_}.json" || exit 1
  done
else
  python3 -m bench.validate_simulator measure --kernel build/oos/gemm_square8k.py --orders "$ORDERS" \
    --out "$OUTDIR/ncu_square8k.json"
fi
