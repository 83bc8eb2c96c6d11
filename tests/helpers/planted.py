"""What a hostile process plants where a run writes a file (#41): a dangling link, a link to a
file of the user's, a named pipe."""
from __future__ import annotations

import os
from pathlib import Path

#: The kinds ``plant`` makes, as the tests name them.
PLANTED_KINDS = ["a dangling link", "a link to a file", "a named pipe"]


def plant(kind: str, path: Path, victim: Path) -> None:
    """Make ``kind`` (one of ``PLANTED_KINDS``) at ``path``; a link points to ``victim``, which
    holds "precious" for "a link to a file"."""
    if kind == "a dangling link":
        path.symlink_to(victim)
    elif kind == "a link to a file":
        victim.write_text("precious\n")
        path.symlink_to(victim)
    else:
        os.mkfifo(path)
