"""Does the L2 lose reuse to a power-of-two row stride? (issue #43, one H100 or H200, ncu)

The L2 simulator (profiling/l2sim.py) is fully associative. Against ncu on an H200 it predicts the
GEMM's column-major order 20 points high (65.4 % against 45.5 % SM read lookups,
bench/results/simulator_validation.md) and grouped-m:64 13 high, while row-major and every
grouped-n order are within 4 points. The ideal reuse inside a wave is the same for column-major
and row-major (each 67 %), and for grouped-m:64 and grouped-n:32 (each 83 %). What differs is the
data each order streams: under column-major and grouped-m:G one k-step reads a 128-row slice of A
from each of G row blocks, lines 8 KiB apart (A is 16384 x 4096 bf16: a row is 8 KiB), while
row-major and grouped-n stream B, whose slices are 512 contiguous bytes a row. If the L2's set
index maps lines 8 KiB apart to few sets, that stream evicts the shared B lines there, which a
fully associative model cannot see.

The test: the same GEMM (kernels/gemm.py, its launch configuration) at K = 4096 and at K = 4160
(A's rows 8320 bytes apart: no power of two; B's rows unchanged), under column-major, grouped-m:64
and row-major, ncu as bench/validate_simulator.py measures. If the stride is the cause,
column-major and grouped-m:64 gain far more at K = 4160 than row-major does (the ideal reuse
barely moves: 65 against 64 k-steps).

    python3 -m bench.gpu_l2_stride --out OUT/l2_stride_GPU.json [--orders ...] [--ks 4096,4160]

Each (K, order) pair is written as measured (``rows``), so a call cut short keeps what it measured.
"""
from __future__ import annotations

import argparse
import json
import re
import shutil
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GEMM = ROOT / "kernels" / "gemm.py"
DEFAULT_PROBLEM = '"default": {"M": 16384, "N": 16384, "K": 4096}'
ORDERS = ("column-major", "row-major", "grouped-m:64")
KS = (4096, 4160)


def variant(k: int, folder: Path) -> Path:
    """kernels/gemm.py with its default problem's K set to ``k``, written into ``folder`` (under
    the repository: the measurement names the kernel by its path from the root).

    Raises:
        ValueError: kernels/gemm.py no longer has the default problem this script changes.
    """
    source = GEMM.read_text()
    if source.count(DEFAULT_PROBLEM) != 1:
        raise ValueError(f"kernels/gemm.py has no line {DEFAULT_PROBLEM!r}: this probe needs updating")
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"gemm_k{k}.py"
    path.write_text(source.replace(DEFAULT_PROBLEM, re.sub(r'"K": \d+', f'"K": {k}', DEFAULT_PROBLEM)))
    return path


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--orders", default=",".join(ORDERS))
    parser.add_argument("--ks", default=",".join(map(str, KS)))
    args = parser.parse_args(argv)
    from bench.validate_simulator import measure
    out = Path(args.out)
    # under the repository (the measurement names the kernel by its path from the root), a folder
    # of this run's own: two runs in one checkout never share it
    folder = Path(tempfile.mkdtemp(prefix=".l2_stride-", dir=ROOT / "bench"))
    result = {"what": "kernels/gemm.py at M = N = 16384 and K as given, ncu (bench/validate_simulator.py measure)",
              "rows": [], "failed": []}
    try:
        for order in args.orders.split(","):          # the two Ks of one order side by side first
            for k in map(int, args.ks.split(",")):
                one = folder / "one.json"
                started = time.time()
                try:
                    measure(variant(k, folder), [order], one)
                    data = json.loads(one.read_text())
                    result.setdefault("device", data["device"])
                    result["rows"].append({"K": k, "seconds": round(time.time() - started, 1),
                                           "problem": data["problem"], "meta": data["meta"], **data["rows"][0]})
                except Exception as exc:   # one pair's failure must not cost the others
                    result["failed"].append({"K": k, "order": order, "error": f"{type(exc).__name__}: {str(exc)[:300]}"})
                out.write_text(json.dumps(result, indent=1))
                print(f"K={k} {order}: {time.time() - started:.0f} s", flush=True)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
