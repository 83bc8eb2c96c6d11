#!/usr/bin/env bash
# On the GPU machine (wheels of eval/gather_wheels.sh carried in .whl/): ncu metrics of the GEMM
# under several orders, for eval/validate_simulator.py compare. Usage: bash eval/gpu_validate.sh OUTDIR
set -euo pipefail
OUTDIR=${1:?usage: gpu_validate.sh OUTDIR}
export TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e .
GPU=$(python3 -c "import torch; print(torch.cuda.get_device_name().split()[1].lower())")
python3 eval/validate_simulator.py measure --out "$OUTDIR/ncu_orders_$GPU.json"
