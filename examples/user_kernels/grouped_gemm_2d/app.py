"""Tiny app: a two-layer MLP block (linear + GELU, then linear) on a small batch,
each layer one launch of the 2-D-grid GEMM, checked against torch.

Run:  TRITON_INTERPRET=1 python app.py     (CPU, interpreter; float32)
      python app.py --large                (CUDA GPU: a problem several times the L2)
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from kernel import linear  # noqa: E402


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
    tol = 2e-2 if dtype == torch.float16 else 1e-4
    M, D, H = (8192, 4096, 8192) if large else (96, 64, 80)
    blocks = dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=32) if large else {}
    x = torch.randn((M, D), device=device, dtype=dtype)
    w1 = torch.randn((H, D), device=device, dtype=dtype) / D ** 0.5
    b1 = torch.randn((H,), device=device, dtype=dtype)
    w2 = torch.randn((D, H), device=device, dtype=dtype) / H ** 0.5
    # layer 1: 96 x 80 output, 32 x 16 tiles -> grid (3, 5) = 15 programs
    h = linear(x, w1, b1, activation="gelu", **blocks)
    # layer 2: 96 x 64 output -> grid (3, 4) = 12 programs
    y = linear(h, w2, **blocks)
    ref_h = F.gelu(F.linear(x.float(), w1.float(), b1.float()), approximate="tanh")
    ref = F.linear(ref_h.to(dtype).float(), w2.float())
    ok = torch.allclose(h.float(), ref_h, atol=tol, rtol=tol) and torch.allclose(y.float(), ref, atol=tol, rtol=tol)
    err = (y.float() - ref).abs().max().item()
    print(f"grouped_gemm_2d MLP {M}x{D}->{H}->{D} {dtype} on {device}: max abs err {err:.2e} -> {'OK' if ok else 'MISMATCH'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
