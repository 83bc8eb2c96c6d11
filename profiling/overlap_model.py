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
    ``matmul_last_wave_exp``, measured on one H200: eval/results/rank_gemm_h200.json);
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
swizzleperf.eval.validate_overlap_model fit`` on the 2-GPU measurements only
(eval/results/dist_h200_2gpu.json) and stored with their source in
``profiling/overlap_params.json``; the 4- and 8-GPU measurements are predicted unseen
(eval/results/overlap_model_validation.md). Times are in seconds inside, ms in the API.
"""
from __future__ import annotations

import functools
import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Mapping

PARAMS_PATH = Path(__file__).with_name("overlap_params.json")
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
        notes: what bounds the launch (``"gpu"`` or ``"host"``).
    """

    time_ms: float
    compute_ms: float
    comm_ms: float
    hidden_share: float
    source: str
    breakdown: dict = field(default_factory=dict)
    notes: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


@functools.lru_cache(maxsize=4)
def load_params(path: str = str(PARAMS_PATH)) -> dict:
    """The fitted parameters (name -> value; seconds, bytes/s or FLOP/s), with ``_source``."""
    return json.loads(Path(path).read_text())


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
    ``Tensor.copy_`` and the launch of a one-program signal kernel)."""
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
    if pattern == "bulk_sync":
        scatter = p["copy_launch_s"] + nbytes / sm_copy_rate(min(sms, tiles), hw)
        return _parts(gemm + scatter + barrier, host_s(p, 2, 1), gemm, scatter,
                      gemm=gemm, scatter=scatter, barrier=barrier)
    if pattern == "fused_sequential":
        store = nbytes / sm_copy_rate(min(sms, tiles), hw)
        body = _epilogue_stores_s(gemm, math.ceil(tiles / sms), store, p)
        return _parts(body + barrier, host_s(p, 1, 1), gemm, store,
                      gemm=gemm, stores=store, tail=body - gemm, barrier=barrier)
    if pattern in ("producer_consumer", "workgroup_specialized"):
        gemm_programs = sms - comm
        gemm = gemm_s(m, n, k, meta, gemm_programs, hw)
        scatter = nbytes / sm_copy_rate(min(comm, tiles), hw)
        n_waves = math.ceil(tiles / gemm_programs)
        last_share = (tiles - (n_waves - 1) * gemm_programs) / tiles
        body = max(gemm + scatter * last_share, gemm / n_waves + scatter) + p["copy_launch_s"]
        launches = (2, 1, 1) if pattern == "producer_consumer" else (1, 1, 0)
        return _parts(body + barrier, host_s(p, *launches), gemm, scatter,
                      gemm=gemm, scatter=scatter, tail=body - gemm, barrier=barrier)
    raise _bad_pattern("gemm_all_scatter", pattern)


def _all_gather_gemm(prob, w, pattern, meta, hw, p) -> dict:
    m, n, k = prob["M"], prob["N"] // w, prob["K"]
    rows = m // w
    sms, comm = hw.compute_units, meta["COMM_SMS"]
    shard = rows * k * ELEMENT_BYTES                          # one rank's rows of A
    chunks = math.ceil(rows / meta["BLOCK_M"])
    barrier = barrier_s(w, hw, p)
    if pattern == "bulk_sync":
        push = p["copy_launch_s"] + (w - 1) * shard / sm_copy_rate(min(sms, chunks * (w - 1)), hw)
        gemm = gemm_s(m, n, k, meta, sms, hw)
        return _parts(push + gemm + 2 * barrier, host_s(p, 2, 2), gemm, push,
                      push=push, gemm=gemm, barrier=2 * barrier)
    if pattern == "pull":
        gemm = gemm_s(m, n, k, meta, sms, hw)
        remote = (w - 1) * shard * math.ceil(n / meta["BLOCK_N"])   # once per column tile
        pull = remote / (hw.peer_bytes_per_s * p["pull_eff"])
        return _parts(max(gemm, pull) + barrier, host_s(p, 1, 1), gemm, pull,
                      gemm=gemm, pull=pull, barrier=barrier)
    if pattern == "push":
        gemm = gemm_s(m, n, k, meta, sms - comm, hw)
        chunk_s = shard / chunks / sm_copy_rate(min(comm, chunks * (w - 1)), hw)
        ready = [0.0] * chunks + [p["copy_launch_s"] + (i + 1) * chunk_s for i in range(chunks * (w - 1))]
        body = _streamed_gemm_s(gemm / len(ready), ready)
        return _parts(body + barrier, host_s(p, 2, 1, 1), gemm, chunk_s * len(ready[chunks:]),
                      gemm=gemm, push=chunk_s * chunks * (w - 1), tail=body - gemm, barrier=barrier)
    if pattern == "push_copy_engine":
        gemm = gemm_s(m, n, k, meta, sms, hw)
        groups = min(meta["CE_GROUPS"], chunks)
        group_s = shard / groups / hw.copy_engine_bytes_per_s
        # the copies of distance j go out after those of distance j - 1, one group at a time
        ready = [0.0] * groups + [(i + 1) * group_s for i in range(groups * (w - 1))]
        body = _streamed_gemm_s(gemm / len(ready), ready)
        host = host_s(p, 1, 1, 0, (w - 1) * groups)
        return _parts(body + barrier, host, gemm, group_s * groups * (w - 1),
                      gemm=gemm, push=group_s * groups * (w - 1), tail=body - gemm, barrier=barrier)
    raise _bad_pattern("all_gather_gemm", pattern)


def _gemm_reduce_scatter(prob, w, pattern, meta, hw, p) -> dict:
    m, n, k = prob["M"], prob["N"], prob["K"] // w
    sms, comm = hw.compute_units, meta["COMM_SMS"]
    tiles = math.ceil(m / meta["BLOCK_M"]) * math.ceil(n / meta["BLOCK_N"])
    remote = (w - 1) / w * m * n * ELEMENT_BYTES             # partials stored into their owners
    reduce_bytes = (w + 1) * (m // w) * n * ELEMENT_BYTES     # the W slots read, the sum written
    barrier = barrier_s(w, hw, p)

    def gemm_with_stores(programs: int) -> tuple:
        gemm = gemm_s(m, n, k, meta, programs, hw)
        store = remote / sm_copy_rate(min(programs, tiles), hw)
        return gemm, _epilogue_stores_s(gemm, math.ceil(tiles / programs), store, p), store

    if pattern == "bulk_sync":
        gemm, body, store = gemm_with_stores(sms)
        reduce = p["copy_launch_s"] + reduce_bytes / hbm_rate(sms, hw, p)
        return _parts(body + reduce + 2 * barrier, host_s(p, 2, 2), gemm, body - gemm + reduce,
                      gemm=gemm, stores=store, tail=body - gemm, reduce=reduce, barrier=2 * barrier)
    if pattern == "producer_consumer":
        gemm, body, store = gemm_with_stores(sms - comm)
        reduce = reduce_bytes / hbm_rate(comm, hw, p)
        rounds = max(1, math.ceil((m // w) / meta["BLOCK_M"]))     # the reduce trails by one
        total = max(body, reduce) + reduce / rounds + p["copy_launch_s"]
        return _parts(total + barrier, host_s(p, 2, 1, 1), gemm, body - gemm + reduce,
                      gemm=gemm, stores=store, reduce=reduce, tail=total - gemm, barrier=barrier)
    raise _bad_pattern("gemm_reduce_scatter", pattern)


def _flash_decode(prob, w, pattern, meta, hw, p) -> dict:
    b, h, h_kv, d, s = prob["B"], prob["H"], prob["H_kv"], prob["D"], prob["S"]
    kv_bytes = 2 * b * h_kv * math.ceil(s / w) * d * ELEMENT_BYTES
    programs = min(b * h_kv * meta["SPLITS"], FD_PROGRAMS_PER_SM * hw.compute_units)
    partial = p["fd_partial_s"] + kv_bytes / hbm_rate(programs, hw, p)
    exchange = (w - 1) * b * h * (d + 1) * FP32_BYTES       # this rank's partial to every peer
    barrier = barrier_s(w, hw, p)
    if pattern == "bulk_sync":
        combine = p["fd_combine_s"] + exchange / (hw.peer_bytes_per_s * p["pull_eff"])
        return _parts(partial + combine + 2 * barrier, host_s(p, 2, 2), partial, combine,
                      partial=partial, combine=combine, barrier=2 * barrier)
    if pattern == "fused_push":
        push = p["fd_push_s"] + exchange / sm_copy_rate(min(b * h_kv, hw.compute_units), hw)
        return _parts(partial + push + barrier, host_s(p, 2, 1), partial, push,
                      partial=partial, push=push, barrier=barrier)
    raise _bad_pattern("flash_decode", pattern)


_KERNELS = {"gemm_all_scatter": _gemm_all_scatter, "all_gather_gemm": _all_gather_gemm,
            "gemm_reduce_scatter": _gemm_reduce_scatter, "flash_decode": _flash_decode}


def _parts(gpu: float, host: float, compute: float, comm: float, **parts: float) -> dict:
    return {"gpu": gpu, "host": host, "compute": compute, "comm": comm, "parts": parts}


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
        return _parts(attention + comm, 0.0, attention, comm, attention=attention,
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
    return _parts(compute + comm, 0.0, compute, comm, matmul=compute, collective=comm)


# ------------------------------------------------------------------------------ the API
def predict(kernel: str, problem: Mapping[str, int], world_size: int, pattern: str,
            meta: Mapping[str, Any], hw, dtype: str = "bfloat16",
            params: dict | None = None) -> OverlapPrediction:
    """The predicted time of one launch of ``kernel`` (a DistKernelSpec name) at ``problem``
    (global sizes, as in the module's ``SPEC.problems``) on ``world_size`` ranks of ``hw``
    (a HardwareSpec), with ``pattern`` and ``meta`` (BLOCK_M/N/K, num_warps, num_stages,
    COMM_SMS, CE_GROUPS, SPLITS; a missing knob takes the kernel's default meta).

    ``params`` replaces the fitted parameters (the fit passes its trial values); leave it None.

    Raises:
        OverlapModelError: an unknown kernel or pattern, a spec without the interconnect
            figures, a dtype other than the 2-byte ones the model was fitted on.
    """
    if kernel not in _KERNELS:
        raise _bad_kernel(kernel)
    _check(hw, dtype, world_size)
    p = params or load_params()
    meta = {**_default_meta(kernel), **meta}
    return _prediction(_KERNELS[kernel](problem, world_size, pattern, meta, hw, p), hw, world_size)


def predict_baseline(kernel: str, problem: Mapping[str, int], world_size: int, hw,
                     dtype: str = "bfloat16", params: dict | None = None) -> OverlapPrediction:
    """The predicted time of torch + NCCL doing what ``kernel`` does (nothing hidden): cuBLAS
    or torch attention, then the NCCL collective. Raises OverlapModelError as ``predict``."""
    if kernel not in _KERNELS:
        raise _bad_kernel(kernel)
    _check(hw, dtype, world_size)
    return _prediction(_baseline(kernel, problem, world_size, params or load_params()), hw, world_size)


def _prediction(out: dict, hw, world_size: int) -> OverlapPrediction:
    total = max(out["gpu"], out["host"])
    compute, comm = out["compute"], out["comm"]
    exposed = max(0.0, out["gpu"] - compute)
    hidden = 0.0 if comm <= 0 else min(1.0, max(0.0, 1.0 - exposed / comm))
    parts = {name: value * 1e3 for name, value in out["parts"].items()}
    if out["host"]:
        parts["host"] = out["host"] * 1e3
    return OverlapPrediction(time_ms=total * 1e3, compute_ms=compute * 1e3, comm_ms=comm * 1e3,
                             hidden_share=hidden, source=f"simulated:{hw.name}x{world_size}",
                             breakdown=parts, notes="host" if out["host"] > out["gpu"] else "gpu")


def _check(hw, dtype: str, world_size: int) -> None:
    missing = [f for f in _HW_FIELDS if getattr(hw, f, None) is None]
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
