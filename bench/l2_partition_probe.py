"""Probe kernels that isolate the H100/H200 L2 partition behaviour under ncu (issue #43).

What the L2 simulator assumes (profiling/l2sim.py, ``domain_miss_path: peer_domains``): each of the
two partitions caches its own copy of every line its SMs read (a line read from both halves is
held twice: for shared data the capacity is one half), and a miss the other partition holds is
served by it. The alternative: a line lives once, in its home partition (address-hashed), and far
SMs read it over the fabric (capacity of the whole L2 whoever reads). These cases tell the two
apart, and say how ncu counts a line the far partition serves.

One kernel, :func:`stream_kernel`, launched once per case. Every program reads ``%smid``, looks
its SM's partition up in the map ``swizzleperf hw --probe`` measures
(:func:`swizzleperf.profiling.dispatch_probe.partitions`, same session, same chip) and takes work
from its partition's queue (an atomic ticket per 16 KiB chunk, ``ld.global.cg``: past the L1):

* **phase A**: the partitions in ``mode_a`` (bit h: partition h reads) each stream the buffer
  ``passes_a`` times in chunk order, so that between two reads of a line every other line the
  partition reads is read once: reuse distance = the footprint a partition streams.
  ``split_a``: partition h reads only half h of the buffer (distinct lines per partition);
  otherwise each reading partition reads the whole buffer (every line from both halves).
* **phase B** (``passes_b > 0``): after every phase-A chunk is done (a counter the phase-A
  programs bump after their load returned; phase-B programs poll it with atomics and
  ``nanosleep``: atomics are not read lookups), the partitions in ``mode_b`` stream the whole
  buffer ``passes_b`` times.

Cases (:func:`cases`, footprints as fractions of torch's ``L2_cache_size``, 50 MB on an H100):

* ``distinct``: every line read once (compulsory misses only): the counters' zero point.
* ``one-F``, ``split-F``, ``shared-F``: 4 passes at footprint F: one half reads; both halves read
  distinct halves; both halves read every line. Expected tex-read hit rate near 75 % (3 of 4
  passes) where the footprint fits the capacity those SMs see, near 0 where it does not (LRU;
  a real replacement policy softens the cliff). Copy model: ``one`` and ``shared`` fall at F = 0.5,
  ``split`` at 1.0. Home-partition model: all three at 1.0.
* ``far-*``: 1/8 of L2, fits anywhere: ``far-A0`` partition 0 reads once; ``far-A0-B1`` then
  partition 1 reads once (does ncu count its lookups as hits? DRAM bytes: far L2 or DRAM?);
  ``far-A0-B1x2`` partition 1 reads twice (is the served line kept near?); ``far-A0-B0`` partition 0
  reads again (near control); ``far-A1-B0`` the mirror of ``far-A0-B1``. The phase-B counts are
  the difference to ``far-A0`` (``far-A1`` for the mirror).
* ``together-N`` (N in ``READERS``, 1 to 64): 1/8 of L2; the first N programs of partition 0 each
  read every chunk once, in the same order, so that N reads of a line arrive at about the same
  time, as a GEMM's programs sharing a block do. Lookups counted as in an LRU: (N - 1) / N hits.
  Fewer would say that a read arriving while the line's fill is under way counts as a miss: what
  the GEMM's orders with many programs on one block (grouped-m:64, column-major) suggest, measured
  on an H100 on 2026-12-06 (bench/results/simulator_validation.md), and what no case above tests.
  Measured on an H100 the same day (bench/results/l2_measure_h100/l2_partition_probe2_*): not so.
  Each line missed once (DRAM read the buffer once) and every lookup after the first hit, but the
  L2 looked up only 1 + about (N - 1) / 4 of the N reads of a line (N = 2: 1, 64: 17): the others
  never reached it as lookups (``lts__t_sectors_srcunit_tex_op_read`` as low as the lookups),
  merged with a request for the same sector already on its way.

Run it under ncu (one launch per case, caches flushed, ``--clock-control none``) with
``python3 -m bench.l2_partition_probe measure --out OUT/l2_partition_probe_GPU.json``; the
launches alone (no ncu) with ``run``. Under ``TRITON_INTERPRET=1`` the kernel runs with a fake
``%smid`` (``on_gpu=False``) and a chunk counter, which tests/bench/test_l2_partition_probe.py
checks.
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

from swizzleperf.profiling.probe_kernels import _smid   # %smid through inline PTX (the dispatch probe's)

BLOCK = 4096                 # fp32 per chunk: 16 KiB, 128 lines
FRACTIONS = (0.125, 0.25, 0.4, 0.5, 0.6, 0.75, 1.0, 1.5)
PASSES = 4
READERS = (1, 2, 4, 8, 16, 32, 64)   # the together-N cases: programs of one half reading the same lines at once
MAX_POLLS = 2_000_000        # a phase-B program gives up after this many polls (flag set)
KERNEL_NAME = "stream_kernel"
# ncu metrics beyond profiling/ncu.py's METRICS, taken only where `ncu --query-metrics` lists them
EXTRA_METRICS = ("lts__t_sectors_srcunit_ltcfabric_lookup_hit", "lts__t_sectors_srcunit_ltcfabric_lookup_miss",
                 "lts__t_sectors_srcunit_tex_lookup_hit", "lts__t_sectors_srcunit_tex_lookup_miss",
                 "lts__t_sectors_srcunit_tex_op_read", "lts__t_sectors_op_read_lookup_hit",
                 "lts__t_sectors_op_read_lookup_miss", "lts__t_sectors_srcunit_tex_op_atom")


@triton.jit
def _nanosleep(dep):
    return tl.inline_asm_elementwise("nanosleep.u32 256;\n mov.u32 $0, 0;", "=r,r", [dep], dtype=tl.int32,
                                     is_pure=False, pack=1)


@triton.jit
def _stream(src_ptr, queue_ptr, done_ptr, count_ptr, first, n_mine, passes, acc,
            BLOCK: tl.constexpr, COUNT: tl.constexpr, SIGNAL: tl.constexpr):
    """Take tickets from ``queue_ptr`` until ``n_mine * passes``; ticket t reads chunk
    ``first + t % n_mine``. Returns the accumulated sum."""
    offs = tl.arange(0, BLOCK)
    total = n_mine * passes
    t = tl.atomic_add(queue_ptr, 1)
    while t < total:
        chunk = first + t % n_mine
        x = tl.load(src_ptr + chunk.to(tl.int64) * BLOCK + offs, cache_modifier=".cg")
        acc += x
        if COUNT:
            tl.atomic_add(count_ptr + chunk, 1)
        if SIGNAL:
            # depends on the loaded values, so it is issued after the load returned
            tl.atomic_add(done_ptr, tl.where(tl.sum(x) == -1234.5, 2, 1))
        t = tl.atomic_add(queue_ptr, 1)
    return acc


@triton.jit
def stream_kernel(src_ptr, part_ptr, queue_ptr, done_ptr, count_ptr, out_ptr, flag_ptr,
                  n_chunks, passes_a, passes_b, target_a, fake_sms, readers,
                  MODE_A: tl.constexpr, SPLIT_A: tl.constexpr, MODE_B: tl.constexpr,
                  BLOCK: tl.constexpr, ON_GPU: tl.constexpr, COUNT: tl.constexpr, MAX_POLLS: tl.constexpr):
    """See the module docstring. ``queue_ptr``: 4 int32 tickets (phase A partition 0, 1; phase B
    0, 1); ``done_ptr``: phase-A chunks done; ``count_ptr``: reads per chunk (``COUNT``);
    ``out_ptr``: BLOCK fp32 per program (the sums: keeps the loads); ``flag_ptr``: per program, 1
    where a phase-B program gave up polling; ``target_a``: phase-A chunks in all; ``readers`` > 0
    (the ``together-N`` cases, ``MODE_A`` and ``MODE_B`` 0): the first ``readers`` programs of
    partition 0 (a ticket each) read every chunk once, in the same order, at about the same time."""
    pid = tl.program_id(0)
    if ON_GPU:
        sm = _smid(pid)
    else:
        sm = pid % fake_sms
    part = tl.load(part_ptr + sm)
    acc = tl.zeros([BLOCK], tl.float32)
    if readers > 0:
        if part == 0:
            if tl.atomic_add(queue_ptr, 1) < readers:
                offs = tl.arange(0, BLOCK)
                for chunk in range(0, n_chunks):
                    acc += tl.load(src_ptr + chunk * BLOCK + offs, cache_modifier=".cg")   # 1/8 of an L2: int32 holds it
                    if COUNT:
                        tl.atomic_add(count_ptr + chunk, 1)
    if ((MODE_A >> part) & 1) == 1:
        if SPLIT_A:
            n_mine = n_chunks // 2
            first = part * n_mine
        else:
            n_mine = n_chunks
            first = part * 0
        acc = _stream(src_ptr, queue_ptr + part, done_ptr, count_ptr, first, n_mine, passes_a, acc,
                      BLOCK, COUNT, MODE_B != 0)
    if MODE_B != 0:
        if ((MODE_B >> part) & 1) == 1:
            polls = 0
            seen = tl.atomic_add(done_ptr, 0)
            while (seen < target_a) & (polls < MAX_POLLS):
                if ON_GPU:
                    polls += 1 + _nanosleep(polls)
                else:
                    polls += 1
                seen = tl.atomic_add(done_ptr, 0)
            tl.store(flag_ptr + pid, (seen < target_a).to(tl.int32))
            acc = _stream(src_ptr, queue_ptr + 2 + part, done_ptr, count_ptr, part * 0, n_chunks, passes_b,
                          acc, BLOCK, COUNT, False)
    tl.store(out_ptr + pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK), acc)


@dataclass(frozen=True)
class Case:
    """One probe launch: footprint ``fraction`` of the L2 (torch's L2_cache_size), phase A
    (``mode_a`` bits: partition 0 = 1, 1 = 2; ``split_a``; ``passes_a``), phase B (``mode_b``,
    ``passes_b``; 0: none)."""
    name: str
    fraction: float
    mode_a: int
    split_a: bool
    passes_a: int
    mode_b: int = 0
    passes_b: int = 0
    question: str = ""
    readers: int = 0


def cases() -> list:
    """Every probe case, in launch order (see the module docstring)."""
    out = [Case("distinct", 1.0, 3, True, 1, question="zero point: every line read once")]
    for f in FRACTIONS:
        out.append(Case(f"one-{f}", f, 1, False, PASSES, question="capacity seen by one half's SMs"))
        out.append(Case(f"split-{f}", f, 3, True, PASSES, question="both halves, distinct lines"))
        out.append(Case(f"shared-{f}", f, 3, False, PASSES, question="both halves read every line: held twice?"))
    out += [Case("far-A0", 0.125, 1, False, 1, question="reference for far-A0-*"),
            Case("far-A0-B1", 0.125, 1, False, 1, 2, 1, "a far line: ncu hit or miss, DRAM or far L2"),
            Case("far-A0-B1x2", 0.125, 1, False, 1, 2, 2, "a far line read again: kept near?"),
            Case("far-A0-B0", 0.125, 1, False, 1, 1, 1, "near control: all hits"),
            Case("far-A1", 0.125, 2, False, 1, question="reference for far-A1-B0"),
            Case("far-A1-B0", 0.125, 2, False, 1, 1, 1, "the mirror of far-A0-B1")]
    # last, so that the cases above keep their launch index: N programs of one half reading each
    # line at about the same time; without a cost to reads that arrive while a line's fill is under
    # way, (N - 1) / N of them hit
    out += [Case(f"together-{n}", 0.125, 0, False, 0, readers=n,
                 question=f"{n} programs of one half read each line at once: do the later reads hit?")
            for n in READERS]
    return out


def expected_reads(case: Case, n_chunks: int) -> np.ndarray:
    """Reads per chunk the case claims (int64 ``[n_chunks]``): what the kernel's chunk counter
    must show."""
    reads = np.zeros(n_chunks, dtype=np.int64)
    readers = [h for h in (0, 1) if (case.mode_a >> h) & 1]
    for h in readers:
        if case.split_a:
            half = n_chunks // 2
            reads[h * half:(h + 1) * half] += case.passes_a
        else:
            reads += case.passes_a
    for h in (0, 1):
        if (case.mode_b >> h) & 1:
            reads += case.passes_b
    reads += case.readers
    return reads


def launch(case: Case, l2_bytes: int, partition_of_sm, device: str = "cuda", on_gpu: bool = True,
           programs: int | None = None, count: bool = False, block: int = BLOCK,
           max_polls: int = MAX_POLLS) -> dict:
    """One launch of ``case``; returns the buffers (torch tensors) for checking: ``src``,
    ``out``, ``queue``, ``done``, ``count``, ``flag``, and ``n_chunks``. ``partition_of_sm``: one
    0/1 per SM; ``programs``: grid size (default 2 per SM); ``max_polls``: a phase-B program's
    polls before it gives up (its flag set)."""
    import torch
    parts = torch.tensor(list(partition_of_sm), dtype=torch.int32, device=device)
    num_sms = len(partition_of_sm)
    n_chunks = max(2, int(round(case.fraction * l2_bytes / (block * 4) / 2)) * 2)   # even: two halves
    gen = torch.Generator(device=device).manual_seed(0)
    src = torch.rand(n_chunks * block, generator=gen, device=device, dtype=torch.float32)
    programs = programs or 2 * num_sms
    queue = torch.zeros(4, dtype=torch.int32, device=device)
    done = torch.zeros(1, dtype=torch.int32, device=device)
    counter = torch.zeros(n_chunks, dtype=torch.int32, device=device)
    out = torch.zeros(programs * block, dtype=torch.float32, device=device)
    flag = torch.zeros(programs, dtype=torch.int32, device=device)
    readers_a = bin(case.mode_a).count("1")
    target_a = (n_chunks if case.split_a else n_chunks * readers_a) * case.passes_a
    stream_kernel[(programs,)](src, parts, queue, done, counter, out, flag,
                               n_chunks, case.passes_a, case.passes_b, target_a, num_sms, case.readers,
                               MODE_A=case.mode_a, SPLIT_A=case.split_a, MODE_B=case.mode_b, BLOCK=block,
                               ON_GPU=on_gpu, COUNT=count, MAX_POLLS=max_polls, num_warps=4)
    return {"src": src, "out": out, "queue": queue, "done": done, "count": counter, "flag": flag,
            "n_chunks": n_chunks, "target_a": target_a}


def run(map_path: Path, only: str | None = None) -> None:
    """Launch every case once (or only ``only``) on the GPU: what ``measure`` profiles. Writes
    nothing; the case names and their launch order are :func:`cases`'."""
    import torch
    stored = json.loads(Path(map_path).read_text())
    l2_bytes = torch.cuda.get_device_properties(0).L2_cache_size
    for case in cases():
        if only and case.name != only:
            continue
        result = launch(case, l2_bytes, stored["partition_of_sm"])
        torch.cuda.synchronize()
        stuck = int(result["flag"].sum().item())
        print(f"{case.name}: {result['n_chunks']} chunks, phase-B programs that gave up polling: {stuck}", flush=True)


def _extra_metrics(ncu: str) -> list:
    """Those of EXTRA_METRICS this ncu knows on this GPU (``--query-metrics``), as ``.sum``."""
    try:
        text = subprocess.run([ncu, "--query-metrics"], capture_output=True, text=True, timeout=120).stdout
    except (OSError, subprocess.TimeoutExpired):
        return []
    known = {line.split()[0] for line in text.splitlines() if line.strip()}
    return [f"{m}.sum" for m in EXTRA_METRICS if m in known]


def per_launch(text: str, kernel_name: str) -> list:
    """ncu's ``--csv --page raw`` log as one dict of metrics per profiled launch, in ID order
    (profiling/ncu.py's ``parse_csv`` on each launch's row)."""
    from swizzleperf.profiling.ncu import parse_csv
    import pandas as pd
    import io
    lines = [line for line in text.splitlines() if line.startswith('"')]
    table = pd.read_csv(io.StringIO("\n".join(lines)), thousands=",", dtype=str)
    ids = sorted({int(float(i)) for i in pd.to_numeric(table["ID"], errors="coerce").dropna()})
    rows = []
    for i in ids:
        row_lines = [line for line in lines[1:] if line.split(",", 1)[0].strip('"') == str(i)]
        rows.append(parse_csv("\n".join([lines[0], *row_lines]), kernel_name))
    return rows


def measure(out: Path, map_out: Path | None = None) -> dict:
    """The partition map (dispatch_probe.partitions, this chip), then every case under ncu in one
    process (one profiled launch per case, caches flushed per pass, ``--clock-control none``,
    profiling/ncu.py's METRICS plus the extra L2 counters this ncu has). Writes ``out`` (JSON:
    device, L2 bytes, the map, per case its parameters, chunk count and metrics)."""
    import torch
    from swizzleperf.profiling import dispatch_probe
    from swizzleperf.profiling.ncu import METRICS, find_ncu
    ncu = find_ncu()
    if ncu is None:
        raise SystemExit("ncu not found")
    props = torch.cuda.get_device_properties(0)
    started = time.time()
    pmap = dispatch_probe.partitions(props.multi_processor_count, repeats=1)
    map_seconds = time.time() - started
    map_path = map_out or out.with_name(out.stem + "_map.json")
    map_path.write_text(json.dumps(pmap))
    metrics = [*METRICS, *_extra_metrics(ncu)]
    log = out.with_name(out.stem + "_ncu.csv")
    command = [ncu, "--clock-control", "none", "--kernel-name", KERNEL_NAME, "--metrics", ",".join(metrics),
               "--csv", "--page", "raw", "--print-units", "base", "--log-file", str(log),
               sys.executable, "-m", "bench.l2_partition_probe", "run", "--map", str(map_path)]
    started = time.time()
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=200)
    except subprocess.TimeoutExpired as exc:   # keep what ncu logged of the cases it reached
        proc = subprocess.CompletedProcess(command, -9, str(exc.stdout or "")[-4000:], "timed out after 200 s")
    text = log.read_text() if log.exists() else ""
    rows = per_launch(text, KERNEL_NAME) if '"ID"' in text else []
    n = len(cases())
    result = {"device": torch.cuda.get_device_name(), "l2_bytes": props.L2_cache_size,
              "num_sms": props.multi_processor_count, "partition_map_seconds": round(map_seconds, 1),
              "partitions": [int(np.sum(np.array(pmap["partition_of_sm"]) == h)) for h in (0, 1)],
              "references_agree": pmap["references_agree"], "ncu_command": " ".join(command[:-4]) + " ...",
              "ncu_seconds": round(time.time() - started, 1), "ncu_returncode": proc.returncode,
              "run_stdout": proc.stdout[-4000:], "run_stderr": proc.stderr[-4000:],
              "profiled": "one launch per case (ncu kernel replay, caches flushed per pass)",
              "cases": []}
    for i, case in enumerate(cases()):
        n_chunks = max(2, int(round(case.fraction * props.L2_cache_size / (BLOCK * 4) / 2)) * 2)
        result["cases"].append({**asdict(case), "n_chunks": n_chunks, "footprint_bytes": n_chunks * BLOCK * 4,
                                "reads": int(expected_reads(case, n_chunks).sum()),
                                "metrics": rows[i] if i < len(rows) and len(rows) == n else None})
    if len(rows) != n:
        result["error"] = f"ncu profiled {len(rows)} launches, expected {n} (one per case)"
        result["all_rows"] = rows
    out.write_text(json.dumps(result, indent=1))
    return result


