"""Tiny app: transpose a random matrix (and a non-contiguous view of one) with the
tiled Triton transpose and compare with torch.

Run:  TRITON_INTERPRET=1 python app.py     (CPU, interpreter; float32)
      python app.py --large                (CUDA GPU: a problem several times the L2)
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

from kernel import transpose  # noqa: E402


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
    # 100 x 70 with 32 x 32 tiles: grid (4, 3) = 12 programs, ragged edges on both axes.
    x = torch.randn((8192, 8192) if large else (100, 70), device=device, dtype=dtype)
    ok = torch.equal(transpose(x), x.t())
    # A strided (column-sliced) input: grid (2, 2) = 4 programs.
    y = torch.randn((48, 90), device=device, dtype=dtype)[:, ::2]
    ok = ok and torch.equal(transpose(y), y.t())
    print(f"transpose_2d {tuple(x.shape)} and {tuple(y.shape)} {dtype} on {device}: {'OK' if ok else 'MISMATCH'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
