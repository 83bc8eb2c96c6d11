"""The ``swizzleperf`` command line (typer): ``optimize``, ``eval``, ``simulate``, ``analyze``, ``hw``,
``notebook``."""
from __future__ import annotations

import math
import os
import signal
import shlex
import sqlite3
import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Hardware-aware optimizer of Triton kernels: block swizzles, verified and measured.")
# a terminal: its own width; a log or a pipe: 150 columns for tables and rules, and a line of text
# never broken (soft_wrap), so that a reason reads, and greps, as one line
console = Console(highlight=False, width=None if sys.stdout.isatty() else 150, soft_wrap=not sys.stdout.isatty())
errors = Console(stderr=True, highlight=False)


def _plain(value) -> str:
    """Text from outside (a reason, a name, a path, a server's or a model's words) for a line printed
    with ``markup=False``: as it is, or as ``ascii()`` writes it where it holds an unprintable character
    (an escape code, a newline: ``sandbox/untrusted.shown``, as the ``--apps`` lines, #41)."""
    from swizzleperf.sandbox.untrusted import shown
    return shown(str(value))


def _plain_lines(value) -> str:
    """Text of several lines (``hw``'s description, the simulator's summary) for a print with
    ``markup=False``: each line as :func:`_plain` shows it, so that the lines stay lines (the whole
    text as one ``ascii()`` literal, ``'device: no GPU\\nspec: ...'``, was unreadable, #41) while an
    escape code or another unprintable character within a line is still written out."""
    return "\n".join(_plain(line) for line in str(value).split("\n"))


def _known_hw(hw: str | None) -> None:
    """A ``--hw`` that names no spec is one line (exit 2) before anything runs: not after the
    app's capture, an eval's rows or a simulation it would have stopped (#41). ``None`` and
    ``auto`` (the detected GPU's spec) are resolved where the run starts."""
    from swizzleperf import hwspecs
    if hw is None or hw.strip().lower() == "auto":
        return
    try:
        hwspecs.load_spec(hw)
    except hwspecs.UnknownHardwareError as exc:
        _fail(str(exc))


#: Ranges of the numeric options (#41, red team 41i: NaN, an infinity or a 20-digit integer was taken,
#: a run folder and a record row were made, then the record refused the value, and --resume too).
#: Seconds: a week for a run, a worker or an app's row (a run takes minutes to hours, and the OS's
#: timers overflow far beyond: threading's waits near 2^63 ns); a day for one proposal.
MAX_SECONDS, MAX_LLM_SECONDS = 7 * 24 * 3600, 24 * 3600
#: Proposals of a run, and of a plateau: each takes seconds to minutes, 10 000 are days of them.
MAX_PROPOSALS = 10_000
#: A target speedup: a tile order gains tens of percent; 100x is past any.
MAX_SPEEDUP = 100
#: Ranks of a distributed kernel: 128 nodes of 8 GPUs (the overlap model prices every pair of ranks).
MAX_WORLD_SIZE = 1024
#: A context window, as large as a server may state one (agent/proposers/wire.py ``MAX_WINDOW``).
MAX_CONTEXT_TOKENS = 10**8
MAX_RETRIES = 100
#: USD per million tokens: the dearest models cost under 100.
MAX_PRICE = 10_000
#: Kernels of an app optimized in turn (--top).
MAX_TOP = 1_000
#: By parameter name, for every command that has it: (lowest, highest, lowest excluded, unit).
_RANGES = {
    "iterations": (1, MAX_PROPOSALS, False, ""), "plateau": (1, MAX_PROPOSALS, False, ""),
    "time_budget": (0, MAX_SECONDS, True, " seconds"), "target_speedup": (0, MAX_SPEEDUP, True, ""),
    "target_l2": (0, 1, True, ""), "roof_margin": (0, 1, False, ""),
    "llm_timeout": (0, MAX_LLM_SECONDS, True, " seconds"), "temperature": (0, 2, False, ""),
    "context_tokens": (512, MAX_CONTEXT_TOKENS, False, ""), "llm_retries": (0, MAX_RETRIES, False, ""),
    "price_in": (0, MAX_PRICE, False, " USD per million tokens"),
    "price_out": (0, MAX_PRICE, False, " USD per million tokens"),
    "timeout": (0, MAX_SECONDS, True, " seconds"), "world_size": (2, MAX_WORLD_SIZE, False, ""),
    "top": (1, MAX_TOP, False, ""), "row_budget": (0, MAX_SECONDS, True, " seconds"),
}
#: Options only a distributed kernel takes, and options a distributed run does not use (its
#: Budget has no L2 target nor roof, its evaluator no ncu: agent/loop/run.py ``_build_dist_loop``).
_DISTRIBUTED_ONLY, _NOT_DISTRIBUTED = ("world_size", "problem"), ("target_l2", "roof_margin", "no_ncu")


def _option(param) -> str:
    """A parameter as the user names it: its long option (``--iterations``, not ``-n``)."""
    return next((o for o in param.opts if o.startswith("--")), param.opts[0] if param.opts else param.name)


def _numbers_in_range(ctx: typer.Context) -> None:
    """Every numeric option of the command within its range (``_RANGES``): finite, and one line
    naming the option and the range otherwise (exit 2), before any run folder or record row."""
    for param in ctx.command.params:
        value = ctx.params.get(param.name)
        if param.name not in _RANGES or value is None or isinstance(value, bool):
            continue
        low, high, low_excluded, unit = _RANGES[param.name]
        finite = isinstance(value, int) or math.isfinite(value)
        if not (finite and (low < value if low_excluded else low <= value) and value <= high):
            _fail(f"{_option(param)} must be in {'(' if low_excluded else '['}{low}, {high}]{unit}, got {value}")


def _given(ctx: typer.Context) -> dict:
    """``{parameter name: option}`` of the options given on the command line (a default stays
    unnamed; sources compared by name: typer may bring its own click)."""
    return {p.name: _option(p) for p in ctx.command.params
            if getattr(ctx.get_parameter_source(p.name), "name", "") == "COMMANDLINE"}


def _options_fit_the_kernel(ctx: typer.Context, kernel: str | None, app: str | None) -> None:
    """Options that the kernel's run would drop are one line (exit 2), not silently ignored:
    ``--world-size`` and ``--problem`` for a kernel that is not distributed (an app's captured
    kernel included), ``--target-l2``, ``--roof-margin`` and ``--no-ncu`` for one that is. The
    kernel's spec is loaded here only when one of them is given."""
    given = _given(ctx)
    only_distributed = [given[n] for n in _DISTRIBUTED_ONLY if n in given]
    not_distributed = [given[n] for n in _NOT_DISTRIBUTED if n in given]
    if not (only_distributed or not_distributed) or (kernel is None and app is None):
        return
    if kernel is None:
        distributed = False   # --app: a captured kernel is a KernelSpec
    else:
        from swizzleperf.agent.verification.load import load_spec
        from swizzleperf.kernels.distributed.spec import DistKernelSpec
        from swizzleperf.kernels.spec import KernelLoadError
        try:
            distributed = isinstance(load_spec(kernel), DistKernelSpec)
        except KernelLoadError as exc:
            _fail(str(exc))
    wrong = not_distributed if distributed else only_distributed
    if wrong:
        name = _plain(Path(kernel).name) if kernel else "the kernel --app captures"
        _fail(f"{', '.join(wrong)} {'applies' if len(wrong) == 1 else 'apply'} only to "
              + (f"a kernel that is not distributed; {name} is distributed (its runs stop on the overlap "
                 f"model's time: --target-speedup, --time-budget, --plateau)" if distributed else
                 f"a distributed kernel (a DistKernelSpec, kernels/distributed/); {name} is not one")
              + f": leave {'it' if len(wrong) == 1 else 'them'} out")


