"""Tiny app: two Jacobi sweeps of the 5-point stencil on a random field, checked
against the same update written with torch slicing.

Run:  TRITON_INTERPRET=1 python app.py     (CPU, interpreter; float32)
      python app.py --large                (CUDA GPU: a problem several times the L2)
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

from kernel import jacobi  # noqa: E402


def reference(u, steps):
    u = u.clone()
    for _ in range(steps):
        new = u.clone()
        new[1:-1, 1:-1] = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:])
        u = new
    return u


def _large() -> bool:
    """``--large``: the GPU-sized problem (data several times an H100's 50 MB L2)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--large", action="store_true", help="a GPU-sized problem instead of the tiny one")
    return parser.parse_args().large


def main() -> int:
    large = _large()
    torch.manual_seed(0)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = torch.float32
    # 50 x 70 field with 16 x 32 tiles: grid (3, 4) = 12 programs, ragged on both axes.
    u = torch.randn((4096, 4096) if large else (50, 70), device=device, dtype=dtype)
    steps = 2
    out = jacobi(u, steps=steps)
    ref = reference(u, steps)
    ok = torch.allclose(out, ref, atol=1e-5, rtol=1e-5)
    err = (out - ref).abs().max().item()
    print(f"stencil_2d {tuple(u.shape)} x{steps} sweeps {dtype} on {device}: max abs err {err:.2e} -> {'OK' if ok else 'MISMATCH'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
