"""kernels/interpreter.py's ``interpreter_without_discarded_overflow_checks``: under Triton's
interpreter the integer-overflow check whose verdict ``device_assert`` drops is not computed, and
what a kernel computes is unchanged, wrapping int32 arithmetic included; under the installed Triton
and under 3.6 (the GPU machines' image), each in a process of its own (TRITON_INTERPRET is read at
import)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from triton36 import SKIP_REASON, TRITON36, env_with_triton36

SCRIPT = r'''
import json, os
import numpy as np
import torch, triton, triton.language as tl
from triton.runtime import interpreter

@triton.jit
def wrapping(X, Y, n, SCALE: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(X + offs, mask=offs < n, other=0)
    y = x * SCALE + pid * 1000003 - offs     # wraps past 2**31 for most x
    tl.store(Y + offs, y, mask=offs < n)

asserts = []
semantic = interpreter.interpreter_semantic
original = type(semantic).device_assert
def counting(self, *args, **kwargs):
    asserts.append(1)
    return original(self, *args, **kwargs)
type(semantic).device_assert = counting

def run():
    torch.manual_seed(0)
    x = torch.randint(-2**31, 2**31 - 1, (1000,), dtype=torch.int32)
    y = torch.full_like(x, -7)
    wrapping[(8,)](x, y, 1000, SCALE=48271, BLOCK=128)
    return y, x

before, x = run()
checks_before = len(asserts)
expected = (x.to(torch.int64) * 48271 + torch.arange(1000).div(128, rounding_mode="floor") * 1000003
            - torch.arange(1000))
expected = ((expected + 2**31) % 2**32 - 2**31).to(torch.int32)
sanitized = interpreter.interpreter_builder.options.sanitize_overflow
import swizzleperf.kernels   # applies kernels/interpreter.py's patches at import
from swizzleperf.kernels.interpreter import interpreter_without_discarded_overflow_checks
changed = sanitized and not interpreter.interpreter_builder.options.sanitize_overflow
again = interpreter_without_discarded_overflow_checks()
del asserts[:]
after, _ = run()
print(json.dumps({"triton": triton.__version__, "checks_before": checks_before, "checks_after": len(asserts),
                  "changed": changed, "again": again, "same": torch.equal(before, after),
                  "wrapped_right": torch.equal(after, expected),
                  "sanitize": interpreter.interpreter_builder.options.sanitize_overflow}))
'''


def _run(env: dict) -> dict:
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=300,
                          env={**env, "TRITON_INTERPRET": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _check(result: dict) -> None:
    assert result["checks_before"] > 0          # Triton computed the checks it then dropped
    assert result["changed"] and not result["again"] and result["sanitize"] is False
    assert result["checks_after"] == 0
    assert result["same"] and result["wrapped_right"], result


def test_the_discarded_overflow_checks_are_skipped_and_results_unchanged():
    _check(_run(dict(os.environ)))


@pytest.mark.skipif(TRITON36 is None, reason=SKIP_REASON)
def test_the_same_under_triton_36():
    result = _run(env_with_triton36())
    assert result["triton"] == "3.6.0"
    _check(result)


def test_nothing_changes_when_not_interpreting():
    proc = subprocess.run([sys.executable, "-c", "from swizzleperf.kernels.interpreter import "
                           "interpreter_without_discarded_overflow_checks as f; print(f())"],
                          capture_output=True, text=True, timeout=120,
                          env={k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"})
    assert proc.stdout.strip() == "False", proc.stderr[-2000:]
