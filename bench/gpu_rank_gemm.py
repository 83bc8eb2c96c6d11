"""The per-rank GEMM of the distributed kernels on ONE GPU against cuBLAS: every per-rank shape
of the distributed benchmark problems at W = 2, 4 and 8, and the bundled GEMM's default problem.

    python3 -m bench.gpu_rank_gemm warm --jobs 16          # compile every configuration in parallel
    python3 -m bench.gpu_rank_gemm check --out $OUT/check.json
    python3 -m bench.gpu_rank_gemm tune --part 0/2 --out $OUT/tune0.json   # one GPU each part
    python3 -m bench.gpu_rank_gemm probe --out $OUT/loop_options.json     # flatten / warp-specialize
    python3 -m bench.gpu_rank_gemm report $OUT/tune*.json --out bench/results/rank_gemm_hopper \
        --configs-out bench/results/gemm_configs_hopper.json
    python3 -m bench.gpu_rank_gemm merge H100/rank_gemm_hopper.json H200/rank_gemm_hopper.json \
        --out bench/results/rank_gemm_hopper --configs H100/gemm_configs_hopper.json \
        H200/gemm_configs_hopper.json --configs-out bench/results/gemm_configs_hopper.json

(bench/gpu_rank_gemm.sh runs them all on a machine of one or two GPUs.)

Shards, as the kernels take them (kernels/distributed/*.py, ``compute_shape``): all-gather + GEMM
and GEMM + all-scatter give each rank ``M x N/W x K`` (B split by columns), GEMM +
reduce-scatter ``M x N x K/W`` (each rank's partial product over its K slice). Shapes that
several problems share are tuned once.

The GEMM is kernels/gemm.py's persistent schedule (kernels/schedule/persistent_gemm.py) with the catalog's
``grouped-m:8`` tile order spliced in (the order the distributed kernels' optimizer starts from:
their spec's ``expert``), on all SMs. Each shape is tuned by ``kernels/schedule/gemm_tuning.tune``:
every candidate configuration checked on fresh random inputs with C poisoned, screened, and the
best three timed against ``torch.matmul`` (cuBLAS) interleaved launch by launch, L2 flushed
before each launch, CUDA events, 25 rounds; medians and interquartile ranges.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import json
import math
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KERNELS = ("all_gather_gemm", "gemm_reduce_scatter", "gemm_all_scatter")
WORLD_SIZES = (2, 4, 8)
#: The bundled GEMM's default problem (kernels/gemm.py), timed the same way.
BUNDLED = {"M": 16384, "N": 16384, "K": 4096}
ORDER = "grouped-m:8"


def shapes() -> list:
    """``[{"M", "N", "K", "sources": [(kernel, problem, world_size), ...]}]``: every per-rank shape
    of the distributed kernels' bench problems at W = 2, 4, 8, then the bundled GEMM's default."""
    import importlib
    by_shape = {}
    for kernel in KERNELS:
        spec = importlib.import_module(f"swizzleperf.kernels.distributed.{kernel}").SPEC
        for problem in spec.bench_problems:
            for world in WORLD_SIZES:
                shape = spec.compute_shape(spec.problems[problem], world)
                key = (shape["M"], shape["N"], shape["K"])
                by_shape.setdefault(key, []).append([kernel, problem, world])
    key = (BUNDLED["M"], BUNDLED["N"], BUNDLED["K"])
    by_shape.setdefault(key, []).append(["gemm", "default", 1])
    return [{"M": m, "N": n, "K": k, "sources": s} for (m, n, k), s in by_shape.items()]


def gemm_module():
    """kernels/gemm.py with the ``grouped-m:8`` order, written beside the Triton cache so every
    process loads the same source (one compilation per configuration)."""
    from swizzleperf.agent.verification.candidate import splice, target_args
    from swizzleperf.agent.verification.load import load_kernel
    from swizzleperf.agent.verification.swizzles import catalog_source
    source = (ROOT / "kernels" / "gemm.py").read_text()
    folder = Path(os.environ.get("TMPDIR", "/tmp")) / "swizzleperf_rank_gemm"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "gemm_grouped.py"
    text = splice(source, "swizzle", catalog_source(ORDER, target_args(source, "swizzle")))
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
    return load_kernel(path)[1]


def _all_configs(programs: int) -> list:
    from swizzleperf.kernels.schedule import gemm_tuning
    seen, out = set(), []
    for shape in shapes():   # with the tail configurations kernels/gemm.py offers (check, warm)
        for config in gemm_tuning.candidates(shape["M"], shape["N"], shape["K"], programs, tail=True):
            key = json.dumps(config, sort_keys=True)
            if key not in seen:
                seen.add(key)
                out.append(config)
    return out


# ------------------------------------------------------------------------------------------ warm
def _warm_one(args: tuple) -> str:
    config, device = args
    import torch
    torch.cuda.set_device(device)
    spec = gemm_module()
    # 1024 x 1024 x 1024 on 5 programs: sizes and strides divisible by 16 like every real shape
    # (the same specialisation), and a tail of tiles for STREAM_K to split.
    inputs = spec.make_inputs({"M": 1024, "N": 1024, "K": 1024}, 0, "cuda", "bfloat16")
    started = time.time()
    try:
        spec.launch(inputs, **config, NUM_SMS=5)
        torch.cuda.synchronize()
        return f"{json.dumps(config)} {time.time() - started:.1f}s"
    except Exception as exc:  # reported; the configuration is then rejected by the check
        return f"{json.dumps(config)} FAILED {type(exc).__name__}: {str(exc)[:300]}"


def warm(jobs: int) -> None:
    """Compile every configuration of every shape once, ``jobs`` processes at a time."""
    import multiprocessing

    import torch
    devices = torch.cuda.device_count()
    configs = _all_configs(torch.cuda.get_device_properties(0).multi_processor_count)
    configs += [{**c, "FLATTEN": False} for c in _loop_variants()]
    work = [(c, i % devices) for i, c in enumerate(configs)]
    started = time.time()
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(jobs, mp_context=context) as pool:
        for line in pool.map(_warm_one, work):
            print("warm", line, flush=True)
    print(f"warm: {len(work)} variants in {time.time() - started:.0f} s", flush=True)


# ----------------------------------------------------------------------------------------- check
def check(out: str) -> int:
    """Every configuration, both STREAM_K splits and several grid sizes, on ragged shapes with C
    poisoned, against the fp32 product; plus the pointer path (a K whose rows are not 16-byte
    aligned) and the epilogue in halves. Exit status 1 on any failure."""
    import torch

    from swizzleperf.kernels.schedule import gemm_tuning
    spec = gemm_module()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    rows, failures = [], 0
    # ragged against every tile (M, N, K multiples of 16, not of 64 / 128 / 256)
    cases = [({"M": 1040, "N": 1072, "K": 1104}, c, p) for c in _all_configs(sms) for p in (sms, 37)]
    # a tail of narrower tiles, on a ragged shape where tail_rows gives it one (6 rows at 132 SMs)
    cases += [({"M": 4000, "N": 2528, "K": 1104}, c, sms) for c in _all_configs(sms) if c.get("TAIL_BLOCK_N")]
    pointer = {**gemm_tuning.DEFAULT_CONFIG, "STREAM_K": 1}
    cases += [({"M": 1000, "N": 1000, "K": 1004}, pointer, sms),          # rows of A not 16 B aligned
              ({"M": 1040, "N": 1072, "K": 1104}, {**pointer, "num_stages": 4, "EPILOGUE_SUBTILE": 1}, sms)]
    for seed, (shape, config, programs) in enumerate(cases):
        inputs = spec.make_inputs(shape, 100 + seed, "cuda", "bfloat16")
        expected = torch.matmul(inputs["a"].float(), inputs["b"].float())
        inputs["c"].fill_(float("nan"))
        try:
            spec.launch(inputs, **config, NUM_SMS=programs)
            torch.cuda.synchronize()
            error = gemm_tuning.relative_error(inputs["c"], expected)
            message = ""
        except Exception as exc:  # recorded per case
            error, message = math.inf, f"{type(exc).__name__}: {str(exc)[:300]}"
        ok = error <= spec.tolerance["bfloat16"]
        failures += not ok
        rows.append({**shape, "config": config, "programs": programs, "rel_error": error,
                     "schedule": gemm_tuning.schedule_words(shape["M"], shape["N"], config, programs),
                     "ok": ok, "message": message})
        if not ok:
            print(f"check FAILED {shape} {gemm_tuning.name(config)} P={programs}: {error} {message}",
                  flush=True)
    Path(out).write_text(json.dumps({"device": torch.cuda.get_device_name(), "rows": rows}, indent=1))
    print(f"check: {len(rows) - failures} of {len(rows)} cases within {spec.tolerance['bfloat16']} "
          f"(worst {max(r['rel_error'] for r in rows):.2e})", flush=True)
    return 1 if failures else 0


# ------------------------------------------------------------------------------------------ tune
def tune(part: str, out: str, rounds: int, cache: str | None) -> None:
    """Tune the shapes of part ``i/n`` (every n-th shape from i) on the current GPU."""
    import torch
    import triton

    from swizzleperf.kernels.schedule import gemm_tuning
    index, parts = (int(x) for x in part.split("/"))
    spec = gemm_module()
    mine = shapes()[index::parts]
    results = []
    for shape in mine:
        started = time.time()
        record = gemm_tuning.tune(spec.launch, shape["M"], shape["N"], shape["K"],
                                  kernel=f"gemm/{ORDER}", rounds=rounds,
                                  path=Path(cache) if cache else None,
                                  log=lambda line: print(line, flush=True))
        results.append({**shape, **record})
        print(f"{shape['M']}x{shape['N']}x{shape['K']}: {gemm_tuning.name(record['config'])} "
              f"{record['ours_ms']:.4f} ms (IQR {record['spread_ms']:.4f}) cuBLAS "
              f"{record['cublas_ms']:.4f} -> {record['cublas_ms'] / record['ours_ms']:.3f}x "
              f"[{time.time() - started:.1f} s]", flush=True)
        torch.cuda.empty_cache()
        # after every shape: a run cut short by its time limit keeps the shapes it finished
        Path(out).write_text(json.dumps({"device": torch.cuda.get_device_name(), "triton": triton.__version__,
                                         "torch": torch.__version__, "date": time.strftime("%Y-%m-%d"),
                                         "part": part, "rows": results}, indent=1))


#: The kernels whose GEMM has a warp-specialized path (``WS_GEMM``, kernels/distributed/tiles.py):
#: a shape only they produce may take it.
WS_KERNELS = ("all_gather_gemm", "gemm_all_scatter")


def ws(inputs: list, out: str, rounds: int) -> None:
    """For each tuned shape (``tune``'s rows) that only WS_KERNELS produce: the warp-specialized
    GEMM (kernels/schedule/ws_gemm.py) at each of ``tiles.WS_TILE_CONFIGS`` checked on fresh
    random inputs with C poisoned, then timed interleaved with cuBLAS and the tuned Triton
    configuration (``rounds`` rounds, L2 flushed, CUDA events); the row keeps the faster of the
    two schedules, with this run's timings of it and of cuBLAS. Other rows are copied as they
    are. Writes ``tune``'s format (``report`` reads it), plus per row ``ws_ms`` / ``triton_ms``,
    ``triton_config``, and ``default_config`` / ``default_ms``: the Triton GEMM or a WS
    configuration without a second consumer's rows (``choose_schedules``, ``AG_WS_MARGIN`` at
    all-gather + GEMM's shapes), which ``report`` writes to the configuration cache (the kernels'
    default at the shape). The 320-row tile (BLOCK_M_LOW 64) is
    in the table where it is faster alone but is not a default: in AG + GEMM push_copy_engine its
    tiles span two ranks' rows, and the grouped order reaches the peers' rows before they have
    arrived (bench/results/ws_dist_h100x4/)."""
    import torch

    from swizzleperf.kernels.distributed.tiles import WS_TILE_CONFIGS, ws_config
    from swizzleperf.kernels.schedule import gemm_tuning, ws_gemm
    spec = gemm_module()
    rows, header = [], {}
    for path in inputs:
        data = json.loads(Path(path).read_text())
        header = {k: v for k, v in data.items() if k != "rows"}
        rows += data["rows"]
    # every row written first: a run cut short by its time limit keeps the tuned rows it did not reach
    Path(out).write_text(json.dumps({**header, "rows": rows}, indent=1))
    for index, row in enumerate(rows):
        if not all(kernel in WS_KERNELS for kernel, _, _ in row["sources"]):
            continue
        started = time.time()
        inputs_ = spec.make_inputs(row, 7, "cuda", "bfloat16")
        a, b = inputs_["a"], inputs_["b"]
        expected = torch.matmul(a.float(), b.float())
        c_ref = torch.empty_like(inputs_["c"])
        launches = {"cublas": lambda: torch.matmul(a, b, out=c_ref),
                    "triton": lambda: spec.launch(inputs_, **row["config"], NUM_SMS=row["programs"])}
        ws_out, errors = {}, {}
        for config in WS_TILE_CONFIGS:
            meta = {**ws_config(config), "GROUP_M": 8}   # grouped-m:8, the kernels' swizzle
            label = gemm_tuning.name(config)
            c = torch.full_like(inputs_["c"], float("nan"))
            try:
                ws_gemm.matmul(a, b, meta, c=c, programs=row["programs"])
                torch.cuda.synchronize()
                errors[label] = gemm_tuning.relative_error(c, expected)
            except Exception as exc:  # recorded, not fatal
                errors[label] = f"{type(exc).__name__}: {str(exc)[:200]}"
            if isinstance(errors[label], float) and errors[label] <= spec.tolerance["bfloat16"]:
                launches[label] = lambda meta=meta, c=c: ws_gemm.matmul(a, b, meta, c=c, programs=row["programs"])
                ws_out[label] = config
        for fn in launches.values():
            fn()
        torch.cuda.synchronize()
        times = gemm_tuning.interleaved(launches, rounds)
        margin = AG_WS_MARGIN if any(k == "all_gather_gemm" for k, _, _ in row["sources"]) else 0.0
        best, default = choose_schedules({n: t["median_ms"] for n, t in times.items()}, ws_out, margin)
        record = dict(row)
        record.update({"triton_config": row["config"],
                       "default_config": row["config"] if default == "triton" else ws_out[default],
                       "default_ms": times[default]["median_ms"],
                       "triton_ms": times["triton"]["median_ms"], "ws_errors": errors,
                       "ws_ms": {n: times[n]["median_ms"] for n in ws_out},
                       "ours_ms": times[best]["median_ms"], "spread_ms": times[best]["spread_ms"],
                       "cublas_ms": times["cublas"]["median_ms"],
                       "cublas_spread_ms": times["cublas"]["spread_ms"]})
        if best != "triton":
            record.update({"config": ws_out[best], "rel_error": errors[best],
                           "schedule": f"warp-specialized ({gemm_tuning.tile_count(ws_out[best], row['M'], row['N'])} tiles)"})
        rows[index] = record
        print(f"ws {row['M']}x{row['N']}x{row['K']}: cuBLAS {times['cublas']['median_ms']:.4f} "
              + "  ".join(f"{n} {times[n]['median_ms']:.4f}" for n in times if n != "cublas")
              + f" -> {best} {record['cublas_ms'] / record['ours_ms']:.3f}x [{time.time() - started:.1f} s]",
              flush=True)
        torch.cuda.empty_cache()
        # after every shape: a run cut short by its time limit keeps what it finished
        Path(out).write_text(json.dumps({**header, "rows": rows}, indent=1))


#: How much slower alone (a fraction of the Triton GEMM's time) the WS GEMM may be and still be the
#: default at a shape that all-gather + GEMM produces. Inside its push_copy_engine, the fastest
#: pattern at every bench problem, the WS GEMM's load warp waits for the peers' rows while the
#: consumers compute, where the Triton loop's waits stop its only warps: paired on two H100s
#: (bench/results/ws_all_gather_h100x2/, 2026-11-26), WS over Triton inside was 0.978 at llama8b-up-4k
#: (0.317 against 0.324 ms) where alone it was 0.996-1.002 over five runs, 0.991 at qkv-4k (alone
#: 0.984-1.001) and 1.009 at up-8k (alone 1.023-1.063, so the Triton GEMM stays the default there).
AG_WS_MARGIN = 0.01


def choose_schedules(median_ms: dict, ws_configs: dict, margin: float = 0.0) -> tuple:
    """``(best, default)``: the fastest of "triton" and the WS configurations ``ws_configs``
    (label -> configuration) by ``median_ms`` (label -> ms; a tie goes to the Triton GEMM), and
    the kernels' default: the fastest WS configuration that every WS pattern runs (not the 320-row
    tile, BLOCK_M_LOW, whose tiles span two ranks' rows in AG + GEMM push_copy_engine: ``ws``)
    where it is faster than the Triton GEMM by more than ``-margin`` of the Triton GEMM's time
    (``AG_WS_MARGIN`` at all-gather + GEMM's shapes, else 0: strictly faster), else the Triton GEMM."""
    best = min(["triton", *ws_configs], key=median_ms.__getitem__)
    plain = [n for n, c in ws_configs.items() if not c.get("BLOCK_M_LOW")]
    fastest_ws = min(plain, key=median_ms.__getitem__) if plain else None
    default = (fastest_ws if fastest_ws and median_ms[fastest_ws] < median_ms["triton"] * (1 + margin)
               else "triton")
    return best, default


def _loop_variants() -> list:
    """The default configuration with the persistent loop flattened or not (``FLATTEN``) and,
    where it changes the kernel (``warp_specialize_effective``), warp-specialized or not: what
    ``probe`` compares."""
    from swizzleperf.kernels.schedule import gemm_tuning
    from swizzleperf.kernels.schedule.persistent_gemm import warp_specialize_effective
    return [{**gemm_tuning.DEFAULT_CONFIG, "FLATTEN": f, "WARP_SPECIALIZE": w}
            for f in (True, False) for w in ((0, 1) if warp_specialize_effective() else (0,))]


def probe(out: str) -> None:
    """The persistent loop's options, ``tl.range(..., flatten=, warp_specialize=)``, against
    each other at three shapes, interleaved: what the installed Triton makes of them here."""
    import torch

    from swizzleperf.kernels.schedule import gemm_tuning
    spec = gemm_module()
    rows = []
    for shape in ({"M": 8192, "N": 8192, "K": 8192}, {"M": 4096, "N": 5120, "K": 8192},
                  {"M": 4096, "N": 2560, "K": 8192}):
        inputs = spec.make_inputs(shape, 5, "cuda", "bfloat16")
        expected = torch.matmul(inputs["a"].float(), inputs["b"].float())
        row = {**shape}
        launches = {}
        for config in _loop_variants():
            label = f"flatten={config['FLATTEN']} ws={config['WARP_SPECIALIZE']}"
            inputs["c"].fill_(float("nan"))
            try:
                spec.launch(inputs, **config)
                torch.cuda.synchronize()
                row[f"{label} rel_error"] = gemm_tuning.relative_error(inputs["c"], expected)
                launches[label] = lambda config=config: spec.launch(inputs, **config)
            except Exception as exc:  # recorded: the installed Triton cannot build it here
                row[f"{label} error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
        if launches:
            timed = gemm_tuning.interleaved(launches, 15)
            row.update({f"{k} ms": round(v["median_ms"], 5) for k, v in timed.items()})
        rows.append(row)
        print("probe", json.dumps(row), flush=True)
    Path(out).write_text(json.dumps(rows, indent=1))


# ---------------------------------------------------------------------------------------- report
def report(inputs: list, out: str, configs_out: str = "") -> None:
    """rank_gemm_hopper.{json,md}: one row per (source problem, world size), the geometric mean
    of cublas_ms / ours_ms per device over the distributed kernels' shapes, the worst shape,
    and the bundled GEMM's default problem."""
    rows = []
    for path in inputs:
        data = json.loads(Path(path).read_text())
        for r in data["rows"]:
            for kernel, problem, world in r["sources"]:
                rows.append({"device": r["device"], "M": r["M"], "N": r["N"], "K": r["K"],
                             "kernel": kernel, "source_problem": problem, "world_size": world,
                             "schedule": r["schedule"],
                             "config": r["config"], "ours_ms": r["ours_ms"],
                             "cublas_ms": r["cublas_ms"], "spread_ms": r["spread_ms"],
                             "cublas_spread_ms": r["cublas_spread_ms"], "rel_error": r["rel_error"],
                             "programs": r["programs"], "triton": r["triton"], "date": r["date"],
                             "ratio": r["cublas_ms"] / r["ours_ms"]})
    write_report(rows, out)
    if configs_out:  # the winners in the cache's format: bench/dist_bench.py --gemm-configs
        from swizzleperf.kernels.schedule.gemm_tuning import cache_key
        entries = {}
        for path in inputs:
            for r in json.loads(Path(path).read_text())["rows"]:
                key = cache_key(f"gemm/{ORDER}", r["device"], r["programs"], "bfloat16", r["M"], r["N"],
                                r["K"], r["triton"])
                entries[key] = {k: r[k] for k in ("config", "ours_ms", "cublas_ms", "spread_ms", "schedule",
                                                  "device", "programs", "triton", "date")}
                if "default_config" in r:   # the cache holds the kernels' default (``ws``)
                    entries[key].update(config=r["default_config"], ours_ms=r["default_ms"],
                                        alternatives=alternatives(r))
        Path(configs_out).parent.mkdir(parents=True, exist_ok=True)
        Path(configs_out).write_text(json.dumps(entries, indent=1, sort_keys=True))


def alternatives(row: dict) -> list:
    """The schedules ``ws`` timed in the same rounds as a row's default that could be a default too
    (the Triton GEMM and the WS configurations without a second consumer's rows), as
    ``[{"config", "ours_ms"}]``: gemm_tuning.ranked_configs ranks them for a pattern that runs
    the GEMM on fewer programs than were measured (GEMM + all-scatter producer_consumer: at
    8192 x 896 x 14336, W = 4, the WS GEMM's 256 tiles take three waves of 116 programs where the
    Triton GEMM's 224 take two; with it that pattern took 0.465 ms, with the Triton GEMM 0.415,
    bench/results/w4_checks_h100x4/)."""
    from swizzleperf.kernels.distributed.tiles import WS_TILE_CONFIGS
    from swizzleperf.kernels.schedule.gemm_tuning import name
    timed = [(row["triton_config"], row["triton_ms"])]
    timed += [(config, row["ws_ms"][name(config)]) for config in WS_TILE_CONFIGS
              if not config.get("BLOCK_M_LOW") and name(config) in row.get("ws_ms", {})]
    return [{"config": config, "ours_ms": ms} for config, ms in timed if config != row["default_config"]]


def merge(inputs: list, out: str, configs: list, configs_out: str = "") -> None:
    """One report from several reports' JSON (``report``'s rows, e.g. one per device or session):
    a row per (device, kernel, source problem, W), a later file's row replacing an earlier one's;
    with ``configs_out``, the configuration caches in ``configs`` merged the same way."""
    rows = {}
    for path in inputs:
        for r in json.loads(Path(path).read_text())["rows"]:
            rows[(r["device"], r["kernel"], r["source_problem"], r["world_size"])] = r
    write_report(list(rows.values()), out)
    if configs_out:
        entries = {}
        for path in configs:
            entries.update(json.loads(Path(path).read_text()))
        Path(configs_out).parent.mkdir(parents=True, exist_ok=True)
        Path(configs_out).write_text(json.dumps(entries, indent=1, sort_keys=True))


def write_report(rows: list, out: str) -> None:
    """``out``.json and ``out``.md from the rows: per device the geometric mean of cublas_ms /
    ours_ms over the distinct per-rank shapes (the bundled GEMM's problem left out), the count
    below 0.95 and the worst shape."""
    rows.sort(key=lambda r: (r["device"], r["kernel"] == "gemm", r["kernel"], r["source_problem"],
                             r["world_size"]))
    summary = {}
    for device in sorted({r["device"] for r in rows}):
        shapes_seen = {}
        for r in rows:
            if r["device"] == device and r["kernel"] != "gemm":
                shapes_seen[(r["M"], r["N"], r["K"])] = r["ratio"]
        ratios = list(shapes_seen.values())
        worst = min(shapes_seen, key=shapes_seen.get)
        summary[device] = {"geomean_cublas_over_ours": math.exp(sum(map(math.log, ratios)) / len(ratios)),
                           "shapes": len(ratios), "below_0_95": sum(x < 0.95 for x in ratios),
                           "worst_shape": "x".join(map(str, worst)), "worst_ratio": shapes_seen[worst]}
    command = "bash bench/gpu_rank_gemm.sh (bench/gpu_rank_gemm.py warm / check / tune / ws / report)"
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(f"{out}.json").write_text(json.dumps({"command": command, "summary": summary, "rows": rows}, indent=1))
    lines = [f"# Per-rank GEMM against cuBLAS on Hopper (measured: CUDA events)", "",
             f"`{command}`: kernels/gemm.py's persistent schedule (kernels/schedule/persistent_gemm.py, "
             f"tile order {ORDER}, all SMs) tuned per shape by kernels/schedule/gemm_tuning.py; at the "
             f"shapes only {' and '.join(WS_KERNELS)} produce, the faster of it and their warp-specialized "
             "Gluon GEMM (WS_GEMM, kernels/schedule/ws_gemm.py; schedule \"warp-specialized\", config "
             "\"gluon\") timed in one more interleaved run; each row timed against torch.matmul interleaved "
             "launch by launch, L2 flushed before each launch, median of the rounds (spread = "
             "interquartile range of ours). ratio = cublas_ms / ours_ms (> 1: ours faster).", ""]
    for device, s in summary.items():
        lines.append(f"- **{device}**: geometric mean {s['geomean_cublas_over_ours']:.3f} over "
                     f"{s['shapes']} distinct per-rank shapes; {s['below_0_95']} below 0.95; worst "
                     f"{s['worst_shape']} at {s['worst_ratio']:.3f}.")
    lines += ["", "| device | kernel | source problem | W | M x N x K | schedule | config | ours ms | "
              "cuBLAS ms | spread ms | ratio |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    from swizzleperf.kernels.schedule.gemm_tuning import name
    for r in rows:
        lines.append(f"| {r['device']} | {r['kernel']} | {r['source_problem']} | {r['world_size']} | "
                     f"{r['M']} x {r['N']} x {r['K']} | {r['schedule']} | {name(r['config'])} | "
                     f"{r['ours_ms']:.4f} | {r['cublas_ms']:.4f} | {r['spread_ms']:.4f} | {r['ratio']:.3f} |")
    Path(f"{out}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines[-len(rows) - 2:]))
    for device, s in summary.items():
        print(f"{device}: geomean {s['geomean_cublas_over_ours']:.3f}, worst {s['worst_shape']} "
              f"{s['worst_ratio']:.3f}, {s['below_0_95']} below 0.95 of {s['shapes']}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("warm").add_argument("--jobs", type=int, default=16)
    sub.add_parser("check").add_argument("--out", required=True)
    t = sub.add_parser("tune")
    t.add_argument("--part", default="0/1")
    t.add_argument("--out", required=True)
    t.add_argument("--rounds", type=int, default=25)
    t.add_argument("--cache", default=None, help="the configuration cache (default: gemm_tuning's)")
    sub.add_parser("probe").add_argument("--out", required=True)
    w = sub.add_parser("ws", help="the warp-specialized GEMM against the tuned one, where the kernels have it")
    w.add_argument("inputs", nargs="+")
    w.add_argument("--out", required=True)
    w.add_argument("--rounds", type=int, default=25)
    r = sub.add_parser("report")
    r.add_argument("inputs", nargs="+")
    r.add_argument("--out", required=True, help="path prefix of OUT.json / OUT.md")
    r.add_argument("--configs-out", default="", help="the winning configurations as a gemm_tuning cache file")
    g = sub.add_parser("merge", help="one report from several reports' JSON (a later row replaces an earlier one)")
    g.add_argument("inputs", nargs="+")
    g.add_argument("--out", required=True, help="path prefix of OUT.json / OUT.md")
    g.add_argument("--configs", nargs="*", default=[], help="configuration cache files to merge")
    g.add_argument("--configs-out", default="")
    args = parser.parse_args(argv)
    if args.command == "warm":
        warm(args.jobs)
    elif args.command == "check":
        return check(args.out)
    elif args.command == "tune":
        tune(args.part, args.out, args.rounds, args.cache)
    elif args.command == "probe":
        probe(args.out)
    elif args.command == "ws":
        ws(args.inputs, args.out, args.rounds)
    elif args.command == "merge":
        merge(args.inputs, args.out, args.configs, args.configs_out)
    else:
        report(args.inputs, args.out, args.configs_out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
