"""Tiny app: multiply random matrices with the persistent GEMM and with the
hybrid stream-K GEMM, and check both against torch.

Under TRITON_INTERPRET=1 the programs run one after another in program-id order;
the stream-K kernel only ever waits on programs with a smaller id, so it finishes
there too (see kernel.py).  NUM_SMS is pinned to small values on CPU so that the
ragged last wave really is split across programs.

Run:  TRITON_INTERPRET=1 python app.py     (CPU, interpreter; float32)
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

from kernel import matmul_persistent, matmul_streamk  # noqa: E402


def main() -> int:
    torch.manual_seed(0)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = torch.float16 if device == "cuda" else torch.float32
    tol = 1e-2 if dtype == torch.float16 else 1e-4
    # 96 x 80 with 32 x 32 tiles: 9 tiles.
    M, N, K = 96, 80, 96
    a = torch.randn((M, K), device=device, dtype=dtype)
    b = torch.randn((K, N), device=device, dtype=dtype)
    ref = torch.matmul(a.float(), b.float())
    results = {}
    # persistent: 5 programs loop over 9 tiles (2, 2, 2, 2, 1 tiles each)
    results["persistent/5"] = matmul_persistent(a, b, num_sms=5)
    # stream-K, 5 programs: 5 data-parallel tiles + 4 tiles x 6 K-iterations split 5 ways
    results["streamk/5"] = matmul_streamk(a, b, num_sms=5)
    # stream-K, 4 programs: 8 data-parallel tiles + 1 tile whose 6 K-iterations go 2, 2, 1, 1
    results["streamk/4"] = matmul_streamk(a, b, num_sms=4)
    if device == "cuda":  # a real wave on the GPU: every SM takes part
        results["streamk/all-SMs"] = matmul_streamk(a, b)
    ok = True
    parts = []
    for name, c in results.items():
        good = torch.allclose(c.float(), ref, atol=tol * K, rtol=tol)
        ok = ok and good
        parts.append(f"{name} err {(c.float() - ref).abs().max().item():.1e}")
    print(f"persistent_streamk_gemm {M}x{N}x{K} {dtype} on {device}: {', '.join(parts)} -> {'OK' if ok else 'MISMATCH'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