def _known_endpoint(base_url: str | None) -> None:
    """A ``--base-url`` that is no endpoint is one line (exit 2) before anything runs, a resumed
    run's included (agent/proposers/chat.py ``endpoint_url`` says why, never quoting the URL)."""
    if base_url is None:
        return
    from swizzleperf.agent.proposers.chat import endpoint_url
    try:
        endpoint_url(base_url)
    except ValueError as exc:
        _fail(str(exc))


def _text(value) -> str:
    """:func:`_plain`, its brackets escaped, for a line, a status, a rule or a table that has markup of
    ours: shown as written, never read as markup (a ``[/red]`` in a reason crashed the line, #41)."""
    return escape(_plain(value))


class Progress:
    """The live display of a run: one line per evaluated attempt, a status line in between."""

    def __init__(self, budget: int):
        self.budget = budget
        self.status = console.status("starting")
        self.run_id: str | None = None

    def __enter__(self):
        self.status.__enter__()
        return self

    def __exit__(self, *exc):
        self.status.__exit__(*exc)

    def __call__(self, kind: str, data: dict) -> None:
        label = data.get("name", "")
        if kind == "target":
            console.print(_plain(label), markup=False)
        elif kind == "run":
            self.run_id = label
            console.print(f"run {_plain(label)} (if it stops, continue it with --resume {_plain(label)})",
                          markup=False)
        elif kind == "propose":
            self.status.update(f"iteration {data['iteration']}/{self.budget}: asking the proposer")
        elif kind in ("verify", "measure"):
            step = "verifying" if kind == "verify" else "measuring"
            self.status.update(f"{_text(data.get('kind'))} {data.get('iteration')}: {step} {_text(label)}")
        elif kind == "confirm":
            self.status.update(f"timing head to head: {_text(label)}")
        elif kind == "attempt":
            console.print(_attempt_line(data))
        elif kind == "roof":
            console.print(f"{_plain(label)}: {_plain(data['line'])}", markup=False)


def _attempt_line(a: dict) -> str:
    where = a["kind"] if a["kind"] != "candidate" else f"#{a['iteration']}"
    name = _text(a["name"] + (f" (= {a['catalog_twin']})" if a.get("catalog_twin") else ""))
    if a["verdict"] != "PASS":
        reason = a["reason"] if len(a["reason"]) <= 160 else a["reason"][:159] + "…"   # a cut says so
        return f"[red]{where:>8} {name:<22} {_text(a['verdict'])}[/red]: {_text(reason)}"
    m = a["metrics"]
    star = " [green]new best[/green]" if a.get("improved") else ""
    if m.get("predicted_time_ms") is not None and m.get("time_ms") is not None:  # distributed, measured
        return (f"{where:>8} {name:<40} {m['time_ms']:.3f} ± {m['time_spread_ms']:.3f} ms measured, torch + NCCL "
                f"{m['torch_nccl_ms']:.3f} in the same rounds (predicted {m['predicted_time_ms']:.3f}){star}")
    if m.get("predicted_time_ms") is not None:  # a distributed configuration: the overlap model's time
        l2 = f", GEMM L2 {m['l2_hit_rate']:.1%}" if m.get("l2_hit_rate") is not None else ""
        low, high = m.get("predicted_interval_ms") or (m["predicted_time_ms"], m["predicted_time_ms"])
        return (f"{where:>8} {name:<40} {m['predicted_time_ms']:.3f} ms [{low:.3f}-{high:.3f}] predicted "
                f"({m['predicted_source']}), {100 * m['predicted_hidden_share']:.0f} % of the communication "
                f"hidden{l2}{star}")
    time_text = f"  {m['time_ms']:.3f} ± {m['time_spread_ms']:.3f} ms" if m.get("time_ms") is not None else ""
    predicted = ("" if m["l2_source"] == m["predicted_source"] else
                 f"  (simulator {m['predicted_l2_hit_rate']:.1%} of reads; ncu's read lookups "
                 f"{m['l2_read_hit_rate']:.1%})" if m.get("l2_read_hit_rate") is not None else
                 f"  (simulator {m['predicted_l2_hit_rate']:.1%})")
    return f"{where:>8} {name:<22} L2 {m['l2_hit_rate']:6.1%} ({m['l2_source']}){time_text}{predicted}{star}"


def _fail(message: str) -> None:
    """``message`` on stderr as one error line, exit 2: its secrets masked (``redact``), then as
    :func:`_text` (an app's last line, a server's or a model's words: never an escape code or markup
    read by the terminal or rich, #41)."""
    from swizzleperf.sandbox.redact import redact
    errors.print(f"[red]error:[/red] {_text(redact(str(message)))}", soft_wrap=True)
    raise typer.Exit(code=2)


def _an_id(value: str | None, option: str, what: str) -> None:
    """A run's or an eval's id given on the command line (``--resume ID``, notebook's RUN): None is
    none given; an empty or blank one is one line (exit 2), never a new run without a kernel nor the
    latest run (U03, round twelve: ``optimize --resume ""`` started a run of no kernel and ended in a
    TypeError traceback; ``notebook ""`` ran on the latest run)."""
    if value is not None and not value.strip():
        _fail(f"{option} needs {what}; got {'an empty' if not value else 'a blank'} one")


#: ``eval``'s options that a resumed eval takes from its record instead (the stored one wins), by
#: parameter name: ``(the stored options' field, how a stored value reads as the parameter's)``.
#: The rest is taken: --resume, --workdir, --base-url (checked against the stored endpoint),
#: --gpus, --again, --ray, --ray-address.
_EVAL_STORED = {"hw": "hw", "iterations": "iterations", "model": "model", "llm_timeout": "llm_timeout_s",
                "temperature": "temperature", "context_tokens": "context_tokens", "llm_retries": "llm_retries",
                "evidence": "evidence", "price_in": "price_in_per_mtok", "price_out": "price_out_per_mtok"}
_KERNELS_EVAL_STORED = {**_EVAL_STORED, "kernels": "kernels", "out": "out_dir"}
_APPS_EVAL_STORED = {**_EVAL_STORED, "apps": "apps_dir", "files": "names", "row_budget": "row_budget_s",
                     "no_ncu": "use_ncu", "out": "out"}


def _shown_option_value(name: str, value) -> str:
    """A value of ``eval``'s parameter ``name`` as the command line writes it, for a note."""
    if name == "evidence":
        return "--evidence" if value else "--no-evidence"
    if name == "no_ncu":
        return "--no-ncu" if value else "without --no-ncu"
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value) if len(value) <= 8 else f"{len(value)} names"
    return "none" if value is None else str(value)


def _stored_wins(ctx: typer.Context, stored, fields: dict, what: str) -> None:
    """One note per option given beside ``--resume`` that the resumed ``what`` (``eval ID``) takes
    from its record instead, where the given value is not the stored one: ``note: --model is taken
    from the stored eval (X); the given Y is ignored`` (round twelve: the stored one won silently).
    ``optimize --resume`` refuses such options instead (``_resume_takes_no_other_options``): a run
    is resumed as one thing, an eval's options are read by every row, and a resumed eval goes on
    with them."""
    given = _given(ctx)
    for name, field in fields.items():
        if name not in given or not hasattr(stored, field):
            continue
        value, kept = ctx.params.get(name), getattr(stored, field)
        if name == "no_ncu":
            kept = not kept
        elif name == "kernels":
            value = [k.strip() for k in str(value).split(",") if k.strip()]
        elif name == "apps" and value is not None and kept:
            value = kept if os.path.realpath(value) == os.path.realpath(kept) else value
        elif name == "files":
            value = str(value)   # a file of names: never the stored list itself, always said
        if value == kept or (isinstance(kept, float) and isinstance(value, (int, float)) and float(value) == kept):
            continue
        option = "--no-evidence" if name == "evidence" and value is False else given[name]
        console.print(f"note: {_plain(option)} is taken from the stored {_plain(what)} "
                      f"({_plain(_shown_option_value(name, kept))}); the given "
                      f"{_plain(_shown_option_value(name, value))} is ignored", markup=False)


