"""``swizzleperf eval --apps DIR --ray`` on a local Ray cluster on the CPU (eval/apps_ray.py): the
three apps of tests/helpers/apps/suite/ run as Ray tasks (one CPU each, no GPU here) and their three
rows come back to the one record and table, each of its class. Skipped where Ray is not installed
(``pip install "swizzleperf[ray]"``)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from run_cli import swizzleperf

pytest.importorskip("ray", reason='Ray is an optional extra: pip install "swizzleperf[ray]"')

SUITE = Path(__file__).resolve().parents[1] / "helpers" / "apps" / "suite"


def test_three_apps_run_as_ray_tasks(tmp_path):
    proc = swizzleperf("eval", "--apps", str(SUITE), "--ray", "--ray-address", "local", "--iterations", "1",
                       "--row-budget", "300", "--hw", "mi300x", "--out", str(tmp_path / "out" / "suite"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    table = json.loads((tmp_path / "out" / "suite.json").read_text())
    outcomes = {r["app"]: r["outcome"] for r in table["rows"]}
    assert outcomes == {"matmul.py": "verified, no gain", "one_program.py": "refused", "raises.py": "app failed"}
    assert (table["ran"], table["answered"]) == (3, 2)
    assert "eval apps-" in proc.stdout and "2 of 3 answered" in proc.stdout
