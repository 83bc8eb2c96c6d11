"""Starting, resuming and finishing one optimization run (what ``swizzleperf optimize`` does)."""
from __future__ import annotations

import ast
import contextlib
import dataclasses
import errno
import hashlib
import os
import secrets
import shutil
import stat
import tempfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Callable

import pydantic
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from swizzleperf import hwspecs
from swizzleperf.agent.capture import capture as _captured  # noqa: F401  a generated --app module's spec: from its data
from swizzleperf.agent.distributed import evaluator as distributed
from swizzleperf.agent.loop.graph import Budget, Loop
from swizzleperf.agent.loop.record import RunRecord, storage_fault, stored_json, stored_options
from swizzleperf.agent.loop.report import build_report, write_outputs
from swizzleperf.agent.proposers.overlap_policy import OverlapPolicy
from swizzleperf.agent.proposers.policy import SearchPolicy
from swizzleperf.agent.verification.candidate import (CandidateError, _assert_only_target_changed, splice,
                                                      target_args, target_source)
from swizzleperf.agent.verification.evaluate import Evaluator
from swizzleperf.agent.verification.load import KernelLoadError, load_spec
from swizzleperf.agent.verification.measure import Measurer
from swizzleperf.agent.verification.verify import Verdict, VerifyConfig
from swizzleperf.kernels.distributed.spec import DistKernelSpec
from swizzleperf.sandbox.redact import MASK, redact
from swizzleperf.sandbox.untrusted import MAX_KERNEL_BYTES, UntrustedInput, read_bounded, read_source
from swizzleperf.sandbox.untrusted import file_kind
from swizzleperf.sandbox.write_back import digest, replace_file, verified_text, write_back

#: How the record's checkpoints are read back: LangGraph's serializer with only its built-in safe
#: types (the loop's state is plain data). Its default rebuilds any ``module.name(args)`` a
#: checkpoint row names, so a planted row would run code on ``--resume`` (#41).
CHECKPOINT_SERDE = JsonPlusSerializer(allowed_msgpack_modules=None)


class RunError(Exception):
    """A run could not start, resume or go on; the message is one line for the user. ``storage``:
    stopped by the record or the disk (locked, full), the run resumable."""

    storage = False


@dataclass
class RunOptions:
    """Everything a run is configured with (stored with the run so that resume reuses it)."""

    kernel: str
    hw: str | None = None
    iterations: int = 8
    plateau: int = 4
    target_speedup: float | None = None
    target_l2: float | None = None
    model: str | None = None
    base_url: str | None = None
    llm_timeout_s: float = 300.0
    temperature: float = 0.2
    context_tokens: int | None = None
    llm_retries: int = 2
    evidence: bool = True    # an LLM's prompt shows the simulator's ranking of known orders
    price_in_per_mtok: float = 0.0
    price_out_per_mtok: float = 0.0
    dtype: str | None = None
    timeout_s: float = 300.0
    use_ncu: bool = True
    in_place: bool = False
    workdir: str = ".swizzleperf"
    world_size: int | None = None
    problem: str | None = None
    kernel_sha256: str | None = None   # of the kernel file's text when the run read it (--in-place)
    kernel_path_bytes: str | None = None   # ``kernel`` losslessly, where it is not UTF-8 text (``lossless_path``)
    time_budget_s: float | None = None   # seconds for the loop in this process (graph.Budget.time_s)
    roof_margin: float | None = 0.03     # stop at the roof (graph.Budget.roof_margin; profiling/roof.py)


@dataclass
class RunOutcome:
    run_id: str
    run_dir: Path
    report: dict
    status: str


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(2)


def start(options: RunOptions, on_event: Callable = lambda k, d: None, proposer=None) -> RunOutcome:
    """A new run of ``options.kernel``; ``proposer`` overrides the one the options select.

    Raises:
        RunError: a full disk, a record locked too long or unusable (``UnusableRecord``: a view, a
            trigger or another object the project never creates) while starting, or the run folder
            not inside ``options.workdir`` once links are followed (``_check_runs_folder``), one
            line; no kernel given (``options.kernel`` None or blank: U03, round twelve, a TypeError
            traceback), one line; also KernelLoadError, UnknownHardwareError from loading the
            kernel and its target.
    """
    if not isinstance(options.kernel, (str, os.PathLike)) or not str(options.kernel).strip():
        raise RunError("no kernel to optimize: give a kernel module (e.g. kernels/gemm.py), or --resume RUN_ID "
                       "to continue a run")
    run_id = new_run_id()
    try:
        kernel_path = Path(options.kernel).resolve()
    except (OSError, RuntimeError) as exc:  # a symlink loop: RuntimeError before Python 3.13, OSError after
        raise KernelLoadError(f"{options.kernel}: cannot be resolved: {exc}") from None
    spec = load_spec(kernel_path)
    source = kernel_path.read_bytes()  # before the builder reads the text it splices into
    options = dataclasses.replace(options, kernel=str(kernel_path), kernel_sha256=digest(source),
                                  kernel_path_bytes=lossless_path(kernel_path))
    target = _resolve_target(options, spec)
    on_event("target", {"name": target.message})
    record = RunRecord(Path(options.workdir))
    run_dir = Path(options.workdir) / "runs" / run_id
    _check_runs_folder(options.workdir, run_dir)
    created = [p for p in (run_dir.parent, run_dir.parent.parent) if not p.exists()]
    # a long name: the evaluator names the run's files after the run folder's copy, whose name is short
    evaluated = (kernel_path if in_folder_name(kernel_path.name) == kernel_path.name
                 else original_path(run_dir, kernel_path.name))
    try:
        _make_run_dir(run_dir, kernel_path.name, source, options.workdir)
        loop = _builder(spec)(options, spec, target, record, run_id, run_dir, on_event, proposer,
                              kernel_path=evaluated)
        record.create_run(run_id, {"kernel": spec.name, "kernel_path": str(kernel_path),
                                   "hardware": target.spec.name, "mode": target.mode,
                                   "proposer": loop.proposer.describe(),
                                   "run_dir": str(run_dir.relative_to(options.workdir))},
                          dataclasses.asdict(options))
    except BaseException as exc:  # a start that fails leaves no run folder behind
        shutil.rmtree(run_dir, ignore_errors=True)
        for folder in created:     # nor the work folder it made for it, if nothing else is there
            with contextlib.suppress(OSError):
                folder.rmdir()
        fault = storage_fault(exc, record.db_path) if isinstance(exc, Exception) else None
        if fault is not None:
            raise RunError(f"{fault}; nothing was started") from None
        raise
    on_event("run", {"name": run_id})
    return _drive(loop, record, run_id, run_dir, target, {}, options, kernel_path)


