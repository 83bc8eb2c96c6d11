"""Measured references (agent/distributed/measured.py ``committed``) read as data only (#41): a
results file nested 50 000 deep is skipped (it was a ``RecursionError``), a row with text for a
size or the world size, or a configuration that is not JSON, is skipped; the good rows are read."""
from __future__ import annotations

import json
import types

from swizzleperf.agent.distributed import measured

SIZES = {"M": 8192, "N": 4096, "K": 8192}
GOOD = {"kernel": "k", "device": "NVIDIA H100 80GB HBM3", "world_size": 2, **SIZES, "pattern": "push",
        "time_ms": 1.5, "baseline_ms": 2.0}


def test_hostile_results_files_and_rows_are_skipped(tmp_path, monkeypatch):
    monkeypatch.setattr(measured, "RESULTS_DIR", tmp_path / "eval" / "results")
    measured.RESULTS_DIR.mkdir(parents=True)
    (measured.RESULTS_DIR / "a_deep.json").write_text('{"rows": ' + "[" * 50_000 + "]" * 50_000 + "}")
    (measured.RESULTS_DIR / "b_rows.json").write_text(json.dumps({"rows": [
        {**GOOD, "world_size": "two"},
        {**GOOD, "M": "lots"},
        {**GOOD, "M": [8192]},
        {**GOOD, "best_config": "{not json", "best_ms": 1.0},
        {**GOOD, "best_config": "[" * 10_000 + "]" * 10_000, "best_ms": 1.0},
        GOOD,
    ], "patterns": "all"}))
    hw = types.SimpleNamespace(name="h100")
    found = measured.committed("k", SIZES, 2, hw)
    assert [(f["pattern"], f["time_ms"]) for f in found] == [("push", 1.5)]
