"""Tiny app: RMSNorm of a small batch of hidden states, checked against torch.

Runs in the user's dtype: float32 on CPU (the interpreter's bf16 arithmetic is
unreliable), bfloat16 on a GPU.

Run:  TRITON_INTERPRET=1 python app.py     (CPU, interpreter; float32)
      python app.py --large                (CUDA GPU: a problem several times the L2)
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

from kernel import rms_norm  # noqa: E402


def reference(x, w, eps):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * w.float()).to(x.dtype)


def _large() -> bool:
    """``--large``: the GPU-sized problem (data several times an H100's 50 MB L2)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--large", action="store_true", help="a GPU-sized problem instead of the tiny one")
    return parser.parse_args().large


def main() -> int:
    large = _large()
    torch.manual_seed(0)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    eps = 1e-6
    # (3, 13) x 96 -> 39 rows, 4 rows per program: 10 programs, last one partial;
    # 96 columns in a 128-wide block, so the column mask is exercised too.
    shape = (8, 2048, 4096) if large else (3, 13, 96)
    x = torch.randn(shape, device=device, dtype=dtype)
    w = torch.rand(shape[-1:], device=device, dtype=dtype) + 0.5
    y = rms_norm(x, w, eps)
    ref = reference(x, w, eps)
    tol = 2e-2 if dtype == torch.bfloat16 else 1e-5
    ok = torch.allclose(y.float(), ref.float(), atol=tol, rtol=tol)
    err = (y.float() - ref.float()).abs().max().item()
    print(f"row_norm {tuple(x.shape)} {dtype} on {device}: max abs err {err:.2e} -> {'OK' if ok else 'MISMATCH'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
