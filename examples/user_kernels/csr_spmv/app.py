"""Tiny app: y = A @ x for a random sparse matrix in CSR form, checked against torch.

Run:  TRITON_INTERPRET=1 python app.py     (CPU, interpreter; float32)
      python app.py                        (CUDA GPU; float32)
      python app.py --large                (CUDA GPU: a problem several times the L2)
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

from kernel import csr_spmv  # noqa: E402


def _large() -> bool:
    """``--large``: the GPU-sized problem (data several times an H100's 50 MB L2)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--large", action="store_true", help="a GPU-sized problem instead of the tiny one")
    return parser.parse_args().large


def random_csr(n_rows: int, n_cols: int, max_row_nnz: int, device: str) -> tuple:
    """A random CSR matrix: row lengths uniform in [0, max_row_nnz], columns uniform (a graph's
    adjacency, say): (indptr [n_rows + 1] int64, indices [nnz] int64, data [nnz] float32)."""
    lengths = torch.randint(0, max_row_nnz + 1, (n_rows,), device=device)
    indptr = torch.zeros(n_rows + 1, dtype=torch.int64, device=device)
    indptr[1:] = lengths.cumsum(0)
    nnz = int(indptr[-1])
    return indptr, torch.randint(0, n_cols, (nnz,), device=device), torch.randn(nnz, device=device)


def main() -> int:
    large = _large()
    torch.manual_seed(0)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    if large:   # 1 M rows of up to 32 nonzeros over 1 M columns: x is 4 MB, gathered at random
        n_rows = n_cols = 1 << 20
        indptr, indices, data = random_csr(n_rows, n_cols, 32, device)
    else:
        # 13 rows (not a multiple of 8) x 40 columns, about 30 % dense: rows of 0 to ~20 nonzeros,
        # some longer than one 16-wide block
        n_rows, n_cols = 13, 40
        dense = torch.randn(13, 40) * (torch.rand(13, 40) < 0.3)
        dense[4] = 0.0                                  # an empty row
        rows, cols = dense.nonzero(as_tuple=True)               # row-major: CSR order
        indptr = torch.zeros(14, dtype=torch.int64)
        indptr[1:] = torch.bincount(rows, minlength=13).cumsum(0)
        indptr, indices, data = indptr.to(device), cols.to(device), dense[rows, cols].to(device)
    x = torch.randn(n_cols, device=device)
    y = csr_spmv(indptr, indices, data, x)
    row_of = torch.repeat_interleave(torch.arange(n_rows, device=device), indptr.diff())
    ref = torch.zeros(n_rows, device=device).index_add_(0, row_of, data * x[indices])
    ok = torch.allclose(y, ref, atol=1e-4, rtol=1e-4)
    err = (y - ref).abs().max().item()
    print(f"csr_spmv {n_rows}x{n_cols} nnz={data.numel()} on {device}: max abs err {err:.2e} -> {'OK' if ok else 'MISMATCH'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
