"""Every example user kernel optimized on a GPU through ``--app`` (issue #24), the simulator against
ncu on each, and the measured speedup: one table.

Run on a GPU machine by bench/gpu_user_kernels.sh (which installs the project first):

    python3 -m bench.gpu_user_kernels OUTDIR [--iterations 1] [--budget-s 280] [--examples a,b,...]
    python3 -m bench.gpu_user_kernels OUTDIR --merge RUN.json [RUN.json ...]   # one table of several runs

``--merge`` (no GPU): the payloads of several runs of this script on one kind of GPU (each its own
``user_kernels_<gpu>.json``, or an earlier merged file) become one ``user_kernels_<gpu>.{json,md}``
in OUTDIR: every run kept in the JSON, the table from each example's latest run that reached it
(a run whose share of the budget ran out before it counts only where no other run has it).

Phase 1 (the GPUs): for each example of ``EXAMPLES``, in that order, ``swizzleperf optimize --app
"python3 examples/user_kernels/<name>/app.py --large" --kernel <kernel> --iterations N`` in a
workdir of its own, one example per visible GPU at a time (each with its own TMPDIR: ncu serialises
its instances through a lock there). The run measures the baseline and every candidate (do_bench
medians, L2 flushed, interleaved) and profiles them with ncu. The persistent and stream-K examples
run at their small size: they end in their one-line refusal. Every run is bounded by what is left
of ``--budget-s``; an example not reached is listed as such.

Phase 2 (CPU only, after the GPUs are done, in parallel): per optimized example, the simulator on
the run's own trace of the captured launch (reuse per L2 sector of the detected GPU), for the
baseline's order and the best one: the L2 *read* hit rate (what the simulator models; ncu's
``lts__t_sectors_srcunit_tex_op_read_lookup_hit / (hit + miss)``) and the rate with the stores
counted as hits (each written sector once: ncu's ``lts__t_sector_hit_rate.pct`` counts a store,
which allocates in L2, as a hit). Both ncu figures come from the run's record.

The runs and captures go to ``--work`` (captures hold the tensors: not OUTDIR). Written to OUTDIR:
``user_kernels_<gpu>.json`` (every figure), ``user_kernels_<gpu>.md`` (the
table, with the command), ``user_kernels_<gpu>_runs.tar.gz`` (each example's log, report.json,
report.md and user.diff).
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import sqlite3
import subprocess
import sys
import tarfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = [   # (folder, kernel, app arguments): the simulator's misses of #24 first, refusals last
    ("transpose_2d", "transpose_kernel", "--large"),
    ("stencil_2d", "jacobi_step_kernel", "--large"),
    ("tutorial_gemm", "matmul_kernel", "--large"),
    ("cross_entropy", "cross_entropy_fwd_kernel", "--large"),
    ("csr_spmv", "csr_spmv_kernel", "--large"),
    ("batched_gemm_3d", "bmm_kernel", "--large"),
    ("grouped_gemm_2d", "linear_kernel", "--large"),
    ("row_norm", "rms_norm_fwd_kernel", "--large"),
    ("attention_fwd", "attention_fwd_kernel", "--large"),
    ("softmax", "softmax_kernel", ""),
    ("persistent_streamk_gemm", "matmul_streamk_kernel", ""),
]
RESERVE_S = 45        # kept back from phase 1 for the simulator, the table and the archive
MIN_RUN_S = 40        # an example is not started with less than this left


def main(argv: list | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("outdir", type=Path)
    parser.add_argument("--iterations", type=int, default=1)
    parser.add_argument("--budget-s", type=float, default=280.0, help="seconds for both phases")
    parser.add_argument("--examples", default="", help="comma-separated folder names (default: all)")
    parser.add_argument("--small", action="store_true",
                        help="the apps' tiny problems (a dry run of this script on a CPU, interpreted)")
    parser.add_argument("--work", type=Path, default=Path("/tmp/swizzleperf_user_kernels"),
                        help="where the runs and captures go (not OUTDIR: captures hold the tensors)")
    parser.add_argument("--merge", nargs="+", type=Path, metavar="RUN_JSON",
                        help="no GPU: one table of these runs' payloads (module docstring)")
    args = parser.parse_args(argv)
    if args.merge:
        return _merge(args.outdir, args.merge)
    start = time.monotonic()
    chosen = [(name, kernel, "" if args.small else app_args) for name, kernel, app_args in EXAMPLES
              if not args.examples or name in args.examples.split(",")]
    args.outdir.mkdir(parents=True, exist_ok=True)
    work = args.work
    gpus = _gpus()
    results = _optimize_all(chosen, work, args.iterations, gpus, start + args.budget_s - RESERVE_S)
    deadline = start + args.budget_s - 10
    with ProcessPoolExecutor(max_workers=min(8, os.cpu_count() or 1)) as pool:
        futures = {r["example"]: pool.submit(_simulate, r, deadline) for r in results if r.get("run_dir")}
        for r in results:
            if r["example"] in futures:
                try:
                    r["simulated"] = futures[r["example"]].result(timeout=max(1.0, deadline - time.monotonic()))
                except Exception as exc:   # noqa: BLE001 -- one example's failure is its row's note
                    r["simulated"] = {"error": f"{type(exc).__name__}: {exc}"}
    gpu = _gpu_name()
    command = f"bash bench/gpu_user_kernels.sh OUTDIR  # = python3 -m bench.gpu_user_kernels OUTDIR --iterations {args.iterations} --budget-s {args.budget_s:.0f}"
    payload = {"gpu": gpu, "gpus": len(gpus), "command": command, "wall_s": time.monotonic() - start,
               "iterations": args.iterations, "examples": results}
    (args.outdir / f"user_kernels_{gpu}.json").write_text(json.dumps(payload, indent=1, default=str))
    (args.outdir / f"user_kernels_{gpu}.md").write_text(render(payload))
    _archive(results, work, args.outdir / f"user_kernels_{gpu}_runs.tar.gz")
    print(render(payload))
    return 0


def _gpus() -> list:
    import torch
    return list(range(torch.cuda.device_count())) or [None]


def _gpu_name() -> str:
    import torch
    if not torch.cuda.is_available():
        return "cpu"
    words = torch.cuda.get_device_name().lower().split()
    return next((w for w in words if w.startswith(("h100", "h200", "a100", "b200"))), words[-1])


def _optimize_all(chosen: list, work: Path, iterations: int, gpus: list, deadline: float) -> list:
    """Phase 1: one ``optimize --app`` per example, one per GPU at a time, each bounded by the
    deadline; the rows in EXAMPLES' order."""
    pending, running, done = list(chosen), {}, {}
    while pending or running:
        for gpu in [g for g in gpus if g not in running]:
            if not pending:
                break
            left = deadline - time.monotonic()
            if left < MIN_RUN_S:
                for name, kernel, _ in pending:
                    done[name] = {"example": name, "kernel": kernel, "status": "not run",
                                  "reason": f"{left:.0f} s of the budget left"}
                pending = []
                break
            running[gpu] = _start(*pending.pop(0), work, iterations, gpu, left)
        for gpu, job in list(running.items()):
            if job["proc"].poll() is not None:
                done[job["example"]] = _finish(job)
                del running[gpu]
        time.sleep(1.0)
    return [done[name] for name, _, _ in chosen if name in done]


