"""A user's own kernel with zero glue: ``swizzleperf optimize --app CMD --kernel NAME [--test CMD]``.

``prepare``: capture one launch from the user's command (agent/capture/capture.py), lift the kernel's
program-id -> tile mapping into a rewrite target (agent/capture/lift.py), and generate a kernel module
under ``<workdir>/captures/<kernel>-<hash>/``: a copy of the user's file with the lift applied, the
user's folder put on ``sys.path`` (sibling imports keep working), its relative imports made
absolute where the file is in a package (``from .utils import x`` in ``mylib/ops.py`` becomes
``from mylib.utils import x``, the folder holding ``mylib`` on ``sys.path`` too: the copy lives
outside the package), and a ``KernelSpec`` of the captured launch appended. That module then
runs through the normal ``optimize`` path; ``load_spec`` builds its KernelSpec from the capture's
data without importing it (the user's file as the app left it runs only in the boxed workers).

``finish``: after the run, ``user.diff`` in the run folder is the diff of the *user's own file*
(the call site and the target with the best order), applied to it only with ``--in-place``;
``--test CMD`` runs the user's test command against that patched file, substituted for the user's
module where the test imports it (the capture hook's ``SWIZZLEPERF_SUBSTITUTE``: the test runs in
the user's folder as written, only the kernel module's code is the patched copy); pass or fail
goes into the report.
"""
from __future__ import annotations

import ast
import codecs
import json
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from swizzleperf.agent.capture import capture_hook
from swizzleperf.agent.capture.app_code import app_statements
from swizzleperf.agent.capture.capture import (APP_TIMEOUT_S, TRACE_FALLBACK, Capture, capture, hook_environment,
                                               interpreter_variables, last_line, run_with_hook)
from swizzleperf.agent.capture.lift import Lifted, LiftError, lift
from swizzleperf.agent.capture.lift_common import kernel_function, launched_index, replace_in_lines
from swizzleperf.agent.verification.candidate import CandidateError, splice, unified_diff
from swizzleperf.agent.verification.load import indent_of, load_spec, module_level_functions
from swizzleperf.sandbox.write_back import (_declared_encoding, digest, newline_of, replace_file, source_bytes,
                                            source_lines, source_text, write_back, write_sealed)

# Accepted ||out - ref|| / ||ref|| per output dtype where programs add into the same output with
# tl.atomic_add: their order, which the swizzle changes, reassociates the sums. A few ulps of the
# dtype over sums of a few terms; exactness is the rule everywhere else (a pure swizzle changes no
# arithmetic inside a tile).
ATOMIC_TOLERANCE = {"float64": 1e-12, "float32": 1e-5, "float16": 2e-3, "bfloat16": 1e-2}
TEST_TIMEOUT_S = 1800.0
APP_CODE_LINE = "pass  # swizzleperf: the app's own run (agent/capture/app_code.py), not run when this copy is imported"
#: The generated module's name for the kernel function the app launched (agent/capture/user_kernel.py's
#: ``generated_module``).
LAUNCHED = "_swizzleperf_launched"


@dataclass(frozen=True)
class Prepared:
    """What ``prepare`` made: the capture, the lift, the generated module and the user's file."""

    capture: Capture
    lifted: Lifted
    module_path: Path
    user_file: Path
    tolerance_note: str
    original: str = ""   # the user's file as captured and lifted: user.diff and --in-place are against it
    original_sha256: str = ""   # ``digest`` of its bytes (BOM and encoding as on disk): --in-place checks it
    original_bytes: bytes = b""   # its bytes: user.diff and user_<file> in its encoding, BOM and line endings


