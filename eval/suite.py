"""``swizzleperf eval``: the optimizer over the bundled kernels, one run each, then one table per eval
(CSV and markdown) and its plots under ``WORKDIR/results/`` (or ``--out``). A killed eval resumes where it stopped:
finished kernels are not redone, an interrupted kernel's run continues from its checkpoint. With
``gpus`` > 1 the kernels are spread over worker processes, one per GPU (``eval/workers.py``); a
kernel that fails is recorded as failed with its reason, and the others go on.

What the record holds is data (#41): an eval's stored options are read within ``MAX_OPTIONS_CHARS``
and checked against ``StoredEvalOptions`` before a resume believes them (a row that does not fit is
one line, the eval cannot be resumed, and the row is left as it was); a run's report.json is read
within ``MAX_REPORT_BYTES`` and checked against ``ReportFigures``, and one that does not fit is its
kernel's row, marked unreadable with the reason, while the other rows go on."""
from __future__ import annotations

import json
import os
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Callable

import pandas as pd
import pydantic

from swizzleperf import sandbox
from swizzleperf.agent.loop import run
from swizzleperf.agent.loop.record import RunRecord, UnknownRunError
from swizzleperf.agent.loop.report import shown_name, tokens_source
from swizzleperf.eval import evals_table, workers
from swizzleperf.eval.evals_table import kernel_status, set_status
from swizzleperf.sandbox import untrusted
from swizzleperf.sandbox.redact import MASK, redact, redact_all

KERNELS_DIR = Path(__file__).resolve().parent.parent / "kernels"
KERNELS = ("gemm", "elementwise", "layernorm", "softmax", "spmv", "transpose", "stencil2d",
           "black_scholes", "fdtd2d", "smith_waterman")
#: The distributed kernels: one eval row per (kernel, world size), named ``KERNEL@W``.
DIST_KERNELS = ("gemm_all_scatter", "all_gather_gemm", "gemm_reduce_scatter", "flash_decode")
DIST_WORLD_SIZES = (2, 4, 8)
DISTRIBUTED = tuple(f"{k}@{w}" for k in DIST_KERNELS for w in DIST_WORLD_SIZES)
#: Characters of an eval's stored options (``_register``): about 600, 2 KB with every row and the
#: line on those left out.
MAX_OPTIONS_CHARS = 64 * 1024
#: Nesting of stored options: an object holding the list of kernels.
MAX_OPTIONS_DEPTH = 4
#: Bytes of a run's report.json read for its row (eval/history.py reads as much; the largest under
#: bench/results/ is 211 KB).
MAX_REPORT_BYTES = 64 << 20


class EvalError(Exception):
    """Bad eval options or an unknown eval id; one line for the user."""


@dataclass
class EvalOptions:
    """One eval: which kernels, where, with which proposer, how long each."""

    kernels: list = field(default_factory=lambda: list(KERNELS))
    hw: str | None = None
    iterations: int = 8
    model: str | None = None
    base_url: str | None = None
    llm_timeout_s: float = 300.0     # per proposal (run.RunOptions: the same LLM options)
    temperature: float = 0.2
    context_tokens: int | None = None
    llm_retries: int = 2
    evidence: bool = True            # an LLM's prompt shows the simulator's ranking of known orders
    price_in_per_mtok: float = 0.0   # USD per million prompt tokens (the cost column)
    price_out_per_mtok: float = 0.0
    workdir: str = ".swizzleperf"
    out_dir: str | None = None   # None: WORKDIR/results (the repository's bench/results/ only when asked)
    left_out: str = ""           # the rows `all` left out and why (select_kernels), said under the table

    @property
    def results_dir(self) -> Path:
        return Path(self.out_dir) if self.out_dir else Path(self.workdir) / "results"


def _printable(text: str) -> str:
    if not text.isprintable():
        raise ValueError("must be printable text (no newline, NUL or escape code)")
    return text


def _bundled(name: str) -> str:
    if name not in KERNELS and name not in DISTRIBUTED:   # a name is a path under kernels/: nothing else
        raise ValueError(f"not a bundled kernel ({', '.join(KERNELS)}, or KERNEL@W of {', '.join(DIST_KERNELS)})")
    return name


