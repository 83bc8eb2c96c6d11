"""Does this Triton emit TMA multicast for a Hopper GEMM in clusters? Compiles (no GPU needed) a
tensor-descriptor matmul of 256 x 128 x 64 tiles for sm_90 with ``num_ctas`` 1 and 2 through the
standard Triton path, and prints which ``cp.async.bulk.tensor`` forms its PTX holds, whether any is
``.multicast::cluster``, and the shared memory a CTA takes; then whether Gluon's Hopper TMA load
takes a ``multicast`` argument. cuBLAS runs its Hopper GEMMs in clusters whose CTAs share operand
tiles through TMA multicast (bench/results/rank_gemm_hopper.md); this is what our GEMM could use.

    python3 -m bench.multicast_check          # under the Triton to check (PYTHONPATH=... for another)
"""
from __future__ import annotations

import inspect
import re

import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource


@triton.jit
def _matmul(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    a_desc = tl.make_tensor_descriptor(a_ptr, [M, K], [K, 1], [BM, BK])
    b_desc = tl.make_tensor_descriptor(b_ptr, [K, N], [N, 1], [BK, BN])
    c_desc = tl.make_tensor_descriptor(c_ptr, [M, N], [N, 1], [BM, BN])
    pid = tl.program_id(0)
    pid_m, pid_n = pid % (M // BM), pid // (M // BM)
    acc = tl.zeros([BM, BN], tl.float32)
    for k in range(0, K, BK):
        acc = tl.dot(a_desc.load([pid_m * BM, k]), b_desc.load([k, pid_n * BN]), acc)
    c_desc.store([pid_m * BM, pid_n * BN], acc.to(tl.bfloat16))


def main() -> int:
    print(f"triton {triton.__version__}")
    signature = {"a_ptr": "*bf16", "b_ptr": "*bf16", "c_ptr": "*bf16", "M": "i32", "N": "i32", "K": "i32",
                 "BM": "constexpr", "BN": "constexpr", "BK": "constexpr"}
    for num_ctas in (1, 2):
        compiled = triton.compile(ASTSource(fn=_matmul, signature=signature,
                                            constexprs={"BM": 256, "BN": 128, "BK": 64}),
                                  target=GPUTarget("cuda", 90, 32),
                                  options={"num_warps": 8, "num_ctas": num_ctas, "num_stages": 4})
        ptx = compiled.asm["ptx"]
        forms = sorted(set(re.findall(r"cp\.async\.bulk\.tensor[^ ]*", ptx)))
        print(f"num_ctas={num_ctas}: multicast in PTX: {'.multicast::cluster' in ptx}; shared memory "
              f"{compiled.metadata.shared} B a CTA; TMA forms: {', '.join(forms)}")
    try:
        from triton.experimental.gluon.language.nvidia.hopper import tma
        load = getattr(tma, "async_load", None) or tma.async_copy_global_to_shared
        print(f"Gluon Hopper TMA load {load.__name__}: multicast argument: "
              f"{'multicast' in inspect.signature(load).parameters}")
    except ImportError as exc:
        print(f"no Gluon: {exc}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