def summary(result: dict) -> str:
    """``measure``'s JSON as one markdown table: per case its footprint (share of the whole L2),
    the sectors its SMs read as ncu counted them against the sectors the case reads (a check that
    ncu saw the whole launch), the SMs' read-lookup hit rate (tex), the fabric lookups' hits and
    misses (``ltcfabric``: lines one partition asked the other for) and the DRAM bytes read,
    against the footprint. Cases ncu did not profile say so."""
    lines = ["| case | footprint (of L2) | sectors read / expected | SM read hit | fabric hit / miss (sectors) "
             "| DRAM read / footprint | question |", "|---|---|---|---|---|---|---|"]
    for case in result["cases"]:
        m = case.get("metrics") or {}
        expected = case["reads"] * BLOCK * 4 / 32
        hit = m.get("lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum")
        miss = m.get("lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum")
        if hit is None or miss is None:
            lines.append(f"| {case['name']} | {case['fraction']:.3f} | not profiled | | | | {case['question']} |")
            continue
        f_hit = m.get("lts__t_sectors_srcunit_ltcfabric_lookup_hit.sum")
        f_miss = m.get("lts__t_sectors_srcunit_ltcfabric_lookup_miss.sum")
        fabric = f"{f_hit:.3g} / {f_miss:.3g}" if f_hit is not None and f_miss is not None else "not counted"
        dram = m.get("dram__bytes_read.sum")
        lines.append(f"| {case['name']} | {case['fraction']:.3f} | {(hit + miss) / expected:.3f} "
                     f"| {100 * hit / max(1.0, hit + miss):.1f} % | {fabric} "
                     f"| {dram / case['footprint_bytes']:.2f} | {case['question']} |" if dram is not None else
                     f"| {case['name']} | {case['fraction']:.3f} | {(hit + miss) / expected:.3f} "
                     f"| {100 * hit / max(1.0, hit + miss):.1f} % | {fabric} | not counted | {case['question']} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run")
    r.add_argument("--map", required=True, help="a partition map (JSON with partition_of_sm)")
    r.add_argument("--only")
    m = sub.add_parser("measure")
    m.add_argument("--out", required=True)
    sub.add_parser("cases")
    t = sub.add_parser("summary", help="measure's JSON as a markdown table")
    t.add_argument("result")
    args = parser.parse_args()
    if args.command == "run":
        run(Path(args.map), args.only)
    elif args.command == "summary":
        print(summary(json.loads(Path(args.result).read_text())), end="")
    elif args.command == "measure":
        res = measure(Path(args.out))
        print(json.dumps({k: v for k, v in res.items() if k not in ("cases", "all_rows", "run_stdout")})[:2000])
    else:
        for case in cases():
            print(case.name, case.question)


if __name__ == "__main__":
    main()