#: Text a stored eval's option may hold: printable (no newline, NUL or escape code), 4096 characters at most.
PrintableText = Annotated[str, pydantic.Field(strict=True, max_length=4096), pydantic.AfterValidator(_printable)]
_Count = Annotated[int, pydantic.Field(strict=True, ge=0, lt=1 << 31)]
_Seconds = Annotated[float, pydantic.Field(strict=True, gt=0.0, allow_inf_nan=False)]
_Price = Annotated[float, pydantic.Field(strict=True, ge=0.0, allow_inf_nan=False)]


class StoredLLMOptions(pydantic.BaseModel):
    """The LLM's options of a stored eval (the bundled kernels' or a folder of apps'), each checked
    for its type and range (no coercion); None where the record was written before it existed."""
    model_config = pydantic.ConfigDict(strict=True, extra="forbid")
    model: PrintableText | None = None
    base_url: PrintableText | None = None
    llm_timeout_s: _Seconds = None
    temperature: Annotated[float, pydantic.Field(strict=True, ge=0.0, le=2.0, allow_inf_nan=False)] = None
    context_tokens: Annotated[int, pydantic.Field(strict=True, ge=1, lt=1 << 31)] | None = None
    llm_retries: Annotated[int, pydantic.Field(strict=True, ge=0, lt=1000)] = None
    evidence: bool = None
    price_in_per_mtok: _Price = None
    price_out_per_mtok: _Price = None


class StoredEvalOptions(StoredLLMOptions):
    """``EvalOptions`` as ``_register`` stores them, checked before a resume believes them: each
    option's type and range (no coercion: ``"8"`` is not an iteration count), only bundled kernels
    (a name becomes a path under kernels/), text printable, no other key. An option a row leaves
    out (a record written before it existed) keeps ``EvalOptions``' default."""
    model_config = pydantic.ConfigDict(strict=True, extra="forbid")
    kernels: Annotated[list[Annotated[str, pydantic.AfterValidator(_bundled)]], pydantic.Field(max_length=256)] = None
    hw: PrintableText | None = None
    iterations: Annotated[int, pydantic.Field(strict=True, ge=1, lt=1 << 31)] = None
    workdir: PrintableText = None
    out_dir: PrintableText | None = None
    left_out: PrintableText = None


def resolve_kernels(text: str) -> list:
    """``all``, ``kernels`` (the single-GPU ones), ``distributed`` or a comma-separated list of
    bundled kernel names; a distributed kernel by itself stands for every world size, ``KERNEL@W``
    for one. Raises EvalError."""
    groups = {"all": list(KERNELS) + list(DISTRIBUTED), "kernels": list(KERNELS), "distributed": list(DISTRIBUTED)}
    names = []
    for item in (k.strip() for k in text.split(",") if k.strip()):
        names += groups.get(item) or ([f"{item}@{w}" for w in DIST_WORLD_SIZES] if item in DIST_KERNELS else [item])
    unknown = [k for k in names if k not in KERNELS and k not in DISTRIBUTED]
    if unknown or not names:
        raise EvalError(f"unknown kernel(s) {', '.join(unknown) or '(none)'}: known {', '.join(KERNELS)}, "
                        f"{', '.join(DIST_KERNELS)} (or KERNEL@W, W in {DIST_WORLD_SIZES}), all, kernels, distributed")
    return names


def select_kernels(text: str, hw: str | None) -> tuple:
    """``(rows, left_out)``: :func:`resolve_kernels`, less the distributed rows where the spec they
    would be priced on gives no interconnect figures (``left_out`` says which and why, one line;
    empty where none was left out).

    Raises:
        EvalError: an unknown name, or distributed rows asked for by name on such a spec.
        UnknownHardwareError: ``hw`` names no spec.
    """
    names = resolve_kernels(text)
    dist = [k for k in names if k in DISTRIBUTED]
    why = unpriced_reason(hw) if dist else ""
    if not why:
        return names, ""
    if any(item.strip() != "all" for item in text.split(",") if resolve_kernels(item.strip())[0] in DISTRIBUTED):
        raise EvalError(f"{', '.join(dist)}: {why}")
    return [k for k in names if k not in DISTRIBUTED], f"the {len(dist)} distributed rows left out: {why}"


