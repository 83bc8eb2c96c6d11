"""The overlap model: the predicted time of one launch of a bundled distributed kernel (and of
torch + NCCL doing the same) for a hardware spec, a world size W and a configuration.

The distributed analogue of the L2 simulator (``simulated:<spec>xW``). A launch is priced on
two clocks, and its time is the later of the two (launches are queued back to back, as the
bench times them, so the host runs ahead of the GPU while it can):

- **the GPU's schedule** of the pattern: which parts run on which SMs at once, what waits for
  what, the tail that cannot be hidden, device barriers. Its parts:

  - the per-rank **GEMM** on P programs (persistent, tiles ``pid, pid + P, ...``): waves of
    tiles, a tile ``2 BLOCK_M BLOCK_N K`` FLOPs at the measured per-SM rate of its tile
    configuration plus a fixed cost per tile; the last, partial wave costs ``f ** e`` of a
    full one (hwspecs: ``matmul_tile_rates``, ``matmul_tile_fixed_s``,
    ``matmul_last_wave_exp``, measured on one H200: bench/results/rank_gemm_h200.json);
  - **SM copies** to peers (scatter, push, epilogue stores) on P programs at
    ``sm_copy_bytes_per_s x P / (P + sm_copy_half_programs)`` (measured Triton put);
  - **copy-engine copies** at ``copy_engine_bytes_per_s`` (measured);
  - **HBM-bound parts** (the reduce, flash decode's partials) at the spec's DRAM bandwidth
    times a fitted efficiency, limited by the programs that stream it;
  - remote **loads** (``pull``) at the peer bandwidth times a fitted efficiency;
- **the host's enqueue cost**: a fitted cost per Triton launch, per launch on the second
  stream, and per copy-engine copy with its signal launch. It bounds the small problems (one
  launch of the bundled kernels costs tens of microseconds in Python) and the copy-engine
  pattern, whose W - 1 x CE_GROUPS copies are issued one by one.

The baseline (torch + NCCL) is cuBLAS (FLOPs over a rate, fitted on one H200's cuBLAS times at
the per-rank shapes), then the NCCL collective (a launch cost plus the received bytes over a
rate), back to back.

The few efficiencies and host costs are fitted by ``python -m
bench.validate_overlap_model fit`` on the 2-GPU measurements only
(bench/results/dist_h200_2gpu.json), the GEMM constants of hwspecs/h200.yaml on the 2-GPU per-rank
shapes only, and stored with their source in ``profiling/overlap_params.json``; the 4- and 8-GPU
measurements (H200) and the two-H100 bench are predicted unseen
(bench/results/overlap_model_validation.md).

Every prediction also says how far to trust it:

- ``lower_bound_ms``: the communication alone (its bytes at the fastest peer copy the spec gives:
  SM copies on every SM, or a copy engine) and the compute alone (this configuration's GEMM on every
  SM), whichever is longer: no overlap beats it, and no prediction is below it;
- ``interval_ms``: ``[lo, hi]``, ``time_ms`` times ``exp(-q)`` and ``exp(q)``, ``q`` the 90th
  percentile of the fit's leave-one-problem-out errors (log scale; the fit's ``_interval``), doubled
  when extrapolated (a rule, not calibrated), and ``lo`` never below the bound;
- ``extrapolated`` / ``extrapolated_why``: the hardware is not the one fitted on, or W, the per-rank
  shape, the bytes exchanged or a knob lies outside what was measured there (the fit's
  ``_domain``: the committed bench rows and per-rank GEMMs of that GPU), or a knob is set that the
  model does not price (``MODEL_KNOBS``: the persistent GEMM's STREAM_K, WARP_SPECIALIZE and
  EPILOGUE_SUBTILE came after the fit).

``predict(..., measured_gemm=True)`` scales the per-rank GEMM to a time measured alone on this
device and shape where a rank-GEMM file has one (bench/results/rank_gemm_hopper.json: an H100 and an H200,
the tuned persistent kernel, shipped as this package's rank_gemm_hopper.json); the validated figures
are without it.

Times are in seconds inside, ms in the API.
"""
from __future__ import annotations

import functools
import math
import dataclasses
from dataclasses import asdict, dataclass, field
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Mapping

import pydantic

from swizzleperf.sandbox import untrusted

PARAMS_PATH = Path(str(resources.files(__package__) / "overlap_params.json"))
#: Per-rank GEMMs timed alone on every SM of one GPU, per device (bench/gpu_rank_gemm.py's tuned
#: persistent kernel): what ``predict(..., measured_gemm=True)`` calibrates the GEMM to. Package
#: data, a copy of bench/results/rank_gemm_hopper.json (bench/package_data.py).
RANK_GEMM_MEASURED = Path(str(resources.files(__package__) / "rank_gemm_hopper.json"))
ELEMENT_BYTES = 2          # bf16 / fp16 inputs and outputs
FP32_BYTES = 4             # flash decode's partials (o, lse)
FD_PROGRAMS_PER_SM = 3     # flash decode's partial kernel: 38 KB of shared memory (its docstring)
_HW_FIELDS = ("peer_bytes_per_s", "copy_engine_bytes_per_s", "sm_copy_bytes_per_s",
              "sm_copy_half_programs")


