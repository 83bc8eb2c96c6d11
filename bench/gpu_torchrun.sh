#!/usr/bin/env bash
# torchrun on this machine's GPUs (WORLD_SIZE of them, default 2) with the repository importable as
# swizzleperf without an install (a site of links, as pyproject's package-dir maps it) and NVLink
# multicast off (KINDS.md). Usage (repository root): bash bench/gpu_torchrun.sh SCRIPT|-m MODULE [args]
set -uo pipefail
export TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
SITE=$(mktemp -d)/site   # swizzleperf.<folder> -> ./<folder>
mkdir -p "$SITE/swizzleperf"
for folder in agent kernels sandbox profiling hwspecs prompts eval; do ln -s "$PWD/$folder" "$SITE/swizzleperf/$folder"; done
export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
exec torchrun --nproc-per-node ${WORLD_SIZE:-2} "$@"
