"""bench/gpu_l2_stride.py on the CPU: the variant kernel's default problem, and the rows and failures
the script keeps (validate_simulator's ncu measurement replaced by a stand-in)."""
from __future__ import annotations

import json

from bench import gpu_l2_stride


def test_the_variant_changes_k_and_nothing_else(tmp_path):
    from swizzleperf.agent.verification.load import load_kernel
    path = gpu_l2_stride.variant(4160, tmp_path)
    _, spec = load_kernel(path)
    assert spec.problems["default"] == {"M": 16384, "N": 16384, "K": 4160}
    original = gpu_l2_stride.GEMM.read_text().splitlines()
    changed = [a for a, b in zip(original, path.read_text().splitlines()) if a != b]
    assert changed == [line for line in original if gpu_l2_stride.DEFAULT_PROBLEM in line]


def test_each_pair_is_kept_as_measured_and_a_failure_costs_only_itself(tmp_path, monkeypatch):
    import bench.validate_simulator as vs
    seen = []

    folders = set()

    def fake_measure(kernel, orders, out, whole_run=False):
        folders.add(kernel.parent)
        k = int(kernel.stem.split("_k")[1])
        seen.append((k, orders[0]))
        if (k, orders[0]) == (4160, "row-major"):
            raise RuntimeError("ncu failed")
        out.write_text(json.dumps({"device": "GPU", "problem": {"K": k}, "meta": {},
                                   "rows": [{"order": orders[0], "lts__t_sector_hit_rate.pct": 50.0}]}))

    monkeypatch.setattr(vs, "measure", fake_measure)
    out = tmp_path / "stride.json"
    assert gpu_l2_stride.main(["--out", str(out), "--orders", "column-major,row-major"]) == 0
    assert seen == [(4096, "column-major"), (4160, "column-major"), (4096, "row-major"), (4160, "row-major")]
    result = json.loads(out.read_text())
    assert [(r["K"], r["order"]) for r in result["rows"]] == seen[:3]
    assert result["failed"] == [{"K": 4160, "order": "row-major", "error": "RuntimeError: ncu failed"}]
    (folder,) = folders                       # one folder of the run's own, under the repository, gone after
    assert folder.parent == gpu_l2_stride.ROOT / "bench" and not folder.exists()