#: The longest kernel file name, in UTF-8 bytes, that the files of a run folder carry as it is. The
#: longest name a run makes from it (a guarded order's ``<label>_<stem>-guarded_original_<name>``
#: with its ``.config.json``) then stays within the 255 bytes a file system allows a name (#41h: a
#: kernel name of 230 characters was refused as ``candidates/baseline000-baseline_<name>``).
IN_FOLDER_NAME_BYTES = 80


def in_folder_name(name: str) -> str:
    """A kernel file's ``name`` as the files of its run folder carry it: as it is up to
    ``IN_FOLDER_NAME_BYTES`` bytes; a longer one as its stem cut at a character, a dash, the first
    8 hex digits of the SHA-256 of the whole name (two long names stay apart) and its suffix
    (``kkkk...kkkk-1a2b3c4d.py``). A name that is not UTF-8 text (undecodable bytes, which Python
    holds as surrogates) is first written as the record writes it (``redact``: each such byte a
    ``?``), so that the run folder's files are named as the record, the report and a resume (which
    has the record's text) name them (U04, round twelve: the copy ``original_odd<0xff><0xfe>.py``,
    looked for as ``original_odd??.py``)."""
    encoded = name.encode("utf-8", "surrogateescape")
    name = name.encode("utf-8", "replace").decode("utf-8")   # as redact writes it: the same text
    if len(name.encode("utf-8")) <= IN_FOLDER_NAME_BYTES:
        return name
    path = Path(name)
    suffix = path.suffix if len(path.suffix.encode("utf-8", "surrogateescape")) <= 8 else ""
    tag = "-" + hashlib.sha256(encoded).hexdigest()[:8]
    room = IN_FOLDER_NAME_BYTES - len(tag) - len(suffix.encode("utf-8", "surrogateescape"))
    stem = path.stem.encode("utf-8", "surrogateescape")[:room].decode("utf-8", "ignore")
    return stem + tag + suffix


def lossless_path(path: Path | str) -> str | None:
    """``path`` as ``RunOptions.kernel_path_bytes`` keeps it: None where it is UTF-8 text (the
    record keeps it as it is), else the hex digits of its bytes (``os.fsencode``). The record keeps
    text through ``redact``, which writes what UTF-8 cannot encode (a file name's undecodable bytes,
    as surrogates) as ``?``: from that alone a resumed run named another file than the kernel's as
    the one ``--in-place`` writes back to (U04, round twelve; the run folder's files are named from
    the text: ``in_folder_name``). A path no file can have (a lone surrogate the file system's
    encoding does not map to a byte) is None: such a run never starts (no such file)."""
    text = str(path)
    try:
        text.encode("utf-8")
        return None
    except UnicodeEncodeError:
        try:
            return os.fsencode(text).hex()
        except UnicodeEncodeError:
            return None


def stored_kernel_path(run_id: str, options: RunOptions) -> str:
    """The kernel's path of a stored run: ``options.kernel``, or where the run kept it losslessly
    (``lossless_path``), that path, which must read as the stored text once redacted.

    Raises:
        RunError: ``kernel_path_bytes`` not hex digits of a path, or another path than
            ``options.kernel``: one line, nothing read.
    """
    if options.kernel_path_bytes is None:
        return options.kernel
    try:
        raw = bytes.fromhex(options.kernel_path_bytes)
    except ValueError:
        raw = b"\0"
    path = os.fsdecode(raw)
    if b"\0" in raw or not raw or redact(path) != options.kernel:
        raise RunError(f"run {run_id}'s record keeps its kernel's path as {options.kernel_path_bytes[:80]!r}, which "
                       f"is not the bytes of {options.kernel[:200]}: it is not resumed")
    return path


def original_path(run_dir: Path, kernel: str) -> Path:
    """Where a run folder keeps the kernel's bytes as the run read them (``kernel``: its file)."""
    return Path(run_dir) / f"original_{in_folder_name(Path(kernel).name)}"


def _check_runs_folder(workdir: str, run_dir: Path) -> None:
    """Refuse to make ``run_dir`` (``workdir/runs/<run id>``) where it, or ``workdir/runs``, is
    not inside ``workdir`` once links are followed (W02b: ``runs`` a link to ``/`` put the run folder
    at ``/<run id>``, which ``resume`` then refused as outside); nothing is made or changed.

    Raises:
        RunError: outside, or a link loop that cannot be resolved: one line, as ``resume`` says it.
    """
    try:
        root = Path(workdir).resolve()
        places = [(folder, folder.resolve()) for folder in (run_dir.parent, run_dir)]
    except (OSError, RuntimeError) as exc:   # a link loop: RuntimeError before Python 3.13, OSError after
        raise RunError(f"--workdir {workdir}: cannot make the run folder: its runs folder {run_dir.parent} cannot "
                       f"be resolved ({exc}): give a folder you can write") from None
    for folder, resolved in places:
        if not resolved.is_relative_to(root):
            raise RunError(f"--workdir {workdir}: {str(folder)[:200]} leads to {str(resolved)[:200]}, which is "
                           f"not inside {workdir} (links followed): no run is started there; remove the link or "
                           f"give another --workdir")


def _make_run_dir(run_dir: Path, name: str, source: bytes, workdir: str) -> None:
    """The run's folder with the kernel's original bytes in it (``original_path``; ``name``: the
    kernel's file name).

    Raises:
        RunError: the folder cannot be made (a --workdir that is a link loop, under a file, in
            /proc, not writable) or the copy cannot be written in it (a name the file system
            refuses): one line naming which and why; a full disk stays the OSError that
            ``storage_fault`` names.
    """
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise
        raise RunError(f"--workdir {workdir}: cannot make the run folder {run_dir} "
                       f"({exc.strerror or exc}): give a folder you can write") from None
    original = original_path(run_dir, name)
    try:
        replace_file(original, source)
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise
        raise RunError(f"--workdir {workdir}: cannot write {original.name} into the run folder {run_dir} "
                       f"({exc.strerror or exc})") from None


