"""Simulator against ncu: predicted vs measured L2 hit rate and DRAM bytes over several orders.

Two steps, so that the model can be revised on a CPU against fixed measurements:

    # on the GPU machine: ncu metrics of each order (JSON)
    python -m bench.validate_simulator measure --out bench/results/ncu_orders_h200.json
    # anywhere: the simulator's predictions beside them, as a markdown table
    python -m bench.validate_simulator compare bench/results/ncu_orders_h200.json \
        --hw h200 --out bench/results/simulator_validation.md

The frozen held-out part of #43 (bench/results/simulator_holdout.json, bench/l2_measure_set.py):
a model-building step reads measured rows only through :func:`model_rows`, which drops the
held-out (kernel, order) pairs; ``compare --part build`` shows the rest, ``--part heldout`` the
held-out rows alone (the judgement), ``--part all`` (default) everything.
"""
from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
#: ``--merge together``'s window (ns): reads of a block by one SM group within it of the group's
#: lookup merge. The smallest hit-rate MAE of ``merge-scan`` on the four build orders of one H100
#: (bench/results/l2_merge_h100/call3/compare/merge_scan_build.md, 2026-12-06), the held-out orders
#: never read: about one step (32 ns) of the schedule probe's global timer.
TOGETHER_NS = 36.0
TOGETHER_SOURCE = "window chosen on the build orders, bench/results/l2_merge_h100/call3/compare/merge_scan_build.md"
ORDERS = ["row-major", "column-major", "grouped-m:4", "grouped-m:8", "grouped-m:16", "grouped-m:32",
          "grouped-m:64", "grouped-n:8", "grouped-n:16", "grouped-n:32"]


def measure(kernel: Path, orders: list, out: Path, whole_run: bool = False) -> None:
    """ncu metrics (profiling/ncu.py: 3 launches averaged; ``whole_run``: one whole run of a
    kernel that is many launches, as one range) of each order at the default problem (an order:
    see :func:`_order_source`). ``out`` is rewritten after every order, so that a run cut short
    keeps the orders it measured."""
    import torch
    from swizzleperf.agent.verification.candidate import splice
    from swizzleperf.agent.verification.load import load_kernel
    from swizzleperf.profiling.ncu import profile_launch, profile_run
    kernel = kernel.resolve()
    source, (module, spec) = kernel.read_text(), load_kernel(kernel)
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for i, order in enumerate(orders):
            path = Path(folder) / f"order{i}_{kernel.name}"
            path.write_text(splice(source, spec.rewrite_target, _order_source(order, source, module, spec)))
            metrics = (profile_run(path, spec.dtypes[0]) if whole_run
                       else profile_launch(path, spec.kernel_name, spec.dtypes[0]))
            rows.append({"order": order, **metrics})
            print(order, rows[-1]["lts__t_sector_hit_rate.pct"], flush=True)
            out.write_text(json.dumps({"device": torch.cuda.get_device_name(),
                                       "kernel": str(kernel.relative_to(ROOT)),
                                       "problem": dict(spec.problems["default"]), "meta": dict(spec.meta),
                                       "profiled": "one whole run (ncu range replay)" if whole_run
                                       else "mean of 3 launches",
                                       "rows": rows}, indent=1))


def _order_source(order: str, source: str, module, spec) -> str:
    """The rewrite-target source of an order: a catalog name, ``own`` (the kernel's own target),
    or ``source:NAME`` (an order of the kernel module's ``order_sources()``, e.g. smith_waterman's
    ``bottom-up``)."""
    from swizzleperf.agent.verification.candidate import target_args, target_source
    from swizzleperf.agent.verification.swizzles import catalog_source
    if order == "own":
        return target_source(source, spec.rewrite_target)
    if order.startswith("source:"):
        return module.order_sources()[order[len("source:"):]]
    return catalog_source(order, target_args(source, spec.rewrite_target))


class HeldOutRead(Exception):
    """A model-building step was handed a held-out row; one line."""


def _kernel_key(data: dict) -> str:
    """``gemm`` of ``kernels/gemm.py``: the kernel name the held-out file uses."""
    return Path(data["kernel"]).stem


