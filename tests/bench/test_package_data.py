"""The package data a run reads (bench/package_data.py) is what the committed results give: a
result committed without making the package data again fails here; and the modules find it
through the package, not through the repository's bench/results/."""
from __future__ import annotations

import json

from swizzleperf.agent.distributed import measured, problems
from bench import package_data
from swizzleperf.profiling import overlap_model


def test_the_package_data_is_what_the_results_give():
    assert package_data.main(["--check"]) == 0


def test_the_modules_read_the_package_data_beside_them():
    assert problems.COMMITTED_GEMM_CONFIGS.parent == measured.MEASURED_REFS.parent
    assert problems.COMMITTED_GEMM_CONFIGS.parent.parent.name == "distributed"
    assert overlap_model.RANK_GEMM_MEASURED.parent.name == "profiling"
    for path in (problems.COMMITTED_GEMM_CONFIGS, measured.MEASURED_REFS, overlap_model.RANK_GEMM_MEASURED):
        assert path.is_file() and "results" not in path.parts


def test_every_extracted_row_is_of_a_kernel_with_a_world_size_and_a_time():
    refs = json.loads(measured.MEASURED_REFS.read_text())
    assert refs["files"], "no committed distributed measurements extracted"
    for entry in refs["files"]:
        assert entry["source"].startswith("bench/results/") and entry["source"].endswith(".json")
        for row in entry["rows"] + entry.get("patterns", []):
            assert row["kernel"] and (row.get("world_size") or entry.get("world_size"))
            assert any(row.get(k) is not None for k in package_data.TIME_KEYS)