def unpriced_reason(hw: str | None) -> str:
    """Why the distributed rows cannot be simulated on the spec they would use (``hw``, else the
    detected GPU's, else the overlap model's default), or '' where they can."""
    from swizzleperf.agent.distributed.evaluator import resolve_target
    from swizzleperf.profiling.overlap_model import missing_figures
    spec = resolve_target(hw, DIST_WORLD_SIZES[0]).spec
    missing = missing_figures(spec)
    if not missing:
        return ""
    return (f"hwspecs/{spec.name}.yaml gives no {', '.join(missing)}, which the overlap model prices them "
            f"with, and no published figure stands for them (measure them on the GPU; "
            f"--kernels kernels runs the {len(KERNELS)} single-GPU kernels alone)")


def kernel_options(name: str) -> dict:
    """The kernel file and, for ``KERNEL@W``, the world size of one eval row."""
    if "@" in name:
        kernel, world_size = name.split("@")
        return {"kernel": str(KERNELS_DIR / "distributed" / f"{kernel}.py"), "world_size": int(world_size)}
    return {"kernel": str(KERNELS_DIR / f"{name}.py")}


#: ``--gpus`` at most: worker processes of one eval on one host (each about 1 GB; a number past it,
#: ``--gpus 99999999999999999999``, started an eval that could never make its workers, #41 round ten).
MAX_WORKERS = 256


def resolve_gpus(text: str) -> int:
    """``--gpus``: an integer in [1, ``MAX_WORKERS``], or ``auto`` (every visible CUDA device, at
    least 1). Raises EvalError."""
    if text.strip().lower() == "auto":
        return max(1, len(workers.visible_devices()))
    if not text.strip().isdigit() or not 1 <= int(text.strip()[:6]) <= MAX_WORKERS or len(text.strip()) > 6:
        raise EvalError(f"--gpus must be an integer in [1, {MAX_WORKERS}] or auto, got {text[:40]!r}")
    return int(text)


def run_eval(options: EvalOptions, eval_id: str | None = None,
             on_event: Callable = lambda kind, data: None, gpus: int = 1) -> tuple:
    """Run (or resume, with ``eval_id``) an eval over ``gpus`` worker processes (1: in this process);
    returns ``(eval_id, table DataFrame, files)``. Interrupted, it writes the partial table, then
    re-raises KeyboardInterrupt.

    Raises:
        EvalError: unknown eval id, or more GPUs asked for than a measured eval can see.
        UnknownHardwareError: ``options.hw`` names no spec.
    """
    if eval_id is not None:
        options = stored_options(options.workdir, eval_id, base_url=options.base_url)
    _check_gpus(options.hw, gpus)
    eval_id = eval_id or time.strftime("eval-%Y%m%d-%H%M%S-") + secrets.token_hex(2)
    _register(options, eval_id)
    on_event("eval", {"name": eval_id})
    try:
        if gpus > 1:
            sandbox.shield_from_boxes()   # the workers' boxes never read this process's environment (its key)
            workers.run_workers(options.workdir, eval_id, _unfinished(options, eval_id, on_event), gpus, on_event,
                        base_url=options.base_url)
        else:
            for kernel in options.kernels:
                _run_kernel(options, eval_id, kernel, on_event)
    except KeyboardInterrupt:
        with evals_table.connect(options.workdir) as db:  # no worker is left running: run_workers waited for them
            db.execute("UPDATE evals SET status = 'interrupted' WHERE eval_id = ? AND status = 'running'", (eval_id,))
        write_tables(summarize(options.workdir, eval_id), options.results_dir, eval_id, options.left_out)
        raise
    table = summarize(options.workdir, eval_id)
    return eval_id, table, write_tables(table, options.results_dir, eval_id, options.left_out)


def _check_gpus(hw: str | None, gpus: int) -> None:
    """A measured eval needs one visible GPU per worker; a simulated one runs its workers on the CPU."""
    from swizzleperf import hwspecs
    target = hwspecs.resolve_target(hw)
    if gpus > 1 and target.mode == "measured":
        visible = len(workers.visible_devices())
        if gpus > visible:
            raise EvalError(f"--gpus must be at most the {visible} visible GPU(s) for a measured eval, got {gpus}")


