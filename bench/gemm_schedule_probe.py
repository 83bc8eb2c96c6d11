"""When and where the bundled GEMM computes each tile, under an order (issue #43).

The L2 merges the reads of one line by the SMs of one group (about 16 SMs) for about 1-2 MiB of lag
(bench/l2_merge_probe.py, bench/results/simulator_validation.md): so the GEMM's L2 lookups depend on
how far apart in time the programs of a group read the same tile, which a lockstep simulator does
not know. This probe measures it: kernels/gemm.py with its rewrite target set to a catalog order
(as bench/validate_simulator.py builds an order's kernel) and two reads of ``%globaltimer`` per tile
of its persistent loop, its ``%smid`` and program id stored per tile, launched as the measurement set
launches it (its default problem and meta), ``--launches`` times; the last launch's records are kept.

Per order, per tile (in the kernel's tile numbering, the persistent loop's ``tile``): the SM, the
program, the global timer (ns) when the program started the tile and when it had issued its store.
The data-parallel loop only (``STREAM_K`` 0, no tail), which is how the measurement set runs it.

    python3 -m bench.gemm_schedule_probe --orders row-major,column-major,grouped-m:4 --out OUT.json.gz

Needs a CUDA GPU with ``%globaltimer`` (every NVIDIA GPU this project runs on). ``instrumented``
builds the module's text on any machine (tests/bench/test_gemm_schedule_probe.py compiles it for
sm_90 without a GPU).
"""
from __future__ import annotations

import argparse
import gzip
import importlib.util
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GEMM = ROOT / "kernels" / "gemm.py"
META = {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "num_warps": 8, "num_stages": 4, "EPILOGUE_SUBTILE": 1}

# (text in kernels/gemm.py, its replacement): each must occur exactly once
_EDITS = (
    ("    workspace, flags,  #", "    workspace, flags, sched,  # sched: int64 [tiles, 4] (the schedule probe); "),
    ("        workspace, flags, M, N, K, rows,", "        workspace, flags, SCHEDULE[0], M, N, K, rows,"),
    ("        pid_m, pid_n = swizzle(tile, num_pid_m, num_pid_n)\n"
     "        accumulator = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)\n"
     "        accumulator = mainloop(a, b, pid_m * BLOCK_M, pid_n * BLOCK_N, 0, k_iters,",
     "        began = _schedule_now(pid)\n"
     "        pid_m, pid_n = swizzle(tile, num_pid_m, num_pid_n)\n"
     "        accumulator = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)\n"
     "        accumulator = mainloop(a, b, pid_m * BLOCK_M, pid_n * BLOCK_N, 0, k_iters,"),
    ("        _store_c(c, accumulator, pid_m, pid_n, M, N, stride_cm, stride_cn, BLOCK_M, BLOCK_N, USE_TMA,\n"
     "                 EPILOGUE_SUBTILE)\n    if STREAM_K > 0:",
     "        _store_c(c, accumulator, pid_m, pid_n, M, N, stride_cm, stride_cn, BLOCK_M, BLOCK_N, USE_TMA,\n"
     "                 EPILOGUE_SUBTILE)\n        _schedule_record(sched, tile, pid, began)\n    if STREAM_K > 0:"),
)

_HELPERS = '''

# ---- added by bench/gemm_schedule_probe.py: the schedule of each tile ----
from swizzleperf.profiling.probe_kernels import _now as _schedule_now, _smid as _schedule_smid  # noqa: E402
SCHEDULE = [None]   # the int64 [tiles, 4] buffer launch() passes as ``sched``


@triton.jit
def _schedule_record(sched, tile, pid, began):
    ended = _schedule_now(pid)
    row = sched + tile.to(tl.int64) * 4
    tl.store(row, _schedule_smid(pid).to(tl.int64))
    tl.store(row + 1, pid.to(tl.int64))
    tl.store(row + 2, began)
    tl.store(row + 3, ended)
'''


