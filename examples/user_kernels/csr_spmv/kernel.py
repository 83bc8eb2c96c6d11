"""Sparse matrix-vector product y = A @ x with A in CSR form (indptr, indices, data), one program
per row.

A row's nonzeros are data[indptr[i]:indptr[i+1]]: the program loads its row's bounds and walks
them BLOCK_NNZ at a time, gathering x at the column indices. The loop's bounds come from memory,
so rows of different lengths take different trip counts.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def csr_spmv_kernel(
    indptr_ptr, indices_ptr, data_ptr, x_ptr, y_ptr,
    BLOCK_NNZ: tl.constexpr,
):
    row = tl.program_id(0)
    row_start = tl.load(indptr_ptr + row)
    row_end = tl.load(indptr_ptr + row + 1)

    acc = tl.zeros((BLOCK_NNZ,), dtype=tl.float32)
    for i in range(row_start, row_end, BLOCK_NNZ):
        offs = i + tl.arange(0, BLOCK_NNZ)
        mask = offs < row_end
        cols = tl.load(indices_ptr + offs, mask=mask, other=0)
        vals = tl.load(data_ptr + offs, mask=mask, other=0.0)
        acc += vals.to(tl.float32) * tl.load(x_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row, tl.sum(acc, axis=0).to(y_ptr.dtype.element_ty))


def csr_spmv(indptr, indices, data, x, BLOCK_NNZ=16):
    """y = A @ x for the CSR matrix (indptr [rows + 1], indices [nnz], data [nnz]) and x [cols]."""
    n_rows = indptr.numel() - 1
    y = torch.empty(n_rows, device=x.device, dtype=x.dtype)
    csr_spmv_kernel[(n_rows,)](indptr, indices, data, x, y, BLOCK_NNZ=BLOCK_NNZ)
    return y
