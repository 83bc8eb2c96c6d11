"""Writing a result back into the user's own file (``--in-place``), only if the user has not edited it
since the run read it: the one check behind ``optimize KERNEL --in-place`` (the digest kept in the
run record, so it holds across a kill and ``--resume``) and ``optimize --app ... --in-place`` (the
captured text).

What is written is what was verified (issue #41): a candidate's file in the run folder is written
once, read-only (``write_sealed``), its digest kept with the attempt; at the end the text to write
is read back only through ``verified_text``, which refuses a file whose digest is no longer the
verified one (a line appended to the run folder's copy after verification); and ``write_back``
writes it only where ``check`` (the caller's: agent/loop/run.py) finds it the file as the run read
it with only its rewrite target changed, a target that passes the candidates' static check (a file
planted in the run folder, named in the record with its own digest). Every file a run writes
into its folder goes through ``replace_file``: a new file renamed over the name, so that a link or
a named pipe planted there is replaced, never written through or waited on (#41h)."""
from __future__ import annotations

import codecs
import contextlib
import hashlib
import io
import os
import re
import stat
import tempfile
import tokenize
from pathlib import Path
from typing import Callable

from swizzleperf.sandbox.untrusted import MAX_KERNEL_BYTES, UntrustedInput, read_bounded


#: A line of Python source: up to and with its ``\n``, ``\r\n`` or ``\r``, or the last line without one.
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


def source_lines(text: str) -> list[str]:
    """``text``, Python source, cut into lines as Python counts them, each with its line ending:
    the lines that the AST's ``lineno`` / ``end_lineno`` number. Python ends a line only at
    ``\\n``, ``\\r\\n`` and ``\\r``; ``str.splitlines`` also at ``\\x0b``, ``\\x0c``,
    ``\\x1c``-``\\x1e``, ``\\x85``, ``\\u2028`` and ``\\u2029``, which may stand in a comment
    or a string: cut by ``splitlines``, a module's lines after such a character are numbered one
    off, and text after a form feed in a comment becomes a statement of its own (#41e). Every
    place that maps source positions to text lines uses this."""
    return _LINE.findall(text)


