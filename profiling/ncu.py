"""NVIDIA Nsight Compute (ncu): L2 and DRAM metrics of exactly one launch of one kernel.

The kernel is selected by its exact name, the warm-up launches are skipped, and ncu replays the one
profiled launch once per metric pass with caches flushed between passes (its default
``--cache-control all``); clocks are left as the card has them (``--clock-control none``). A kernel
that is many launches per run is profiled as one NVTX range around the run (``profile_run``).
"""
from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

from swizzleperf import sandbox
from swizzleperf.profiling.profiler import WORKER, Profile, ProfilerError
from swizzleperf.sandbox import gpu_lock
from swizzleperf.sandbox.paths import absolute_paths

# shared/HARDWARE.md, "NVIDIA metrics to collect with ncu".
METRICS = (
    "gpu__time_duration.sum",
    "lts__t_sector_hit_rate.pct",
    "lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum",
    "lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum",
    "lts__t_sectors_srcunit_ltcfabric.sum",
    "dram__bytes_read.sum",
    "dram__bytes_write.sum",
    "l1tex__t_sector_hit_rate.pct",
    "launch__grid_size",
    "launch__waves_per_multiprocessor",
    "launch__shared_mem_config_size",
)
WARMUP_LAUNCHES = 2
# The L2 hit rate of one launch varies by about 2 points between launches of the same kernel
# (grouped GEMM on an H200: 76.4 % and 74.4 %, 2026-11-22): profile several and average.
PROFILED_LAUNCHES = 3
RUN_RANGE = "swizzleperf_run"  # the NVTX range of profile_run


class NcuError(ProfilerError):
    """ncu is missing, failed, or profiled nothing; the message is one line."""


def find_ncu() -> str | None:
    """Path of the ncu executable (PATH, then /usr/local/cuda/bin), or None."""
    return shutil.which("ncu") or next((p for p in ("/usr/local/cuda/bin/ncu",) if os.access(p, os.X_OK)), None)


def profile_launch(kernel_path: Path, kernel_name: str, dtype: str, timeout_s: float = 300.0) -> dict:
    """ncu metrics (name -> float, base units: bytes, ns, %) of ``kernel_name`` from the kernel
    module at ``kernel_path`` at its default problem: the mean over ``PROFILED_LAUNCHES`` launches
    after ``WARMUP_LAUNCHES`` skipped ones; ``launches`` says how many were averaged.

    Raises:
        NcuError: no ncu, a failed or timed-out run, or no launch of that name profiled.
    """
    options = ["--kernel-name", kernel_name, "--launch-skip", str(WARMUP_LAUNCHES),
               "--launch-count", str(PROFILED_LAUNCHES)]
    text = _run_ncu(kernel_path, dtype, options, {"launches": PROFILED_LAUNCHES}, timeout_s)
    return parse_csv(text, kernel_name)


def profile_run(kernel_path: Path, dtype: str, timeout_s: float = 600.0) -> dict:
    """ncu metrics of one whole run of the kernel module (every kernel launch of ``spec.launch``,
    e.g. the 383 anti-diagonal launches of kernels/smith_waterman.py) at its default problem,
    after ``WARMUP_LAUNCHES`` warm-up runs: application range replay of an NVTX range around the
    run, caches flushed once at its start, so that data one launch leaves in L2 for the next is
    seen as on a plain run. Counters are the range's totals; ``launches`` is 1 (one range).

    Raises:
        NcuError: as :func:`profile_launch`, or no range profiled.
    """
    options = ["--replay-mode", "app-range", "--nvtx", "--nvtx-include", f"{RUN_RANGE}/"]
    text = _run_ncu(kernel_path, dtype, options, {"launches": 1, "nvtx_range": RUN_RANGE}, timeout_s)
    return parse_csv(text, RUN_RANGE)


