"""A sibling module the kernel imports (the generated copy must still find it)."""
import triton


def grid_of(M, N):
    """The 1-D launch grid, one program per BLOCK_SIZE_M x BLOCK_SIZE_N tile of C."""
    return lambda META: (triton.cdiv(M, META["BLOCK_SIZE_M"]) * triton.cdiv(N, META["BLOCK_SIZE_N"]),)
