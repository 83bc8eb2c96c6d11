"""bench/dist_optimize_table.py: the table of the distributed optimize from the runs' reports, each
row's answer and best found as the report says, and where each run stopped (a run cut short by its
time limit says so: the first two-H100 run's five were all killed, and the table did not tell)."""
import json
from pathlib import Path

from bench import dist_optimize_table


def _report(folder: Path, status: str, stop_reason: str) -> None:
    run = folder / "runs" / "r1"
    run.mkdir(parents=True)
    best = {"kind": "expert", "config": {"pattern": "bulk_sync", "swizzle": "grouped-m:8"}, "time_ms": 2.878,
            "time_spread_ms": 0.14, "torch_nccl_ms": 3.145, "torch_nccl_spread_ms": 0.05, "paired_gain_ms": 0.267,
            "paired_spread_ms": 0.1}
    (run / "report.json").write_text(json.dumps({
        "kernel": "gemm_reduce_scatter", "mode": "measured", "hardware": "h100", "status": status, "iterations": 2,
        "stop_reason": stop_reason, "best": best,
        "distributed": {"problem": "llama70b-down-8k", "world_size": 2, "pool": {"device": "NVIDIA H100 80GB HBM3"},
                        "references": {"torch_nccl_ms": 3.197}, "answer": {"use": "configuration", "line": "use it"}}}))


def test_each_row_says_where_its_run_stopped(tmp_path):
    _report(tmp_path, "interrupted", "cut short by SIGTERM (a time limit such as `timeout`, or Ctrl-C) after 2 of 5 iterations")
    rows = dist_optimize_table.rows_from(tmp_path, [])
    assert rows[0]["best_ms"] == 2.878 and rows[0]["recommendation"] == {"pattern": "bulk_sync", "swizzle": "grouped-m:8"}
    assert rows[0]["status"] == "interrupted" and rows[0]["never_slower"]
    text = dist_optimize_table.markdown(rows, "cmd")
    assert "gemm_reduce_scatter llama70b-down-8k: interrupted after 2 iterations (cut short by SIGTERM" in text


def test_the_row_recommends_the_configuration_the_answer_names(tmp_path):
    """The answer may name a head-to-head contender other than the fastest (agent/distributed/measured.answer):
    the row's recommendation and its never-slower check are that contender's, the best found stays the fastest."""
    run = tmp_path / "runs" / "r1"
    run.mkdir(parents=True)
    best = {"name": "push_copy_engine", "config": {"pattern": "push_copy_engine"}, "time_ms": 0.362,
            "time_spread_ms": 0.229, "torch_nccl_ms": 0.449, "torch_nccl_spread_ms": 0.009,
            "paired_gain_ms": 0.078, "paired_spread_ms": 0.240}
    push = {"name": "default", "kind": "baseline", "config": {"pattern": "push"}, "time_ms": 0.416,
            "time_spread_ms": 0.024, "torch_nccl_ms": 0.449, "paired_gain_ms": 0.025, "paired_spread_ms": 0.021}
    (run / "report.json").write_text(json.dumps({
        "kernel": "all_gather_gemm", "mode": "measured", "hardware": "h200", "best": best,
        "confirmation": {"contenders": [best, push]},
        "distributed": {"problem": "llama8b-up-4k", "world_size": 2, "pool": {"device": "NVIDIA H200"},
                        "references": {"torch_nccl_ms": 0.436},
                        "answer": {"use": "configuration", "name": "default", "config": {"pattern": "push"},
                                   "line": "use default: 1.08x"}}}))
    row = dist_optimize_table.rows_from(tmp_path, [])[0]
    assert row["recommendation"] == {"pattern": "push"} and row["recommended_ms"] == 0.416
    assert row["best_ms"] == 0.362 and row["never_slower"]
    assert '`{"pattern": "push"}`' in dist_optimize_table.markdown([row], "cmd")