class OverlapModelError(ValueError):
    """A kernel, pattern or spec the model cannot price; one line "X must be Y, got Z"."""


@dataclass(frozen=True)
class OverlapPrediction:
    """The predicted time of one launch (slowest rank) and its parts, in ms.

    Attributes:
        time_ms: the whole launch.
        compute_ms: the compute part alone (GEMM / attention), as this configuration runs it
            (its SMs, its tiles).
        comm_ms: the communication alone.
        hidden_share: 0..1, the share of ``comm_ms`` hidden behind compute.
        source: ``simulated:<spec>x<W>``.
        breakdown: named parts in ms (``gemm``, ``scatter``, ``tail``, ``barrier``, ``host``...).
        notes: what bounds the launch (``"gpu"`` or ``"host"``; ``"bound"`` if the schedule came
            out below ``lower_bound_ms`` and was raised to it, which the model's parts should
            never need).
        lower_bound_ms: max(communication alone, compute alone): no prediction is below it.
        interval_ms: ``[lo, hi]`` around ``time_ms`` (see the module's docstring).
        extrapolated: the hardware, W, shape or a knob lies outside what was measured.
        extrapolated_why: one line per reason, ``"; "``-joined (empty when not extrapolated).
        gpu_ms, gpu_interval_ms: the launch with the host's time left out (launches queued ahead,
            as the measured runs time them: ``time_ms`` where the GPUs set the pace).
    """

    time_ms: float
    compute_ms: float
    comm_ms: float
    hidden_share: float
    source: str
    breakdown: dict = field(default_factory=dict)
    notes: str = ""
    lower_bound_ms: float = 0.0
    interval_ms: list = field(default_factory=list)
    extrapolated: bool = False
    extrapolated_why: str = ""
    gpu_ms: float = 0.0
    gpu_interval_ms: list = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


#: Bytes of a parameter or measurement file read (each is tens of KB).
DATA_MAX_BYTES = 8 << 20
_Finite = Annotated[float, pydantic.Field(strict=True, allow_inf_nan=False)]
_Extent = Annotated[int, pydantic.Field(strict=True, ge=1, lt=1 << 40)]


class _RankGemmRow(pydantic.BaseModel):
    """A row of a rank-GEMM file as ``measured_rank_gemm`` reads it (the rest of the row kept)."""
    model_config = pydantic.ConfigDict(extra="allow", strict=True)
    device: Annotated[str, pydantic.Field(min_length=1, max_length=200)]
    M: _Extent
    N: _Extent
    K: _Extent
    ours_ms: Annotated[float, pydantic.Field(strict=True, gt=0, allow_inf_nan=False)]


class _RankGemmFile(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="allow", strict=True)
    rows: list[dict] = []


class _Params(pydantic.RootModel):
    """The fitted parameters: numbers by name, ``_source`` text, ``_interval`` and ``_domain``
    tables (objects)."""
    root: dict[str, _Finite | str | dict]


@functools.lru_cache(maxsize=4)
def measured_rank_gemm(path: str = str(RANK_GEMM_MEASURED)) -> dict:
    """``{device name, lower case: {(M, N, K): seconds}}``: the per-rank GEMMs of a rank-GEMM file
    (rows with ``device``, ``M``, ``N``, ``K`` and ``ours_ms``, timed alone on every SM); empty
    where the file is absent."""
    if not Path(path).exists():
        return {}
    out: dict = {}
    rows = untrusted.load_json_checked(Path(path), _RankGemmFile, f"the rank-GEMM measurements {path}",
                                       DATA_MAX_BYTES).rows
    for row in rows:
        try:
            row = _RankGemmRow.model_validate(row)
        except pydantic.ValidationError:
            continue   # a row without a time (or of another shape): not a measurement of a shape
        out.setdefault(row.device.lower(), {})[(row.M, row.N, row.K)] = row.ours_ms * 1e-3
    return out


def _measured_gemm(kernel: str, problem: Mapping, world_size: int, meta: Mapping, hw, path: str):
    """``(hw with its GEMM constants scaled to the measured per-rank GEMM, what was used)``, or
    ``(hw, "")`` where this device has no measurement of the shape. The scale is measured /
    modelled at every SM; the model's SM splits and waves keep their shape around it."""
    m, n, k = (extent(kernel, problem, world_size)[x] for x in "mnk")
    for device, table in measured_rank_gemm(path).items():
        if any(name in device for name in hw.match_names) and (m, n, k) in table:
            scale = table[(m, n, k)] / gemm_s(m, n, k, meta, hw.compute_units, hw)
            rates = tuple(f"{r.split('=')[0]}={float(r.split('=')[1]) / scale:.6e}" for r in hw.matmul_tile_rates)
            scaled = dataclasses.replace(hw, matmul_tile_rates=rates,
                                         matmul_tile_fixed_s=(hw.matmul_tile_fixed_s or 0.0) * scale)
            return scaled, f"per-rank GEMM {m}x{n}x{k} measured on {device} ({Path(path).name})"
    return hw, ""


