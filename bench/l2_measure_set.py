"""The measurement set of issue #43 (the 10 bundled kernels under several orders each, ncu on one
H100 or H200) and its frozen held-out part.

    python3 -m bench.l2_measure_set measure --part 1 --outdir OUT     # on the GPU (bench/gpu_l2_measure.sh)
    python3 -m bench.l2_measure_set holdout                           # print the held-out pairs
    python3 -m bench.l2_measure_set holdout --write                   # (re)write the file: only before any measurement

``PAIRS``: (kernel, order) pairs; ``PARTS``: which kernels each of the two GPU calls measures. Each
pair is profiled by bench/validate_simulator.py's ``measure`` (profiling/ncu.py: the kernel selected
by its exact name, 2 warm-up launches skipped, 3 launches profiled and averaged, caches flushed per
pass, ``--clock-control none``; smith_waterman as one whole run of its 383 launches), one pair at a
time, and written to ``OUTDIR/ncu_orders_<kernel>_<gpu>.json`` (validate_simulator's format, so
``compare`` reads it) after every pair, so a call cut short keeps what it measured.

The held-out part (``bench/results/simulator_holdout.json``) was drawn from ``PAIRS`` with a fixed
seed before any of these measurements existed: per kernel round(n / 3) pairs (at least one), the
GEMM's row-major, grouped-m:8 and column-major always among them (the orders of #43's "done
when"). bench/validate_simulator.py's ``model_rows`` is the only way a model-building step may read
measured rows; it drops the held-out pairs and refuses a file that still holds one after that.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import random
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HOLDOUT = ROOT / "bench" / "results" / "simulator_holdout.json"
SEED = 43

_GEMM = ["row-major", "column-major", "grouped-m:4", "grouped-m:8", "grouped-m:16", "grouped-m:32",
         "grouped-m:64", "grouped-n:8", "grouped-n:16", "grouped-n:32", "xcd-grouped-m:8:2"]
_2D = ["row-major", "column-major", "grouped-m:8", "grouped-n:8", "grouped-m:32"]
_1D = ["row-major", "xcd-contiguous:2", "xcd-contiguous:4", "xcd-contiguous:8"]
ORDERS = {
    "gemm": _GEMM,
    "transpose": _2D, "fdtd2d": _2D, "stencil2d": _2D,
    "softmax": _1D, "black_scholes": _1D, "layernorm": _1D, "elementwise": _1D, "spmv": _1D,
    # any order but these three fails its numerics check (bench/results/simulator_validation.md)
    "smith_waterman": ["own", "source:bottom-up", "source:interleaved"],
}
WHOLE_RUN = {"smith_waterman"}          # many launches a run: one NVTX range (profiling/ncu.py profile_run)
FORCED_HOLDOUT = {("gemm", "row-major"), ("gemm", "grouped-m:8"), ("gemm", "column-major")}
PAIRS = [(k, o) for k, orders in ORDERS.items() for o in orders]
# the two GPU calls (bench/gpu_l2_measure.sh PART): the partition probe and the reuse-rich kernels
# first, the streaming kernels (every order alike so far) second
PARTS = {1: ["gemm", "smith_waterman", "stencil2d"],
         2: ["fdtd2d", "transpose", "spmv", "elementwise", "layernorm", "softmax", "black_scholes"]}


def draw_holdout(seed: int = SEED) -> list:
    """The held-out (kernel, order) pairs, sorted: per kernel round(n / 3) (at least 1) of its
    orders, the forced ones first, the rest drawn with ``random.Random(seed)`` in PAIRS order."""
    rng = random.Random(seed)
    held = []
    for kernel, orders in ORDERS.items():
        want = max(1, round(len(orders) / 3))
        forced = [o for o in orders if (kernel, o) in FORCED_HOLDOUT]
        rest = [o for o in orders if (kernel, o) not in FORCED_HOLDOUT]
        held += [(kernel, o) for o in forced + rng.sample(rest, max(0, want - len(forced)))]
    return sorted(held)


def _digest(pairs) -> str:
    return hashlib.sha256(json.dumps(sorted([list(p) for p in pairs])).encode()).hexdigest()


def holdout_document(seed: int = SEED) -> dict:
    held = draw_holdout(seed)
    return {"issue": 43,
            "what": "(kernel, order) pairs held out from every model-building step of the L2 simulator; "
                    "the validation of #43 is judged on these alone",
            "drawn": "before any measurement of bench/l2_measure_set.py's PAIRS (2026-11-26): per kernel "
                     "round(n/3) of its orders (at least 1), the GEMM's row-major, grouped-m:8 and column-major "
                     f"forced in, the rest random.Random({seed}).sample in PAIRS order",
            "caveat": "the GEMM's three forced orders were measured on an H200 on 2026-11-22 "
                      "(bench/results/ncu_orders_h200.json, partition_h200/) and earlier model revisions saw "
                      "them; from now on no fit may read them, from those files or the new ones",
            "seed": seed, "pairs_total": len(PAIRS), "digest_of_pairs": _digest(held),
            "held_out": [{"kernel": k, "order": o} for k, o in held]}


def load_holdout(path: Path = HOLDOUT) -> set:
    """The held-out pairs of the committed file, checked against its digest and against a fresh
    draw (a file edited after the fact, or a changed PAIRS / seed, is refused).

    Raises:
        ValueError: the file and the draw disagree, or the digest does not match."""
    doc = json.loads(Path(path).read_text())
    held = {(p["kernel"], p["order"]) for p in doc["held_out"]}
    if _digest(held) != doc["digest_of_pairs"]:
        raise ValueError(f"{path}: held-out pairs do not match their digest (edited after it was drawn?)")
    if held != set(draw_holdout(doc["seed"])):
        raise ValueError(f"{path}: the held-out pairs are not the draw of bench/l2_measure_set.py "
                         "(PAIRS or the seed changed since the file was written)")
    return held


def measure(part: int, outdir: Path, budget_s: float = 540.0, only: list | None = None) -> dict:
    """ncu of every pair of the kernels of ``part`` (or the ``only`` pairs, "kernel:order"),
    round-robin over the kernels (every kernel gets its first orders before any gets its last),
    stopping before a pair that would likely run past ``budget_s``. Returns the log (also written
    to ``OUTDIR/l2_measure_part<part>.json``): pairs measured, failed, not reached."""
    import torch
    from bench.validate_simulator import measure as measure_orders
    gpu = torch.cuda.get_device_name().split()[1].lower()
    outdir.mkdir(parents=True, exist_ok=True)
    if only:
        todo = [tuple(p.split(":", 1)) for p in only]
    else:
        queues = [[(k, o) for o in ORDERS[k]] for k in PARTS[part]]
        todo = [q[i] for i in range(max(map(len, queues))) for q in queues if i < len(q)]
    held = load_holdout()
    log = {"part": part, "device": torch.cuda.get_device_name(), "budget_s": budget_s,
           "measured": [], "failed": [], "not_reached": [], "seconds": {}}
    rows = {}
    started = time.time()
    for i, (kernel, order) in enumerate(todo):
        spent = time.time() - started
        worst = max(log["seconds"].values(), default=60.0)
        if spent + 1.5 * worst > budget_s:
            log["not_reached"] = [f"{k}:{o}" for k, o in todo[i:]]
            break
        tmp = outdir / f".one_{kernel}.json"
        t0 = time.time()
        try:
            measure_orders(ROOT / "kernels" / f"{kernel}.py", [order], tmp, whole_run=kernel in WHOLE_RUN)
            one = json.loads(tmp.read_text())
            tmp.unlink()
            row = {**one["rows"][0], "held_out": (kernel, order) in held}
            rows.setdefault(kernel, {**{k: v for k, v in one.items() if k != "rows"}, "rows": []})["rows"].append(row)
            (outdir / f"ncu_orders_{kernel}_{gpu}.json").write_text(json.dumps(rows[kernel], indent=1))
            log["measured"].append(f"{kernel}:{order}")
        except Exception as exc:   # one pair's failure must not cost the rest of the call
            log["failed"].append({"pair": f"{kernel}:{order}", "error": f"{type(exc).__name__}: {str(exc)[:300]}"})
        log["seconds"][f"{kernel}:{order}"] = round(time.time() - t0, 1)
        (outdir / f"l2_measure_part{part}.json").write_text(json.dumps(log, indent=1))
        print(f"{kernel} {order}: {log['seconds'][f'{kernel}:{order}']} s", flush=True)
    log["total_s"] = round(time.time() - started, 1)
    (outdir / f"l2_measure_part{part}.json").write_text(json.dumps(log, indent=1))
    return log


def main() -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    m = sub.add_parser("measure")
    m.add_argument("--part", type=int, choices=sorted(PARTS), required=True)
    m.add_argument("--outdir", required=True)
    m.add_argument("--budget-s", type=float, default=540.0)
    m.add_argument("--only", help="comma-separated kernel:order pairs instead of the part's")
    h = sub.add_parser("holdout")
    h.add_argument("--write", action="store_true")
    args = parser.parse_args()
    if args.command == "measure":
        log = measure(args.part, Path(args.outdir), args.budget_s, args.only.split(",") if args.only else None)
        print(json.dumps({k: log[k] for k in ("measured", "failed", "not_reached", "total_s")}))
    elif args.write:
        HOLDOUT.write_text(json.dumps(holdout_document(), indent=1) + "\n")
        print(HOLDOUT)
    else:
        print(json.dumps(holdout_document(), indent=1))


if __name__ == "__main__":
    main()