def resume(run_id: str, workdir: str = ".swizzleperf", on_event: Callable = lambda k, d: None,
           proposer=None, base_url: str | None = None) -> RunOutcome:
    """Continue a killed run from its last checkpoint, with the configuration it started with.
    The record keeps the LLM endpoint without its credentials (``redact``): a run that reached it
    with some needs ``base_url`` again, the same URL once redacted.

    The run folder is data (docs/trust.md): its copy of the kernel is imported only where its
    digest is the one the record keeps (``_verified_original``), and from a private copy of those
    bytes in a folder of its own, never with the run folder on ``sys.path`` (#41h: a module
    planted beside the copy was imported in place of one the agent imports later); its
    candidates folder must hold only regular files and folders (``_check_candidates_folder``).

    Raises:
        UnknownRunError: no such run in ``workdir``.
        RunError: credentials needed and not given, or another endpoint given; the run folder
            outside ``workdir``, its copy of the kernel not the text the run read (or no digest
            of it in the record), its candidates folder holding a link or a named pipe (one line).
    """
    if not isinstance(run_id, str) or not run_id.strip():
        raise RunError("--resume needs a run id (as a run prints it); got an empty one")
    record = RunRecord(Path(workdir))
    row = record.run(run_id)
    options = stored_options(row, RunOptions, workdir=workdir)
    options = dataclasses.replace(options, base_url=_endpoint_again(run_id, options.base_url, base_url),
                                  kernel=stored_kernel_path(run_id, options))
    run_dir = run_dir_of(Path(workdir), row["run_dir"])
    if not run_dir.resolve().is_relative_to(Path(workdir).resolve()):   # its original is imported here
        raise RunError(f"run {run_id}'s folder in the record, {row['run_dir'][:200]}, is not inside {workdir} "
                       f"(links followed): it is not resumed (nothing of it is read)")
    _check_candidates_folder(run_id, run_dir)
    original = original_path(run_dir, options.kernel)
    source = _verified_original(run_id, original, options.kernel_sha256)
    with tempfile.TemporaryDirectory(prefix="swizzleperf-resume-") as private:
        kernel_path = Path(private) / original.name   # the same name: the run's files keep theirs
        kernel_path.write_bytes(source)
        spec = load_spec(kernel_path)   # its folder on sys.path only while it imports (load.folder_on_path)
        target = _resolve_target(options, spec)
        if target.spec.name != row["hardware"] or target.mode != row["mode"]:
            raise RunError(f"run {run_id} was {row['mode']} on {row['hardware']}; here it would be "
                           f"{target.mode} on {target.spec.name}: resume it where it started")
        loop = _builder(spec)(options, spec, target, record, run_id, run_dir, on_event, proposer,
                              kernel_path=kernel_path)
        return _drive(loop, record, run_id, run_dir, target, None, options, Path(options.kernel),
                      reopen=row["status"] in (STALLED, NO_CANDIDATE))


def _verified_original(run_id: str, original: Path, expected: str | None) -> bytes:
    """The bytes of run ``run_id``'s copy of its kernel (``original``, in its run folder): read
    once, at most ``MAX_KERNEL_BYTES``, as a regular file and not through a link, and only where
    their digest is ``expected``, the one the record keeps of the kernel as the run read it
    (#41h: code appended to the copy ran in the agent's process on ``--resume``).

    Raises:
        RunError: no digest in the record, the copy missing, a link, not a regular file, too
            long, or not the text the run read: one line naming the file; nothing of it imported.
    """
    if expected is None:
        raise RunError(f"run {run_id}'s record keeps no digest of its kernel, so its copy {original} cannot be "
                       f"checked: it is not imported and the run is not resumed")
    try:
        if original.is_symlink():
            raise UntrustedInput(f"{original} is a link, not the copy the run wrote")
        data = read_bounded(original, MAX_KERNEL_BYTES, "the run's copy of its kernel")
    except FileNotFoundError:
        raise RunError(f"{original}: no such file: run {run_id} cannot be resumed without its copy of the kernel") \
            from None
    except OSError as exc:
        raise RunError(f"{original} cannot be read ({exc.strerror or exc}): run {run_id} is not resumed") from None
    except UntrustedInput as exc:
        raise RunError(f"{exc}: run {run_id} is not resumed") from None
    if digest(data) != expected:
        raise RunError(f"{original} is not the kernel run {run_id} read (its digest is not the one the record "
                       f"keeps): it is not imported and the run is not resumed")
    return data


#: The most entries of a resumed run's candidates folder that are looked at (a run writes a few
#: per iteration); a folder holding more is refused.
MAX_CANDIDATE_ENTRIES = 100_000


def _check_candidates_folder(run_id: str, run_dir: Path) -> None:
    """Run ``run_id``'s candidates folder, which the resumed loop goes on writing into and reading
    from, as a run leaves it: a folder of its own (not a link out of the run folder), holding
    regular files and folders only: no link (which a writer of a name there would follow out of
    the run folder), no named pipe or device (which a reader would wait on) (#41h).

    Raises:
        RunError: the first entry that is not, named in one line; a folder of more than
            ``MAX_CANDIDATE_ENTRIES`` entries.
    """
    folder = run_dir / "candidates"
    try:
        mode = folder.lstat().st_mode
    except FileNotFoundError:
        return
    except OSError as exc:
        raise RunError(f"{folder} cannot be read ({exc.strerror or exc}): run {run_id} is not resumed") from None
    if not stat.S_ISDIR(mode):
        raise RunError(f"{folder} is {file_kind(mode)}, not the folder the run made: run {run_id} is not resumed")
    seen = 0
    for parent, folders, files in os.walk(folder):   # links are listed, never followed
        for name in folders + files:
            seen += 1
            if seen > MAX_CANDIDATE_ENTRIES:
                raise RunError(f"{folder} holds more than {MAX_CANDIDATE_ENTRIES} entries: run {run_id} is not resumed")
            path = Path(parent) / name
            mode = path.lstat().st_mode
            if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                raise RunError(f"{path} is {file_kind(mode)}, not a regular file or folder the run wrote: "
                               f"run {run_id} is not resumed")


def _endpoint_again(run_id: str, stored: str | None, given: str | None) -> str | None:
    """The base URL a resumed run uses: ``given`` (which must be the stored one once redacted),
    else the stored one, unless credentials were taken out of it."""
    if given is not None:
        if redact(given) != stored:
            raise RunError(f"--base-url {redact(given)} is not the endpoint run {run_id} used ({stored})")
        return given
    if stored and MASK in stored:
        raise RunError(f"run {run_id} used the LLM endpoint {stored}, whose credentials are not kept in the "
                       f"record: give the same --base-url again with --resume")
    return stored


