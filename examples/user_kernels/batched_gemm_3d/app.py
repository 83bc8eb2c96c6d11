"""Tiny app: a batch of matrix products with the 3-D-grid kernel, checked against torch.

Run:  TRITON_INTERPRET=1 python app.py     (CPU, interpreter; float32)
      python app.py                        (CUDA GPU; float16)
      python app.py --large                (CUDA GPU: a problem several times the L2)
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

from kernel import bmm  # noqa: E402


def _large() -> bool:
    """``--large``: the GPU-sized problem (data several times an H100's 50 MB L2)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--large", action="store_true", help="a GPU-sized problem instead of the tiny one")
    return parser.parse_args().large


def main() -> int:
    large = _large()
    torch.manual_seed(0)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = torch.float16 if device == "cuda" else torch.float32
    # 3 batches of 64 x 96 outputs with 32 x 32 tiles: a 2 x 3 x 3 grid, 18 programs
    batch, M, N, K = (16, 2048, 2048, 1024) if large else (3, 64, 96, 48)
    a = torch.randn((batch, M, K), device=device, dtype=dtype)
    b = torch.randn((batch, K, N), device=device, dtype=dtype)
    c = bmm(a, b, **(dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=32) if large else {}))
    ref = torch.bmm(a.float(), b.float())
    tol = 1e-2 if dtype == torch.float16 else 1e-4
    ok = torch.allclose(c.float(), ref, atol=tol * K, rtol=tol)
    err = (c.float() - ref).abs().max().item()
    print(f"batched_gemm_3d {batch}x{M}x{N}x{K} {dtype} on {device}: max abs err {err:.2e} -> {'OK' if ok else 'MISMATCH'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
