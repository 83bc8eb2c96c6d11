"""
Flash decoding with the KV cache split along the sequence across ranks
======================================================================

Why this kernel
---------------
Decoding one token attends one query per sequence, q [B, H, D], to every key and value cached
so far. At long context the cache outgrows one GPU (Llama-3-70B, batch 8 at 128k tokens: K
and V take 4.3 GB per layer, 344 GB over its 80 layers), so it is split along the sequence:
rank r holds the keys and values of positions ``[start_r, start_r + S_r)``,
K_r, V_r [B, H_kv, S_r, D], and q is replicated. Every rank must end with the full output

    out[b, h] = softmax(q[b, h] . K[b, h // G]^T / sqrt(D)) @ V[b, h // G]    (all S keys)

with G = H / H_kv query heads per key head (grouped-query attention, GQA). Softmax over a
union of key sets is a weighted merge of the softmaxes over the parts: a part's partial output
o_p (softmax over its keys, times V) and its log-sum-exp lse_p combine as

    out = sum_p exp(lse_p - m) o_p / sum_p exp(lse_p - m),    m = max_p lse_p,

so each rank computes a partial over its own keys, and only (o_r, lse_r), B x H x (D + 1)
fp32 numbers, cross the links, never the cache. Decode is memory-bound: each key and value is
read once and used for G queries (a few FLOP per byte); the kernel's job is to stream K_r and
V_r at HBM bandwidth and to make the exchange of partials cost as little as possible.

The blocked loop, in pseudo-code
--------------------------------
Flash decoding splits each rank's keys once more, into SPLITS chunks, so that a batch of a
few sequences still fills the GPU (one program per (b, kv head, split)); the last program to
finish a (b, kv head) merges its SPLITS partials into the rank's partial::

    for each program pid:                                    # B * H_kv * SPLITS programs
        bh, split = swizzle(pid, B * H_kv, SPLITS)           # the rewrite target
        qs = q[b, G heads of kv head]                        # [BLOCK_H, D], rows >= G masked
        m, l, acc = -inf, 0, 0                               # online softmax, fp32
        for keys n in split's chunk, BLOCK_N at a time:
            s = qs @ K_r[b, kv, n]^T * log2(e) / sqrt(D)     # [BLOCK_H, BLOCK_N]
            m_new = max(m, rowmax(s)); p = 2^(s - m_new)
            l = l * 2^(m - m_new) + rowsum(p); acc = acc * 2^(m - m_new) + p @ V_r[b, kv, n]
        scratch[bh, split] = (acc / l, m + log2 l)
        if atomic_add(done[bh], 1) is the SPLITS-th:         # last split of bh
            (o_r, lse_r) = merge of scratch[bh, 0..SPLITS)    # the rank's partial
            bulk_sync:  gather[r, bh] = (o_r, lse_r)  locally
            fused_push: gather[r, bh] = (o_r, lse_r)  in every rank's heap; signal ready[r, bh]

    combine, one program per bh, on every rank:
        fused_push: wait for ready[p, bh] = epoch for every rank p (the flags of the pushes)
        bulk_sync:  (after a barrier) pull gather[p, bh] from rank p's heap
        out[b, G heads] = merge of gather[0..W, bh]

Log-sum-exps are kept in base 2 throughout (``exp2`` is the hardware's instruction).
GQA: a program computes all G query heads of its key head with one ``tl.dot``, so each K / V
tile is read once for G queries (the G rows padded to BLOCK_H >= 16, the MMA's minimum).

The patterns (the overlap knob)
-------------------------------
- ``bulk_sync``: partial kernel; barrier; combine kernel pulling every rank's partial
  (``device.load``); barrier. Two launches and two barriers, no flags.
- ``fused_push``: the partial kernel's merging programs store their (o_r, lse_r) into every
  rank's gather buffer and signal a per-(source rank, bh) flag (release, system scope); the
  combine kernel, launched next on the same stream, waits (bounded) for the W flags of each
  bh. No barrier between the kernels, one at the end.

A third pattern, the combine kernel on a second stream beside the partial kernel, was tried
and removed: on two H200s at ``llama3-405b-b32-32k`` its waits timed out (a rank's own flag
stayed one epoch behind; 2026-11-22, cause not established), while the other patterns
verified; the pushes cost microseconds, so there was little to hide.

The tile order's effect
-----------------------
Unlike a GEMM, no K / V tile is read by two programs: every byte of the cache is read exactly
once in any order, so ``swizzle`` moves no L2 traffic of the cache. It decides *when* each
(b, kv head) is finished, hence when its merge runs, when its partial is pushed and when the
peers' combine can start. Counted by hand at ``llama3-70b-b8-64k`` on 8 ranks (8 x 8 = 64 bh,
SPLITS = 16, 1024 programs; say 3 resident per SM, 396 on an H200: the sm_90 build of the
partial kernel takes 38 KB of shared memory): row-major gives the 16 splits of a bh
neighbouring program ids, so the first wave holds every split of 396 / 16 = 24 bh, whose
merges and pushes go out while the other 628 programs (61 %) still stream the cache;
column-major (split-major, ``pid = split * 64 + bh``) puts the last split of every bh among
programs 960..1023, so no bh is merged before 94 % of the programs have started and all 64
merges, pushes and combines queue up at the end. The merge also re-reads the bh's scratch
partials (G x SPLITS x D x 4 B = 64 KB): row-major re-reads them microseconds after they were
written, from L2. Measured effect on an H200: not yet measured.

Baseline: torch + NCCL (per rank: batched matmuls in the input dtype with fp32 softmax and
log-sum-exp, ``all_gather_into_tensor`` of the partials, the merge in torch).
"""
from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from swizzleperf.kernels.distributed import device
from swizzleperf.kernels.distributed.spec import BARRIER, Baseline, DistKernelSpec, Step
from swizzleperf.kernels.distributed.tiles import dot_in_fp32