def _start(name: str, kernel: str, app_args: str, work: Path, iterations: int, gpu, left: float) -> dict:
    folder = work / name
    folder.mkdir(parents=True, exist_ok=True)
    app = f"python3 {ROOT / 'examples' / 'user_kernels' / name / 'app.py'} {app_args}".strip()
    command = [sys.executable, "-m", "swizzleperf.agent.cli", "optimize", "--app", app, "--kernel", kernel,
               "--iterations", str(iterations), "--workdir", str(folder / ".swizzleperf")]
    env = dict(os.environ, TMPDIR=str(folder / "tmp"))
    (folder / "tmp").mkdir(exist_ok=True)
    if gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = str(gpu)
    log = open(folder / "optimize.log", "w")
    proc = subprocess.Popen(["timeout", "-k", "20", str(int(left)), *command], cwd=folder, env=env,
                            stdout=log, stderr=subprocess.STDOUT)
    print(f"[{time.strftime('%H:%M:%S')}] {name}: started on GPU {gpu} (limit {left:.0f} s)", flush=True)
    return {"example": name, "kernel": kernel, "app": app, "proc": proc, "log": log, "folder": folder,
            "started": time.monotonic(), "gpu": gpu,
            "command": "swizzleperf " + shlex.join(command[3:]).replace(f"{ROOT}/", "").replace(f"{work}/", "WORK/")}


