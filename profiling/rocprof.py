"""AMD profiles: rocprofv3 (ROCprofiler-SDK) and rocprof-compute, read into the filtered profile.

rocprofv3 runs the worker's ``run_once`` stage (``WARMUP_DISPATCHES`` warm-up dispatches, then
``PROFILED_DISPATCHES`` profiled ones) once per counter pass::

    rocprofv3 --pmc TCC_HIT_sum TCC_MISS_sum TCC_REQ_sum --kernel-include-regex '^matmul_kernel$'
              --kernel-trace --output-format csv -d RUN/pass_1 -o run -- python -m swizzleperf.agent.verification.worker ...

and writes ``RUN/pass_N/run_counter_collection.csv`` (one row per dispatch and counter) and
``run_kernel_trace.csv`` (one row per dispatch, start and end in ns); since ROCm 7 its default
output is instead a rocpd SQLite database (``*_results.db``), read here through the views its
schema defines (``kernels``, ``pmc_events``), never the uuid-suffixed tables. The older per-pass
layout (one row per dispatch, one column per counter, as rocprof v1/v2 and rocprof-compute's
``pmc_perf.csv`` write it) is read too.

What is derived (ROCm Compute Profiler docs, L2 cache (TCC), gfx942 formulas; shared/HARDWARE.md):

- L2 hit rate = TCC_HIT_sum / (TCC_HIT_sum + TCC_MISS_sum); TCC_HIT + TCC_MISS = TCC_REQ is checked.
- per-XCD hit rates from the per-channel instances TCC_HIT[c] / TCC_MISS[c]: channel c belongs to
  XCD c // ``CHANNELS_PER_XCD``.
- bytes the L2 read over the fabric = 128 x TCC_BUBBLE (128 B requests) + 64 x the other 64 B
  requests + 32 x TCC_EA0_RDREQ_32B; written = 64 x TCC_EA0_WRREQ_64B + 32 x the 32 B rest.
- Infinity Cache (MALL) hit rate from MALL_HIT_REQUESTS* / MALL_ALL_REQUESTS* where the output has
  them. They are data-fabric counters that public ROCm does not expose and that hang an MI300X
  without privileged CP queues: never requested here, only read.
- the dispatch duration from the kernel trace (End_Timestamp - Start_Timestamp, ns).
"""
from __future__ import annotations

import json
import re
import shutil
import sqlite3
import subprocess
import tempfile
from pathlib import Path

import pandas as pd

from swizzleperf.profiling.profiler import WORKER, Profile, ProfilerError

WARMUP_DISPATCHES = 2
PROFILED_DISPATCHES = 3
#: The counters of every rocprofv3 profile (all TCC: split into passes of TCC_PER_PASS events).
CORE_COUNTERS = ("TCC_HIT_sum", "TCC_MISS_sum", "TCC_REQ_sum", "TCC_EA0_RDREQ_sum",
                 "TCC_EA0_RDREQ_32B_sum", "TCC_BUBBLE_sum", "TCC_EA0_WRREQ_sum", "TCC_EA0_WRREQ_64B_sum")
#: Hardware events one pass can count per block (rocprof-compute's MI300X passes: 4 TCC events
#: each, tests/workloads/ipblocks_TCC/MI300X_A1/log.txt); instances of one event ([c]) and its
#: ``_sum`` share one event.
EVENTS_PER_PASS = {"TCC": 4, "TCP": 4, "TA": 2, "TD": 2, "SQ": 8, "GRBM": 2, "SPI": 2, "CPC": 2, "CPF": 2}
DEFAULT_EVENTS_PER_PASS = 2
#: L2 channels per XCD on MI300X / MI325X / MI355X: 16 (AMD CDNA 3 white paper, 2023: 4 MB, 16
#: channels; rocprof-compute's sysinfo.csv of an MI300X: total_l2_chan 128 over num_xcd 8).
CHANNELS_PER_XCD = 16
SOURCE = "measured:rocprofv3"

_COUNTER = re.compile(r"^[A-Z][A-Z0-9]*(_[A-Z0-9]+)+(_sum)?(\[\d+\])?$")
_CHANNEL = re.compile(r"^(TCC_HIT|TCC_MISS)\[(\d+)\]$")
_NOT_COUNTERS = {"GPU_ID"}


