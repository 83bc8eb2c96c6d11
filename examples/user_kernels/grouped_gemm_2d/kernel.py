"""Fused linear layer  y = act(x @ w.T + bias)  as a GEMM on a 2-D launch grid.

The classic "one program per output tile" decomposition with the tile taken
straight from the two program-id axes: program (pid_m, pid_n) of the grid
(cdiv(M, BLOCK_M), cdiv(N, BLOCK_N)) computes rows pid_m*BLOCK_M.. and columns
pid_n*BLOCK_N.. of y.  No re-ordering of the programs is done -- the order in which
tiles run is whatever order the hardware walks the 2-D grid in.  The weight is
stored (N, K) as in torch.nn.Linear, so it is read through its strides as a
K x N operand.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def linear_kernel(
    x_ptr, w_ptr, bias_ptr, y_ptr,
    M, N, K,
    stride_xm, stride_xk,
    stride_wn, stride_wk,
    stride_ym, stride_yn,
    HAS_BIAS: tl.constexpr, ACTIVATION: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)

    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    x_ptrs = x_ptr + rm[:, None] * stride_xm + rk[None, :] * stride_xk
    w_ptrs = w_ptr + rk[:, None] * stride_wk + rn[None, :] * stride_wn

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        x = tl.load(x_ptrs, mask=(rm[:, None] < M) & (rk[None, :] + k < K), other=0.0)
        w = tl.load(w_ptrs, mask=(rk[:, None] + k < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(x, w)
        x_ptrs += BLOCK_K * stride_xk
        w_ptrs += BLOCK_K * stride_wk

    if HAS_BIAS:
        bias = tl.load(bias_ptr + rn, mask=rn < N, other=0.0)
        acc += bias[None, :].to(tl.float32)
    if ACTIVATION == "relu":
        acc = tl.maximum(acc, 0.0)
    elif ACTIVATION == "gelu":
        # tanh approximation of GELU, written with exp to stay in tl core ops
        inner = 0.7978845608028654 * (acc + 0.044715 * acc * acc * acc)
        acc = 0.5 * acc * (1.0 + (2.0 / (1.0 + tl.exp(-2.0 * inner)) - 1.0))

    y_ptrs = y_ptr + rm[:, None] * stride_ym + rn[None, :] * stride_yn
    tl.store(y_ptrs, acc.to(y_ptr.dtype.element_ty), mask=(rm[:, None] < M) & (rn[None, :] < N))


def linear(x, weight, bias=None, activation="", BLOCK_M=32, BLOCK_N=16, BLOCK_K=32):
    """y = activation(x @ weight.T + bias) for a 2-D x of shape (M, K) and weight (N, K)."""
    assert x.dim() == 2 and weight.dim() == 2 and x.shape[1] == weight.shape[1]
    M, K = x.shape
    N = weight.shape[0]
    y = torch.empty((M, N), device=x.device, dtype=x.dtype)
    grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))
    linear_kernel[grid](
        x, weight, bias if bias is not None else x, y,
        M, N, K,
        x.stride(0), x.stride(1),
        weight.stride(0), weight.stride(1),
        y.stride(0), y.stride(1),
        HAS_BIAS=bias is not None, ACTIVATION=activation,
        BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K,
    )
    return y