@app.command()
def optimize(
    ctx: typer.Context,
    kernel: Optional[str] = typer.Argument(None, help="Kernel module, e.g. kernels/gemm.py."),
    hw: Optional[str] = typer.Option(None, "--hw", help="Hardware spec (h100, h200, mi300x...); default: the detected GPU, else mi300x simulated."),
    iterations: int = typer.Option(8, "--iterations", "-n", min=1, help="Proposals to evaluate at most."),
    plateau: int = typer.Option(4, help="Stop after this many proposals without a gain beyond noise."),
    time_budget: Optional[float] = typer.Option(None, "--time-budget", help="Seconds the run may take: no proposal is made that would not end in time (time kept for the final head-to-head); the report says where it stopped."),
    target_speedup: Optional[float] = typer.Option(None, help="Stop once the best is this much faster than the baseline."),
    target_l2: Optional[float] = typer.Option(None, help="Stop once the best L2 hit rate (0..1) reaches this."),
    roof_margin: float = typer.Option(0.03, "--roof-margin", min=0.0, help="Stop once the baseline or the best is measured so close to the roof that no tile order can gain more than this share (or the measured spread): 'at N % of the roof: no tile order can gain more than M %'."),
    model: Optional[str] = typer.Option(None, help="LLM model name; without it the built-in search policy proposes."),
    base_url: Optional[str] = typer.Option(None, help="OpenAI-compatible endpoint (vLLM, Ollama, llama.cpp...); key from OPENAI_API_KEY. Credentials in it (user:password@, ?key=) are never shown or stored: give it again with --resume."),
    llm_timeout: float = typer.Option(300.0, help="Seconds one proposal may take: every request, retry and re-ask (streamed, cancelled at the deadline)."),
    temperature: float = typer.Option(0.2, min=0.0, max=2.0, help="The LLM's sampling temperature."),
    context_tokens: Optional[int] = typer.Option(None, min=512, help="The LLM's context window in tokens (default: what the server says)."),
    llm_retries: int = typer.Option(2, min=0, help="Retries of an LLM request after a connection error, HTTP 429 or 5xx."),
    price_in: float = typer.Option(0.0, help="USD per million prompt tokens (for the cost column)."),
    price_out: float = typer.Option(0.0, help="USD per million completion tokens."),
    evidence: bool = typer.Option(True, "--evidence/--no-evidence", metavar="", help="Leave the simulator's ranking of known orders (and their sources) out of an LLM's prompt (--no-evidence): what the model proposes on its own."),
    dtype: Optional[str] = typer.Option(None, help="Input dtype (the kernel's first by default)."),
    timeout: float = typer.Option(300.0, help="Seconds allowed to each verification worker."),
    no_ncu: bool = typer.Option(False, "--no-ncu", metavar="", help="Do not profile with ncu."),
    in_place: bool = typer.Option(False, "--in-place", metavar="", help="Write the best kernel back into KERNEL, unless you edited it during the run (then best.diff is left in the run folder)."),
    resume: Optional[str] = typer.Option(None, "--resume", help="Continue the run RUN_ID."),
    workdir: str = typer.Option(".swizzleperf", help="Where runs are recorded."),
    world_size: Optional[int] = typer.Option(None, "--world-size", min=2, help="Ranks of a distributed kernel; default: the visible GPUs, else 4 (simulated)."),
    problem: Optional[str] = typer.Option(None, "--problem", help="A distributed kernel's benchmark problem: a name, or your own sizes (M=8192,N=29568,K=8192; flash decode B=,H=,H_kv=,D=,S=); default: its first."),
    app: Optional[str] = typer.Option(None, "--app", help="Your own command that launches --kernel (e.g. \"python app.py\"): one launch is captured and its tile mapping lifted, no KernelSpec needed."),
    kernel_name: Optional[str] = typer.Option(None, "--kernel", help="With --app: the @triton.jit kernel's function name."),
    test: Optional[str] = typer.Option(None, "--test", help="With --app: your test command, run at the end against the optimized kernel."),
    top: Optional[int] = typer.Option(None, "--top", min=1, help="With --app and no --kernel: optimize the N hottest kernels whose tile order can matter, in turn (one summary table)."),
    allow_unboxed_writes: bool = typer.Option(False, "--allow-unboxed-writes", metavar="", help="Run model-written code even where the worker's box cannot make the file system read-only (no mount namespace, no Landlock): it could then write anywhere you can. Also SWIZZLEPERF_ALLOW_UNBOXED_WRITES=1."),
) -> None:
    """Optimize the block swizzle of KERNEL (or, for a distributed kernel, its overlap
    configuration), or of your own app's kernels with --app CMD (the hottest one whose tile order
    can matter; --kernel NAME picks it yourself), or continue a run with --resume RUN_ID."""
    from swizzleperf.agent.loop import run
    from swizzleperf.agent.loop.record import RecordError, UnknownRunError
    from swizzleperf.kernels.spec import KernelLoadError
    from swizzleperf.hwspecs import UnknownHardwareError
    _an_id(resume, "--resume", "a run id (as a run prints it: --resume 20261207-103913-cb98)")
    if kernel is None and resume is None and app is None:
        _fail("give a kernel module (e.g. kernels/gemm.py), --app CMD --kernel NAME, or --resume RUN_ID")
    if resume is not None:
        _resume_takes_no_other_options(ctx, resume)
    _numbers_in_range(ctx)
    _known_endpoint(base_url)
    _known_hw(hw)
    _options_fit_the_kernel(ctx, kernel, app)
    from swizzleperf import sandbox
    if allow_unboxed_writes:
        sandbox.allow_unboxed_writes()
    if sandbox.write_refusal():
        _fail(sandbox.write_refusal())
    _interruptible()
    _check_llm(model, base_url, resume, llm_timeout)
    if app and kernel_name is None and kernel is None and resume is None:
        choice = _bottlenecks(app, top or 1, hw, workdir)
        if top is not None:
            return _optimize_in_turn(ctx, choice)
        kernel_name = choice.chosen[0].kernel
    elif top is not None:
        _fail("--top goes with --app CMD and no --kernel: the N hottest kernels of the app are optimized in turn")
    prepared = _capture_app(app, kernel_name, test, kernel, resume, workdir) if (app or kernel_name or test) else None
    kernel = str(prepared.module_path) if prepared else kernel
    progress = Progress(iterations)
    try:
        with progress:
            if resume:
                outcome = run.resume(resume, workdir=workdir, on_event=progress, base_url=base_url)
            else:
                options = run.RunOptions(kernel=kernel, hw=hw, iterations=iterations, plateau=plateau,
                                         target_speedup=target_speedup, target_l2=target_l2,
                                         **_llm_options(model, base_url, llm_timeout, temperature, context_tokens,
                                                        llm_retries, evidence, price_in, price_out),
                                         dtype=dtype, timeout_s=timeout, use_ncu=not no_ncu,
                                         in_place=in_place and not prepared, workdir=workdir, world_size=world_size,
                                         problem=problem, time_budget_s=time_budget, roof_margin=roof_margin)
                outcome = run.start(options, on_event=progress)
    except (KernelLoadError, UnknownHardwareError, UnknownRunError, run.RunError, RecordError) as exc:
        _fail(str(exc))
    except sqlite3.DatabaseError as exc:
        _fail(f"{Path(workdir) / 'swizzleperf.db'} is not a usable run record ({exc}): move it "
              f"away or give another --workdir")
    except KeyboardInterrupt:
        run_id = progress.run_id or resume   # progress's: set once the run's row is in the record
        if run_id is None:   # a planted record that stalled the start (#41 round ten): no run to resume
            errors.print("interrupted before the run was recorded: nothing was saved, there is nothing to resume",
                         markup=False)
        else:
            errors.print(f"interrupted: the run is saved; continue it with --resume {_plain(run_id)}"
                         + (f" --workdir {_plain(workdir)}" if workdir != ".swizzleperf" else ""), markup=False)
        raise typer.Exit(code=130)
    _print_summary(outcome)
    if outcome.report.get("outputs_error"):
        errors.print(f"warning: {_plain(outcome.report['outputs_error'])}", markup=False)
    if outcome.report.get("in_place"):
        console.print(f"--in-place: {_plain(outcome.report['in_place'])}", markup=False)
    baseline = outcome.report.get("baseline") or {}
    if baseline.get("verdict") not in (None, "PASS"):
        _fail(outcome.report["stop_reason"])
    if prepared:
        _finish_app(outcome, prepared, in_place, test)
    if outcome.status == run.STALLED:
        _fail(f"{outcome.report['stop_reason']}; the run is saved: continue it with --resume "
              f"{outcome.run_id} once the proposer answers")
    if outcome.status == run.NO_CANDIDATE:
        attempts = outcome.report.get("attempts") or [{}]
        _fail(f"the proposer gave no candidate in any of its {len(attempts)} proposals (the last: "
              f"{attempts[-1].get('reason')}); "
              f"every request is in {outcome.run_dir / 'transcript.jsonl'}")
    return outcome