def _run_ncu(kernel_path: Path, dtype: str, options: list, request: dict, timeout_s: float) -> str:
    """Run the worker's ``run_once`` stage under ncu with ``options``; return its CSV log text."""
    ncu = find_ncu()
    if ncu is None:
        raise NcuError("ncu not found on PATH or in /usr/local/cuda/bin")
    with tempfile.TemporaryDirectory(prefix="swizzleperf-ncu-") as folder:
        folder = Path(folder)
        request = {"kernel_path": str(kernel_path), "stages": ["run_once"], "dtype": dtype,
                   "timing_problem": "default", "warmup": WARMUP_LAUNCHES, **request}
        # the worker runs in the temporary folder: its paths must not be relative to ours
        (folder / "request.json").write_text(json.dumps(absolute_paths(request)))
        log = folder / "ncu.log"
        command = [ncu, "--clock-control", "none", *options,
                   "--metrics", ",".join(METRICS), "--csv", "--page", "raw", "--print-units", "base",
                   "--log-file", str(log),
                   *sandbox.python_command("-m", WORKER, str(folder / "request.json"), str(folder / "result.json"))]
        # the worker runs the candidate: the sandbox's environment and process group, writing
        # only into the temporary folder (ncu's log, its lock file in TMPDIR); ncu talks to its
        # target over a loopback port, so the network stays
        env = sandbox.worker_env(TRITON_INTERPRET="0", TMPDIR=str(folder))
        try:
            with gpu_lock.exclusive():   # several workers on one GPU: the counters are this kernel's alone
                proc = sandbox.run(command, folder, env, timeout_s,
                                   sandbox.Limits(isolate_network=False, writable=(str(folder),), shared_memory=True))
        except subprocess.TimeoutExpired:
            raise NcuError(f"ncu did not finish within {timeout_s:.0f} s") from None
        except sandbox.Unboxed as exc:
            raise NcuError(str(exc)) from None
        text = (log.read_text() if log.exists() else "") + "\n" + proc.stdout
        if proc.returncode != 0 and '"ID"' not in text:
            raise NcuError(f"ncu exited with code {proc.returncode}: {_last_line(text + proc.stderr)}")
        if '"ID"' not in text:   # nothing profiled: the worker's own word says why
            text += "\n" + _worker_said(folder / "result.json", proc.stderr)
    return text


def _worker_said(result: Path, stderr: str) -> str:
    """One line: what the worker under ncu answered (its verdict and reason, a file it wrote: data,
    read bounded), or the last line of its stderr where it left no answer."""
    from swizzleperf.sandbox import untrusted
    try:
        answer = untrusted.loads(untrusted.read_bounded(result, 1 << 20, result.name, follow_links=False), result.name)
        verdict, reason = str(answer.get("verdict"))[:40], " ".join(str(answer.get("reason"))[:300].split())
        return f"the worker under ncu: {verdict}" + (f": {reason}" if reason else "")
    except (OSError, AttributeError, untrusted.UntrustedInput):
        return f"the worker under ncu left no answer: {_last_line(stderr) or 'no output'}"


