"""The README's kernels/gemm.py-against-cuBLAS figures are what the committed runs give.

Every committed per-rank run (`rank_gemm_hopper/*/rank_gemm_hopper.md`) has a row for the bundled
GEMM at its default problem; the README gives the number of runs per GPU and their median ratio
(cuBLAS ms / ours). A run committed later changes them: this test then names the figures to write.
"""
import re
import statistics
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ROW = re.compile(r"^\| NVIDIA (H100|H200)[^|]* \| gemm \| default \| 1 \| 16384 x 16384 x 4096 \|.*\| ([0-9.]+) \|$", re.M)


def runs_by_gpu() -> dict:
    folders = [p for lab in ("eval", "bench") for p in (ROOT / lab / "results" / "rank_gemm_hopper").glob("*/")]
    ratios = {"H100": [], "H200": []}
    for folder in folders:
        report = folder / "rank_gemm_hopper.md"
        if report.exists():
            for gpu, ratio in ROW.findall(report.read_text()):
                ratios[gpu].append(float(ratio))
    return ratios


def test_the_readme_gives_the_committed_runs_and_their_medians():
    ratios = runs_by_gpu()
    text = " ".join((ROOT / "README.md").read_text().split())  # line breaks as spaces
    h100, h200 = ratios["H100"], ratios["H200"]
    expected = (f"in all {len(h100) + len(h200)} committed runs of that problem: median "
                f"{statistics.median(h100):.3f}x over {len(h100)} runs on H100s "
                f"({min(h100):.3f}-{max(h100):.3f}x), {statistics.median(h200):.3f}x over {len(h200)} on H200s "
                f"({min(h200):.3f}-{max(h200):.3f}x)")
    assert expected in text, f"the README should say: {expected!r}"