#: What ``optimize --resume`` takes besides the run: the record's folder and the endpoint again.
_RESUME_TAKES = {"resume", "workdir", "base_url"}


def _resume_takes_no_other_options(ctx: typer.Context, resume: str) -> None:
    """A resumed run goes on with the options it started with: one given beside ``--resume``
    (``--in-place``, a KERNEL, ``-n``...) is one line (exit 2), not silently dropped (#41, round
    eight: ``--resume ID --in-place`` wrote nothing and said nothing)."""
    given = [(param.opts[0] if param.opts and param.opts[0].startswith("-") else param.name.upper())
             for param in ctx.command.params if param.name not in _RESUME_TAKES   # by name: typer may bring its own click
             and getattr(ctx.get_parameter_source(param.name), "name", "") == "COMMANDLINE"]
    if given:
        _fail(f"--resume {_plain(resume)} goes on with the options the run started with; "
              f"{', '.join(given)} {'is' if len(given) == 1 else 'are'} not taken here: start a new run with "
              f"{'it' if len(given) == 1 else 'them'} (--workdir and --base-url are taken)")


def _llm_options(model, base_url, llm_timeout, temperature, context_tokens, llm_retries, evidence, price_in,
                 price_out) -> dict:
    """The LLM options of ``optimize`` and ``eval`` as ``run.RunOptions`` names them (``EvalOptions``
    and ``AppsOptions`` name them the same): one proposer, built by agent/loop/run.py from them, for a
    run, a bundled kernel's row and an app's row alike. The API key is none of them: the proposer
    reads ``OPENAI_API_KEY`` from its process's environment."""
    return dict(model=model, base_url=base_url, llm_timeout_s=llm_timeout, temperature=temperature,
                context_tokens=context_tokens, llm_retries=llm_retries, evidence=evidence,
                price_in_per_mtok=price_in, price_out_per_mtok=price_out)


def _check_llm(model: str | None, base_url: str | None, resume: str | None, llm_timeout: float) -> None:
    """``--base-url`` without ``--model`` is one line (no endpoint would be asked); with ``--model``
    (a new run or eval), one request of one token before anything starts: a dead endpoint, a
    refused key or an unknown model is one line and nothing is recorded."""
    if resume:
        return   # the run's own model; --base-url gives its endpoint's credentials again
    if base_url and not model:
        _fail(f"--base-url {base_url} goes with --model NAME (the model it serves); without --model "
              f"the built-in search policy proposes and no endpoint is asked")
    if not model:
        return
    from swizzleperf.agent.proposers.base import ProposerError
    from swizzleperf.agent.proposers.chat import ChatClient, ChatSettings
    try:
        client = ChatClient(ChatSettings(model=model, base_url=base_url, deadline_s=llm_timeout, retries=0))
        with console.status(f"asking {_text(client.url)} for one token of {_text(model)}"):
            client.check()
    except (ProposerError, ValueError) as exc:
        _fail(f"{exc} (one request made before the run; nothing was started)")


def _bottlenecks(app, top: int, hw, workdir):
    """``--app CMD`` without ``--kernel``: the app profiled once, its kernels listed, the choice
    and each hotter kernel passed over printed (agent/capture/bottleneck.py)."""
    from swizzleperf.agent.capture import bottleneck
    from swizzleperf.agent.capture.capture import CaptureError
    from swizzleperf.hwspecs import UnknownHardwareError
    try:
        with console.status(f"running `{_text(app)}` once under a kernel trace"):
            profile = bottleneck.profile_app(app, Path(workdir), hw=hw)
        _print_profile(profile)
        choice = bottleneck.choose(profile, top)
    except (CaptureError, UnknownHardwareError) as exc:
        _fail(str(exc))
    for line in choice.lines():
        console.print(_plain(line), markup=False)
    return choice


def _print_profile(profile) -> None:
    from swizzleperf.agent.capture.bottleneck import table_rows
    table = Table(title=f"Triton kernels of `{_text(profile.app)}`, hottest first")
    for column in ("kernel", "where", "calls", "largest grid", "programs", "waves", "time", "share", "time source"):
        table.add_column(column)
    for row in table_rows(profile):
        table.add_row(*(_text(c) for c in row))
    console.print(table)
    console.print(f"time: {_plain(profile.note or profile.source)}; waves at {_plain(profile.wave_note)}",
                  markup=False)


def _optimize_in_turn(ctx: typer.Context, choice) -> None:
    """``--top N``: each chosen kernel optimized as ``--app CMD --kernel NAME`` would be (one run
    each, in the same run record), then one summary table."""
    results = []
    for row in choice.chosen:
        console.rule(f"{_text(row.kernel)} ({'-' if row.share is None else f'{row.share:.0%}'} of the time)")
        try:
            outcome = ctx.invoke(ctx.command.callback, **{**ctx.params, "kernel_name": row.kernel, "top": None})
        except typer.Exit as exc:
            results.append((row, f"failed (exit {exc.exit_code}: above)", "-"))
            continue
        results.append((row, f"{outcome.status}: {outcome.report.get('stop_reason', '')}", _gain(outcome.report)))
    table = Table(title="--top: the kernels optimized in turn")
    for column in ("kernel", "share", "outcome", "best vs baseline"):
        table.add_column(column)
    for row, status, gain in results:
        table.add_row(_text(row.kernel), "-" if row.share is None else f"{row.share:.1%}", _text(status[:120]),
                      _text(gain))
    console.print(table)
    if any(status.startswith("failed") for _, status, _ in results):
        raise typer.Exit(code=2)


def _gain(report: dict) -> str:
    """Best against baseline in a few characters: measured speedup, else the L2 hit rates."""
    best, base = report.get("best") or {}, report.get("baseline") or {}
    if best.get("speedup_vs_baseline") is not None:
        return f"{best['speedup_vs_baseline']:.3f}x"
    if best.get("l2_hit_rate") is not None and base.get("l2_hit_rate") is not None:
        return f"L2 {base['l2_hit_rate']:.1%} -> {best['l2_hit_rate']:.1%} ({best.get('source', '')})"
    return "-"


