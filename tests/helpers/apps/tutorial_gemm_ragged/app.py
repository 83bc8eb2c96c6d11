"""The tutorial GEMM of examples/user_kernels/tutorial_gemm at 200 x 200 x 80: ragged in M, N and K for
every config of its autotuner (32 x 32 tiles: a 7 x 7 grid of 49 programs whose last row and column
of tiles wrap around with `% M` / `% N`; K = 80 is no multiple of 16, 32 or 64)."""
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[4] / "examples" / "user_kernels" / "tutorial_gemm"))

import torch  # noqa: E402

from kernel import matmul  # noqa: E402

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1" else "cpu"
a, b = torch.randn(200, 80, device=device), torch.randn(80, 200, device=device)
c = matmul(a, b)
assert torch.allclose(c, a @ b, atol=1e-3, rtol=1e-3), "wrong product"
print("tutorial_gemm_ragged OK")
