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