def _capture_app(app, kernel_name, test, kernel, resume, workdir):
    """``--app CMD --kernel NAME``: capture, lift and generate the kernel module
    (agent/capture/user_kernel.py)."""
    from swizzleperf.agent.capture import user_kernel
    from swizzleperf.agent.capture.capture import CaptureError
    from swizzleperf.agent.capture.lift import LiftError
    from swizzleperf.kernels.spec import KernelLoadError
    if app is None or kernel_name is None:
        _fail("--app and --kernel go together (and --test needs them): --app \"python app.py\" --kernel matmul_kernel")
    if kernel is not None or resume is not None:
        _fail("give either a kernel module, or --app with --kernel, or --resume RUN_ID")
    try:
        with console.status(f"running `{_text(app)}` to capture a launch of {_text(kernel_name)}"):
            prepared = user_kernel.prepare(app, kernel_name, Path(workdir))
    except (CaptureError, LiftError, KernelLoadError) as exc:
        _fail(str(exc))
    console.print(_plain(prepared.capture.describe()), markup=False)
    if prepared.capture.launch.get("cuda_on_cpu"):
        console.print(_plain(prepared.capture.launch["cuda_on_cpu"]), markup=False)
    lifted = prepared.lifted
    how = user_kernel.describe_rewrite(lifted.kind, prepared.user_file.name, lifted.lines)
    console.print(_plain(f"{how}, into {lifted.target_name}({', '.join(lifted.arg_names)}); generated "
                         f"{prepared.module_path}"), markup=False)
    return prepared


def _finish_app(outcome, prepared, in_place: bool, test) -> None:
    """``user.diff`` of your file, ``--in-place``, ``--test`` (agent/capture/user_kernel.py)."""
    from swizzleperf.agent.capture import user_kernel
    with console.status(f"running the test `{_text(test)}`" if test else "writing user.diff"):
        summary = user_kernel.finish(outcome, prepared, in_place, test)
    for note in summary["lift_notes"]:
        console.print(f"note: {_plain(note)}", markup=False)
    console.print(f"the patch to {_plain(prepared.user_file)}: {_plain(summary['user_diff'])}", markup=False)
    if summary["in_place"]:
        console.print(f"--in-place: {_plain(summary['in_place'])}", markup=False)
    if summary["test"]:
        t = summary["test"]
        if not t["passed"]:
            _fail(f"your test `{t['command']}` failed against the optimized kernel (exit {t['exit_code']}: "
                  f"{t['last_line']}; {t['log']})")
        console.print(f"your test `{_plain(t['command'])}` passed against the optimized kernel", markup=False)


def _print_summary(outcome) -> None:
    r = outcome.report
    console.print()
    if r.get("distributed"):
        return _print_distributed_summary(outcome)
    from swizzleperf.agent.loop.report import order_notes
    table, shared = _orders_table(r)
    console.print(table)
    if shared:
        console.print(_plain(shared), markup=False)
    for note in order_notes(r):
        console.print(_plain(note), markup=False)
    best = r.get("best") or {}
    if "speedup_vs_baseline" in best:
        noise = "" if best["beyond_noise_vs_baseline"] else " (within the measured spread)"
        console.print(f"best vs baseline: {best['speedup_vs_baseline']:.3f}x{noise}")
    best_roof = ((r.get("roof") or {}).get("orders") or {}).get("best") or {}
    if best_roof.get("line"):
        console.print(f"roof of the best ({_plain(best_roof['status'])}): {_plain(best_roof['line'])}", markup=False)
    console.print(f"stopped: {_plain(r['stop_reason'])}", markup=False)
    console.print(f"run {_plain(outcome.run_id)} ({outcome.status}): {_plain(outcome.run_dir)}", markup=False)
    for line in _best_lines(r, outcome.run_dir):
        console.print(_plain(line), markup=False, soft_wrap=True)


#: The order table's columns: name and how each row gives its cell.
_ORDER_COLUMNS = ("order", "L2 hit rate", "source", "time", "time source")


def _orders_table(r: dict) -> tuple:
    """``(table, line)``: baseline, expert and best; a column whose cell is the same in every row
    (the simulator as the source, "not measured") leaves the table for the line under it, so that
    the table fits 80 columns (#45: ``simulated:mi300x`` was cut there)."""
    from swizzleperf.agent.loop.report import shown_name, time_cells
    rows = [(f"{label}: {shown_name(f)}", f"{f['l2_hit_rate']:.1%}", f["source"] or "n/a", *time_cells(f))
            for label in ("baseline", "expert", "best")
            if (f := r.get(label)) and f.get("l2_hit_rate") is not None]
    same = {i for i in range(2, len(_ORDER_COLUMNS)) if rows and len({row[i] for row in rows}) == 1}
    table = Table(title=f"{_text(r['kernel'])} on {_text(r['hardware'])} ({_text(r['mode'])})")
    for i, column in enumerate(_ORDER_COLUMNS):
        if i not in same:
            table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*(_text(c) for i, c in enumerate(row) if i not in same))
    shared = "; ".join(f"{_ORDER_COLUMNS[i]}: {rows[0][i]}" for i in sorted(same)
                       if not (_ORDER_COLUMNS[i] == "time source" and rows[0][i] == "n/a"))
    return table, f"every order's {shared}" if shared else ""


def _best_lines(r: dict, run_dir: Path) -> list:
    """What the run leaves you: the best kernel file and best.diff, and where the best was verified."""
    from swizzleperf.agent.loop.report import numerics_text
    run_dir = Path(run_dir)   # a run outcome's run_dir may be a string
    best = r.get("best") or {}
    if not best or r.get("distributed"):
        return []
    if best.get("kind") == "baseline":
        return [f"no order beat your kernel's own: nothing to apply ({run_dir / 'best.diff'} is empty)"]
    scope = best.get("permutation_scope") or f"permutation verified {best.get('permutation_verified')}"
    from swizzleperf.agent.loop.report import shown_name
    lines = [f"best: {shown_name(best)}: {scope}; {numerics_text(r)}"]
    if r.get("best_kernel_file"):
        lines.append(f"best kernel: {r['best_kernel_file']}")
    elif r.get("best_kernel_refused"):
        lines.append(f"best kernel {r['best_kernel_refused']}")
    if (run_dir / "best.diff").exists():
        diff = run_dir / "best.diff"
        # quoted for a shell: a file named `$(touch x).py` is a name, not a command (#41, round eight)
        target = shlex.quote(str(r["kernel_path"])) if r.get("kernel_path") else "KERNEL"
        lines.append(f"best.diff: {diff} (`patch {target} {shlex.quote(str(diff))}` applies it)")
    return lines


def _interruptible() -> None:
    """Ctrl-C and SIGTERM (``timeout``, or ``eval`` stopping its workers) both raise KeyboardInterrupt,
    whose handlers save the run; SIGINT too where the process was started with it ignored."""
    def interrupt(signum, frame):
        raise KeyboardInterrupt(signal.Signals(signum).name)   # the run's report names it
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, interrupt)


def _eval_events(progress: Progress):
    """What ``eval`` and its workers print: a rule per kernel, worker starts and ends, the run's lines."""
    def on_event(kind: str, data: dict) -> None:
        if kind == "eval":
            name = _plain(data["name"])
            console.print(f"eval {name} (continue it with --resume {name})", markup=False)
        elif kind in ("kernel", "skip"):
            console.rule(f"{_text(data['name'])}{' (finished earlier: skipped)' if kind == 'skip' else ''}")
        elif kind in ("run", "target", "worker"):
            console.print(f"{'run ' if kind == 'run' else ''}{_plain(data['name'])}", markup=False)
            if data.get("running"):
                progress.status.update(f"running: {', '.join(_text(n) for n in data['running'])}")
        elif kind == "failed":   # the reason and the name as text, as the --apps lines (#41)
            console.print(f"[red]{_text(data['name'])} failed[/red]: {_text(data['reason'])}")
        else:
            progress(kind, data)
    return on_event