def prepare(app: str, kernel: str, workdir: Path, timeout_s: float = APP_TIMEOUT_S) -> Prepared:
    """Capture, lift, generate (see the module docstring).

    Raises:
        CaptureError, LiftError: one line each (the app failed, the kernel was never launched, the
            mapping cannot be lifted...).
    """
    captured = capture(app, kernel, Path(workdir) / "captures", timeout_s)
    user_file = captured.kernel_file
    data = user_file.read_bytes()
    source = read_source(data, user_file)
    lifted = lift(source, kernel, captured.lift_launch(), filename=str(user_file))
    if captured.launch["programs"] % 8 == 0 and lifted.probe_values is None:
        raise LiftError(f"cannot optimize {kernel}: the captured launch has {captured.launch['programs']} "
                        f"programs (a multiple of 8) and no other grid was found at which its mapping is one "
                        f"tile per program, so remaps that are permutations only on multiples of 8 could not "
                        f"be caught; capture a launch whose grid is not a multiple of 8")
    tolerance, note = _tolerance(source, kernel, captured)
    folder = captured.folder
    write_sealed(folder / f"original_{user_file.name}", source)   # the capture folder is for reading only
    write_sealed(folder / "lift.json", json.dumps({
        "target_name": lifted.target_name, "arg_names": lifted.arg_names, "extents": lifted.extents,
        "arg_values": list(lifted.arg_values), "tile_grid": list(lifted.tile_grid),
        "probe_values": list(lifted.probe_values) if lifted.probe_values else None,
        "probe_grid": list(lifted.probe_grid) if lifted.probe_grid else None, "outputs": lifted.outputs,
        "lines": list(lifted.lines), "notes": lifted.notes, "kind": lifted.kind,
        "coordinate_splits": {str(k): v for k, v in lifted.coordinate_splits.items()}, "tolerance": tolerance,
        "tolerance_note": note,
        "user_file": str(user_file)}, indent=1))
    write_sealed(folder / f"lifted_{user_file.name}", lifted.source)
    module_path = folder / user_file.name
    write_sealed(module_path, generated_module(lifted, captured, folder, source))
    load_spec(module_path)   # as the run loads it (from the capture's data): a capture that gives no spec fails here
    return Prepared(captured, lifted, module_path, user_file, note, source, digest(data), data)


def read_source(data: bytes, path: Path) -> str:
    """The text Python reads from the user's file ``data`` (at ``path``): its declared encoding
    (PEP 263), a UTF-8 byte order mark left out, line endings as ``\\n`` (#41, round six: a BOM
    ended in ast.parse, a ``coding: latin-1`` file in a UnicodeDecodeError).

    Raises:
        LiftError: the file does not read in its declared encoding."""
    try:
        return source_text(data).removeprefix("\ufeff")
    except (UnicodeDecodeError, LookupError) as exc:
        raise LiftError(f"{path} does not read in its declared encoding ({exc})") from None


def encoded_like(text: str, data: bytes, diff: bool = False) -> bytes:
    """``text``, the patched text of the user's file ``data`` (``source_bytes``: its declared
    encoding, its UTF-8 byte order mark) or, ``diff``, a diff of it (in ``data``'s declared encoding:
    its own header lines declare none; a BOM, if any, is in the diff's text), with ``data``'s line
    endings (``newline_of``). A character the encoding cannot hold: UTF-8."""
    newline = newline_of(data) if data else "\n"
    if not diff:
        try:
            return source_bytes(text, newline, data.startswith(codecs.BOM_UTF8))
        except ValueError:
            pass
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\n", newline)
    encoding = _declared_encoding(data) if data else "utf-8"
    try:
        return text.encode("utf-8" if encoding == "utf-8-sig" else encoding)
    except (UnicodeEncodeError, LookupError):
        return text.encode("utf-8", "surrogateescape")


