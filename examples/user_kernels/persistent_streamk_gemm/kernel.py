"""Persistent GEMM kernels, C = A @ B.

Two flavours, both launched on a 1-D grid of (at most) NUM_SMS programs that stay
resident and loop over the work themselves instead of one program per tile:

* ``matmul_persistent_kernel`` -- data-parallel persistent GEMM in the style of
  the Triton tutorial "09 - Persistent Matmul": program ``start_pid`` handles
  tiles ``start_pid, start_pid + NUM_SMS, ...``; each tile id is mapped to a
  (pid_m, pid_n) tile with the usual grouped order (GROUP_SIZE_M rows of tiles
  per group).

* ``matmul_streamk_kernel`` -- a "hybrid stream-K" GEMM (Osama et al., "Stream-K:
  Work-centric Parallel Decomposition for Dense Matrix Multiplication on the
  GPU", 2023).  The whole waves of tiles (``num_tiles - num_tiles % NUM_SMS``
  tiles) are done data-parallel as above; the K-loop iterations of the
  remaining tiles (the ragged last wave) are split evenly across all NUM_SMS
  programs, so one tile may be computed by several programs.  Programs that
  leave a tile unfinished write a float32 partial accumulator to a scratch
  buffer and raise a per-program flag with ``tl.atomic_add``; the program that
  computes the tile's *last* K iterations spins on the flags of the programs
  before it (``tl.atomic_cas``), adds their partials and stores the tile.

  Because every waiting program only waits on programs with a *smaller*
  program id, the kernel also finishes under TRITON_INTERPRET=1, where the
  interpreter runs programs one after another in program-id order.  (The
  textbook variant -- the program that *starts* a tile waits for the later
  ones -- spins forever under the interpreter.)  On a GPU it relies, like every
  stream-K kernel, on all NUM_SMS programs being resident at once, so NUM_SMS
  must not exceed the number of programs the device can hold concurrently.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def matmul_persistent_kernel(
    a_ptr, b_ptr, c_ptr,
    M, N, K,
    stride_am, stride_ak,
    stride_bk, stride_bn,
    stride_cm, stride_cn,
    BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
    GROUP_SIZE_M: tl.constexpr, NUM_SMS: tl.constexpr,
):
    start_pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    k_tiles = tl.cdiv(K, BLOCK_SIZE_K)
    num_tiles = num_pid_m * num_pid_n
    num_pid_in_group = GROUP_SIZE_M * num_pid_n

    offs_k = tl.arange(0, BLOCK_SIZE_K)
    for tile_id in range(start_pid, num_tiles, NUM_SMS):
        # grouped ordering of the tiles
        group_id = tile_id // num_pid_in_group
        first_pid_m = group_id * GROUP_SIZE_M
        group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
        pid_m = first_pid_m + (tile_id % group_size_m)
        pid_n = (tile_id % num_pid_in_group) // group_size_m

        offs_am = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
        offs_bn = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
        offs_am = tl.where(offs_am < M, offs_am, 0)
        offs_bn = tl.where(offs_bn < N, offs_bn, 0)

        accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
        for ki in range(k_tiles):
            offs_kk = ki * BLOCK_SIZE_K + offs_k
            a = tl.load(a_ptr + offs_am[:, None] * stride_am + offs_kk[None, :] * stride_ak,
                        mask=offs_kk[None, :] < K, other=0.0)
            b = tl.load(b_ptr + offs_kk[:, None] * stride_bk + offs_bn[None, :] * stride_bn,
                        mask=offs_kk[:, None] < K, other=0.0)
            accumulator = tl.dot(a, b, accumulator)

        offs_cm = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
        offs_cn = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
        c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
        c_mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
        tl.store(c_ptrs, accumulator.to(c_ptr.dtype.element_ty), mask=c_mask)


@triton.jit
def matmul_streamk_kernel(
    a_ptr, b_ptr, c_ptr,
    partials_ptr, locks_ptr,
    M, N, K,
    stride_am, stride_ak,
    stride_bk, stride_bn,
    stride_cm, stride_cn,
    BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
    GROUP_SIZE_M: tl.constexpr, NUM_SMS: tl.constexpr,
):
    pid = tl.program_id(0)
    tl.assume(pid >= 0)
    tl.assume(stride_am > 0)
    tl.assume(stride_ak > 0)
    tl.assume(stride_bk > 0)
    tl.assume(stride_bn > 0)
    tl.assume(stride_cm > 0)
    tl.assume(stride_cn > 0)

    num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    num_tiles = num_pid_m * num_pid_n
    iters_per_tile = tl.cdiv(K, BLOCK_SIZE_K)
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    num_sk_tiles = num_tiles % NUM_SMS
    num_dp_tiles = num_tiles - num_sk_tiles

    rm = tl.arange(0, BLOCK_SIZE_M)
    rn = tl.arange(0, BLOCK_SIZE_N)
    rk = tl.arange(0, BLOCK_SIZE_K)

    # ---------------- data-parallel part: whole waves of tiles ----------------
    for tile_id in range(pid, num_dp_tiles, NUM_SMS):
        group_id = tile_id // num_pid_in_group
        first_pid_m = group_id * GROUP_SIZE_M
        group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
        pid_m = first_pid_m + (tile_id % group_size_m)
        pid_n = (tile_id % num_pid_in_group) // group_size_m
        offs_am = tl.where(pid_m * BLOCK_SIZE_M + rm < M, pid_m * BLOCK_SIZE_M + rm, 0)
        offs_bn = tl.where(pid_n * BLOCK_SIZE_N + rn < N, pid_n * BLOCK_SIZE_N + rn, 0)
        acc = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
        for ki in range(iters_per_tile):
            offs_kk = ki * BLOCK_SIZE_K + rk
            a = tl.load(a_ptr + offs_am[:, None] * stride_am + offs_kk[None, :] * stride_ak,
                        mask=offs_kk[None, :] < K, other=0.0)
            b = tl.load(b_ptr + offs_kk[:, None] * stride_bk + offs_bn[None, :] * stride_bn,
                        mask=offs_kk[:, None] < K, other=0.0)
            acc = tl.dot(a, b, acc)
        offs_cm = pid_m * BLOCK_SIZE_M + rm
        offs_cn = pid_n * BLOCK_SIZE_N + rn
        tl.store(c_ptr + offs_cm[:, None] * stride_cm + offs_cn[None, :] * stride_cn,
                 acc.to(c_ptr.dtype.element_ty),
                 mask=(offs_cm[:, None] < M) & (offs_cn[None, :] < N))

    # ---------------- stream-K part: the ragged last wave ----------------
    total_sk_iters = num_sk_tiles * iters_per_tile
    iters_per_pid = total_sk_iters // NUM_SMS
    extra_iters = total_sk_iters % NUM_SMS
    start_iter = pid * iters_per_pid + tl.minimum(pid, extra_iters)
    end_iter = start_iter + iters_per_pid + (pid < extra_iters).to(tl.int32)

    partial_offs = rm[:, None] * BLOCK_SIZE_N + rn[None, :]
    it = start_iter
    while it < end_iter:
        sk_tile = it // iters_per_tile
        tile_iter = sk_tile * iters_per_tile
        tile_iter_end = tile_iter + iters_per_tile
        seg_end = tl.minimum(end_iter, tile_iter_end)

        tile_id = num_dp_tiles + sk_tile
        group_id = tile_id // num_pid_in_group
        first_pid_m = group_id * GROUP_SIZE_M
        group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
        pid_m = first_pid_m + (tile_id % group_size_m)
        pid_n = (tile_id % num_pid_in_group) // group_size_m
        offs_am = tl.where(pid_m * BLOCK_SIZE_M + rm < M, pid_m * BLOCK_SIZE_M + rm, 0)
        offs_bn = tl.where(pid_n * BLOCK_SIZE_N + rn < N, pid_n * BLOCK_SIZE_N + rn, 0)

        acc = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
        for ki in range(it - tile_iter, seg_end - tile_iter):
            offs_kk = ki * BLOCK_SIZE_K + rk
            a = tl.load(a_ptr + offs_am[:, None] * stride_am + offs_kk[None, :] * stride_ak,
                        mask=offs_kk[None, :] < K, other=0.0)
            b = tl.load(b_ptr + offs_kk[:, None] * stride_bk + offs_bn[None, :] * stride_bn,
                        mask=offs_kk[:, None] < K, other=0.0)
            acc = tl.dot(a, b, acc)

        if seg_end != tile_iter_end:
            # We stop inside this tile (it is the last segment of our range):
            # publish the partial sum and raise our flag.
            tl.store(partials_ptr + pid * BLOCK_SIZE_M * BLOCK_SIZE_N + partial_offs, acc)
            tl.debug_barrier()
            tl.atomic_add(locks_ptr + pid, 1)
        else:
            if it != tile_iter:
                # We finish a tile that earlier programs started: collect their
                # partials, walking back until the tile's first iteration is covered.
                prev = pid - 1
                covered = it
                while covered > tile_iter:
                    while tl.atomic_cas(locks_ptr + prev, 1, 1) != 1:
                        pass
                    acc += tl.load(partials_ptr + prev * BLOCK_SIZE_M * BLOCK_SIZE_N + partial_offs,
                                   cache_modifier=".cg")
                    covered = prev * iters_per_pid + tl.minimum(prev, extra_iters)
                    prev -= 1
            offs_cm = pid_m * BLOCK_SIZE_M + rm
            offs_cn = pid_n * BLOCK_SIZE_N + rn
            tl.store(c_ptr + offs_cm[:, None] * stride_cm + offs_cn[None, :] * stride_cn,
                     acc.to(c_ptr.dtype.element_ty),
                     mask=(offs_cm[:, None] < M) & (offs_cn[None, :] < N))
        it = seg_end


def _num_sms(device):
    if torch.device(device).type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 4


def matmul_persistent(a, b, BLOCK_SIZE_M=32, BLOCK_SIZE_N=32, BLOCK_SIZE_K=32, GROUP_SIZE_M=8,
                      num_sms=None):
    assert a.shape[1] == b.shape[0] and a.dtype == b.dtype
    M, K = a.shape
    _, N = b.shape
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    NUM_SMS = num_sms or _num_sms(a.device)
    num_tiles = triton.cdiv(M, BLOCK_SIZE_M) * triton.cdiv(N, BLOCK_SIZE_N)
    grid = (min(NUM_SMS, num_tiles),)
    matmul_persistent_kernel[grid](
        a, b, c, M, N, K,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
        BLOCK_SIZE_M=BLOCK_SIZE_M, BLOCK_SIZE_N=BLOCK_SIZE_N, BLOCK_SIZE_K=BLOCK_SIZE_K,
        GROUP_SIZE_M=GROUP_SIZE_M, NUM_SMS=NUM_SMS,
    )
    return c


def matmul_streamk(a, b, BLOCK_SIZE_M=32, BLOCK_SIZE_N=32, BLOCK_SIZE_K=16, GROUP_SIZE_M=8,
                   num_sms=None):
    assert a.shape[1] == b.shape[0] and a.dtype == b.dtype
    M, K = a.shape
    _, N = b.shape
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    NUM_SMS = num_sms or _num_sms(a.device)
    # one partial tile and one flag per program; flags must start at zero
    partials = torch.empty((NUM_SMS, BLOCK_SIZE_M, BLOCK_SIZE_N), device=a.device, dtype=torch.float32)
    locks = torch.zeros((NUM_SMS,), device=a.device, dtype=torch.int32)
    matmul_streamk_kernel[(NUM_SMS,)](
        a, b, c, partials, locks, M, N, K,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
        BLOCK_SIZE_M=BLOCK_SIZE_M, BLOCK_SIZE_N=BLOCK_SIZE_N, BLOCK_SIZE_K=BLOCK_SIZE_K,
        GROUP_SIZE_M=GROUP_SIZE_M, NUM_SMS=NUM_SMS,
    )
    return c