def model_rows(data: dict, holdout: Path | None = None) -> list:
    """The rows of a measured file (``measure``'s JSON) that a model-building step may read: every
    row but the held-out pairs (bench/results/simulator_holdout.json, checked by
    bench/l2_measure_set.py's ``load_holdout``). The only door for fitting code.

    Raises:
        HeldOutRead: a row still marked ``held_out`` (bench/l2_measure_set.py marks them) after the
            filter: the file and the held-out list disagree."""
    from bench.l2_measure_set import HOLDOUT, load_holdout
    held = load_holdout(holdout or HOLDOUT)
    kernel = _kernel_key(data)
    rows = [r for r in data["rows"] if (kernel, r["order"]) not in held]
    leaked = [r["order"] for r in rows if r.get("held_out")]
    if leaked:
        raise HeldOutRead(f"{data['kernel']}: rows marked held out but not in the held-out list: {leaked}")
    return rows


def heldout_rows(data: dict, holdout: Path | None = None) -> list:
    """The held-out rows of a measured file: for judging a model, never for building one."""
    from bench.l2_measure_set import HOLDOUT, load_holdout
    held = load_holdout(holdout or HOLDOUT)
    return [r for r in data["rows"] if (_kernel_key(data), r["order"]) in held]


def compare(measured_path: Path, hw: str, out: Path | None, probe: Path | None = None,
            placements: Path | None = None, part: str = "all", schedules: Path | None = None,
            partition_map: Path | None = None, groups: Path | None = None, merge: str = "off",
            merge_window_ns: float | None = None, lockstep: bool = False) -> str:
    """The markdown table of predictions beside the measurements, with MAE and Spearman rank;
    with ``probe`` (a stored dispatch probe) the simulator places programs as it measured; with
    ``placements`` as well (bench/gemm_placement.py's output) each order's programs go where the
    kernel's own programs landed under that order, on the probe's partition map. With
    ``schedules`` (bench/gemm_schedule_probe.py's output) and ``partition_map`` (the dispatch
    probe's ``partitions`` of the same chip) each order is replayed as its programs ran
    (``l2sim.simulate_schedule``; an order without a schedule is left out, said), with ``merge``
    (``bytes``, ``sm_bytes`` or ``ns``: ``l2sim.MergeModel``'s window as the probe measured it;
    ``together``: reads within ``merge_window_ns`` of their group's lookup, default ``TOGETHER_NS``)
    on the chip's merge ``groups`` (bench/l2_merge_probe.py discover). Otherwise the simulator runs as
    ``swizzleperf simulate`` runs it: programs timed by the schedule model where it applies
    (``simulate.schedule_for``, with the measured launch's meta-parameters), else in lockstep; with
    ``lockstep``, in lockstep always (the simulator before the schedule model)."""
    data, lines, pairs, left_out = _compared(measured_path, hw, probe, placements, part, schedules, partition_map,
                                             groups, merge, merge_window_ns, lockstep)
    if isinstance(data, str):
        return data
    if not pairs:
        return f"{data['kernel']}: no order of {measured_path} has a schedule in {schedules}"
    summary = _summary(pairs) + (f" Left out (no schedule): {', '.join(left_out)}." if left_out else "")
    text = "\n".join([f"Kernel `{data['kernel']}` at {data['problem']}, meta {data['meta']}; measured on "
                      f"{data['device']} (ncu, {data.get('profiled', 'mean of 3 launches')}); predicted `simulated:{hw}` "
                      f"({pairs[0][1].model}).", "",
                      "| order | ncu L2 hit (all) | ncu L2 hit (SM reads) | simulated | ncu DRAM read GB | simulated GB "
                      "| ncu fabric GB | simulated cross-partition GB | ncu SM read lookups GB | simulated L2 read GB "
                      "| ncu SM read misses GB | simulated misses GB |",
                      "|---|---|---|---|---|---|---|---|---|---|---|---|", *lines, "", summary])
    if out:
        out.write_text(text + "\n")
    return text


