#!/usr/bin/env bash
# On the GPU machine (wheels of eval/gather_wheels.sh carried in .whl/): ncu metrics of the GEMM
# under several orders, for eval/validate_simulator.py compare. Usage: bash eval/gpu_validate.sh OUTDIR
set -euo pipefail
OUTDIR=${1:?usage: gpu_validate.sh OUTDIR}
source eval/gpu_setup.sh   # multicast off, wheels and project installed, $GPU
python3 eval/validate_simulator.py measure --out "$OUTDIR/ncu_orders_$GPU.json"
