#!/usr/bin/env bash
# On one H100 or H200 (wheels of bench/gather_wheels.sh carried in .whl/, z3's package too: bench/gpu_setup.sh): every
# GPU-marked test of one GPU, at the working tree's commit, into $OUT/gpu_tests.txt, the GPU into
# $OUT/gpu.txt (TEST_PATHS: only these test paths). tests/eval/test_notebook.py and test_suite.py are left out: they import nbformat,
# which the GPU image lacks (none of their tests is GPU-marked).
set -uo pipefail
source bench/gpu_setup.sh || exit 1
nvidia-smi --query-gpu=name,uuid --format=csv > "$OUT/gpu.txt"
python3 -c "import torch, triton, z3; print('torch', torch.__version__, 'triton', triton.__version__, 'z3', z3.get_version_string())" >> "$OUT/gpu.txt" 2>&1
timeout "${TESTS_S:-480}" python3 -m pytest -q -p no:cacheprovider -m "gpu and not multigpu" ${TEST_PATHS:-tests} \
  --ignore=tests/eval/test_notebook.py --ignore=tests/eval/test_suite.py > "$OUT/gpu_tests.txt" 2>&1
echo "pytest exit $?" >> "$OUT/gpu.txt"