def _register(options: EvalOptions, eval_id: str) -> None:
    """One pending row per kernel, in the eval's order (the table's order); rows already there stay."""
    from dataclasses import asdict
    stored = json.dumps(redact_all(asdict(options)))  # the endpoint's credentials are never stored
    with evals_table.connect(options.workdir) as db:
        db.executemany("INSERT OR IGNORE INTO evals (eval_id, kernel, status, options_json, started_at, reason) "
                       "VALUES (?, ?, 'pending', ?, ?, '')",
                       [(eval_id, k, stored, time.time()) for k in options.kernels])


def stored_options(workdir: str, eval_id: str, base_url: str | None = None) -> EvalOptions:
    """The options an eval started with; the record keeps the LLM endpoint without its credentials
    (``redact``), so an endpoint that had some is ``base_url`` again (the same URL once redacted), or
    ``$SWIZZLEPERF_EVAL_BASE_URL`` in a worker process of the eval.

    Raises:
        EvalError: no such eval, its stored options not of the shape ``_register`` writes (too
            long, too deep, not JSON, an unknown key, a value of the wrong type or out of range: one
            line, the row left as it was), or ``base_url`` is another endpoint than the eval's.
    """
    with evals_table.connect(workdir) as db:
        found = db.execute("SELECT options_json FROM evals WHERE eval_id = ? LIMIT 1", (eval_id,)).fetchone()
    if found is None:
        raise EvalError(f"no eval {eval_id!r} in {workdir}")
    try:
        stored = untrusted.load_json_checked(found[0], StoredEvalOptions, "the row of its options",
                                             MAX_OPTIONS_CHARS, MAX_OPTIONS_DEPTH)
    except untrusted.UntrustedInput as exc:
        raise EvalError(f"eval {untrusted.shown(eval_id)} cannot be resumed: {exc}") from None
    options = EvalOptions(**stored.model_dump(exclude_unset=True))
    given = base_url or os.environ.get(workers.BASE_URL_VARIABLE) or None
    if given is not None:
        if redact(given) != options.base_url:
            raise EvalError(f"--base-url {redact(given)} is not the endpoint eval {eval_id} used ({options.base_url})")
        options.base_url = given
    elif options.base_url and MASK in options.base_url:
        raise EvalError(f"eval {eval_id} used the LLM endpoint {options.base_url}, whose credentials are not kept "
                        f"in the record: give the same --base-url again with --resume")
    return options


def _unfinished(options: EvalOptions, eval_id: str, on_event: Callable) -> list:
    """The eval's kernels still to run; a ``skip`` event for each finished one."""
    todo = []
    for kernel in options.kernels:
        row = evals_table.row(options.workdir, eval_id, kernel)
        if row and row[1] == "finished":
            on_event("skip", {"name": kernel})
        else:
            todo.append(kernel)
    return todo


def run_kernel(workdir: str, eval_id: str, kernel: str, on_event: Callable = lambda kind, data: None) -> str:
    """One kernel of a registered eval (what a worker process does); returns its status.

    Raises:
        EvalError: no such eval in ``workdir``.
    """
    options = stored_options(workdir, eval_id)
    _run_kernel(options, eval_id, kernel, on_event)
    return kernel_status(workdir, eval_id, kernel)[0]


