"""Every catalog member is a permutation of the tile grid on grids of every kind (multiples of the
group and domain counts or not, one row, one column), evaluated by the Triton interpreter."""
import json
import os
import subprocess
import sys

import pytest

from swizzleperf.agent.verification.swizzles import UnknownSwizzleError, catalog_source

MEMBERS = ["row-major", "column-major", "grouped-m:1", "grouped-m:8", "grouped-m:5", "grouped-n:3",
           "grouped-n:16", "xcd-contiguous:8", "xcd-contiguous:3", "xcd-grouped-m:8:8", "xcd-grouped-m:4:2"]
GRIDS = [(128, 64), (7, 9), (4, 3), (13, 1), (1, 11), (9, 8)]

_SCRIPT = r'''
import json, math, sys, types
from pathlib import Path
from swizzleperf.agent.verification.load import _import_file
from swizzleperf.agent.verification.probe import probe_target, permutation_errors
sources, grids, folder = json.loads(sys.argv[1]), json.loads(sys.argv[2]), Path(sys.argv[3])
text = "import triton\nimport triton.language as tl\n\n" + "\n".join(
    s.replace("def swizzle(", f"def swizzle_{i}(") for i, s in enumerate(sources))
(folder / "members.py").write_text(text)
module = _import_file(folder / "members.py")
errors = {}
for i in range(len(sources)):
    for grid in grids:
        coords = probe_target(module, types.SimpleNamespace(rewrite_target=f"swizzle_{i}"), tuple(grid),
                              math.prod(grid), 2)
        errors[f"{i} {grid}"] = permutation_errors(coords, tuple(grid))
print(json.dumps(errors))
'''


def test_every_member_is_a_permutation_on_every_grid(tmp_path):
    sources = [catalog_source(m, ["pid", "num_pid_m", "num_pid_n"]) for m in MEMBERS]
    proc = subprocess.run([sys.executable, "-c", _SCRIPT, json.dumps(sources), json.dumps(GRIDS), str(tmp_path)],
                          capture_output=True, text=True, timeout=600, env=dict(os.environ, TRITON_INTERPRET="1"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    errors = json.loads(proc.stdout.strip().splitlines()[-1])
    failures = {f"{MEMBERS[int(k.split()[0])]} on {k.split(' ', 1)[1]}": v for k, v in errors.items() if v}
    assert not failures


@pytest.mark.parametrize("name", ["grouped-m", "grouped-m:0", "grouped-x:4", "xcd-grouped-m:a", "hilbert"])
def test_unknown_or_malformed_names(name):
    with pytest.raises(UnknownSwizzleError):
        catalog_source(name, ["pid", "num_pid_m", "num_pid_n"])


def test_a_target_takes_two_or_more_parameters_the_extra_ones_kept_unread():
    source = catalog_source("grouped-m:8", ["pid", "m", "n", "GROUP_SIZE_M"])
    assert "def swizzle(pid, m, n, GROUP_SIZE_M):" in source and source.count("GROUP_SIZE_M") == 1
    assert "CATALOG_GROUP_M: tl.constexpr = 8" in source
    with pytest.raises(UnknownSwizzleError, match="needs a target"):
        catalog_source("row-major", ["pid"])
    with pytest.raises(UnknownSwizzleError, match="1-D target"):
        catalog_source("grouped-m:8", ["pid", "num_pids"])


def test_one_dimensional_members_are_permutations(tmp_path):
    import math
    script = _SCRIPT.replace("probe_target(module, types.SimpleNamespace(rewrite_target=f\"swizzle_{i}\"), tuple(grid),\n                              math.prod(grid), 2)",
                             "probe_target(module, types.SimpleNamespace(rewrite_target=f\"swizzle_{i}\"), tuple(grid),\n                              math.prod(grid), 1)")
    assert script != _SCRIPT
    sources = [catalog_source(m, ["pid", "num_pids"]) for m in ("row-major", "xcd-contiguous:8", "xcd-contiguous:3")]
    grids = [[1000], [13], [8], [1]]
    proc = subprocess.run([sys.executable, "-c", script, json.dumps(sources), json.dumps(grids), str(tmp_path)],
                          capture_output=True, text=True, timeout=600, env=dict(os.environ, TRITON_INTERPRET="1"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert not any(json.loads(proc.stdout.strip().splitlines()[-1]).values())


def test_three_coordinate_members_are_permutations(tmp_path):
    """A lifted mapping of three coordinates (a batch or split-K slice outermost): each member is
    the 2-D order inside every slice (the XCD remaps first over all programs), a permutation of the
    whole grid, ragged grids included."""
    script = _SCRIPT.replace("math.prod(grid), 2)", "math.prod(grid), 3)")
    assert script != _SCRIPT
    args = ["pid", "num_outer", "num_pid_m", "num_pid_n"]
    names = ["row-major", "column-major", "grouped-m:2", "grouped-n:3", "xcd-contiguous:8", "xcd-grouped-m:2:4"]
    sources = [catalog_source(m, args, coordinates=3) for m in names]
    assert all("return slice_id, pid_m, pid_n" in s for s in sources)
    grids = [[4, 3, 4], [3, 5, 7], [1, 9, 8], [2, 1, 13]]
    proc = subprocess.run([sys.executable, "-c", script, json.dumps(sources), json.dumps(grids), str(tmp_path)],
                          capture_output=True, text=True, timeout=600, env=dict(os.environ, TRITON_INTERPRET="1"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    errors = json.loads(proc.stdout.strip().splitlines()[-1])
    assert not {f"{names[int(k.split()[0])]} on {k.split(' ', 1)[1]}": v for k, v in errors.items() if v}
    with pytest.raises(UnknownSwizzleError, match="three coordinates"):
        catalog_source("row-major", ["pid", "num_pid_m", "num_pid_n"], coordinates=3)
