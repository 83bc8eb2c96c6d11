"""The README's results summaries between ``<!-- results:NAME -->`` markers are what
bench/results_page.py makes from the committed raw files under bench/results/ (issue #44): a figure
edited by hand, or a raw file committed later, fails here with the diff to apply
(``python -m bench.results_page`` writes it)."""
import shutil
from pathlib import Path

import pytest

from bench import results_page

ROOT = Path(__file__).resolve().parents[2]


def test_the_committed_summaries_are_the_scripts(capsys):
    assert results_page.main(["--check"]) == 0, capsys.readouterr().out


def _pages(tmp_path) -> None:
    """A copy of every page with blocks, for a variant to break."""
    for name in {name for name, _ in {**results_page.BLOCKS, **results_page.TEXTS}}:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, tmp_path / name)


def test_a_figure_edited_by_hand_fails_the_check(tmp_path, capsys):
    """The broken variant: the README with one figure changed between the markers."""
    _pages(tmp_path)
    text = (ROOT / "README.md").read_text()
    start = text.index("<!-- results:hand-bench -->")
    assert "1.12-1.38x" in text[start:]
    (tmp_path / "README.md").write_text(text[:start] + text[start:].replace("1.12-1.38x", "1.12-1.48x", 1))
    assert results_page.main(["--check"], root=tmp_path) == 1
    out = capsys.readouterr().out
    assert "-  push_copy_engine, the fastest pattern at 6 of 6 problems, 1.12-1.48x" in out, out


def test_a_figure_edited_by_hand_in_the_results_page_fails_the_check(tmp_path, capsys):
    """The broken variant in docs/results.md: the mixed-session bound ratio of the table printed
    before (1.14x: the head-to-head's torch + NCCL over the references' GEMM) put back."""
    _pages(tmp_path)
    text = (ROOT / "docs" / "results.md").read_text()
    start = text.index("<!-- results:dist-optimize-table -->")
    assert "| 2.727 | 1.12x |" in text[start:]
    (tmp_path / "docs" / "results.md").write_text(text[:start] + text[start:].replace("| 2.727 | 1.12x |",
                                                                                      "| 2.727 | 1.14x |", 1))
    assert results_page.main(["--check"], root=tmp_path) == 1
    assert "| 2.727 | 1.14x |" in capsys.readouterr().out


def test_no_share_of_the_way_from_two_sessions():
    """The optimize run's share of the way (ours from the head-to-head, its bound from the
    references' rounds) is said to be withheld, and given nowhere as a figure."""
    summary = results_page.dist_optimize_summary()
    assert "is not given for this run" in summary
    assert "withdrawn" in summary.split("56 %")[1][:80]
    docs = (ROOT / "docs" / "results.md").read_text()
    assert "was 56 % at" not in docs and "faster at all six" not in docs


def test_the_way_is_defined_once():
    """The README's "Several GPUs" line and docs/results.md give agent/distributed/session.py's
    definition of the share of the way, written from it."""
    from swizzleperf.agent.distributed.session import WAY_DEFINITION, WAY_NAME
    for make in results_page.TEXTS.values():
        assert WAY_NAME in make() and WAY_DEFINITION in make()


def test_markers_missing_is_said():
    with pytest.raises(ValueError, match="results:nowhere"):
        results_page.render("no markers here", "nowhere", "x")


def test_every_block_names_its_file():
    for (_, name), make in results_page.BLOCKS.items():
        assert "bench/results/" in make(), name


# --------------------------------------------------------------------------- the blocks of issue #44's last bullets
#: (page, block, a figure the block writes, the same figure edited by hand)
HAND_EDITS = [("README.md", "main-job", "1.03x head to head", "1.13x head to head"),
              ("README.md", "rank-gemm", "0.996-1.002 on an H100", "0.996-1.003 on an H100"),
              ("README.md", "eval-suite", "up to 2.2 %", "up to 2 %"),
              ("README.md", "own-kernels", "73 of 78 answered (94 %)", "72 of 78 answered (92 %)"),
              ("README.md", "real-llm", "none of 12 iterations", "none of 13 iterations"),
              ("README.md", "l2-simulator", "for 5 of the other 9", "for 6 of the other 9"),
              ("README.md", "dist-h200", "2.2-4.5x", "2-3x"),
              ("README.md", "overlap-model", "in 19 of 29", "in 20 of 29"),
              ("docs/results.md", "main-job", "| 3.781 ± 0.084 ms |", "| 3.781 ± 0.083 ms |"),
              ("docs/results.md", "rank-gemm", "median 0.998", "median 0.999"),
              ("docs/results.md", "l2-simulator", "26.3 for spmv", "26 for spmv"),
              ("docs/results.md", "eval-suite", "| 3.709 ± 0.117 |", "| 3.709 |"),
              ("docs/results.md", "real-llm", "7 not a permutation", "8 not a permutation"),
              ("docs/results.md", "dist-h200", "91 % of the copy", "92 % of the copy"),
              ("docs/results.md", "dist-h200-losses", "**8 of 18**", "**7 of 18**")]


