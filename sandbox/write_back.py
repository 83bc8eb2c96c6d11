"""Writing a result back into the user's own file (``--in-place``), only if the user has not edited it
since the run read it: the one check behind ``optimize KERNEL --in-place`` (the digest kept in the
run record, so it holds across a kill and ``--resume``) and ``optimize --app ... --in-place`` (the
captured text)."""
from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path


def digest(data: bytes | str) -> str:
    """SHA-256 of a file's text, line endings normalised (``\\r\\n`` and ``\\r`` as ``\\n``, as
    ``Path.read_text`` reads them), so the bytes of a file and the text read from it agree."""
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogateescape")
    return hashlib.sha256(data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")).hexdigest()


def file_digest(path: Path) -> str:
    """``digest`` of the file at ``path``. Raises OSError where it cannot be read."""
    return digest(Path(path).read_bytes())


def write_back(path: Path, expected: str, text: str) -> tuple[bool, str]:
    """Replace the text of ``path`` (a symlink's target) by ``text`` if its digest is still
    ``expected``; atomically (a temporary file beside it, then a rename), its mode kept.

    Returns:
        ``(written, why)``: ``why`` says what happened in a few words for a line of output
        (``"written"``, ``"<path> changed since the run read it"``, ``"<path> cannot be written: ..."``).
    """
    path = Path(path).resolve()
    try:
        if file_digest(path) != expected:
            return False, f"{path} changed since the run read it"
    except OSError as exc:
        return False, f"{path} cannot be read ({exc.strerror or exc})"
    temporary = path.with_name(f".{path.name}.swizzleperf-{os.getpid()}.tmp")
    try:
        temporary.write_text(text)
        shutil.copymode(path, temporary)
        os.replace(temporary, path)
    except OSError as exc:
        try:
            temporary.unlink(missing_ok=True)
        except OSError:
            pass  # the disk is gone too: the message below says why nothing was written
        return False, f"{path} cannot be written ({exc.strerror or exc})"
    return True, "written"
