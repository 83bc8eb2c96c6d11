#!/bin/sh
# verify and time the best configuration against torch + NCCL on W GPUs
python -m swizzleperf.agent.rank_pool run --kernel /work/main/eval/results/real_llm_dist/work/runs/20261125-184904-7fd9/all_gather_gemm.py --config '{"pattern": "push", "EPILOGUE_SUBTILE": 0, "STREAM_K": 2, "num_stages": 3}' --problem llama70b-up-8k --world-size 2
