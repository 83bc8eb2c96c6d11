"""The overlap model: the predicted time of one launch of a bundled distributed kernel (and of
torch + NCCL doing the same) for a hardware spec, a world size W and a configuration.

The distributed analogue of the L2 simulator (``simulated:<spec>xW``). Each kernel is priced from
parts whose costs come from the hardware spec and a few fitted efficiencies:

- **the per-rank GEMM** on P programs: ``ceil``-free waves of tiles, each tile
  ``2 BLOCK_M BLOCK_N K`` flops at the SM's share of the peak matrix rate times an efficiency
  that falls with the tile's arithmetic intensity ``BLOCK_M BLOCK_N / (BLOCK_M + BLOCK_N)``; a
  last, partial wave costs ``(its tiles / P) ** gamma`` of a full one (tiles alone on the chip run
  faster);
- **SM copies** (scatter, push) on P programs: bytes over ``sm_copy_bytes_per_s x P / (P + h)``
  (measured), plus a cost per tile message and peer, spread over the programs;
- **copy-engine copies**: bytes over ``copy_engine_bytes_per_s``, plus a cost per copy call;
- **HBM-bound parts** (the reduce, flash decode's partials): bytes over the spec's DRAM
  bandwidth times a fitted efficiency, the partials limited by how many programs they give the SMs;
- **NCCL collectives** (the baseline): a latency per peer step plus bytes over a fitted rate;
- **cuBLAS** (the baseline's matmul): flops over a fitted rate, plus a launch cost;
- per pattern (the taxonomy: bulk_sync, producer_consumer, fused_sequential,
  workgroup_specialized, pull, push, push_copy_engine, fused_push): what runs on which SMs
  concurrently, what waits for what, the tail that cannot be hidden, and device barriers.

The efficiencies are fitted by ``eval/validate_overlap_model.py fit`` on the 2-GPU measurements
only (eval/results/dist_h200_2gpu.json, H200) and the single-GPU per-rank GEMMs of
shared/HARDWARE.md, and stored in ``profiling/overlap_params.json`` with their source; the 4- and
8-GPU measurements are predicted unseen (eval/results/overlap_model_validation.md).
"""
from __future__ import annotations

import functools
import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Mapping

PARAMS_PATH = Path(__file__).with_name("overlap_params.json")
BF16_BYTES = 2
FP32_BYTES = 4


class OverlapModelError(ValueError):
    """A kernel, pattern or spec the model cannot price; one line "X must be Y, got Z"."""