def run_dir_of(workdir: Path, stored: str) -> Path:
    """A run's folder from its record: stored relative to the workdir (older records: absolute,
    or relative to the directory the run was started from)."""
    path = Path(stored)
    if path.is_absolute() or not (workdir / path).exists():
        return path
    return workdir / path


def _resolve_target(options: RunOptions, spec):
    """The target of a run: the detected GPU or ``--hw``, measured or simulated; for a
    distributed kernel, its world size decides (distributed.resolve_target)."""
    if isinstance(spec, DistKernelSpec):
        return distributed.resolve_target(options.hw, options.world_size)
    return hwspecs.resolve_target(options.hw)


def _builder(spec) -> Callable:
    return _build_dist_loop if isinstance(spec, DistKernelSpec) else _build_loop


def _build_dist_loop(options, spec, target, record, run_id, run_dir, on_event, proposer,
                     kernel_path: Path | None = None) -> Loop:
    """The loop over overlap configurations of a distributed kernel (agent/distributed/evaluator.py)."""
    kernel_path = kernel_path or Path(options.kernel)
    from swizzleperf.agent.distributed.problems import ProblemError, resolve
    try:
        problem, sizes = resolve(spec, options.problem, target.world_size, target.spec.compute_units)
    except ProblemError as exc:
        raise RunError(str(exc)) from None
    dtype = options.dtype or spec.dtypes[0]
    if dtype not in spec.dtypes:
        raise RunError(f"--dtype must be one of {', '.join(spec.dtypes)}, got {dtype}")
    evaluator = distributed.DistEvaluator(
        kernel_path=kernel_path, module_source=read_source(kernel_path), spec=spec,
        problem_name=problem, world_size=target.world_size, target=target,
        candidates_dir=run_dir / "candidates", timeout_s=options.timeout_s, dtype=dtype, problem_sizes=sizes)
    budget = Budget(iterations=options.iterations, plateau=options.plateau,
                    target_speedup=options.target_speedup, target_l2=None, time_s=options.time_budget_s)
    from swizzleperf.profiling.overlap_model import OverlapModelError
    try:
        evaluator.baseline_prediction()  # a spec the overlap model cannot price fails here
    except OverlapModelError as exc:
        raise RunError(f"cannot simulate {spec.name} on {target.spec.name}: {exc}") from None
    if proposer is None:
        proposer = (distributed_llm(options, evaluator) if options.model
                    else OverlapPolicy(evaluator))
    return Loop(spec=spec, target=target, evaluator=evaluator, proposer=proposer, record=record,
                run_id=run_id, budget=budget, on_event=on_event)


def distributed_llm(options: RunOptions, evaluator):
    from swizzleperf.agent.proposers.overlap_llm import OverlapLLMProposer
    try:
        return OverlapLLMProposer(evaluator, options.model, **chat_settings(options))
    except ValueError as exc:  # an option out of range (ChatSettings says which)
        raise RunError(str(exc)) from None


def chat_settings(options: RunOptions) -> dict:
    """The ``chat.ChatSettings`` fields a run's options give (besides the model)."""
    return dict(base_url=options.base_url, deadline_s=options.llm_timeout_s, temperature=options.temperature,
                context_tokens=options.context_tokens, retries=options.llm_retries,
                price_in_per_mtok=options.price_in_per_mtok, price_out_per_mtok=options.price_out_per_mtok)


def _build_loop(options, spec, target, record, run_id, run_dir, on_event, proposer,
                kernel_path: Path | None = None) -> Loop:
    kernel_path = kernel_path or Path(options.kernel)
    source = read_source(kernel_path)
    dtype = options.dtype or spec.dtypes[0]
    if dtype not in spec.dtypes:
        raise RunError(f"--dtype must be one of {', '.join(spec.dtypes)}, got {dtype}")
    device = "cuda" if target.mode == "measured" else "cpu"
    measurer = Measurer(spec, target, dtype=dtype, use_ncu=options.use_ncu,
                        probe=_stored_probe(Path(options.workdir), target, on_event))
    evaluator = Evaluator(kernel_path=kernel_path, module_source=source, target_name=spec.rewrite_target,
                          arg_names=target_args(source, spec.rewrite_target),
                          candidates_dir=run_dir / "candidates",
                          verify_config=VerifyConfig(device=device, dtype=dtype, timeout_s=options.timeout_s),
                          measurer=measurer)
    budget = Budget(iterations=options.iterations, plateau=options.plateau,
                    target_speedup=options.target_speedup, target_l2=options.target_l2,
                    time_s=options.time_budget_s, roof_margin=options.roof_margin)
    try:
        measurer.trace  # built now: a kernel that cannot be traced fails before the run starts
    except Exception as exc:
        raise RunError(f"no memory-access trace for {spec.name}: {exc} (give its KernelSpec an access "
                       f"model, trace=...)") from None
    proposer = proposer or _proposer(options, evaluator, measurer, target)
    return Loop(spec=spec, target=target, evaluator=evaluator, proposer=proposer, record=record,
                run_id=run_id, budget=budget, on_event=on_event)


def _stored_probe(workdir: Path, target, on_event: Callable) -> dict | None:
    """The dispatch probe kept in ``workdir`` for the target's GPU (``swizzleperf hw --probe``),
    or None; one that cannot be used is reported and left out, never stopping the run."""
    from swizzleperf.profiling import dispatch_probe, l2sim
    path = dispatch_probe.stored_path(workdir, target.spec.name)
    if not path.exists():
        return None
    try:
        stored = dispatch_probe.load(path)
        l2sim.placement(1, target.spec, 1, stored)  # the spec's partition count, SMs in range
    except (dispatch_probe.ProbeError, ValueError) as exc:
        on_event("target", {"name": f"{exc}: the simulator places programs by the spec instead"})
        return None
    on_event("target", {"name": f"the simulator places programs as the dispatch probe measured ({path})"})
    return stored


def _proposer(options: RunOptions, evaluator: Evaluator, measurer: Measurer, target):
    if options.model:
        from swizzleperf.agent.proposers.llm import LLMProposer
        try:
            return LLMProposer(options.model, evidence=options.evidence, **chat_settings(options))
        except ValueError as exc:  # an option out of range (ChatSettings says which)
            raise RunError(str(exc)) from None
    wave, aspect = evaluator.catalog_shape()
    expert = evaluator.expert()   # evaluated before the loop: not proposed again
    return SearchPolicy(arg_names=evaluator.arg_names, wave=wave, aspect=aspect,
                        score=evaluator.predict_many, known=[expert[1]] if expert else [])


