#!/usr/bin/env bash
# The warp-specialized Gluon GEMM against cuBLAS and the tuned Triton GEMM on one Hopper GPU
# (bench/gpu_ws_gemm.py; its arguments after OUTDIR). Writes OUTDIR/ws_gemm.json and run.log.
# Usage (repository root): bash bench/gpu_ws_gemm.sh OUTDIR [--shapes MxNxK,...] [--configs "..."]
set -uo pipefail
OUTDIR=${1:?usage: gpu_ws_gemm.sh OUTDIR [args]}
shift
mkdir -p "$OUTDIR"
# The project on the path without installing it: swizzleperf.<folder> -> ./<folder>.
SITE=$(mktemp -d)/site
mkdir -p "$SITE/swizzleperf"
for folder in agent kernels sandbox profiling hwspecs prompts eval; do ln -s "$PWD/$folder" "$SITE/swizzleperf/$folder"; done
export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
{
  nvidia-smi --query-gpu=index,name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, torch.cuda.get_device_name())"
} 2>&1 | tee -a "$OUTDIR/run.log"
timeout -k 10 ${WS_TIMEOUT:-500} python3 -m bench.gpu_ws_gemm --out "$OUTDIR/ws_gemm.json" "$@" 2>&1 | tee -a "$OUTDIR/run.log" | grep -v "^  "
echo "exit ${PIPESTATUS[0]}" | tee -a "$OUTDIR/run.log"
