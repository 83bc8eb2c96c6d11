"""out = x * scale on a 2-D grid whose program ids are read only through functions: the row block
through another module's `tle.program_id(0)`, the column block through a module-level helper that
reads `tl.program_id(1)` itself. 50 x 70 with 16 x 32 tiles: a 4 x 3 grid."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

import tle  # noqa: E402


@triton.jit
def _col_block():
    return tl.program_id(1)


@triton.jit
def scale_kernel(x_ptr, out_ptr, M, N, stride, scale, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid_m = tle.program_id(0)
    pid_n = _col_block()
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    x = tl.load(x_ptr + rm[:, None] * stride + rn[None, :], mask=mask, other=0.0)
    tl.store(out_ptr + rm[:, None] * stride + rn[None, :], x * scale, mask=mask)


if __name__ == "__main__":
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)
    x = torch.randn(50, 70, device=device)
    out = torch.empty_like(x)
    scale_kernel[(triton.cdiv(50, 16), triton.cdiv(70, 32))](x, out, 50, 70, x.stride(0), 1.5, BLOCK_M=16, BLOCK_N=32)
    assert torch.equal(out, x * 1.5)
    print("ok")
