"""The user's test: the product is right, and (for swizzleperf's test) it runs the optimized copy."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

import kernel  # noqa: E402

assert hasattr(kernel, "swizzle"), "not the optimized kernel"
assert kernel.__file__ == os.path.join(os.path.dirname(os.path.abspath(__file__)), "kernel.py")
device = "cpu" if os.environ.get("TRITON_INTERPRET") == "1" else "cuda"
a, b = torch.randn(48, 32, device=device), torch.randn(32, 80, device=device)
assert torch.allclose(kernel.matmul(a, b), a @ b, atol=1e-4 if device == "cpu" else 5e-2)  # tl.dot in TF32 on a GPU
print("check passed")