def merge_scan(measured_path: Path, hw: str, schedules: Path, partition_map: Path, groups: Path,
               windows_ns: list[float], out: Path | None = None) -> str:
    """How well the build orders' replays (``compare --part build --merge together``) match ncu's SM
    read hit rate for each merge window in ``windows_ns`` (ns): a markdown table of the MAE and the
    largest error (points), the window with the smallest MAE named. Reads only the build rows
    (``model_rows``: the held-out pairs dropped), so the window it names was never chosen on them."""
    rows = []
    for window in windows_ns:
        data, _, pairs, _ = _compared(measured_path, hw, None, None, "build", schedules, partition_map, groups,
                                      "together", window)
        if isinstance(data, str) or not pairs:
            raise SystemExit(data if isinstance(data, str) else f"no build order of {measured_path} has a schedule")
        err = [abs(s.l2_hit_rate - m["read"]) * 100 for m, s in pairs]
        rows.append((window, float(np.mean(err)), max(err), len(pairs)))
    best = min(rows, key=lambda r: r[1])
    text = "\n".join([f"Merge window scan on the build orders of {measured_path.name} (replayed as they ran, "
                      f"`--merge together`), against ncu's SM read hit rate:", "",
                      "| window (ns) | MAE (points) | largest error (points) | orders |", "|---|---|---|---|",
                      *[f"| {w:g} | {mae:.2f} | {top:.2f} | {n} |" for w, mae, top, n in rows], "",
                      f"Smallest MAE: {best[0]:g} ns."])
    if out:
        out.write_text(text + "\n")
    return text


def _compared(measured_path: Path, hw: str, probe: Path | None, placements: Path | None, part: str,
              schedules: Path | None, partition_map: Path | None, groups: Path | None, merge: str,
              merge_window_ns: float | None, lockstep: bool = True):
    """``(measured file's data, table lines, (measured, SimResult) pairs, orders left out)`` for
    :func:`compare`; the data is a line of text where ``part`` leaves no row."""
    from swizzleperf.agent.verification.simulate import kernel_trace, program_order, schedule_for
    from swizzleperf.agent.verification.load import load_kernel
    from swizzleperf.hwspecs import load_spec
    from swizzleperf.profiling import dispatch_probe, l2sim
    data = json.loads(measured_path.read_text())
    if part != "all":
        data = {**data, "rows": model_rows(data) if part == "build" else heldout_rows(data)}
        if not data["rows"]:
            return f"{data['kernel']}: no {part} rows in {measured_path}", [], [], []
    kernel = ROOT / data["kernel"]
    source, (module, kernel_spec) = kernel.read_text(), load_kernel(kernel)
    hardware = load_spec(hw)
    stored = dispatch_probe.load(probe) if probe else None
    if placements and stored is None:
        raise SystemExit("--placements needs --probe (the partition map of the same GPU)")
    own = {r["order"]: r["sm_of_program"] for r in json.loads(placements.read_text())["rows"]} if placements else {}
    timed, parts_of_sm, group_of_sm, model = _schedule_inputs(schedules, partition_map, groups, merge,
                                                              merge_window_ns)
    lines, pairs, trace, left_out = [], [], None, []
    for row in data["rows"]:
        if schedules and row["order"] not in timed:
            left_out.append(row["order"])
            continue
        with tempfile.TemporaryDirectory() as folder:
            target = Path(folder) / "target.py"
            target.write_text(_order_source(row["order"], source, module, kernel_spec))
            spec, order, _ = program_order(kernel, None, target, {})
        trace = trace or kernel_trace(kernel, spec, {}, traced=False)
        if own:
            stored = {**stored, "placement": {"1": {"sm_of_program": own[row["order"]]}}}
        if schedules:
            row_schedule = timed[row["order"]]
            timed_by = f"modelled ({row_schedule['model']})" if "model" in row_schedule else "measured"
            sim = l2sim.simulate_schedule(trace, order, hardware, row_schedule, parts_of_sm, group_of_sm, model,
                                          timed_by)
        else:
            schedule = None if lockstep or own else schedule_for(spec, trace, hardware,
                                                                 {**spec.meta_for("default"), **data.get("meta", {})})
            sim = l2sim.simulate(trace, order, hardware, probe=stored, schedule=schedule)
        hits, misses = (row["lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum"],
                        row["lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum"])
        measured = {"all": row["lts__t_sector_hit_rate.pct"] / 100, "read": hits / (hits + misses),
                    "dram_read": row["dram__bytes_read.sum"], "lookup_bytes": (hits + misses) * hardware.l2_sector_bytes,
                    "miss_bytes": misses * hardware.l2_sector_bytes}
        pairs.append((measured, sim))
        lines.append(f"| {row['order']} | {measured['all']:.1%} | {measured['read']:.1%} | {sim.l2_hit_rate:.1%} "
                     f"| {measured['dram_read'] / 1e9:.2f} | {sim.dram_read_bytes / 1e9:.2f} "
                     f"| {row['lts__t_sectors_srcunit_ltcfabric.sum'] * 32 / 1e9:.2f} "
                     f"| {sim.cross_domain_bytes / 1e9:.2f} "
                     f"| {measured['lookup_bytes'] / 1e9:.2f} | {sim.l2_read_bytes / 1e9:.2f} "
                     f"| {measured['miss_bytes'] / 1e9:.2f} | {(sim.l2_read_bytes - sim.l2_hit_bytes) / 1e9:.2f} |")
    return data, lines, pairs, left_out


