#!/usr/bin/env bash
# On a multi-GPU machine: the multigpu tests (world size 2, or SWIZZLEPERF_WORLD_SIZES), then the
# distributed benchmark at each world size in WORLD_SIZES (default: every GPU), results in OUTDIR.
# Usage (repository root, .whl/ carried): bash bench/gpu_dist.sh OUTDIR
set -uo pipefail
OUTDIR=${1:?usage: gpu_dist.sh OUTDIR}
mkdir -p "$OUTDIR"
source bench/gpu_setup.sh   # multicast off, wheels and project installed, $GPU
GPUS=$(python3 -c "import torch; print(torch.cuda.device_count())")
nvidia-smi topo -m > "$OUTDIR/topo.txt" 2>&1
if [ "${SKIP_TESTS:-0}" != 1 ]; then
  timeout 300 python3 -m pytest -q -m multigpu tests/kernels/distributed 2>&1 | tail -15 | tee "$OUTDIR/multigpu_tests.txt"
fi
for W in ${WORLD_SIZES:-$GPUS}; do
  timeout ${BENCH_TIMEOUT:-400} torchrun --nproc-per-node "$W" -m bench.dist_bench \
    --kernels "${KERNELS:-all}" --out "$OUTDIR/dist_${W}gpu" ${BENCH_ARGS:-} 2>&1 | tail -60 | tee "$OUTDIR/bench_${W}gpu.log"
done