@app.command("eval")
def eval_command(
    ctx: typer.Context,
    kernels: str = typer.Option("all", help="all, or a comma-separated list of bundled kernels."),
    hw: Optional[str] = typer.Option(None, "--hw", help="Hardware spec; default the detected GPU, else mi300x simulated."),
    iterations: int = typer.Option(8, "--iterations", "-n", min=1, help="Proposals per kernel at most."),
    model: Optional[str] = typer.Option(None, help="LLM model (OpenAI-compatible) that proposes for every kernel, or with --apps every app's row; default the built-in policy."),
    base_url: Optional[str] = typer.Option(None, help="OpenAI-compatible endpoint; key from OPENAI_API_KEY (the apps never see it). Credentials in it are never shown or stored: give it again with --resume."),
    llm_timeout: float = typer.Option(300.0, help="Seconds one proposal may take: every request, retry and re-ask (streamed, cancelled at the deadline)."),
    temperature: float = typer.Option(0.2, min=0.0, max=2.0, help="The LLM's sampling temperature."),
    context_tokens: Optional[int] = typer.Option(None, min=512, help="The LLM's context window in tokens (default: what the server says)."),
    llm_retries: int = typer.Option(2, min=0, help="Retries of an LLM request after a connection error, HTTP 429 or 5xx."),
    price_in: float = typer.Option(0.0, help="USD per million prompt tokens (for the cost column)."),
    price_out: float = typer.Option(0.0, help="USD per million completion tokens."),
    evidence: bool = typer.Option(True, "--evidence/--no-evidence", metavar="", help="Leave the simulator's ranking of known orders (and their sources) out of an LLM's prompt (--no-evidence): what the model proposes on its own."),
    gpus: str = typer.Option("1", "--gpus", help="Worker processes, each pinned to one GPU (CUDA_VISIBLE_DEVICES), or auto: every visible GPU. Simulated evals run their workers on the CPU. With --apps, more workers than GPUs share them: timing and ncu take a GPU in turn, the rest (the app's runs and its kernel trace too) runs side by side."),
    out: Optional[str] = typer.Option(None, help="Where the tables and plots are written (default: WORKDIR/results)."),
    resume: Optional[str] = typer.Option(None, "--resume", help="Continue the eval EVAL_ID."),
    again: Optional[list[str]] = typer.Option(None, "--again", help="With --resume of an --apps eval: run the apps whose row has this outcome once more (e.g. \"tool failure\" after an upgrade), their rows replaced; repeatable."),
    workdir: str = typer.Option(".swizzleperf", help="Where runs are recorded."),
    apps: Optional[str] = typer.Option(None, "--apps", help="A folder of apps: each file runs as `python FILE` in it through the optimize --app path, one row each (OUT.md, OUT.json with --out OUT)."),
    files: Optional[str] = typer.Option(None, "--files", help="With --apps: a text file of the names to take from the folder, one a line (# comments), a path inside it for an app in a subfolder (ops/gemm.py); default every *.py."),
    row_budget: float = typer.Option(600.0, "--row-budget", help="With --apps: seconds one app's row may take; past them it is stopped and marked."),
    no_ncu: bool = typer.Option(False, "--no-ncu", metavar="", help="With --apps: time the orders on the GPU without profiling each with ncu."),
    ray: bool = typer.Option(False, "--ray", metavar="", help="With --apps: run the rows as Ray tasks, one GPU each (pip install \"swizzleperf\\[ray]\")."),
    ray_address: Optional[str] = typer.Option(None, "--ray-address", help="With --ray: the cluster (default $RAY_ADDRESS or a new local one; local: a new local one)."),
) -> None:
    """Run the optimizer over the bundled kernels and write one table (CSV, markdown) and plots;
    with --apps DIR, over a folder of your apps, one row each. Either proposes with the built-in
    policy, or with --model M as `optimize --model M` does (the endpoint checked once first)."""
    _an_id(resume, "--resume", "an eval id (as an eval prints it: --resume eval-20261207-103913-cb98)")
    _numbers_in_range(ctx)
    _known_endpoint(base_url)
    _known_hw(hw)
    apps_eval = apps is not None or ray or bool(resume and _apps_eval(workdir, resume))
    _eval_options_apply(ctx, apps_eval)
    if base_url and not model and not resume:
        _check_llm(model, base_url, resume, llm_timeout)
    llm = _llm_options(model, base_url, llm_timeout, temperature, context_tokens, llm_retries, evidence, price_in,
                       price_out)
    if apps_eval:
        return _eval_apps(apps, files, hw, iterations, row_budget, gpus, ray, ray_address, out, resume, workdir,
                          not no_ncu, tuple(again or ()), llm, ctx)
    if again:
        _fail("--again runs rows of an --apps eval again: give --resume EVAL_ID of one")
    from swizzleperf.agent.loop.record import UnknownRunError
    from swizzleperf.agent.loop.run import RunError
    from swizzleperf.kernels.spec import KernelLoadError
    from swizzleperf.eval.suite import EvalError, EvalOptions, resolve_gpus, run_eval, select_kernels, stored_options
    from swizzleperf.hwspecs import UnknownHardwareError
    _interruptible()
    try:
        if resume is not None:
            _stored_wins(ctx, stored_options(workdir, resume, base_url=base_url), _KERNELS_EVAL_STORED,
                         f"eval {resume}")
        names, left_out = select_kernels(kernels, hw) if resume is None else ([], "")
        if left_out:
            console.print(f"{_plain(left_out)}.", markup=False)
        _check_llm(model, base_url, resume, llm_timeout)
        options = EvalOptions(kernels=names, hw=hw, iterations=iterations, workdir=workdir, out_dir=out,
                              left_out=left_out, **llm)
        with Progress(iterations) as progress:
            eval_id, table, files = run_eval(options, resume, _eval_events(progress), gpus=resolve_gpus(gpus))
    except (EvalError, KernelLoadError, UnknownHardwareError, UnknownRunError, RunError) as exc:
        _fail(str(exc))
    except KeyboardInterrupt:
        errors.print("interrupted: finished kernels are kept, the partial table is written; continue with "
                     "--resume EVAL_ID (printed above)")
        raise typer.Exit(code=130)
    console.print(f"eval {eval_id}: " + ", ".join(_plain(f) for f in files), markup=False)
    print(next(f for f in files if f.suffix == ".md").read_text())  # resumed: where the eval started writing
    unfinished = table[table.status != "finished"]
    if len(unfinished):
        errors.print(f"{len(unfinished)} of {len(table)} rows did not finish ("
                     + ", ".join(f"{_plain(r.kernel)}: {_plain(r.status)}" for r in unfinished.itertuples())
                     + f"; the table says why): continue with --resume {eval_id}", markup=False, soft_wrap=True)
        raise typer.Exit(code=1)


#: ``eval``'s options that only an ``--apps`` eval reads, and those only the bundled kernels' eval
#: reads; the LLM options go to both (an apps row runs the optimize --app path with the same
#: proposer: eval/app_worker.py).
_APPS_ONLY = ("files", "row_budget", "no_ncu", "ray_address", "again")
_KERNELS_ONLY = ("kernels",)


def _eval_options_apply(ctx: typer.Context, apps_eval: bool) -> None:
    """An ``eval`` option the chosen eval would drop is one line (exit 2), not silently ignored."""
    given = {**_given(ctx), **({"evidence": "--no-evidence"} if ctx.params.get("evidence") is False else {})}
    wrong = [given[n] for n in (_KERNELS_ONLY if apps_eval else _APPS_ONLY) if n in given]
    if not wrong or (not apps_eval and wrong == ["--again"]):   # --again without --apps: its own line below
        return
    if apps_eval:
        _fail(f"{', '.join(wrong)} {'applies' if len(wrong) == 1 else 'apply'} to the bundled kernels' eval, not to "
              f"an --apps eval, whose rows are the apps of its folder (--files picks some): leave "
              f"{'it' if len(wrong) == 1 else 'them'} out")
    _fail(f"{', '.join(wrong)} {'applies' if len(wrong) == 1 else 'apply'} only to an --apps eval: give --apps DIR "
          f"(or --resume an --apps eval), or leave {'it' if len(wrong) == 1 else 'them'} out")


