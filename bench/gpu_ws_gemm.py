"""The warp-specialized Gluon GEMM (kernels/schedule/ws_gemm.py) against cuBLAS and against the
tuned Triton persistent GEMM (kernels/gemm.py, the configurations of
bench/results/gemm_configs_hopper.json for this device), on one Hopper GPU, at the per-rank shapes
of bench/gpu_rank_gemm.py (or ``--shapes MxNxK,...``).

    python3 -m bench.gpu_ws_gemm --out $OUT/ws_gemm.json [--shapes 4096x1280x8192,...]
        [--configs "128x256x64 w8 s3 g8;128x128x64 w8 s5 g8"] [--rounds 25]

For each shape: every WS configuration is checked on fresh random A, B (N(0, 1), bf16) with C
poisoned (NaN) against the fp32 product (relative error <= 1e-2, else rejected, said why);
then cuBLAS (``torch.matmul`` into a preallocated C), the tuned Triton GEMM and every WS
configuration that passed are timed launch by launch, interleaved, L2 flushed before each
launch, CUDA events (``gemm_tuning.interleaved``), medians and interquartile ranges. The A/A
row times cuBLAS twice under two names: its ratio must come out 1.00.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CONFIGS = "128x256x64 w8 s3 g8 e1;128x256x64 w8 s4 g8 e2;128x256x64 w8 s3 g8 e2;128x256x64 w8 s4 g16 e2"


def parse_config(text: str) -> dict:
    """``128x256x64 w8 s3 g8 e2`` -> the knobs of kernels/schedule/ws_gemm.py (``e``:
    EPILOGUE_SPLIT); ``256+64x128x64 ...``: BLOCK_M 256 and BLOCK_M_LOW 64 (a 320-row tile of
    two consumers)."""
    words = text.split()
    rows, bn, bk = words[0].split("x")
    bm, _, low = rows.partition("+")
    knobs = {"BLOCK_M": int(bm), "BLOCK_N": int(bn), "BLOCK_K": int(bk), "num_warps": 8, "num_stages": 3,
             "GROUP_M": 8, "BLOCK_M_LOW": int(low or 0)}
    for word in words[1:]:
        key = {"w": "num_warps", "s": "num_stages", "g": "GROUP_M", "e": "EPILOGUE_SPLIT"}[word[0]]
        knobs[key] = int(word[1:])
    return knobs


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--shapes", default="")
    parser.add_argument("--configs", default=DEFAULT_CONFIGS)
    parser.add_argument("--rounds", type=int, default=25)
    args = parser.parse_args(argv)

    import torch
    import triton

    from bench import gpu_rank_gemm
    from swizzleperf.kernels.schedule import gemm_tuning, ws_gemm

    if args.shapes:
        shapes = [dict(zip("MNK", (int(x) for x in s.split("x")))) for s in args.shapes.split(",")]
    else:
        shapes = gpu_rank_gemm.shapes()
    configs = [parse_config(c) for c in args.configs.split(";") if c.strip()]
    device = torch.cuda.get_device_name()
    programs = torch.cuda.get_device_properties(0).multi_processor_count
    tuned = json.loads((ROOT / "bench" / "results" / "gemm_configs_hopper.json").read_text())
    spec = gpu_rank_gemm.gemm_module()
    rows = []
    for shape in shapes:
        M, N, K = shape["M"], shape["N"], shape["K"]
        started = time.time()
        generator = torch.Generator(device="cuda").manual_seed(M * 7 + N * 3 + K)
        a = torch.randn(M, K, generator=generator, device="cuda").to(torch.bfloat16)
        b = torch.randn(K, N, generator=generator, device="cuda").to(torch.bfloat16)
        expected = torch.matmul(a.float(), b.float())
        c_ref = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
        launches = {"cublas": lambda: torch.matmul(a, b, out=c_ref),
                    "cublas_again": lambda: torch.matmul(a, b, out=c_ref)}
        key = gemm_tuning.cache_key(f"gemm/{gpu_rank_gemm.ORDER}", device, programs, "bfloat16", M, N, K)
        row = {"M": M, "N": N, "K": K, "sources": shape.get("sources", []), "rejected": {}, "errors": {}}
        if key in tuned and not tuned[key]["config"].get("WS_GEMM"):   # a Triton configuration
            triton_config = tuned[key]["config"]
            c_triton = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
            inputs = {"a": a, "b": b, "c": c_triton}
            launches["triton"] = lambda cfg=triton_config, inputs=inputs: spec.launch(inputs, **cfg, NUM_SMS=programs)
            row["triton_config"] = gemm_tuning.name(triton_config)
        for config in configs:
            tile_m = f"{config['BLOCK_M']}+{config['BLOCK_M_LOW']}" if config["BLOCK_M_LOW"] else config["BLOCK_M"]
            label = "ws " + " ".join([f"{tile_m}x{config['BLOCK_N']}x{config['BLOCK_K']}",
                                     f"w{config['num_warps']}", f"s{config['num_stages']}",
                                     f"g{config['GROUP_M']}", f"e{config.get('EPILOGUE_SPLIT', 1)}"])
            c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
            try:
                ws_gemm.matmul(a, b, config, c=c)
                torch.cuda.synchronize()
            except Exception as exc:  # a configuration that does not build: recorded, not fatal
                row["rejected"][label] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
                print(f"  {label}: rejected, {row['rejected'][label]}", flush=True)
                continue
            error = gemm_tuning.relative_error(c, expected)
            row["errors"][label] = error
            if not error <= 1e-2:
                row["rejected"][label] = f"relative error {error:.3e}"
                print(f"  {label}: rejected, relative error {error:.3e}", flush=True)
                continue
            launches[label] = lambda cfg=config, c=c: ws_gemm.matmul(a, b, cfg, c=c)
        for fn in launches.values():   # compiled and warm before timing
            fn()
        torch.cuda.synchronize()
        times = gemm_tuning.interleaved(launches, args.rounds)
        row["times"] = {n: {k: v for k, v in t.items() if k != "times_ms"} for n, t in times.items()}
        cublas = times["cublas"]["median_ms"]
        summary = "  ".join(f"{n} {t['median_ms']:.4f} ({cublas / t['median_ms']:.3f}x)" for n, t in times.items())
        print(f"{M}x{N}x{K} [{time.time() - started:.1f} s]: {summary}", flush=True)
        rows.append(row)
        Path(args.out).write_text(json.dumps({"device": device, "triton": triton.__version__,
                                              "torch": torch.__version__, "date": time.strftime("%Y-%m-%d"),
                                              "rounds": args.rounds, "rows": rows}, indent=1))
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