def _run_kernel(options: EvalOptions, eval_id: str, kernel: str, on_event: Callable) -> None:
    """Run (or resume) one kernel's optimization and record its status; a run that cannot start or
    fails is recorded as failed with its one-line reason, not raised."""
    from swizzleperf.agent.loop.record import UnknownRunError
    from swizzleperf.kernels.spec import KernelLoadError
    row = evals_table.row(options.workdir, eval_id, kernel)
    if row and row[1] == "finished":
        on_event("skip", {"name": kernel})
        return
    on_event("kernel", {"name": kernel})

    def forward(kind: str, data: dict) -> None:
        if kind == "run":
            set_status(options.workdir, eval_id, kernel, "running", run_id=data["name"])
        on_event(kind, data)

    try:
        if row and row[0]:
            given = options.base_url if options.base_url and MASK not in options.base_url else None
            outcome = run.resume(row[0], workdir=options.workdir, on_event=forward, base_url=given)
        else:
            outcome = run.start(run.RunOptions(**kernel_options(kernel), hw=options.hw,
                                               iterations=options.iterations, model=options.model,
                                               base_url=options.base_url, llm_timeout_s=options.llm_timeout_s,
                                               temperature=options.temperature,
                                               context_tokens=options.context_tokens,
                                               llm_retries=options.llm_retries, evidence=options.evidence,
                                               price_in_per_mtok=options.price_in_per_mtok,
                                               price_out_per_mtok=options.price_out_per_mtok,
                                               workdir=options.workdir),
                                on_event=forward)
    except (run.RunError, KernelLoadError, UnknownRunError) as exc:
        set_status(options.workdir, eval_id, kernel, "failed", reason=str(exc))
        on_event("failed", {"name": kernel, "reason": str(exc)})
        return
    set_status(options.workdir, eval_id, kernel, outcome.status, run_id=outcome.run_id)


def summarize(workdir: str, eval_id: str) -> pd.DataFrame:
    """One row per kernel of the eval: baseline, expert and best with their sources, speedups
    (none where within the measured spread), iterations and time to the best, rejections by
    reason, tokens and cost; a kernel that did not finish says so in ``status``, ``reason`` and
    its verdict, with the figures its run reached, if any; one whose run's report cannot be read
    is ``unreadable``, with why (``_kernel_row``)."""
    record = RunRecord(Path(workdir))
    with evals_table.connect(workdir) as db:
        rows = db.execute("SELECT kernel, run_id, status, reason FROM evals WHERE eval_id = ? ORDER BY rowid",
                          (eval_id,)).fetchall()
    return pd.DataFrame([_kernel_row(record, *row) for row in rows])


_Number = Annotated[float, pydantic.Field(strict=True, allow_inf_nan=False)] | None
_Label = Annotated[str, pydantic.Field(strict=True, max_length=100_000)] | None


class _Entry(pydantic.BaseModel):
    """What a row reads of report.json's baseline, expert or best; the rest kept."""
    model_config = pydantic.ConfigDict(extra="allow", strict=True)
    name: _Label = None
    source: _Label = None
    predicted_source: _Label = None
    time_ms: _Number = None
    time_spread_ms: _Number = None
    l2_hit_rate: _Number = None
    dram_bytes: _Number = None
    predicted_time_ms: _Number = None
    speedup_vs_baseline: _Number = None
    speedup_vs_expert: _Number = None
    beyond_noise_vs_baseline: bool | None = None
    beyond_noise_vs_expert: bool | None = None
    l2_gain_vs_baseline: _Number = None
    l2_gain_vs_expert: _Number = None


class _RoofOrder(pydantic.BaseModel):
    """profiling/roof.py's figures of one order: numbers where measured, "not measured" where not."""
    model_config = pydantic.ConfigDict(extra="allow", strict=True)
    status: _Label = None
    binding: _Label = None
    roof_share: _Number | _Label = None
    max_gain: _Number | _Label = None

    @pydantic.model_validator(mode="after")
    def _measured_is_a_number(self):
        if self.status == "measured" and (isinstance(self.roof_share, str) or isinstance(self.max_gain, str)):
            raise ValueError("a measured roof's roof_share and max_gain must be numbers")
        return self


class _RoofOrders(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="allow", strict=True)
    best: _RoofOrder | None = None


class _Roof(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="allow", strict=True)
    orders: _RoofOrders | None = None


class _TorchNccl(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="allow", strict=True)
    time_ms: _Number = None


class _Distributed(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="allow", strict=True)
    torch_nccl: _TorchNccl | None = None


class ReportFigures(pydantic.BaseModel):
    """What an eval's row reads of a run's report.json (agent/loop/report.py writes it), each
    field's type checked; the rest kept, bounded by the file's size and depth."""
    model_config = pydantic.ConfigDict(extra="allow", strict=True)
    hardware: _Label = None
    mode: _Label = None
    iterations: _Count
    baseline: _Entry | None = None
    expert: _Entry | None = None
    best: _Entry | None = None
    distributed: _Distributed | None = None
    roof: _Roof | None = None