def parse_csv(text: str, kernel_name: str) -> dict:
    """The metrics of the profiled launches from ncu's ``--csv --page raw`` output, averaged over
    the launches of ``kernel_name`` (or the ranges of that name: range replay lists a range where
    a kernel would be; other lines of the log are ignored; a units row, if any, is dropped;
    thousands separators are accepted).

    Raises:
        NcuError: no row for ``kernel_name``.
    """
    csv_lines = [line for line in text.splitlines() if line.startswith('"')]
    if not csv_lines:
        raise NcuError(f"ncu profiled no launch of {kernel_name!r}: {_last_line(text)}")
    try:
        table = pd.read_csv(io.StringIO("\n".join(csv_lines)), thousands=",", dtype=str)
    except (ValueError, pd.errors.ParserError) as exc:
        raise NcuError(f"ncu's table cannot be read: {' '.join(str(exc).split())[:200]}") from None
    if "ID" not in table.columns:
        raise NcuError(f"ncu's table has no ID column (columns {list(table.columns)[:12]})")
    table = table[pd.to_numeric(table["ID"], errors="coerce").notna()]
    column = next((c for c in ("Kernel Name", "Range Name", "Name") if c in table.columns), None)
    if column is None:
        raise NcuError(f"ncu's table has no name column (columns {list(table.columns)[:12]})")
    rows = table[table[column].astype(str).str.startswith(kernel_name)]
    for range_column in (c for c in table.columns if "Push/Pop_Range" in c and rows.empty):
        # range replay: "Kernel Name" reads "range"; the NVTX range's name is in this column
        rows = table[table[range_column].astype(str).str.contains(f":{kernel_name}:", regex=False)]
    if rows.empty:
        raise NcuError(f"ncu profiled no launch of {kernel_name!r} (saw {sorted(set(table[column]))})")
    values = {}
    for name in (m for m in METRICS if m in rows.columns):
        cells = pd.to_numeric(rows[name].astype(str).str.replace(",", ""), errors="coerce")
        if cells.isna().any() or not np.isfinite(cells).all():   # data, checked: one line, never a traceback
            raise NcuError(f"ncu's {name} of {kernel_name!r} is not a finite number: "
                           f"{str(rows[name][cells.isna() | ~np.isfinite(cells)].iloc[0])[:60]!r}")
        values[name] = float(cells.mean())
    return {**values, "launches": float(len(rows))}


def figures(raw: dict) -> dict:
    """The vendor-neutral figures (profiling/profiler.py's ``FIGURES``) of ncu's metrics ``raw``
    (:func:`profile_launch`'s dict): ms, fractions, bytes. The L2 hit rate is
    ``lts__t_sector_hit_rate.pct`` / 100 where that is a rate (<= 100 %), else the SM read lookups'
    hits / (hits + misses), else absent; cross-partition bytes are the ltcfabric sectors x 32 B."""
    get = raw.get
    hits = get("lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum")
    misses = get("lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum")
    lookups = hits + misses if hits is not None and misses is not None else None
    pct = get("lts__t_sector_hit_rate.pct")
    l2 = pct / 100.0 if pct is not None and pct <= 100.0 else (hits / lookups if lookups else None)
    reads, writes = get("dram__bytes_read.sum"), get("dram__bytes_write.sum")
    fabric = get("lts__t_sectors_srcunit_ltcfabric.sum")
    return {"time_ms": None if get("gpu__time_duration.sum") is None else raw["gpu__time_duration.sum"] / 1e6,
            "l2_hit_rate": l2, "dram_read_bytes": reads, "dram_write_bytes": writes,
            "dram_bytes": None if reads is None else reads + (writes or 0.0),
            "cross_domain_bytes": None if fabric is None else fabric * 32.0,
            "l2_requests": lookups,
            "l1_hit_rate": None if get("l1tex__t_sector_hit_rate.pct") is None
            else raw["l1tex__t_sector_hit_rate.pct"] / 100.0,
            "waves_per_cu": get("launch__waves_per_multiprocessor"), "dispatches": get("launches")}


class NcuProfiler:
    """ncu behind the ``Profiler`` protocol (profiling/profiler.py): :func:`profile_launch`, its
    metrics kept as ``ncu_metrics.json`` in the run's folder."""

    name = "ncu"

    def available(self) -> bool:
        return find_ncu() is not None

    def profile(self, kernel_path: Path, kernel_name: str, dtype: str, out_dir: Path) -> Profile:
        raw = profile_launch(Path(kernel_path), kernel_name, dtype)
        out_dir = Path(out_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "ncu_metrics.json").write_text(json.dumps(raw, indent=1))
        return Profile(figures(raw), "measured:ncu", raw, out_dir)


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:300] if lines else "(no output)"
