"""The bundled GEMM's schedule modelled on a CPU (issue #43), written in the format of
bench/gemm_schedule_probe.py so that ``bench/validate_simulator.py compare --schedules`` replays it as
it replays a measured one. The model is the product's (``profiling/schedule_model.py``, whose
docstring says what it models; ``swizzleperf simulate`` runs it for ``tl.dot`` kernels on NVIDIA
GPUs); this script writes its schedules for chosen orders, meta-parameters, noise and seed:

    python -m bench.gemm_timing_model --hw h100 --orders row-major,grouped-m:8 --noise 100 --out DIR

writes ``DIR/schedule.json.gz``, ``DIR/partition_map.json`` and ``DIR/groups.json``, the three
inputs of ``compare --schedules --partition-map --groups``. (The files under
bench/results/gemm_timing_model/ were made by this script's first form, the model's loop written
here; the product's form gives the same schedules to the bit, checked on an H100 build order and an
H200 order when it moved.)
"""
from __future__ import annotations

import argparse
import gzip
import json
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent


def model_schedule(trace, order: np.ndarray, hw, meta: dict, noise_ns: float, seed: int = 0) -> dict:
    """``schedule_model.model_schedule`` of the GEMM's ``trace`` under ``order`` with ``meta``'s
    ``BLOCK_M``, ``BLOCK_N``, ``BLOCK_K`` and ``num_stages`` (a k-step: ``2 BLOCK_M BLOCK_N BLOCK_K``
    FLOPs at the spec's peak share of one SM), programs on the partitions ``l2sim.program_domains``
    hashes, the given noise (ns) and seed.

    Raises:
        ValueError: a meta without those keys; as ``ScheduleModel`` and ``model_schedule``."""
    from swizzleperf.profiling.l2sim import program_domains
    from swizzleperf.profiling.schedule_model import ScheduleModel
    from swizzleperf.profiling.schedule_model import model_schedule as modelled
    missing = [k for k in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "num_stages") if k not in meta]
    if missing:
        raise ValueError(f"meta lacks {', '.join(missing)}")
    step_ns = 2 * meta["BLOCK_M"] * meta["BLOCK_N"] * meta["BLOCK_K"] / (hw.peak_bf16_flops / hw.compute_units) * 1e9
    model = ScheduleModel(step_ns=step_ns, ahead=max(0, int(meta["num_stages"]) - 1), noise_ns=noise_ns, seed=seed)
    return modelled(trace, order, hw, model, program_domains(hw.compute_units, 2, "hashed_domains"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hw", default="h100")
    parser.add_argument("--orders", required=True, help="catalog orders, comma-separated")
    parser.add_argument("--noise", type=float, required=True, help="ns: each lookup's mean added delay")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--meta", default="BLOCK_M=128,BLOCK_N=256,BLOCK_K=64,num_stages=4",
                        help="the measured launch's (bench/gemm_schedule_probe.py META)")
    parser.add_argument("--out", required=True, help="a folder: schedule.json.gz, partition_map.json, groups.json")
    args = parser.parse_args()
    from bench.validate_simulator import _order_source
    from swizzleperf.agent.verification.load import load_kernel
    from swizzleperf.agent.verification.simulate import kernel_trace, program_order
    from swizzleperf.hwspecs import load_spec
    from swizzleperf.profiling.l2sim import program_domains
    from swizzleperf.profiling.schedule_model import GROUP_SIZE
    hw = load_spec(args.hw)
    meta = {k: int(v) for k, v in (item.split("=") for item in args.meta.split(","))}
    kernel = ROOT / "kernels" / "gemm.py"
    source, (module, kernel_spec) = kernel.read_text(), load_kernel(kernel)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows, trace = [], None
    for name in args.orders.split(","):
        with tempfile.TemporaryDirectory() as folder:
            target = Path(folder) / "target.py"
            target.write_text(_order_source(name, source, module, kernel_spec))
            spec, order, _ = program_order(kernel, None, target, {})
        trace = trace or kernel_trace(kernel, spec, {}, traced=False)
        rows.append({"order": name, "meta": meta, "tiles": int(len(order)),
                     **model_schedule(trace, order, hw, meta, args.noise, args.seed)})
        print(f"{name}: modelled, tiles {np.median(np.subtract(rows[-1]['ended_ns'], rows[-1]['began_ns'])) / 1e3:.1f} us "
              f"(median)", flush=True)
    (out / "schedule.json.gz").write_bytes(gzip.compress(json.dumps({"device": f"modelled:{hw.name}", "orders": rows}).encode()))
    programs = hw.compute_units
    (out / "partition_map.json").write_text(json.dumps(
        {"partition_of_sm": program_domains(programs, 2, "hashed_domains").tolist(), "source": "l2sim.program_domains"}))
    (out / "groups.json").write_text(json.dumps(
        {"groups": [list(range(g, min(g + GROUP_SIZE, programs))) for g in range(0, programs, GROUP_SIZE)],
         "source": f"profiling/schedule_model.py: {GROUP_SIZE} consecutive programs a group"}))


if __name__ == "__main__":
    main()
