"""A Llama-style transformer block, tensor-parallel with sequence parallelism, over the overlap ops
(issue #46): what a model calls, not a bench.

Rank ``r`` of ``W`` holds ``T / W`` of the ``T = batch x seq`` tokens (rows of the flattened
``[batch, seq]`` in order, ``x_shard [T/W, hidden]``) and its shard of every weight
(:func:`shard`). One forward:

- attention: RMSNorm; ``all_gather_matmul`` of the tokens with the rank's q, k and v columns (its
  ``heads / W`` query heads and ``kv_heads / W`` key-value heads, ``[T, (hq + 2 hkv) x head_dim]``);
  rotary embedding; causal grouped-query attention of each sequence over the rank's heads;
  ``matmul_reduce_scatter`` with the rank's rows of the output projection (``[T/W, hidden]``);
  the residual;
- MLP: RMSNorm; ``all_gather_matmul`` with the rank's gate and up columns (``[T, 2 I/W]``);
  ``silu(gate) * up``; ``matmul_reduce_scatter`` with the rank's rows of the down projection; the
  residual.

The ops run the package's kernels on CUDA tensors at ``W > 1`` (kernels/distributed/ops.py), torch
and the group's collectives otherwise (gloo on CPU tensors too). :func:`reference_forward` is the
same block unsharded, for numerics against every rank's rows. Dimensions: Llama 3's
(:data:`LLAMA3_8B`, :data:`LLAMA3_70B`: hidden, intermediate, 32 / 64 query heads, 8 key-value
heads, head_dim 128, RoPE theta 500 000, RMSNorm eps 1e-5; the published model configurations).
Forward only.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from swizzleperf.kernels.distributed import ops

#: The four projections, each through one op (the configuration keys of :func:`block_forward`).
PROJECTIONS = ("qkv", "o", "gate_up", "down")


@dataclass(frozen=True)
class LlamaDims:
    """One block's sizes: ``hidden`` (model width), ``intermediate`` (MLP width), query ``heads``,
    ``kv_heads`` (grouped-query attention), ``head_dim``; RoPE's ``rope_theta``; RMSNorm's ``eps``."""

    hidden: int
    intermediate: int
    heads: int
    kv_heads: int
    head_dim: int
    rope_theta: float = 500000.0
    eps: float = 1e-5

    def check(self, world_size: int, tokens: int | None = None) -> None:
        """Raises ValueError in one line where the block cannot be split over ``world_size`` ranks
        (``tokens``: batch x seq, split by rows)."""
        for what, value in (("heads", self.heads), ("kv_heads", self.kv_heads), ("intermediate", self.intermediate)):
            if value % world_size:
                raise ValueError(f"{what} must split over {world_size} ranks, got {value}")
        if self.heads % self.kv_heads:
            raise ValueError(f"heads must be a multiple of kv_heads {self.kv_heads}, got {self.heads}")
        if tokens is not None and tokens % world_size:
            raise ValueError(f"batch x seq must split over {world_size} ranks, got {tokens} tokens")


LLAMA3_8B = LlamaDims(hidden=4096, intermediate=14336, heads=32, kv_heads=8, head_dim=128)
LLAMA3_70B = LlamaDims(hidden=8192, intermediate=28672, heads=64, kv_heads=8, head_dim=128)


def full_weights(dims: LlamaDims, dtype: torch.dtype = torch.float32, device: str = "cpu",
                 seed: int = 0) -> dict:
    """Random weights of one block (``x @ w`` layout: ``[in, out]``), each scaled by
    ``1 / sqrt(in)``; the RMSNorm gains near 1."""
    g = torch.Generator(device="cpu").manual_seed(seed)

    def w(rows: int, cols: int) -> torch.Tensor:
        return (torch.randn(rows, cols, generator=g) / math.sqrt(rows)).to(device=device, dtype=dtype)
    q, kv = dims.heads * dims.head_dim, dims.kv_heads * dims.head_dim
    return {"wq": w(dims.hidden, q), "wk": w(dims.hidden, kv), "wv": w(dims.hidden, kv), "wo": w(q, dims.hidden),
            "w_gate": w(dims.hidden, dims.intermediate), "w_up": w(dims.hidden, dims.intermediate),
            "w_down": w(dims.intermediate, dims.hidden),
            "attn_norm": (1 + 0.1 * torch.randn(dims.hidden, generator=g)).to(device=device, dtype=dtype),
            "mlp_norm": (1 + 0.1 * torch.randn(dims.hidden, generator=g)).to(device=device, dtype=dtype)}


def shard(weights: dict, dims: LlamaDims, rank: int, world_size: int) -> dict:
    """Rank ``rank``'s weights: the q, k, v columns of its heads side by side (``w_qkv``), its rows
    of ``wo``, its gate and up columns side by side (``w_gate_up``), its rows of ``w_down``, the
    norms whole. Raises ValueError (:meth:`LlamaDims.check`)."""
    dims.check(world_size)
    hq, hkv, i = dims.heads // world_size, dims.kv_heads // world_size, dims.intermediate // world_size
    d = dims.head_dim

    def cols(w: torch.Tensor, width: int) -> torch.Tensor:
        return w[:, rank * width:(rank + 1) * width]
    return {"w_qkv": torch.cat([cols(weights["wq"], hq * d), cols(weights["wk"], hkv * d),
                                cols(weights["wv"], hkv * d)], dim=1).contiguous(),
            "wo": weights["wo"][rank * hq * d:(rank + 1) * hq * d].contiguous(),
            "w_gate_up": torch.cat([cols(weights["w_gate"], i), cols(weights["w_up"], i)], dim=1).contiguous(),
            "w_down": weights["w_down"][rank * i:(rank + 1) * i].contiguous(),
            "attn_norm": weights["attn_norm"], "mlp_norm": weights["mlp_norm"]}


def block_forward(x_shard: torch.Tensor, w: dict, dims: LlamaDims, batch: int, group_name: str,
                  world_size: int, configs: dict | None = None) -> torch.Tensor:
    """One block on this rank: ``x_shard [T/W, hidden]`` (its rows of the ``batch x seq`` tokens)
    and its weights (:func:`shard`) -> ``[T/W, hidden]``. ``configs``: an op configuration per
    projection (``PROJECTIONS``; kernels/distributed/ops.py: ``""`` the default, a tuned or answer
    configuration, ``{"pattern": "torch_nccl"}``). Raises ValueError in one line for sizes that do
    not split (and as the ops do)."""
    configs = configs or {}
    unknown = set(configs) - set(PROJECTIONS)
    if unknown:
        raise ValueError(f"configs must name projections of {PROJECTIONS}, got {sorted(unknown)}")
    tokens = x_shard.shape[0] * world_size
    dims.check(world_size, tokens)
    if tokens % batch:
        raise ValueError(f"batch must divide the {tokens} tokens, got {batch}")
    return forward_with(
        x_shard, w, dims, batch, world_size,
        lambda a, b, name: ops.all_gather_matmul(a, b, group_name, world_size, configs.get(name, "")),
        lambda a, b, name: ops.matmul_reduce_scatter(a, b, group_name, world_size, configs.get(name, "")))


def forward_with(x_shard: torch.Tensor, w: dict, dims: LlamaDims, batch: int, world_size: int,
                 gather_matmul, matmul_scatter) -> torch.Tensor:
    """The block (module docstring) with its two kinds of projection given:
    ``gather_matmul(a_shard, b, projection)`` (all-gather of the rows, then ``@ b``) and
    ``matmul_scatter(a, b, projection)`` (``a @ b`` summed over the ranks, this rank's rows), each
    called with the projection's name (``PROJECTIONS``): :func:`block_forward` gives the ops;
    bench/tp_block_bench.py torch's functional collectives (the form async-TP rewrites)."""
    hq, hkv = dims.heads // world_size, dims.kv_heads // world_size
    h = _rms_norm(x_shard, w["attn_norm"], dims.eps)
    attn = _attention(gather_matmul(h, w["w_qkv"], "qkv"), dims, batch, hq, hkv)
    x = x_shard + matmul_scatter(attn, w["wo"], "o")
    gate, up = gather_matmul(_rms_norm(x, w["mlp_norm"], dims.eps), w["w_gate_up"], "gate_up").chunk(2, dim=1)
    act = (torch.nn.functional.silu(gate) * up).contiguous()
    return x + matmul_scatter(act, w["w_down"], "down")


def reference_forward(x: torch.Tensor, weights: dict, dims: LlamaDims, batch: int) -> torch.Tensor:
    """The same block on one device, unsharded: ``x [T, hidden]`` -> ``[T, hidden]``."""
    return block_forward(x, shard(weights, dims, 0, 1), dims, batch, "", 1)


def _rms_norm(x: torch.Tensor, gain: torch.Tensor, eps: float) -> torch.Tensor:
    variance = x.float().pow(2).mean(dim=-1, keepdim=True)
    return (x.float() * torch.rsqrt(variance + eps)).to(x.dtype) * gain


def _attention(qkv: torch.Tensor, dims: LlamaDims, batch: int, hq: int, hkv: int) -> torch.Tensor:
    """Causal grouped-query attention of each sequence over the rank's heads, rotary embedding
    first: ``qkv [T, (hq + 2 hkv) x head_dim]`` -> ``[T, hq x head_dim]``."""
    d, tokens = dims.head_dim, qkv.shape[0]
    seq = tokens // batch
    q, k, v = qkv.split([hq * d, hkv * d, hkv * d], dim=1)
    q, k, v = (t.reshape(batch, seq, -1, d).transpose(1, 2) for t in (q, k, v))   # [B, heads, S, d]
    cos, sin = _rope(seq, d, dims.rope_theta, qkv.device, qkv.dtype)
    q, k = q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin
    group = hq // hkv
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    return out.transpose(1, 2).reshape(tokens, hq * d).contiguous()


def _rope(seq: int, d: int, theta: float, device, dtype) -> tuple:
    inv = 1.0 / (theta ** (torch.arange(0, d, 2, device=device, dtype=torch.float32) / d))
    angles = torch.outer(torch.arange(seq, device=device, dtype=torch.float32), inv)
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos().to(dtype), angles.sin().to(dtype)


def _rotate_half(t: torch.Tensor) -> torch.Tensor:
    first, second = t.chunk(2, dim=-1)
    return torch.cat([-second, first], dim=-1)