#: The status of a run that stopped because its proposer produced nothing several times in a row
#: (an endpoint down): not finished, resumable; --resume asks the proposer again.
STALLED = "stalled"
#: The status of a run that went to its end without a single candidate from its proposer (every
#: proposal NO_CANDIDATE: a model that never gave a usable reply); resumable like a stalled run.
NO_CANDIDATE = "no candidate"


def _no_candidate_at_all(state: dict) -> bool:
    proposals = [a for a in state.get("history", []) if a.get("kind") == "candidate"]
    return bool(proposals) and all(a.get("verdict") == "NO_CANDIDATE" for a in proposals)


#: The requests table's INTEGER columns (agent/loop/record.py).
_INTEGER_REQUEST_COLUMNS = ("iteration", "n", "max_tokens", "prompt_tokens", "completion_tokens", "prompt_detail",
                            "tools_tokens")


def _request_rows(record: RunRecord, run_id: str) -> list:
    """The run's requests to an LLM (record.py's ``requests`` rows, in the order sent), NULL as None
    (not NaN) and the INTEGER columns as ints (a column with a NULL reads as floats: 3, not 3.0)."""
    frame = record.requests(run_id)
    rows = frame.astype(object).where(frame.notna(), None).to_dict("records")
    for row in rows:
        for name in _INTEGER_REQUEST_COLUMNS:
            if isinstance(row.get(name), float) and row[name].is_integer():
                row[name] = int(row[name])
    return rows


def _write_transcript(record: RunRecord, run_id: str, run_dir: Path) -> None:
    """``transcript.jsonl`` in the run folder: every request to the LLM (prompt, raw reply, finish
    reason, time, tokens and their source), one JSON object a line; none for a run without LLM.

    Raises:
        OSError: it cannot be written (``replace_file``)."""
    import json
    requests = _request_rows(record, run_id)
    if not requests:
        return
    lines = []
    for row in requests:
        row["messages"] = stored_json(row.pop("messages_json"), "messages_json")
        row["tool_calls"] = stored_json(row.pop("tool_calls_json"), "tool_calls_json")
        lines.append(json.dumps(row) + "\n")
    replace_file(run_dir / "transcript.jsonl", "".join(lines).encode("utf-8"))   # a link there replaced (#41h)


def _drive(loop: Loop, record: RunRecord, run_id: str, run_dir: Path, target, initial,
           options: RunOptions, user_file: Path, reopen: bool = False) -> RunOutcome:
    """Run the graph to its end (or to an interruption); the report is written in every case.
    ``reopen``: a stalled run, whose graph ended for want of candidates, proposes again.

    Raises:
        RunError: a defect of ours (``internal error``, the traceback in error.log), or the record
            locked too long or the disk full (the run saved up to its last finished step); on a
            resume, a checkpoint that does not fit (``_readable_checkpoint``) or names a file to
            run that is not the verified one (``_unverified_files``); one line.
    """
    config = {"configurable": {"thread_id": run_id}, "recursion_limit": 10_000}
    status, failure, graph, signal_name = "interrupted", None, None, None
    connection = record.connect(record.wait_s)   # checked and bounded as every connection to the record
    if initial is None:  # a resume: a checkpoint that cannot be read stops it in one line, nothing rewritten
        state = _readable_checkpoint(loop, connection, config, record, run_id)
        unverified = _unverified_files(state, run_dir, loop.mode == "measured")
        if unverified:
            connection.close()
            raise RunError(redact(f"run {run_id} is not resumed: {' '.join(unverified.split())[:400]} (a file the "
                                  f"resumed loop would run must be the one verified; its folder and report are as "
                                  f"they were)"))
    try:
        graph = loop.build(SqliteSaver(connection, serde=CHECKPOINT_SERDE))
        if reopen:
            graph.update_state(config, {"stop_reason": "", "proposer_failures": 0}, as_node="reflect")
        graph.invoke(initial, config)
        status = "finished"
    except KeyboardInterrupt as exc:   # Ctrl-C, or SIGTERM (a time limit): the report says so
        signal_name = str(exc) or "SIGINT"
        raise
    except Exception as exc:
        failure = _failure(exc, record, run_id, run_dir)
        status = "interrupted" if failure.storage else "failed"
    finally:
        try:
            report = _finish(loop, graph, config, record, run_id, run_dir, target, options, user_file, status,
                             signal_name)
        except Exception as exc:  # only a storage fault is kept; anything else is re-raised
            if storage_fault(exc, record.db_path) is None:
                raise
            failure = failure or _failure(exc, record, run_id, run_dir)
        finally:
            connection.close()
    if failure is not None:
        raise failure
    return RunOutcome(run_id, run_dir, report, report["status"])


#: The types of the loop's state (agent/loop/graph.py ``LoopState``) a resumed checkpoint must have.
_STATE_TYPES = {"iteration": int, "history": list, "baseline": dict, "expert": (dict, type(None)), "best": dict,
                "analysis": str, "pending": (dict, type(None)), "stale": int, "proposer_failures": int,
                "stop_reason": str, "confirmation": dict}

#: A figure of an attempt: a finite number (no NaN, no infinity: a formatted line or a ranking
#: would carry it); ``_Amount`` also not negative (bytes, spreads, durations), ``_Divisor`` above
#: zero (a time that speedups and ratios are divided by: ``torch + NCCL / time``).
_Finite = Annotated[float, pydantic.Field(strict=True, allow_inf_nan=False)]
_Amount = Annotated[float, pydantic.Field(strict=True, allow_inf_nan=False, ge=0)]
_Divisor = Annotated[float, pydantic.Field(strict=True, allow_inf_nan=False, gt=0)]
_Text = pydantic.StrictStr | None
#: A value of a distributed configuration (agent/distributed/evaluator.py's ``DistCandidate.to_json``).
_Knob = pydantic.StrictStr | pydantic.StrictBool | pydantic.StrictInt | _Finite | None
#: A roof's rate or share: a number, None, or the text "not measured" of a simulated run's roof.
_RoofFigure = _Finite | pydantic.StrictStr | None


def _fields_together(figures: pydantic.BaseModel, rules: dict) -> None:
    """Each figure of ``rules`` that is set comes with the figures the rule names (the report and
    the loop format them together: a time with its spread, #41h).

    Raises:
        ValueError: the first figure whose companions are missing."""
    for figure, companions in rules.items():
        if getattr(figures, figure, None) is None:
            continue
        missing = [c for c in companions if getattr(figures, c, None) is None]
        if missing:
            raise ValueError(f"{figure} is set without {', '.join(missing)}")


