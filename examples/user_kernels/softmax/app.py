"""Tiny app: softmax over the rows of a random attention-score matrix, checked
against torch.softmax.

Run:  TRITON_INTERPRET=1 python app.py     (CPU, interpreter; float32)
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

from kernel import softmax  # noqa: E402


def main() -> int:
    torch.manual_seed(0)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = torch.float16 if device == "cuda" else torch.float32
    tol = 1e-3 if dtype == torch.float16 else 1e-6
    # 45 rows x 100 columns (128-wide blocks); 6 programs on CPU, 7 or 8 rows each.
    x = 3 * torch.randn((45, 100), device=device, dtype=dtype)
    y = softmax(x)
    ref = torch.softmax(x.float(), dim=1)
    ok = torch.allclose(y.float(), ref, atol=tol, rtol=tol)
    # a column-sliced view (row stride != number of columns), all rows in one program each
    v = x[:, 10:77]
    yv = softmax(v, num_programs=v.shape[0])
    refv = torch.softmax(v.float(), dim=1)
    ok = ok and torch.allclose(yv.float(), refv, atol=tol, rtol=tol)
    err = max((y.float() - ref).abs().max().item(), (yv.float() - refv).abs().max().item())
    print(f"softmax {tuple(x.shape)} and {tuple(v.shape)} {dtype} on {device}: max abs err {err:.2e} -> {'OK' if ok else 'MISMATCH'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