def find_tool(name: str) -> str | None:
    """Path of a ROCm tool (PATH, then /opt/rocm/bin), or None."""
    candidate = Path("/opt/rocm/bin") / name
    return shutil.which(name) or (str(candidate) if candidate.is_file() else None)


# ----------------------------------------------------------------------------- counter passes


def event_of(counter: str) -> tuple:
    """``(block, event)`` a counter occupies: ``"TCC_HIT[3]"`` and ``"TCC_HIT_sum"`` -> ``("TCC", "TCC_HIT")``."""
    event = re.sub(r"(_sum)?(\[\d+\])?$", "", counter)
    return event.split("_", 1)[0], event


def split_passes(counters, limits: dict | None = None) -> list[list[str]]:
    """Counters grouped into passes that each fit the hardware: at most ``limits[block]`` distinct
    events of one block per pass (``EVENTS_PER_PASS``), first fit, order kept."""
    limits = limits or EVENTS_PER_PASS
    passes: list[list[str]] = []
    events: list[dict] = []  # per pass: block -> set of events
    for counter in counters:
        block, event = event_of(counter)
        limit = limits.get(block, DEFAULT_EVENTS_PER_PASS)
        for i, used in enumerate(events):
            taken = used.setdefault(block, set())
            if event in taken or len(taken) < limit:
                taken.add(event)
                passes[i].append(counter)
                break
        else:
            passes.append([counter])
            events.append({block: {event}})
    return passes


def channel_counters(channels: int) -> list[str]:
    """``TCC_HIT[c]`` and ``TCC_MISS[c]`` for every L2 channel (per-XCD hit rates)."""
    return [f"{name}[{c}]" for name in ("TCC_HIT", "TCC_MISS") for c in range(channels)]


# ----------------------------------------------------------------------------- reading the output


def read_counters(path: Path) -> pd.DataFrame:
    """A counter file as a long table ``Dispatch_Id, Kernel_Name, Counter_Name, Counter_Value``:
    rocprofv3's ``counter_collection.csv`` (long form) as it is, the per-pass layout (one column per
    counter: rocprof v1/v2, rocprof-compute's ``pmc_perf.csv``) melted; values summed over a
    counter's rows of one dispatch.

    Raises:
        ProfilerError: empty, truncated or not a counter table (the message names the file).
    """
    table = _read_csv(path, "one row per dispatch and counter", "no dispatch matched the kernel filter")
    dispatch = _column(table, path, ("Dispatch_Id", "Dispatch_ID", "Index"))
    kernel = _column(table, path, ("Kernel_Name", "KernelName"))
    if {"Counter_Name", "Counter_Value"} <= set(table.columns):
        long = table[[dispatch, kernel, "Counter_Name", "Counter_Value"]]
    else:
        counters = [c for c in table.columns if _COUNTER.match(str(c)) and c not in _NOT_COUNTERS]
        if not counters:
            raise ProfilerError(f"{path}: no counter columns (expected Counter_Name/Counter_Value or "
                                f"columns such as TCC_HIT_sum; found {list(table.columns)[:10]})")
        long = table.melt(id_vars=[dispatch, kernel], value_vars=counters,
                          var_name="Counter_Name", value_name="Counter_Value")
    long = long.set_axis(["Dispatch_Id", "Kernel_Name", "Counter_Name", "Counter_Value"], axis=1)
    _check_complete(long, path)
    return long.groupby(["Dispatch_Id", "Kernel_Name", "Counter_Name"], as_index=False)["Counter_Value"].sum()


def read_trace(path: Path) -> pd.DataFrame:
    """A kernel trace (``kernel_trace.csv``, or rocprof-compute's ``timestamps.csv``) as
    ``Dispatch_Id, Kernel_Name, duration_ns``.

    Raises:
        ProfilerError: empty, truncated, or without the timestamp columns.
    """
    table = _read_csv(path, "one row per dispatch")
    dispatch = _column(table, path, ("Dispatch_Id", "Dispatch_ID"))
    kernel = _column(table, path, ("Kernel_Name", "KernelName"))
    start = _column(table, path, ("Start_Timestamp", "BeginNs"))
    end = _column(table, path, ("End_Timestamp", "EndNs"))
    trace = pd.DataFrame({"Dispatch_Id": table[dispatch], "Kernel_Name": table[kernel],
                          "duration_ns": pd.to_numeric(table[end], errors="coerce")
                          - pd.to_numeric(table[start], errors="coerce")})
    _check_complete(trace, path)
    return trace


