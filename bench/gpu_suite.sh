#!/usr/bin/env bash
# On the GPU machine (wheels of bench/gather_wheels.sh carried in .whl/): the dispatch probe, the
# tracer under the machine's triton, the baseline table of the bundled kernels, then (as time
# allows) ncu against the simulator for the 2-D kernels. Usage: bash bench/gpu_suite.sh OUTDIR
set -uo pipefail
OUTDIR=${1:?usage: gpu_suite.sh OUTDIR}
source bench/gpu_setup.sh   # multicast off, wheels and project installed, $GPU
swizzleperf hw --probe --workdir "$OUTDIR" 2>&1 | tail -2 | tee "$OUTDIR/probe.txt"
swizzleperf simulate kernels/gemm.py --hw h200 --swizzle grouped-m:8 --traced --json > "$OUTDIR/traced_gemm_$GPU.json" \
  || echo "the tracer failed on this triton" > "$OUTDIR/traced_gemm_$GPU.json"
python3 -m bench.bench_suite --out "$OUTDIR/baseline_$GPU" ${KERNELS:+--kernels $KERNELS}
for kernel in ${VALIDATE:-}; do
  python3 -m bench.validate_simulator measure --kernel "kernels/$kernel.py" \
    --orders row-major,column-major,grouped-m:8 --out "$OUTDIR/ncu_orders_${kernel}_$GPU.json"
done