@functools.lru_cache(maxsize=4)
def load_params(path: str = str(PARAMS_PATH)) -> dict:
    """The fitted parameters (name -> value; seconds, bytes/s or FLOP/s), with ``_source``.

    Raises:
        UntrustedInput: the file is not such a table (one line).
    """
    return untrusted.load_json_checked(Path(path), _Params, f"the overlap model's parameters {path}",
                                       DATA_MAX_BYTES).root


# ------------------------------------------------------------------------------ the parts
@functools.lru_cache(maxsize=16)
def _tile_rates(rates: tuple) -> dict:
    """``{(BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages): FLOP/s per SM}`` of a spec."""
    out = {}
    for text in rates:
        name, value = text.split("=")
        tile, warps, stages = name.split(":")
        bm, bn, bk = (int(v) for v in tile.split("x"))
        out[(bm, bn, bk, int(warps), int(stages))] = float(value)
    return out


def tile_flops_per_s(meta: Mapping, hw) -> float:
    """FLOP/s one SM runs the tile configuration of ``meta`` at: the measured rate where the spec
    has it; else the nearest measured configuration of the same tile area, scaled by the tiles'
    operand intensity ``BLOCK_M BLOCK_N / (BLOCK_M + BLOCK_N)``; else 70 % of the peak's share
    (the bundled GEMM's measured share on an H200)."""
    key = (meta["BLOCK_M"], meta["BLOCK_N"], meta["BLOCK_K"], meta["num_warps"], meta["num_stages"])
    rates = _tile_rates(tuple(hw.matmul_tile_rates or ()))
    if key in rates:
        return rates[key]
    peak_share = hw.peak_bf16_flops / hw.compute_units
    if not rates:
        return 0.70 * peak_share
    intensity = key[0] * key[1] / (key[0] + key[1])
    best = max(rates, key=lambda k: (k[0] * k[1] == key[0] * key[1], k[3] == key[3], -abs(k[2] - key[2])))
    scale = min(1.0, intensity / (best[0] * best[1] / (best[0] + best[1])))
    return min(rates[best] * scale if scale < 1 else rates[best], peak_share)


def gemm_s(m: int, n: int, k: int, meta: Mapping, programs: int, hw) -> float:
    """Seconds of the per-rank persistent Triton GEMM [m, k] @ [k, n] on ``programs`` SMs."""
    bm, bn = meta["BLOCK_M"], meta["BLOCK_N"]
    tiles = math.ceil(m / bm) * math.ceil(n / bn)
    tile_s = (hw.matmul_tile_fixed_s or 0.0) + 2.0 * bm * bn * k / tile_flops_per_s(meta, hw)
    return tile_s * waves(tiles, programs, hw)


def waves(tiles: int, programs: int, hw) -> float:
    """Full waves plus the last partial one at ``f ** matmul_last_wave_exp`` (f its busy share)."""
    programs = max(1, programs)
    full, rest = divmod(tiles, programs)
    exponent = hw.matmul_last_wave_exp if hw.matmul_last_wave_exp is not None else 0.0
    return full + ((rest / programs) ** exponent if rest else 0.0)


def sm_copy_rate(programs: float, hw) -> float:
    """Bytes/s that ``programs`` SM programs put to peers (the measured Triton put curve)."""
    programs = max(1.0, programs)
    return hw.sm_copy_bytes_per_s * programs / (programs + hw.sm_copy_half_programs)


def peak_copy_rate(hw) -> float:
    """Bytes/s of the fastest peer copy the spec gives: SM copies on every SM, or a copy engine."""
    return max(sm_copy_rate(hw.compute_units, hw), hw.copy_engine_bytes_per_s)


def hbm_rate(programs: float, hw, p: dict) -> float:
    """Bytes/s that ``programs`` programs stream through HBM: the fitted share of the DRAM peak,
    or the programs' own rate (``hbm_program_bytes_per_s`` each) where they are few."""
    return min(hw.dram_bytes_per_s * p["hbm_eff"], max(1.0, programs) * p["hbm_program_bytes_per_s"])


def cublas_s(m: int, n: int, k: int, p: dict) -> float:
    """cuBLAS (torch.matmul) [m, k] @ [k, n]: a launch cost plus FLOPs over its rate."""
    return p["cublas_launch_s"] + 2.0 * m * n * k / p["cublas_flops"]


def nccl_s(received_bytes: float, p: dict, kind: str) -> float:
    """An NCCL collective in which each rank receives ``received_bytes``: launch plus bytes/rate."""
    return p[f"nccl_{kind}_launch_s"] + received_bytes / p[f"nccl_{kind}_bytes_per_s"]


def barrier_s(world_size: int, hw, p: dict) -> float:
    """A device barrier: one program signals W - 1 peers and waits for theirs."""
    return p["barrier_s"] + (world_size - 1) * (hw.link_latency_s or 0.0)


def host_s(p: dict, launches: int, barriers: int, comm_launches: int = 0, ce_copies: int = 0) -> float:
    """Seconds the host takes to enqueue one launch of a pattern (Python + driver): its kernel
    launches, its device barriers (a one-program launch each), the launches on the second
    stream (a stream switch and an event each), and its copy-engine copies (each a
    ``Tensor.copy_`` and the stream's write of its flag, priced as a one-program launch: the
    signal kernel it replaced on 2026-11-26, not fitted anew)."""
    return (launches * p["launch_s"] + barriers * p["barrier_launch_s"] + comm_launches * p["stream_s"]
            + ce_copies * (p["ce_call_s"] + p["barrier_launch_s"]))