def read_rocpd(path: Path, timeout_s: float = 2.0) -> tuple:
    """``(counters, trace)`` tables (as :func:`read_counters` and :func:`read_trace` give them) from
    a rocpd SQLite database, through the schema's views ``kernels`` and ``pmc_events`` (opened
    read-only; a database another process holds locked fails after ``timeout_s``).

    Raises:
        ProfilerError: not a rocpd database, locked, or unreadable (one line naming the file).
    """
    counters_sql = ('SELECT K.dispatch_id AS Dispatch_Id, K.name AS Kernel_Name, E.name AS Counter_Name, '
                    'E.value AS Counter_Value FROM kernels K JOIN pmc_events E ON E.event_id = K.event_id')
    trace_sql = 'SELECT dispatch_id AS Dispatch_Id, name AS Kernel_Name, "end" - start AS duration_ns FROM kernels'
    try:
        with sqlite3.connect(f"file:{Path(path).resolve()}?mode=ro", uri=True, timeout=timeout_s) as db:
            counters, trace = (_query(db, sql) for sql in (counters_sql, trace_sql))
    except sqlite3.Error as exc:
        raise ProfilerError(f"{path} cannot be read as a rocpd database ({_one_line(exc)}): expected "
                            f"the views 'kernels' and 'pmc_events' of rocprofiler-sdk's schema") from None
    counters = counters.groupby(["Dispatch_Id", "Kernel_Name", "Counter_Name"], as_index=False)["Counter_Value"].sum()
    return counters, trace


def _query(db: sqlite3.Connection, sql: str) -> pd.DataFrame:
    cursor = db.execute(sql)
    return pd.DataFrame.from_records(cursor.fetchall(), columns=[d[0] for d in cursor.description])


def select_dispatches(table: pd.DataFrame, kernel_name: str, warmup: int, count: int | None,
                      where: str) -> pd.DataFrame:
    """The rows of ``kernel_name``'s dispatches (the exact name, or followed by its argument list
    or ``.kd``) after the first ``warmup`` dispatches, at most ``count`` of them, in dispatch order.

    Raises:
        ProfilerError: no dispatch of that name in ``where`` (the kernels seen are named), or only
            warm-up dispatches.
    """
    pattern = re.compile(rf"^{re.escape(kernel_name)}(\(|\s|\.kd|$)")
    rows = table[table["Kernel_Name"].astype(str).map(lambda name: bool(pattern.match(name)))]
    if rows.empty:
        seen = sorted(set(table["Kernel_Name"].astype(str)))[:5]
        raise ProfilerError(f"{where}: no dispatch of {kernel_name!r} (kernels seen: {seen or 'none'})")
    ids = sorted(rows["Dispatch_Id"].unique())
    kept = ids[warmup:] if count is None else ids[warmup:warmup + count]
    if not kept:
        raise ProfilerError(f"{where}: {len(ids)} dispatch(es) of {kernel_name!r}, all of them warm-up "
                            f"(expected more than {warmup})")
    return rows[rows["Dispatch_Id"].isin(kept)]


def mean_counters(counters: pd.DataFrame) -> dict:
    """Counter name -> mean over the dispatches of ``counters`` (a selected long table)."""
    per_dispatch = counters.pivot_table(index="Dispatch_Id", columns="Counter_Name",
                                        values="Counter_Value", aggfunc="sum")
    return {str(k): float(v) for k, v in per_dispatch.mean().items()}