def _apps_eval(workdir: str, eval_id: str) -> bool:
    """Whether ``eval_id`` is an ``--apps`` eval of ``workdir``'s record; its stored options that do
    not pass their check are one line (exit 2), not a traceback (#41, round seven)."""
    from swizzleperf.eval.apps import AppsError, stored_options
    try:
        return Path(workdir, "swizzleperf.db").exists() and stored_options(workdir, eval_id) is not None
    except AppsError as exc:
        _fail(str(exc))


def _eval_apps(apps, files, hw, iterations, row_budget, gpus, ray, ray_address, out, resume, workdir,
               use_ncu: bool = True, again: tuple = (), llm: dict | None = None, ctx=None) -> None:
    """``eval --apps DIR``: eval/apps.py, one line per row as it finishes, then the table. With an LLM
    (``llm``: ``_llm_options``; a resumed eval's own), its endpoint is checked once before any row."""
    from swizzleperf.eval.apps import AppsError, AppsOptions, list_apps, run_apps, shown, stored_options
    from swizzleperf.eval.suite import EvalError, resolve_gpus
    if apps is None and resume is None:
        _fail("--ray runs a folder of apps: give --apps DIR")
    from swizzleperf.eval.app_worker import OUTCOMES
    if again and (resume is None or any(o not in OUTCOMES for o in again)):
        _fail(f"--again takes an outcome of a resumed eval's rows ({', '.join(OUTCOMES)}), with --resume EVAL_ID")
    _interruptible()

    def on_row(row: dict, done: int, total: int) -> None:
        color = {"optimized": "green", "verified, no gain": "cyan", "refused": "yellow"}.get(row["outcome"], "red")
        by = f", {escape(shown(row['proposer']))}" if row.get("proposer") else ""
        # the app's name, its kernel's and its output as text, never as markup or escape codes (#41)
        console.print(f"[{done}/{total}] {escape(shown(row['app']))} ({escape(shown(row.get('kernel') or '-'))}, "
                      f"{row['seconds']:.0f} s{by}): [{color}]{_text(row['outcome'])}[/{color}]: "
                      f"{escape(shown((row.get('reason') or '')[:300]))}")
    try:
        options = AppsOptions(apps_dir=apps or "", names=list_apps(apps, files) if apps else [], iterations=iterations,
                              row_budget_s=row_budget, hw=hw, use_ncu=use_ncu, workdir=workdir, out=out, **(llm or {}))
        runs = stored_options(workdir, resume, base_url=options.base_url) if resume else options
        if resume and runs is not None and ctx is not None:
            _stored_wins(ctx, runs, _APPS_EVAL_STORED, f"eval {resume}")
        if runs is not None:   # once for the eval, before its first row: one line and nothing started if down
            _check_llm(runs.model, runs.base_url, None, runs.llm_timeout_s)
        with console.status(f"running the apps of {escape(shown(apps or resume))}"):
            eval_id, summary, written = run_apps(
                options, resume, on_row, gpus=resolve_gpus(gpus), ray=ray, ray_address=ray_address,
                on_start=lambda i: console.print(f"eval {i} (if it stops, continue it with --resume {i})", markup=False),
                again=again)
    except (AppsError, EvalError) as exc:
        _fail(str(exc))
    except KeyboardInterrupt:
        errors.print("interrupted: the finished rows are kept and the partial table written; continue with "
                     "--resume EVAL_ID (printed above)")
        raise typer.Exit(code=130)
    share = summary["answered_share"]
    console.print(f"eval {eval_id}: {summary['answered']} of {summary['ran']} "
                  f"answered{f' ({share:.0%})' if share is not None else ''}; "
                  + ", ".join(f"{k} {v}" for k, v in summary["counts"].items() if v)
                  + f"; {', '.join(shown(str(f)) for f in written)}", markup=False)


@app.command("eval-worker", hidden=True)
def eval_worker(
    eval_id: str = typer.Argument(..., help="A registered eval."),
    kernel: str = typer.Argument(..., help="One of its kernels."),
    workdir: str = typer.Option(".swizzleperf", help="Where the eval is recorded."),
) -> None:
    """Run one kernel of an eval (a worker process of ``eval --gpus N``); exit 1 if it did not finish."""
    _an_id(eval_id, "EVAL_ID", "an eval id")
    from swizzleperf.eval.suite import EvalError, run_kernel, stored_options
    from swizzleperf.hwspecs import UnknownHardwareError
    _interruptible()
    try:
        with Progress(stored_options(workdir, eval_id).iterations) as progress:
            status = run_kernel(workdir, eval_id, kernel, _eval_events(progress))
    except (EvalError, UnknownHardwareError) as exc:
        _fail(str(exc))
    except KeyboardInterrupt:
        errors.print(f"interrupted: {_plain(kernel)} is saved and resumes with the eval", markup=False)
        raise typer.Exit(code=130)
    if status != "finished":
        raise typer.Exit(code=1)


@app.command()
def simulate(
    kernel: str = typer.Argument(..., help="Kernel module, e.g. kernels/gemm.py."),
    hw: str = typer.Option("mi300x", "--hw", help="Hardware spec to simulate."),
    swizzle: Optional[str] = typer.Option(None, help="Catalog order: row-major, column-major, grouped-m:G, grouped-n:G, xcd-contiguous[:D], xcd-grouped-m:G[:D]; default the kernel's own."),
    swizzle_file: Optional[str] = typer.Option(None, help="A file holding a rewrite-target source to simulate instead."),
    meta: Optional[str] = typer.Option(None, help="Meta-parameter overrides, e.g. BLOCK_M=128,BLOCK_N=256,BLOCK_K=64."),
    as_json: bool = typer.Option(False, "--json", metavar="", help="Print one JSON object."),
    traced: bool = typer.Option(False, "--traced", metavar="", help="Use the generic tracer even where the kernel has an access model."),
    probe: Optional[str] = typer.Option(None, help="A stored dispatch probe (swizzleperf hw --probe): place programs as it measured."),
) -> None:
    """Predict the L2 hit rate and DRAM traffic of KERNEL's default problem under one order."""
    import json
    from swizzleperf.agent.verification.simulate import simulate_kernel
    result = _guarded(lambda: simulate_kernel(Path(kernel), hw, swizzle, Path(swizzle_file) if swizzle_file else None,
                                              meta, traced, Path(probe) if probe else None))
    if as_json:
        print(json.dumps(result))
        return
    console.print(f"{_plain(result['kernel'])} on {result['hardware']} ({result['source']}), order "
                  f"{_plain(result['swizzle'])}: L2 hit rate {result['l2_hit_rate']:.1%}, DRAM "
                  f"{result['dram_bytes'] / 1e9:.2f} GB, per domain "
                  f"{', '.join(f'{r:.0%}' for r in result['per_domain_hit_rate'])} "
                  f"({result['seconds']:.1f} s)\n{_plain_lines(result['model'])}", markup=False)


@app.command()
def analyze(
    kernel: str = typer.Argument(..., help="Kernel module, e.g. kernels/gemm.py."),
    hw: str = typer.Option("mi300x", "--hw", help="Hardware spec."),
    swizzle: Optional[str] = typer.Option(None, help="Catalog order to analyze; default the kernel's own."),
    meta: Optional[str] = typer.Option(None, help="Meta-parameter overrides, e.g. BLOCK_M=128."),
    traced: bool = typer.Option(False, "--traced", metavar="", help="Use the generic tracer even where the kernel has an access model."),
    probe: Optional[str] = typer.Option(None, help="A stored dispatch probe (swizzleperf hw --probe): place programs as it measured."),
) -> None:
    """Print the memory-access analysis a proposer is shown."""
    from swizzleperf.agent.verification.simulate import analyze_kernel
    print(_guarded(lambda: analyze_kernel(Path(kernel), hw, swizzle, meta, traced, Path(probe) if probe else None)))


