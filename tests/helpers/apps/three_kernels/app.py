"""Three kernels, hottest first under the interpreter: a persistent scale (4 programs over 192
blocks), a one-program sum over 6144 values, a 32 x 48 x 16 GEMM on a 2 x 3 grid of 16 x 16 tiles."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

import kernels  # noqa: E402

torch.manual_seed(0)
device = "cpu" if os.environ.get("TRITON_INTERPRET") == "1" or not torch.cuda.is_available() else "cuda"
x = torch.randn(6144, device=device)
scaled = torch.empty_like(x)
kernels.scale_kernel[(4,)](x, scaled, x.numel(), BLOCK=32)
total = torch.empty(1, device=device)
kernels.sum_kernel[(1,)](x, total, x.numel(), BLOCK=32)
a, b = torch.randn(32, 16, device=device), torch.randn(16, 48, device=device)
c = torch.empty(32, 48, device=device)
kernels.matmul_kernel[(2, 3)](a, b, c, 32, 48, 16, *a.stride(), *b.stride(), *c.stride(),
                              BLOCK_M=16, BLOCK_N=16, BLOCK_K=16)
assert torch.equal(scaled, 2 * x) and torch.allclose(total, x.sum(), atol=1e-3)
assert torch.allclose(c, a @ b, atol=1e-4 if device == "cpu" else 5e-2)   # TF32 on a GPU
print("three kernels OK")
