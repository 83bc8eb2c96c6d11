"""Row sums, one row per program, in a subpackage: a relative import two levels up."""
import torch
import triton
import triton.language as tl

from ..sizes import block_for


@triton.jit
def row_sum_kernel(x_ptr, out_ptr, N, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for off in range(0, N, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + row * stride + cols, mask=cols < N, other=0.0)
    tl.store(out_ptr + row, tl.sum(acc, axis=0))


def row_sum(x):
    M, N = x.shape
    out = torch.empty(M, device=x.device)
    row_sum_kernel[(M,)](x, out, N, x.stride(0), BLOCK=block_for(N))
    return out
