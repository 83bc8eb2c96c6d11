"""Smoke test of the rank pool on W GPUs (issue #22): start, one candidate verified and timed at one
problem, the references, a hang, a dead rank, a fresh pool. Writes OUT/smoke.json.

    python3 -m bench.gpu_dist_smoke OUT          # on a machine with two GPUs (bench/gpu_dist_smoke.sh)
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from swizzleperf.agent.distributed import problems as dist_problems
from swizzleperf.agent.distributed.measured import (MAX_CONTENDERS, MeasuredRanks, summarize_references,
                                                    timing_figures)
from swizzleperf.agent.verification.load import load_spec

ROOT = Path(__file__).resolve().parents[1]
AGG = ROOT / "kernels" / "distributed" / "all_gather_gemm.py"
TOY = ROOT / "tests" / "agent" / "apps" / "dist_gather.py"


def main(out: Path, device: str = "cuda") -> int:
    """``device`` "cpu": the same steps at a tiny shape through the interpreter (a dry run)."""
    out.mkdir(parents=True, exist_ok=True)
    spec = load_spec(AGG)
    problem, pattern = ("llama70b-qkv-4k", "bulk_sync") if device == "cuda" else ("M=48,N=48,K=40", "bulk_sync")
    sizes = dict(spec.problems[problem]) if device == "cuda" else {"M": 48, "N": 48, "K": 40}
    heap = (MAX_CONTENDERS + 1) * spec.heap_bytes(sizes, 2, "bfloat16") + (64 << 20)
    ranks = MeasuredRanks(AGG, problem, sizes, 2, "bfloat16", heap, out / "pool", device=device, timeout_s=120,
                          max_spins=None if device == "cuda" else 1 << 14)
    summary = {}

    def step(name, fn):
        started = time.time()
        try:
            result = fn()
        except Exception as exc:  # the smoke test records every failure and goes on
            result = {"error": f"{type(exc).__name__}: {exc}"}
        result = {**result, "seconds": round(time.time() - started, 1), "pool_starts": ranks.pool.starts}
        summary[name] = result
        print(name, json.dumps(result, default=str)[:1500], flush=True)
        (out / "smoke.json").write_text(json.dumps(summary, indent=1, default=str))

    step("start", lambda: {**ranks.pool.start(), "note": ranks.pool.note})
    meta = spec.meta_for(problem, {} if device == "cuda" else {"NUM_SMS": 132})
    check, note = dist_problems.check_problem(spec, pattern, meta, (2,), 132)

    def candidate():
        answer = ranks.evaluate(str(AGG), pattern, meta, check, True)
        if answer.get("verdict") == "PASS":
            answer["figures"] = timing_figures(answer["timing"])
        answer.pop("timing", None)
        return answer
    step("candidate", candidate)
    step("references", lambda: {k: v for k, v in ranks.references().items()})
    hang = out / "hang.py"
    hang.write_text(TOY.read_text().replace("HANG_RANK = None", "HANG_RANK = 1"))
    toy = {"problems": {"toy": {"N": 4096}}, "verify": ["toy"], "metas": {"toy": {"BLOCK": 32, "num_warps": 4}},
           "dtype": "float32"}
    ranks.timeout_s = 15
    step("hang", lambda: ranks._request({"op": "evaluate", "kernel_path": str(hang), "pattern": "push", **toy}))
    dead = out / "dead.py"
    dead.write_text(TOY.read_text().replace("EXIT_RANK = None", "EXIT_RANK = 1"))
    ranks.timeout_s = 120
    step("fresh_after_hang", lambda: ranks._request({"op": "evaluate", "kernel_path": str(TOY), "pattern": "push",
                                                     "time": False, **toy}))
    step("dead", lambda: ranks._request({"op": "evaluate", "kernel_path": str(dead), "pattern": "push", **toy}))
    step("fresh_after_dead", candidate)
    ranks.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), *sys.argv[2:3]))
