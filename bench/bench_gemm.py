"""GPU benchmark of kernels/gemm.py: the row-major baseline and the grouped order (GROUP_SIZE_M = 8)
against torch.matmul (cuBLAS) at three problems, do_bench medians with the interquartile range,
outputs checked against the fp32 reference with the output poisoned first.

    python -m bench.bench_gemm --out bench/results/gemm_bench_<gpu>.json

Writes the JSON and prints a markdown table.
"""
from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import numpy as np
import torch
import triton

from swizzleperf.agent.verification.candidate import splice, target_args
from swizzleperf.agent.verification.load import load_kernel
from swizzleperf.agent.verification.swizzles import catalog_source

KERNEL = Path(__file__).resolve().parent.parent / "kernels" / "gemm.py"


def timed(fn, rep_ms: int = 1000) -> dict:
    times = np.asarray(triton.testing.do_bench(fn, warmup=100, rep=rep_ms, return_mode="all"))
    q25, q50, q75 = np.quantile(times, [0.25, 0.5, 0.75])
    return {"time_ms": float(q50), "iqr_ms": float(q75 - q25), "repetitions": int(times.size)}


def order_module(order: str, folder: Path):
    source = KERNEL.read_text()
    path = folder / f"gemm_{order.replace(':', '_')}.py"
    path.write_text(splice(source, "swizzle", catalog_source(order, target_args(source, "swizzle"))))
    return load_kernel(path)[1]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--problems", default="square8k,default,llm")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        specs = {o: order_module(o, Path(folder)) for o in ("row-major", "grouped-m:8")}
        for name in args.problems.split(","):
            spec = specs["row-major"]
            problem, meta = spec.problems[name], spec.meta_for(name)
            inputs = spec.make_inputs(problem, 0, "cuda", "bfloat16")
            flops = spec.flops(problem)
            ref = timed(lambda: torch.matmul(inputs["a"], inputs["b"]))
            rows.append({"problem": name, "order": "torch.matmul", **ref,
                         "tflops": flops / ref["time_ms"] / 1e9})
            expected = spec.reference(inputs)
            for order, ospec in specs.items():
                inputs["c"].fill_(float("nan"))
                ospec.launch(inputs, **meta)
                torch.cuda.synchronize()
                rel = float((inputs["c"].float() - expected).norm() / expected.norm())
                assert not torch.isnan(inputs["c"]).any() and rel < ospec.tolerance["bfloat16"], rel
                t = timed(lambda: ospec.launch(inputs, **meta))
                rows.append({"problem": name, "order": order, **t, "rel_error": rel,
                             "tflops": flops / t["time_ms"] / 1e9,
                             "pct_of_torch": ref["time_ms"] / t["time_ms"]})
            del inputs, expected
            torch.cuda.empty_cache()
    device = torch.cuda.get_device_name()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"device": device, "rows": rows}, indent=1))
    print(f"measured:events on {device}, bf16, do_bench median (IQR), L2 flushed between repetitions")
    print("| problem | order | time ms (IQR) | TFLOP/s | % of torch.matmul |\n|---|---|---|---|---|")
    for r in rows:
        pct = f"{r['pct_of_torch']:.1%}" if "pct_of_torch" in r else ""
        print(f"| {r['problem']} | {r['order']} | {r['time_ms']:.3f} ({r['iqr_ms']:.3f}) | {r['tflops']:.0f} | {pct} |")


if __name__ == "__main__":
    main()
