"""A 40 x 24 transpose (grid 3 x 2) of a column-strided view, then a smaller one."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

from kernel import transpose  # noqa: E402

x = torch.randn(40, 48)[:, ::2]
assert torch.equal(transpose(x), x.t())
y = torch.randn(8, 8)
assert torch.equal(transpose(y), y.t())
