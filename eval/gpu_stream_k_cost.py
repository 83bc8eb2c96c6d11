"""Where a stream-K schedule's time goes, on one GPU (issue #23): the same tiles timed
data-parallel, through the stream-K loop with one whole tile per program (no hand-over), with
every tile stream-K on all SMs, and the same with the hand-over of partial tiles left out
(``no fixup``: the partials are neither written nor added, so C is WRONG there: a timing
variant only, never checked, never a result), with ``torch.matmul`` in the same interleaved
rounds (kernels/schedule/gemm_tuning.interleaved: L2 flushed before each launch, CUDA events).

    python3 eval/gpu_stream_k_cost.py --out OUT/stream_k_cost.json

The checked variants are verified against the fp32 product first (C poisoned).
"""
from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import torch

from swizzleperf.eval.gpu_rank_gemm import gemm_module
from swizzleperf.kernels.schedule.gemm_tuning import interleaved, relative_error

#: (shape, tile configuration, the variants: label -> (STREAM_K, programs, no_fixup))
CASES = (
    ("4096x512x4096", {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "num_warps": 8, "num_stages": 4,
                       "EPILOGUE_SUBTILE": 1},
     {"data-parallel P=64": (0, 64, False), "stream-K loop P=64": (3, 64, False),
      "all stream-K P=SMs": (3, 0, False), "all stream-K P=SMs no fixup": (3, 0, True)}),
    ("4096x512x4096", {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 128, "num_warps": 8, "num_stages": 3},
     {"data-parallel P=128": (0, 128, False), "stream-K loop P=128": (3, 128, False),
      "all stream-K P=SMs": (3, 0, False), "all stream-K P=SMs no fixup": (3, 0, True)}),
    ("4096x1280x8192", {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "num_warps": 8, "num_stages": 3},
     {"data-parallel": (0, 0, False), "all stream-K P=SMs": (2, 0, False),
      "all stream-K P=SMs no fixup": (2, 0, True)}),
)


def _no_fixup(source: str) -> str:
    """kernels/gemm.py's source with the stream-K hand-over removed (timing only)."""
    out, count = re.subn(r"accumulator = stream_k_fixup\(.*?BLOCK_N\)", "pass", source, flags=re.S)
    assert count == 1, "kernels/gemm.py's stream_k_fixup call not found"
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    from swizzleperf.agent.verification.load import load_kernel
    spec = gemm_module()
    grouped = Path(spec.launch.__code__.co_filename)
    broken_path = grouped.with_name("gemm_grouped_no_fixup.py")
    broken_path.write_text(_no_fixup(grouped.read_text()))
    broken = load_kernel(broken_path)[1]
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    rows = []
    for shape, tiles, variants in CASES:
        M, N, K = map(int, shape.split("x"))
        inputs = spec.make_inputs({"M": M, "N": N, "K": K}, 7, "cuda", "bfloat16")
        expected = torch.matmul(inputs["a"].float(), inputs["b"].float())
        reference = torch.empty_like(inputs["c"])
        launches, errors = {}, {}
        for label, (stream_k, programs, no_fixup) in variants.items():
            module = broken if no_fixup else spec
            config = {**tiles, "STREAM_K": stream_k, "NUM_SMS": programs or sms}
            launches[label] = lambda m=module, c=config: m.launch(inputs, **c)
            if not no_fixup:
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
                                          "command": "python3 eval/gpu_stream_k_cost.py --out OUT",
                                          "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
