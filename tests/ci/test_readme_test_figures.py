""".ci/readme_test_figures.py: the README's test figures come from a pytest log, every count kept."""
import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def figures():
    spec = importlib.util.spec_from_file_location("readme_test_figures", ROOT / ".ci" / "readme_test_figures.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


LOG = """tests/a.py ....
1187 passed, 33 skipped in 1002 s (prose, not pytest's line)
=========== 1190 passed, 1 failed, 33 skipped, 2 warnings in 563.99s (0:09:23) ===========
"""


def test_the_last_summary_line_with_every_count(figures):
    assert figures.last_summary(LOG) == ("1190 passed, 1 failed, 33 skipped, 2 warnings", 563.99)
    assert figures.last_summary("1191 passed, 33 skipped in 42.10s") == ("1191 passed, 33 skipped", 42.1)


def test_a_log_without_a_summary_is_refused(figures):
    with pytest.raises(ValueError, match="no pytest summary line"):
        figures.last_summary("collected 0 items\n")


def test_the_marked_line_is_rewritten_and_nothing_else(figures, tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("# x\n\nbefore <!-- test-figures -->old<!-- /test-figures --> after\n")
    log = tmp_path / "ci.log"
    log.write_text(LOG)
    assert figures.main([str(log), "--where", "CI, 2-core CPU", "--readme", str(readme)]) == 0
    assert readme.read_text() == ("# x\n\nbefore <!-- test-figures -->`pytest -q`: 1190 passed, 1 failed, "
                                  "33 skipped, 2 warnings in 9 min 24 s (CI, 2-core CPU).<!-- /test-figures --> after\n")


def test_a_readme_without_exactly_one_pair_of_markers_is_left_alone(figures, tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("no markers\n")
    log = tmp_path / "ci.log"
    log.write_text(LOG)
    assert figures.main([str(log), "--where", "CI", "--readme", str(readme)]) == 1
    assert readme.read_text() == "no markers\n"
