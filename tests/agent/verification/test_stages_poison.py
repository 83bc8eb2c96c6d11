"""The verifier's poison (agent/verification/stages.py): a value kernels do not write, never 0."""
from __future__ import annotations

import pytest
import torch

from swizzleperf.agent.capture.capture import _without_poison
from swizzleperf.agent.verification.stages import poison, poison_value


@pytest.mark.parametrize("dtype, value", [(torch.int8, -128), (torch.int32, -2**31), (torch.int64, -2**63),
                                          (torch.uint8, 255)])
def test_the_integer_poison_is_never_zero(dtype, value):
    """An unsigned type's minimum is 0, what a KV cache starts from (TritonBench-G kv_cache_filling:
    a uint8 cache of zeros read as never written): its poison is the largest value instead."""
    assert poison_value(dtype) == value
    out = torch.zeros(4, dtype=dtype)
    unwritten = poison(out)
    assert bool(unwritten(out).all())
    out[:2] = 0
    assert unwritten(out).tolist() == [False, False, True, True]


def test_a_captured_output_of_zeros_is_not_read_as_poison():
    captured = torch.tensor([0, 7, 255], dtype=torch.uint8)
    assert _without_poison(captured).tolist() == [0, 7, 0]
    assert _without_poison(torch.tensor([0, -128], dtype=torch.int8)).tolist() == [0, 0]


@pytest.mark.parametrize("dtype", [torch.int8, torch.int32, torch.uint8])
def test_the_apps_hook_poisons_as_the_verifier_does(dtype):
    from swizzleperf.agent.capture import capture_hook
    t = torch.zeros(3, dtype=dtype)
    capture_hook._poison(t)
    assert t.tolist() == [poison_value(dtype)] * 3
    assert capture_hook._holds_poison(t) and not capture_hook._holds_poison(torch.zeros(3, dtype=dtype))
