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


def test_a_figure_edited_by_hand_fails_the_check(tmp_path, capsys):
    """The broken variant: the README with one figure changed between the markers."""
    text = (ROOT / "README.md").read_text()
    start = text.index("<!-- results:hand-bench -->")
    assert "1.12-1.38x" in text[start:]
    (tmp_path / "README.md").write_text(text[:start] + text[start:].replace("1.12-1.38x", "1.12-1.48x", 1))
    assert results_page.main(["--check"], root=tmp_path) == 1
    out = capsys.readouterr().out
    assert "-  push_copy_engine, the fastest pattern at 6 of 6 problems, 1.12-1.48x" in out, out


def test_markers_missing_is_said():
    with pytest.raises(ValueError, match="results:nowhere"):
        results_page.render("no markers here", "nowhere", "x")


def test_every_block_names_its_file():
    for (_, name), make in results_page.BLOCKS.items():
        assert "bench/results/" in make(), name