def _guarded(action):
    """Run ``action``; the errors a user can cause become one line. ``simulate``, ``analyze`` and
    ``profile KERNEL`` read their kernel's spec through it: the capture module is loaded first, so
    that a module ``optimize --app`` generated has its spec built from its capture's data (it
    registers that builder with agent/verification/load.py), the module itself never imported here."""
    from swizzleperf.agent.capture import capture  # noqa: F401  builds a generated --app module's spec
    from swizzleperf.agent.verification.simulate import SimulateError
    from swizzleperf.kernels.spec import KernelLoadError
    from swizzleperf.hwspecs import UnknownHardwareError
    try:
        return action()
    except (SimulateError, KernelLoadError, UnknownHardwareError) as exc:
        _fail(str(exc))


@app.command("profile")
def profile_command(
    kernel: Optional[str] = typer.Argument(None, help="Kernel module, e.g. kernels/gemm.py (or --app CMD)."),
    swizzle: Optional[str] = typer.Option(None, help="Catalog order to profile beside the kernel's own (compared with it)."),
    hw: Optional[str] = typer.Option(None, "--hw", help="Hardware spec; default the detected GPU, else mi300x simulated."),
    dtype: Optional[str] = typer.Option(None, help="Input dtype (the kernel's first by default)."),
    workdir: str = typer.Option(".swizzleperf", help="Where the profiler's raw output is kept."),
    app_command: Optional[str] = typer.Option(None, "--app", help="Your own command (e.g. \"python app.py\"): run once under a kernel trace, its Triton kernels listed by time."),
    as_json: bool = typer.Option(False, "--json", metavar="", help="With --app: print only JSON, one object per kernel."),
) -> None:
    """Print the filtered profile a proposer is shown: the few figures that bear on the order, each
    with value, unit, source and meaning (ncu / rocprofv3 on a matching GPU, else the simulator);
    or, with --app CMD, every Triton kernel the app launches: calls, largest grid, time, share,
    and whether its tile order can matter."""
    _known_hw(hw)
    if app_command is not None:
        return _profile_app(app_command, hw, workdir, as_json)
    if kernel is None:
        _fail("give a kernel module (e.g. kernels/gemm.py) or --app CMD")
    from swizzleperf.agent.verification.measure import profile_kernel
    result = _guarded(lambda: profile_kernel(Path(kernel), hw, swizzle, dtype, Path(workdir)))
    console.print(_plain(f"{result['kernel']} on {result['hardware']} ({result['mode']}): {result['message']}"),
                  markup=False)
    for order in result["orders"]:
        table = Table(title=f"order: {_text(order['label'])}")
        for column in ("#", "figure", "value", "unit", "source", "vs kernel's own", "meaning"):
            table.add_column(column)
        for e in order["profile"]:
            value = ", ".join(f"{v:.3g}" for v in e["value"]) if isinstance(e["value"], list) else f"{e['value']:.4g}"
            change = "" if e.get("vs_baseline") in (None, 0) else f"{e['vs_baseline']:+.4g}"
            table.add_row(*(_text(c) for c in (e["rank"], e["name"], value, e["unit"], e["source"], change,
                                                e["meaning"])))
        console.print(table)
        if order["notes"]:
            console.print(f"notes: {_plain(order['notes'])}", markup=False)
    console.print(f"raw output and modules: {_plain(result['folder'])}", markup=False)


def _profile_app(command: str, hw, workdir: str, as_json: bool) -> None:
    """``profile --app CMD``: the app's Triton kernels by time, each with why its order can or cannot matter."""
    import json
    from swizzleperf.agent.capture import bottleneck
    from swizzleperf.agent.capture.capture import CaptureError
    from swizzleperf.hwspecs import UnknownHardwareError
    try:
        if as_json:
            profile = bottleneck.profile_app(command, Path(workdir), hw=hw)
        else:
            with console.status(f"running `{_text(command)}` once under a kernel trace"):
                profile = bottleneck.profile_app(command, Path(workdir), hw=hw)
    except (CaptureError, UnknownHardwareError) as exc:
        _fail(str(exc))
    rows = bottleneck.assessed(profile)
    if as_json:
        print(json.dumps(rows, indent=1))
        return
    _print_profile(profile)
    for row in rows:
        how = "mapping lifted" if row["rewrite"] == "lifted" else "program ids remapped"
        verdict = f"its tile order can matter ({how})" if row["order_can_matter"] else row["passed_over_because"]
        console.print(f"{_plain(row['kernel'])}: {_plain(verdict)}", markup=False)
    console.print(f"the app's output and the trace: {_plain(profile.folder)}", markup=False)


@app.command("hw")
def hw_command(hw: Optional[str] = typer.Option(None, "--hw", help="The spec a run would use instead of the detected one."),
               probe: bool = typer.Option(False, "--probe", metavar="", help="Measure where program ids land on the live NVIDIA GPU."),
               workdir: str = typer.Option(".swizzleperf", help="Where the probe is stored.")) -> None:
    """Print the detected GPU (or "no GPU") and the hardware spec a run will use."""
    from swizzleperf import hwspecs
    try:
        target = hwspecs.resolve_target(hw)
    except hwspecs.UnknownHardwareError as exc:
        _fail(str(exc))
    console.print(_plain_lines(hwspecs.describe(target)), markup=False)
    if probe:
        if target.device is None or target.device.vendor != "nvidia":
            _fail("--probe needs a live NVIDIA GPU")
        from swizzleperf.profiling import dispatch_probe
        try:
            result = dispatch_probe.probe()
        except dispatch_probe.ProbeError as exc:
            _fail(str(exc))
        path = dispatch_probe.save(result, Path(workdir), target.spec.name)
        console.print(f"{_plain_lines(dispatch_probe.describe(result))}\n(saved to {_plain(path)}; `simulate` "
                      f"and `analyze` take it with --probe)", markup=False)


@app.command("notebook")
def notebook_command(
    ctx: typer.Context,
    run: Optional[str] = typer.Argument(None, help="A run id of the record, or a run folder (e.g. bench/results/real_llm/work/runs/20261124-012842-ba04); default the latest run."),
    workdir: Optional[str] = typer.Option(None, help="The run record (default: .swizzleperf here or in a folder above)."),
    out: Optional[str] = typer.Option(None, "--out", help="The executed notebook (default: reflection_history_RUN.ipynb here)."),
    timeout: float = typer.Option(300.0, help="Seconds one cell may take."),
) -> None:
    """Run notebooks/reflection_history.ipynb headless on one run (no Jupyter): print what it
    shows and write the executed copy, figures included."""
    _an_id(run, "RUN", "a run id or a run folder (leave it out for the latest run)")
    _numbers_in_range(ctx)
    from swizzleperf.eval.notebook import NotebookError, execute
    name = Path(run).name if run else "latest"
    target = Path(out or f"reflection_history_{name}.ipynb")
    try:
        with console.status(f"running the notebook on {_text(run or 'the latest run')}"):
            lines = execute(run, workdir, target, timeout)
    except NotebookError as exc:
        _fail(str(exc))
    for line in lines:
        console.print(_plain(line), markup=False, soft_wrap=True)
    console.print(f"\nexecuted notebook: {_plain(target)}", markup=False)


def _print_distributed_summary(outcome) -> None:
    """The configurations against torch + NCCL, from report.md's table (one source of the text)."""
    from swizzleperf.agent.loop.report import distributed_table
    r = outcome.report
    console.print(_plain(f"{r['kernel']} on {r['hardware']} x {r['distributed']['world_size']} ({r['mode']})"),
                  markup=False)
    for line in distributed_table(r):
        console.print(_plain(line), markup=False)
    console.print(f"stopped: {_plain(r['stop_reason'])}", markup=False)
    console.print(f"report: {_plain(outcome.run_dir / 'report.md')}", markup=False)


def main() -> None:
    """Console-script entry point."""
    sys.exit(app())


if __name__ == "__main__":
    main()

