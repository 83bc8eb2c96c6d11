#!/usr/bin/env bash
# On a one-GPU machine (wheels of eval/gather_wheels.sh carried in .whl/): the checks of this round
# that need a GPU, results under $OUT. Usage: bash eval/gpu_round42.sh
#   1. the read-only box with CUDA, compiled Triton and ncu inside (sandbox tests, GPU-marked);
#   2. the bottleneck trace on NVIDIA (torch.profiler's CUPTI activity): `profile --app` on the
#      tutorial GEMM (large) and on the three-kernel test app, and `optimize --app` without --kernel.
set -uo pipefail
source eval/gpu_setup.sh
OUT=${OUT:?}
git rev-parse HEAD > "$OUT/head.txt" 2>/dev/null || true
nvidia-smi -L > "$OUT/gpu.txt"
timeout 240 python3 -m pytest -q -p no:cacheprovider tests/sandbox/test_box_filesystem.py \
  tests/sandbox/test_sandbox.py tests/agent/verification/test_timing_gpu.py \
  "tests/agent/verification/test_verify.py::test_on_a_gpu_a_good_order_passes_the_compiled_probe_on_every_grid" \
  2>&1 | tail -40 > "$OUT/box_gpu_tests.txt"
timeout 120 swizzleperf profile --app "python examples/user_kernels/tutorial_gemm/app.py --large" --json \
  > "$OUT/profile_tutorial_gemm_large.json" 2> "$OUT/profile_tutorial_gemm_large.err"
timeout 120 swizzleperf profile --app "python tests/helpers/apps/three_kernels/app.py" \
  > "$OUT/profile_three_kernels.txt" 2>&1
timeout 150 swizzleperf optimize --app "python tests/helpers/apps/three_kernels/app.py" --iterations 1 \
  --workdir /tmp/opt3 > "$OUT/optimize_three_kernels.txt" 2>&1
echo "exit codes done" >> "$OUT/gpu.txt"