def _report_of(record: RunRecord, run_id: str | None) -> dict:
    """The report.json of run ``run_id`` as it was written, once it fits ``ReportFigures``; ``{}``
    without a run, or before the run wrote one.

    Raises:
        UntrustedInput: one line naming the file: the run's row cannot be read, or its report is
            not a regular file, longer than ``MAX_REPORT_BYTES``, not UTF-8 or not JSON, too deep,
            cannot be read, or holds a field of the wrong type.
    """
    from swizzleperf.agent.loop.run import run_dir_of
    if not run_id:
        return {}
    try:
        path = run_dir_of(record.root, record.run(run_id)["run_dir"]) / "report.json"
    except UnknownRunError as exc:   # and UnusableRunError: a row not of the shape a run writes
        raise untrusted.UntrustedInput(str(exc)) from None
    if not path.exists():
        return {}
    try:
        data = untrusted.read_bounded(path, MAX_REPORT_BYTES, "the report")
    except OSError as exc:
        raise untrusted.UntrustedInput(f"the report {path} cannot be read: {exc.strerror or exc}") from None
    report = untrusted.loads(data, str(path))
    untrusted.validated(ReportFigures, report, str(path), data)
    return report


def _kernel_row(record: RunRecord, kernel: str, run_id: str | None, status: str, reason: str | None) -> dict:
    """One row of the table; a run whose row or report.json cannot be read is the row's status,
    ``unreadable``, its reason the one line that says why (the record is left as it is)."""
    try:
        report = _report_of(record, run_id)
    except untrusted.UntrustedInput as exc:
        report, status, reason = {}, "unreadable", str(exc)
    out = {"kernel": kernel, "hardware": report.get("hardware"), "mode": report.get("mode"), "run_id": run_id}
    for label in ("baseline", "expert", "best"):
        f = report.get(label) or {}
        out.update({f"{label}_name": shown_name(f) if f else None, f"{label}_time_ms": f.get("time_ms"),
                    f"{label}_time_spread_ms": f.get("time_spread_ms"), f"{label}_l2_hit_rate": f.get("l2_hit_rate"),
                    f"{label}_dram_bytes": f.get("dram_bytes"),
                    f"{label}_source": f.get("source") or f.get("predicted_source"),
                    f"{label}_predicted_time_ms": f.get("predicted_time_ms")})
    torch_nccl = (report.get("distributed") or {}).get("torch_nccl") or {}
    out["torch_nccl_predicted_ms"] = torch_nccl.get("time_ms")
    best = report.get("best") or {}
    for other in ("baseline", "expert"):
        speedup = best.get(f"speedup_vs_{other}")
        real = best.get(f"beyond_noise_vs_{other}")
        out[f"speedup_vs_{other}"] = speedup if real else (1.0 if speedup is not None else None)
        out[f"l2_gain_vs_{other}"] = best.get(f"l2_gain_vs_{other}")
    out.update(_roof_columns(report))
    out.update(_iteration_columns(record, run_id, report))
    out.update(status=status, reason=reason or "")
    out["verdict"] = _verdict(out) if status == "finished" else f"{status}: {reason}" if reason else status
    return out


def _roof_columns(report: dict) -> dict:
    """The best order's roof (report.json's ``roof``, profiling/roof.py): "% of roof" (the floor no
    tile order can beat over the measured time; None where not measured), the most any order could
    still gain, the binding roof and whether it was measured or predicted."""
    roof = ((report.get("roof") or {}).get("orders") or {}).get("best") or {}
    measured = roof.get("status") == "measured"
    return {"best_roof_share": roof.get("roof_share") if measured else None,
            "best_roof_max_gain": roof.get("max_gain") if measured else None,
            "best_roof_binding": roof.get("binding"), "best_roof_status": roof.get("status")}