class _ProfileEntry(pydantic.BaseModel):
    """One figure of a filtered profile (profiling/profiler.py's ``filtered``): what the prompt's
    profile table prints of it."""
    model_config = pydantic.ConfigDict(extra="allow")
    rank: pydantic.StrictInt
    name: pydantic.StrictStr
    value: _Finite | list[_Finite]
    unit: pydantic.StrictStr
    source: pydantic.StrictStr
    meaning: pydantic.StrictStr


class _Peaks(pydantic.BaseModel):
    """The hardware peaks a roof compares with (profiling/roof.py's ``peaks``)."""
    model_config = pydantic.ConfigDict(extra="allow")
    flops: _Amount | None = None
    dram_bytes_per_s: _Amount | None = None
    l2_bytes_per_s: _Amount | None = None
    flops_field: _Text = None
    flops_what: _Text = None
    spec: _Text = None


class _Roof(pydantic.BaseModel):
    """An attempt's roof (profiling/roof.py's ``measured`` / ``predicted``): what report.md's Roof
    section, the loop's stop at the roof and the prompt compute with. A measured roof's rates and
    shares are numbers (or None); its share of the roof and most gain come together."""
    model_config = pydantic.ConfigDict(extra="allow")
    status: pydantic.StrictStr
    peaks: _Peaks
    binding: _Text = None
    binding_why: _Text = None
    line: _Text = None
    dram_source: _Text = None
    l2_source: _Text = None
    tflops: _RoofFigure = None
    gbps: _RoofFigure = None
    l2_gbps: _RoofFigure = None
    roof_share: _RoofFigure = None
    max_gain: _RoofFigure = None
    shares: dict[str, _RoofFigure] | None = None
    floor_ms: _Amount | None = None
    time_ms: _Divisor | None = None
    dram_bytes: _Amount | None = None
    l2_bytes: _Amount | None = None
    flops: _Amount | None = None
    min_bytes: _Amount | None = None

    @pydantic.model_validator(mode="after")
    def _measured_figures(self):
        if self.status != "measured":
            return self
        rates = {"tflops": self.tflops, "gbps": self.gbps, "l2_gbps": self.l2_gbps, "roof_share": self.roof_share,
                 "max_gain": self.max_gain, **{f"shares.{k}": v for k, v in (self.shares or {}).items()}}
        text = next((k for k, v in rates.items() if isinstance(v, str)), None)
        if text:
            raise ValueError(f"a measured roof's {text} is text, not a number")
        if (self.roof_share is None) != (self.max_gain is None):
            raise ValueError("a measured roof's roof_share and max_gain come together")
        if self.binding is None:
            raise ValueError("a measured roof names no binding roof")
        return self


class _Figures(pydantic.BaseModel):
    """The figures of an attempt's ``metrics`` (or of a contender of the final head-to-head) that
    the loop and the report compute with (numbers), print (text) or read as structures (a
    distributed configuration, a predicted interval, a roof, a profile); the rest of the mapping
    is kept as it is. A time comes with its spread, torch + NCCL's paired figures together, a
    prediction with its parts (what report.py, agent/distributed/measured.py's ``answer``, the
    console and the prompts format together)."""
    model_config = pydantic.ConfigDict(extra="allow")
    l2_hit_rate: _Finite | None = None
    l2_read_hit_rate: _Finite | None = None
    predicted_l2_hit_rate: _Finite | None = None
    time_ms: _Divisor | None = None
    time_spread_ms: _Amount | None = None
    dram_bytes: _Amount | None = None
    predicted_dram_bytes: _Amount | None = None
    predicted_cross_domain_bytes: _Amount | None = None
    tflops: _Finite | None = None
    predicted_time_ms: _Amount | None = None
    predicted_compute_ms: _Amount | None = None
    predicted_comm_ms: _Amount | None = None
    predicted_hidden_share: _Finite | None = None
    predicted_lower_bound_ms: _Amount | None = None
    predicted_breakdown: dict[str, _Finite] | None = None
    predicted_interval_ms: list[_Divisor] | None = None
    predicted_extrapolated: pydantic.StrictBool | None = None
    calibrated_predicted_ms: _Amount | None = None
    torch_nccl_predicted_ms: _Amount | None = None
    torch_nccl_ms: _Divisor | None = None
    torch_nccl_spread_ms: _Amount | None = None
    paired_gain_ms: _Finite | None = None
    paired_spread_ms: _Amount | None = None
    model_error_raw: _Finite | None = None
    model_error_calibrated_before: _Finite | None = None
    committed_ms: _Divisor | None = None
    committed_spread_ms: _Amount | None = None
    host_ms: _Amount | None = None
    setup_s: _Amount | None = None
    rounds_ms: list[_Divisor] | None = None
    config: dict[str, _Knob] | None = None
    l2_source: _Text = None
    time_source: _Text = None
    dram_source: _Text = None
    predicted_source: _Text = None
    predicted_notes: _Text = None
    predicted_extrapolated_why: _Text = None
    committed_source: _Text = None
    verified_at: _Text = None
    notes: _Text = None
    profile: list[_ProfileEntry] | None = None
    roof: _Roof | None = None

    @pydantic.field_validator("predicted_interval_ms")
    @classmethod
    def _an_interval(cls, interval):
        if interval and (len(interval) != 2 or interval[0] > interval[1]):
            raise ValueError("an interval is [low, high], low <= high")
        return interval

    @pydantic.model_validator(mode="after")
    def _together(self):
        _fields_together(self, {
            "time_ms": ("time_spread_ms",),
            "torch_nccl_ms": ("time_ms", "torch_nccl_spread_ms", "paired_gain_ms", "paired_spread_ms"),
            "paired_gain_ms": ("paired_spread_ms", "torch_nccl_ms", "time_ms"),
            "predicted_time_ms": ("predicted_compute_ms", "predicted_comm_ms", "predicted_hidden_share")})
        return self


class _Metrics(_Figures):
    """An attempt's ``metrics``: as ``_Figures``; its L2 hit rate and DRAM bytes, where given, are
    numbers (a simulated run ranks its orders by them: agent/verification/lessons.py's ``score``)."""
    l2_hit_rate: _Finite = None
    dram_bytes: _Amount = None


class _Contender(_Figures):
    """A contender of the final head-to-head (agent/verification/lessons.py's ``confirmed_summary``),
    which the report compares with torch + NCCL and the answer may name."""
    kind: _Text = None
    name: _Text = None
    iteration: pydantic.StrictInt | None = None


