"""Row sums of a 24 x 100 matrix through the package's op."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

from rowlib.sub.ops import row_sum  # noqa: E402

if __name__ == "__main__":
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)
    x = torch.randn(24, 100, device=device)
    assert torch.allclose(row_sum(x), x.sum(dim=1), atol=1e-4)
    print("ok")
