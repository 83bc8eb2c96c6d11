"""Tiny app: y = A @ x for a random sparse matrix in CSR form, checked against torch.

Run:  TRITON_INTERPRET=1 python app.py     (CPU, interpreter; float32)
      python app.py                        (CUDA GPU; float32)
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

from kernel import csr_spmv  # noqa: E402


def main() -> int:
    torch.manual_seed(0)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    # 13 rows (not a multiple of 8) x 40 columns, about 30 % dense: rows of 0 to ~20 nonzeros,
    # some longer than one 16-wide block
    dense = torch.randn(13, 40) * (torch.rand(13, 40) < 0.3)
    dense[4] = 0.0                                  # an empty row
    rows, cols = dense.nonzero(as_tuple=True)               # row-major: CSR order
    indptr = torch.zeros(14, dtype=torch.int64)
    indptr[1:] = torch.bincount(rows, minlength=13).cumsum(0)
    indptr, indices, data = indptr.to(device), cols.to(device), dense[rows, cols].to(device)
    x = torch.randn(40, device=device)
    y = csr_spmv(indptr, indices, data, x)
    ref = dense.to(device) @ x
    ok = torch.allclose(y, ref, atol=1e-5, rtol=1e-5)
    err = (y - ref).abs().max().item()
    print(f"csr_spmv 13x40 nnz={data.numel()} on {device}: max abs err {err:.2e} -> {'OK' if ok else 'MISMATCH'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
