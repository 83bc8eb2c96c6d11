"""Choosing the GEMM schedule's configuration per shape by measurement, cached on disk.

A *configuration* is the launch knobs of kernels/schedule/persistent_gemm.py's schedule: ``BLOCK_M``,
``BLOCK_N``, ``BLOCK_K``, ``num_warps``, ``num_stages`` and ``STREAM_K``. ``tune`` checks every
candidate on fresh random inputs with the output poisoned, screens them, then times the best few
and ``torch.matmul`` (cuBLAS) **interleaved launch by launch** (CUDA events around each launch,
L2 flushed before each, the order rotated every round) and keeps the fastest median. The result
goes to a JSON cache keyed by kernel, device name, SMs given to the GEMM, triton version, dtype
and M, N, K, so that a shape is tuned once per machine.

Why not Triton's ``@triton.autotune`` with ``cache_results``: it times each configuration by
itself in turn (``do_bench``), and on an H200 the GEMM's clock stepped between levels every
second or so, so configurations timed in turn differ by up to 2 % for nothing
(agent/verification/worker.py's ``compare`` stage, bench/results/timing_integrity/before_h200.json); it cannot time
cuBLAS beside them in the same rounds, which is the comparison this project reports; and its
cache key has no device name and no SM count (the distributed kernels give the GEMM
``NUM_SMS - COMM_SMS`` programs). The cache here is one small JSON file, written atomically.

Cache location: ``$SWIZZLEPERF_GEMM_CACHE`` if set, else
``$XDG_CACHE_HOME/swizzleperf/gemm_configs.json`` (``~/.cache/...`` without XDG_CACHE_HOME).
The file is read as data only (#41): within ``CACHE_MAX_BYTES`` and ``MAX_JSON_DEPTH``, each entry
checked against ``CacheEntry``; a file that is not a JSON object of bounded size and depth is one
line (``ValueError``), an entry of the wrong shape (``5``, no ``config``, a knob that is text) a
miss, as if that shape had never been tuned.
"""
from __future__ import annotations

import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Annotated, Callable

import pydantic
import torch
import triton

from swizzleperf.sandbox import untrusted

from swizzleperf.kernels.schedule.persistent_gemm import (STREAM_K_VALUES, config_error, num_sms,
                                                          schedule_grid, split_tiles, tail_split)

#: Tile shapes tried per shape (with every useful STREAM_K). In the first tuning run on one H100
#: (triton 3.6, 2026-11-25, 27 per-rank shapes) 128 x 256 x 64 with 4 stages and C stored in two
#: halves won 17 shapes, the same with 3 stages and a whole C tile 4, 256 x 128 and 128 x 128 one
#: each. ``tl.range(..., warp_specialize=True)`` is tried on the two leaders where it changes the
#: compiled kernel (``warp_specialize_effective``: not on Hopper, where the 2-3 % it seemed to win
#: at two shapes in that run was noise between two builds of one kernel; ``candidates`` leaves
#: it out there through ``config_error``). The smaller tiles fill the last wave of small shapes.
TILE_CANDIDATES = (
    {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "num_warps": 8, "num_stages": 4,
     "EPILOGUE_SUBTILE": 1},
    {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "num_warps": 8, "num_stages": 4,
     "EPILOGUE_SUBTILE": 1, "WARP_SPECIALIZE": 1},
    {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "num_warps": 8, "num_stages": 3},
    {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "num_warps": 8, "num_stages": 3,
     "WARP_SPECIALIZE": 1},
    {"BLOCK_M": 256, "BLOCK_N": 128, "BLOCK_K": 64, "num_warps": 8, "num_stages": 3},
    {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "num_warps": 8, "num_stages": 4},
    {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "num_warps": 4, "num_stages": 4},
    {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 128, "num_warps": 8, "num_stages": 3},
    {"BLOCK_M": 64, "BLOCK_N": 256, "BLOCK_K": 64, "num_warps": 4, "num_stages": 4},
    # Deeper K steps or pipelines for the short shapes of one to three waves (4096 x 512 x 4096,
    # 4096 x 1280 x 8192, 4096 x 2560 x 8192: 0.87-0.95x of cuBLAS on an H200, 2026-11-26).
    {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 128, "num_warps": 8, "num_stages": 2,
     "EPILOGUE_SUBTILE": 1},
    {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "num_warps": 8, "num_stages": 6},
    {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 128, "num_warps": 4, "num_stages": 3},
)
#: The on/off switches of the schedule: a cached configuration that leaves one out was tuned with it
#: off (kernels/gemm.py's launch defaults), and :func:`best_config` says so explicitly, so that no
#: caller's own default (a spec's EPILOGUE_SUBTILE=1, say) slips in.
SWITCHES = ("STREAM_K", "EPILOGUE_SUBTILE", "WARP_SPECIALIZE", "TAIL_BLOCK_N")