@pytest.mark.parametrize("page,block,figure,edited", HAND_EDITS, ids=[f"{p}:{b}" for p, b, _, _ in HAND_EDITS])
def test_a_hand_edited_figure_of_each_block_fails_the_check(tmp_path, capsys, page, block, figure, edited):
    _pages(tmp_path)
    text = (ROOT / page).read_text()
    start, end = text.index(f"<!-- results:{block} -->"), text.index(f"<!-- /results:{block} -->")
    assert figure in text[start:end]
    (tmp_path / page).write_text(text[:start] + text[start:end].replace(figure, edited, 1) + text[end:])
    assert results_page.main(["--check"], root=tmp_path) == 1
    assert edited in capsys.readouterr().out


def test_every_marked_block_is_written():
    """No marker pair on the pages that no function writes (a block left to hand editing)."""
    import re
    made = {(page, name) for page, name in {**results_page.BLOCKS, **results_page.TEXTS}}
    for page in {page for page, _ in made}:
        for name in re.findall(r"<!-- results:([\w-]+) -->", (ROOT / page).read_text()):
            assert (page, name) in made, (page, name)


@pytest.fixture
def raw(tmp_path, monkeypatch):
    """A copy of the named files under bench/results/ (relative paths), every path of results_page
    pointed at the copy: edit a raw file there and the functions read the edit."""
    import json

    results = results_page.RESULTS

    def copy(*names):
        for name in names:
            source, target = results / name, tmp_path / name
            target.parent.mkdir(parents=True, exist_ok=True)
            (shutil.copytree if source.is_dir() else shutil.copy)(source, target)
        return tmp_path

    def moved(value):
        if isinstance(value, Path) and value.is_relative_to(results):
            return tmp_path / value.relative_to(results)
        if isinstance(value, dict) and value and all(isinstance(v, Path) for v in value.values()):
            return {k: moved(v) for k, v in value.items()}
        return value

    monkeypatch.setattr(results_page, "ROOT", tmp_path.parent)
    for name, value in list(vars(results_page).items()):
        if moved(value) is not value:
            monkeypatch.setattr(results_page, name, moved(value))
    monkeypatch.setattr(results_page, "RESULTS", tmp_path)
    copy.json = lambda name: json.loads((tmp_path / name).read_text())
    copy.put = lambda name, data: (tmp_path / name).write_text(json.dumps(data))
    copy.edit = lambda name, old, new: (tmp_path / name).write_text(
        (tmp_path / name).read_text().replace(old, new) if old in (tmp_path / name).read_text() else 1 / 0)
    return copy


def test_the_main_job_line_is_its_report(raw):
    raw("main_job_h200")
    report = raw.json("main_job_h200/report_h200.json")
    report["best"]["time_ms"], report["best"]["dram_bytes"] = 3.5, 2.8e9
    raw.put("main_job_h200/report_h200.json", report)
    line = results_page.main_job()
    assert "3.500 ± 0.054 against 3.475 ± 0.047 ms" in line and "10 % fewer DRAM bytes (2.80" in line, line
    raw.edit("main_job_h200/optimize_h200.log", "  expert grouped-m:8", "  expert grouped-m:9")
    with pytest.raises(ValueError, match="grouped-m:8's time alone"):
        results_page.main_job()