def _epilogue_stores_s(gemm: float, n_waves: int, store: float, p: dict) -> float:
    """A GEMM whose programs store each finished tile to peers: the stores of one wave overlap
    the next wave's compute (slowing it by ``store_stall`` of their time); the last wave's stores
    are the tail."""
    n_waves = max(1, n_waves)
    compute, stores = gemm / n_waves, store / n_waves
    return (n_waves - 1) * max(compute + p["store_stall"] * stores, stores) + compute + stores


def _streamed_gemm_s(compute_per_block: float, ready: list) -> float:
    """A GEMM that takes row blocks in order, each after its data is ready (seconds from the
    start); ``compute_per_block`` seconds each."""
    t = 0.0
    for at in ready:
        t = max(t, at) + compute_per_block
    return t


# ------------------------------------------------------------------------------ kernels
def _gemm_all_scatter(prob, w, pattern, meta, hw, p) -> dict:
    m, n, k = prob["M"], prob["N"] // w, prob["K"]
    sms, comm = hw.compute_units, meta["COMM_SMS"]
    tiles = math.ceil(m / meta["BLOCK_M"]) * math.ceil(n / meta["BLOCK_N"])
    nbytes = (w - 1) * m * n * ELEMENT_BYTES
    barrier = barrier_s(w, hw, p)
    gemm = gemm_s(m, n, k, meta, sms, hw)
    floor = (gemm, nbytes / peak_copy_rate(hw))
    if pattern == "bulk_sync":
        scatter = p["copy_launch_s"] + nbytes / sm_copy_rate(min(sms, tiles), hw)
        return _parts(gemm + scatter + barrier, host_s(p, 2, 1), gemm, scatter, floor,
                      gemm=gemm, scatter=scatter, barrier=barrier)
    if pattern == "fused_sequential":
        store = nbytes / sm_copy_rate(min(sms, tiles), hw)
        body = _epilogue_stores_s(gemm, math.ceil(tiles / sms), store, p)
        return _parts(body + barrier, host_s(p, 1, 1), gemm, store, floor,
                      gemm=gemm, stores=store, tail=body - gemm, barrier=barrier)
    if pattern in ("producer_consumer", "workgroup_specialized"):
        gemm_programs = sms - comm
        gemm = gemm_s(m, n, k, meta, gemm_programs, hw)
        scatter = nbytes / sm_copy_rate(min(comm, tiles), hw)
        n_waves = math.ceil(tiles / gemm_programs)
        last_share = (tiles - (n_waves - 1) * gemm_programs) / tiles
        body = max(gemm + scatter * last_share, gemm / n_waves + scatter) + p["copy_launch_s"]
        launches = (2, 1, 1) if pattern == "producer_consumer" else (1, 1, 0)
        return _parts(body + barrier, host_s(p, *launches), gemm, scatter, floor,
                      gemm=gemm, scatter=scatter, tail=body - gemm, barrier=barrier)
    raise _bad_pattern("gemm_all_scatter", pattern)


def _all_gather_gemm(prob, w, pattern, meta, hw, p) -> dict:
    m, n, k = prob["M"], prob["N"] // w, prob["K"]
    rows = m // w
    sms, comm = hw.compute_units, meta["COMM_SMS"]
    shard = rows * k * ELEMENT_BYTES                          # one rank's rows of A
    chunks = math.ceil(rows / meta["BLOCK_M"])
    barrier = barrier_s(w, hw, p)
    floor = (gemm_s(m, n, k, meta, sms, hw), (w - 1) * shard / peak_copy_rate(hw))
    if pattern == "bulk_sync":
        push = p["copy_launch_s"] + (w - 1) * shard / sm_copy_rate(min(sms, chunks * (w - 1)), hw)
        gemm = gemm_s(m, n, k, meta, sms, hw)
        return _parts(push + gemm + 2 * barrier, host_s(p, 2, 2), gemm, push, floor,
                      push=push, gemm=gemm, barrier=2 * barrier)
    if pattern == "pull":
        gemm = gemm_s(m, n, k, meta, sms, hw)
        remote = (w - 1) * shard * math.ceil(n / meta["BLOCK_N"])   # once per column tile
        pull = remote / (hw.peer_bytes_per_s * p["pull_eff"])
        return _parts(max(gemm, pull) + barrier, host_s(p, 1, 1), gemm, pull, floor,
                      gemm=gemm, pull=pull, barrier=barrier)
    if pattern == "push":
        gemm = gemm_s(m, n, k, meta, sms - comm, hw)
        chunk_s = shard / chunks / sm_copy_rate(min(comm, chunks * (w - 1)), hw)
        ready = [0.0] * chunks + [p["copy_launch_s"] + (i + 1) * chunk_s for i in range(chunks * (w - 1))]
        body = _streamed_gemm_s(gemm / len(ready), ready)
        return _parts(body + barrier, host_s(p, 2, 1, 1), gemm, chunk_s * len(ready[chunks:]), floor,
                      gemm=gemm, push=chunk_s * chunks * (w - 1), tail=body - gemm, barrier=barrier)
    if pattern == "push_copy_engine":
        gemm = gemm_s(m, n, k, meta, sms, hw)
        groups = min(meta["CE_GROUPS"], chunks)
        group_s = shard / groups / hw.copy_engine_bytes_per_s
        # the copies of distance j go out after those of distance j - 1, one group at a time
        ready = [0.0] * groups + [(i + 1) * group_s for i in range(groups * (w - 1))]
        body = max(gemm, _streamed_gemm_s(gemm / len(ready), ready))   # (the sum's rounding)
        host = host_s(p, 1, 0, 0, (w - 1) * groups)   # no barrier: the gathered A alternates
        return _parts(body, host, gemm, group_s * groups * (w - 1), floor,
                      gemm=gemm, push=group_s * groups * (w - 1), tail=body - gemm)
    raise _bad_pattern("all_gather_gemm", pattern)