def derive(counters: dict, l2_domains: int, channels_per_xcd: int = CHANNELS_PER_XCD) -> tuple:
    """``(figures, notes)``: the vendor-neutral figures (profiling/profiler.py) of AMD counters
    (name -> value of one dispatch), and one line per thing that could not be derived.

    Raises:
        ProfilerError: neither TCC_HIT_sum / TCC_MISS_sum nor their channel instances: no L2 hit rate.
    """
    notes, get = [], counters.get
    channels = _channels(counters)
    per_xcd = _per_xcd(channels, l2_domains, channels_per_xcd, notes)
    complete = bool(per_xcd)  # every channel of every XCD: their sums are the _sum counters
    hits = get("TCC_HIT_sum", sum(channels["TCC_HIT"].values()) if complete else None)
    misses = get("TCC_MISS_sum", sum(channels["TCC_MISS"].values()) if complete else None)
    if hits is None or misses is None:
        missing = [n for n, v in (("TCC_HIT_sum", hits), ("TCC_MISS_sum", misses)) if v is None]
        raise ProfilerError(f"counter {' and '.join(missing)} missing from the profile (found "
                            f"{sorted(counters)[:8]}): no L2 hit rate")
    figures = {"l2_hit_rate": hits / (hits + misses) if hits + misses else None,
               "l2_requests": get("TCC_REQ_sum", hits + misses)}
    if get("TCC_REQ_sum") is not None and abs(counters["TCC_REQ_sum"] - hits - misses) > 1e-3 * max(hits + misses, 1):
        notes.append(f"TCC_HIT + TCC_MISS = {hits + misses:.0f} but TCC_REQ = {counters['TCC_REQ_sum']:.0f} "
                     f"(expected equal)")
    figures.update(_fabric_bytes(counters, notes))
    figures.update(per_xcd)
    mall_hits = [v for k, v in counters.items() if k.startswith("MALL_HIT_REQUESTS")]
    mall_all = [v for k, v in counters.items() if k.startswith("MALL_ALL_REQUESTS")]
    if mall_hits and mall_all and sum(mall_all):
        figures["mall_hit_rate"] = sum(mall_hits) / sum(mall_all)
    return figures, notes


def _fabric_bytes(counters: dict, notes: list) -> dict:
    get = counters.get
    out = {}
    if get("TCC_EA0_RDREQ_sum") is None:
        notes.append("counter TCC_EA0_RDREQ_sum missing: no DRAM read bytes")
    else:
        small, big = get("TCC_EA0_RDREQ_32B_sum", 0.0), get("TCC_BUBBLE_sum", 0.0)
        out["dram_read_bytes"] = 128 * big + 64 * (counters["TCC_EA0_RDREQ_sum"] - big - small) + 32 * small
    if get("TCC_EA0_WRREQ_sum") is not None:
        wide = get("TCC_EA0_WRREQ_64B_sum", 0.0)
        out["dram_write_bytes"] = 64 * wide + 32 * (counters["TCC_EA0_WRREQ_sum"] - wide)
    if "dram_read_bytes" in out:
        out["dram_bytes"] = out["dram_read_bytes"] + out.get("dram_write_bytes", 0.0)
    return out


def _channels(counters: dict) -> dict:
    found = {"TCC_HIT": {}, "TCC_MISS": {}}
    for name, value in counters.items():
        match = _CHANNEL.match(name)
        if match:
            found[match.group(1)][int(match.group(2))] = value
    return found


def _per_xcd(channels: dict, l2_domains: int, channels_per_xcd: int, notes: list) -> dict:
    hit, miss = channels["TCC_HIT"], channels["TCC_MISS"]
    if not hit and not miss:
        return {}
    expected = l2_domains * channels_per_xcd
    if sorted(hit) != list(range(expected)) or sorted(miss) != list(range(expected)):
        notes.append(f"per-channel counters cover channels {len(hit)} hit / {len(miss)} miss, expected "
                     f"0..{expected - 1} ({l2_domains} XCDs x {channels_per_xcd}): no per-XCD hit rates")
        return {}
    rates = []
    for xcd in range(l2_domains):
        span = range(xcd * channels_per_xcd, (xcd + 1) * channels_per_xcd)
        h, m = sum(hit[c] for c in span), sum(miss[c] for c in span)
        rates.append(h / (h + m) if h + m else float("nan"))
    return {"l2_hit_rate_per_domain": rates, "l2_hit_rate_min_domain": min(rates)}


def _read_csv(path: Path, expected: str, no_rows: str = "") -> pd.DataFrame:
    try:
        table = pd.read_csv(path)
    except pd.errors.EmptyDataError:
        raise ProfilerError(f"{path} is empty: expected a CSV header and {expected}") from None
    except (pd.errors.ParserError, UnicodeDecodeError, OSError) as exc:
        raise ProfilerError(f"{path} cannot be read as CSV ({_one_line(exc)})") from None
    if table.empty:
        raise ProfilerError(f"{path} has a header but no rows: {no_rows or 'expected ' + expected}")
    return table


