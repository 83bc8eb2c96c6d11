"""Write the README's test count and time from a real pytest log, never by hand.

    python .ci/readme_test_figures.py CI.log --where "CI's bash .ci/run, 2-core CPU, 2026-12-06"

reads the last pytest summary line of the log ("1191 passed, 33 skipped in 563.99s (0:09:23)", as
`pytest -q` prints it, with or without the ===== frame) and rewrites the one line between the
`<!-- test-figures -->` and `<!-- /test-figures -->` markers of README.md. Every count the line
names is kept (failed, errors and xfailed too): the README says what the run said. Exits 1, README
unchanged, when the log has no summary line or the README has not exactly one pair of markers.
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

START, END = "<!-- test-figures -->", "<!-- /test-figures -->"
_OUTCOME = r"\d+ (?:passed|failed|skipped|errors?|xfailed|xpassed|deselected|warnings?)"
SUMMARY = re.compile(rf"((?:{_OUTCOME})(?:, {_OUTCOME})*) in ([0-9.]+)s\b")  # pytest writes "in 563.99s"


def last_summary(log: str) -> tuple[str, float]:
    """The counts ("1191 passed, 33 skipped") and seconds of the log's last summary line."""
    found = None
    for line in log.splitlines():
        match = SUMMARY.search(line)
        if match:
            found = (match.group(1), float(match.group(2)))
    if found is None:
        raise ValueError("no pytest summary line ('N passed, M skipped in S s') in the log")
    return found


def minutes(seconds: float) -> str:
    """563.99 -> '9 min 24 s'; 42.0 -> '42 s'."""
    whole = round(seconds)
    return f"{whole // 60} min {whole % 60} s" if whole >= 60 else f"{whole} s"


def figures_line(counts: str, seconds: float, where: str) -> str:
    return f"{START}`pytest -q`: {counts} in {minutes(seconds)} ({where}).{END}"


def rewrite(readme: str, line: str) -> str:
    """README with the marked line replaced; ValueError unless exactly one pair of markers."""
    pattern = re.compile(re.escape(START) + r".*?" + re.escape(END), re.DOTALL)
    if len(pattern.findall(readme)) != 1:
        raise ValueError(f"README must hold exactly one {START} ... {END} pair, "
                         f"found {len(pattern.findall(readme))}")
    return pattern.sub(lambda _: line, readme)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("log", type=Path, help="a pytest log (CI's output)")
    parser.add_argument("--where", required=True,
                        help="the run's machine and date, e.g. \"CI's bash .ci/run, 2-core CPU, 2026-12-06\"")
    parser.add_argument("--readme", type=Path, default=Path(__file__).resolve().parent.parent / "README.md")
    args = parser.parse_args(argv)
    try:
        counts, seconds = last_summary(args.log.read_text(errors="replace"))
        line = figures_line(counts, seconds, args.where)
        text = rewrite(args.readme.read_text(), line)
    except (OSError, ValueError) as error:
        print(f"readme_test_figures: {error}", file=sys.stderr)
        return 1
    args.readme.write_text(text)
    print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
