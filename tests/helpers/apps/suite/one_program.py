"""The sum of 64 numbers in one program: a grid of one, no order to change."""
import torch
import triton
import triton.language as tl


@triton.jit
def sum_kernel(x_ptr, out_ptr, N, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < N, other=0.0)
    tl.store(out_ptr, tl.sum(x, axis=0))


x = torch.randn(64)
out = torch.empty(1)
sum_kernel[(1,)](x, out, 64, BLOCK=64)
torch.testing.assert_close(out[0], x.sum(), rtol=1e-5, atol=1e-5)