def _column(table: pd.DataFrame, path: Path, names: tuple) -> str:
    found = next((n for n in names if n in table.columns), None)
    if found is None:
        raise ProfilerError(f"{path}: no column {' or '.join(names)} (found {list(table.columns)[:10]})")
    return found


def _check_complete(table: pd.DataFrame, path: Path) -> None:
    incomplete = table[table.isna().any(axis=1)]
    if not incomplete.empty:
        raise ProfilerError(f"{path} is truncated: {len(incomplete)} row(s) lack fields, the first at "
                            f"data row {int(incomplete.index[0]) + 1} of {len(table)}")


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:200]


# ----------------------------------------------------------------------------- an output folder


def read_folder(folder: Path, kernel_name: str, warmup: int = WARMUP_DISPATCHES,
                count: int | None = PROFILED_DISPATCHES) -> tuple:
    """``(counters, duration_ms, notes)`` of ``kernel_name`` from everything rocprofv3 wrote under
    ``folder``: every ``*counter_collection.csv`` (one per pass folder), else every rocpd database
    (``*.db``); each file's own dispatches selected (passes are separate runs), means merged.
    The duration is the mean of the selected dispatches of the kernel traces (``*kernel_trace.csv``,
    or the databases' ``kernels`` view), or None with a note.

    Raises:
        ProfilerError: no output file, or none holding a dispatch of the kernel.
    """
    folder = Path(folder)
    csvs = sorted(folder.rglob("*counter_collection.csv"))
    dbs = [] if csvs else sorted(folder.rglob("*.db"))
    if not csvs and not dbs:
        found = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())[:8]
        raise ProfilerError(f"no *counter_collection.csv and no rocpd *.db under {folder} (found {found or 'nothing'})")
    tables, traces = [], []
    for path in csvs:
        tables.append((path, read_counters(path)))
    for path in dbs:
        counters, trace = read_rocpd(path)
        tables.append((path, counters))
        traces.append((path, trace))
    traces += [(p, read_trace(p)) for p in sorted(folder.rglob("*kernel_trace.csv"))]
    means: dict = {}
    for path, table in tables:
        for name, value in mean_counters(select_dispatches(table, kernel_name, warmup, count, str(path))).items():
            means.setdefault(name, []).append(value)
    counters = {name: sum(values) / len(values) for name, values in means.items()}
    durations = [select_dispatches(t, kernel_name, warmup, count, str(p))["duration_ns"].mean()
                 for p, t in traces]
    notes = [] if durations else [f"no kernel trace under {folder}: no dispatch duration"]
    duration_ms = float(sum(durations) / len(durations) / 1e6) if durations else None
    return counters, duration_ms, notes


# ----------------------------------------------------------------------------- rocprofv3


class RocprofV3:
    """rocprofv3 behind the ``Profiler`` protocol (profiling/profiler.py).

    Args:
        l2_domains: XCDs of the device (per-XCD hit rates need all their channels).
        per_xcd: also count TCC_HIT[c] / TCC_MISS[c] of every channel, in a pass of their own that
            may fail without failing the profile.
        timeout_s: seconds each pass may take.
    """

    name = "rocprofv3"

    def __init__(self, l2_domains: int = 8, per_xcd: bool = True, timeout_s: float = 300.0):
        self.l2_domains, self.per_xcd, self.timeout_s = l2_domains, per_xcd, timeout_s

    def available(self) -> bool:
        return find_tool("rocprofv3") is not None

    def passes(self) -> list:
        """``[(counters, required)]``: the core counters split to fit, then the optional channel pass."""
        passes = [(p, True) for p in split_passes(CORE_COUNTERS)]
        if self.per_xcd:
            passes += [(p, False) for p in split_passes(channel_counters(self.l2_domains * CHANNELS_PER_XCD))]
        return passes

    def command(self, tool: str, counters: list, kernel_name: str, out_dir: Path, worker: list,
                trace: bool) -> list:
        """The rocprofv3 command line of one pass writing CSV files into ``out_dir``."""
        return [tool, "--pmc", *counters, "--kernel-include-regex", f"^{re.escape(kernel_name)}$",
                *(["--kernel-trace"] if trace else []), "--output-format", "csv",
                "-d", str(out_dir), "-o", "run", "--", *worker]

    def profile(self, kernel_path: Path, kernel_name: str, dtype: str, out_dir: Path) -> Profile:
        tool = find_tool("rocprofv3")
        if tool is None:
            raise ProfilerError("rocprofv3 not found on PATH or in /opt/rocm/bin")
        out_dir = Path(out_dir).resolve()
        out_dir.mkdir(parents=True, exist_ok=True)
        worker = _worker_command(out_dir, kernel_path, dtype)
        notes = []
        for i, (counters, required) in enumerate(self.passes(), start=1):
            folder = out_dir / f"pass_{i}"
            try:
                _run(self.command(tool, counters, kernel_name, folder, worker, trace=i == 1), out_dir,
                     folder, self.timeout_s, "rocprofv3")
            except ProfilerError as exc:
                if required:
                    raise
                notes.append(f"optional pass {i} ({counters[0]}...) failed: {exc}")
        counters, duration_ms, read_notes = read_folder(out_dir, kernel_name)
        figures, derive_notes = derive(counters, self.l2_domains)
        figures.update(time_ms=duration_ms, dispatches=float(PROFILED_DISPATCHES))
        (out_dir / "counters.json").write_text(json.dumps(counters, indent=1))
        return Profile(figures, SOURCE, counters, out_dir, notes + read_notes + derive_notes)