def generated_module(lifted: Lifted, captured: Capture, folder: Path, original: str | None = None) -> str:
    """The lifted user file, the user's folder on sys.path first, the launched definition bound to
    ``LAUNCHED`` right after it (a same-named definition before or after it does not stand in),
    a KernelSpec of it appended. Every value of the capture that reaches this text is an
    identifier (its schema, agent/capture/schema.py) or a ``repr``, and comments are one line.
    ``original``: the user's file as lifted (read again where not given)."""
    kernel = captured.launch["kernel"]
    if not (kernel.isidentifier() and lifted.target_name.isidentifier()):   # the schema's check, kept here
        raise LiftError(f"cannot generate a module for kernel {kernel!r}, target {lifted.target_name!r}: "
                        f"not identifiers")
    original = read_source(captured.kernel_file.read_bytes(), captured.kernel_file) if original is None else original
    source = _bind_launched(lifted.source, kernel, launched_index(ast.parse(original), kernel, captured.launch["line"]))
    tree = ast.parse(source)
    body = tree.body
    start = 0
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        start = 1
    while start < len(body) and isinstance(body[start], ast.ImportFrom) and body[start].module == "__future__":
        start += 1
    package, root = package_of(captured.kernel_file)
    lines = source_lines(source)   # as the AST numbers them (#41e)
    replacements = [(n, APP_CODE_LINE) for n in app_statements(tree, needed={LAUNCHED})]   # not run on import
    if package:
        replacements += [(n, ast.unparse(ast.ImportFrom(_absolute(package, n), n.names, 0)))
                         for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level]
    lines = replace_in_lines(lines, replacements)
    at = body[start].lineno - 1 if start < len(body) else len(lines)
    if start < len(body) and getattr(body[start], "decorator_list", None):
        at = min(d.lineno for d in body[start].decorator_list) - 1
    user_folder = str(captured.kernel_file.parent)
    header = (f"import sys as _swizzleperf_sys  # swizzleperf: the user's folder first, for sibling imports\n"
              + "".join(f"if {ascii(f)} not in _swizzleperf_sys.path:\n    _swizzleperf_sys.path.insert(0, {ascii(f)})\n"
                        for f in ([str(root)] if package else []) + [user_folder]))
    # what the app's run had (cuda_on_cpu.py): each shim acts only where it applies (no GPU, or the interpreter)
    header += ("from swizzleperf.agent.capture.cuda_on_cpu import generated_module_shims as _swizzleperf_shims\n"
               "_swizzleperf_shims()  # swizzleperf: libdevice, Triton's driver, Inductor's CUDA names without a GPU; "
               "the interpreter's fixes\n")
    # paths and the app's command as ASCII (escapes): the module is written in the user's file's own
    # encoding (a latin-1 kernel in a folder named in CJK, #41 round ten), which need not hold them
    footer = (f"\n\n# -- swizzleperf: the KernelSpec of the launch of {kernel} captured from `{_ascii_line(captured.launch['app'])}`\n"
              f"# (agent/capture/user_kernel.py; the capture: {_ascii_line(str(folder))}/launch.json, the lift: lift.json)\n"
              f"from swizzleperf.agent.capture.capture import spec_fields as _swizzleperf_spec_fields  # noqa: E402\n"
              f"from swizzleperf.kernels.spec import KernelSpec as _SwizzleperfKernelSpec  # noqa: E402\n\n"
              f"SWIZZLEPERF_SPEC = _SwizzleperfKernelSpec(**_swizzleperf_spec_fields({LAUNCHED}, {ascii(str(folder))}),\n"
              f"                                          rewrite_target={lifted.target_name!r})\n")
    text = "".join(lines[:at]) + header + "".join(lines[at:])
    return text.rstrip("\n") + "\n" + footer


def _bind_launched(source: str, kernel: str, index: int) -> str:
    """``source`` with ``LAUNCHED = <kernel>`` right after the ``index``-th module-level definition
    of ``kernel`` (indented alike): the function object the app launched, whatever the name is
    bound to by the end of the module."""
    func = [n for n in module_level_functions(ast.parse(source)) if n.name == kernel][index]
    lines = source_lines(source)   # as the AST numbers them (#41e)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    binding = f"{indent_of(lines[func.lineno - 1], func.col_offset)}{LAUNCHED} = {kernel}  # swizzleperf: the definition the app launched\n"
    return "".join(lines[:func.end_lineno] + [binding] + lines[func.end_lineno:])


def package_of(path: Path) -> tuple:
    """``(package, root)`` of a Python file: the dotted package its folders' ``__init__.py`` files
    make (``"mylib"`` for ``root/mylib/ops.py``) and the folder holding the top package; ``("",
    folder)`` for a file outside any package (a namespace package, with no ``__init__.py``, counts
    as none)."""
    parts, folder = [], Path(path).resolve().parent
    while (folder / "__init__.py").exists() and folder.parent != folder:
        parts.insert(0, folder.name)
        folder = folder.parent
    return ".".join(parts), folder