#: The configuration used where nothing was measured for a shape (the first tile candidate,
#: data-parallel): a default, not a measurement.
DEFAULT_CONFIG = {**TILE_CANDIDATES[0], "STREAM_K": 0}


def candidates(M: int, N: int, K: int, programs: int, itemsize: int = 2,
               tiles=TILE_CANDIDATES, tail: bool = False) -> list:
    """Every configuration worth timing at one shape: each tile shape that fits sm_90's shared
    memory with each STREAM_K that gives a different grid or split of the tiles
    (``schedule_grid``, ``split_tiles``); with ``tail`` (kernels/gemm.py's loop has one, the
    distributed kernels' loops do not), each data-parallel one with a tail of tiles half as wide
    where ``tail_rows`` finds a split that ends sooner.
    Shapes: M, N, K elements; ``programs`` SMs given to the GEMM."""
    out = []
    for tile in tiles:
        num_tiles = triton.cdiv(M, tile["BLOCK_M"]) * triton.cdiv(N, tile["BLOCK_N"])
        splits = set()
        for stream_k in STREAM_K_VALUES:
            config = {**tile, "STREAM_K": stream_k}
            grid = schedule_grid(num_tiles, programs, stream_k)
            split = (grid, split_tiles(num_tiles, grid, stream_k))
            if split in splits or config_error(config, itemsize):
                continue
            splits.add(split)
            out.append(config)
        half = tile["BLOCK_N"] // 2
        if tail and not config_error({**tile, "STREAM_K": 0, "TAIL_BLOCK_N": half}, itemsize) and tail_split(
                M, N, tile["BLOCK_M"], tile["BLOCK_N"], half, min(programs, num_tiles)):
            out.append({**tile, "STREAM_K": 0, "TAIL_BLOCK_N": half})
    return out


def schedule_words(M: int, N: int, config: dict, programs: int) -> str:
    """How a configuration splits the tiles of an M x N output on ``programs`` SMs, in words:
    ``data-parallel (640 tiles)``, ``stream-K (56 of 320 tiles)``, or ``tail (6 of 32 rows as
    120 tiles 128 wide)``."""
    num_pid_m, num_pid_n = triton.cdiv(M, config["BLOCK_M"]), triton.cdiv(N, config["BLOCK_N"])
    tiles = num_pid_m * num_pid_n
    grid = schedule_grid(tiles, programs, config["STREAM_K"])
    width = config.get("TAIL_BLOCK_N", 0)
    rows = tail_split(M, N, config["BLOCK_M"], config["BLOCK_N"], width, grid)
    if rows:
        return f"tail ({rows} of {num_pid_m} rows as {rows * triton.cdiv(N, width)} tiles {width} wide)"
    stream_k_tiles = tiles - split_tiles(tiles, grid, config["STREAM_K"])
    return f"stream-K ({stream_k_tiles} of {tiles} tiles)" if stream_k_tiles else f"data-parallel ({tiles} tiles)"


def name(config: dict) -> str:
    """``128x256x64 w8 s4 sub sk1 ws``: a configuration in one short word (``sub``: C stored in
    two halves, ``ws``: warp-specialized loop, ``t128``: a tail of 128 wide tiles; ``gluon``: the
    distributed kernels' warp-specialized Gluon GEMM, ``WS_GEMM``, its tile ``256+64`` rows with
    ``BLOCK_M_LOW`` 64)."""
    extra = (" sub" if config.get("EPILOGUE_SUBTILE") else "") + f" sk{config.get('STREAM_K', 0)}" + \
        (" ws" if config.get("WARP_SPECIALIZE") else "") + \
        (f" t{config['TAIL_BLOCK_N']}" if config.get("TAIL_BLOCK_N") else "") + \
        (" gluon" if config.get("WS_GEMM") else "")
    rows = f"{config['BLOCK_M']}+{config['BLOCK_M_LOW']}" if config.get("BLOCK_M_LOW") else config["BLOCK_M"]
    return (f"{rows}x{config['BLOCK_N']}x{config['BLOCK_K']} w{config['num_warps']} "
            f"s{config['num_stages']}{extra}")


