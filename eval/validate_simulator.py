"""Simulator against ncu: predicted vs measured L2 hit rate and DRAM bytes over several orders.

Two steps, so that the model can be revised on a CPU against fixed measurements:

    # on the GPU machine: ncu metrics of each order (JSON)
    python eval/validate_simulator.py measure --out eval/results/ncu_orders_h200.json
    # anywhere: the simulator's predictions beside them, as a markdown table
    python eval/validate_simulator.py compare eval/results/ncu_orders_h200.json \
        --hw h200 --out eval/results/simulator_validation.md
"""
from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
ORDERS = ["row-major", "column-major", "grouped-m:4", "grouped-m:8", "grouped-m:16", "grouped-m:32",
          "grouped-m:64", "grouped-n:8", "grouped-n:16", "grouped-n:32"]


def measure(kernel: Path, orders: list, out: Path) -> None:
    """ncu metrics (profiling/ncu.py: 3 launches averaged) of each order at the default problem;
    ``out`` is rewritten after every order, so that a run cut short keeps the orders it measured."""
    import torch
    from swizzleperf.agent.candidate import splice, target_args
    from swizzleperf.agent.spec import load_kernel
    from swizzleperf.agent.swizzles import catalog_source
    from swizzleperf.profiling.ncu import profile_launch
    kernel = kernel.resolve()
    source, (_, spec) = kernel.read_text(), load_kernel(kernel)
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for order in orders:
            path = Path(folder) / f"{order.replace(':', '_')}_{kernel.name}"
            path.write_text(splice(source, spec.rewrite_target,
                                   catalog_source(order, target_args(source, spec.rewrite_target))))
            rows.append({"order": order, **profile_launch(path, spec.kernel_name, spec.dtypes[0])})
            print(order, rows[-1]["lts__t_sector_hit_rate.pct"], flush=True)
            out.write_text(json.dumps({"device": torch.cuda.get_device_name(),
                                       "kernel": str(kernel.relative_to(ROOT)),
                                       "problem": dict(spec.problems["default"]), "meta": dict(spec.meta),
                                       "rows": rows}, indent=1))


def compare(measured_path: Path, hw: str, out: Path | None) -> str:
    """The markdown table of predictions beside the measurements, with MAE and Spearman rank."""
    from swizzleperf.agent.simulate import kernel_trace, program_order
    from swizzleperf.hwspecs import load_spec
    from swizzleperf.profiling import l2sim
    data = json.loads(measured_path.read_text())
    kernel = ROOT / data["kernel"]
    hardware = load_spec(hw)
    lines, pairs, trace = [], [], None
    for row in data["rows"]:
        spec, order, _ = program_order(kernel, row["order"], None, {})
        trace = trace or kernel_trace(kernel, spec, {}, traced=False)
        sim = l2sim.simulate(trace, order, hardware)
        hits, misses = (row["lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum"],
                        row["lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum"])
        measured = {"all": row["lts__t_sector_hit_rate.pct"] / 100, "read": hits / (hits + misses),
                    "dram_read": row["dram__bytes_read.sum"]}
        pairs.append((measured, sim))
        lines.append(f"| {row['order']} | {measured['all']:.1%} | {measured['read']:.1%} | {sim.l2_hit_rate:.1%} "
                     f"| {measured['dram_read'] / 1e9:.2f} | {sim.dram_read_bytes / 1e9:.2f} "
                     f"| {row['lts__t_sectors_srcunit_ltcfabric.sum'] * 32 / 1e9:.2f} |")
    summary = _summary(pairs)
    text = "\n".join([f"Kernel `{data['kernel']}` at {data['problem']}, meta {data['meta']}; measured on "
                      f"{data['device']} (ncu, mean of 3 launches); predicted `simulated:{hw}` "
                      f"({pairs[0][1].model}).", "",
                      "| order | ncu L2 hit (all) | ncu L2 hit (SM reads) | simulated | ncu DRAM read GB | simulated GB | fabric GB |",
                      "|---|---|---|---|---|---|---|", *lines, "", summary])
    if out:
        out.write_text(text + "\n")
    return text


def _summary(pairs: list) -> str:
    sim = np.array([s.l2_hit_rate for _, s in pairs])
    parts = []
    for key, label in (("all", "lts__t_sector_hit_rate"), ("read", "SM read lookups")):
        meas = np.array([m[key] for m, _ in pairs])
        mae = np.mean(np.abs(sim - meas)) * 100
        parts.append(f"against {label}: MAE {mae:.1f} points, Spearman {_spearman(sim, meas):.2f}")
    dram_m = np.array([m["dram_read"] for m, _ in pairs])
    dram_s = np.array([s.dram_read_bytes for _, s in pairs])
    parts.append(f"DRAM read bytes: mean relative error {np.mean(np.abs(dram_s - dram_m) / dram_m):.0%}, "
                 f"Spearman {_spearman(dram_s, dram_m):.2f}")
    return "Hit rate " + "; ".join(parts) + "."


def _spearman(a: np.ndarray, b: np.ndarray) -> float:
    rank = lambda x: np.argsort(np.argsort(x)).astype(float)
    return float(np.corrcoef(rank(a), rank(b))[0, 1])


def main() -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    m = sub.add_parser("measure")
    m.add_argument("--kernel", default=str(ROOT / "kernels" / "gemm.py"))
    m.add_argument("--orders", default=",".join(ORDERS))
    m.add_argument("--out", required=True)
    c = sub.add_parser("compare")
    c.add_argument("measured")
    c.add_argument("--hw", default="h200")
    c.add_argument("--out")
    args = parser.parse_args()
    if args.command == "measure":
        measure(Path(args.kernel), args.orders.split(","), Path(args.out))
    else:
        print(compare(Path(args.measured), args.hw, Path(args.out) if args.out else None))


if __name__ == "__main__":
    main()
