#!/usr/bin/env bash
# The eval over the bundled kernels on every GPU of one machine (wheels of bench/gather_wheels.sh
# carried in .whl/): `swizzleperf eval --gpus auto`, one kernel per GPU at a time, its table, plot,
# worker logs and record into OUTDIR; then, while time is left, ncu against the simulator for the
# kernels in VALIDATE, one per GPU at a time. Every step is bounded; the whole script by BUDGET_S.
# Usage: [ITERATIONS=6] [KERNELS=all] [VALIDATE="gemm transpose softmax"] [BUDGET_S=540] \
#        [RESUME=EVAL_ID, with OUTDIR/swizzleperf of the earlier call carried as .swizzleperf] \
#        bash bench/gpu_eval.sh OUTDIR
set -uo pipefail
OUTDIR=${1:?usage: gpu_eval.sh OUTDIR}
BUDGET_S=${BUDGET_S:-540}   # seconds for the whole script, install included
MIN_VALIDATE_S=90           # less left than this after the eval: no validation
mkdir -p "$OUTDIR"
source bench/gpu_setup.sh   # multicast off, wheels and project installed, $GPU
NGPU=$(timeout 60 python3 -c "import torch; print(torch.cuda.device_count())")
(( NGPU > 0 )) || { echo "no CUDA device visible"; exit 1; }
timeout 60 swizzleperf hw 2>&1 | tee "$OUTDIR/hw.txt"
left() { echo $(( BUDGET_S - SECONDS )); }

# The eval gets what is left (EVAL_S caps it); at its limit it gets SIGTERM, stops its workers as
# on Ctrl-C, writes the partial table and stays resumable.
limit=$(( $(left) - 75 ))  # room to stop (workers get 30 s), copy the record, validate nothing
limit=$(( ${EVAL_S:-$limit} < limit ? ${EVAL_S:-$limit} : limit ))
(( limit >= 60 )) || { echo "only $limit s left for the eval"; exit 1; }
if [ -n "${RESUME:-}" ]; then what=(--resume "$RESUME"); else
  what=(--kernels "${KERNELS:-all}" --iterations "${ITERATIONS:-6}" --out "$OUTDIR"); fi
start=$SECONDS
timeout -k 60 "$limit" swizzleperf eval "${what[@]}" --gpus auto 2>&1 | tee "$OUTDIR/eval_$GPU.log"
status=${PIPESTATUS[0]}
echo "wall time of eval: $(( SECONDS - start )) s on $NGPU GPUs (limit $limit s, exit $status)" | tee -a "$OUTDIR/eval_$GPU.log"
eval_id=$(grep -o "^eval eval-[0-9-]*-[0-9a-f]*" "$OUTDIR/eval_$GPU.log" | head -1 | cut -d' ' -f2)
if [ -n "${RESUME:-}" ]; then  # a resumed eval writes where it started: bring its tables here
  from=$(timeout 60 python3 -c "import sys; from swizzleperf.eval.suite import stored_options
print(stored_options('.swizzleperf', sys.argv[1]).results_dir)" "$RESUME")
  [ "$(realpath "$from")" = "$(realpath "$OUTDIR")" ] || cp "$from/$RESUME"* "$OUTDIR/"
fi
if [ -n "$eval_id" ]; then  # the record beside the table: .swizzleperf/ of a checkout, for the notebook
  mkdir -p "$OUTDIR/swizzleperf/evals"
  timeout 60 python3 -c "import sqlite3, sys; sqlite3.connect(sys.argv[1]).execute('VACUUM INTO ?', (sys.argv[2],))" \
    .swizzleperf/swizzleperf.db "$OUTDIR/swizzleperf/swizzleperf.db"
  cp .swizzleperf/evals/"$eval_id"/*.log "$OUTDIR/swizzleperf/evals/" 2>/dev/null
  cp -r .swizzleperf/runs "$OUTDIR/swizzleperf/" 2>/dev/null
fi

# ncu against the simulator: three orders per kernel, as many kernels at once as GPUs, each with its
# own TMPDIR (ncu serialises all its instances through $TMPDIR/nsight-compute-lock). 1-D targets
# have two catalog families only: row-major and xcd-contiguous:D (two values of D).
orders_for() {
  local dims
  dims=$(timeout 60 python3 -c "import sys; from pathlib import Path
from swizzleperf.agent.verification.candidate import target_args
from swizzleperf.agent.verification.load import load_kernel
p = Path(sys.argv[1]); print(len(target_args(p.read_text(), load_kernel(p)[1].rewrite_target)))" "kernels/$1.py")
  if [ "$dims" = 2 ]; then echo "row-major,xcd-contiguous:2,xcd-contiguous:8"
  else echo "row-major,column-major,grouped-m:8"; fi
}
i=0
for kernel in ${VALIDATE:-}; do
  if (( i > 0 && i % NGPU == 0 )); then wait; fi
  limit=$(( $(left) - 15 ))
  if (( limit < MIN_VALIDATE_S )); then echo "validation of $kernel skipped: $limit s left" | tee -a "$OUTDIR/validate.log"; continue; fi
  orders=$(orders_for "$kernel")
  echo "validating $kernel on GPU $(( i % NGPU )) ($orders, limit $limit s)" | tee -a "$OUTDIR/validate.log"
  CUDA_VISIBLE_DEVICES=$(( i % NGPU )) TMPDIR=$(mktemp -d) timeout -k 10 "$limit" python3 -m bench.validate_simulator \
    measure --kernel "kernels/$kernel.py" --orders "$orders" --out "$OUTDIR/ncu_orders_${kernel}_$GPU.json" \
    > "$OUTDIR/validate_${kernel}_$GPU.log" 2>&1 &
  i=$(( i + 1 ))
done
wait
echo "script wall time: $SECONDS s" | tee -a "$OUTDIR/eval_$GPU.log"
exit "$status"
