"""An A/A test of the distributed optimize's two timing procedures on W GPUs (issue #22): does the
final head-to-head (agent/distributed/rank_worker.py ``compare``: every contender and torch + NCCL
interleaved in one round) time the same configuration slower than a candidate's own timing
(``evaluate``: the candidate and torch + NCCL only)?

Why: on two H100s (2026-11-25, bench/results/dist_optimize_h100x2/ and _rerun/) every head-to-head
figure was 2-8 % above the same configuration's first timing, the kernel's default and torch +
NCCL included, so a head-to-head figure compared with the hand bench's (two contenders a round)
may be biased against the optimizer.

Steps at one problem, one configuration (the kernel's default), each on the same rank pool:
``evaluate`` (pair), ``compare`` with 1 copy (pair through the head-to-head path), ``compare`` with
4 copies of the same configuration (5 contenders a round), the same with each copy in a pair with
torch + NCCL (``paired``: four pairs a round, each from its own barrier; the four states allocated
as before), both again, ``evaluate`` again. Every figure: the slowest rank's median and interquartile range (ms).

    python3 -m bench.gpu_h2h_bias OUT [kernel:problem ...]     # two GPUs; OUT/h2h_bias.{json,md}
    python3 -m bench.gpu_h2h_bias OUT cpu                      # a dry run through the interpreter
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from swizzleperf.agent.distributed.measured import MAX_CONTENDERS, MeasuredRanks
from swizzleperf.agent.verification.load import load_spec

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CASES = ("gemm_reduce_scatter:llama70b-o-4k", "gemm_all_scatter:llama70b-qkv-4k")


def run_case(kernel: str, problem: str, out: Path, device: str) -> dict:
    """The five steps of the module docstring for ``kernel`` at ``problem``: {step: figures}."""
    path = ROOT / "kernels" / "distributed" / f"{kernel}.py"
    spec = load_spec(path)
    if device == "cpu":   # the interpreter: the spec's check problem at its check knobs, a dry run only
        problem = "check"
    sizes = dict(spec.problems[problem])
    heap = (MAX_CONTENDERS + 1) * spec.heap_bytes(sizes, 2, "bfloat16") + (64 << 20)
    ranks = MeasuredRanks(path, problem, sizes, 2, "bfloat16", heap, out / f"pool_{kernel}", device=device,
                          timeout_s=300, max_spins=None if device == "cuda" else 1 << 14)
    meta = spec.meta_for(problem, {}) if device == "cuda" else dict(spec.check_meta)
    pattern = spec.patterns[0]   # the kernel's default
    item = {"kernel_path": str(path), "pattern": pattern, "meta": meta}
    steps = {}
    try:
        for name, fn in (("evaluate (pair)", lambda: ranks.evaluate(str(path), pattern, meta, None, True)),
                         ("compare x1 (pair)", lambda: ranks.compare([item])),
                         ("compare x4 (5 a round)", lambda: ranks.compare([item] * 4)),
                         ("compare x4 in pairs", lambda: ranks.compare([item] * 4, paired=True)),
                         ("compare x4 again", lambda: ranks.compare([item] * 4)),
                         ("compare x4 in pairs again", lambda: ranks.compare([item] * 4, paired=True)),
                         ("evaluate (pair) again", lambda: ranks.evaluate(str(path), pattern, meta, None, True))):
            started = time.time()
            answer = fn()
            timing = answer.get("timing")
            if not timing:
                steps[name] = {"error": f"{answer.get('verdict')}: {answer.get('reason')}"}
                continue
            figures = {k: {"median_ms": v["median_ms"], "iqr_ms": v["iqr_ms"]}
                       for k, v in timing["contenders"].items()}
            steps[name] = {"figures": figures, "rounds": timing["rounds"], "per_sample": timing["per_sample"],
                           "seconds": round(time.time() - started, 1)}
            print(kernel, problem, name, json.dumps(steps[name]), flush=True)
    finally:
        ranks.close()
    return {"kernel": kernel, "problem": problem, "pattern": pattern, "meta": meta, "steps": steps}


def markdown(results: list, device_name: str, command: str) -> str:
    lines = [f"# Head-to-head against pair timing, the same configuration (A/A), {device_name}", "",
             f"`{command}`", "",
             "| kernel | problem | step | configuration copies (median ms ± IQR) | torch + NCCL | copies / torch |",
             "|---|---|---|---|---|---|"]
    for r in results:
        for step, s in r["steps"].items():
            if "error" in s:
                lines.append(f"| {r['kernel']} | {r['problem']} | {step} | {s['error']} | | |")
                continue
            f = s["figures"]
            copies = [v for k, v in f.items() if k != "torch_nccl"]
            torch_ms = f["torch_nccl"]["median_ms"]
            lines.append(f"| {r['kernel']} | {r['problem']} | {step} | "
                         + ", ".join(f"{v['median_ms']:.4f} ± {v['iqr_ms']:.4f}" for v in copies)
                         + f" | {torch_ms:.4f} ± {f['torch_nccl']['iqr_ms']:.4f} | "
                         + ", ".join(f"{v['median_ms'] / torch_ms:.3f}" for v in copies) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list) -> int:
    out = Path(argv[0])
    out.mkdir(parents=True, exist_ok=True)
    device = "cpu" if argv[1:2] == ["cpu"] else "cuda"
    cases = [a for a in argv[1:] if ":" in a] or list(DEFAULT_CASES)
    if device == "cpu":
        cases = cases[:1]
    results = []
    for case in cases:
        kernel, problem = case.split(":", 1)
        results.append(run_case(kernel, problem, out, device))
        (out / "h2h_bias.json").write_text(json.dumps(results, indent=1, default=str))
    name = "CPU (interpreter)"
    if device == "cuda":
        import torch
        name = f"{torch.cuda.device_count()} x {torch.cuda.get_device_name()}"
    text = markdown(results, name, "python3 -m bench.gpu_h2h_bias OUT " + " ".join(argv[1:]))
    (out / "h2h_bias.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