PATTERNS = ("bulk_sync", "fused_push")
_LOG2E = 1.4426950408889634


@triton.jit
def swizzle(pid, num_bh, num_splits):
    """Map program id ``pid`` to the ``(bh, split)`` it computes (row-major: the splits of one
    (batch, kv head) pair ``bh`` are neighbours)."""
    bh = pid // num_splits
    split = pid % num_splits
    return bh, split


@triton.jit(do_not_specialize=["epoch"])
def flash_decode_partial(
    q_ptr, k_ptr, v_ptr,              # q [B, H, D]; K_r, V_r [B, H_kv, S_r, D] (this rank's keys)
    part_o_ptr, part_lse_ptr,         # scratch fp32 [B * H, SPLITS, D], [B * H, SPLITS]
    done_ptr,                         # int32 [B * H_kv]: finished splits, counted over launches
    gather_o_ptr, gather_lse_ptr,     # heap fp32 [W, B * H, D], [W, B * H]
    flags_ptr,                        # heap int32 [W, B * H_kv]: ready[source rank, bh]
    heap_bases, rank, epoch, num_bh, H_kv, S_r, qk_scale,
    stride_qb, stride_qh, stride_kb, stride_kh, stride_kn, stride_vb, stride_vh, stride_vn,
    GROUP: tl.constexpr, D: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_N: tl.constexpr,
    SPLITS: tl.constexpr, WORLD_SIZE: tl.constexpr, PUSH: tl.constexpr,
    DOT_IN_FP32: tl.constexpr,
):
    """One program: the fp32 flash-decode partial of one (b, kv head, split); the last split of
    a (b, kv head) to finish merges the SPLITS partials and publishes the rank's partial."""
    pid = tl.program_id(axis=0)
    bh, split = swizzle(pid, num_bh, SPLITS)
    b = bh // H_kv
    kv_head = bh % H_kv
    offs_h = tl.arange(0, BLOCK_H)
    mask_h = offs_h < GROUP
    offs_d = tl.arange(0, D)
    rows = bh * GROUP + offs_h                                # [BLOCK_H] rows of [B * H]

    heads = kv_head * GROUP + offs_h                          # [BLOCK_H] query heads
    q_ptrs = q_ptr + b * stride_qb + heads[:, None] * stride_qh + offs_d[None, :]
    q = tl.load(q_ptrs, mask=mask_h[:, None], other=0.0)      # [BLOCK_H, D]
    if DOT_IN_FP32:
        q = q.to(tl.float32)

    # This split's keys: chunks of a multiple of BLOCK_N; the last splits may be short or empty.
    chunk = tl.cdiv(tl.cdiv(S_r, SPLITS), BLOCK_N) * BLOCK_N
    start = split * chunk
    end = tl.minimum(start + chunk, S_r)
    k_base = k_ptr + b.to(tl.int64) * stride_kb + kv_head * stride_kh
    v_base = v_ptr + b.to(tl.int64) * stride_vb + kv_head * stride_vh

    m_i = tl.full((BLOCK_H,), float("-inf"), dtype=tl.float32)
    l_i = tl.zeros((BLOCK_H,), dtype=tl.float32)
    acc = tl.zeros((BLOCK_H, D), dtype=tl.float32)
    for start_n in range(start, end, BLOCK_N):                # every step has >= 1 valid key
        offs_n = start_n + tl.arange(0, BLOCK_N)
        mask_n = offs_n < end
        k = tl.load(k_base + offs_n[None, :] * stride_kn + offs_d[:, None],
                    mask=mask_n[None, :], other=0.0)          # [D, BLOCK_N]
        v = tl.load(v_base + offs_n[:, None] * stride_vn + offs_d[None, :],
                    mask=mask_n[:, None], other=0.0)          # [BLOCK_N, D]
        if DOT_IN_FP32:
            k = k.to(tl.float32)
        scores = tl.dot(q, k) * qk_scale                      # [BLOCK_H, BLOCK_N], base 2
        scores = tl.where(mask_n[None, :], scores, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(scores, axis=1))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(scores - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        p_v = p.to(v_ptr.dtype.element_ty)                    # the MMA's input precision
        if DOT_IN_FP32:
            p_v = p_v.to(tl.float32)
            v = v.to(tl.float32)
        acc = acc * alpha[:, None] + tl.dot(p_v, v)
        m_i = m_new

    empty = l_i == 0.0                                        # a split without keys
    o = acc / tl.where(empty, 1.0, l_i)[:, None]
    lse = tl.where(empty, float("-inf"), m_i + tl.log2(tl.where(empty, 1.0, l_i)))
    part = rows * SPLITS + split
    tl.store(part_o_ptr + part[:, None] * D + offs_d[None, :], o, mask=mask_h[:, None])
    tl.store(part_lse_ptr + part, lse, mask=mask_h)

    # Every thread's stores above happen before the count (bar.sync, then the release); the
    # program that completes the count acquires them all. The count is never reset: each
    # launch adds SPLITS, so "last" is the increment that reaches a multiple of SPLITS.
    tl.debug_barrier()
    finished = tl.atomic_add(done_ptr + bh, 1, sem="acq_rel", scope="gpu")
    if finished % SPLITS == SPLITS - 1:
        m = tl.full((BLOCK_H,), float("-inf"), dtype=tl.float32)
        for s in range(SPLITS):                               # split 0 always has keys: m finite
            lse_s = tl.load(part_lse_ptr + rows * SPLITS + s, mask=mask_h, other=0.0,
                            cache_modifier=".cg")
            m = tl.maximum(m, lse_s)
        l_r = tl.zeros((BLOCK_H,), dtype=tl.float32)
        o_r = tl.zeros((BLOCK_H, D), dtype=tl.float32)
        for s in range(SPLITS):
            lse_s = tl.load(part_lse_ptr + rows * SPLITS + s, mask=mask_h, other=0.0,
                            cache_modifier=".cg")
            o_s = tl.load(part_o_ptr + (rows * SPLITS + s)[:, None] * D + offs_d[None, :],
                          mask=mask_h[:, None], other=0.0, cache_modifier=".cg")
            weight = tl.exp2(lse_s - m)                       # 0 for an empty split
            l_r += weight
            o_r += weight[:, None] * o_s
        o_r = o_r / l_r[:, None]
        lse_r = m + tl.log2(l_r)
        num_rows = num_bh * GROUP
        gather_o = gather_o_ptr + (rank * num_rows + rows)[:, None] * D + offs_d[None, :]
        gather_lse = gather_lse_ptr + rank * num_rows + rows
        if PUSH:
            for i in tl.static_range(WORLD_SIZE):             # staggered: r+1 first, self last
                peer = (rank + 1 + i) % WORLD_SIZE
                device.store(gather_o, o_r, rank, peer, heap_bases, mask=mask_h[:, None])
                device.store(gather_lse, lse_r, rank, peer, heap_bases, mask=mask_h)
            for i in tl.static_range(WORLD_SIZE):             # CTA barrier, then release
                device.signal(flags_ptr + rank * num_bh + bh, epoch, rank,
                              (rank + 1 + i) % WORLD_SIZE, heap_bases)
        else:
            tl.store(gather_o, o_r, mask=mask_h[:, None])
            tl.store(gather_lse, lse_r, mask=mask_h)


@triton.jit(do_not_specialize=["epoch"])
def flash_decode_combine(
    gather_o_ptr, gather_lse_ptr,     # heap fp32 [W, B * H, D], [W, B * H]
    flags_ptr, errors, flag_kind,     # heap int32 [W, B * H_kv]; the heap's error record
    out_ptr,                          # [B, H, D] in the input dtype (contiguous)
    heap_bases, rank, epoch, max_spins, num_bh,
    GROUP: tl.constexpr, D: tl.constexpr, BLOCK_H: tl.constexpr,
    WORLD_SIZE: tl.constexpr, WAIT: tl.constexpr,
):
    """One program per (b, kv head): merge the W ranks' partials of its G query heads into
    ``out``. ``WAIT``: the partials were pushed here, wait for their flags; else pull them."""
    bh = tl.program_id(axis=0)
    offs_h = tl.arange(0, BLOCK_H)
    mask_h = offs_h < GROUP
    offs_d = tl.arange(0, D)
    rows = bh * GROUP + offs_h
    num_rows = num_bh * GROUP
    if WAIT:
        for src in tl.static_range(WORLD_SIZE):
            # Once any wait of this rank has given up, the launch has failed: the later waits
            # are skipped, so a dead peer costs one spin bound, not one per flag.
            if tl.load(errors, volatile=True) == 0:
                device.wait(flags_ptr + src * num_bh + bh, epoch, errors, flag_kind,
                            src * num_bh + bh, src, max_spins)

    m = tl.full((BLOCK_H,), float("-inf"), dtype=tl.float32)
    for src in tl.static_range(WORLD_SIZE):                   # every rank has keys: m finite
        lse_ptrs = gather_lse_ptr + src * num_rows + rows
        if WAIT:
            lse_s = tl.load(lse_ptrs, mask=mask_h, other=0.0, cache_modifier=".cg")
        else:
            lse_s = device.load(lse_ptrs, rank, src, heap_bases, mask=mask_h, other=0.0,
                                cache_modifier=".cg")
        m = tl.maximum(m, lse_s)
    l_sum = tl.zeros((BLOCK_H,), dtype=tl.float32)
    acc = tl.zeros((BLOCK_H, D), dtype=tl.float32)
    for src in tl.static_range(WORLD_SIZE):
        lse_ptrs = gather_lse_ptr + src * num_rows + rows
        o_ptrs = gather_o_ptr + (src * num_rows + rows)[:, None] * D + offs_d[None, :]
        if WAIT:
            lse_s = tl.load(lse_ptrs, mask=mask_h, other=0.0, cache_modifier=".cg")
            o_s = tl.load(o_ptrs, mask=mask_h[:, None], other=0.0, cache_modifier=".cg")
        else:
            lse_s = device.load(lse_ptrs, rank, src, heap_bases, mask=mask_h, other=0.0,
                                cache_modifier=".cg")
            o_s = device.load(o_ptrs, rank, src, heap_bases, mask=mask_h[:, None], other=0.0,
                              cache_modifier=".cg")
        weight = tl.exp2(lse_s - m)
        l_sum += weight
        acc += weight[:, None] * o_s
    out = acc / l_sum[:, None]
    tl.store(out_ptr + rows[:, None] * D + offs_d[None, :], out.to(out_ptr.dtype.element_ty),
             mask=mask_h[:, None])


# ----------------------------------------------------------------------------------- host side
def shard(S: int, world_size: int, rank: int) -> tuple[int, int]:
    """``(start, length)`` of rank ``rank``'s keys among ``S``: the first ``S % W`` ranks hold
    one key more.

    Raises:
        ValueError: fewer keys than ranks (a rank without keys has no partial to merge).
    """
    if S < world_size:
        raise ValueError(f"S must be at least the world size {world_size}, got {S}")
    base, extra = divmod(S, world_size)
    return rank * base + min(rank, extra), base + (rank < extra)


def _check_problem(problem: dict) -> None:
    H, H_kv, D = problem["H"], problem["H_kv"], problem["D"]
    if H % H_kv:
        raise ValueError(f"H must be a multiple of H_kv={H_kv} (GQA), got {H}")
    if D < 16 or D & (D - 1):
        raise ValueError(f"D must be a power of two >= 16, got {D}")


def make_inputs(problem: dict, rank: int, world_size: int, seed: int, device: str = "cpu",
                dtype: str = "bfloat16") -> dict:
    """q [B, H, D] (the same on every rank, from ``seed``) and this rank's shard of the cache,
    K_r, V_r [B, H_kv, S_r, D] (from ``seed`` and ``rank``), all ~ N(0, 1) in ``dtype``.

    Raises:
        ValueError: H not a multiple of H_kv, D not a power of two >= 16, or S < world size.
    """
    _check_problem(problem)
    B, H, H_kv, D = problem["B"], problem["H"], problem["H_kv"], problem["D"]
    _, S_r = shard(problem["S"], world_size, rank)
    torch_dtype = getattr(torch, dtype)
    shared = torch.Generator(device=device).manual_seed(seed)
    own = torch.Generator(device=device).manual_seed(seed * 1009 + rank + 1)
    q = torch.randn(B, H, D, generator=shared, device=device).to(torch_dtype)
    k = torch.randn(B, H_kv, S_r, D, generator=own, device=device).to(torch_dtype)
    v = torch.randn(B, H_kv, S_r, D, generator=own, device=device).to(torch_dtype)
    return {"q": q, "k": k, "v": v}


def heap_bytes(problem: dict, world_size: int, dtype: str) -> int:
    """The gather buffers (fp32 o and lse of every rank), the flags and the control block."""
    rows = problem["B"] * problem["H"]
    gather = world_size * rows * (problem["D"] + 1) * 4
    flags = world_size * problem["B"] * problem["H_kv"] * 4
    return gather + flags + (1 << 20)


def setup(heap, inputs: dict, problem: dict, meta: dict) -> dict:
    """The gather buffers and ready flags in the heap (peers write or read them); the split
    scratch, the split counters and the output [B, H, D] outside it (local only)."""
    q = inputs["q"]
    B, H, D = q.shape
    H_kv = inputs["k"].shape[1]
    W, splits = heap.world_size, meta["SPLITS"]
    gather_o = heap.zeros(W, B * H, D, dtype=torch.float32, name="gather_o")
    gather_lse = heap.zeros(W, B * H, dtype=torch.float32, name="gather_lse")
    flags, kind = heap.flags(W * B * H_kv, "partial_ready")
    return {**inputs, "gather_o": gather_o, "gather_lse": gather_lse, "flags": flags,
            "flag_kind": kind, "splits": splits,
            "part_o": torch.empty(B * H, splits, D, dtype=torch.float32, device=q.device),
            "part_lse": torch.empty(B * H, splits, dtype=torch.float32, device=q.device),
            "done": torch.zeros(B * H_kv, dtype=torch.int32, device=q.device),
            "out": torch.empty_like(q)}


def steps(heap, state: dict, pattern: str, epoch: int, meta: dict) -> list:
    """One launch of ``pattern`` (see the module docstring) for this rank.

    Raises:
        ValueError: an unknown pattern, or ``meta["SPLITS"]`` other than the state's.
    """
    if pattern not in PATTERNS:
        raise ValueError(f"pattern must be one of {PATTERNS}, got {pattern!r}")
    if meta["SPLITS"] != state["splits"]:
        raise ValueError(f"SPLITS must be {state['splits']} (the state's scratch), "
                         f"got {meta['SPLITS']}: call setup with this meta")
    q, k, v, out = state["q"], state["k"], state["v"], state["out"]
    B, H, D = q.shape
    H_kv, S_r = k.shape[1], k.shape[2]
    group = H // H_kv
    num_bh = B * H_kv
    block_h = max(16, triton.next_power_of_2(group))
    push = pattern != "bulk_sync"

    def partial() -> None:
        flash_decode_partial[(num_bh * meta["SPLITS"],)](
            q, k, v, state["part_o"], state["part_lse"], state["done"], state["gather_o"],
            state["gather_lse"], state["flags"], heap.heap_bases, heap.rank, epoch, num_bh,
            H_kv, S_r, _LOG2E / math.sqrt(D),
            q.stride(0), q.stride(1), k.stride(0), k.stride(1), k.stride(2),
            v.stride(0), v.stride(1), v.stride(2),
            GROUP=group, D=D, BLOCK_H=block_h, BLOCK_N=meta["BLOCK_N"], SPLITS=meta["SPLITS"],
            WORLD_SIZE=heap.world_size, PUSH=push, DOT_IN_FP32=dot_in_fp32(q.dtype),
            num_warps=meta["num_warps"], num_stages=meta["num_stages"])

    def combine() -> None:
        flash_decode_combine[(num_bh,)](
            state["gather_o"], state["gather_lse"], state["flags"], heap.errors,
            state["flag_kind"], out, heap.heap_bases, heap.rank, epoch, heap.max_spins, num_bh,
            GROUP=group, D=D, BLOCK_H=block_h, WORLD_SIZE=heap.world_size, WAIT=push,
            num_warps=4, num_stages=1)

    if pattern == "bulk_sync":
        return [Step(partial, name="partial"), BARRIER, Step(combine, name="combine pull"),
                BARRIER]
    return [Step(partial, name="partial + push"), Step(combine, name="combine wait"), BARRIER]


def output(state: dict) -> torch.Tensor:
    """This rank's out [B, H, D]."""
    return state["out"]


def reference(all_inputs: list, rank: int) -> torch.Tensor:
    """fp32 attention of q over the concatenated K, V of every rank, [B, H, D] (the same on every
    rank); one sequence at a time, so the fp32 copy of the cache is one sequence's."""
    q = all_inputs[rank]["q"].float()
    B, H, D = q.shape
    H_kv = all_inputs[0]["k"].shape[1]
    out = torch.empty(B, H, D, dtype=torch.float32, device=q.device)
    for b in range(B):
        k = torch.cat([x["k"][b] for x in all_inputs], dim=1).float()     # [H_kv, S, D]
        v = torch.cat([x["v"][b] for x in all_inputs], dim=1).float()
        scores = q[b].view(H_kv, H // H_kv, D) @ k.transpose(1, 2) / math.sqrt(D)  # [H_kv, G, S]
        out[b] = (torch.softmax(scores, dim=-1) @ v).reshape(H, D)
    return out


def torch_partial(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple:
    """One rank's partial with torch: (o [B, H, D] fp32, lse [B, H] fp32, natural log).

    The matmuls run in the input dtype (fp32 accumulation inside cuBLAS, the scores rounded to
    it once), the softmax and log-sum-exp in fp32: what an eager decode layer does.
    """
    B, H, D = q.shape
    H_kv = k.shape[1]
    qg = q.view(B, H_kv, H // H_kv, D)
    scores = torch.matmul(qg, k.transpose(-1, -2)).float() / math.sqrt(D)  # [B, H_kv, G, S_r]
    lse = torch.logsumexp(scores, dim=-1)                                    # [B, H_kv, G]
    p = torch.exp(scores - lse[..., None]).to(q.dtype)
    o = torch.matmul(p, v).float()                                          # [B, H_kv, G, D]
    return o.reshape(B, H, D), lse.reshape(B, H)


def torch_combine(o: torch.Tensor, lse: torch.Tensor) -> torch.Tensor:
    """Merge per-rank partials o [W, B, H, D], lse [W, B, H] (natural log) into [B, H, D] fp32."""
    weight = torch.exp(lse - lse.max(dim=0).values)                         # [W, B, H]
    return (weight[..., None] * o).sum(dim=0) / weight.sum(dim=0)[..., None]


def baseline(inputs: dict, problem: dict, group=None) -> Baseline:
    """torch + NCCL: ``torch_partial``, (o, lse) packed into one preallocated fp32 buffer
    [B, H, D + 1], ``all_gather_into_tensor`` (into [W * B, H, D + 1], the layout every backend
    takes, gloo included), ``torch_combine`` into the output."""
    import torch.distributed as dist
    q, k, v = inputs["q"], inputs["k"], inputs["v"]
    B, H, D = q.shape
    world = dist.get_world_size(group)
    send = torch.empty(B, H, D + 1, dtype=torch.float32, device=q.device)
    gathered = torch.empty(world * B, H, D + 1, dtype=torch.float32, device=q.device)
    parts = gathered.view(world, B, H, D + 1)
    out = torch.empty_like(q)

    def run() -> None:
        o, lse = torch_partial(q, k, v)
        send[..., :D] = o
        send[..., D] = lse
        dist.all_gather_into_tensor(gathered, send, group=group)
        out.copy_(torch_combine(parts[..., :D], parts[..., D]))

    return Baseline(run, lambda: out, compute=lambda: torch_partial(q, k, v))


def _flops(problem: dict, world_size: int) -> float:
    """q K^T and p V over the largest shard: 2 * 2 * B * H * S_r * D."""
    _, S_r = shard(problem["S"], world_size, 0)
    return 4.0 * problem["B"] * problem["H"] * S_r * problem["D"]


def _comm_bytes(problem: dict, world_size: int, dtype: str) -> float:
    """The rank's partial (fp32 o and lse, B x H x (D + 1)) to each of the W - 1 peers."""
    return (world_size - 1) * problem["B"] * problem["H"] * (problem["D"] + 1) * 4.0


def _min_bytes(problem: dict, world_size: int, dtype: str) -> float:
    """The largest shard's K_r and V_r, read once: 2 * B * H_kv * S_r * D elements."""
    _, S_r = shard(problem["S"], world_size, 0)
    itemsize = getattr(torch, dtype).itemsize
    return 2.0 * problem["B"] * problem["H_kv"] * S_r * problem["D"] * itemsize


def tile_orders(problem: dict, world_size: int, meta: dict) -> list:
    """The partial kernel's grid [B * H_kv, SPLITS]: one program per (batch, kv head, split)."""
    grid = (problem["B"] * problem["H_kv"], meta["SPLITS"])
    return [(grid, grid)]


def constraints(problem: dict, world_size: int, pattern: str, meta: dict) -> str | None:
    """Every rank must hold keys: S >= W (``shard``). Splits of fewer than BLOCK_N keys, or of
    none where SPLITS x BLOCK_N exceeds a rank's keys, run (the kernel's short- and empty-split
    paths, which the check problem takes at W >= 3): wasteful, not wrong; a measured search
    times them like any other configuration."""
    if problem["S"] < world_size:
        return f"S must be at least the world size {world_size}, got {problem['S']}"
    return None


SPEC = DistKernelSpec(
    name="flash_decode",
    kernel_names=("flash_decode_partial", "flash_decode_combine"),
    patterns=PATTERNS,
    problems={
        # GQA with G = 2; 96 keys: 48 per rank at W = 2 (3 full splits of 16), 32 at W = 3
        # (splits of 16, 16 and 0 keys: the empty-split path), 24 at W = 4 (16, 8, 0: a short
        # split too), 12 at W = 8 (12, 0, 0); grid 2 x 2 x 3 = 12 programs.
        "check": {"B": 2, "H": 4, "H_kv": 2, "D": 16, "S": 96},
        # Llama-3-70B (64 query heads, 8 KV heads of 128): one long 128k-token sequence, the
        # flash-decoding case where the splits alone fill the GPU (8 x 16 = 128 programs).
        "llama3-70b-b1-128k": {"B": 1, "H": 64, "H_kv": 8, "D": 128, "S": 131072},
        # Llama-3-70B, a batch of 8 at 64k: 1024 programs, 1.07 GB of cache per rank at W = 2.
        "llama3-70b-b8-64k": {"B": 8, "H": 64, "H_kv": 8, "D": 128, "S": 65536},
        # Llama-3.1-405B (128 query heads, 8 KV heads: G = 16, no padded MMA rows), batch 32 at
        # 32k: 4096 programs, 2.1 GB of cache per rank at W = 2; the largest exchange
        # (B x H x 129 x 4 B = 2.1 MB per rank and peer).
        "llama3-405b-b32-32k": {"B": 32, "H": 128, "H_kv": 8, "D": 128, "S": 32768},
    },
    bench_problems=("llama3-70b-b1-128k", "llama3-70b-b8-64k", "llama3-405b-b32-32k"),
    # K / V tiles of 64 x 128 bf16 (16 KB each), two stages (cp.async; 38 KB of shared memory
    # in the sm_90 build); 16 splits give 128 programs at B = 1, about one per SM of an H200.
    meta={"BLOCK_N": 64, "SPLITS": 16, "num_warps": 4, "num_stages": 2},
    check_meta={"BLOCK_N": 16, "SPLITS": 3, "num_warps": 4, "num_stages": 1},
    knobs={"pattern": PATTERNS, "SPLITS": (4, 8, 16, 32),
           "swizzle": ("row-major", "column-major", "grouped-m:4", "grouped-m:16")},
    tile_orders=tile_orders,
    constraints=constraints,
    pattern_knobs={"bulk_sync": ("SPLITS",), "fused_push": ("SPLITS",)},
    make_inputs=make_inputs,
    linear_input="v",
    heap_bytes=heap_bytes,
    setup=setup,
    steps=steps,
    output=output,
    reference=reference,
    baseline=baseline,
    # ||out - ref|| / ||ref||. Scores, softmax and merges are fp32; two roundings to the input
    # dtype remain, the softmax weights p before the p @ V MMA and the output, each with a unit
    # roundoff of 2^-8 for bf16 (2^-11 for fp16): about 3e-3 (4e-4) expected. Measured on CPU:
    # bf16 4.2e-3 (check) and 5.5e-3 (S = 4096, D = 128; the interpreter truncates fp32 -> bf16
    # where a GPU rounds to nearest, which adds a bias), fp16 2.2e-4 / 2.8e-4; the torch
    # baseline, which also rounds the scores, 4.7e-3 / 5.9e-4. A lost or stale partial gives
    # errors of 0.1 to 1.
    tolerance={"bfloat16": 1e-2, "float16": 2e-3},
    flops=_flops,
    comm_bytes=_comm_bytes,
    min_bytes=_min_bytes,
    dtypes=("bfloat16", "float16"),
    notes="KV cache split along the sequence; memory-bound: the ceiling is the rank's K_r + V_r "
          "bytes at HBM bandwidth, plus one exchange of B x H x (D + 1) fp32 per peer.",
)
