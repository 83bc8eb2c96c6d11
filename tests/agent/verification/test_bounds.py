"""agent/verification/bounds.py: an interpreted launch with every access checked against its own
tensors (a subprocess: ``@triton.jit`` picks the interpreter at import)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from triton36 import SKIP_REASON, TRITON36, env_with_triton36

_SCRIPT = r'''
import json, sys
import torch, triton, triton.language as tl
from swizzleperf.agent.verification.bounds import checked_accesses, outside_finding

@triton.jit
def copy(x, y, n_read, n_write, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x + offs, mask=offs < n_read, other=0.0)
    tl.store(y + offs, v, mask=offs < n_write)

@triton.jit
def count(x, hits):
    tl.atomic_add(hits + tl.load(x), 1)

case = sys.argv[1]
x, y = torch.arange(8, dtype=torch.float32), torch.full((8,), float("nan"))
base = torch.zeros(16, dtype=torch.float32)
found = None
try:
    with checked_accesses():
        if case == "inside":
            copy[(2,)](x, y, 8, 8, BLOCK=4)
        elif case == "masked off":       # the lanes past the end are masked: nothing outside
            copy[(1,)](x, y, 8, 8, BLOCK=16)
        elif case == "read past":
            copy[(1,)](x, y, 12, 8, BLOCK=16)
        elif case == "write past":
            copy[(3,)](x, y, 8, 12, BLOCK=4)
        elif case == "views of one storage":   # a view's neighbours in its own storage are its tensor's
            copy[(1,)](base[4:8], base[8:12], 8, 4, BLOCK=8)
        elif case == "atomic":
            count[(1,)](torch.tensor([40], dtype=torch.int32), torch.zeros(4, dtype=torch.int32))
except Exception as exc:
    found = outside_finding(exc)
    if found is None:
        raise
print(json.dumps({"found": found, "y": [float(v) for v in y]}))
'''


def _run(case: str, env: dict | None = None) -> dict:
    done = subprocess.run([sys.executable, "-c", _SCRIPT, case], capture_output=True, text=True, timeout=120,
                          env=dict(env or os.environ, TRITON_INTERPRET="1"))
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_accesses_inside_the_tensors_pass_and_the_launch_runs():
    assert _run("inside") == {"found": None, "y": [float(i) for i in range(8)]}
    assert _run("masked off")["found"] is None
    assert _run("views of one storage")["found"] is None


def test_a_read_past_the_end_is_named_with_its_line_and_program():
    found = _run("read past")["found"]
    assert found.startswith("the kernel reaches memory outside its tensors: the load at line 9 of <string> (copy)")
    assert ("in program (0, 0, 0): 4 of its 12 active elements fall outside every tensor argument, the first at "
            "element 8 counted from the start of the nearest, x's storage (8 elements of 4 bytes)") in found


def test_a_write_past_the_end_stops_before_it_is_made():
    found = _run("write past")["found"]
    assert "the store at line 10 of <string> (copy) in program (2, 0, 0): " in found
    assert "the first at element 8 counted from the start of the nearest, y's storage" in found


def test_an_atomic_at_an_index_read_from_data_is_checked():
    found = _run("atomic")["found"]
    assert "the atomic at line 14 of <string> (count)" in found and "element 40 counted from the start of the nearest, hits's" in found


@pytest.mark.skipif(TRITON36 is None, reason=SKIP_REASON)
def test_on_triton_36_too():
    """The GPU machines' Triton: other builder signatures (cache modifier and eviction policy)."""
    env = env_with_triton36()
    assert _run("inside", env)["found"] is None
    assert "the load at line 9 of <string> (copy)" in _run("read past", env)["found"]
    assert "the store at line 10 of <string> (copy)" in _run("write past", env)["found"]
    assert "element 40 counted from the start of the nearest, hits's" in _run("atomic", env)["found"]
