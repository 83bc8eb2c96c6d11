"""Tiny app: fused attention on random queries, keys and values, against torch's
scaled_dot_product_attention.

Run:  TRITON_INTERPRET=1 python app.py     (CPU, interpreter; float32)
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

from kernel import attention  # noqa: E402


def main() -> int:
    torch.manual_seed(0)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = torch.float16 if device == "cuda" else torch.float32
    # batch 1, 3 heads, 40 positions, head dim 16, 16-query blocks: grid (3, 3) = 9 programs.
    q, k, v = (torch.randn((1, 3, 40, 16), device=device, dtype=dtype) for _ in range(3))
    out = attention(q, k, v)
    ref = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float()).to(dtype)
    ok = torch.allclose(out, ref, atol=2e-2 if dtype == torch.float16 else 1e-4, rtol=1e-3)
    print(f"attention_fwd {tuple(q.shape)} {dtype} on {device}: {'OK' if ok else 'MISMATCH'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