class _Confirmation(pydantic.BaseModel):
    """The final head-to-head of a measured run (agent/loop/graph.py's ``confirm``)."""
    model_config = pydantic.ConfigDict(extra="allow")
    rounds: pydantic.StrictInt | None = None
    contenders: list[_Contender] | None = None
    note: _Text = None
    error: _Text = None
    final: dict | None = None


_Count = Annotated[int, pydantic.Field(strict=True, ge=0)]


class _Attempt(pydantic.BaseModel):
    """One attempt of the loop's state (the baseline, the expert, the best, one of the history):
    what is computed with or printed from it. Its name, kind, source, verdict and reason, where
    given, are text (the proposers and the prompts read them as such); a verified attempt of the
    baseline, the expert, the best or the history has its metrics (the attempt in flight gets them
    when it is measured)."""
    model_config = pydantic.ConfigDict(extra="allow")
    iteration: _Count | None = None
    name: pydantic.StrictStr = None
    kind: pydantic.StrictStr = None
    source: pydantic.StrictStr = None
    verdict: pydantic.StrictStr = None
    reason: pydantic.StrictStr = None
    rationale: _Text = None
    lesson: _Text = None
    kernel_file: _Text = None
    kernel_sha256: _Text = None
    diff: _Text = None
    mapping: _Text = None
    permutation_scope: _Text = None
    predicted: dict | None = None
    prompt_tokens: _Count | None = None
    completion_tokens: _Count | None = None
    cost_usd: _Amount | None = None
    metrics: _Metrics | None = None


def _check_attempts(state: dict) -> None:
    """Each attempt of a checkpointed state against :class:`_Attempt`, its final head-to-head
    against :class:`_Confirmation`.

    Raises:
        TypeError: the first that does not fit, naming where it is and the field."""
    places = [(key, state.get(key), _Attempt) for key in ("baseline", "expert", "best", "pending")]
    places += [(f"attempt {i + 1} of its history", a, _Attempt) for i, a in enumerate(state.get("history", []))]
    places.append(("confirmation", state.get("confirmation"), _Confirmation))
    for where, value, model in places:
        if not value:
            continue
        try:
            model.model_validate(value)
        except pydantic.ValidationError as exc:
            first = exc.errors()[0]
            field = ".".join(str(p) for p in first["loc"])
            raise TypeError(f"its {where}: {field}: {first['msg']}") from None
        if model is _Attempt and where != "pending" and value.get("verdict") == Verdict.PASS.value \
                and not isinstance(value.get("metrics"), dict):
            raise TypeError(f"its {where}: metrics: a verified attempt without its metrics")


def _unverified_files(state: dict, run_dir: Path, measured: bool) -> str | None:
    """Why the resumed loop cannot run a file its checkpoint names, or None. The attempt in flight
    (``pending``, verified: it is measured next) and, in a measured run, every verified attempt
    (the final head-to-head times them again: agent/loop/graph.py's ``confirm``) must name a
    kernel file in the run folder whose text is still the verified one (``verified_text``: the
    digest kept with the attempt, read bounded as a regular file), and the attempt in flight a
    mapping that is a regular file in the run folder: a file planted or changed since it was
    verified is never run or read (#41h)."""
    places = [("attempt in flight", state.get("pending"))]
    if measured:
        places += [(key, state.get(key)) for key in ("baseline", "expert", "best")]
        places += [(f"attempt {i + 1} of its history", a) for i, a in enumerate(state.get("history", []))]
    for where, attempt in places:
        if not attempt or attempt.get("verdict") != Verdict.PASS.value or not attempt.get("kernel_file"):
            continue
        text, why = verified_text(Path(attempt["kernel_file"]), attempt.get("kernel_sha256"), run_dir)
        if text is None:
            return f"its {where}: {why}"
        mapping = attempt.get("mapping") if where == "attempt in flight" else None
        if mapping is not None and not _regular_file_in(Path(mapping), run_dir):
            return f"its {where}: its mapping {mapping} is not a regular file in the run folder {run_dir}"
    return None


def _regular_file_in(path: Path, folder: Path) -> bool:
    """Whether ``path`` is a regular file (not a link) inside ``folder`` (resolved)."""
    try:
        return (path.resolve().is_relative_to(Path(folder).resolve())
                and stat.S_ISREG(path.lstat().st_mode))
    except (OSError, RuntimeError, ValueError):
        return False


def _readable_checkpoint(loop: Loop, connection, config: dict, record: RunRecord, run_id: str) -> dict:
    """Read run ``run_id``'s last checkpoint once before resuming it; returns its state, every
    attempt and figure in it of the types and bounds the loop and the report compute with
    (``_check_attempts``).

    Raises:
        RunError: it cannot be read (a row of the record rewritten: bytes that are not msgpack, a
            type the serializer refuses, such as ``pickle``, a state of another shape), one line
            naming the record; or the record is locked or the disk full (``storage``). The
            connection is closed then."""
    try:
        state = loop.build(SqliteSaver(connection, serde=CHECKPOINT_SERDE)).get_state(config).values
        for key, kind in _STATE_TYPES.items():
            if key in state and not isinstance(state[key], kind):
                raise TypeError(f"its {key} is {type(state[key]).__name__}")
            if kind is int and state.get(key, 0) < 0:
                raise TypeError(f"its {key} is negative")
        if not all(isinstance(a, dict) for a in state.get("history", [])):
            raise TypeError("an attempt of its history is not a mapping")
        _check_attempts(state)
        return state
    except Exception as exc:
        connection.close()
        fault = storage_fault(exc, record.db_path)
        if fault is not None:
            error = RunError(redact(f"{fault}; continue it with --resume {run_id}"))
            error.storage = True
            raise error from None
        detail = " ".join(f"{type(exc).__name__}: {exc}".split())[:200]
        raise RunError(redact(f"the run record {record.db_path} holds a checkpoint of run {run_id} that cannot "
                              f"be read ({detail}): the run cannot be resumed (its folder and report are as "
                              f"they were)")) from None


