#!/usr/bin/env bash
# On the GPU machine (wheels of bench/gather_wheels.sh carried in .whl/): ncu metrics of the GEMM
# under several orders, for bench/validate_simulator.py compare. Usage: bash bench/gpu_validate.sh OUTDIR
set -euo pipefail
OUTDIR=${1:?usage: gpu_validate.sh OUTDIR}
source bench/gpu_setup.sh   # multicast off, wheels and project installed, $GPU
python3 -m bench.validate_simulator measure --out "$OUTDIR/ncu_orders_$GPU.json"