# ---------------------------------------------------------------------------------------- cache
def cache_path() -> Path:
    """The JSON cache file (module docstring)."""
    if os.environ.get("SWIZZLEPERF_GEMM_CACHE"):
        return Path(os.environ["SWIZZLEPERF_GEMM_CACHE"])
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "swizzleperf" / "gemm_configs.json"


def cache_key(kernel: str, device_name: str, programs: int, dtype: str, M: int, N: int,
              K: int, triton_version: str | None = None) -> str:
    """``kernel|device|programs|triton version|dtype|MxNxK`` (this process's triton by default)."""
    return (f"{kernel}|{device_name}|sms={programs}|triton={triton_version or triton.__version__}|"
            f"{dtype}|{M}x{N}x{K}")


#: Bytes of a cache file we read: an entry is about 700 bytes (bench/results/gemm_configs_hopper.json:
#: 56 entries, 37 KB), so 16 MiB holds some 20 000 tuned shapes.
CACHE_MAX_BYTES = 16 << 20
#: Nesting of a cache file: the object, an entry, its alternatives, one of them, its configuration.
CACHE_MAX_DEPTH = 8
_Positive = Annotated[int, pydantic.Field(strict=True, ge=1, le=1 << 16)]
_Ms = Annotated[float, pydantic.Field(strict=True, ge=0, allow_inf_nan=False)]


class GemmConfig(pydantic.BaseModel):
    """A configuration as a cache entry holds it: the tile and pipeline sizes, and switches
    (``STREAM_K``, ``EPILOGUE_SUBTILE``, ...) as small integers."""
    model_config = pydantic.ConfigDict(extra="allow", strict=True)
    BLOCK_M: _Positive
    BLOCK_N: _Positive
    BLOCK_K: _Positive
    num_warps: _Positive
    num_stages: _Positive

    @pydantic.model_validator(mode="after")
    def _switches_are_integers(self) -> GemmConfig:
        extra = self.model_extra or {}
        if len(extra) > 16:
            raise ValueError(f"{len(extra)} knobs beyond the tile's, at most 16")
        for knob, value in extra.items():
            if type(value) is not int or not 0 <= value <= 1 << 16:
                raise ValueError(f"knob {knob[:40]!r} must be an integer in 0..65536, got {str(value)[:40]!r}")
        return self


class TimedConfig(pydantic.BaseModel):
    """A schedule timed beside an entry's own (``alternatives``)."""
    config: GemmConfig
    ours_ms: _Ms


class CacheEntry(pydantic.BaseModel):
    """What ``ranked_configs`` reads of an entry (``tune``'s result; its other fields are kept
    as they are)."""
    model_config = pydantic.ConfigDict(extra="allow")
    config: GemmConfig
    ours_ms: _Ms = 0.0
    alternatives: Annotated[list[TimedConfig], pydantic.Field(max_length=64)] = []


def load_cache(path: Path | None = None) -> dict:
    """The cache's entries as stored (``{}`` when the file is missing; ``entries`` checks them).
    A file that is not a JSON object of at most ``CACHE_MAX_BYTES`` nested at most
    ``CACHE_MAX_DEPTH`` deep is reported in one line (ValueError) rather than silently
    overwritten."""
    path = path or cache_path()
    if not path.exists():
        return {}
    what = f"{path}: the GEMM configuration cache"
    try:
        data = untrusted.loads(untrusted.read_bounded(path, CACHE_MAX_BYTES, what), what, max_depth=CACHE_MAX_DEPTH)
    except untrusted.UntrustedInput as exc:
        raise ValueError(f"{str(exc).split('; received:')[0]}; remove it to start a new one") from None
    if not isinstance(data, dict):
        raise ValueError(f"{what} must be a JSON object, got {type(data).__name__}; remove it to start a new one")
    return data


def entries(path: Path | None = None) -> dict[str, CacheEntry]:
    """The cache's entries that fit ``CacheEntry``, by key; an entry of another shape is left out
    (a miss: that shape is tuned again, and its entry replaced)."""
    checked = {}
    for key, entry in load_cache(path).items():
        try:
            checked[key] = CacheEntry.model_validate(entry)
        except pydantic.ValidationError:
            continue
    return checked