def digest(data: bytes | str) -> str:
    """SHA-256 of a file's text, line endings normalised (``\\r\\n`` and ``\\r`` as ``\\n``, as
    ``Path.read_text`` reads them), so the bytes of a file and the text read from it agree."""
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogateescape")
    return hashlib.sha256(data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")).hexdigest()


def file_digest(path: Path) -> str:
    """``digest`` of the file at ``path``. Raises OSError where it cannot be read."""
    return digest(Path(path).read_bytes())


def _declared_encoding(data: bytes) -> str:
    """The encoding Python reads the source ``data`` in (PEP 263: a coding line, a BOM, else UTF-8)."""
    try:
        return tokenize.detect_encoding(io.BytesIO(data).readline)[0]
    except SyntaxError:
        return "utf-8"


def _is_utf8(encoding: str) -> bool:
    """``encoding`` names UTF-8 (``utf-8``, ``UTF8``, ``utf_8``...)."""
    try:
        return codecs.lookup(encoding).name == "utf-8"
    except LookupError:
        return False


def newline_of(data: bytes) -> str:
    """The line ending of source ``data``: the one most of its lines end with (``"\\r\\n"``,
    ``"\\r"`` or ``"\\n"``; a tie, or no line ending at all, is ``"\\n"``). A file of mixed endings
    is written back with its dominant one: its other lines change bytes, not the text Python reads."""
    crlf = data.count(b"\r\n")
    counts = {"\n": data.count(b"\n") - crlf, "\r\n": crlf, "\r": data.count(b"\r") - crlf}
    return max(counts, key=lambda newline: (counts[newline], newline == "\n"))


def source_bytes(text: str, newline: str = "\n", bom: bool = False) -> bytes:
    """``text``, Python source, as the bytes Python reads back as ``text``: in the encoding its own
    coding line declares (a Latin-1 kernel stays Latin-1: written as UTF-8 under its ``coding:
    latin-1`` line, every non-ASCII character outside the target changed, #41's outside replay),
    each line ending (``\\n``, ``\\r\\n`` or ``\\r`` in ``text``) written as ``newline`` (a CRLF file
    written back as LF changed every line of it, #41's second replay); with ``bom``, a UTF-8 text
    begins with the UTF-8 byte order mark (a file that had one keeps it, #41e: Python reads the
    text without it, so the text alone does not say).

    Raises:
        ValueError: ``text`` holds a character its declared encoding cannot hold.
    """
    head = "".join(source_lines(text)[:2]).encode("utf-8", "surrogateescape")
    encoding = _declared_encoding(head)
    if bom and _is_utf8(encoding):
        encoding = "utf-8-sig"
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if newline != "\n":
        text = text.replace("\n", newline)
    try:
        return text.encode(encoding)
    except (UnicodeEncodeError, LookupError) as exc:
        raise ValueError(f"the text cannot be written in its declared encoding {encoding} ({exc})") from None


def source_text(data: bytes) -> str:
    """The text Python reads from source ``data`` (its declared encoding), line endings as
    ``Path.read_text`` gives them."""
    text = data.decode(_declared_encoding(data))
    return text.replace("\r\n", "\n").replace("\r", "\n")


def replace_file(path: Path, data: bytes, mode: int = 0o644) -> None:
    """Write ``data`` as a new file at ``path`` with ``mode``: written to a temporary file made
    beside it (a new name, never an existing one opened), then renamed over ``path``. Whatever
    stood at ``path`` (a link to a file elsewhere, a named pipe, a device: planted in a run folder,
    #41h) is replaced, never written through or waited on. The one way a run writes into its run
    folder.

    Raises:
        OSError: it cannot be written (a full disk, a name the file system refuses, ``path`` a
            folder); the temporary file is removed and whatever stood at ``path`` is left.

    A folder at ``path`` (planted in a run folder, #41 round nine: a rename cannot replace it, and
    the run's outputs were lost at every resume) is renamed aside to a new name beside it
    (``.swizzleperf-in-the-way-*``), kept, not deleted.
    """
    path = Path(path)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".swizzleperf-", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
            os.fchmod(out.fileno(), mode)
        if path.is_dir() and not path.is_symlink():
            os.rename(path, tempfile.mkdtemp(dir=path.parent, prefix=".swizzleperf-in-the-way-"))
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def write_sealed(path: Path, text: str) -> str:
    """Write ``text`` to a new file at ``path`` (whatever is there replaced: ``replace_file``),
    read-only (0o444): a candidate of the run folder, for reading only. Returns
    ``digest(text)``, to keep with it. Written only in its declared encoding (``source_bytes``):
    a text that encoding cannot hold is refused, never written in other bytes (as UTF-8 under a
    ``coding: latin-1`` line it read back as other text, the mojibake a worker then verified and
    ``--in-place`` refused as "changed after verification": red team #41j, K02; a candidate is
    refused before, by ``candidate.splice``).

    Raises:
        OSError: as ``replace_file``.
        ValueError: ``text`` holds a character its declared encoding cannot hold (nothing written;
            whatever stood at ``path`` is left).
    """
    try:
        data = source_bytes(text)
    except ValueError as exc:
        raise ValueError(f"{path} is not written: {exc}") from None
    replace_file(path, data, 0o444)
    return digest(text)


def verified_text(path: Path, expected: str | None, folder: Path | None = None) -> tuple[str | None, str]:
    """The text of the run folder's file ``path`` if its digest is still ``expected`` (kept when
    it was verified), else ``(None, why)`` in a few words for a line of output. ``folder``: the run
    folder ``path`` must lie in (resolved, links followed): a path the record names outside it is
    never read, whatever digest the record keeps with it (a planted checkpoint, #41). Read as a
    regular file of at most ``MAX_KERNEL_BYTES`` (a named pipe in its place is refused, not waited
    on)."""
    if folder is not None:
        try:
            inside = Path(path).resolve().is_relative_to(Path(folder).resolve())
        except (OSError, RuntimeError, ValueError):
            inside = False
        if not inside:
            return None, f"{path} is not in the run folder {folder} (the record names a file elsewhere)"
    if expected is None:
        return None, (f"{path} has no digest of its verified text in the run record (a run recorded before "
                      f"digests were kept)")
    try:   # bounded, a regular file only: a named pipe planted in the run folder is not waited on (#41h)
        text = source_text(read_bounded(path, MAX_KERNEL_BYTES, "the verified kernel"))
    except OSError as exc:
        return None, f"{path} cannot be read ({exc.strerror or exc})"
    except UntrustedInput as exc:
        return None, f"{path} cannot be read ({exc})"
    except (UnicodeDecodeError, LookupError):
        return None, f"{path} is not the text that was verified (it does not read in its declared encoding)"
    if digest(text) != expected:
        return None, f"{path} is not the text that was verified (it changed after verification)"
    return text, "verified"


def write_back(path: Path, expected: str, text: str,
               check: Callable[[str], str | None] | None = None) -> tuple[bool, str]:
    """Replace the text of ``path`` (a symlink's target) by ``text`` if its digest is still
    ``expected``; atomically (a temporary file beside it, then a rename), its mode, its declared
    encoding, its UTF-8 byte order mark and its line endings kept (``newline_of``: the dominant one
    of a file of mixed endings).
    ``check``: given the file's text, once its digest is found ``expected`` (the text the run read),
    why ``text`` may not replace it, or None; nothing is written where it gives a reason.

    Returns:
        ``(written, why)``: ``why`` says what happened in a few words for a line of output
        (``"written"``, ``"<path> changed since the run read it"``, ``"<path> cannot be written: ..."``,
        ``check``'s reason).
    """
    path = Path(path).resolve()
    try:
        original = path.read_bytes()
    except OSError as exc:
        return False, f"{path} cannot be read ({exc.strerror or exc})"
    if digest(original) != expected:
        return False, f"{path} changed since the run read it"
    if check is not None:
        try:
            refused = check(source_text(original))
        except (UnicodeDecodeError, LookupError):
            refused = f"{path} does not read in its declared encoding"
        if refused:
            return False, refused
    try:   # a temporary file of a short name beside it (a long kernel name stays writable), then a rename
        replace_file(path, source_bytes(text, newline_of(original), original.startswith(codecs.BOM_UTF8)),
                     stat.S_IMODE(path.stat().st_mode))
    except (OSError, ValueError) as exc:
        return False, f"{path} cannot be written ({getattr(exc, 'strerror', None) or exc})"
    return True, "written"
