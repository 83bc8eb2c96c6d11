"""How many bytes per second one GPU's L2 serves to its SMs (issue #43, the L2 roof): every program
reads blocks of a buffer that fits in L2 many times over (``ld.global.cg``: past L1, from L2), and
the same kernel over a buffer far larger than L2 gives DRAM's rate as a check of the method
against the datasheet. Median of ``triton.testing.do_bench`` (L2 flushed before each repetition:
the first pass over the small buffer misses, a few MB against the tens of GB read).

    python3 -m bench.gpu_l2_bandwidth --out OUT/l2_bandwidth.json
"""
from __future__ import annotations

import argparse
import json
import time

import torch
import triton
import triton.language as tl


@triton.jit
def l2_read(src_ptr, out_ptr, n_blocks, REPS: tl.constexpr, BLOCK: tl.constexpr):
    """Program p reads block (p + r * P) % n_blocks for r < REPS, BLOCK fp32 each, and sums them."""
    pid = tl.program_id(0)
    num_programs = tl.num_programs(0)
    accumulator = tl.zeros([BLOCK], tl.float32)
    for r in range(REPS):
        block = (pid + r * num_programs) % n_blocks
        offs = block.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        accumulator += tl.load(src_ptr + offs, cache_modifier=".cg")
    tl.store(out_ptr + pid * BLOCK + tl.arange(0, BLOCK), accumulator)


def rate(buffer_bytes: int, programs: int, reps: int, block: int = 4096, num_warps: int = 8) -> dict:
    """Bytes read per second by ``programs`` programs, ``reps`` blocks each, over a buffer of ``buffer_bytes``."""
    src = torch.rand(buffer_bytes // 4, device="cuda", dtype=torch.float32)
    out = torch.empty(programs * block, device="cuda", dtype=torch.float32)
    n_blocks = src.numel() // block
    launch = lambda: l2_read[(programs,)](src, out, n_blocks, REPS=reps, BLOCK=block, num_warps=num_warps)  # noqa: E731
    launch()
    torch.cuda.synchronize()
    ms = triton.testing.do_bench(launch, warmup=50, rep=400, return_mode="median")
    read = programs * reps * block * 4
    return {"buffer_bytes": buffer_bytes, "programs": programs, "reps": reps, "block_fp32": block,
            "num_warps": num_warps, "bytes_read": read, "time_ms": ms, "bytes_per_s": read / (ms * 1e-3)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    props = torch.cuda.get_device_properties(0)
    sms = props.multi_processor_count
    rows = []
    for buffer_mib in (4, 8, 16, 24):
        for per_sm in (4, 8, 16):
            rows.append({"what": "L2", **rate(buffer_mib << 20, sms * per_sm, reps=2000 // per_sm * 4)})
    for per_sm in (4, 8):
        rows.append({"what": "DRAM", **rate(4 << 30, sms * per_sm, reps=256)})
    best = {what: max((r for r in rows if r["what"] == what), key=lambda r: r["bytes_per_s"]) for what in ("L2", "DRAM")}
    result = {"device": props.name, "sms": sms, "l2_bytes": props.L2_cache_size, "torch": torch.__version__,
              "triton": triton.__version__, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
              "best_l2_bytes_per_s": best["L2"]["bytes_per_s"], "best_dram_bytes_per_s": best["DRAM"]["bytes_per_s"],
              "rows": rows}
    print(json.dumps({k: v for k, v in result.items() if k != "rows"}, indent=1))
    for r in rows:
        print(f"{r['what']:5} {r['buffer_bytes'] >> 20:6d} MiB {r['programs']:5d} programs "
              f"{r['time_ms']:.3f} ms {r['bytes_per_s'] / 1e12:.2f} TB/s")
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
