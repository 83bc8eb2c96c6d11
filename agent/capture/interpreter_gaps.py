"""What the installed Triton lacks when an app fails under its interpreter (issue #42): one line
naming the construct, the Triton versions that have it, and what to install.

Known gaps, each with how it was checked:

- ``tl.make_block_ptr`` / ``tl.advance`` (block pointers): removed in Triton 3.9
  (triton-lang/triton#10833, merged 2026-07-15; 3.9.0's ``triton/language/core.py`` raises
  "Block pointers have been removed in favor of the tensor descriptor API", at compile time and
  under the interpreter alike). Present in 3.8.0 (``triton/language/core.py`` emulates them with
  pointer arithmetic, ``class _block_ptr``) and in 3.7.1 (the interpreter's
  ``create_make_block_ptr`` / ``create_advance``): read in both wheels from PyPI.
- ``tl.inline_asm_elementwise`` and ``extern_elementwise`` (libdevice calls): no Triton's
  interpreter runs them (3.9.0's ``runtime/interpreter.py`` raises "not supported in interpreter
  mode"); they need a GPU.
- a builtin the interpreter does not swap for its own (3.9.0 leaves ``tl.extra.cuda.libdevice.pow``
  as it is: the call raises "Did you forget to add @triton.jit ?"): the call named from the
  traceback, the installed version said; which other versions run it is not known here.
- any other ``triton.language`` attribute the installed Triton does not have: named, with the
  installed version.
"""
from __future__ import annotations

import re

BLOCK_POINTERS = ("the block pointers of tl.make_block_ptr / tl.advance, removed in Triton 3.9 "
                  "(triton-lang/triton#10833); Triton 3.8.0 and earlier have them (3.8.0 emulates them, "
                  "3.7.1's interpreter runs them): pip install \"triton==3.8.0\" to run this app on a CPU")
_KNOWN = (
    ("Block pointers have been removed", BLOCK_POINTERS),
    ("inline_asm not supported in interpreter mode",
     "tl.inline_asm_elementwise, which no Triton's interpreter runs: this app's kernel needs a GPU"),
    ("extern_elementwise not supported in interpreter mode",
     "an extern_elementwise call (libdevice), which no Triton's interpreter runs: this app's kernel needs a GPU"),
)
_UNPATCHED = "Did you forget to add @triton.jit ?"
_MISSING_ATTRIBUTE = re.compile(r"module 'triton\.language(?:\.[\w.]+)?' has no attribute '(\w+)'")


_FRAME = re.compile(r'File "([^"]+)", line (\d+)')


def traceback_frames(log: str) -> list:
    """``[(file, line), ...]`` of every traceback frame in ``log``, outermost first (``line`` as text)."""
    return _FRAME.findall(log)


def app_frame(log: str) -> str | None:
    """``FILE:LINE`` of the innermost traceback frame in ``log`` outside installed packages (where
    the app's code used the construct), else None."""
    frames = [(f, n) for f, n in traceback_frames(log) if "site-packages" not in f and "dist-packages" not in f
              and not f.startswith("<")]
    return f"{frames[-1][0].rsplit('/', 1)[-1]}:{frames[-1][1]}" if frames else None


def missing_construct(log: str, triton_version: str | None) -> str | None:
    """The line for a construct the installed Triton (or its interpreter) lacks that ``log`` (the
    app's output) failed on, else None; where the traceback shows the app's own frame, the line
    names it (``at kernel.py:42``)."""
    for marker, line in _KNOWN:
        if marker in log:
            where = app_frame(log[:log.index(marker)])
            return f"the installed Triton ({triton_version or '?'}) lacks {line}" + (f" (used at {where})" if where else "")
    if _UNPATCHED in log:   # a builtin the interpreter did not swap for its own: the call is named in the traceback
        calls = [line.strip() for line in log[:log.index(_UNPATCHED)].splitlines()
                 if "tl." in line or "libdevice" in line]
        call = f"`{calls[-1][:120]}`" if calls else "a builtin of the kernel"
        return (f"the installed Triton's interpreter ({triton_version or '?'}) cannot run {call}: a builtin it "
                f"does not patch under TRITON_INTERPRET=1 (Triton raises 'Did you forget to add @triton.jit ?'); "
                f"this kernel needs a GPU or another Triton")
    found = _MISSING_ATTRIBUTE.search(log)
    if found:
        return (f"the installed Triton ({triton_version or '?'}) has no tl.{found.group(1)}: install the "
                f"Triton version the app was written for")
    return None
