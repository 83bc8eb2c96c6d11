"""The package data the optimizer reads at run time, made from the committed results.

A run reads no result file of the repository: an installed wheel has none. What it needs is
package data beside the code that reads it, found through ``importlib.resources``:

- ``agent/distributed/data/gemm_configs_hopper.json``: the per-rank GEMM configurations tuned
  per shape on an H100 and an H200 (agent/distributed/problems.py, after the user's own cache),
  a copy of bench/results/gemm_configs_hopper.json;
- ``profiling/rank_gemm_hopper.json``: the per-rank GEMMs timed alone
  (profiling/overlap_model.py, ``predict(..., measured_gemm=True)``), a copy of
  bench/results/rank_gemm_hopper.json;
- ``agent/distributed/data/measured_refs.json``: the committed measurements of the bundled
  distributed kernels that a simulated run shows beside its predictions and calibrates on
  (agent/distributed/measured.py ``committed``): from every results file of rows
  (``bench/results/*.json`` with a ``rows`` list), the rows of a kernel with a world size (its
  own or the file's) and a time (``best_ms``, ``time_ms`` or ``best_pattern_ms``), with the
  file's ``device``, ``world_size`` and ``date``, and its path as ``source``.

    python -m bench.package_data            # write them
    python -m bench.package_data --check    # exit 1 where one differs from what the results give

tests/eval/test_package_data.py runs the check, so a result committed without the package data
made again fails the tests.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
#: results file -> its copy in the package
COPIES = {
    RESULTS / "gemm_configs_hopper.json": ROOT / "agent" / "distributed" / "data" / "gemm_configs_hopper.json",
    RESULTS / "rank_gemm_hopper.json": ROOT / "profiling" / "rank_gemm_hopper.json",
}
MEASURED_REFS = ROOT / "agent" / "distributed" / "data" / "measured_refs.json"
#: A row's time under one of these keys makes it a measurement ``committed`` can show.
TIME_KEYS = ("best_ms", "time_ms", "best_pattern_ms")
FILE_KEYS = ("device", "world_size", "date")


def measured_refs(results: Path = RESULTS) -> dict:
    """``{"files": [{"source", "device", "world_size", "date", "rows", "patterns"}]}``: every
    results file of rows with at least one measured row of a kernel (module docstring)."""
    files = []
    for path in sorted(results.glob("*.json")):
        data = json.loads(path.read_text())
        if not isinstance(data, dict) or not isinstance(data.get("rows"), list):
            continue
        entry = {"source": path.relative_to(ROOT).as_posix(),
                 **{k: data[k] for k in FILE_KEYS if k in data}}
        for key in ("rows", "patterns"):
            rows = [r for r in data[key] if _measured(r, data)] if isinstance(data.get(key), list) else []
            if rows:
                entry[key] = rows
        if entry.get("rows") or entry.get("patterns"):
            entry.setdefault("rows", [])
            files.append(entry)
    return {"made_by": "python -m bench.package_data", "files": files}


def _measured(row, data: dict) -> bool:
    return (isinstance(row, dict) and bool(row.get("kernel")) and bool(row.get("world_size") or data.get("world_size"))
            and any(row.get(k) is not None for k in TIME_KEYS))


def expected() -> dict:
    """package path -> the text it should hold."""
    out = {dst: src.read_text() for src, dst in COPIES.items()}
    out[MEASURED_REFS] = json.dumps(measured_refs(), indent=1) + "\n"
    return out


def main(argv: list | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="compare, write nothing; exit 1 on a difference")
    args = parser.parse_args(argv)
    stale = []
    for path, text in expected().items():
        if path.exists() and path.read_text() == text:
            continue
        if args.check:
            stale.append(path.relative_to(ROOT).as_posix())
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            print(f"wrote {path.relative_to(ROOT)}")
    if stale:
        print(f"package data out of date with bench/results/: {', '.join(stale)}; "
              f"run python -m bench.package_data", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