def instrumented(order: str) -> str:
    """kernels/gemm.py's text with its rewrite target set to the catalog ``order`` and the schedule
    recorded per tile (``_EDITS``, ``_HELPERS``). Raises ValueError where kernels/gemm.py no longer
    holds a text an edit expects (exactly once)."""
    from swizzleperf.agent.verification.candidate import splice, target_args
    from swizzleperf.agent.verification.swizzles import catalog_source
    source = GEMM.read_text()
    text = splice(source, "swizzle", catalog_source(order, target_args(source, "swizzle")))
    for old, new in _EDITS:
        if text.count(old) != 1:
            raise ValueError(f"kernels/gemm.py holds {text.count(old)} copies of {old[:60]!r}, expected 1: "
                             "bench/gemm_schedule_probe.py's edits need updating")
        text = text.replace(old, new)
    return text + _HELPERS


def _module(text: str, folder: Path, name: str):
    path = folder / f"{name}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def schedule(order: str, launches: int = 3) -> dict:
    """One order's schedule (see the module docstring): ``smid``, ``program``, ``began_ns``,
    ``ended_ns`` per tile (lists, the last launch's; times from that launch's first start), with the
    problem, the meta, each launch's wall time (CUDA events, ms) and the smallest step of the global
    timer seen (its resolution)."""
    import numpy as np
    import torch
    from swizzleperf.kernels.gemm import SPEC
    problem = dict(SPEC.problems["default"])
    with tempfile.TemporaryDirectory() as folder:
        module = _module(instrumented(order), Path(folder), f"gemm_schedule_{abs(hash(order))}")
        inputs = module.make_inputs(problem, seed=0, device="cuda")
        tiles = -(-problem["M"] // META["BLOCK_M"]) * -(-problem["N"] // META["BLOCK_N"])
        sched = torch.full((tiles, 4), -1, dtype=torch.int64, device="cuda")
        module.SCHEDULE[0] = sched
        times = []
        for _ in range(launches):
            sched.fill_(-1)
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            module.launch(inputs, **META)
            end.record()
            torch.cuda.synchronize()
            times.append(round(start.elapsed_time(end), 4))
        rows = sched.cpu().numpy()
    if (rows < 0).any():
        raise RuntimeError(f"{int((rows[:, 0] < 0).sum())} of {tiles} tiles were not recorded")
    zero = int(rows[:, 2].min())
    stamps = np.unique(np.concatenate([rows[:, 2], rows[:, 3]]))
    return {"order": order, "problem": problem, "meta": META, "tiles": tiles, "launch_ms": times,
            "timer_step_ns": int(np.diff(stamps).min()) if len(stamps) > 1 else None,
            "smid": rows[:, 0].tolist(), "program": rows[:, 1].tolist(),
            "began_ns": (rows[:, 2] - zero).tolist(), "ended_ns": (rows[:, 3] - zero).tolist()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--orders", default="row-major,column-major,grouped-m:4,grouped-m:8,grouped-n:32")
    parser.add_argument("--launches", type=int, default=3)
    parser.add_argument("--out", required=True, help="OUT.json.gz")
    args = parser.parse_args()
    import torch
    result = {"device": torch.cuda.get_device_name(), "command": " ".join(sys.argv), "orders": []}
    for order in [o for o in args.orders.split(",") if o]:
        t0 = time.time()
        try:
            result["orders"].append(schedule(order, args.launches))
        except Exception as exc:   # one order's failure is its row; the others are kept
            result["orders"].append({"order": order, "error": f"{type(exc).__name__}: {str(exc)[:300]}"})
        print(order, f"{time.time() - t0:.1f} s", result["orders"][-1].get("launch_ms") or result["orders"][-1]["error"],
              flush=True)
        with gzip.open(args.out, "wt") as f:
            json.dump(result, f)


if __name__ == "__main__":
    main()
