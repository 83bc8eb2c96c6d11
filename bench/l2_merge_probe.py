"""Which reads of one line does the H100/H200 L2 merge before its lookup, and for how long (issue #43)?

What is known (bench/results/l2_measure_h100/l2_partition_probe2_*, an H100, 2026-12-06): when N
programs of one partition read the same lines at about the same time, the L2 looked up only
1 + about (N - 1) / 4 of the N reads of a line; the others never reached it as lookups, merged with
a request for the same sector already on its way. Over the GEMM's orders ncu's SM read lookups were
48-95 % of the reads the orders issue, and orders with the same sharing in a wave differ (grouped-m:4
48 %, grouped-n:32 93 %): which readers merge seems to depend on where they run, not only on how many
there are. The L2 simulator merges nothing; these cases say what a merge model must hold.

One kernel, :func:`merge_kernel`, launched once per case with 2 programs per SM. Every program reads
``%smid``; a program on a reader SM (``delay[sm] >= 0``) that is the first of its SM to take that
SM's ticket waits ``delay[sm]`` SM clock cycles (``%clock64``) and then reads every chunk of the
buffer once (16 KiB chunks, ``ld.global.cg``: past the L1), in the same order as every other reader.
Every other program does nothing. The buffer is 1/16 of the L2 (every read after the first of a line
would hit, were it looked up).

Cases (:func:`cases`; ``anchor`` = SM 0, the SM the dispatch puts program 8 on):

* ``solo``: the anchor alone: every line looked up once, a miss (the zero point).
* ``pair-B`` for every SM B but the anchor: the anchor and SM B at once. ncu's SM read lookups per
  line: 1 where every read of B merged with the anchor's (or the anchor's with B's), 2 where none did;
  the map over B says which SMs share a merge point with the anchor (its TPC's other SM? its GPC's?
  its partition's?), and a B of the other partition says whether a far read merges.
* ``delay-B-D``: the anchor at once, SM B (its TPC mate 1, and 2 and 16, SMs the dispatch puts in
  other TPCs) after D SM clock cycles (``%clock64``), D from 0 to 12800: how long a read stays
  mergeable (a load from DRAM took 693 cycles on an H200, shared/HARDWARE.md).

Run under ncu (one launch per case, caches flushed per pass, ``--clock-control none``) with
``python3 -m bench.l2_merge_probe measure --out OUT/l2_merge_probe_GPU.json``; the launches alone
with ``run`` (each case's reader SMs that took their ticket are written beside, so that a reader SM
no program reached is seen, not assumed). ``summary`` prints the table. Under ``TRITON_INTERPRET=1``
the kernel runs with a fake ``%smid`` (``pid % fake_sms``) and no waiting, which
tests/bench/test_l2_merge_probe.py checks.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import triton
import triton.language as tl

from swizzleperf.profiling.probe_kernels import _clock, _smid

BLOCK = 4096                 # fp32 per chunk: 16 KiB, 128 lines
FRACTION = 1 / 16            # of torch's L2_cache_size: the buffer every reader streams once
ANCHOR = 0                   # the anchor SM of the delay cases
ANCHORS = (0, 2, 64)         # the pair maps' anchors: SM 0; 2 (not in SM 0's group on an H100) and 64 (the other partition's)
DELAY_PARTNERS = (1, 2, 16)  # SM 1: SM 0's TPC mate (dispatch: programs 8, 9 on SMs 0, 1); 2, 16: other TPCs
DELAYS_CYCLES = (0, 800, 3200, 12800, 25600, 51200, 102400, 204800, 409600)   # SM clock cycles (%clock64)
# the SMs whose reads merged with SM 0's on an H100 (pair map of call 2, 2026-12-06:
# bench/results/l2_merge_h100/; call 1's chip left out 126-129): the group-K cases read with the
# first K of them at once, the noise-K-D cases take their noise readers from it (or from the groups
# `discover` measured on the chip, `measure --groups`)
SM0_GROUP_H100 = (0, 1, 16, 17, 32, 33, 48, 49, 124, 125, 126, 127, 128, 129, 130, 131)
GROUP_SIZES = (2, 4, 8, 12)
NOISE_PARTNER = 1            # SM 0's TPC mate, in its group on every chip seen
NOISE_DELAYS = (0, 25600, 102400)
NOISE_READERS = (0, 4, 8, 13)
ROWS = 16                    # a chunk as ROWS x BLOCK // ROWS for TMA (a box dimension is at most 256)
TMA_ROWS = tl.constexpr(ROWS)   # the same, for the kernel
TMA_ANCHORS = (0,)           # the tma-pair cases' anchor
TMA_PARTNERS = (1, 2, 16, 17, 64, 124)   # its partners: in SM 0's group on both H100s (1, 16, 17, 124) and not (2, 64)
KERNEL_NAME = "merge_kernel"


@triton.jit
def merge_kernel(src_ptr, src_desc, delay_ptr, region_ptr, ticket_ptr, out_ptr, count_ptr, cycles_ptr, n_chunks, fake_sms,
                 BLOCK: tl.constexpr, ON_GPU: tl.constexpr, COUNT: tl.constexpr, TMA: tl.constexpr):
    """See the module docstring. ``delay_ptr``: int64 per SM, -1 for an SM that does not read, else
    the SM clock cycles its reader waits (``%clock64``: ``%globaltimer`` ticks in microseconds on
    some GPUs); ``ticket_ptr``: int32 per SM (the first program of a reader SM
    reads); ``out_ptr``: BLOCK fp32 per program (the sums: keeps the loads); ``count_ptr``: reads per
    chunk (``COUNT``, the interpreter's check); ``cycles_ptr``: int64 per SM, the cycles its reader
    took to read the buffer after its wait (0 in the interpreter); ``region_ptr``: int32 per SM, 0 for
    the buffer every case is about, 1, 2, ... for the noise readers' own buffers of the same size; with ``TMA``, the chunks are read
    through ``src_desc`` (a tensor descriptor of the buffer as [n_chunks * TMA_ROWS, BLOCK // TMA_ROWS]
    fp32, block [TMA_ROWS, BLOCK // TMA_ROWS]: the bulk tensor copies the bundled GEMM's loads are)."""
    pid = tl.program_id(0)
    if ON_GPU:
        sm = _smid(pid)
    else:
        sm = pid % fake_sms
    delay = tl.load(delay_ptr + sm)
    region = tl.load(region_ptr + sm)
    acc = tl.zeros([BLOCK], tl.float32)
    if delay >= 0:
        if tl.atomic_add(ticket_ptr + sm, 1) == 0:
            if ON_GPU:
                start = _clock(pid)
                now = start
                while now - start < delay:
                    now = _clock(pid)
            offs = tl.arange(0, BLOCK)
            for i in range(0, n_chunks):
                chunk = region * n_chunks + i
                if TMA:
                    acc += tl.reshape(src_desc.load([chunk * TMA_ROWS, 0]), [BLOCK])
                else:
                    acc += tl.load(src_ptr + chunk.to(tl.int64) * BLOCK + offs, cache_modifier=".cg")
                if COUNT:
                    tl.atomic_add(count_ptr + chunk, 1)
            if ON_GPU:
                tl.store(cycles_ptr + sm, _clock(pid + tl.sum(acc).to(tl.int32)) - now)
    tl.store(out_ptr + pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK), acc)


@dataclass(frozen=True)
class Case:
    """One launch: the reader SMs and each one's wait in SM clock cycles (``delays``: SM -> cycles);
    ``tma``: the reads are bulk tensor copies (TMA), not ``ld.global.cg``; ``noise``: SMs (among
    ``delays``) that each read a buffer of their own instead, at once: traffic through their group
    that no other reader shares (each of its lines looked up once)."""
    name: str
    delays: dict
    question: str = ""
    tma: bool = False
    noise: tuple = ()


def cases(num_sms: int, group0: list | None = None) -> list:
    """Every case, in launch order (see the module docstring), for a GPU of ``num_sms`` SMs;
    ``group0``: SM 0's merge group on this chip (``discover``; default ``SM0_GROUP_H100``), whose
    other SMs are the noise readers of the ``noise-K-D`` cases."""
    out = [Case("solo", {ANCHOR: 0}, "zero point: one reader, every line looked up once")]
    for a in ANCHORS:
        if a < num_sms:
            out += [Case(f"pair-{b}" if a == ANCHOR else f"pair{a}-{b}", {a: 0, b: 0},
                         f"SM {a} and SM {b} at once: lookups per line 1 (merged) to 2")
                    for b in range(num_sms) if b != a]
    out += [Case(f"delay-{b}-{d}", {ANCHOR: 0, b: d}, f"SM {b} {d} cycles after SM {ANCHOR}: still merged?")
            for b in DELAY_PARTNERS if b < num_sms for d in DELAYS_CYCLES]
    group = [sm for sm in SM0_GROUP_H100 if sm < num_sms]
    out += [Case(f"group-{k}", {sm: 0 for sm in group[:k]}, f"{k} SMs of SM 0's group at once: 1 lookup a line?")
            for k in GROUP_SIZES if k <= len(group)]
    out.append(Case("all", {sm: 0 for sm in range(num_sms)}, "every SM at once: lookups a line = merge groups?"))
    others = [sm for sm in (group0 or SM0_GROUP_H100) if sm not in (ANCHOR, NOISE_PARTNER) and sm < num_sms]
    out += [Case(f"noise-{k}-{d}", {ANCHOR: 0, NOISE_PARTNER: d, **{sm: 0 for sm in others[:k]}},
                 f"SM {NOISE_PARTNER} {d} cycles after SM {ANCHOR}, {k} more SMs of their group reading "
                 "another buffer: is the window bytes through the group or time?", noise=tuple(others[:k]))
            for d in NOISE_DELAYS for k in NOISE_READERS if k <= len(others)]
    # the same through TMA, as the bundled GEMM loads its tiles on Hopper
    out.append(Case("tma-solo", {ANCHOR: 0}, "TMA: zero point", tma=True))
    for a in TMA_ANCHORS:
        out += [Case(f"tma-pair{a}-{b}", {a: 0, b: 0}, f"TMA: SM {a} and SM {b} at once", tma=True)
                for b in TMA_PARTNERS if b != a and b < num_sms]
    out += [Case(f"tma-delay-{b}-{d}", {ANCHOR: 0, b: d}, f"TMA: SM {b} {d} cycles after SM {ANCHOR}", tma=True)
            for b in DELAY_PARTNERS[:2] if b < num_sms for d in DELAYS_CYCLES]
    out += [Case(f"tma-group-{k}", {sm: 0 for sm in group[:k]}, f"TMA: {k} SMs of SM 0's group at once", tma=True)
            for k in GROUP_SIZES if k <= len(group)]
    out.append(Case("tma-all", {sm: 0 for sm in range(num_sms)}, "TMA: every SM at once", tma=True))
    return out


def n_chunks_for(l2_bytes: int, block: int = BLOCK) -> int:
    """Chunks of the buffer: FRACTION of the L2, at least 2."""
    return max(2, int(round(FRACTION * l2_bytes / (block * 4))))


def launch(case: Case, l2_bytes: int, num_sms: int, device: str = "cuda", on_gpu: bool = True,
           programs: int | None = None, count: bool = False, block: int = BLOCK) -> dict:
    """One launch of ``case``; returns its buffers (torch tensors): ``src``, ``out``, ``tickets``
    (int32 per SM: programs that reached each SM's ticket), ``count`` (int32, reads of each chunk of
    every buffer: the case's, then one per noise reader, ``src`` holding them all) and ``n_chunks``.
    ``programs``:
    grid size (default 2 per SM); ``cycles``: int64 per SM, its reader's cycles (GPU only)."""
    import torch
    delays = torch.full((num_sms,), -1, dtype=torch.int64)
    for sm, d in case.delays.items():
        delays[int(sm)] = int(d)
    delays = delays.to(device)
    regions = torch.zeros(num_sms, dtype=torch.int32)
    for i, sm in enumerate(case.noise):   # a buffer of its own each: noise reads never merge
        regions[int(sm)] = 1 + i
    regions = regions.to(device)
    n_chunks = n_chunks_for(l2_bytes, block)
    gen = torch.Generator(device=device).manual_seed(0)
    n_regions = 1 + len(case.noise)
    src = torch.rand(n_regions * n_chunks * block, generator=gen, device=device, dtype=torch.float32)
    programs = programs or 2 * num_sms
    tickets = torch.zeros(num_sms, dtype=torch.int32, device=device)
    cycles = torch.zeros(num_sms, dtype=torch.int64, device=device)
    counter = torch.zeros(n_regions * n_chunks, dtype=torch.int32, device=device)
    out = torch.zeros(programs * block, dtype=torch.float32, device=device)
    src_desc = src
    if case.tma:
        from swizzleperf.kernels.schedule.persistent_gemm import descriptor
        src_desc = descriptor(src.view(n_regions * n_chunks * ROWS, block // ROWS), [ROWS, block // ROWS])
    merge_kernel[(programs,)](src, src_desc, delays, regions, tickets, out, counter, cycles, n_chunks, num_sms,
                              BLOCK=block, ON_GPU=on_gpu, COUNT=count, TMA=case.tma, num_warps=4)
    return {"src": src, "out": out, "tickets": tickets, "count": counter, "cycles": cycles, "n_chunks": n_chunks}


def run(served_out: Path | None = None, cases_file: Path | None = None) -> None:
    """Launch every case once on the GPU (what ``measure`` profiles), or those of ``cases_file`` (a
    JSON list of ``Case`` fields); with ``served_out``, write per case the reader SMs a program
    reached and their readers' cycles (JSON), to check against what the case asked."""
    import torch
    props = torch.cuda.get_device_properties(0)
    todo = (cases(props.multi_processor_count) if cases_file is None else
            [Case(c["name"], {int(k): int(v) for k, v in c["delays"].items()}, c.get("question", ""),
                  bool(c.get("tma")), tuple(int(sm) for sm in c.get("noise", ())))
             for c in json.loads(Path(cases_file).read_text())])
    served, cycles = {}, {}
    for case in todo:
        result = launch(case, props.L2_cache_size, props.multi_processor_count)
        torch.cuda.synchronize()
        tickets, took = result["tickets"].cpu().tolist(), result["cycles"].cpu().tolist()
        served[case.name] = sorted(int(sm) for sm in case.delays if tickets[int(sm)] > 0)
        cycles[case.name] = {str(sm): int(took[int(sm)]) for sm in sorted(case.delays)}
    if served_out is not None:   # the last launch of each case (ncu's replays launch it again)
        served_out.write_text(json.dumps({"served": served, "cycles": cycles}))


def _profile(todo: list, stem: Path, timeout_s: float) -> dict:
    """``todo`` (cases) under ncu in one process: one profiled launch per case, caches flushed per
    pass, ``--clock-control none``, profiling/ncu.py's METRICS plus the extra L2 counters this ncu
    has. Files beside ``stem``: ``_cases.json``, ``_ncu.csv``, ``_served.json``. Returns per case
    (in order) its fields, the readers served, their cycles and its metrics (None where ncu did not
    profile every case), with the command, its seconds and return code, and an ``error`` line."""
    from bench.l2_partition_probe import _extra_metrics, per_launch
    from swizzleperf.profiling.ncu import METRICS, find_ncu
    ncu = find_ncu()
    if ncu is None:
        raise SystemExit("ncu not found")
    metrics = [*METRICS, *_extra_metrics(ncu)]
    cases_path, log = stem.with_name(stem.name + "_cases.json"), stem.with_name(stem.name + "_ncu.csv")
    served_path = stem.with_name(stem.name + "_served.json")
    cases_path.write_text(json.dumps([{**asdict(c), "delays": {str(k): v for k, v in c.delays.items()}} for c in todo]))
    command = [ncu, "--clock-control", "none", "--kernel-name", KERNEL_NAME, "--metrics", ",".join(metrics),
               "--csv", "--page", "raw", "--print-units", "base", "--log-file", str(log),
               sys.executable, "-m", "bench.l2_merge_probe", "run", "--served", str(served_path),
               "--cases", str(cases_path)]
    started = time.time()
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired as exc:   # keep what ncu logged of the cases it reached
        proc = subprocess.CompletedProcess(command, -9, str(exc.stdout or "")[-4000:], f"timed out after {timeout_s} s")
    text = log.read_text() if log.exists() else ""
    rows = per_launch(text, KERNEL_NAME) if '"ID"' in text else []
    side = json.loads(served_path.read_text()) if served_path.exists() else {}
    served, cycles = side.get("served", {}), side.get("cycles", {})
    out = {"ncu_command": " ".join(command[:-7]) + " ...", "ncu_seconds": round(time.time() - started, 1),
           "ncu_returncode": proc.returncode, "run_stdout": proc.stdout[-4000:], "run_stderr": proc.stderr[-4000:],
           "cases": [{**asdict(c), "delays": {str(k): v for k, v in c.delays.items()}, "served": served.get(c.name),
                      "reader_cycles": cycles.get(c.name), "metrics": rows[i] if len(rows) == len(todo) else None}
                     for i, c in enumerate(todo)]}
    if len(rows) != len(todo):
        out["error"] = f"ncu profiled {len(rows)} launches, expected {len(todo)} (one per case)"
        out["all_rows"] = rows
    return out


def _header(props) -> dict:
    import torch
    n_chunks = n_chunks_for(props.L2_cache_size)
    return {"device": torch.cuda.get_device_name(), "l2_bytes": props.L2_cache_size,
            "num_sms": props.multi_processor_count, "n_chunks": n_chunks, "chunk_bytes": BLOCK * 4,
            "profiled": "one launch per case (ncu kernel replay, caches flushed per pass)"}


def measure(out: Path, select: tuple = (), groups: Path | None = None) -> dict:
    """Every case of :func:`cases` (those whose name starts with one of ``select``, where given)
    under ncu (``_profile``). Writes ``out`` (JSON: device, L2 bytes, per case its readers, the
    readers served, their cycles, the chunk count and the metrics). ``groups``: ``discover``'s JSON of
    this chip (SM 0's group gives the noise readers)."""
    import torch
    props = torch.cuda.get_device_properties(0)
    group0 = None
    if groups is not None and groups.exists():
        group0 = next((g for g in json.loads(groups.read_text()).get("groups", []) if ANCHOR in g), None)
    todo = [c for c in cases(props.multi_processor_count, group0) if not select or c.name.startswith(tuple(select))]
    result = {**_header(props), **_profile(todo, out.with_suffix(""), 500)}
    out.write_text(json.dumps(result, indent=1))
    return result


def discover(out: Path, budget_s: float = 300.0) -> dict:
    """This chip's merge groups: round by round, the lowest SM not yet in a group read with every
    other such SM, in pairs (``find{A}-{B}``, under ncu); those below 1.5 lookups a line join A's
    group. Stops when every SM is in a group or ``budget_s`` is spent (the rest: ``unassigned``).
    Writes ``out`` (JSON: the groups, per round the cases with their metrics)."""
    import torch
    props = torch.cuda.get_device_properties(0)
    result = {**_header(props), "groups": [], "rounds": [], "unassigned": []}
    left, started = list(range(props.multi_processor_count)), time.time()
    while left and time.time() - started < budget_s:
        a, partners = left[0], left[1:]
        todo = [Case(f"find{a}-{b}", {a: 0, b: 0}, f"SM {a} and SM {b} at once") for b in partners]
        found = _profile(todo, out.with_name(f"{out.stem}_round{len(result['rounds'])}"),
                         max(30.0, budget_s - (time.time() - started)))
        result["rounds"].append(found)
        per = [lookups_per_line(c, result["chunk_bytes"], result["n_chunks"]) for c in found["cases"]]
        if partners and all(v is None for v in per):
            break                               # ncu measured nothing: no group is guessed
        group = [a] + [b for b, v in zip(partners, per) if v is not None and v < 1.5]
        result["groups"].append(group)
        left = [sm for sm in left if sm not in group]
        out.write_text(json.dumps(result, indent=1))
    result["unassigned"] = left
    out.write_text(json.dumps(result, indent=1))
    return result


def lookups_per_line(case: dict, chunk_bytes: int, n_chunks: int) -> float | None:
    """ncu's SM read lookups (hit + miss sectors) per line the case reads, None where not profiled
    or where a reader SM was not reached: 1.0 = every line looked up once (a noise reader's lookups
    of its own buffer, one a line, taken off)."""
    m = case.get("metrics") or {}
    hit = m.get("lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum")
    miss = m.get("lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum")
    if hit is None or miss is None or sorted(map(int, case["delays"])) != sorted(case.get("served") or []):
        return None
    # a noise reader's own buffer: every line of it looked up once, not the case's
    return (hit + miss) / (n_chunks * chunk_bytes / 32) - len(case.get("noise") or ())


def _pair_name(anchor: int, partner: int, tma: bool = False) -> str:
    if tma:
        return f"tma-pair{anchor}-{partner}"
    return f"pair-{partner}" if anchor == ANCHOR else f"pair{anchor}-{partner}"


def merge_groups(result: dict, threshold: float = 1.5, tma: bool = False) -> dict:
    """Per anchor SM measured (str; the TMA cases' with ``tma``), the partner SMs whose pair case looked a line up fewer than
    ``threshold`` times (merged with the anchor's reads; the anchor included), the partners at or
    above it, and those not measured: ``{anchor: {"merged": [...], "apart": [...], "not_measured": [...]}}``."""
    chunk, n = result["chunk_bytes"], result["n_chunks"]
    out = {}
    for a in TMA_ANCHORS if tma else ANCHORS:
        if a >= result["num_sms"]:
            continue
        row = {"merged": [a], "apart": [], "not_measured": []}
        byname = {c["name"]: c for c in result["cases"]}
        present = False
        for b in range(result["num_sms"]):
            case = byname.get(_pair_name(a, b, tma)) if b != a else None
            if case is None:
                continue
            present = True
            v = lookups_per_line(case, chunk, n)
            row["not_measured" if v is None else "merged" if v < threshold else "apart"].append(b)
        if present:
            out[str(a)] = {k: sorted(v) for k, v in row.items()}
    return out


def summary(result: dict) -> str:
    """``measure``'s JSON as markdown, for the ``ld.global.cg`` cases and then the TMA ones: per
    anchor the SMs whose reads merged with its own (fewer than 1.5 lookups a line for the pair) and
    how many did not; the delay table (per partner, lookups per line at each wait, and the anchor's
    cycles to read the buffer); the group-K and all-SM cases."""
    chunk, n = result["chunk_bytes"], result["n_chunks"]
    per = {c["name"]: lookups_per_line(c, chunk, n) for c in result["cases"]}
    byname = {c["name"]: c for c in result["cases"]}
    lines = [f"Device: {result['device']}; buffer {n * chunk / 2**20:g} MiB ({n} chunks of {chunk // 1024} KiB); "
             "lookups per line = ncu's SM read lookups (hit + miss sectors) / sectors of the buffer; a case "
             "whose reader SMs were not all reached is left out."]
    for tma, p in ((False, ""), (True, "tma-")):
        if not any(c["name"].startswith(p + "pair") for c in result["cases"]) and tma:
            continue
        lines += ["", f"### {'TMA (bulk tensor copies)' if tma else 'ld.global.cg'}", "",
                  f"solo: {per.get(p + 'solo')}", "",
                  "| anchor SM | SMs merged with it (pair < 1.5 lookups a line) | SMs apart (>= 1.5) | not measured |",
                  "|---|---|---|---|"]
        for a, row in merge_groups(result, tma=tma).items():
            lines.append(f"| {a} | {', '.join(map(str, row['merged']))} ({len(row['merged'])}) | {len(row['apart'])} "
                         f"| {', '.join(map(str, row['not_measured'])) or 0} |")
        lines += ["", "| partner SM (its wait, SM cycles) | " + " | ".join(f"{d}" for d in DELAYS_CYCLES) + " |",
                  "|---|" + "---|" * len(DELAYS_CYCLES)]
        for b in DELAY_PARTNERS:
            names = [f"{p}delay-{b}-{d}" for d in DELAYS_CYCLES]
            if not any(name in byname for name in names):
                continue
            lines.append(f"| {b} | " + " | ".join("" if per.get(x) is None else f"{per[x]:.2f}" for x in names) + " |")
            took = [((byname.get(x) or {}).get("reader_cycles") or {}).get(str(ANCHOR)) for x in names]
            if any(took):
                lines.append(f"| (SM {ANCHOR}'s cycles to read the buffer) | "
                             + " | ".join("" if t is None else str(t) for t in took) + " |")
        rest = [c for c in result["cases"] if c["name"].startswith(p + "group-") or c["name"] == p + "all"]
        if rest:
            lines += ["", "| case | reader SMs | lookups per line |", "|---|---|---|"]
            for c in rest:
                v = per[c["name"]]
                lines.append(f"| {c['name']} | {len(c['delays'])} | {'not measured' if v is None else f'{v:.2f}'} |")
    noise = {c["name"]: per[c["name"]] for c in result["cases"] if c["name"].startswith("noise-")}
    if noise:
        lines += ["", f"### SM {NOISE_PARTNER} behind SM {ANCHOR}, K more SMs of their group reading buffers of their own",
                  "", "| K (noise readers) | " + " | ".join(f"{d} cycles behind" for d in NOISE_DELAYS) + " |",
                  "|---|" + "---|" * len(NOISE_DELAYS)]
        for k in NOISE_READERS:
            cells = [noise.get(f"noise-{k}-{d}") for d in NOISE_DELAYS]
            if any(f"noise-{k}-{d}" in noise for d in NOISE_DELAYS):
                lines.append(f"| {k} | " + " | ".join("" if v is None else f"{v:.2f}" for v in cells) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run")
    r.add_argument("--served", help="write per case the reader SMs a program reached (JSON)")
    r.add_argument("--cases", help="a JSON list of cases to launch instead of every case")
    d = sub.add_parser("discover", help="this chip's merge groups, round by round under ncu")
    d.add_argument("--out", required=True)
    d.add_argument("--budget-s", type=float, default=300.0)
    m = sub.add_parser("measure")
    m.add_argument("--out", required=True)
    m.add_argument("--select", default="", help="comma-separated case name prefixes (default: every case)")
    m.add_argument("--groups", help="discover's JSON of this chip (SM 0's group: the noise readers)")
    t = sub.add_parser("summary", help="measure's JSON as markdown")
    t.add_argument("result")
    args = parser.parse_args()
    if args.command == "run":
        run(Path(args.served) if args.served else None, Path(args.cases) if args.cases else None)
    elif args.command == "discover":
        res = discover(Path(args.out), args.budget_s)
        print(json.dumps({"groups": res["groups"], "unassigned": res["unassigned"]}))
    elif args.command == "summary":
        print(summary(json.loads(Path(args.result).read_text())), end="")
    else:
        res = measure(Path(args.out), tuple(p for p in args.select.split(",") if p),
                      Path(args.groups) if args.groups else None)
        print(json.dumps({k: v for k, v in res.items() if k not in ("cases", "all_rows", "run_stdout")})[:2000])


if __name__ == "__main__":
    main()
