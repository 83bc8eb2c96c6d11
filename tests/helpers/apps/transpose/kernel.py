"""out = x.T, one program per BLOCK_M x BLOCK_N tile of x on a 2-D grid."""
import torch
import triton
import triton.language as tl


@triton.jit
def transpose_kernel(x_ptr, out_ptr, M, N, stride_xm, stride_xn, stride_om, stride_on,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    tile = tl.load(x_ptr + rm[:, None] * stride_xm + rn[None, :] * stride_xn, mask=mask)
    tl.store(out_ptr + rn[:, None] * stride_om + rm[None, :] * stride_on, tl.trans(tile), mask=tl.trans(mask))


def transpose(x, BLOCK_M=16, BLOCK_N=16):
    M, N = x.shape
    out = torch.empty((N, M), dtype=x.dtype)
    grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))
    transpose_kernel[grid](x, out, M, N, x.stride(0), x.stride(1), out.stride(0), out.stride(1),
                           BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N)
    return out
