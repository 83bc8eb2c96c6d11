"""Is the head-to-head timing fair? (#12.4) One GPU, the bundled GEMM at its default problem.

    python3 -m bench.gpu_timing_integrity --out OUT.json

Runs the worker's ``compare`` stage (the optimizer's final head-to-head) on:

1. ``aa``: five copies of one module (grouped-m:8 spliced five times): every ratio must be 1.00
   within the spread, whatever a copy's place in the list;
2. ``forward``: the contenders of the committed main job (bench/results/main_job_h200), in the
   order the optimizer listed them (best first, expert last);
3. ``reversed``: the same modules in the reverse order.

and each module alone in a worker of its own (the verifier's ``timing`` stage) for reference.
A bias tied to a module's place in the list shows as a place-dependent time in 1 and as
times that follow the place, not the module, between 2 and 3.
"""
from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from swizzleperf.agent.verification.candidate import splice
from swizzleperf.agent.verification.swizzles import catalog_source
from swizzleperf.agent.verification.verify import run_worker

ROOT = Path(__file__).resolve().parents[1]
GEMM = ROOT / "kernels" / "gemm.py"
ARGS = ["pid", "num_pid_m", "num_pid_n"]
CONTENDERS = ["grouped-m:11", "grouped-m:16", "grouped-n:8", "grouped-n:11", "grouped-m:8"]


def modules(folder: Path, orders: list, tag: str) -> list:
    """One spliced copy of kernels/gemm.py per order, each its own file."""
    source, paths = GEMM.read_text(), []
    for i, order in enumerate(orders):
        path = folder / f"{tag}{i}_{order.replace(':', '_')}_gemm.py"
        path.write_text(splice(source, "swizzle", catalog_source(order, ARGS)))
        paths.append(str(path))
    return paths


def compare(paths: list) -> dict:
    start = time.time()
    result = run_worker({"kernel_path": paths[0], "compare_paths": paths, "stages": ["compare"],
                         "dtype": "bfloat16"}, 900, interpret=False)
    if not result.passed:
        raise SystemExit(f"compare failed: {result.verdict.value}: {result.reason}")
    return {**result.details["compare"], "seconds": time.time() - start}


def alone(path: str) -> dict:
    result = run_worker({"kernel_path": path, "stages": ["timing"], "dtype": "bfloat16",
                         "timing_problem": "default"}, 600, interpret=False)
    return result.details.get("timing", {"error": result.reason})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    out = {}
    with tempfile.TemporaryDirectory() as folder:
        folder = Path(folder)
        experiments = {"aa": modules(folder, ["grouped-m:8"] * 5, "aa"),
                       "forward": modules(folder, CONTENDERS, "fw"),
                       "reversed": modules(folder, CONTENDERS[::-1], "rv")}
        for name, paths in experiments.items():
            out[name] = {"orders": [Path(p).name for p in paths], **compare(paths)}
            print(name, out[name]["rounds"], "rounds:", [f"{t:.4f}" for t in out[name]["time_ms"]],
                  "ratios to the first:", [f"{out[name]['time_ms'][0] / t:.4f}" for t in out[name]["time_ms"]],
                  flush=True)
        out["alone"] = {Path(p).name: alone(p) for p in experiments["forward"]}
        for name, timing in out["alone"].items():
            print("alone", name, f"{timing.get('time_ms', float('nan')):.4f}", flush=True)
    Path(args.out).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
