"""Tiny app: the per-row cross-entropy of random logits, checked against torch.

Run:  TRITON_INTERPRET=1 python app.py     (CPU, interpreter; float32)
      python app.py                        (CUDA GPU; bfloat16 logits)
      python app.py --large                (CUDA GPU: a problem several times the L2)
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

from kernel import cross_entropy  # noqa: E402


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
    # 11 rows (programs, not a multiple of 8) of a 200-word vocabulary: 4 chunks of 64, the last ragged
    rows, vocab = (4096, 32768) if large else (11, 200)
    logits = torch.randn((rows, vocab), device=device, dtype=dtype) * 3
    labels = torch.randint(0, vocab, (rows,), device=device)
    loss = cross_entropy(logits, labels, BLOCK_V=1024 if large else 64)
    ref = torch.nn.functional.cross_entropy(logits.float(), labels, reduction="none")
    tol = 2e-2 if dtype == torch.bfloat16 else 1e-5
    ok = torch.allclose(loss, ref, atol=tol, rtol=tol)
    err = (loss - ref).abs().max().item()
    print(f"cross_entropy {rows}x{vocab} {dtype} on {device}: max abs err {err:.2e} -> {'OK' if ok else 'MISMATCH'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
