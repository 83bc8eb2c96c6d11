"""Fused attention forward (softmax(Q K^T * scale) V) with an online softmax, in the style of
the Triton tutorial "Fused Attention" (06): one program per block of BLOCK_M queries of one
(batch, head), launched on a 2-D grid (query blocks, batch x heads); each program streams the
head's keys and values in blocks of BLOCK_N. Programs of the same head read the same K and V,
which is what the order of the programs decides for the cache.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def attention_fwd_kernel(q_ptr, k_ptr, v_ptr, o_ptr, sm_scale,
                         stride_qh, stride_qm, stride_kh, stride_kn, stride_vh, stride_vn,
                         stride_oh, stride_om, N_CTX,
                         HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    start_m = tl.program_id(0)
    off_h = tl.program_id(1)
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    q = tl.load(q_ptr + off_h * stride_qh + offs_m[:, None] * stride_qm + offs_d[None, :],
                mask=offs_m[:, None] < N_CTX, other=0.0)
    m_i = tl.full((BLOCK_M,), float("-inf"), dtype=tl.float32)
    l_i = tl.zeros((BLOCK_M,), dtype=tl.float32)
    acc = tl.zeros((BLOCK_M, HEAD_DIM), dtype=tl.float32)
    for start_n in range(0, N_CTX, BLOCK_N):
        cols = start_n + offs_n
        k = tl.load(k_ptr + off_h * stride_kh + cols[:, None] * stride_kn + offs_d[None, :],
                    mask=cols[:, None] < N_CTX, other=0.0)
        v = tl.load(v_ptr + off_h * stride_vh + cols[:, None] * stride_vn + offs_d[None, :],
                    mask=cols[:, None] < N_CTX, other=0.0)
        s = tl.dot(q, tl.trans(k)) * sm_scale
        s = tl.where(cols[None, :] < N_CTX, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        alpha = tl.exp(m_i - m_new)
        p = tl.exp(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    out = acc / l_i[:, None]
    tl.store(o_ptr + off_h * stride_oh + offs_m[:, None] * stride_om + offs_d[None, :],
             out.to(o_ptr.dtype.element_ty), mask=offs_m[:, None] < N_CTX)


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, block_m: int = 16, block_n: int = 16):
    """q, k, v: [batch, heads, n_ctx, head_dim], contiguous; returns softmax(q k^T / sqrt(d)) v."""
    batch, heads, n_ctx, head_dim = q.shape
    q3, k3, v3 = (t.reshape(batch * heads, n_ctx, head_dim) for t in (q, k, v))
    o = torch.empty_like(q3)
    grid = (triton.cdiv(n_ctx, block_m), batch * heads)
    attention_fwd_kernel[grid](q3, k3, v3, o, head_dim ** -0.5,
                               q3.stride(0), q3.stride(1), k3.stride(0), k3.stride(1),
                               v3.stride(0), v3.stride(1), o.stride(0), o.stride(1), n_ctx,
                               HEAD_DIM=head_dim, BLOCK_M=block_m, BLOCK_N=block_n)
    return o.reshape(batch, heads, n_ctx, head_dim)
