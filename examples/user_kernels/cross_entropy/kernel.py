"""Cross-entropy loss of a batch of logits rows, one program per row, in the style of the fused
loss kernels of LLM training libraries:

    loss[i] = logsumexp(logits[i, :]) - logits[i, label[i]]

The vocabulary is walked in BLOCK_V-wide chunks with an online max / sum (the row never has to fit
in registers). Each program moves its pointers to its row first, with the row's offset computed
from the program id and the row stride (int64: a 128k vocabulary times a few thousand rows
overflows int32).
"""
import torch
import triton
import triton.language as tl


@triton.jit
def cross_entropy_fwd_kernel(
    logits_ptr, labels_ptr, loss_ptr,
    n_cols,
    stride_logits_row, stride_loss,
    BLOCK_V: tl.constexpr,
):
    pid_m = tl.program_id(0).to(tl.int64)
    offset_m = pid_m * stride_logits_row
    logits_ptr += offset_m
    label = tl.load(labels_ptr + pid_m)

    running_max = float("-inf")
    running_sum = 0.0
    for start in range(0, n_cols, BLOCK_V):
        cols = start + tl.arange(0, BLOCK_V)
        x = tl.load(logits_ptr + cols, mask=cols < n_cols, other=float("-inf")).to(tl.float32)
        block_max = tl.max(x, axis=0)
        new_max = tl.maximum(running_max, block_max)
        running_sum = running_sum * tl.exp(running_max - new_max) + tl.sum(tl.exp(x - new_max), axis=0)
        running_max = new_max

    target = tl.load(logits_ptr + label).to(tl.float32)
    loss = tl.log(running_sum) + running_max - target
    tl.store(loss_ptr + pid_m * stride_loss, loss)


def cross_entropy(logits, labels, BLOCK_V=64):
    """Per-row cross-entropy (float32) of ``logits`` [rows, vocab] against ``labels`` [rows] (int64)."""
    assert logits.dim() == 2 and logits.stride(1) == 1
    n_rows, n_cols = logits.shape
    loss = torch.empty(n_rows, device=logits.device, dtype=torch.float32)
    cross_entropy_fwd_kernel[(n_rows,)](
        logits, labels, loss, n_cols,
        logits.stride(0), loss.stride(0),
        BLOCK_V=BLOCK_V,
    )
    return loss