def _config(model: GemmConfig) -> dict:
    return model.model_dump()


def store(key: str, record: dict, path: Path | None = None) -> None:
    """Add or replace one entry, writing the file atomically (a temporary file renamed)."""
    path = path or cache_path()
    data = load_cache(path)
    data[key] = record
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, suffix=".tmp") as handle:
        json.dump(data, handle, indent=1, sort_keys=True)
    os.replace(handle.name, path)


def lookup(kernel: str, device_name: str, programs: int, dtype: str, M: int, N: int, K: int,
           path: Path | None = None) -> dict | None:
    """The cached configuration of a shape, or None where it was never tuned here."""
    entry = entries(path).get(cache_key(kernel, device_name, programs, dtype, M, N, K))
    return _config(entry.config) if entry else None


def best_config(M: int, N: int, K: int, dtype: str, device_name: str, programs: int | None = None,
                path: Path | None = None) -> dict | None:
    """The cached configuration of a shape on a device (the first of ``ranked_configs``), every
    switch it leaves out set to 0 (``SWITCHES``); None where the shape was never tuned there."""
    ranked = ranked_configs(M, N, K, dtype, device_name, programs, path)
    return ranked[0] if ranked else None


def ranked_configs(M: int, N: int, K: int, dtype: str, device_name: str, programs: int | None = None,
                   path: Path | None = None) -> list:
    """The cached configurations of a shape on a device, the one to take first, from any kernel
    that shares the schedule (kernels/gemm.py's and the distributed kernels' per-rank GEMM are
    the same loop): the entry measured with ``programs`` SMs where there is one, else the one with
    the most SMs, this triton version preferred; then the other schedules timed in the same rounds
    (``alternatives``: ``[{"config", "ours_ms"}]``), fastest first. Where that entry was measured
    on more SMs than ``programs`` and its own configuration needs more waves of tiles on
    ``programs`` (a data-parallel or warp-specialized schedule: a pattern that gives the GEMM
    ``NUM_SMS - COMM_SMS`` programs), the schedules that lose less there compete with it by
    ``scaled_ms``: a prediction from the waves, not a measurement. (Measured on two H100s, W = 2,
    bench/results/pattern_configs_h100x4/: all-gather + GEMM push at llama8b-up-4k, 896 tiles of
    either GEMM, 7 waves of 132 and 8 of 116, the WS GEMM 0.354 ms, the Triton GEMM faster alone
    by under 1 %, 0.364: so the same loss does not re-rank.) Every switch a configuration leaves
    out is 0 (``SWITCHES``).
    ``[]`` where the shape was never tuned on that device."""
    found = []
    for key, entry in entries(path).items():
        parts = key.split("|")
        if len(parts) != 6 or parts[1] != device_name or parts[4] != dtype or parts[5] != f"{M}x{N}x{K}":
            continue
        sms = parts[2].removeprefix("sms=")
        if not (sms.isascii() and sms.isdigit() and 0 < len(sms) < 7):
            continue   # a key of another shape: a miss
        same_triton = parts[3] == f"triton={triton.__version__}"
        found.append(((int(sms) == programs, same_triton, int(sms)), entry))
    if not found:
        return []
    (_, _, measured), entry = max(found, key=lambda f: f[0])
    timed = [(_config(entry.config), entry.ours_ms)]
    timed += sorted(((_config(a.config), a.ours_ms) for a in entry.alternatives), key=lambda t: t[1])
    own = timed[0][0]
    spreads = own.get("STREAM_K") or own.get("TAIL_BLOCK_N")   # its last wave adapts to the programs
    if programs and programs < measured and not spreads and scaled_ms(own, 1.0, M, N, measured, programs) > 1.0:
        # only a schedule that loses less to the fewer programs can overtake the entry's own, which
        # may be the default for reasons its time alone does not show (gpu_rank_gemm.AG_WS_MARGIN)
        def loss(config: dict) -> float:
            return scaled_ms(config, 1.0, M, N, measured, programs)
        pool = [timed[0]] + [t for t in timed[1:] if loss(t[0]) < loss(own)]
        pool.sort(key=lambda t: t[1] * loss(t[0]))
        timed = pool + [t for t in timed if t not in pool]
    return [{**{switch: 0 for switch in SWITCHES}, **config} for config, _ in timed]


