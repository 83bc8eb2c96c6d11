"""Where a stream-K schedule's time goes, on one GPU (issue #23): the same tiles timed
data-parallel, through the stream-K loop with one whole tile per program (no hand-over), with
every tile (or the last wave's) stream-K on all SMs, and the same with the hand-over of partial
tiles cut down: left out (``no fixup``: partials neither written nor added), only written
(``store only``: the producer writes its partial and sets its flag, the finisher neither waits
nor adds), only signalled (``wait only``: the producer sets its flag without writing, the
finisher waits for it and adds nothing). In those three C is WRONG: timing variants only, never
checked, never a result. ``torch.matmul`` in the same interleaved rounds
(kernels/schedule/gemm_tuning.interleaved: L2 flushed before each launch, CUDA events).

    python3 -m bench.gpu_stream_k_cost --out OUT/stream_k_cost.json
    ncu -k regex:matmul_kernel -s 2 -c 1 python3 -m bench.gpu_stream_k_cost --only "SHAPE:LABEL"

``--only`` launches one case's one variant a few times and times nothing (for a profiler).

The checked variants are verified against the fp32 product first (C poisoned).
"""
from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import torch

from bench.gpu_rank_gemm import gemm_module
from swizzleperf.kernels.schedule.gemm_tuning import interleaved, relative_error

#: (shape, tile configuration, the variants: label -> (STREAM_K, programs, cut: False for the
#: real hand-over, else which cut-down variant of ``VARIANTS``))
CASES = (
    ("4096x512x4096", {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "num_warps": 8, "num_stages": 4,
                       "EPILOGUE_SUBTILE": 1},
     {"data-parallel P=64": (0, 64, False), "stream-K loop P=64": (3, 64, False),
      "all stream-K P=SMs": (3, 0, False), "all stream-K P=SMs no fixup": (3, 0, "none"),
      "all stream-K P=SMs store only": (3, 0, "store"), "all stream-K P=SMs wait only": (3, 0, "wait")}),
    ("4096x512x4096", {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 128, "num_warps": 8, "num_stages": 3},
     {"data-parallel P=128": (0, 128, False), "stream-K loop P=128": (3, 128, False),
      "all stream-K P=SMs": (3, 0, False), "all stream-K P=SMs no fixup": (3, 0, "none")}),
    ("4096x1280x8192", {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "num_warps": 8, "num_stages": 3},
     {"data-parallel": (0, 0, False), "all stream-K P=SMs": (2, 0, False),
      "all stream-K P=SMs no fixup": (2, 0, "none"), "all stream-K P=SMs store only": (2, 0, "store"),
      "all stream-K P=SMs wait only": (2, 0, "wait")}),
    ("4096x2560x8192", {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "num_warps": 8, "num_stages": 3},
     {"last wave stream-K": (1, 0, False), "last wave stream-K no fixup": (1, 0, "none")}),
    ("8192x896x14336", {"BLOCK_M": 256, "BLOCK_N": 128, "BLOCK_K": 64, "num_warps": 8, "num_stages": 3},
     {"last wave stream-K": (1, 0, False), "last wave stream-K no fixup": (1, 0, "none")}),
)


