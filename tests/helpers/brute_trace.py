"""What every program of a kernel's launch really touches, for checking a trace against: each
program run under the interpreter (profiling/interpreter_hooks.py's ``sampled_launches``, in a
process of its own: TRITON_INTERPRET is read at import), its loads' and stores' ``(tensor, 32 B
sector)`` pairs, sectors counted from each tensor's start."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

_SCRIPT = """
import json, sys
import numpy as np
from swizzleperf.agent.verification.load import load_kernel
from swizzleperf.profiling.interpreter_hooks import sampled_launches
path, sizes, meta, programs = json.loads(sys.argv[1])
module, spec = load_kernel(path)
problem, meta = {**spec.problems["default"], **sizes}, {**spec.meta_for("default"), **meta}
programs = programs or int(np.prod(spec.tile_grid(problem, meta)))
inputs = spec.make_inputs(problem, 0, "cpu", spec.dtypes[0])
tensors = [t for t in inputs.values() if hasattr(t, "data_ptr")]
ranges = [(t.data_ptr(), t.data_ptr() + t.numel() * t.element_size()) for t in tensors]
seen = [[set(), set()] for _ in range(programs)]

def on_access(launch, index, addrs, itemsize, is_store):
    for k, (lo, hi) in enumerate(ranges):
        inside = addrs[(addrs >= lo) & (addrs < hi)] - lo
        for g in np.unique(np.concatenate([inside // 32, (inside + itemsize - 1) // 32])).tolist():
            seen[index][int(is_store)].add((k, g))

with sampled_launches(list(range(programs)), on_access):
    spec.launch(inputs, **meta)
print(json.dumps([[sorted(r), sorted(w)] for r, w in seen]))
"""


def brute_force(path: Path, sizes: dict | None = None, meta: dict | None = None, programs: int | None = None) -> list:
    """Per program id of the launch at the kernel's default problem with ``sizes`` and its default
    meta-parameters with ``meta``: ``[reads, writes]``, sets of ``(tensor, 32 B sector)``.
    ``programs``: how many (default: the tile grid's tiles)."""
    done = subprocess.run([sys.executable, "-c", _SCRIPT, json.dumps([str(path), sizes or {}, meta or {}, programs])],
                          capture_output=True, text=True, timeout=300, env=dict(os.environ, TRITON_INTERPRET="1"))
    assert done.returncode == 0, done.stderr[-2000:]
    return [[{tuple(x) for x in r}, {tuple(x) for x in w}] for r, w in json.loads(done.stdout.strip().splitlines()[-1])]


def assert_trace_is(trace, truth: list, granule: int = 32) -> None:
    """Every tile ``t`` of ``trace`` (reuse counted per ``granule`` bytes, a multiple of 32) reads and
    writes exactly the granules of ``truth[t]`` (``[reads, writes]`` of 32 B sectors, as
    ``brute_force`` gives them, per logical tile), every two tiles share exactly the granules they
    really share, and the footprint is theirs."""
    per = granule // 32
    truth = [[{(k, g // per) for k, g in kind} for kind in tile] for tile in truth]
    assert trace.num_tiles == len(truth)
    writes, mine = trace.writes(), []
    for t in range(trace.num_tiles):
        keys = trace.keys[t]
        reads, stored = set(keys[(keys >= 0) & ~writes[t]].tolist()), set(keys[writes[t]].tolist())
        assert trace.block_bytes[sorted(reads)].sum() == len(truth[t][0]) * granule, (granule, t)
        assert trace.block_bytes[sorted(stored)].sum() == len(truth[t][1]) * granule, (granule, t)
        mine.append(reads | stored)
    for t in range(len(mine)):
        for u in range(t + 1, len(mine)):
            shared = (truth[t][0] | truth[t][1]) & (truth[u][0] | truth[u][1])
            assert trace.block_bytes[sorted(mine[t] & mine[u])].sum() == len(shared) * granule, (granule, t, u)
    assert trace.footprint_bytes() == len(set().union(*[r | w for r, w in truth])) * granule