def tile_count(config: dict, M: int, N: int) -> int:
    """Output tiles of ``config`` over M x N: ``BLOCK_M + BLOCK_M_LOW`` rows (the WS GEMM's second
    consumer) by ``BLOCK_N`` columns."""
    return triton.cdiv(M, config["BLOCK_M"] + config.get("BLOCK_M_LOW", 0)) * triton.cdiv(N, config["BLOCK_N"])


def scaled_ms(config: dict, ms: float, M: int, N: int, measured_programs: int, programs: int) -> float:
    """``ms``, a configuration's time measured on ``measured_programs`` SMs, predicted on
    ``programs``: scaled by the waves of tiles (``ceil(tiles / programs)``) of a data-parallel or
    warp-specialized schedule, or by ``tiles / programs`` (at least 1) where stream-K or a tail
    spreads the last wave's work over every program (``tile_count`` tiles)."""
    tiles = tile_count(config, M, N)
    if config.get("STREAM_K") or config.get("TAIL_BLOCK_N"):
        return ms * max(tiles / programs, 1.0) / max(tiles / measured_programs, 1.0)
    return ms * triton.cdiv(tiles, programs) / triton.cdiv(tiles, measured_programs)


# --------------------------------------------------------------------------------------- timing
def interleaved(launches: dict, rounds: int, flush_bytes: int = 256 << 20,
                lead_us: float = 100.0) -> dict:
    """Time callables launch by launch, interleaved: each round launches every one once (L2
    flushed before each launch by zeroing ``flush_bytes``, more than any GPU's L2; CUDA events
    around the launch alone), in an order rotated by one each round, so that clock changes
    hit all alike. Before each timed launch the GPU also spins for ``lead_us`` microseconds or
    more (``torch.cuda._sleep``, 2000 cycles a microsecond), so that the host has queued the
    launch before the GPU reaches it: what is timed is the kernel on the GPU, not the host's
    launch overhead (the Python launch of a Triton kernel takes tens of microseconds, as long as
    the smallest GEMMs here; a first run on an H100 timed our 0.1 ms GEMM at 0.24 ms in some
    rounds without the lead). Returns
    ``{name: {"median_ms", "q25_ms", "q75_ms", "spread_ms" (IQR), "times_ms"}}``."""
    names = list(launches)
    flush = torch.empty(flush_bytes, dtype=torch.int8, device="cuda")
    cycles = int(lead_us * 2000)   # at most 2 GHz SM clock on Hopper (1980 MHz max: nvidia-smi)
    times = {n: [] for n in names}
    for r in range(rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        events = []
        for n in order:
            flush.zero_()
            torch.cuda._sleep(cycles)
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            launches[n]()
            end.record()
            events.append((n, start, end))
        torch.cuda.synchronize()
        for n, start, end in events:
            times[n].append(start.elapsed_time(end))
    out = {}
    for n in names:
        q25, q50, q75 = statistics.quantiles(times[n], n=4) if len(times[n]) > 1 else [times[n][0]] * 3
        out[n] = {"median_ms": statistics.median(times[n]), "q25_ms": q25, "q75_ms": q75,
                  "spread_ms": q75 - q25, "times_ms": times[n]}
    return out


def relative_error(out: torch.Tensor, expected: torch.Tensor) -> float:
    """``||out - expected|| / ||expected||`` (fp32 sums); ``inf`` where ``out`` holds NaN
    (a poisoned element never written)."""
    if torch.isnan(out).any():
        return float("inf")
    out, expected = out.float(), expected.float()
    return float(torch.linalg.vector_norm(out - expected) / torch.linalg.vector_norm(expected))


def tune(launch: Callable, M: int, N: int, K: int, dtype: str = "bfloat16",
         programs: int | None = None, kernel: str = "gemm", configs: list | None = None,
         keep: int = 3, screen_rounds: int = 3, rounds: int = 25, tolerance: float = 1e-2,
         seed: int = 0, cache: bool = True, path: Path | None = None,
         log: Callable = print, tail: bool = False) -> dict:
    """Measure the configurations of ``launch(inputs, **config, NUM_SMS=programs)`` at one
    shape on the current CUDA device and return (and, with ``cache``, store) the best.

    Every candidate first runs once on fresh random A [M, K], B [K, N] (N(0, 1) in ``dtype``)
    with C poisoned (NaN) and must come within ``tolerance`` of the fp32 product (else it is
    dropped, with its error logged); the ``screen_rounds`` interleaved rounds pick the
    ``keep`` fastest, which are timed again with cuBLAS (``torch.matmul`` into a preallocated
    C) for ``rounds`` interleaved rounds. Returns ``{"config", "tiles", "stream_k_tiles",
    "schedule" (in words), "ours_ms", "cublas_ms",
    "spread_ms" (ours' IQR), "cublas_spread_ms", "rel_error", "screened": {name: ms},
    "final": {name: ms}, "rejected": {name: reason}, "device", "programs", "triton",
    "date"}``.

    Raises:
        RuntimeError: no CUDA device, or no candidate passed the check.
    """
    if not torch.cuda.is_available():
        raise RuntimeError("tune needs a CUDA device")
    programs = programs or num_sms(torch.device("cuda", torch.cuda.current_device()))
    torch_dtype = getattr(torch, dtype)
    generator = torch.Generator(device="cuda").manual_seed(seed)
    a = torch.randn(M, K, generator=generator, device="cuda", dtype=torch.float32).to(torch_dtype)
    b = torch.randn(K, N, generator=generator, device="cuda", dtype=torch.float32).to(torch_dtype)
    c = torch.empty(M, N, device="cuda", dtype=torch_dtype)
    c_ref = torch.empty_like(c)
    expected = torch.matmul(a.float(), b.float())
    inputs = {"a": a, "b": b, "c": c}
    configs = configs if configs is not None else candidates(M, N, K, programs, a.element_size(), tail=tail)
    passed, rejected = {}, {}
    for config in configs:
        label = name(config)
        c.fill_(float("nan"))
        try:
            launch(inputs, **config, NUM_SMS=programs)
            torch.cuda.synchronize()
        except Exception as exc:  # a configuration that does not build here: dropped, said why
            rejected[label] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
            log(f"  {label}: rejected, {rejected[label]}")
            continue
        error = relative_error(c, expected)
        if not error <= tolerance:
            rejected[label] = f"relative error {error:.3e} > {tolerance:.0e}"
            log(f"  {label}: rejected, {rejected[label]}")
            continue
        passed[label] = (config, error)
    if not passed:
        raise RuntimeError(f"no configuration passed at {M}x{N}x{K}: {rejected}")
    launchers = {label: (lambda cfg=cfg: launch(inputs, **cfg, NUM_SMS=programs))
                 for label, (cfg, _) in passed.items()}
    screened = interleaved(launchers, screen_rounds)
    best = sorted(screened, key=lambda n: screened[n]["median_ms"])[:keep]
    final = interleaved({**{n: launchers[n] for n in best},
                         "cublas": lambda: torch.matmul(a, b, out=c_ref)}, rounds)
    winner = min(best, key=lambda n: final[n]["median_ms"])
    config = passed[winner][0]
    tiles = triton.cdiv(M, config["BLOCK_M"]) * triton.cdiv(N, config["BLOCK_N"])
    stream_k_tiles = tiles - split_tiles(tiles, schedule_grid(tiles, programs, config["STREAM_K"]),
                                         config["STREAM_K"])
    record = {"config": config, "tiles": tiles, "stream_k_tiles": stream_k_tiles,
              "schedule": schedule_words(M, N, config, programs), "ours_ms": final[winner]["median_ms"],
              "spread_ms": final[winner]["spread_ms"], "cublas_ms": final["cublas"]["median_ms"],
              "cublas_spread_ms": final["cublas"]["spread_ms"], "rel_error": passed[winner][1],
              "screened": {n: round(t["median_ms"], 5) for n, t in screened.items()},
              "final": {n: round(t["median_ms"], 5) for n, t in final.items()},
              "final_times_ms": {n: [round(x, 5) for x in t["times_ms"]] for n, t in final.items()},
              "rejected": rejected, "device": torch.cuda.get_device_name(), "programs": programs,
              "triton": triton.__version__, "date": time.strftime("%Y-%m-%d"), "rounds": rounds}
    if cache:
        store(cache_key(kernel, record["device"], programs, dtype, M, N, K), record, path)
    return record
