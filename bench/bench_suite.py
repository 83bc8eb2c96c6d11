"""GPU baselines of the bundled kernels: numerics at the default problem (output poisoned), median
time with its spread, achieved bandwidth / FLOP rate against ceilings measured in the same run
(device-to-device copy, torch.matmul), the roofline floor, and ncu's L2 hit rate, for the
baseline order and the kernel's expert order.

    python -m bench.bench_suite --out bench/results/baseline_h200 [--kernels gemm,softmax] [--no-ncu]

Writes OUT.json and OUT.md and prints the table.
"""
from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
import triton

from swizzleperf.agent.verification.candidate import splice, target_args
from swizzleperf.agent.verification.load import load_kernel
from swizzleperf.agent.verification.stages import compare_output, poison
from swizzleperf.agent.verification.swizzles import expert_source

ROOT = Path(__file__).resolve().parent.parent
KERNELS = ["gemm", "elementwise", "layernorm", "softmax", "spmv", "transpose", "stencil2d",
           "black_scholes", "fdtd2d", "smith_waterman"]


def timed(fn, rep_ms: int = 500) -> dict:
    times = np.asarray(triton.testing.do_bench(fn, warmup=50, rep=rep_ms, return_mode="all"))
    q25, q50, q75 = np.quantile(times, [0.25, 0.5, 0.75])
    return {"time_ms": float(q50), "iqr_ms": float(q75 - q25), "repetitions": int(times.size)}


def ceilings() -> dict:
    """Copy bandwidth (bytes read + written per second) and bf16 matmul FLOP/s, measured now."""
    x = torch.randn(2**28, device="cuda")  # 1 GiB
    y = torch.empty_like(x)
    copy = timed(lambda: y.copy_(x))
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    mm = timed(lambda: a @ b)
    return {"copy_gbps": 2 * x.numel() * 4 / copy["time_ms"] / 1e6, "matmul_tflops": 2 * 8192**3 / mm["time_ms"] / 1e9}


def check(spec, dtype: str, meta: dict) -> float:
    """Relative error at the default problem with the output poisoned; raises on a failure."""
    problem = spec.problems["default"]
    inputs = spec.make_inputs(problem, 1, "cuda", dtype)
    out = inputs[spec.output_name]
    unwritten = poison(out)
    spec.launch(inputs, **meta)
    torch.cuda.synchronize()
    return compare_output(out, unwritten(out), spec.reference(inputs).to(out.device), spec, problem, meta,
                          dtype, "default problem")


def bench_order(path: Path, label: str, ceil: dict, use_ncu: bool) -> dict:
    _, spec = load_kernel(path)
    dtype, meta, problem = spec.dtypes[0], spec.meta_for("default"), spec.problems["default"]
    rel = check(spec, dtype, meta)
    sets = [spec.make_inputs(problem, 100 + i, "cuda", dtype) for i in range(2)]
    turn = iter(range(10**9))
    t = timed(lambda: spec.launch(sets[next(turn) % 2], **meta))
    del sets
    flops, nbytes = spec.flops(problem), spec.min_bytes(problem, dtype)
    floor_ms = max(nbytes / (ceil["copy_gbps"] * 1e9), flops / (ceil["matmul_tflops"] * 1e12)) * 1e3
    row = {"kernel": spec.name, "order": label, "dtype": dtype, "rel_error": rel, **t,
           "gbps": nbytes / t["time_ms"] / 1e6, "tflops": flops / t["time_ms"] / 1e9,
           "floor_ms": floor_ms, "x_floor": t["time_ms"] / floor_ms}
    if use_ncu:
        from swizzleperf.profiling.ncu import NcuError, profile_launch
        try:
            m = profile_launch(path, spec.kernel_name, dtype)
            row.update(l2_hit_rate=m["lts__t_sector_hit_rate.pct"] / 100,
                       dram_bytes=m["dram__bytes_read.sum"] + m["dram__bytes_write.sum"])
        except NcuError as exc:
            row["ncu_error"] = str(exc)
    torch.cuda.empty_cache()
    return row


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--kernels", default=",".join(KERNELS))
    parser.add_argument("--no-ncu", action="store_true")
    args = parser.parse_args()
    ceil = ceilings()
    print(f"ceilings on {torch.cuda.get_device_name()}: copy {ceil['copy_gbps']:.0f} GB/s, "
          f"bf16 matmul {ceil['matmul_tflops']:.0f} TFLOP/s", flush=True)
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for name in args.kernels.split(","):
            path = ROOT / "kernels" / f"{name}.py"
            start = time.time()
            try:
                _, spec = load_kernel(path)
                rows.append(bench_order(path, "baseline", ceil, not args.no_ncu))
                if spec.expert:
                    source = path.read_text()
                    label, expert = expert_source(spec.expert, target_args(source, spec.rewrite_target))
                    expert_path = Path(folder) / f"expert_{path.name}"
                    expert_path.write_text(splice(source, spec.rewrite_target, expert))
                    rows.append(bench_order(expert_path, f"expert {label}", ceil, not args.no_ncu))
            except Exception as exc:  # one kernel's failure must not lose the others' figures
                rows.append({"kernel": name, "order": "baseline", "error": f"{type(exc).__name__}: {exc}"[:300]})
            print(json.dumps(rows[-1]), f"({time.time() - start:.0f} s)", flush=True)
            # Written after every kernel: a run cut short keeps what it measured.
            Path(args.out + ".json").write_text(json.dumps({"device": torch.cuda.get_device_name(),
                                                            "ceilings": ceil, "rows": rows}, indent=1))
            Path(args.out + ".md").write_text(render(rows, ceil))
    print(render(rows, ceil))


def render(rows: list, ceil: dict) -> str:
    lines = [f"Ceilings measured in the same run: copy {ceil['copy_gbps']:.0f} GB/s (read + write), "
             f"bf16 matmul {ceil['matmul_tflops']:.0f} TFLOP/s. Times: do_bench median (IQR), "
             f"measured:events; L2: measured:ncu (lts__t_sector_hit_rate, mean of 3 launches).", "",
             "| kernel | order | time ms (IQR) | GB/s | TFLOP/s | x roofline floor | L2 hit | DRAM GB | rel. error |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['kernel']} | {r['order']} | failed: {r['error']} | | | | | | |")
            continue
        l2 = f"{r['l2_hit_rate']:.1%}" if "l2_hit_rate" in r else r.get("ncu_error", "n/a")[:40]
        if r.get("l2_hit_rate", 0) > 1:  # ncu saw a few of many small launches (Smith-Waterman)
            l2 = "n/a (not one launch)"
        dram = f"{r['dram_bytes'] / 1e9:.2f}" if "dram_bytes" in r else ""
        lines.append(f"| {r['kernel']} | {r['order']} | {r['time_ms']:.3f} ({r['iqr_ms']:.3f}) | {r['gbps']:.0f} | "
                     f"{r['tflops']:.1f} | {r['x_floor']:.2f} | {l2} | {dram} | {r['rel_error']:.1e} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
