"""NVIDIA Nsight Compute (ncu): L2 and DRAM metrics of exactly one launch of one kernel.

The kernel is selected by its exact name, the warm-up launches are skipped, and ncu replays the one
profiled launch once per metric pass with caches flushed between passes (its default
``--cache-control all``); clocks are left as the card has them (``--clock-control none``).
"""
from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd

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
)
WARMUP_LAUNCHES = 2
# The L2 hit rate of one launch varies by about 2 points between launches of the same kernel
# (grouped GEMM on an H200: 76.4 % and 74.4 %, 2026-11-22): profile several and average.
PROFILED_LAUNCHES = 3


class NcuError(RuntimeError):
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
    ncu = find_ncu()
    if ncu is None:
        raise NcuError("ncu not found on PATH or in /usr/local/cuda/bin")
    with tempfile.TemporaryDirectory(prefix="swizzleperf-ncu-") as folder:
        folder = Path(folder)
        request = {"kernel_path": str(kernel_path), "stages": ["run_once"], "dtype": dtype,
                   "timing_problem": "default", "warmup": WARMUP_LAUNCHES,
                   "launches": PROFILED_LAUNCHES}
        (folder / "request.json").write_text(json.dumps(request))
        log = folder / "ncu.log"
        command = [ncu, "--clock-control", "none", "--kernel-name", kernel_name,
                   "--launch-skip", str(WARMUP_LAUNCHES), "--launch-count", str(PROFILED_LAUNCHES),
                   "--metrics", ",".join(METRICS), "--csv", "--page", "raw", "--print-units", "base",
                   "--log-file", str(log), sys.executable, "-m", "swizzleperf.agent.worker",
                   str(folder / "request.json"), str(folder / "result.json")]
        env = dict(os.environ, TRITON_INTERPRET="0")
        try:
            proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, env=env)
        except subprocess.TimeoutExpired:
            raise NcuError(f"ncu did not finish within {timeout_s:.0f} s") from None
        text = (log.read_text() if log.exists() else "") + "\n" + proc.stdout
        if proc.returncode != 0 and '"ID"' not in text:
            raise NcuError(f"ncu exited with code {proc.returncode}: {_last_line(text + proc.stderr)}")
    return parse_csv(text, kernel_name)


def parse_csv(text: str, kernel_name: str) -> dict:
    """The metrics of the profiled launches from ncu's ``--csv --page raw`` output, averaged over
    the launches of ``kernel_name`` (other lines of the log are ignored; a units row, if any, is
    dropped; thousands separators are accepted).

    Raises:
        NcuError: no row for ``kernel_name``.
    """
    csv_lines = [line for line in text.splitlines() if line.startswith('"')]
    if not csv_lines:
        raise NcuError(f"ncu profiled no launch of {kernel_name!r}: {_last_line(text)}")
    table = pd.read_csv(io.StringIO("\n".join(csv_lines)), thousands=",", dtype=str)
    table = table[pd.to_numeric(table["ID"], errors="coerce").notna()]
    rows = table[table["Kernel Name"].astype(str).str.startswith(kernel_name)]
    if rows.empty:
        raise NcuError(f"ncu profiled no launch of {kernel_name!r} (saw {sorted(set(table['Kernel Name']))})")
    values = {name: float(rows[name].astype(str).str.replace(",", "").astype(float).mean())
              for name in METRICS if name in rows.columns}
    return {**values, "launches": float(len(rows))}


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:300] if lines else "(no output)"