def _failure(exc: Exception, record: RunRecord, run_id: str, run_dir: Path) -> RunError:
    """The one line for what stopped a run: a storage fault (the run resumable), a name the file
    system refuses, else a defect (its traceback in the run folder's error.log)."""
    fault = storage_fault(exc, record.db_path)
    if fault is not None:
        error = RunError(redact(f"{fault}; the run is saved up to its last finished step: continue it with "
                                f"--resume {run_id}"))
        error.storage = True
        return error
    if isinstance(exc, OSError) and exc.errno == errno.ENAMETOOLONG:   # the cause is known: no traceback
        error = RunError(redact(f"the file system refuses a name of the run, {str(exc.filename)[:300]} "
                                f"({exc.strerror}); the run is saved: --resume {run_id}"))
        error.storage = False
        return error
    log = run_dir / "error.log"
    try:
        replace_file(log, redact(traceback.format_exc()).encode("utf-8", "backslashreplace"))
    except OSError:
        log = "the traceback could not be written"
    error = RunError(redact(f"internal error: {type(exc).__name__}: {exc} (traceback in {log}; the run is saved: "
                            f"--resume {run_id})"))
    error.storage = False
    return error


def _finish(loop: Loop, graph, config: dict, record: RunRecord, run_id: str, run_dir: Path, target,
            options: RunOptions, user_file: Path, status: str, signal_name: str | None = None) -> dict:
    """The report (report.json, report.md, best kernel, transcript), ``--in-place`` where asked,
    the run's row closed; returns the report. A run cut short by ``signal_name`` says so in its
    stop reason, with what it had done: its figures and answer are those measured before."""
    state = graph.get_state(config).values if graph is not None else {}
    if status == "finished" and state.get("proposer_failures", 0) >= loop.budget.max_proposer_failures:
        status = STALLED
    elif status == "finished" and _no_candidate_at_all(state):
        status = NO_CANDIDATE
    row = record.run(run_id)
    answer = (state.get("best") or {}).get("kernel_file")
    report = build_report(state, row, target.message, loop.evaluator.report_extra(answer),
                          requests=_request_rows(record, run_id))
    report.update(status=status, run_dir=str(run_dir))
    if signal_name and not state.get("stop_reason"):
        report["stop_reason"] = (f"cut short by {signal_name} (a time limit such as `timeout`, or Ctrl-C) after "
                                 f"{state.get('iteration', 0)} of {loop.budget.iterations} iterations, the final "
                                 f"head-to-head not run: the figures and the answer are from what was measured "
                                 f"before; continue it with --resume {run_id}")
    best = state.get("best") or {}
    if options.in_place and status == "finished" and best.get("kind") == "candidate":
        try:
            report["in_place"] = _write_back(user_file, best, options, run_dir, loop.spec.rewrite_target)
        except Exception as exc:   # nothing is written after a failed check: the run's result stands (#41e)
            report["in_place"] = redact(f"not written: the best kernel could not be checked ({type(exc).__name__}: "
                                        f"{' '.join(str(exc).split())[:200]}); its patch is {run_dir / 'best.diff'}")
    try:
        write_outputs(run_dir, report, state.get("best"), in_folder_name(Path(options.kernel).name))
        _write_transcript(record, run_id, run_dir)
    except OSError as exc:   # a full disk, a name in the way: the record still closes the run with its result
        report["outputs_error"] = redact(
            f"the run folder's files were not all written ({type(exc).__name__}: {' '.join(str(exc).split())[:200]}); "
            f"the record holds the run: --resume {run_id} writes them again")
    record.finish_run(run_id, status, state.get("stop_reason") or report["stop_reason"] or "interrupted")
    return report


def _write_back(user_file: Path, best: dict, options: RunOptions, run_dir: Path, target: str) -> str:
    """``--in-place``: the best kernel into the user's file, only if unchanged since the run read
    it (the digest in the record; a run recorded without one: not written), only the
    text that was verified (the candidate file's digest kept with the attempt), and only a text
    that is the user's file with its rewrite target ``target`` (the run's spec's, as loaded)
    replaced by a checked one (``_outside_target``: what the record and the run folder, rewritten
    together, cannot forge). One line."""
    expected = options.kernel_sha256
    if expected is None:   # every run keeps it since #41; a resume without it is refused (_verified_original)
        return (f"not written: the run record keeps no digest of {user_file} as the run read it; its patch is "
                f"{run_dir / 'best.diff'}")
    text, why = verified_text(Path(best["kernel_file"]), best.get("kernel_sha256"), run_dir)
    written = False
    if text is not None:
        written, why = write_back(user_file, expected, text, lambda original: _outside_target(original, text, target))
    if written:
        return f"wrote the best kernel ({best.get('name')}) into {user_file}"
    if text is None:   # nor is it copied into the run folder (report.write_outputs reads it the same way)
        return f"not written: {why}; its patch is {run_dir / 'best.diff'}"
    return (f"not written: {why}; the best kernel is {run_dir / in_folder_name(user_file.name)} and its patch "
            f"{run_dir / 'best.diff'}")


def _outside_target(original: str, text: str, name: str) -> str | None:
    """Why ``text`` is not a kernel a run of ``original`` can have verified, or None. ``name``: the
    run's rewrite target, as its spec was loaded (a spec may name it through a variable, #41e: read
    again from the source, it would be the default). Every candidate file (a proposal, a catalog
    order, a distributed configuration's swizzle, the guarded kernel of an order not proven on
    every grid) is ``candidate.splice(original, target, canonical)``: the module as the run read it
    with its rewrite target replaced by the canonical text of a target that passes the static
    check; nothing else, no import, no helper, no comment. So ``text`` must compare equal to
    ``original`` on the syntax tree outside the target, its target must pass that same check, and
    splicing it into ``original`` must give ``text`` again to the character (no comment or layout
    the builder does not write). A best file planted in the run folder, named in the record with
    its own digest (#41), is refused unless it is such a kernel. A tree too deep for Python to
    parse or walk is refused in the same one line (#41e), never a traceback."""
    try:
        changed = ast.parse(text)
        kept = ast.parse(original)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return "the best kernel does not parse"
    try:
        _assert_only_target_changed(kept, changed, name)
    except CandidateError:
        return f"the best kernel differs from your kernel outside its rewrite target {name!r}"
    except (RecursionError, MemoryError) as exc:
        return f"the best kernel cannot be compared with your kernel ({type(exc).__name__})"
    try:
        rebuilt = splice(original, name, target_source(text, name))
    except CandidateError as exc:
        return f"the best kernel's {name} fails the candidates' static check ({exc})"
    except (RecursionError, MemoryError) as exc:
        return f"the best kernel's {name} cannot be checked ({type(exc).__name__})"
    if rebuilt != text:
        return (f"the best kernel is not your kernel with only {name} replaced as candidates are "
                f"(text the candidate builder does not write)")
    return None
