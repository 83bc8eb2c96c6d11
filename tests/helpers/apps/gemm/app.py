"""64 x 64 x 32 fp32 GEMM (interpreted on CPU, compiled on a GPU): 16 programs. Prints the autotuner's choice as a JSON line."""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

import kernel  # noqa: E402

torch.manual_seed(0)
device = "cpu" if os.environ.get("TRITON_INTERPRET") == "1" else "cuda"
a, b = torch.randn(64, 32, device=device), torch.randn(32, 64, device=device)
c = kernel.matmul(a, b)
assert torch.allclose(c, a @ b, atol=1e-4 if device == "cpu" else 5e-2), "wrong product"  # TF32 on a GPU
best = kernel.matmul_kernel.best_config
print(json.dumps({"best_config": {**best.kwargs, "num_warps": best.num_warps, "num_stages": best.num_stages}}))
