"""alpha * x + y on a 40 x 70 array (CPU without a GPU, else CUDA): with the first config, 3 x 3 = 9 programs."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

import kernel  # noqa: E402

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
x, y = torch.randn(40, 70, device=device), torch.randn(40, 70, device=device)
out = kernel.axpy(2.5, x, y)
assert torch.allclose(out, 2.5 * x + y), "wrong result"
print("axpy OK")
