"""Three definitions of `scale_kernel` (issue #41): a plain-Python fallback defined first where
Triton does not import, then `x * 2` (kept by the app as `scale_by_2` before the name is bound
again) and `x * 3`, the one the name ends bound to. 50 x 70 with 16 x 32 tiles: a 4 x 3 grid."""
try:
    import triton
    import triton.language as tl
    HAS_TRITON = True
except ImportError:
    HAS_TRITON = False

if not HAS_TRITON:
    def scale_kernel(x, out, M, N, stride, BLOCK_M=16, BLOCK_N=32):
        out.copy_(x * 2.0)
else:
    @triton.jit
    def scale_kernel(x_ptr, out_ptr, M, N, stride, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
        pid_m = tl.program_id(0)
        pid_n = tl.program_id(1)
        rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        mask = (rm[:, None] < M) & (rn[None, :] < N)
        x = tl.load(x_ptr + rm[:, None] * stride + rn[None, :], mask=mask, other=0.0)
        tl.store(out_ptr + rm[:, None] * stride + rn[None, :], x * 2.0, mask=mask)

scale_by_2 = scale_kernel


@triton.jit
def scale_kernel(x_ptr, out_ptr, M, N, stride, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):  # noqa: F811
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    x = tl.load(x_ptr + rm[:, None] * stride + rn[None, :], mask=mask, other=0.0)
    tl.store(out_ptr + rm[:, None] * stride + rn[None, :], x * 3.0, mask=mask)