def _finish(job: dict) -> dict:
    job["log"].close()
    folder, code = job["folder"], job["proc"].returncode
    row = {"example": job["example"], "kernel": job["kernel"], "app": job["app"], "gpu": job["gpu"],
           "command": job["command"], "exit_code": code,
           "wall_s": round(time.monotonic() - job["started"], 1), "log": str(folder / "optimize.log")}
    text = (folder / "optimize.log").read_text(errors="replace")
    reports = sorted((folder / ".swizzleperf" / "runs").glob("*/report.json"))
    if code == 124:
        row.update(status="timed out", reason=f"stopped at its limit after {row['wall_s']} s")
    if not reports:
        row.setdefault("status", "refused" if code != 0 else "no run")
        row["reason"] = row.get("reason") or _last_line(text)
        print(f"  {job['example']}: {row['status']}: {row['reason']}", flush=True)
        return row
    report = json.loads(reports[-1].read_text())
    row.update(status=row.get("status", "optimized"), run_dir=str(reports[-1].parent), report=_figures(report))
    row["record"] = _record_metrics(folder / ".swizzleperf" / "swizzleperf.db", report["run_id"])
    print(f"  {job['example']}: {row['status']} in {row['wall_s']} s", flush=True)
    return row


def _last_line(text: str) -> str:
    lines = [l.strip() for l in text.splitlines() if l.strip()]
    return lines[-1][:300] if lines else "(no output)"


def _figures(report: dict) -> dict:
    """What the table needs of report.json."""
    best, base = report.get("best") or {}, report.get("baseline") or {}
    user = report.get("user_kernel") or {}
    return {"hardware": report.get("hardware"), "mode": report.get("mode"), "stop_reason": report.get("stop_reason"),
            "baseline": {k: base.get(k) for k in ("verdict", "l2_hit_rate", "source", "time_ms", "time_spread_ms",
                                                  "time_source", "predicted_l2_hit_rate")},
            "best": {k: best.get(k) for k in ("name", "kind", "verdict", "l2_hit_rate", "time_ms", "time_spread_ms",
                                              "speedup_vs_baseline", "beyond_noise_vs_baseline", "swizzle_source")},
            "attempts": [{k: a.get(k) for k in ("name", "verdict", "l2_hit_rate", "time_ms")}
                         for a in report.get("attempts", [])],
            "captured": user.get("captured"), "rewrite": user.get("rewrite"), "notes": user.get("lift_notes")}


def _record_metrics(db: Path, run_id: str) -> dict:
    """ncu's two L2 rates (all sectors; SM read lookups) and DRAM bytes of the baseline and the best,
    from the run's record."""
    out = {}
    with sqlite3.connect(db) as con:
        rows = con.execute("SELECT kind, iteration, is_best, metrics_json FROM iterations WHERE run_id = ?",
                           (run_id,)).fetchall()
    for kind, iteration, is_best, metrics_json in rows:
        metrics = json.loads(metrics_json or "{}")
        figures = {"ncu_all": metrics.get("l2_hit_rate") if metrics.get("l2_source", "").startswith("measured") else None,
                   "ncu_read": metrics.get("l2_read_hit_rate"), "dram_bytes": metrics.get("dram_bytes"),
                   "predicted_read": metrics.get("predicted_l2_hit_rate")}
        if kind == "baseline":
            out["baseline"] = figures
        if is_best:
            out["best"] = figures
    return out


