#!/usr/bin/env bash
# AG + GEMM's waiting GEMM loop flattened or not (issue #23): the kernel leaves a loop that waits
# on flags unflattened by default (kernels/distributed/tiles.gemm_launch); this times push,
# push_copy_engine and bulk_sync at the three bench problems at W = 2 with the default and with
# --meta FLATTEN=1, each pattern verified first, the tuned GEMM configurations of
# eval/results/gemm_configs_hopper.json. Usage (repository root, 2 GPUs): bash eval/gpu_ag_flatten.sh OUTDIR
set -uo pipefail
OUTDIR=${1:?usage: gpu_ag_flatten.sh OUTDIR}
mkdir -p "$OUTDIR"
export TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
SITE=$(mktemp -d)/site
mkdir -p "$SITE/swizzleperf"
for folder in agent kernels sandbox profiling hwspecs prompts eval; do ln -s "$PWD/$folder" "$SITE/swizzleperf/$folder"; done
export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
RUN="torchrun --nproc-per-node 2 -m swizzleperf.eval.dist_bench --kernels all_gather_gemm
  --patterns push,push_copy_engine,bulk_sync --order grouped-m:8
  --gemm-configs eval/results/gemm_configs_hopper.json --copy-mib 0 --iterations ${ITERATIONS:-20}"
for flatten in default 1; do
  meta=""; [ "$flatten" = 1 ] && meta="--meta FLATTEN=1"
  timeout ${BENCH_TIMEOUT:-240} $RUN $meta --out "$OUTDIR/ag_flatten_$flatten" > "$OUTDIR/ag_flatten_$flatten.log" 2>&1
  echo "FLATTEN=$flatten: exit $?"
  grep -E "x  |FAILED|failed" "$OUTDIR/ag_flatten_$flatten.log" | tail -10
done