def _gemm_reduce_scatter(prob, w, pattern, meta, hw, p) -> dict:
    m, n, k = prob["M"], prob["N"], prob["K"] // w
    sms, comm = hw.compute_units, meta["COMM_SMS"]
    tiles = math.ceil(m / meta["BLOCK_M"]) * math.ceil(n / meta["BLOCK_N"])
    remote = (w - 1) / w * m * n * ELEMENT_BYTES             # partials stored into their owners
    reduce_bytes = (w + 1) * (m // w) * n * ELEMENT_BYTES     # the W slots read, the sum written
    barrier = barrier_s(w, hw, p)
    floor = (gemm_s(m, n, k, meta, sms, hw), remote / peak_copy_rate(hw))

    def gemm_with_stores(programs: int) -> tuple:
        gemm = gemm_s(m, n, k, meta, programs, hw)
        store = remote / sm_copy_rate(min(programs, tiles), hw)
        return gemm, _epilogue_stores_s(gemm, math.ceil(tiles / programs), store, p), store

    if pattern == "bulk_sync":
        gemm, body, store = gemm_with_stores(sms)
        reduce = p["copy_launch_s"] + reduce_bytes / hbm_rate(sms, hw, p)
        return _parts(body + reduce + 2 * barrier, host_s(p, 2, 2), gemm, body - gemm + reduce, floor,
                      gemm=gemm, stores=store, tail=body - gemm, reduce=reduce, barrier=2 * barrier)
    if pattern == "producer_consumer":
        gemm, body, store = gemm_with_stores(sms - comm)
        reduce = reduce_bytes / hbm_rate(comm, hw, p)
        rounds = max(1, math.ceil((m // w) / meta["BLOCK_M"]))     # the reduce trails by one
        total = max(body, reduce) + reduce / rounds + p["copy_launch_s"]
        return _parts(total + barrier, host_s(p, 2, 1, 1), gemm, body - gemm + reduce, floor,
                      gemm=gemm, stores=store, reduce=reduce, tail=total - gemm, barrier=barrier)
    if pattern == "epilogue_reduce":
        # the other owners' tiles stored as in bulk_sync; each own tile's epilogue reads the W - 1
        # peers' partials of it from the local staging (not overlapped: the program waits for them).
        # Not fitted: it prices this 2-6 % below bulk_sync at W = 2, where two H200s measured it
        # 1-9 % above (bench/results/dist_gemm_h200x2_epilogue_reduce.md); its loop that waits on
        # flags is not flattened, which this model does not price. A measured run recalibrates.
        gemm, body, store = gemm_with_stores(sms)
        sums = (w - 1) * (m // w) * n * ELEMENT_BYTES / hbm_rate(sms, hw, p)
        return _parts(body + sums + barrier, host_s(p, 1, 1), gemm, body - gemm + sums, floor,
                      gemm=gemm, stores=store, sums=sums, tail=body + sums - gemm, barrier=barrier)
    if pattern == "push_copy_engine":
        # the other owners' rows first (local stores) in SLICES launches, the copy engines taking
        # each slice to its owners group by group (one stream, in order) while the next slice and
        # then the own rows are computed, each own tile summed with its group's partials from
        # every peer. Not fitted (added 2026-11-26): the copy rate is the spec's copy engine's,
        # where and when the sums happen (SUM_IN_EPILOGUE) is not priced; a measured run
        # recalibrates. Known miss: at W = 4 on four H100s (2026-11-26,
        # bench/results/dist_gemm_h100x4/) it priced llama70b-o-4k at 0.265 ms, measured 0.366
        # (bulk_sync: 0.327 priced, 0.287 measured): the (W - 1) x CE_GROUPS copies there ran
        # slower than the copy engine's rate measured between two GPUs.
        rows = m // w
        others = gemm_s(m - rows, n, k, meta, sms, hw)
        own = gemm_s(rows, n, k, meta, sms, hw)
        groups = min(meta["CE_GROUPS"], max(1, math.ceil(rows / meta["BLOCK_M"])))
        slices = max(1, min(meta.get("SLICES", 1), groups))
        group_s = (w - 1) * rows * n * ELEMENT_BYTES / groups / hw.copy_engine_bytes_per_s
        ready, free = [], 0.0
        for g in range(groups):     # a group goes out after its slice and the copies before it
            free = max(free, others * (g * slices // groups + 1) / slices) + group_s
            ready.append(free - others)
        sums = (w - 1) * rows * n * ELEMENT_BYTES / hbm_rate(sms, hw, p)
        # two GEMMs take at least the time of one over the same tiles (the floor's)
        body = max(_streamed_gemm_s((own + sums) / groups, ready), floor[0] - others)
        gemm = others + own
        return _parts(others + body, host_s(p, 1 + slices, 0, slices, (w - 1) * groups), gemm,
                      others + body - gemm, floor, gemm=gemm, copies=group_s * groups, sums=sums,
                      tail=others + body - gemm)
    raise _bad_pattern("gemm_reduce_scatter", pattern)


def _flash_decode(prob, w, pattern, meta, hw, p) -> dict:
    b, h, h_kv, d, s = prob["B"], prob["H"], prob["H_kv"], prob["D"], prob["S"]
    kv_bytes = 2 * b * h_kv * math.ceil(s / w) * d * ELEMENT_BYTES
    programs = min(b * h_kv * meta["SPLITS"], FD_PROGRAMS_PER_SM * hw.compute_units)
    partial = p["fd_partial_s"] + kv_bytes / hbm_rate(programs, hw, p)
    exchange = (w - 1) * b * h * (d + 1) * FP32_BYTES       # this rank's partial to every peer
    barrier = barrier_s(w, hw, p)
    floor = (partial, exchange / peak_copy_rate(hw))
    if pattern == "bulk_sync":
        combine = p["fd_combine_s"] + exchange / (hw.peer_bytes_per_s * p["pull_eff"])
        return _parts(partial + combine + 2 * barrier, host_s(p, 2, 2), partial, combine, floor,
                      partial=partial, combine=combine, barrier=2 * barrier)
    if pattern == "fused_push":
        push = p["fd_push_s"] + exchange / sm_copy_rate(min(b * h_kv, hw.compute_units), hw)
        return _parts(partial + push + barrier, host_s(p, 2, 1), partial, push, floor,
                      partial=partial, push=push, barrier=barrier)
    raise _bad_pattern("flash_decode", pattern)


_KERNELS = {"gemm_all_scatter": _gemm_all_scatter, "all_gather_gemm": _all_gather_gemm,
            "gemm_reduce_scatter": _gemm_reduce_scatter, "flash_decode": _flash_decode}


def _parts(gpu: float, host: float, compute: float, comm: float, floor: tuple, **parts: float) -> dict:
    """The GPU's and the host's times of a launch, its compute and communication parts, and
    ``floor``: (compute alone, communication alone), the two halves of the lower bound."""
    return {"gpu": gpu, "host": host, "compute": compute, "comm": comm, "floor": floor, "parts": parts}


def _bad_pattern(kernel: str, pattern: str) -> OverlapModelError:
    return OverlapModelError(f"pattern of {kernel} must be one the model prices, got {pattern!r}")


def _bad_kernel(kernel: str) -> OverlapModelError:
    return OverlapModelError(f"kernel must be one of {', '.join(_KERNELS)}, got {kernel!r}")


# ------------------------------------------------------------------------------ baseline
def _baseline(kernel: str, prob: Mapping, w: int, p: dict) -> dict:
    """torch + NCCL: the matmul (cuBLAS) or attention, then the collective, back to back."""
    if kernel == "flash_decode":
        b, h, h_kv, d, s = prob["B"], prob["H"], prob["H_kv"], prob["D"], prob["S"]
        kv_bytes = 2 * b * h_kv * math.ceil(s / w) * d * ELEMENT_BYTES
        attention = p["torch_attn_launch_s"] + kv_bytes / p["torch_attn_bytes_per_s"]
        gather = nccl_s((w - 1) * b * h * (d + 1) * FP32_BYTES, p, "allgather")
        comm = gather + p["torch_combine_s"]
        return _parts(attention + comm, 0.0, attention, comm, (attention, comm), attention=attention,
                      all_gather=gather, combine=p["torch_combine_s"])
    m, n, k = prob["M"], prob["N"], prob["K"]
    if kernel == "gemm_all_scatter":
        compute = cublas_s(m, n // w, k, p)
        comm = nccl_s((w - 1) * m * (n // w) * ELEMENT_BYTES, p, "allgather")
    elif kernel == "all_gather_gemm":
        compute = cublas_s(m, n // w, k, p)
        comm = nccl_s((w - 1) * (m // w) * k * ELEMENT_BYTES, p, "allgather")
    elif kernel == "gemm_reduce_scatter":
        compute = cublas_s(m, n, k // w, p)
        comm = nccl_s((w - 1) * (m // w) * n * ELEMENT_BYTES, p, "reducescatter")
    else:
        raise _bad_kernel(kernel)
    return _parts(compute + comm, 0.0, compute, comm, (compute, comm), matmul=compute, collective=comm)


# ------------------------------------------------------------------------------ the API
def predict(kernel: str, problem: Mapping[str, int], world_size: int, pattern: str,
            meta: Mapping[str, Any], hw, dtype: str = "bfloat16",
            params: dict | None = None, measured_gemm: bool = False,
            rank_gemm: str = str(RANK_GEMM_MEASURED)) -> OverlapPrediction:
    """The predicted time of one launch of ``kernel`` (a DistKernelSpec name) at ``problem``
    (global sizes, as in the module's ``SPEC.problems``) on ``world_size`` ranks of ``hw``
    (a HardwareSpec), with ``pattern`` and ``meta`` (BLOCK_M/N/K, num_warps, num_stages,
    COMM_SMS, CE_GROUPS, SPLITS; a missing knob takes the kernel's default meta), with its lower
    bound, interval and extrapolation flag (the module's docstring).

    ``params`` replaces the fitted parameters (the fit passes its trial values); leave it None.
    ``measured_gemm``: where ``rank_gemm`` (a file of per-rank GEMMs timed alone per device) has
    this device and per-rank shape, the GEMM is scaled to that time (``source`` says so); the
    validated figures (bench/results/overlap_model_validation.md) are without it.

    Raises:
        OverlapModelError: an unknown kernel or pattern, a spec without the interconnect
            figures, a dtype other than the 2-byte ones the model was fitted on.
    """
    if kernel not in _KERNELS:
        raise _bad_kernel(kernel)
    _check(hw, dtype, world_size)
    p = params or load_params()
    meta = {**_default_meta(kernel), **meta}
    used = ""
    if measured_gemm and kernel != "flash_decode":
        hw, used = _measured_gemm(kernel, problem, world_size, meta, hw, rank_gemm)
    out = _KERNELS[kernel](problem, world_size, pattern, meta, hw, p)
    why = extrapolation(kernel, problem, world_size, hw, p, pattern, meta)
    prediction = _prediction(out, hw, world_size, why, _interval_q(p, "kernel"))
    return dataclasses.replace(prediction, source=f"{prediction.source} ({used})") if used else prediction


def predict_baseline(kernel: str, problem: Mapping[str, int], world_size: int, hw,
                     dtype: str = "bfloat16", params: dict | None = None) -> OverlapPrediction:
    """The predicted time of torch + NCCL doing what ``kernel`` does (nothing hidden): cuBLAS
    or torch attention, then the NCCL collective. Raises OverlapModelError as ``predict``."""
    if kernel not in _KERNELS:
        raise _bad_kernel(kernel)
    _check(hw, dtype, world_size)
    p = params or load_params()
    why = extrapolation(kernel, problem, world_size, hw, p)
    return _prediction(_baseline(kernel, problem, world_size, p), hw, world_size, why,
                       _interval_q(p, "baseline"))


def extent(kernel: str, problem: Mapping[str, int], world_size: int) -> dict:
    """The quantities of one rank's work whose measured range decides ``extrapolated``: the
    per-rank GEMM ``m``, ``n``, ``k`` and the bytes a rank sends (``comm_bytes``); for flash
    decode the query heads ``batch_heads``, the rank's KV bytes and the bytes it exchanges."""
    w = world_size
    if kernel == "flash_decode":
        b, h, h_kv, d, s = problem["B"], problem["H"], problem["H_kv"], problem["D"], problem["S"]
        return {"batch_heads": b * h, "kv_bytes": 2 * b * h_kv * math.ceil(s / w) * d * ELEMENT_BYTES,
                "comm_bytes": (w - 1) * b * h * (d + 1) * FP32_BYTES}
    m, n, k = problem["M"], problem["N"], problem["K"]
    if kernel == "gemm_reduce_scatter":
        return {"m": m, "n": n, "k": k // w, "comm_bytes": (w - 1) * (m // w) * n * ELEMENT_BYTES}
    sent = (m // w) * k if kernel == "all_gather_gemm" else m * (n // w)
    return {"m": m, "n": n // w, "k": k, "comm_bytes": (w - 1) * sent * ELEMENT_BYTES}


def knobs(kernel: str, pattern: str | None, meta: Mapping) -> dict:
    """The knobs of ``meta`` that ``pattern`` reads (``tile``: the GEMM's tile configuration as
    hwspecs' ``matmul_tile_rates`` name it), whose measured values decide ``extrapolated``."""
    out = {}
    if kernel == "flash_decode":
        out.update(SPLITS=meta.get("SPLITS"), BLOCK_N=meta.get("BLOCK_N"))
    elif all(f in meta for f in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "num_warps", "num_stages")):
        out["tile"] = (f"{meta['BLOCK_M']}x{meta['BLOCK_N']}x{meta['BLOCK_K']}:"
                       f"{meta['num_warps']}:{meta['num_stages']}")
    if (kernel, pattern) in _COMM_SMS_PATTERNS:
        out["COMM_SMS"] = meta.get("COMM_SMS")
    if pattern == "push_copy_engine":
        out["CE_GROUPS"] = meta.get("CE_GROUPS")
        if kernel == "gemm_reduce_scatter":
            out["SLICES"] = meta.get("SLICES")
    return {k: v for k, v in out.items() if v is not None}


#: The knobs the model prices; any other knob set (the persistent GEMM's STREAM_K, WARP_SPECIALIZE,
#: EPILOGUE_SUBTILE, added after the fit) makes a prediction extrapolated.
MODEL_KNOBS = {"BLOCK_M", "BLOCK_N", "BLOCK_K", "num_warps", "num_stages", "COMM_SMS", "CE_GROUPS", "SPLITS",
               "SLICES"}

_COMM_SMS_PATTERNS = {("gemm_all_scatter", "producer_consumer"), ("gemm_all_scatter", "workgroup_specialized"),
                      ("all_gather_gemm", "push"), ("gemm_reduce_scatter", "producer_consumer")}


def extrapolation(kernel: str, problem: Mapping[str, int], world_size: int, hw, params: dict | None = None,
                  pattern: str | None = None, meta: Mapping | None = None) -> list:
    """Why a prediction lies outside what was measured (an empty list: inside), against the
    fit's ``_domain`` (the hardware fitted on, the world sizes, per kernel the range of each
    ``extent`` and the values of each knob measured on it)."""
    domain = (params or {}).get("_domain") or load_params().get("_domain") or {}
    if not domain:
        return ["the parameters carry no measured domain (refit: validate_overlap_model fit)"]
    why = []
    if hw.name != domain["hardware"]:
        why.append(f"fitted on {domain['hardware']}, not measured on {hw.name}")
    lo, hi = domain["world_size"]
    if not lo <= world_size <= hi:
        why.append(f"W = {world_size} is outside the measured {lo}-{hi}")
    measured = domain["kernels"].get(kernel, {})
    for name, value in extent(kernel, problem, world_size).items():
        low, high = measured.get(name, (None, None))
        if low is None or not low / 1.001 <= value <= high * 1.001:
            unit = " bytes" if name.endswith("bytes") else ""
            span = "none" if low is None else f"{low:g}-{high:g}{unit}"
            why.append(f"{name} = {value:g}{unit} is outside the measured {span}")
    for name, value in sorted((meta or {}).items()):
        if name not in MODEL_KNOBS and value not in (0, None, False):
            why.append(f"{name} = {value} is not in the model (its GEMM was fitted without it)")
    for name, value in knobs(kernel, pattern, meta or {}).items():
        seen = measured.get("knobs", {}).get(name)
        if isinstance(value, str):
            if value not in (seen or ()):
                why.append(f"{name} {value} was not measured")
        elif seen is None or not seen[0] <= value <= seen[1]:
            why.append(f"{name} = {value} is outside the measured "
                       f"{'none' if seen is None else f'{seen[0]}-{seen[1]}'}")
    return why


def _interval_q(p: dict, which: str) -> float:
    """The interval's half-width on the log scale: the fit's cross-validated 90th percentile."""
    interval = p.get("_interval") or load_params().get("_interval") or {}
    return float(interval.get(which, 0.0))


def _prediction(out: dict, hw, world_size: int, why: list, q: float) -> OverlapPrediction:
    lower = max(out["floor"])
    total = max(out["gpu"], out["host"], lower)
    compute, comm = out["compute"], out["comm"]
    exposed = max(0.0, out["gpu"] - compute)
    hidden = 0.0 if comm <= 0 else min(1.0, max(0.0, 1.0 - exposed / comm))
    parts = {name: value * 1e3 for name, value in out["parts"].items()}
    if out["host"]:
        parts["host"] = out["host"] * 1e3
    notes = "bound" if lower > max(out["gpu"], out["host"]) else "host" if out["host"] > out["gpu"] else "gpu"
    q = 2 * q if why else q
    interval = [max(lower, total * math.exp(-q)) * 1e3, total * math.exp(q) * 1e3]
    gpu = max(out["gpu"], lower)
    return OverlapPrediction(time_ms=total * 1e3, compute_ms=compute * 1e3, comm_ms=comm * 1e3,
                             hidden_share=hidden, source=f"simulated:{hw.name}x{world_size}",
                             breakdown=parts, notes=notes, lower_bound_ms=lower * 1e3,
                             interval_ms=interval, extrapolated=bool(why), extrapolated_why="; ".join(why),
                             gpu_ms=gpu * 1e3,
                             gpu_interval_ms=[max(lower, gpu * math.exp(-q)) * 1e3, gpu * math.exp(q) * 1e3])


def missing_figures(hw) -> list:
    """The interconnect figures the model prices with that ``hw`` (a HardwareSpec) lacks, by
    field name: the peer bandwidth, the copy-engine rate and the SM-copy curve."""
    return [f for f in _HW_FIELDS if getattr(hw, f, None) is None]


def _check(hw, dtype: str, world_size: int) -> None:
    missing = missing_figures(hw)
    if missing:
        raise OverlapModelError(f"hwspecs/{hw.name}.yaml must give the interconnect figures "
                                f"{', '.join(missing)} for the overlap model, got none")
    if dtype not in ("bfloat16", "float16"):
        raise OverlapModelError(f"dtype must be bfloat16 or float16 (the fit's 2-byte types), got {dtype}")
    if not isinstance(world_size, int) or world_size < 2:
        raise OverlapModelError(f"world_size must be an integer >= 2, got {world_size!r}")


@functools.lru_cache(maxsize=None)
def _default_meta(kernel: str) -> dict:
    import importlib
    module = importlib.import_module(f"swizzleperf.kernels.distributed.{kernel}")
    return dict(module.SPEC.meta)
