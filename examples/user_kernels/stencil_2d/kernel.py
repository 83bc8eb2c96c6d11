"""One Jacobi sweep of the 5-point Laplace stencil on a 2-D grid:

    out[i, j] = 0.25 * (u[i-1, j] + u[i+1, j] + u[i, j-1] + u[i, j+1])   (interior)
    out[i, j] = u[i, j]                                                  (boundary, Dirichlet)

The domain is cut into BLOCK_Y x BLOCK_X tiles, one program per tile on a 2-D
launch grid (axis 0 = tile column along x, axis 1 = tile row along y).  The
four neighbours are fetched with shifted loads whose masks keep them inside
the domain.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def jacobi_step_kernel(
    u_ptr, out_ptr,
    H, W,
    stride_y, stride_x,
    BLOCK_Y: tl.constexpr, BLOCK_X: tl.constexpr,
):
    pid_x = tl.program_id(0)
    pid_y = tl.program_id(1)

    ys = pid_y * BLOCK_Y + tl.arange(0, BLOCK_Y)[:, None]
    xs = pid_x * BLOCK_X + tl.arange(0, BLOCK_X)[None, :]
    in_domain = (ys < H) & (xs < W)
    interior = (ys > 0) & (ys < H - 1) & (xs > 0) & (xs < W - 1)

    centre_ptrs = u_ptr + ys * stride_y + xs * stride_x
    centre = tl.load(centre_ptrs, mask=in_domain, other=0.0)
    # Shifted neighbour loads; each mask stops the read from leaving the domain.
    north = tl.load(centre_ptrs - stride_y, mask=in_domain & (ys > 0), other=0.0)
    south = tl.load(centre_ptrs + stride_y, mask=in_domain & (ys < H - 1), other=0.0)
    west = tl.load(centre_ptrs - stride_x, mask=in_domain & (xs > 0), other=0.0)
    east = tl.load(centre_ptrs + stride_x, mask=in_domain & (xs < W - 1), other=0.0)

    avg = 0.25 * (north + south + west + east)
    new = tl.where(interior, avg, centre)
    tl.store(out_ptr + ys * stride_y + xs * stride_x, new.to(out_ptr.dtype.element_ty), mask=in_domain)


def jacobi(u, steps=1, BLOCK_Y=16, BLOCK_X=32):
    """Run `steps` Jacobi sweeps on the contiguous 2-D field `u`; returns a new tensor."""
    assert u.dim() == 2 and u.is_contiguous()
    H, W = u.shape
    src = u.clone()
    dst = torch.empty_like(u)
    grid = (triton.cdiv(W, BLOCK_X), triton.cdiv(H, BLOCK_Y))
    for _ in range(steps):
        jacobi_step_kernel[grid](src, dst, H, W, src.stride(0), src.stride(1),
                                 BLOCK_Y=BLOCK_Y, BLOCK_X=BLOCK_X)
        src, dst = dst, src
    return src
