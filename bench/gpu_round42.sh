#!/usr/bin/env bash
# On a one-GPU machine (wheels of bench/gather_wheels.sh carried in .whl/, the 78 development
# operators of TritonBench-G and their list carried in .tb/): the GPU parts of issue #42, results
# under $OUT. Usage:
#   bash bench/gpu_round42.sh box          the read-only box with CUDA, compiled Triton and ncu inside
#                                         (GPU-marked sandbox tests), and the bottleneck trace on
#                                         NVIDIA (torch.profiler's CUPTI): `profile --app` on the
#                                         tutorial GEMM and the three-kernel app, `optimize --app`
#                                         without --kernel
#   bash bench/gpu_round42.sh suite SECONDS [EVAL_ID]
#                                         `eval --apps` over the 78, WORKERS workers sharing the GPU
#                                         (timing, ncu and the trace take it in turn), stopped with
#                                         SIGINT after SECONDS (finished rows kept); EVAL_ID resumes
#                                         the eval whose record was carried in .gpu42/swizzleperf.db
#                                         (or .db.gz: the carry is 64 MiB in all); with AGAIN=OUTCOME, the
#                                         rows of that outcome run once more (eval --again)
#   bash bench/gpu_round42.sh rows SECONDS FILE...
#                                         the same `eval --apps` over the named operators only (a fresh
#                                         eval, its own record), each first run plain under
#                                         compute-sanitizer (memcheck) to tell the operator's own invalid
#                                         accesses from ours: $OUT/sanitizer_<file>.txt
# The record comes back as $OUT/swizzleperf.db.gz (carry it in .gpu42/ to resume), the tables as
# $OUT/tritonbench_g_dev_<gpu>.{md,json}, the worker and app logs of rows that did not answer in
# $OUT/logs.tgz (a call returns 8 files at most).
set -uo pipefail
source bench/gpu_setup.sh
OUT=${OUT:?}

nvidia-smi -L > "$OUT/gpu.txt"
case "${1:-box}" in
box)
  timeout 200 python3 -m pytest -q -p no:cacheprovider tests/sandbox/test_box_filesystem.py \
    tests/sandbox/test_sandbox.py tests/agent/verification/test_timing_gpu.py \
    "tests/agent/verification/test_verify.py::test_on_a_gpu_a_good_order_passes_the_compiled_probe_on_every_grid" \
    > "$OUT/box_gpu_tests.txt" 2>&1
  # an operator that failed on the GPU in the suite, run plain (without the tool) to tell its own
  # failure from ours
  (cd .tb && timeout 60 python3 chunk_gla_fwd.py > "$OUT/plain_chunk_gla_fwd.txt" 2>&1; echo "exit $?" >> "$OUT/plain_chunk_gla_fwd.txt")
  timeout 90 swizzleperf profile --app "python examples/user_kernels/tutorial_gemm/app.py --large" --json \
    > "$OUT/profile_tutorial_gemm_large.json" 2> "$OUT/profile_tutorial_gemm_large.err"
  timeout 90 swizzleperf profile --app "python tests/helpers/apps/three_kernels/app.py" \
    > "$OUT/profile_three_kernels.txt" 2>&1
  timeout 120 swizzleperf optimize --app "python tests/helpers/apps/three_kernels/app.py" --iterations 1 \
    --workdir /tmp/opt3 > "$OUT/optimize_three_kernels.txt" 2>&1
  ;;
suite)
  SECONDS_LEFT=${2:?seconds}; RESUME=${3:-}
  mkdir -p /tmp/w /tmp/logs
  [ -n "$RESUME" ] && { [ -f .gpu42/swizzleperf.db.gz ] && gunzip -c .gpu42/swizzleperf.db.gz > /tmp/w/swizzleperf.db \
                          || cp .gpu42/swizzleperf.db /tmp/w/; }
  ARGS=(--apps .tb --files .tb/tritonbench_g_dev.txt --iterations 2 --row-budget 240 --no-ncu)
  [ -n "$RESUME" ] && ARGS=(--resume "$RESUME")
  [ -n "$RESUME" ] && [ -n "${AGAIN:-}" ] && ARGS+=(--again "$AGAIN")   # e.g. AGAIN="tool failure": those rows run once more
  timeout -s INT -k 30 "$SECONDS_LEFT" swizzleperf eval "${ARGS[@]}" --gpus "${WORKERS:-12}" --workdir /tmp/w \
    --out "$OUT/tritonbench_g_dev_$GPU" > "$OUT/suite.txt" 2>&1
  echo "eval exit $?" >> "$OUT/suite.txt"
  gzip -c /tmp/w/swizzleperf.db > "$OUT/swizzleperf.db.gz"
  python3 - "$OUT" <<'PY'
import json, re, shutil, sys
from pathlib import Path
out = Path(sys.argv[1])
for table in out.glob("tritonbench_g_dev_*.json"):
    for row in json.loads(table.read_text())["rows"]:
        if row.get("outcome") in ("tool failure", "app failed", "timeout") and row.get("log"):
            log, stem = Path(row["log"]), Path(row["app"]).stem
            if log.exists():
                shutil.copyfile(log, Path("/tmp/logs") / f"{stem}.log")
            for app_log in re.findall(r"/tmp/w/profiles/app-\w+/app\.log", row.get("reason") or ""):
                if Path(app_log).exists():
                    shutil.copyfile(app_log, Path("/tmp/logs") / f"{stem}.app.log")
PY
  tar czf "$OUT/logs.tgz" -C /tmp logs
  ;;
rows)
  SECONDS_LEFT=${2:?seconds}; shift 2
  mkdir -p /tmp/wr; printf '%s\n' "$@" > /tmp/wr/rows.txt
  CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  for f in "$@"; do
    (cd .tb && timeout 120 nice -n 10 "$CS" --tool memcheck --print-limit 3 python3 "$f" 2>&1 | head -c 8000 \
       > "$OUT/sanitizer_${f%.py}.txt"; echo "exit ${PIPESTATUS[0]}" >> "$OUT/sanitizer_${f%.py}.txt") &
  done
  timeout -s INT -k 30 "$SECONDS_LEFT" swizzleperf eval --apps .tb --files /tmp/wr/rows.txt --iterations 2 \
    --row-budget 240 --no-ncu --gpus "${WORKERS:-2}" --workdir /tmp/wr --out "$OUT/rows_$GPU" > "$OUT/rows.txt" 2>&1
  echo "eval exit $?" >> "$OUT/rows.txt"
  wait
  ;;
esac
echo "done" >> "$OUT/gpu.txt"
