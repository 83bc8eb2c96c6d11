#!/usr/bin/env bash
# A real local model drives the distributed optimize (issue #22.6): Qwen2.5-Coder-1.5B (the model and
# server of bench/real_llm.sh setup) on llama.cpp's server, here on CPU, proposing overlap
# configurations of the all-gather + GEMM at llama70b-up-8k for two H100s (simulated: no GPU here;
# every candidate verified with its own knobs through the interpreter at W = 2 and 3). The run's
# record is kept as text in bench/results/real_llm_dist/ (report, transcript), with summary.md: what
# the model proposed that the built-in policy would not have (bench/real_llm_dist.py).
#
#   bash bench/real_llm.sh setup        # once: the server's venv and the GGUF models
#   bash bench/real_llm_dist.sh         # about 30-60 min on 2 CPU cores (4096-token context)
#
# Its own port (LLM_DIST_PORT, 8090) and pid file: a server of bench/real_llm.sh is never touched.
set -euo pipefail
LLM_HOME=${LLM_HOME:-$HOME/.cache/swizzleperf-llm}
PORT=${LLM_DIST_PORT:-8090}
CTX=${LLM_DIST_CTX:-4096}   # the distributed prompt's shortest form is ~1700 tokens: 2048 leaves no room
HERE=$(cd "$(dirname "$0")/.." && pwd)
OUT=$HERE/bench/results/real_llm_dist
MODEL=$LLM_HOME/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
[ -s "$MODEL" ] || { echo "no model: run bash bench/real_llm.sh setup first" >&2; exit 2; }
command -v swizzleperf >/dev/null || { echo "swizzleperf is not on PATH: activate the project's venv" >&2; exit 2; }
mkdir -p "$OUT"
if curl -sf "http://127.0.0.1:$PORT/v1/models" >/dev/null 2>&1; then
  echo "port $PORT is taken: set LLM_DIST_PORT" >&2; exit 2
fi
nice -n 5 "$LLM_HOME/venv/bin/python" -m llama_cpp.server --model "$MODEL" --model_alias qwen \
  --host 127.0.0.1 --port "$PORT" --n_ctx "$CTX" --n_threads "$(nproc)" > "$OUT/server.log" 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true' EXIT
for _ in $(seq 1 120); do curl -sf "http://127.0.0.1:$PORT/v1/models" >/dev/null && break; sleep 1; done
cd "$HERE"
set +e   # a run that ends non-zero is a result (its exit code is written), not the end of the script
{ time swizzleperf optimize kernels/distributed/all_gather_gemm.py --model qwen \
    --base-url "http://127.0.0.1:$PORT/v1" --hw h100 --world-size 2 --problem llama70b-up-8k \
    --iterations "${ITERATIONS:-3}" --plateau 10 --llm-timeout 900 --context-tokens "$CTX" \
    --workdir "$OUT/work"; echo "exit code $?"; } > "$OUT/optimize.txt" 2>&1
set -e
RUN=$(ls -d "$OUT"/work/runs/*/ | tail -1)
python -m bench.real_llm_dist "$RUN" --out "$OUT/summary.md"
# keep the record as text: reports, transcript, configurations; drop the kernel copies and the SQLite
for d in "$OUT"/work/runs/*/; do rm -f "$d"/*.py "$d"/candidates/*.py "$d"/candidates/*.npy; done
rm -f "$OUT"/work/swizzleperf.db*
tail -40 "$OUT/server.log" > "$OUT/server_tail.log" && rm -f "$OUT/server.log"
