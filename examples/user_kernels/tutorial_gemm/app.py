"""Tiny app: multiply two random matrices with the tutorial-style Triton GEMM and
check the product against torch.

Run:  TRITON_INTERPRET=1 python app.py     (CPU, interpreter; float32)
      python app.py                        (CUDA GPU; float16)
      python app.py --large                (CUDA GPU: a problem several times the L2)
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

from kernel import matmul  # noqa: E402


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
    # 96 x 80 output with 32 x 32 tiles: 3 x 3 = 9 programs (not a multiple of 8).
    M, N, K = (8192, 8192, 4096) if large else (96, 80, 64)
    a = torch.randn((M, K), device=device, dtype=dtype)
    b = torch.randn((K, N), device=device, dtype=dtype)
    ok = True
    for _ in range(2):  # second call reuses the autotuned config
        c = matmul(a, b)
        ref = torch.matmul(a.float(), b.float()).to(dtype)
        tol = 1e-2 if dtype == torch.float16 else 1e-4
        ok = ok and torch.allclose(c.float(), ref.float(), atol=tol * K, rtol=tol)
    err = (c.float() - ref.float()).abs().max().item()
    print(f"tutorial_gemm {M}x{N}x{K} {dtype} on {device}: max abs err {err:.2e} -> {'OK' if ok else 'MISMATCH'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
