"""Every relative link of README.md and docs/*.md resolves: ``[text](path)`` and ``[text](path#anchor)``
name a file or folder of the repository, relative to the page (a result moved, a page renamed or
a folder left behind fails here, with the page, the line and the target). Links to the web
(``https:``, ``mailto:``) and to an anchor of the same page are not checked."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
#: ``[text](target)`` and ``[text](target "title")``, not images' remote sources; targets in backticks
#: or code blocks are not links.
LINK = re.compile(r"\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
FENCE = re.compile(r"^\s*(```|~~~)")


def links(page: Path) -> list:
    """``[(line number, target)]`` of a page's relative links, outside fenced code blocks."""
    out, fenced = [], False
    for number, line in enumerate(page.read_text().splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if fenced:
            continue
        for target in LINK.findall(re.sub(r"`[^`]*`", "", line)):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I) or target.startswith("#"):
                continue
            out.append((number, target))
    return out


@pytest.mark.parametrize("page", PAGES, ids=[p.relative_to(ROOT).as_posix() for p in PAGES])
def test_every_relative_link_resolves(page):
    missing = [f"{page.relative_to(ROOT)}:{number}: {target}" for number, target in links(page)
               if not (page.parent / target.split("#")[0].split("?")[0]).exists()]
    assert not missing, "links to nothing:\n" + "\n".join(missing)


def test_the_link_reader_finds_links_and_skips_code():
    page = ROOT / "README.md"
    assert links(page), "README.md has no relative link: the reader is broken"
