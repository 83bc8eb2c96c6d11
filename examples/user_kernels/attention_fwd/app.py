"""Tiny app: fused attention on random queries, keys and values, against torch's
scaled_dot_product_attention.

Run:  TRITON_INTERPRET=1 python app.py     (CPU, interpreter; float32)
      python app.py --large                (CUDA GPU: a problem several times the L2)
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

from kernel import attention  # noqa: E402


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
    # batch 1, 3 heads, 40 positions, head dim 16, 16-query blocks: grid (3, 3) = 9 programs.
    shape = (4, 16, 4096, 64) if large else (1, 3, 40, 16)
    q, k, v = (torch.randn(shape, device=device, dtype=dtype) for _ in range(3))
    out = attention(q, k, v, **(dict(block_m=64, block_n=64) if large else {}))
    ref = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float()).to(dtype)
    ok = torch.allclose(out, ref, atol=2e-2 if dtype == torch.float16 else 1e-4, rtol=1e-3)
    print(f"attention_fwd {tuple(q.shape)} {dtype} on {device}: {'OK' if ok else 'MISMATCH'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