@dataclass(frozen=True)
class OverlapPrediction:
    """The predicted time of one launch (slowest rank) and its parts, in ms.

    Attributes:
        time_ms: the whole launch.
        compute_ms: the compute part alone, as this configuration runs it (its SMs, its tiles).
        comm_ms: the communication alone.
        hidden_share: 0..1, the share of ``comm_ms`` hidden behind compute.
        source: ``simulated:<spec>x<W>``.
        breakdown: named parts in ms.
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
    """The fitted parameters (name -> value), with ``_source`` saying how they were fitted."""
    return json.loads(Path(path).read_text())


# ------------------------------------------------------------------------------------ the parts
def gemm_s(m: int, n: int, k: int, meta: Mapping, programs: int, hw, p: dict) -> float:
    """Seconds of the per-rank Triton GEMM [m, k] @ [k, n] on ``programs`` SMs, persistent."""
    bm, bn = meta["BLOCK_M"], meta["BLOCK_N"]
    tiles = math.ceil(m / bm) * math.ceil(n / bn)
    intensity = bm * bn / (bm + bn) / (128 * 256 / (128 + 256))
    efficiency = p["gemm_eff"] * min(1.0, intensity) ** p["gemm_intensity_exp"]
    tile_s = 2.0 * bm * bn * k / (hw.peak_bf16_flops / hw.compute_units * efficiency)
    full, rest = divmod(tiles, programs)
    waves = full + (rest / programs) ** p["gemm_gamma"] if rest else full
    return p["gemm_launch_s"] + tile_s * waves


def sm_copy_s(nbytes: float, messages: float, programs: int, hw, p: dict, units: float | None = None) -> float:
    """Seconds for ``programs`` SM programs to move ``nbytes`` to peers in ``messages`` puts of
    ``units`` pieces of work (tiles, row chunks): no more programs copy than there are units."""
    programs = max(1, min(programs, units if units is not None else programs))
    rate = hw.sm_copy_bytes_per_s * programs / (programs + hw.sm_copy_half_programs)
    return p["copy_launch_s"] + nbytes / rate + p["copy_message_s"] * messages / programs


def copy_engine_s(nbytes: float, copies: int, hw, p: dict) -> float:
    """Seconds for the copy engine to move ``nbytes`` in ``copies`` calls (each with its signal)."""
    return nbytes / hw.copy_engine_bytes_per_s + p["ce_call_s"] * copies


def hbm_s(nbytes: float, hw, p: dict, share: float = 1.0) -> float:
    """Seconds to stream ``nbytes`` through HBM with ``share`` of the SMs busy (0..1]."""
    return p["hbm_launch_s"] + nbytes / (hw.dram_bytes_per_s * p["hbm_eff"] * min(1.0, share))


def nccl_s(nbytes_per_rank: float, world_size: int, p: dict, kind: str) -> float:
    """Seconds of an NCCL collective moving ``nbytes_per_rank`` of each rank's data: a launch
    cost, then the W - 1 other ranks' shares through the rank's links. (A per-step latency is
    not separable from the launch cost on 2-GPU data alone, and is left out.)"""
    return p[f"nccl_{kind}_launch_s"] + (world_size - 1) * nbytes_per_rank / p[f"nccl_{kind}_bytes_per_s"]


def cublas_s(m: int, n: int, k: int, p: dict) -> float:
    return p["cublas_launch_s"] + 2.0 * m * n * k / p["cublas_flops"]


# ------------------------------------------------------------------------------------ kernels
def _gemm_all_scatter(prob, w, pattern, meta, hw, p) -> dict:
    m, n, k = prob["M"], prob["N"] // w, prob["K"]
    sms, comm = hw.compute_units, meta["COMM_SMS"]
    tiles = math.ceil(m / meta["BLOCK_M"]) * math.ceil(n / meta["BLOCK_N"])
    nbytes = (w - 1) * m * n * BF16_BYTES
    messages = tiles * (w - 1)
    full_gemm, full_copy = gemm_s(m, n, k, meta, sms, hw, p), sm_copy_s(nbytes, messages, sms, hw, p, tiles)
    barrier = p["barrier_s"]
    if pattern == "bulk_sync":
        return _parts(full_gemm + full_copy + barrier, full_gemm, full_copy, gemm=full_gemm,
                      scatter=full_copy, barrier=barrier)
    if pattern == "fused_sequential":
        # each program stores its tile to every peer right after computing it: the stores of one
        # wave overlap the next wave's compute; the last wave's stores are the tail
        store = sm_copy_s(nbytes, messages, sms, hw, p, tiles) * p["fused_store_factor"]
        waves = max(1.0, tiles / sms)
        body = max(full_gemm, store)
        total = body + store / waves + barrier
        return _parts(total, full_gemm, store, gemm=full_gemm, stores=store, tail=store / waves,
                      barrier=barrier)
    if pattern in ("producer_consumer", "workgroup_specialized"):
        compute = gemm_s(m, n, k, meta, sms - comm, hw, p)
        copy = sm_copy_s(nbytes, messages, comm, hw, p, tiles)
        tail = copy / max(1.0, tiles / comm) + p[f"{pattern}_s"]
        total = max(compute, copy) + tail + barrier
        return _parts(total, compute, copy, gemm=compute, scatter=copy, tail=tail, barrier=barrier)
    raise _bad_pattern("gemm_all_scatter", pattern)


def _all_gather_gemm(prob, w, pattern, meta, hw, p) -> dict:
    m, n, k = prob["M"], prob["N"] // w, prob["K"]
    rows = m // w
    sms, comm = hw.compute_units, meta["COMM_SMS"]
    nbytes = (w - 1) * rows * k * BF16_BYTES                 # what each rank sends (and gets)
    chunks = math.ceil(rows / meta["BLOCK_M"])
    barrier = p["barrier_s"]
    if pattern == "bulk_sync":
        push = sm_copy_s(nbytes, chunks * (w - 1), sms, hw, p, chunks * (w - 1))
        compute = gemm_s(m, n, k, meta, sms, hw, p)
        return _parts(push + compute + 2 * barrier, compute, push, push=push, gemm=compute,
                      barrier=2 * barrier)
    if pattern == "pull":
        compute = gemm_s(m, n, k, meta, sms, hw, p)
        remote = (w - 1) / w * m * k * BF16_BYTES * math.ceil(n / meta["BLOCK_N"])
        pull = remote / (hw.peer_bytes_per_s * p["pull_eff"])
        return _parts(max(compute, pull) + barrier, compute, pull, gemm=compute, pull=pull, barrier=barrier)
    if pattern == "push":
        compute = gemm_s(m, n, k, meta, sms - comm, hw, p)
        push = sm_copy_s(nbytes, chunks * (w - 1), comm, hw, p, chunks * (w - 1))
        own = compute / w                                    # the local rows, computed first
        total = max(compute, push + (compute - own) / max(1.0, w - 1)) + barrier + p["push_s"]
        return _parts(total, compute, push, gemm=compute, push=push, barrier=barrier)
    if pattern == "push_copy_engine":
        compute = gemm_s(m, n, k, meta, sms, hw, p)
        copies = (w - 1) * min(meta["CE_GROUPS"], chunks)
        push = copy_engine_s(nbytes, copies, hw, p)
        total = max(compute, push + (compute - compute / w) / max(1.0, w - 1)) + barrier
        return _parts(total, compute, push, gemm=compute, push=push, barrier=barrier)
    raise _bad_pattern("all_gather_gemm", pattern)


def _gemm_reduce_scatter(prob, w, pattern, meta, hw, p) -> dict:
    m, n, k = prob["M"], prob["N"], prob["K"] // w
    sms, comm = hw.compute_units, meta["COMM_SMS"]
    remote = (w - 1) / w * m * n * BF16_BYTES               # partials stored into their owners
    local_reads = m * n * BF16_BYTES                        # the W slots of the own rows
    barrier = p["barrier_s"]
    store_s = remote / (hw.peer_bytes_per_s * p["rs_store_eff"])
    if pattern == "bulk_sync":
        compute = max(gemm_s(m, n, k, meta, sms, hw, p), store_s)
        reduce = hbm_s(local_reads, hw, p)
        return _parts(compute + reduce + 2 * barrier, compute, store_s + reduce, gemm=compute,
                      reduce=reduce, barrier=2 * barrier)
    if pattern == "producer_consumer":
        compute = max(gemm_s(m, n, k, meta, sms - comm, hw, p), store_s)
        reduce = hbm_s(local_reads, hw, p, share=comm / sms * p["reduce_sm_gain"])
        total = max(compute, reduce) + reduce / max(1.0, w) + barrier + p["rs_pc_s"]
        return _parts(total, compute, store_s + reduce, gemm=compute, reduce=reduce, barrier=barrier)
    raise _bad_pattern("gemm_reduce_scatter", pattern)


def _flash_decode(prob, w, pattern, meta, hw, p) -> dict:
    b, h, h_kv, d, s = prob["B"], prob["H"], prob["H_kv"], prob["D"], prob["S"]
    kv_bytes = 2 * b * h_kv * (s / w) * d * BF16_BYTES
    programs = b * h_kv * meta["SPLITS"]
    partial = hbm_s(kv_bytes, hw, p, share=programs / hw.compute_units)
    exchange = (w - 1) * b * h * (d + 1) * FP32_BYTES
    barrier = p["barrier_s"]
    if pattern == "bulk_sync":
        combine = p["fd_combine_s"] + exchange / (hw.peer_bytes_per_s * p["pull_eff"])
        return _parts(partial + combine + 2 * barrier, partial, combine, partial=partial,
                      combine=combine, barrier=2 * barrier)
    if pattern == "fused_push":
        push = p["fd_push_s"] + exchange / hw.peer_bytes_per_s
        return _parts(partial + push + barrier, partial, push, partial=partial, push=push, barrier=barrier)
    raise _bad_pattern("flash_decode", pattern)


_KERNELS = {"gemm_all_scatter": _gemm_all_scatter, "all_gather_gemm": _all_gather_gemm,
            "gemm_reduce_scatter": _gemm_reduce_scatter, "flash_decode": _flash_decode}


def _parts(total: float, compute: float, comm: float, **parts: float) -> dict:
    return {"total": total, "compute": compute, "comm": comm, "parts": parts}


def _bad_pattern(kernel: str, pattern: str) -> OverlapModelError:
    return OverlapModelError(f"pattern of {kernel} must be one the model prices, got {pattern!r}")


# ------------------------------------------------------------------------------------ baseline
def _baseline(kernel: str, prob: Mapping, w: int, p: dict) -> dict:
    """torch + NCCL: the matmul (cuBLAS) or attention, then the collective, back to back."""
    if kernel == "flash_decode":
        b, h, h_kv, d, s = prob["B"], prob["H"], prob["H_kv"], prob["D"], prob["S"]
        attention = p["torch_attn_launch_s"] + 2 * b * h_kv * (s / w) * d * BF16_BYTES / p["torch_attn_bytes_per_s"]
        # the gather of every rank's partials (small) and the combine in torch ops
        comm = p["torch_combine_s"] + nccl_s(b * h * (d + 1) * FP32_BYTES, w, p, "allgather")
        return _parts(attention + comm, attention, comm, attention=attention, all_gather=comm)
    m, n, k = prob["M"], prob["N"], prob["K"]
    if kernel == "gemm_all_scatter":
        compute, comm = cublas_s(m, n // w, k, p), nccl_s(m * (n // w) * BF16_BYTES, w, p, "allgather")
    elif kernel == "all_gather_gemm":
        comm, compute = nccl_s((m // w) * k * BF16_BYTES, w, p, "allgather"), cublas_s(m, n // w, k, p)
    elif kernel == "gemm_reduce_scatter":
        compute, comm = cublas_s(m, n, k // w, p), nccl_s((m // w) * n * BF16_BYTES, w, p, "reducescatter")
    else:
        raise OverlapModelError(f"kernel must be one of {', '.join(_KERNELS)}, got {kernel!r}")
    return _parts(compute + comm, compute, comm, matmul=compute, collective=comm)


# ------------------------------------------------------------------------------------ the API
def predict(kernel: str, problem: Mapping[str, int], world_size: int, pattern: str,
            meta: Mapping[str, Any], hw, dtype: str = "bfloat16",
            params: dict | None = None) -> OverlapPrediction:
    """The predicted time of one launch of ``kernel`` (a DistKernelSpec name) at ``problem``
    (global sizes), ``world_size`` ranks of ``hw``, ``pattern`` and ``meta`` (tile knobs,
    COMM_SMS, CE_GROUPS, SPLITS; missing knobs take the kernel's defaults).

    Raises:
        OverlapModelError: an unknown kernel or pattern, a spec without interconnect figures,
            a dtype other than bf16 / fp16 (the fit's).
    """
    if kernel not in _KERNELS:
        raise OverlapModelError(f"kernel must be one of {', '.join(_KERNELS)}, got {kernel!r}")
    _check_hw(hw)
    if dtype not in ("bfloat16", "float16"):
        raise OverlapModelError(f"dtype must be bfloat16 or float16 (2-byte), got {dtype}")
    p = params or load_params()
    meta = {**_default_meta(kernel), **meta}
    out = _KERNELS[kernel](problem, world_size, pattern, meta, hw, p)
    return _prediction(out, hw, world_size)


def predict_baseline(kernel: str, problem: Mapping[str, int], world_size: int, hw,
                     dtype: str = "bfloat16", params: dict | None = None) -> OverlapPrediction:
    """The predicted time of torch + NCCL doing what ``kernel`` does (nothing hidden)."""
    _check_hw(hw)
    out = _baseline(kernel, problem, world_size, params or load_params())
    return _prediction(out, hw, world_size)


def _prediction(out: dict, hw, world_size: int) -> OverlapPrediction:
    total, compute, comm = out["total"], out["compute"], out["comm"]
    exposed = max(0.0, total - compute)
    hidden = 0.0 if comm <= 0 else min(1.0, max(0.0, 1.0 - exposed / comm))
    return OverlapPrediction(time_ms=total * 1e3, compute_ms=compute * 1e3, comm_ms=comm * 1e3,
                             hidden_share=hidden, source=f"simulated:{hw.name}x{world_size}",
                             breakdown={k: v * 1e3 for k, v in out["parts"].items()})


def _check_hw(hw) -> None:
    missing = [f for f in ("link_bytes_per_s", "peer_bytes_per_s", "copy_engine_bytes_per_s",
                           "sm_copy_bytes_per_s", "sm_copy_half_programs") if getattr(hw, f, None) is None]
    if missing:
        raise OverlapModelError(f"hwspecs/{hw.name}.yaml must give the interconnect figures "
                                f"{', '.join(missing)} for the overlap model, got none")


@functools.lru_cache(maxsize=None)
def _default_meta(kernel: str) -> dict:
    import importlib
    module = importlib.import_module(f"swizzleperf.kernels.distributed.{kernel}")
    return dict(module.SPEC.meta)