#: The cut-down hand-overs (timing only), in place of persistent_gemm.stream_k_fixup.
VARIANTS = '''
from swizzleperf.kernels.schedule.persistent_gemm import (_slot_store, slot_offsets, stream_k_owner,
                                                          wait_for_flag)


@triton.jit
def _fixup_none(accumulator, workspace, flags, pid, num_programs, units, tile, start, k_hi,
                k_iters, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    return accumulator


@triton.jit
def _fixup_store(accumulator, workspace, flags, pid, num_programs, units, tile, start, k_hi,
                 k_iters, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    if k_hi < k_iters:
        _slot_store(workspace + pid * (BLOCK_M * BLOCK_N) + slot_offsets(BLOCK_M, BLOCK_N), accumulator)
        tl.debug_barrier()
        tl.atomic_xchg(flags + pid, 1, sem="release", scope="gpu")
    return accumulator


@triton.jit
def _fixup_wait(accumulator, workspace, flags, pid, num_programs, units, tile, start, k_hi,
                k_iters, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    if k_hi < k_iters:
        tl.debug_barrier()
        tl.atomic_xchg(flags + pid, 1, sem="release", scope="gpu")
    else:
        tile_first = tile * k_iters
        if start > tile_first:
            for p in range(stream_k_owner(tile_first, num_programs, units), pid):
                wait_for_flag(flags + p)
                tl.debug_barrier()
                tl.atomic_xchg(flags + p, 0, sem="relaxed", scope="gpu")
    return accumulator
'''


def _cut(source: str, variant: str) -> str:
    """kernels/gemm.py's source with the stream-K hand-over replaced by a cut-down variant."""
    out, count = re.subn(r"accumulator = stream_k_fixup\(", f"accumulator = _fixup_{variant}(", source)
    assert count == 1, "kernels/gemm.py's stream_k_fixup call not found"
    head, tail = out.split("\n\n@triton.jit\ndef swizzle", 1)
    return head + "\n" + VARIANTS + "\n\n@triton.jit\ndef swizzle" + tail


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="")
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--only", default="", help="SHAPE:LABEL: launch that variant 5 times, time nothing")
    args = parser.parse_args()
    if not args.only and not args.out:
        parser.error("--out is required unless --only is given")
    from swizzleperf.agent.verification.load import load_kernel
    spec = gemm_module()
    grouped = Path(spec.launch.__code__.co_filename)
    cut = {}
    for variant in ("none", "store", "wait"):
        path = grouped.with_name(f"gemm_grouped_fixup_{variant}.py")
        path.write_text(_cut(grouped.read_text(), variant))
        cut[variant] = load_kernel(path)[1]
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    rows = []
    for shape, tiles, variants in CASES:
        if args.only and not args.only.startswith(shape + ":"):
            continue
        M, N, K = map(int, shape.split("x"))
        inputs = spec.make_inputs({"M": M, "N": N, "K": K}, 7, "cuda", "bfloat16")
        expected = torch.matmul(inputs["a"].float(), inputs["b"].float())
        reference = torch.empty_like(inputs["c"])
        launches, errors = {}, {}
        for label, (stream_k, programs, variant) in variants.items():
            if args.only and args.only != f"{shape}:{label}":
                continue
            module = cut[variant] if variant else spec
            config = {**tiles, "STREAM_K": stream_k, "NUM_SMS": programs or sms}
            launches[label] = lambda m=module, c=config: m.launch(inputs, **c)
            if args.only == f"{shape}:{label}":
                for _ in range(5):
                    launches[label]()
                torch.cuda.synchronize()
                print(f"launched {args.only} 5 times", flush=True)
                return 0
            if not variant:
                inputs["c"].fill_(float("nan"))
                launches[label]()
                torch.cuda.synchronize()
                errors[label] = relative_error(inputs["c"], expected)
                assert errors[label] < 1e-2, (shape, label, errors[label])
        launches["cuBLAS"] = lambda: torch.matmul(inputs["a"], inputs["b"], out=reference)
        timed = interleaved(launches, args.rounds)
        row = {"shape": shape, "tiles": tiles, "rel_error": errors,
               "ms": {k: round(v["median_ms"], 5) for k, v in timed.items()},
               "spread_ms": {k: round(v["spread_ms"], 5) for k, v in timed.items()}}
        rows.append(row)
        print(shape, json.dumps(row["ms"]), flush=True)
    Path(args.out).write_text(json.dumps({"device": torch.cuda.get_device_name(), "sms": sms,
                                          "command": "python3 -m bench.gpu_stream_k_cost --out OUT",
                                          "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
