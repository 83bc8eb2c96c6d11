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


# -- where an app stopped at its time limit was, under the interpreter -------------------------------

#: Calls a program can wait on for another program's write: a ``while`` loop testing one of them spins.
WAITS = ("atomic_cas", "atomic_xchg", "atomic_add", "atomic_or", "atomic_and", "atomic_max", "atomic_min")


def spin_wait(file: str, line: int) -> tuple | None:
    """``(line, call)`` of the first ``while`` loop in the function defined at ``file:line`` whose test
    calls an atomic (:data:`WAITS`) or a volatile ``tl.load``: a program waiting there for another
    program's write; None where there is none (or the source cannot be read)."""
    import ast

    from swizzleperf.sandbox.untrusted import UntrustedInput, read_source
    try:
        tree = ast.parse(read_source(file))
    except (OSError, SyntaxError, ValueError, UntrustedInput):
        return None
    fn = next((n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
               and (n.lineno == line or any(d.lineno == line for d in n.decorator_list))), None)
    for loop in (n for n in ast.walk(fn) if isinstance(n, ast.While)) if fn else ():
        for call in (n for n in ast.walk(loop.test) if isinstance(n, ast.Call)):
            name = call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")
            volatile = name == "load" and any(k.arg == "volatile" and getattr(k.value, "value", False)
                                              for k in call.keywords)
            if name in WAITS or volatile:
                return loop.lineno, f"tl.{name}" + ("(volatile=True)" if volatile else "")
    return None


#: Seconds a launch's programs may not advance, in a kernel with a spin loop, before the app is
#: stopped as waiting for a program the interpreter will never run.
STUCK_S = 60.0


def running(folder) -> list:
    """The hook's ``running-<pid>.json`` records in ``folder`` (at most 8), each checked as data
    (schema.RunningFile); a file that does not fit is left out."""
    from pathlib import Path

    from swizzleperf.agent.capture.schema import CaptureError, RunningFile, read
    records = []
    for path in sorted(Path(folder).glob("running-*.json"))[:8]:
        try:
            records.append(read(path, RunningFile))
        except CaptureError:
            continue
    return records


def spinning(folder) -> bool:
    """Whether a process of the app has been in one program of an interpreted launch for
    :data:`STUCK_S` seconds (its ``running-<pid>.json`` not rewritten: no program started since)
    in a kernel with a spin loop (:func:`spin_wait`)."""
    import time
    return any(time.time() - r["now"] > STUCK_S and r["done"] < max(r["programs"], 1)
               and spin_wait(r["file"], r["line"]) for r in running(folder))


def where_stopped(folder) -> tuple:
    """Where the app's processes were when stopped at their time limit, from the hook's
    ``running-<pid>.json`` files in ``folder``: ``(text, spin)``, ``text`` one clause ("" where no
    process was in an interpreted launch), ``spin`` the text of a refusal where the launch waits in a
    spin loop for a program the interpreter has not run yet (None otherwise)."""
    import time
    from pathlib import Path
    clauses, spin = [], None
    for r in running(folder):
        elapsed = max(0.0, max(r["now"], time.time()) - r["started"])   # read once the app was stopped
        where = f"{r['kernel']} ({Path(r['file']).name}:{r['line']}, grid {'x'.join(map(str, r['grid'])) or '?'})"
        done, programs = r["done"], r["programs"]
        clause = f"it was in {where} for {elapsed:.0f} s, {done} of its {programs} programs started"
        if 0 < done < programs and elapsed > 0:
            clause += (f": Triton's interpreter runs one program at a time, about {elapsed / done:.2g} s each, "
                       f"so this launch alone needs about {elapsed / done * programs:.0f} s on this CPU")
        clauses.append(clause)
        waits = spin_wait(r["file"], r["line"]) if done < programs or programs == 0 else None
        if waits and spin is None:
            spin = (f"{where} waits at line {waits[0]} in a loop on {waits[1]} for a write of another program; "
                    f"Triton's interpreter runs one program at a time, so a program waiting for one it has "
                    f"not run yet never returns (program {max(done, 1)} of {programs} was still waiting after "
                    f"{elapsed:.0f} s); on a GPU the programs run side by side: run the app on a GPU")
    return "; ".join(clauses), spin


# -- where an app died of a signal, from Python's fault handler --------------------------------------

_FATAL = re.compile(r"Fatal Python error: (Segmentation fault|Bus error|Aborted|Floating-point exception)")
_FAULT_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+) in (?P<fn>\S+)', re.M)
_ACCESSES = {"create_masked_load": "a load", "create_load": "a load", "create_masked_store": "a store",
             "create_store": "a store", "create_atomic_rmw": "an atomic", "create_atomic_cas": "an atomic"}


def fatal_signal(log: str, hook_dir: str = "") -> str | None:
    """One line for an app that died of a signal, from the fault handler's dump in its output
    (``PYTHONFAULTHANDLER=1``, most recent call first): the signal, the innermost frame of the app's
    own files (not Python's, a package's or our hook's) and, where the signal came from the
    interpreter's memory access, what that means; None where the output holds no such dump."""
    found = _FATAL.search(log)
    if not found:
        return None
    frames = [m.groupdict() for m in _FAULT_FRAME.finditer(log[found.end():])]
    if not frames:
        return f"{found.group(1)} (no Python frame in its output)"
    own = next((f for f in frames if not _library(f["file"], hook_dir)), None)
    access = next((_ACCESSES[f["fn"]] for f in frames if f["fn"] in _ACCESSES and "triton" in f["file"]), None)
    text = found.group(1)
    if own:
        text += f" in {own['fn']} at {own['file'].rsplit('/', 1)[-1]}:{own['line']}"
    if access:
        text += (f", in {access} of Triton's interpreter: the kernel reached an address outside its tensors "
                 f"(the interpreter reads and writes host memory unchecked; on a GPU the same access reads "
                 f"or writes whatever lies there, or faults)")
    return text


def _library(path: str, hook_dir: str) -> bool:
    return ("site-packages" in path or "dist-packages" in path or path.startswith("<")
            or "/lib/python" in path or bool(hook_dir) and path.startswith(hook_dir))