# ----------------------------------------------------------------------------- rocprof-compute


def read_sysinfo(path: Path) -> dict:
    """rocprof-compute's ``sysinfo.csv``: ``gpu_arch``, ``compute_partition``, ``num_xcd``,
    ``cu_per_gpu``, ``l2_bytes_per_xcd`` (its ``gpu_l2`` is KiB of ONE XCD's L2, not the GPU's),
    ``l2_bytes_total`` and ``channels_per_xcd`` (``total_l2_chan`` / ``num_xcd``).

    Raises:
        ProfilerError: unreadable or without those columns.
    """
    row = _read_csv(path, "one row of system information").iloc[0]
    try:
        xcds = int(row.get("num_xcd", 1))
        per_xcd = int(float(row["gpu_l2"])) * 1024
        return {"gpu_arch": str(row["gpu_arch"]), "compute_partition": str(row.get("compute_partition", "")),
                "num_xcd": xcds, "cu_per_gpu": int(row["cu_per_gpu"]), "l2_bytes_per_xcd": per_xcd,
                "l2_bytes_total": per_xcd * xcds, "channels_per_xcd": int(row["total_l2_chan"]) // xcds}
    except (KeyError, ValueError) as exc:
        raise ProfilerError(f"{path}: expected gpu_arch, gpu_l2, cu_per_gpu, total_l2_chan ({_one_line(exc)})") from None


def read_workload(folder: Path, kernel_name: str, warmup: int = WARMUP_DISPATCHES,
                  count: int | None = PROFILED_DISPATCHES) -> Profile:
    """The profile of ``kernel_name`` from a rocprof-compute workload folder (``pmc_perf.csv``,
    ``sysinfo.csv``, ``timestamps.csv``, found anywhere under ``folder``), labelled
    ``measured:rocprof-compute``.

    Raises:
        ProfilerError: no ``pmc_perf.csv``, or as :func:`read_counters` / :func:`derive`.
    """
    folder = Path(folder)
    pmc = next(iter(sorted(folder.rglob("pmc_perf.csv"))), None)
    if pmc is None:
        raise ProfilerError(f"no pmc_perf.csv under {folder}: expected a rocprof-compute workload folder")
    sysinfo = read_sysinfo(pmc.parent / "sysinfo.csv") if (pmc.parent / "sysinfo.csv").exists() else None
    selected = select_dispatches(read_counters(pmc), kernel_name, warmup, count, str(pmc))
    counters = mean_counters(selected)
    xcds = sysinfo["num_xcd"] if sysinfo else 8
    figures, notes = derive(counters, xcds, sysinfo["channels_per_xcd"] if sysinfo else CHANNELS_PER_XCD)
    stamps = pmc.parent / "timestamps.csv"
    if stamps.exists():
        # timestamps.csv numbers dispatches from 1 where pmc_perf.csv does from 0: select by order
        trace = select_dispatches(read_trace(stamps), kernel_name, warmup, count, str(stamps))
        figures["time_ms"] = float(trace["duration_ns"].mean() / 1e6)
    figures["dispatches"] = float(selected["Dispatch_Id"].nunique())
    return Profile(figures, "measured:rocprof-compute", {**counters, **({"sysinfo": sysinfo} if sysinfo else {})},
                   folder, notes)


class RocprofCompute:
    """rocprof-compute (formerly Omniperf) behind the ``Profiler`` protocol: ``profile`` of the
    TCC block into a workload folder, read by :func:`read_workload`."""

    name = "rocprof-compute"

    def __init__(self, l2_domains: int = 8, timeout_s: float = 1200.0):
        self.l2_domains, self.timeout_s = l2_domains, timeout_s

    def available(self) -> bool:
        return find_tool("rocprof-compute") is not None

    def command(self, tool: str, kernel_name: str, workload: Path, worker: list) -> list:
        """The ``rocprof-compute profile`` command line (kernel filter, the TCC block only, no roofline)."""
        return [tool, "profile", "--name", "swizzleperf", "--path", str(workload), "--kernel", kernel_name,
                "--block", "TCC", "--no-roof", "--", *worker]

    def profile(self, kernel_path: Path, kernel_name: str, dtype: str, out_dir: Path) -> Profile:
        tool = find_tool("rocprof-compute")
        if tool is None:
            raise ProfilerError("rocprof-compute not found on PATH or in /opt/rocm/bin")
        out_dir = Path(out_dir).resolve()
        out_dir.mkdir(parents=True, exist_ok=True)
        workload = out_dir / "workload"
        _run(self.command(tool, kernel_name, workload, _worker_command(out_dir, kernel_path, dtype)),
             out_dir, workload, self.timeout_s, "rocprof-compute")
        return read_workload(workload, kernel_name)


# ----------------------------------------------------------------------------- running a tool


def _worker_command(folder: Path, kernel_path: Path, dtype: str) -> list:
    """The worker's command line (its request written into ``folder``): the ``run_once`` stage at
    the default problem, warm-up and profiled dispatches."""
    from swizzleperf import sandbox
    from swizzleperf.sandbox.paths import absolute_paths
    request = {"kernel_path": str(kernel_path), "stages": ["run_once"], "dtype": dtype,
               "timing_problem": "default", "warmup": WARMUP_DISPATCHES, "launches": PROFILED_DISPATCHES}
    (folder / "request.json").write_text(json.dumps(absolute_paths(request)))
    return sandbox.python_command("-m", WORKER, str(folder / "request.json"), str(folder / "result.json"))


def _run(command: list, cwd: Path, output: Path, timeout_s: float, tool: str) -> None:
    """Run a profiler in the worker's box (sandbox/__init__.py); its own stdout and stderr are kept
    as ``<output>.log``.

    Raises:
        ProfilerError: timed out, or exited non-zero having written nothing into ``output``.
    """
    from swizzleperf import sandbox
    env = sandbox.worker_env(TRITON_INTERPRET="0", TMPDIR=str(cwd))
    # writing only into its folder (the workload, the worker's result) and a scratch folder of its
    # own, the first writable one: the box puts the Triton / CUDA / torch caches there, not among
    # the profiler's raw output that the run keeps
    with tempfile.TemporaryDirectory(prefix="swizzleperf-rocprof-") as scratch:
        try:
            proc = sandbox.run(command, cwd, env, timeout_s,
                               sandbox.Limits(isolate_network=False, writable=(scratch, str(cwd)), shared_memory=True))
        except subprocess.TimeoutExpired:
            raise ProfilerError(f"{tool} did not finish within {timeout_s:.0f} s") from None
        except OSError as exc:
            raise ProfilerError(f"{tool} could not be started ({_one_line(exc)})") from None
    Path(f"{output}.log").write_text(f"$ {' '.join(command)}\n{proc.stdout}\n{proc.stderr}")
    wrote = output.exists() and any(p.is_file() for p in output.rglob("*"))
    if proc.returncode != 0 and not wrote:
        lines = [line.strip() for line in (proc.stderr + proc.stdout).splitlines() if line.strip()]
        raise ProfilerError(f"{tool} exited with code {proc.returncode}: {lines[-1][:300] if lines else '(no output)'}")
