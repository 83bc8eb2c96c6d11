#!/usr/bin/env bash
# On one GPU (wheels of bench/gather_wheels.sh carried in .whl/): the dispatch probe (placement and
# L2 partition of every SM), the GEMM's own placement and ncu's L2 metrics of the GEMM under ten
# orders, all on the same chip,
# so that the simulator's probed partition model can be compared with ncu
# (bench/validate_simulator.py compare --probe). Usage: bash bench/gpu_probe.sh OUTDIR
set -uo pipefail
OUTDIR=${1:?usage: gpu_probe.sh OUTDIR}
source bench/gpu_setup.sh   # multicast off, wheels and project installed, $GPU
mkdir -p "$OUTDIR"
timeout 240 swizzleperf hw --probe --workdir "$OUTDIR" 2>&1 | tail -20
timeout 300 python3 -m bench.gemm_placement --out "$OUTDIR/gemm_placement.json" 2>&1 | tail -12
timeout 900 python3 -m bench.validate_simulator measure --out "$OUTDIR/ncu_orders_gemm.json" 2>&1 | tail -15
