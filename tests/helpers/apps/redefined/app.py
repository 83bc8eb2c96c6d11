"""Launches the last `scale_kernel` (x * 3), or with `first` the earlier one the name no longer
holds (`scale_by_2`, x * 2)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

import kernel  # noqa: E402

first = sys.argv[1:] == ["first"]
fn, factor = (kernel.scale_by_2, 2.0) if first else (kernel.scale_kernel, 3.0)
x = torch.randn(50, 70)
out = torch.empty_like(x)
fn[(4, 3)](x, out, 50, 70, x.stride(0), BLOCK_M=16, BLOCK_N=32)
assert torch.equal(out, x * factor)
print("ok")