def _simulate(row: dict, deadline: float) -> dict:
    """Phase 2 for one example: the simulator's read and all-sector rates, baseline and best order."""
    import numpy as np

    from swizzleperf import hwspecs
    from swizzleperf.agent.capture import capture  # noqa: F401  load_spec builds a generated module's spec with it
    from swizzleperf.agent.capture.lift import target_order
    from swizzleperf.agent.verification.simulate import kernel_trace
    from swizzleperf.agent.verification.load import load_spec
    from swizzleperf.profiling import l2sim
    if time.monotonic() > deadline:
        return {"error": "no time left"}
    module = next(Path(row["run_dir"]).parents[1].glob("captures/*/lift.json")).parent
    lift = json.loads((module / "lift.json").read_text())
    spec = load_spec(module / Path(lift["user_file"]).name)
    hardware = hwspecs.load_spec(row["report"]["hardware"])
    trace = kernel_trace(Path(spec.source_path), spec, {}, traced=False, hardware=hardware)
    programs, grid = trace.num_tiles, tuple(lift["tile_grid"])
    original = (module / f"lifted_{Path(lift['user_file']).name}").read_text()
    from swizzleperf.agent.verification.candidate import target_source
    orders = {"baseline": target_source(original, lift["target_name"])}
    best = row["report"]["best"]
    if best.get("kind") == "candidate" and best.get("swizzle_source"):
        orders["best"] = best["swizzle_source"]
    out = {"trace_source": trace.source, "granule_bytes": hardware.l2_sector_bytes}
    for label, source in orders.items():
        tiles = target_order(source, tuple(lift["arg_values"]), programs)
        result = l2sim.simulate(trace, l2sim.order_from_tiles(tiles, grid), hardware)
        written = float(result.dram_write_bytes)
        out[label] = {"read": result.l2_hit_rate,
                      "all": (result.l2_hit_bytes + written) / (result.l2_read_bytes + written)
                      if result.l2_read_bytes + written else None,
                      "dram_bytes": float(result.dram_read_bytes + result.dram_write_bytes),
                      "source": result.source}
    out["tiles"] = int(np.prod(grid))
    return out


def _pct(value) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