def _schedule_inputs(schedules: Path | None, partition_map: Path | None, groups: Path | None, merge: str,
                     merge_window_ns: float | None = None):
    """``(schedule per order, partition of each SM, merge group of each SM, MergeModel or None)``
    from the files ``compare`` takes (``({}, None, None, None)`` without ``schedules``)."""
    import gzip

    from swizzleperf.profiling import l2sim
    if schedules is None:
        return {}, None, None, None
    if partition_map is None:
        raise SystemExit("--schedules needs --partition-map (the dispatch probe's partitions of the same chip)")
    opened = gzip.open if str(schedules).endswith(".gz") else open
    with opened(schedules, "rt") as f:
        timed = {r["order"]: r for r in json.load(f)["orders"] if "error" not in r}
    parts = json.loads(Path(partition_map).read_text())["partition_of_sm"]
    group_of_sm = None
    if groups is not None:
        found = json.loads(Path(groups).read_text())
        group_of_sm = [-1] * len(parts)
        for g, members in enumerate(found["groups"]):
            for sm in members:
                group_of_sm[sm] = g
        n = len(found["groups"])
        group_of_sm = [g if g >= 0 else n + i for i, g in enumerate(group_of_sm)]   # unmeasured: alone
    if merge != "off" and group_of_sm is None:
        raise SystemExit("--merge needs --groups (bench/l2_merge_probe.py discover of the same chip)")
    model = None
    if merge == "bytes":
        model = l2sim.MergeModel()
    elif merge == "ns":   # the probe's TMA cases: the share not merged about lag / 88 000 SM cycles (1.98 GHz)
        model = l2sim.MergeModel(window=88_000 / 1.98, window_unit="ns",
                                 source="bench/results/l2_merge_h100/call3 (H100, TMA, 2026-12-06)")
    elif merge == "sm_bytes":   # the TMA cases: not merged about lag / 0.98 MiB of the looking-up SM's reads
        model = l2sim.MergeModel(window=0.98 * 2**20, window_unit="sm_bytes",
                                 source="bench/results/l2_merge_h100/call3 (H100, TMA, 2026-12-06)")
    elif merge == "together":
        model = l2sim.MergeModel(window=TOGETHER_NS if merge_window_ns is None else merge_window_ns,
                                 window_unit="ns", falloff="none", source=TOGETHER_SOURCE)
    return timed, parts, group_of_sm, model


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
    # misses as a share of the reads the model issues to the L2: a read merged with one already on
    # its way (not looked up, so neither a hit nor a miss to ncu) moves ncu's hit rate, not its misses
    reads = np.array([s.l2_read_bytes for _, s in pairs], dtype=float)
    miss_s = reads - np.array([s.l2_hit_bytes for _, s in pairs], dtype=float)
    miss_m = np.array([m["miss_bytes"] for m, _ in pairs])
    share = np.where(reads > 0, np.abs(miss_s - miss_m) / np.maximum(reads, 1), 0.0) * 100
    looked = np.array([m["lookup_bytes"] for m, _ in pairs]) / np.maximum(reads, 1)
    parts.append(f"SM read misses: MAE {np.mean(share):.1f} points of the simulated L2 reads, "
                 f"Spearman {_spearman(miss_s, miss_m):.2f}; ncu looked up {looked.min():.0%}-{looked.max():.0%} "
                 f"of the simulated L2 read bytes")
    return "Hit rate " + "; ".join(parts) + "."


