"""Measured references (agent/distributed/measured.py ``committed``) read as data only (#41): a
references file nested 50 000 deep is skipped (it was a ``RecursionError``), a file entry that is
not one, a row with text for a size or the world size, or a configuration that is not JSON, is
skipped; the good rows are read, with their file's ``source``."""
from __future__ import annotations

import json
import types

from swizzleperf.agent.distributed import measured

SIZES = {"M": 8192, "N": 4096, "K": 8192}
GOOD = {"kernel": "k", "device": "NVIDIA H100 80GB HBM3", "world_size": 2, **SIZES, "pattern": "push",
        "time_ms": 1.5, "baseline_ms": 2.0}


def test_hostile_results_files_and_rows_are_skipped(tmp_path, monkeypatch):
    hw = types.SimpleNamespace(name="h100")
    monkeypatch.setattr(measured, "MEASURED_REFS", tmp_path / "measured_refs.json")
    measured.MEASURED_REFS.write_text('{"files": [{"rows": ' + "[" * 50_000 + "]" * 50_000 + "}]}")
    assert measured.committed("k", SIZES, 2, hw) == []
    measured.MEASURED_REFS.write_text(json.dumps({"files": ["a.json", {"source": "b.json", "rows": "all"}, {
        "source": "bench/results/b_rows.json", "rows": [
            {**GOOD, "world_size": "two"},
            {**GOOD, "M": "lots"},
            {**GOOD, "M": [8192]},
            {**GOOD, "best_config": "{not json", "best_ms": 1.0},
            {**GOOD, "best_config": "[" * 10_000 + "]" * 10_000, "best_ms": 1.0},
            GOOD,
        ], "patterns": "all"}]}))
    found = measured.committed("k", SIZES, 2, hw)
    assert [(f["pattern"], f["time_ms"], f["source"]) for f in found] == [("push", 1.5, "bench/results/b_rows.json")]