def _absolute(package: str, node: ast.ImportFrom) -> str:
    """The absolute module of a relative ``from`` import in a module of ``package``.

    Raises:
        LiftError: the import climbs above the top package."""
    parts = package.split(".")
    if node.level - 1 >= len(parts):
        raise LiftError(f"line {node.lineno}: `{ast.unparse(node)}` reaches above the package {parts[0]}")
    base = parts[:len(parts) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def describe_rewrite(kind: str, file_name: str, lines) -> str:
    """How the kernel was made reorderable, in a few words (the CLI and report.md)."""
    if kind == "remapped":
        return f"program ids remapped from {file_name} line {lines[0]} on (the mapping could not be lifted: see the note)"
    return f"mapping lifted from {file_name} lines {lines[0]}-{lines[1]}"


def _ascii_line(text: str) -> str:
    """``_one_line(text)`` with what is not ASCII as backslash escapes (for a comment of a module
    written in the user's file's encoding)."""
    return _one_line(text).encode("ascii", "backslashreplace").decode("ascii")


def _one_line(text: str) -> str:
    """``text`` for a comment of generated source: one line (every character ``str.splitlines``
    breaks at is whitespace to ``str.split``), other control characters as ``?``."""
    return "".join(c if c.isprintable() else "?" for c in " ".join(text.split()))


def _tolerance(source: str, kernel: str, captured: Capture) -> tuple[float, str]:
    """0 (bitwise) unless the kernel adds with tl.atomic_add into a floating-point output, or a
    replay of the launch did not give the same bits: then the dtype's ATOMIC_TOLERANCE, with why."""
    func = kernel_function(ast.parse(source), kernel, str(captured.kernel_file), captured.launch["line"])
    atomics = [n for n in ast.walk(func) if isinstance(n, ast.Call)
               and ast.unparse(n.func).split(".")[-1] == "atomic_add"]
    outputs = captured.launch["outputs"]
    dtypes = {p["name"]: p["dtype"] for p in captured.launch["params"] + captured.launch.get("descriptor_bases", [])
              if p["kind"] == "tensor"}
    floating = [o for o in outputs if dtypes[o["name"]] in ATOMIC_TOLERANCE]
    unstable = [o["name"] for o in outputs if not o.get("deterministic", True)]
    if not (atomics and floating) and not unstable:
        return 0.0, "bitwise: a swizzle changes which program computes a tile, not the arithmetic inside it"
    dtype = dtypes[(floating or outputs)[0]["name"]]
    tolerance = ATOMIC_TOLERANCE.get(dtype, 1e-5)
    why = (f"the kernel adds with tl.atomic_add (line {atomics[0].lineno}): the order programs add in changes "
           f"with the swizzle" if atomics else f"a replay of the launch changed {', '.join(unstable)}")
    return tolerance, f"relative {tolerance:g} ({dtype}): {why}, so sums are reassociated"


def finish(outcome, prepared: Prepared, in_place: bool, test: str | None,
           test_timeout_s: float = TEST_TIMEOUT_S) -> dict:
    """``user.diff`` (and ``user_<file>``, the patched file) in the run folder, ``--in-place``,
    ``--test``; the summary is added to report.json and report.md and returned. Each file is a new
    one renamed over its name (``replace_file``): a link or a named pipe planted there is replaced,
    never written through or waited on."""
    run_dir = Path(outcome.run_dir)
    best = outcome.report.get("best") or {}
    order = best.get("swizzle_source") or prepared.lifted.target_source
    try:
        patched = splice(prepared.lifted.source, prepared.lifted.target_name, order)
    except CandidateError:   # the best was verified as this very target: a defect of ours if it happens
        patched = prepared.lifted.source
    original = prepared.original or read_source(
        (prepared.capture.folder / f"original_{prepared.user_file.name}").read_bytes(), prepared.user_file)
    data = prepared.original_bytes   # the user's file as captured: its encoding, BOM and line endings
    patched_path = run_dir / f"user_{prepared.user_file.name}"
    replace_file(patched_path, encoded_like(patched, data), 0o444)   # as write_sealed, in the user's file's own bytes
    scope = best.get("permutation_scope")   # proven for all grids, or guarded (agent/verification/prove.py)
    bom = "\ufeff" if data.startswith(codecs.BOM_UTF8) else ""   # a patch of the file's bytes, its BOM on line 1
    replace_file(run_dir / "user.diff", encoded_like(
        (f"swizzleperf: {_one_line(scope)}\n" if scope and order != prepared.lifted.target_source else "")
        + unified_diff(bom + original, bom + patched, _display(prepared.user_file)), data, diff=True))
    summary = {"app": prepared.capture.launch["app"], "kernel": prepared.capture.launch["kernel"],
               "user_file": str(prepared.user_file), "capture": str(prepared.capture.folder),
               "captured": prepared.capture.describe(), "mapping_lines": list(prepared.lifted.lines),
               "rewrite": prepared.lifted.kind,
               "lift_notes": prepared.lifted.notes + _trace_note(prepared.capture.folder),
               "tolerance": prepared.tolerance_note,
               "user_diff": str(run_dir / "user.diff"), "patched_file": str(patched_path),
               "best_is_candidate": best.get("kind") == "candidate", "in_place": None, "test": None}
    if in_place:
        summary["in_place"] = _apply(prepared.user_file, prepared.original_sha256 or digest(original), patched, outcome,
                                     best.get("kind") == "candidate", _unverified(prepared, best, order))
    if test:
        summary["test"] = run_test(test, prepared.user_file, patched_path, run_dir, test_timeout_s)
    _record(run_dir, summary)
    return summary


def _trace_note(folder: Path) -> list:
    """The capture's note of a trace without an access model, where it is a regular file (``_own_text``)."""
    note = _own_text(folder / TRACE_FALLBACK)
    return [note] if note else []


def _display(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return path.name


def _unverified(prepared: Prepared, best: dict, order: str) -> str | None:
    """Why ``order`` is not what the run verified as its best, or None: the generated module with
    ``order`` spliced in must have the digest kept with the best when it was verified (a module or
    an order changed since is refused)."""
    try:
        module = read_source(prepared.module_path.read_bytes(), prepared.module_path)
        verified = digest(splice(module, prepared.lifted.target_name, order))
    except (OSError, CandidateError, LiftError) as exc:
        return f"the verified kernel cannot be rebuilt ({exc})"
    if best.get("kernel_sha256") is None:
        return "the run record has no digest of the verified text (a run recorded before digests were kept)"
    if best.get("kernel_sha256") != verified:
        return (f"the best order spliced into {prepared.module_path} is not the text that was verified "
                f"(changed after verification)")
    return None


def _apply(user_file: Path, expected: str, patched: str, outcome, improved: bool,
           unverified: str | None = None) -> str:
    """``--in-place``: ``patched`` into ``user_file`` if its digest is still ``expected`` (of its
    bytes at the capture), in its encoding, BOM and line endings (``write_back``)."""
    if outcome.status != "finished" or not improved:
        why = "did not finish" if outcome.status != "finished" else "kept the kernel's own order"
        return f"not applied: the run {why}"
    if unverified:
        return f"not applied: {unverified}"
    written, why = write_back(user_file, expected, patched)
    if not written:
        return f"not applied: {why} at the capture (user.diff is against the captured text)"
    return f"applied to {user_file}"


def run_test(command: str, user_file: Path, patched: Path, run_dir: Path, timeout_s: float) -> dict:
    """The user's test command with the patched file executed in place of ``user_file`` wherever the
    test imports it; ``{command, passed, exit_code, log, last_line}``."""
    log = run_dir / "user_test.log"
    with tempfile.TemporaryDirectory(prefix="swizzleperf-test-") as folder:
        env = hook_environment(Path(folder), **{capture_hook.SUBSTITUTE_ENV: json.dumps({str(user_file): str(patched)})},
                               **interpreter_variables())
        try:
            code = run_with_hook(command, env, timeout_s, None, log)
        except subprocess.TimeoutExpired:
            return {"command": command, "passed": False, "exit_code": None, "log": str(log),
                    "last_line": f"did not finish within {timeout_s:.0f} s; stopped"}
    return {"command": command, "passed": code == 0, "exit_code": code, "log": str(log), "last_line": last_line(log)}


def _record(run_dir: Path, summary: dict) -> None:
    """The summary into report.json (``user_kernel``) and a section of report.md, each written anew
    (``replace_file``) over what the loop wrote there; read only where that is still a regular file
    (a link or a named pipe planted since is neither read nor kept)."""
    report = json.loads(_own_text(run_dir / "report.json") or "{}")
    report["user_kernel"] = summary
    lines = ["", "## Your kernel", "", f"- {summary['captured']}",
             f"- {describe_rewrite(summary['rewrite'], Path(summary['user_file']).name, summary['mapping_lines'])}; "
             f"numerics: {summary['tolerance']}",
             f"- the patch to your file: {summary['user_diff']}"
             + ("" if summary["best_is_candidate"] else " (the kernel's own order, lifted: no better order found)")]
    lines += [f"- note: {n}" for n in summary["lift_notes"]]
    if summary["in_place"]:
        lines.append(f"- --in-place: {summary['in_place']}")
    if summary["test"]:
        t = summary["test"]
        lines.append(f"- test `{t['command']}`: {'passed' if t['passed'] else 'FAILED'} "
                     f"(exit {t['exit_code']}; {t['log']})")
    replace_file(run_dir / "report.json", json.dumps(report, indent=2, default=str).encode("utf-8"))
    markdown = _own_text(run_dir / "report.md") + "\n".join(lines) + "\n"
    replace_file(run_dir / "report.md", markdown.encode("utf-8", "backslashreplace"))


def _own_text(path: Path) -> str:
    """The text of ``path`` where it is a regular file (not a link), else ``""``."""
    return path.read_text(encoding="utf-8", errors="replace") if path.is_file() and not path.is_symlink() else ""

