"""Starting, resuming and finishing one optimization run (what ``swizzleperf optimize`` does)."""
from __future__ import annotations

import ast
import contextlib
import dataclasses
import secrets
import shutil
import sqlite3
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

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
from swizzleperf.agent.verification.verify import VerifyConfig
from swizzleperf.kernels.distributed.spec import DistKernelSpec
from swizzleperf.sandbox.redact import MASK, redact
from swizzleperf.sandbox.untrusted import read_source
from swizzleperf.sandbox.write_back import digest, verified_text, write_back

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
        RunError: a full disk or a record locked too long while starting (one line); also
            KernelLoadError, UnknownHardwareError from loading the kernel and its target.
    """
    run_id = new_run_id()
    try:
        kernel_path = Path(options.kernel).resolve()
    except (OSError, RuntimeError) as exc:  # a symlink loop: RuntimeError before Python 3.13, OSError after
        raise KernelLoadError(f"{options.kernel}: cannot be resolved: {exc}") from None
    spec = load_spec(kernel_path)
    source = kernel_path.read_bytes()  # before the builder reads the text it splices into
    options = dataclasses.replace(options, kernel=str(kernel_path), kernel_sha256=digest(source))
    target = _resolve_target(options, spec)
    on_event("target", {"name": target.message})
    record = RunRecord(Path(options.workdir))
    run_dir = Path(options.workdir) / "runs" / run_id
    created = [p for p in (run_dir.parent, run_dir.parent.parent) if not p.exists()]
    try:
        _make_run_dir(run_dir, kernel_path.name, source, options.workdir)
        loop = _builder(spec)(options, spec, target, record, run_id, run_dir, on_event, proposer)
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


def _make_run_dir(run_dir: Path, name: str, source: bytes, workdir: str) -> None:
    """The run's folder with the kernel's original bytes in it.

    Raises:
        RunError: the folder cannot be made or written (a --workdir that is a link loop, under a
            file, in /proc, not writable: one line); a full disk stays the OSError that
            ``storage_fault`` names.
    """
    import errno
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / f"original_{name}").write_bytes(source)
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise
        raise RunError(f"--workdir {workdir}: cannot make the run folder {run_dir} "
                       f"({exc.strerror or exc}): give a folder you can write") from None


def resume(run_id: str, workdir: str = ".swizzleperf", on_event: Callable = lambda k, d: None,
           proposer=None, base_url: str | None = None) -> RunOutcome:
    """Continue a killed run from its last checkpoint, with the configuration it started with.
    The record keeps the LLM endpoint without its credentials (``redact``): a run that reached it
    with some needs ``base_url`` again, the same URL once redacted.

    Raises:
        UnknownRunError: no such run in ``workdir``.
        RunError: credentials needed and not given, or another endpoint given (one line).
    """
    record = RunRecord(Path(workdir))
    row = record.run(run_id)
    options = stored_options(row, RunOptions, workdir=workdir)
    options = dataclasses.replace(options, base_url=_endpoint_again(run_id, options.base_url, base_url))
    run_dir = run_dir_of(Path(workdir), row["run_dir"])
    if not run_dir.resolve().is_relative_to(Path(workdir).resolve()):   # its original is imported here
        raise RunError(f"run {run_id}'s folder in the record, {row['run_dir'][:200]}, is not inside {workdir} "
                       f"(links followed): it is not resumed (nothing of it is read)")
    original = run_dir / f"original_{Path(options.kernel).name}"
    spec = load_spec(original)
    target = _resolve_target(options, spec)
    if target.spec.name != row["hardware"] or target.mode != row["mode"]:
        raise RunError(f"run {run_id} was {row['mode']} on {row['hardware']}; here it would be "
                       f"{target.mode} on {target.spec.name}: resume it where it started")
    loop = _builder(spec)(options, spec, target, record, run_id, run_dir, on_event, proposer,
                          kernel_path=original)
    return _drive(loop, record, run_id, run_dir, target, None, options, Path(options.kernel),
                  reopen=row["status"] in (STALLED, NO_CANDIDATE))


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


def _write_transcript(record: RunRecord, run_id: str, run_dir: Path) -> None:
    """``transcript.jsonl`` in the run folder: every request to the LLM (prompt, raw reply, finish
    reason, time, tokens and their source), one JSON object a line; none for a run without LLM."""
    import json
    frame = record.requests(run_id)
    if frame.empty:
        return
    with open(run_dir / "transcript.jsonl", "w") as out:
        for row in frame.astype(object).where(frame.notna(), None).to_dict("records"):  # NULL -> null, not NaN
            row["messages"] = stored_json(row.pop("messages_json"), "messages_json")
            row["tool_calls"] = stored_json(row.pop("tool_calls_json"), "tool_calls_json")
            out.write(json.dumps(row) + "\n")


def _drive(loop: Loop, record: RunRecord, run_id: str, run_dir: Path, target, initial,
           options: RunOptions, user_file: Path, reopen: bool = False) -> RunOutcome:
    """Run the graph to its end (or to an interruption); the report is written in every case.
    ``reopen``: a stalled run, whose graph ended for want of candidates, proposes again.

    Raises:
        RunError: a defect of ours (``internal error``, the traceback in error.log), or the record
            locked too long or the disk full (the run saved up to its last finished step); one line.
    """
    config = {"configurable": {"thread_id": run_id}, "recursion_limit": 10_000}
    status, failure, graph, signal_name = "interrupted", None, None, None
    connection = sqlite3.connect(record.db_path, check_same_thread=False, timeout=record.wait_s)
    if initial is None:  # a resume: a checkpoint that cannot be read stops it in one line, nothing rewritten
        _readable_checkpoint(loop, connection, config, record, run_id)
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

_Figure = pydantic.StrictFloat | pydantic.StrictInt | None
_Text = pydantic.StrictStr | None


class _Metrics(pydantic.BaseModel):
    """The figures of an attempt's ``metrics`` that the loop and the report compute with (numbers)
    or print (text); the rest of the mapping is kept as it is."""
    model_config = pydantic.ConfigDict(extra="allow")
    l2_hit_rate: _Figure = None
    time_ms: _Figure = None
    time_spread_ms: _Figure = None
    dram_bytes: _Figure = None
    predicted_l2_hit_rate: _Figure = None
    predicted_cross_domain_bytes: _Figure = None
    tflops: _Figure = None
    predicted_time_ms: _Figure = None
    calibrated_predicted_ms: _Figure = None
    torch_nccl_ms: _Figure = None
    torch_nccl_spread_ms: _Figure = None
    paired_gain_ms: _Figure = None
    paired_spread_ms: _Figure = None
    committed_ms: _Figure = None
    committed_spread_ms: _Figure = None
    host_ms: _Figure = None
    l2_source: _Text = None
    time_source: _Text = None
    dram_source: _Text = None
    predicted_source: _Text = None
    notes: _Text = None


class _Attempt(pydantic.BaseModel):
    """One attempt of the loop's state (the baseline, the expert, the best, one of the history):
    what is computed with or printed from it."""
    model_config = pydantic.ConfigDict(extra="allow")
    iteration: pydantic.StrictInt | None = None
    name: _Text = None
    kind: _Text = None
    source: _Text = None
    verdict: _Text = None
    reason: _Text = None
    rationale: _Text = None
    lesson: _Text = None
    kernel_file: _Text = None
    kernel_sha256: _Text = None
    diff: _Text = None
    mapping: _Text = None
    permutation_scope: _Text = None
    predicted: dict | None = None
    prompt_tokens: pydantic.StrictInt | None = None
    completion_tokens: pydantic.StrictInt | None = None
    cost_usd: _Figure = None
    metrics: _Metrics | None = None


def _check_attempts(state: dict) -> None:
    """Each attempt of a checkpointed state against :class:`_Attempt`.

    Raises:
        TypeError: the first that does not fit, naming where it is and the field."""
    places = [(key, state.get(key)) for key in ("baseline", "expert", "best", "pending")]
    places += [(f"attempt {i + 1} of its history", a) for i, a in enumerate(state.get("history", []))]
    for where, attempt in places:
        if not attempt:
            continue
        try:
            _Attempt.model_validate(attempt)
        except pydantic.ValidationError as exc:
            first = exc.errors()[0]
            field = ".".join(str(p) for p in first["loc"])
            raise TypeError(f"its {where}: {field}: {first['msg']}") from None


def _readable_checkpoint(loop: Loop, connection, config: dict, record: RunRecord, run_id: str) -> None:
    """Read run ``run_id``'s last checkpoint once before resuming it.

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
        if not all(isinstance(a, dict) for a in state.get("history", [])):
            raise TypeError("an attempt of its history is not a mapping")
        _check_attempts(state)
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
    """The one line for what stopped a run: a storage fault (the run resumable), else a defect."""
    fault = storage_fault(exc, record.db_path)
    if fault is not None:
        error = RunError(redact(f"{fault}; the run is saved up to its last finished step: continue it with "
                                f"--resume {run_id}"))
        error.storage = True
        return error
    log = run_dir / "error.log"
    try:
        log.write_text(redact(traceback.format_exc()))
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
    report = build_report(state, row, target.message, loop.evaluator.report_extra(answer))
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
    write_outputs(run_dir, report, state.get("best"), Path(options.kernel).name)
    _write_transcript(record, run_id, run_dir)
    record.finish_run(run_id, status, state.get("stop_reason") or report["stop_reason"] or "interrupted")
    return report


def _write_back(user_file: Path, best: dict, options: RunOptions, run_dir: Path, target: str) -> str:
    """``--in-place``: the best kernel into the user's file, only if unchanged since the run read
    it (the digest in the record; a run recorded before digests: its original copy), only the
    text that was verified (the candidate file's digest kept with the attempt), and only a text
    that is the user's file with its rewrite target ``target`` (the run's spec's, as loaded)
    replaced by a checked one (``_outside_target``: what the record and the run folder, rewritten
    together, cannot forge). One line."""
    expected = options.kernel_sha256
    if expected is None:
        expected = digest((run_dir / f"original_{user_file.name}").read_bytes())
    text, why = verified_text(Path(best["kernel_file"]), best.get("kernel_sha256"), run_dir)
    written = False
    if text is not None:
        written, why = write_back(user_file, expected, text, lambda original: _outside_target(original, text, target))
    if written:
        return f"wrote the best kernel ({best.get('name')}) into {user_file}"
    if text is None:   # nor is it copied into the run folder (report.write_outputs reads it the same way)
        return f"not written: {why}; its patch is {run_dir / 'best.diff'}"
    return (f"not written: {why}; the best kernel is {run_dir / user_file.name} and its patch "
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