def _roof_cell(row: dict) -> str:
    """ "71.0% (compute)" measured; "not measured (DRAM, predicted)" simulated; "n/a" without a roof."""
    status = row.get("best_roof_status")
    if not isinstance(status, str):
        return "n/a"
    if status != "measured":
        return f"not measured ({row.get('best_roof_binding')}, predicted)"
    return f"{_fmt(row.get('best_roof_share'), 'pct')} ({row.get('best_roof_binding')})"


def _iteration_columns(record: RunRecord, run_id: str | None, report: dict) -> dict:
    """Iterations, iteration and seconds to the best, rejections, tokens and cost of one run."""
    if not report:
        return {"iterations": None, "iteration_of_best": None, "seconds_to_best": None, "rejected": "",
                "tokens": None, "tokens_source": None, "cost_usd": None}
    meta, iterations = record.run(run_id), record.iterations(run_id)
    candidates = iterations[iterations.kind == "candidate"]
    best_row = iterations[iterations.is_best == 1]
    return {"iterations": int(report["iterations"]),
            "iteration_of_best": (int(best_row.iteration.iloc[0])
                                  if len(best_row) and best_row.kind.iloc[0] == "candidate" else 0),
            "seconds_to_best": (float(best_row.created_at.iloc[0]) - meta["started_at"]) if len(best_row) else None,
            "rejected": "; ".join(f"{v}: {n}" for v, n in
                                  candidates[candidates.verdict != "PASS"].verdict.value_counts().items()),
            "tokens": int(candidates.prompt_tokens.sum() + candidates.completion_tokens.sum()),
            # the server's counts or the proposer's estimates, per request of the transcript (#11)
            "tokens_source": tokens_source(record.requests(run_id).to_dict("records")),
            "cost_usd": float(candidates.cost_usd.sum())}


def _verdict(row: dict) -> str:
    """The honest one-word outcome: a speedup only beyond the measured spread."""
    if row.get("best_time_ms") is not None:
        s = row.get("speedup_vs_baseline")
        return "faster" if s and s > 1.0 else "no change"
    if row.get("best_predicted_time_ms") is not None:
        base, best = row.get("baseline_predicted_time_ms"), row["best_predicted_time_ms"]
        return "lower predicted time" if base and best < base * 0.99 else "no change"
    gain = row.get("l2_gain_vs_baseline") or 0.0
    return "higher predicted L2 hit rate" if gain >= 1e-3 else "no change"


def write_tables(table: pd.DataFrame, out_dir: Path, eval_id: str, left_out: str = "") -> list:
    """CSV, markdown and PNG plots of one eval (``left_out``: a line said under the table);
    returns the paths written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    csv, md = out_dir / f"{eval_id}.csv", out_dir / f"{eval_id}.md"
    table.to_csv(csv, index=False)
    md.write_text(_markdown(table) + (f"\nLeft out: {left_out}.\n" if left_out else ""))
    return [csv, md, *_plots(table, out_dir, eval_id)]


def _fmt(value, kind: str) -> str:
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return "n/a"
    formats = {"pct": "{:.1%}", "ms": "{:.3f}", "x": "{:.2f}x", "int": "{:.0f}", "text": "{}"}
    return f"{value / 1e9:.2f}" if kind == "gb" else formats[kind].format(value)


def _time_cell(row: dict, label: str) -> str:
    """The measured time, else the overlap model's, labelled as predicted (distributed rows)."""
    measured, predicted = row.get(f"{label}_time_ms"), row.get(f"{label}_predicted_time_ms")
    if (measured is None or pd.isna(measured)) and predicted is not None and not pd.isna(predicted):
        return f"{predicted:.3f} (predicted)"
    return _fmt(measured, "ms")


