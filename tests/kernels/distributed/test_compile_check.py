"""kernels/distributed/compile_check.py's build of a launch mirrors the JIT's specialisation (CPU,
``triton.compile`` replaced: only the arguments it would get are looked at)."""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from swizzleperf.kernels.distributed import compile_check


@triton.jit(do_not_specialize=["epoch"])
def _kernel(x_ptr, n, stride, epoch, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    tl.store(x_ptr + offsets * stride, epoch, mask=offsets < n)


def test_an_integer_one_is_a_constant_as_the_jit_makes_it(monkeypatch):
    """stride = 1 becomes the constant 1 (triton 3.6's launcher specialises it: a unit stride then
    vectorises, as the compiled launch does); epoch = 1 stays an i32 (do_not_specialize); n = 32
    is an i32 divisible by 16, the tensor a 16-byte aligned pointer."""
    seen = {}
    monkeypatch.setattr(triton, "compile", lambda source, **kwargs: seen.update(source=source, **kwargs))
    compile_check.compile_launch(_kernel, (torch.zeros(64, dtype=torch.int32), 32, 1, 1),
                                 {"BLOCK": 64, "num_warps": 4}, 90)
    source = seen["source"]
    assert source.signature == {"x_ptr": "*i32", "n": "i32", "stride": "constexpr", "epoch": "i32",
                                "BLOCK": "constexpr"}
    assert source.constants[(2,)] == 1 and source.constants[(4,)] == 64
    assert source.attrs[(0,)] == [["tt.divisibility", 16]] and source.attrs[(1,)] == [["tt.divisibility", 16]]
    assert (3,) not in source.attrs and seen["options"] == {"num_warps": 4}