def _spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman's rank correlation of ``a`` and ``b`` (ties ranked by position); NaN, without numpy's
    warnings, for fewer than two pairs, where it is undefined."""
    if len(a) < 2:
        return float("nan")
    rank = lambda x: np.argsort(np.argsort(x)).astype(float)
    return float(np.corrcoef(rank(a), rank(b))[0, 1])


def main() -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    m = sub.add_parser("measure")
    m.add_argument("--kernel", default=str(ROOT / "kernels" / "gemm.py"))
    m.add_argument("--orders", default=",".join(ORDERS))
    m.add_argument("--out", required=True)
    m.add_argument("--whole-run", action="store_true",
                   help="profile one whole run as an NVTX range (kernels of many launches per run)")
    c = sub.add_parser("compare")
    c.add_argument("measured")
    c.add_argument("--hw", default="h200")
    c.add_argument("--out")
    c.add_argument("--probe", help="a stored dispatch probe (swizzleperf hw --probe) of the measured GPU")
    c.add_argument("--placements", help="the kernel's own placement per order (bench/gemm_placement.py)")
    c.add_argument("--part", choices=("all", "build", "heldout"), default="all",
                   help="build: without the held-out pairs (bench/results/simulator_holdout.json); heldout: only them")
    c.add_argument("--schedules", help="bench/gemm_schedule_probe.py's output: replay each order as it ran")
    c.add_argument("--partition-map", help="the dispatch probe's partitions of the chip the schedules ran on")
    c.add_argument("--groups", help="bench/l2_merge_probe.py discover's groups of that chip")
    c.add_argument("--merge", choices=("off", "bytes", "sm_bytes", "ns", "together"), default="off",
                   help="merge reads within SM groups (l2sim.MergeModel): the probe's window in bytes or ns, "
                        "or 'together': reads within --merge-window ns of their group's lookup")
    c.add_argument("--merge-window", type=float, help=f"ns, for --merge together (default {TOGETHER_NS:g})")
    c.add_argument("--lockstep", action="store_true",
                   help="programs in lockstep always (the simulator before profiling/schedule_model.py); by default "
                        "as `swizzleperf simulate` runs: a tl.dot kernel's programs timed by the schedule model")
    s = sub.add_parser("merge-scan", help="the build orders' hit-rate error per --merge together window")
    s.add_argument("measured")
    s.add_argument("--hw", default="h100")
    s.add_argument("--schedules", required=True)
    s.add_argument("--partition-map", required=True)
    s.add_argument("--groups", required=True)
    s.add_argument("--windows", default="0,16,24,32,36,40,48,64,100", help="ns, comma-separated")
    s.add_argument("--out")
    args = parser.parse_args()
    if args.command == "measure":
        measure(Path(args.kernel), args.orders.split(","), Path(args.out), args.whole_run)
    elif args.command == "merge-scan":
        print(merge_scan(Path(args.measured), args.hw, Path(args.schedules), Path(args.partition_map),
                         Path(args.groups), [float(w) for w in args.windows.split(",")],
                         Path(args.out) if args.out else None))
    else:
        print(compare(Path(args.measured), args.hw, Path(args.out) if args.out else None,
                      Path(args.probe) if args.probe else None,
                      Path(args.placements) if args.placements else None, args.part,
                      Path(args.schedules) if args.schedules else None,
                      Path(args.partition_map) if args.partition_map else None,
                      Path(args.groups) if args.groups else None, args.merge, args.merge_window, args.lockstep))


if __name__ == "__main__":
    main()
