"""bench/l2_measure_set.py's frozen held-out part and bench/validate_simulator.py's guard
(issue #43); bench/gpu_l2_measure.sh parses."""
import json
import subprocess
from pathlib import Path

import pytest

from bench import l2_measure_set as ms
from bench.validate_simulator import HeldOutRead, heldout_rows, model_rows

ROOT = Path(__file__).resolve().parents[2]


def test_the_committed_holdout_is_well_formed_and_the_seeded_draw():
    doc = json.loads(ms.HOLDOUT.read_text())
    held = ms.load_holdout()
    assert held == set(ms.draw_holdout(doc["seed"])) == {(p["kernel"], p["order"]) for p in doc["held_out"]}
    assert doc == ms.holdout_document(doc["seed"])          # stable: the file is exactly the draw
    assert ms.FORCED_HOLDOUT <= held <= set(ms.PAIRS)
    assert doc["pairs_total"] == len(ms.PAIRS) == len(set(ms.PAIRS))
    for kernel, orders in ms.ORDERS.items():                # a third of each kernel's orders, at least one
        assert sum(k == kernel for k, _ in held) == max(1, round(len(orders) / 3))
    assert ms.draw_holdout(ms.SEED) == ms.draw_holdout(ms.SEED)


def test_an_edited_holdout_file_is_refused(tmp_path):
    doc = json.loads(ms.HOLDOUT.read_text())
    doc["held_out"] = doc["held_out"][1:]
    path = tmp_path / "h.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match="digest"):
        ms.load_holdout(path)


def test_every_pair_is_in_exactly_one_part_and_every_kernel_file_exists():
    kernels = [k for part in ms.PARTS.values() for k in part]
    assert sorted(kernels) == sorted(ms.ORDERS) and len(ms.ORDERS) == 10
    assert all((ROOT / "kernels" / f"{k}.py").exists() for k in ms.ORDERS)


def _measured(kernel, orders, marked=()):
    return {"kernel": f"kernels/{kernel}.py", "rows": [{"order": o, "held_out": o in marked} for o in orders]}


def test_model_building_never_reads_a_held_out_row():
    data = _measured("gemm", ms.ORDERS["gemm"], marked={"row-major"})
    built = [r["order"] for r in model_rows(data)]
    held = {o for k, o in ms.load_holdout() if k == "gemm"}
    assert not set(built) & held and {"row-major", "grouped-m:8", "column-major"} <= held
    assert set(built) | {r["order"] for r in heldout_rows(data)} == set(ms.ORDERS["gemm"])
    # the old H200 file of the GEMM (no marks) is filtered alike
    old = json.loads((ROOT / "bench/results/ncu_orders_h200.json").read_text())
    assert not {r["order"] for r in model_rows(old)} & held


def test_a_row_marked_held_out_that_the_list_does_not_hold_is_refused():
    with pytest.raises(HeldOutRead):
        model_rows(_measured("gemm", ["grouped-n:8"], marked={"grouped-n:8"}))


def test_the_gpu_script_parses_and_refuses_a_bad_part():
    script = ROOT / "bench" / "gpu_l2_measure.sh"
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    bad = subprocess.run(["bash", str(script), "3", "/tmp/x"], capture_output=True, text=True, cwd=ROOT)
    assert bad.returncode == 2 and "PART must be 1 or 2" in bad.stderr
