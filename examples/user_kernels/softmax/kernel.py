"""Fused row-wise softmax, in the style of the Triton tutorial "02 - Fused Softmax".

Each row is loaded once into a power-of-two wide block, the row max is
subtracted for numerical stability, and the normalised exponentials are
written back: one read and one write of the matrix.  The launch grid is 1-D
with a fixed number of programs (about as many as fit on the device); program
p handles rows p, p + num_programs, p + 2*num_programs, ...
"""
import torch
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(output_ptr, input_ptr, input_row_stride, output_row_stride, n_rows, n_cols,
                   BLOCK_SIZE: tl.constexpr, num_stages: tl.constexpr):
    row_start = tl.program_id(0)
    row_step = tl.num_programs(0)
    for row_idx in tl.range(row_start, n_rows, row_step, num_stages=num_stages):
        row_start_ptr = input_ptr + row_idx * input_row_stride
        col_offsets = tl.arange(0, BLOCK_SIZE)
        mask = col_offsets < n_cols
        # out-of-range columns read -inf so they do not change the max or the sum
        row = tl.load(row_start_ptr + col_offsets, mask=mask, other=-float('inf')).to(tl.float32)
        row_minus_max = row - tl.max(row, axis=0)
        numerator = tl.exp(row_minus_max)
        denominator = tl.sum(numerator, axis=0)
        softmax_output = numerator / denominator
        output_row_start_ptr = output_ptr + row_idx * output_row_stride
        tl.store(output_row_start_ptr + col_offsets, softmax_output.to(output_ptr.dtype.element_ty), mask=mask)


def softmax(x, num_programs=None):
    assert x.dim() == 2
    n_rows, n_cols = x.shape
    BLOCK_SIZE = triton.next_power_of_2(n_cols)
    num_warps = 8 if BLOCK_SIZE >= 2048 else 4
    num_stages = 2
    y = torch.empty_like(x)
    if num_programs is None:
        if x.is_cuda:
            # a few programs per SM keeps every SM busy without one program per row
            num_programs = 4 * torch.cuda.get_device_properties(x.device).multi_processor_count
        else:
            num_programs = 6
    num_programs = min(num_programs, n_rows)
    softmax_kernel[(num_programs, 1, 1)](
        y, x, x.stride(0), y.stride(0), n_rows, n_cols,
        BLOCK_SIZE=BLOCK_SIZE, num_stages=num_stages, num_warps=num_warps,
    )
    return y