def test_the_per_rank_gemm_line_is_its_runs(raw):
    """A run of rank_gemm_hopper.md's table read from its own json: its summary moves the range."""
    raw("rank_gemm_hopper.md", "rank_gemm_hopper")
    run = "rank_gemm_hopper/h100x4_20261126m_replicate/rank_gemm_hopper.json"
    data = raw.json(run)
    (summary,) = data["summary"].values()
    summary["geomean_cublas_over_ours"], summary["below_0_95"] = 1.0027, 2
    raw.put(run, data)
    line = results_page.rank_gemm()
    assert "0.996-1.003 on an H100" in line and "in eight of the ten H100 runs" in line, line
    raw.edit("rank_gemm_hopper.md", "| 9 (commit 09f7bbf", "| 11 (commit 09f7bbf")
    with pytest.raises(ValueError, match="table of runs"):
        results_page.rank_gemm()


def test_the_eval_line_is_its_csv(raw):
    raw("eval-20261122-065525-2bd2.csv", "eval_h200.md", "timing_integrity", "main_job_h200")
    raw.edit("eval-20261122-065525-2bd2.csv", "0.2773759961128235,8.80211591720581e-05",
             "0.2913759961128235,8.80211591720581e-05")
    line = results_page.eval_suite()
    assert "beyond both spreads at 1: gemm" in line and "transpose" not in line.split("; at")[0], line


def test_the_own_kernels_line_is_its_jsons(raw):
    """The GPU table's optimized row, its counts and a tool failure come from its json."""
    raw("user_kernels_h100.json", "tritonbench_g_dev_cpu.json", "gpu_round42_h100")
    name = "gpu_round42_h100/suite_run6_again2_h100.json"
    data = raw.json(name)
    row = next(r for r in data["rows"] if r["outcome"] == "optimized")
    row["speedup"], row["speedup_spread"] = 1.005, 0.010
    data["counts"].update({"tool failure": 1, "timeout": 0})
    raw.put(name, data)
    line = results_page.own_kernels()
    assert "1.005x ± 0.010 over its own order, a tie" in line, line
    assert "**1 tool failure**" in line and "no tool failure**" not in line, line
    cpu = raw.json("tritonbench_g_dev_cpu.json")
    for r in cpu["rows"]:
        r["reason"] = r["reason"].replace("lacks the block pointers", "lacks block pointers")
    raw.put("tritonbench_g_dev_cpu.json", cpu)
    assert "block pointers the installed Triton" not in results_page.own_kernels()


def test_the_real_llm_line_is_its_summary(raw):
    raw("real_llm")
    raw.edit("real_llm/summary.md", "the prompt, 6 with one constant changed, 0 not in the prompt",
             "the prompt, 5 with one constant changed, 1 not in the prompt")
    line = results_page.real_llm()
    assert "1 of its verified candidates its own" in line and "adds nothing" not in line, line
    raw.edit("real_llm/summary.md", "- ranking evidence off:", "- evidence off:")
    with pytest.raises(ValueError, match="evidence-off line"):
        results_page.real_llm()


def test_the_l2_simulator_line_is_its_page(raw):
    raw("simulator_validation.md")
    raw.edit("simulator_validation.md", "| spmv | 3 | 26.3 |", "| spmv | 3 | 4.5 |")
    line = results_page.simulator()
    assert "target for 6 of the other 9 kernels (0.0-4.5 points)" in line and "spmv" not in line, line
    raw.edit("simulator_validation.md", "| kernel | orders | MAE (points) |", "| kernel | orders | MAE |")
    with pytest.raises(ValueError, match="no table with the header"):
        results_page.simulator()


def test_the_dist_h200_line_is_its_jsons(raw):
    """A case that was slower, made faster beyond its spread in the raw rows, leaves the count."""
    raw("dist_h200.md", "dist_h200_2gpu.json", "dist_h200_4gpu.json", "dist_h200_8gpu.json")
    data = raw.json("dist_h200_4gpu.json")
    row = next(r for r in data["rows"] if (r["kernel"], r["problem"], r["pattern"])
               == ("all_gather_gemm", "llama70b-qkv-4k", "push"))
    row["time_ms"] = 0.400
    row["speedup"] = row["baseline_ms"] / row["time_ms"]
    raw.put("dist_h200_4gpu.json", data)
    assert "slower than torch + NCCL in 7**" in results_page.dist_h200()
    assert "**7 of 18**" in results_page.dist_h200_losses()


def test_the_overlap_model_line_is_its_page(raw):
    raw("overlap_model_validation.md")
    raw.edit("overlap_model_validation.md", "| 19 of 29 (66 %) |", "| 18 of 29 (62 %) |")
    assert "called right in 18 of 29" in results_page.overlap_model()
