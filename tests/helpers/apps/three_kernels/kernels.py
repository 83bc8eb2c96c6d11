"""Three kernels of one app, for tests/agent/capture/test_bottleneck.py: a persistent scale (a few
programs looping over every block by the program count), a one-program sum, a 2-D tiled GEMM."""
import triton
import triton.language as tl


@triton.jit
def scale_kernel(x_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    num_blocks = tl.cdiv(n_elements, BLOCK)
    for block in range(pid, num_blocks, tl.num_programs(0)):
        offs = block * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n_elements
        tl.store(out_ptr + offs, 2.0 * tl.load(x_ptr + offs, mask=mask), mask=mask)


@triton.jit
def sum_kernel(x_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    accumulator = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, n_elements, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        accumulator += tl.load(x_ptr + offs, mask=offs < n_elements, other=0.0)
    tl.store(out_ptr, tl.sum(accumulator, axis=0))


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    accumulator = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        a = tl.load(a_ptr + offs_m[:, None] * stride_am + (k + offs_k)[None, :] * stride_ak)
        b = tl.load(b_ptr + (k + offs_k)[:, None] * stride_bk + offs_n[None, :] * stride_bn)
        accumulator += tl.dot(a, b)
    tl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn, accumulator)
