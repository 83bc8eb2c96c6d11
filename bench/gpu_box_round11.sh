#!/usr/bin/env bash
# On one GPU (wheels of bench/gather_wheels.sh carried in .whl/): the box of #41's round eleven with
# CUDA inside it. The app's box keeps no capability, every character device but the plain and the
# GPU's is covered, /dev/shm is small where nothing shares it, new namespaces are refused by seccomp.
# Results under $OUT:
#   box.txt       CUDA in the mounts box and under Landlock alone (sandbox._cuda_in_box), and which
#                 way the box chose (sandbox.filesystem_isolation)
#   seccomp_cuda.json   cuInit under the workers' filter and each refusal alone (bench/gpu_seccomp_cuda.py)
#   app.txt       `profile --app` and `optimize --app --iterations 1` of a CUDA app (the tutorial GEMM):
#                 the app's box without capabilities, with CUDA
#   gpu.txt, gpu_tests.txt   the GPU-marked tests of the box, the capture, verification and the evals,
#                 in the time left (bench/gpu_tests_one.sh)
# CALL_S: the seconds this script may take (560).
set -uo pipefail
T0=$(date +%s)
source bench/gpu_setup.sh || exit 1
left() { echo $(( ${CALL_S:-560} - ($(date +%s) - T0) )); }
{ nvidia-smi --query-gpu=name,uuid,driver_version --format=csv; uname -r; id
  timeout 120 python3 -c "from swizzleperf import sandbox; print('filesystem_isolation', sandbox.filesystem_isolation()); print('cuda in mounts box', sandbox._cuda_in_box('mounts')); print('cuda under landlock', sandbox._cuda_in_box('landlock')); print('landlock', sandbox._landlock())"
} > "$OUT/box.txt" 2>&1
timeout 120 python3 -m bench.gpu_seccomp_cuda --out "$OUT/seccomp_cuda.json" > "$OUT/seccomp_cuda_console.txt" 2>&1
echo "seccomp exit $? at $(( $(date +%s) - T0 )) s" >> "$OUT/box.txt"
{ echo "== profile --app"; timeout 60 swizzleperf profile --app "python examples/user_kernels/tutorial_gemm/app.py"
  echo "exit $?"; echo "== optimize --app --iterations 1"
  timeout 120 swizzleperf optimize --app "python examples/user_kernels/tutorial_gemm/app.py" --iterations 1 --workdir /tmp/opt11
  echo "exit $?"; } > "$OUT/app.txt" 2>&1
echo "app steps done at $(( $(date +%s) - T0 )) s" >> "$OUT/box.txt"
TEST_PATHS="tests/sandbox tests/agent/capture tests/agent/verification tests/eval" TESTS_S=$(( $(left) > 60 ? $(left) - 20 : 40 )) \
  bash bench/gpu_tests_one.sh
echo "tests done at $(( $(date +%s) - T0 )) s" >> "$OUT/box.txt"