def render(payload: dict) -> str:
    """The results page (Markdown)."""
    lines = [f"# The example user kernels optimized through --app on {payload['gpu'].upper()} (issue #24)", "",
             f"Command{'s, one run after another' if len(payload.get('runs', [])) > 1 else ''}: "
             f"`{payload['command']}`; {payload['gpus']} GPU(s), {payload['wall_s']:.0f} s wall. "
             f"Times: the run's own measurement (do_bench medians, L2 flushed, baseline and candidates "
             f"interleaved; `measured:events`), with the spread. L2 hit rates: ncu of exactly the kernel "
             f"(`all` = `lts__t_sector_hit_rate.pct`, a store counts as a hit; `read` = the SMs' L2 read "
             f"lookups), against the simulator (`simulated:<gpu>`, reuse per 32 B sector; `all` counts each "
             f"written sector as a hit, as ncu does) at the captured launch, baseline order.", "",
             "| example | kernel | rewrite | result | baseline ms | best order | best ms | speedup (measured) "
             "| ncu all | sim all | ncu read | sim read | best: ncu read / sim read | trace | wall s |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in payload["examples"]:
        if not r.get("report"):
            lines.append(f"| {r['example']} | {r['kernel']} | | {r['status']}: {r.get('reason', '')} "
                         f"| | | | | | | | | | | {r.get('wall_s', '')} |")
            continue
        rep, rec, sim = r["report"], r.get("record", {}), r.get("simulated", {})
        base, best = rep["baseline"], rep["best"]
        speed = best.get("speedup_vs_baseline")
        speed_text = "n/a" if speed is None else (f"{speed:.3f}x" + ("" if best.get("beyond_noise_vs_baseline")
                                                                    else " (within noise)"))
        spread = f" ± {base['time_spread_ms']:.3f}" if base.get("time_spread_ms") else ""
        trace = "error: " + sim["error"] if "error" in sim else (
            "no access model" if "no access model" in sim.get("trace_source", "") else "traced")
        sb, sbest = sim.get("baseline", {}), sim.get("best", {})
        if trace != "traced":   # a trace without reuse predicts nothing worth a column
            sb, sbest = {}, {}
        lines.append(
            f"| {r['example']} | {r['kernel']} | {rep.get('rewrite') or ''} | {r['status']} "
            f"| {_ms(base.get('time_ms'))}{spread} | {best.get('name') or ''} | {_ms(best.get('time_ms'))} "
            f"| {speed_text} | {_pct(rec.get('baseline', {}).get('ncu_all'))} | {_pct(sb.get('all'))} "
            f"| {_pct(rec.get('baseline', {}).get('ncu_read'))} | {_pct(sb.get('read'))} "
            f"| {_pct(rec.get('best', {}).get('ncu_read'))} / {_pct(sbest.get('read', sb.get('read')))} "
            f"| {trace} | {r['wall_s']} |")
    lines += ["", "`n/a` under sim: the tracer could not fit the kernel's accesses (data-dependent addresses), so "
              "the simulator has no reuse to predict. Commands, per example (WORK: the script's --work folder):", ""]
    lines += [f"- {r['example']}: `{r.get('command', '')}`" for r in payload["examples"]]
    return "\n".join(lines) + "\n"


def merged(payloads: list) -> dict:
    """One payload of several (each a run's, or a merged one with ``runs``): ``runs`` holds every
    run in order; ``examples`` each example's row from the latest run that finished it, else from
    the latest run that has it at all; ``command``, ``gpus`` and ``wall_s`` say how many runs.

    Raises:
        ValueError: the runs were made on different kinds of GPU."""
    runs = [run for p in payloads for run in (p["runs"] if "runs" in p else [p])]
    kinds = {run["gpu"] for run in runs}
    if len(kinds) != 1:
        raise ValueError(f"the runs are of different GPUs ({', '.join(sorted(kinds))}): merge one kind at a time")
    rows = {}
    for run in runs:
        for row in run["examples"]:
            old = rows.get(row["example"])
            if old is None or row.get("report") or not old.get("report"):
                rows[row["example"]] = row
    order = [name for name, _, _ in EXAMPLES] + sorted(set(rows) - {name for name, _, _ in EXAMPLES})
    return {"gpu": kinds.pop(), "gpus": max(run["gpus"] for run in runs),
            "command": "`; then `".join(run["command"] for run in runs),
            "wall_s": sum(run["wall_s"] for run in runs), "iterations": max(run["iterations"] for run in runs),
            "examples": [rows[name] for name in order if name in rows], "runs": runs}


def _merge(outdir: Path, files: list) -> int:
    try:
        payload = merged([json.loads(Path(f).read_text()) for f in files])
    except (OSError, ValueError, KeyError) as exc:
        print(f"error: cannot merge {', '.join(map(str, files))}: {exc}", file=sys.stderr)
        return 2
    outdir.mkdir(parents=True, exist_ok=True)
    (outdir / f"user_kernels_{payload['gpu']}.json").write_text(json.dumps(payload, indent=1, default=str))
    (outdir / f"user_kernels_{payload['gpu']}.md").write_text(render(payload))
    print(f"{len(payload['examples'])} examples from {len(payload['runs'])} runs: "
          f"{outdir / ('user_kernels_' + payload['gpu'] + '.md')}")
    return 0


def _ms(value) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def _archive(results: list, work: Path, path: Path) -> None:
    """Each example's log, report.json, report.md and user.diff in one archive."""
    with tarfile.open(path, "w:gz") as tar:
        for r in results:
            folder = work / r["example"]
            if (folder / "optimize.log").exists():
                tar.add(folder / "optimize.log", arcname=f"{r['example']}/optimize.log")
            if r.get("run_dir"):
                for name in ("report.json", "report.md", "user.diff"):
                    if (Path(r["run_dir"]) / name).exists():
                        tar.add(Path(r["run_dir"]) / name, arcname=f"{r['example']}/{name}")


if __name__ == "__main__":
    sys.exit(main())