def _markdown(table: pd.DataFrame) -> str:
    """The table a reader sees: every column of the CSV that bears on the outcome (L2 hit rates,
    times, DRAM bytes, speedups, the iteration of the best, rejections, tokens and cost, the
    kernel's status; a kernel that did not finish has its reason in the verdict), one row per kernel."""
    lines = ["| kernel | mode | status | baseline L2 | expert L2 | best (order) L2 | baseline ms | expert ms | best ms "
             "| baseline DRAM GB | best DRAM GB | vs baseline | vs expert | % of roof | iter. of best | rejected "
             "| tokens (cost) | verdict |", "|" + "---|" * 18]
    for r in table.to_dict("records"):
        lines.append(f"| {r['kernel']} | {_fmt(r['mode'], 'text')} | {_fmt(r['status'], 'text')} "
                     f"| {_fmt(r['baseline_l2_hit_rate'], 'pct')} "
                     f"| {_fmt(r['expert_l2_hit_rate'], 'pct')} "
                     f"| {_fmt(r['best_name'], 'text')}: {_fmt(r['best_l2_hit_rate'], 'pct')} "
                     f"| {_time_cell(r, 'baseline')} | {_time_cell(r, 'expert')} "
                     f"| {_time_cell(r, 'best')} | {_fmt(r['baseline_dram_bytes'], 'gb')} "
                     f"| {_fmt(r['best_dram_bytes'], 'gb')} | {_fmt(r['speedup_vs_baseline'], 'x')} "
                     f"| {_fmt(r['speedup_vs_expert'], 'x')} | {_roof_cell(r)} | {_fmt(r['iteration_of_best'], 'int')} "
                     f"| {_fmt(r['rejected'], 'text') if r['rejected'] else 'none'} "
                     f"| {_tokens_cell(r)} | {r['verdict']} |")
    sources = ", ".join(sorted({s for s in table.best_source.dropna()}))
    return ("\n".join(lines) + f"\n\nL2 and DRAM figures: {sources}; a speedup within the measured spread is "
            f"shown as 1.00x; '% of roof' is the best's floor (max of FLOPs / compute peak and compulsory bytes / "
            f"DRAM peak: no tile order can run faster) over its measured time, with the binding roof; tokens are "
            f"prompt + completion over the run's LLM requests, the server's counts unless marked estimated "
            f"(the proposer's estimate where the server gave no usage).\n")


def _tokens_cell(row: dict) -> str:
    """``2921`` (the server's counts, or no request), ``2921 (estimated: 4 of 4 requests without server
    usage)`` (report.py's ``tokens_source``); the cost after."""
    tokens, cost, source = row.get("tokens"), row.get("cost_usd"), row.get("tokens_source")
    if tokens is None or pd.isna(tokens):
        return "n/a"
    estimated = f" ({source})" if isinstance(source, str) and source.startswith("estimated") else ""
    return f"{tokens:.0f}{estimated}" + (f" (${cost:.4f})" if cost else "")


def plotted_rows(table: pd.DataFrame) -> tuple:
    """``(rows plotted, one line on those left out)``: the plot shows finished rows with an L2 hit
    rate; a failed or unfinished row, or one without an L2 figure, is named, never drawn as 0 %."""
    finished = table.status == "finished"
    rows = table[finished & table.baseline_l2_hit_rate.notna()]
    notes = [f"not finished: {', '.join(table.kernel[~finished])}" if (~finished).any() else "",
             f"no L2 figure: {', '.join(table.kernel[finished & table.baseline_l2_hit_rate.isna()])}"
             if (finished & table.baseline_l2_hit_rate.isna()).any() else ""]
    return rows, "; ".join(n for n in notes if n)


def _plots(table: pd.DataFrame, out_dir: Path, eval_id: str) -> list:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows, left_out = plotted_rows(table)
    fig, ax = plt.subplots(figsize=(max(6, 1.1 * len(rows)), 3.5 + (0.4 if left_out else 0)))
    width = 0.27
    for i, label in enumerate(("baseline", "expert", "best")):
        values = rows[f"{label}_l2_hit_rate"].astype(float) * 100   # NaN (no expert): no bar
        ax.bar([x + (i - 1) * width for x in range(len(rows))], values, width, label=label)
    ax.set_xticks(range(len(rows)), rows.kernel, rotation=30, ha="right")
    ax.set_ylabel("L2 hit rate (%)")
    ax.set_title(f"{eval_id}: L2 hit rate ({', '.join(sorted(set(rows.best_source.dropna()))) or 'no row'})")
    if left_out:
        fig.text(0.01, 0.01, f"not plotted: {left_out}"[:200], fontsize=7)
    ax.legend()
    fig.tight_layout(rect=(0, 0.08, 1, 1) if left_out else None)
    path = out_dir / f"{eval_id}_l2.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return [path]
