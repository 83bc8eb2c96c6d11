"""RMSNorm over the last dimension:  y = x / sqrt(mean(x**2) + eps) * weight.

Each program normalises a block of BLOCK_ROWS consecutive rows (1-D launch grid,
program i takes rows [i*BLOCK_ROWS, (i+1)*BLOCK_ROWS)).  A whole row fits in one
BLOCK_N-wide block; statistics are accumulated in float32 and the result is
written back in the input's dtype.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def rms_norm_fwd_kernel(
    x_ptr, w_ptr, y_ptr,
    n_rows, n_cols,
    stride_x_row, stride_y_row,
    eps,
    BLOCK_ROWS: tl.constexpr, BLOCK_N: tl.constexpr,
):
    row_block = tl.program_id(0)
    rows = row_block * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)
    cols = tl.arange(0, BLOCK_N)
    row_mask = rows < n_rows
    col_mask = cols < n_cols
    mask = row_mask[:, None] & col_mask[None, :]

    x = tl.load(x_ptr + rows[:, None] * stride_x_row + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    mean_sq = tl.sum(x * x, axis=1) / n_cols
    rstd = 1.0 / tl.sqrt(mean_sq + eps)
    w = tl.load(w_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)
    y = x * rstd[:, None] * w[None, :]
    tl.store(y_ptr + rows[:, None] * stride_y_row + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=mask)


def rms_norm(x, weight, eps=1e-6, BLOCK_ROWS=4):
    """RMSNorm of `x` (any leading shape) over its last dimension, in x's dtype."""
    shape = x.shape
    x2 = x.reshape(-1, shape[-1])
    if x2.stride(-1) != 1:
        x2 = x2.contiguous()
    n_rows, n_cols = x2.shape
    y = torch.empty_like(x2)
    BLOCK_N = triton.next_power_of_2(n_cols)
    grid = (triton.cdiv(n_rows, BLOCK_ROWS),)
    rms_norm_fwd_kernel[grid](
        x2, weight, y, n_rows, n_cols,
        x2.stride(0), y.stride(0), eps,
        BLOCK_ROWS=BLOCK_ROWS, BLOCK_N=BLOCK_N,
    )
    return y.reshape(shape)
