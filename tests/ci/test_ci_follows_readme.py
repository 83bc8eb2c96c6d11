"""CI installs the project the way the README says and runs the README's test command (.ci/run)."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def readme_commands() -> list[str]:
    """The commands of the README's set-up block, comments dropped."""
    text = (ROOT / "README.md").read_text()
    block = re.search(r"## Set-up and the two commands\n\n```\n(.*?)```", text, re.DOTALL)
    assert block, "README has no 'Set-up and the two commands' code block"
    return [line.split("#")[0].strip() for line in block.group(1).splitlines() if line.strip()]


def test_ci_runs_the_readmes_install_line_and_test_command():
    install, _main_job, tests = readme_commands()
    ci_lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert install.replace("pip install", "pip install -q", 1) in ci_lines, (install, ci_lines)
    assert tests in ci_lines, (tests, ci_lines)
