"""A kernel defined by ``exec`` of a string (issue #41): it has no source file, so it cannot be
captured; the hook's own TypeError used to end the app. 50 x 70 with 16 x 32 tiles: a 4 x 3 grid."""
import torch
import triton

SOURCE = '''
import triton
import triton.language as tl


@triton.jit
def exec_kernel(x_ptr, out_ptr, M, N, stride, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    x = tl.load(x_ptr + rm[:, None] * stride + rn[None, :], mask=mask, other=0.0)
    tl.store(out_ptr + rm[:, None] * stride + rn[None, :], x * 3.0, mask=mask)
'''
namespace: dict = {}
exec(compile(SOURCE, "<generated>", "exec"), namespace)
x = torch.randn(50, 70)
out = torch.empty_like(x)
namespace["exec_kernel"][(triton.cdiv(50, 16), triton.cdiv(70, 32))](x, out, 50, 70, x.stride(0), BLOCK_M=16, BLOCK_N=32)
assert torch.equal(out, x * 3.0)
print("ok")
