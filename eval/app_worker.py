"""One app of ``swizzleperf eval --apps DIR``, one row: the worker process and the call that starts it.

The worker (``python -m swizzleperf.eval.app_worker APP ...``, its cwd the app's folder) does what
``swizzleperf optimize --app "python APP"`` does, through the library: the app runs once under a
kernel trace and the hottest kernel whose tile order can matter is chosen
(agent/capture/bottleneck.py), its launch is captured and lifted (agent/capture/user_kernel.py), the
run optimizes it (agent/loop/run.py), and ``user.diff`` is written. Its row, one outcome class:

- ``optimized``: the best order is faster than the kernel's own beyond the measured spread;
- ``verified, no gain``: the run finished and no order won, with why (under one wave, no reuse
  between tiles, at the roof, none beyond noise); on a machine without a GPU nothing is timed, so
  a run is this with the simulator's prediction ("simulated only (no GPU): predicted L2 a -> b");
- ``refused``: the tool's one-line refusal (the lift's, naming the construct and its line; no kernel
  whose order can matter);
- ``app failed``: the app's own non-zero exit, its last line quoted (where the error was raised in
  our hook inside the app, a tool failure);
- ``proposer failed``: the LLM gave no usable candidate (its endpoint went down, its replies never
  parsed): the run stalled or ended without one, as ``optimize`` ends it, its stop reason quoted;
- ``tool failure``: anything else (a defect of ours, always), the traceback in the row's log;
- ``timeout``: the row reached its budget and was stopped (set by :func:`run_row`), or the app
  alone did not finish within the time left to it.

:func:`run_row` (the suite's side) runs the worker in its own session with the row's wall-clock
budget: STOP_GRACE_S before it the worker gets SIGTERM (it stops the app and saves its run), at it
SIGKILL. The worker writes its row to ``row.json`` after every stage, so a row stopped midway keeps
what it knew (the kernel, its grid). A worker that dies without a row is a tool failure.

The row's proposer is the built-in policy, or the LLM of ``RowJob.llm`` (``run.RunOptions``' names,
the same proposer ``optimize --app --model M`` builds): its options go on the worker's command line,
its endpoint (which may hold credentials) in the worker's environment (``BASE_URL_VARIABLE``, taken
out before the app runs), and its API key (``OPENAI_API_KEY``) only by inheritance: never on a
command line, in a row or in a log. The app itself runs without either (``sandbox.app_env``).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import signal
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from swizzleperf import sandbox
from swizzleperf.sandbox.gpu_lock import GPU_LOCK_ENV

OUTCOMES = ("optimized", "verified, no gain", "refused", "app failed", "proposer failed", "tool failure", "timeout")
#: The outcomes that count towards the suite's goal (issue #42): an answer, right or refused with a reason.
ANSWERED = ("optimized", "verified, no gain", "refused")
L2_ROOF = 0.95            # bottleneck.L2_HIT_ENOUGH: a kernel at this hit rate has little for an order to win
STOP_GRACE_S = 10.0       # between SIGTERM and SIGKILL of a worker past its budget
FINISH_S = 10.0           # kept from the run's own time budget for user.diff and the row
#: A row's LLM options, as ``run.RunOptions`` names them (``optimize --model M`` sets the same).
LLM_OPTIONS = ("model", "base_url", "llm_timeout_s", "temperature", "context_tokens", "llm_retries", "evidence",
               "price_in_per_mtok", "price_out_per_mtok")
#: The environment variable that hands the worker its LLM endpoint, credentials included (the kernels'
#: eval hands its workers theirs the same way: eval/workers.py); the worker takes it out of its own.
BASE_URL_VARIABLE = "SWIZZLEPERF_EVAL_BASE_URL"
#: The statuses of a run whose proposer stopped it (agent/loop/run.py STALLED, NO_CANDIDATE): an LLM
#: endpoint that went down, or replies that never gave a candidate. The row is ``proposer failed``.
PROPOSER_STOPS = ("stalled", "no candidate")


@dataclass(frozen=True)
class RowJob:
    """One row to run: the app file, where its log and row go, the run's settings, its budget."""

    app: str                 # absolute path of the app file
    folder: str              # the row's folder: worker.log, row.json
    workdir: str             # the record and the runs (absolute)
    iterations: int = 2
    budget_s: float = 600.0
    hw: str | None = None
    use_ncu: bool = True     # False: timed only, no ncu profile of each candidate (--no-ncu)
    device: str | None = None   # CUDA_VISIBLE_DEVICES of the worker (None: inherited)
    gpu_lock_dir: str | None = None   # several workers share a GPU: its lock folder (sandbox/gpu_lock.py)
    name: str = ""           # the row's name: the app as listed (ops/gemm.py); "" the file's name
    # the LLM's options (LLM_OPTIONS, base_url among them: kept out of reprs); empty: the built-in policy
    llm: dict = field(default_factory=dict, repr=False)


def empty_row(app: str) -> dict:
    """Every column of a row, unknown."""
    return {"app": app, "kernel": None, "grid": None, "programs": None, "waves": None, "outcome": None,
            "reason": "", "seconds": None, "hardware": None, "mode": None, "proposer": None, "baseline_ms": None,
            "baseline_spread_ms": None, "best_ms": None, "best_spread_ms": None, "best_order": None,
            "speedup": None, "speedup_spread": None, "predicted_l2_baseline": None, "predicted_l2_best": None,
            "passed_over": "", "run_dir": None, "log": None}


# -- the suite's side: run one worker within its budget ---------------------------------------------

def worker_command(job: RowJob, row_file: Path) -> list[str]:
    """The worker's command line; its own deadline leaves time for the suite's SIGTERM and SIGKILL.
    The LLM's options are on it as JSON, never its endpoint (``run_row`` puts that in the environment)."""
    deadline = max(1.0, job.budget_s - max(2 * STOP_GRACE_S, 0.05 * job.budget_s))
    command = sandbox.python_command("-m", "swizzleperf.eval.app_worker", job.app, "--workdir", job.workdir,
                                     "--iterations", str(job.iterations), "--budget", f"{deadline:.1f}",
                                     "--row", str(row_file))
    llm = {k: v for k, v in job.llm.items() if k != "base_url"} if job.llm.get("model") else {}
    return (command + (["--hw", job.hw] if job.hw else []) + ([] if job.use_ncu else ["--no-ncu"])
            + (["--llm", json.dumps(llm)] if llm else []))


def run_row(job: RowJob, on_start=lambda process: None) -> dict:
    """Run ``job``'s worker (cwd: the app's folder) and return its row; past ``job.budget_s`` the row
    is a ``timeout``, a worker that died without a row a ``tool failure``. ``on_start(process)`` lets
    a caller stop it (an interrupted suite)."""
    folder = Path(job.folder)
    folder.mkdir(parents=True, exist_ok=True)
    log, row_file = folder / "worker.log", folder / "row.json"
    row_file.unlink(missing_ok=True)
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    if job.device is not None:
        env["CUDA_VISIBLE_DEVICES"] = job.device
    if job.gpu_lock_dir is not None:
        env[GPU_LOCK_ENV] = job.gpu_lock_dir
    env.pop(BASE_URL_VARIABLE, None)
    if job.llm.get("model") and job.llm.get("base_url"):
        env[BASE_URL_VARIABLE] = job.llm["base_url"]
    from swizzleperf.agent.capture.capture import CappedLog
    started = time.monotonic()
    with CappedLog(log) as out:   # the worker's output, capped on disk (LOG_CAP_BYTES, #41)
        process = subprocess.Popen(worker_command(job, row_file), cwd=Path(job.app).parent, stdout=out.fd,
                                   stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                   start_new_session=True)
        out.started()
        on_start(process)
        timed_out = _wait(process, job.budget_s)
    seconds = time.monotonic() - started
    listed = job.name or Path(job.app).name   # the listed name, not a link's
    row = {**empty_row(listed), **_read(row_file)}
    if timed_out:
        row.update(outcome="timeout", reason=f"at its budget of {job.budget_s:.0f} s at the stage "
                                              f"'{row.get('stage') or 'start'}': stopped (--row-budget)")
    elif row["outcome"] is None:
        code = process.returncode
        ended = f"killed by {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"
        row.update(outcome="tool failure", reason=f"the worker died ({ended}): {_last_line(log)}")
    row.pop("stage", None)
    row.update(app=listed, seconds=round(seconds, 1), log=str(log))
    return row


def _wait(process: subprocess.Popen, budget_s: float) -> bool:
    """Wait for the worker; STOP_GRACE_S before the budget SIGTERM to its group, at the budget SIGKILL
    (no row runs past its budget). True if it was stopped."""
    try:
        process.wait(timeout=max(0.5, budget_s - STOP_GRACE_S))
        return False
    except subprocess.TimeoutExpired:
        stop(process)
        return True


def stop(process: subprocess.Popen) -> None:
    """SIGTERM to the worker's process group (it stops its app and saves its run), then SIGKILL."""
    for sig, wait in ((signal.SIGTERM, STOP_GRACE_S), (signal.SIGKILL, None)):
        try:
            os.killpg(process.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            process.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def _read(row_file: Path) -> dict:
    try:
        return json.loads(row_file.read_text())
    except (OSError, ValueError):
        return {}


def _last_line(log: Path) -> str:
    from swizzleperf.agent.capture.capture import log_tail   # a worker's log may hold an app's gigabytes
    lines = [line.strip() for line in log_tail(log).splitlines() if line.strip()]
    return lines[-1][:300] if lines else "(no output)"


# -- the worker's side: the optimize --app path, one row ------------------------------------------

class _Row:
    """The row being built, written to ``row.json`` at every stage."""

    def __init__(self, path: Path, app: str):
        self.path, self.data, self.started = path, {**empty_row(app), "stage": "start"}, time.monotonic()

    def update(self, **fields) -> None:
        if fields.get("stage", self.data["stage"]) != self.data["stage"]:   # the log says where the time went
            print(f"{time.monotonic() - self.started:6.1f} s: {fields['stage']}", flush=True)
        self.data.update(fields)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data, indent=1, default=str))
        tmp.replace(self.path)


def evaluate(app_file: Path, workdir: Path, iterations: int, budget_s: float, row: _Row, hw: str | None = None,
             use_ncu: bool = True, llm: dict | None = None) -> None:
    """The optimize --app path over ``python APP`` (cwd: the app's folder), its outcome in ``row``;
    ``llm`` the LLM's options (``LLM_OPTIONS``), empty or None for the built-in policy."""
    from swizzleperf.agent.capture.capture import AppFailedError, AppTimeoutError, CaptureError, HookFailedError
    from swizzleperf.agent.capture.lift import LiftError
    deadline = time.monotonic() + budget_s
    left = lambda: max(1.0, deadline - time.monotonic())   # noqa: E731
    if not str(app_file).isprintable():   # a newline in the path: not a file a kernel's record may name (#41)
        row.update(outcome="refused", reason=f"the app's path {ascii(str(app_file))[:300]} holds a newline or "
                                             f"another unprintable character: rename it to run it")
        return
    # `./` before a name that begins with `-`: python would take `-cprint(...)#.py` for an option and
    # run its text as code (#41 round fourteen; a record edited to name one ran it on --resume)
    name = f"./{app_file.name}" if app_file.name.startswith("-") else app_file.name
    app = f"{shlex.quote(sys.executable)} {shlex.quote(name)}"
    try:
        _optimize(app, workdir, iterations, left, row, hw, use_ncu, llm or {})
    except AppTimeoutError as exc:
        row.update(outcome="timeout", reason=_as_typed(exc))
    except HookFailedError as exc:   # our code inside the app's process: a defect of ours
        row.update(outcome="tool failure", reason=_as_typed(exc))
    except AppFailedError as exc:
        row.update(outcome="app failed", reason=_as_typed(exc))
    except (CaptureError, LiftError) as exc:   # InterpreterGapError too: the construct, its line, what to install
        row.update(outcome="refused", reason=_as_typed(exc))
    except Exception as exc:   # a defect of ours: the row says so, the traceback goes to the log
        traceback.print_exc()
        row.update(outcome="tool failure", reason=f"{type(exc).__name__}: {exc}"[:500])


def _as_typed(exc: Exception) -> str:
    """The message with the app's command as a user types it (``python APP``)."""
    return str(exc).replace(shlex.quote(sys.executable), "python")


def _optimize(app: str, workdir: Path, iterations: int, left, row: _Row, hw: str | None, use_ncu: bool = True,
              llm: dict | None = None) -> None:
    from swizzleperf.agent.capture import bottleneck, user_kernel
    from swizzleperf.agent.loop import run
    row.update(stage="profile")
    profile = bottleneck.profile_app(app, workdir, timeout_s=left(), hw=hw)
    hottest = profile.rows[0]   # shown on a refused row: the kernel that was looked at first
    row.update(kernel=hottest.kernel, grid="x".join(map(str, hottest.grid)), programs=hottest.programs,
               waves=_round(hottest.waves))
    choice = bottleneck.choose(profile)
    kernel = choice.chosen[0]
    row.update(stage="capture", kernel=kernel.kernel, grid="x".join(map(str, kernel.grid)), programs=kernel.programs,
               waves=_round(kernel.waves), passed_over="; ".join(f"{r.kernel}: {why}" for r, why in choice.passed_over))
    prepared = user_kernel.prepare(app, kernel.kernel, workdir, timeout_s=left())
    launch = prepared.capture.launch
    llm = llm if (llm or {}).get("model") else {}
    row.update(stage="run", grid="x".join(map(str, launch["grid"])), programs=launch["programs"],
               waves=_round(launch["programs"] / profile.wave) if profile.wave else None,
               proposer=proposer_name(llm.get("model")))
    options = run.RunOptions(kernel=str(prepared.module_path), hw=hw, iterations=iterations, workdir=str(workdir),
                             time_budget_s=max(1.0, left() - FINISH_S), use_ncu=use_ncu, **llm)
    outcome = run.start(options)
    row.update(stage="finish", run_dir=str(outcome.run_dir))
    summary = user_kernel.finish(outcome, prepared, in_place=False, test=None)
    row.update(**verdict(outcome.report, summary))


def proposer_name(model: str | None) -> str:
    """The row's proposer: ``policy`` (the built-in search), or ``llm:MODEL``."""
    return f"llm:{model}" if model else "policy"


def verdict(report: dict, summary: dict) -> dict:
    """The row's outcome and figures from a finished run's report (and user_kernel.finish's summary).
    The best order is named as the report names it: a proposal whose tile map is a catalog order
    its prompt ranked is credited to the catalog (``report.shown_name``), not to the model."""
    from swizzleperf.agent.loop.report import shown_name
    from swizzleperf.agent.verification.bounds import OUTSIDE_ITS_TENSORS
    from swizzleperf.agent.verification.stages import NOT_REPRODUCIBLE
    base, best = report.get("baseline") or {}, report.get("best") or {}
    work = report.get("workload") or {}
    best_name = shown_name(best) if best else None
    fields = {"hardware": report.get("hardware"), "mode": report.get("mode"), "best_order": best_name,
              "predicted_l2_baseline": base.get("predicted_l2_hit_rate"),
              "predicted_l2_best": best.get("predicted_l2_hit_rate"),
              "baseline_ms": base.get("time_ms"), "baseline_spread_ms": base.get("time_spread_ms"),
              "best_ms": best.get("time_ms"), "best_spread_ms": best.get("time_spread_ms")}
    if work.get("programs") and work.get("programs_per_wave"):
        fields["waves"] = _round(work["programs"] / work["programs_per_wave"])
    stop_reason = report.get("stop_reason") or ""
    if base.get("verdict") not in (None, "PASS") and (NOT_REPRODUCIBLE in stop_reason or OUTSIDE_ITS_TENSORS in stop_reason):
        # two replays of the captured launch disagree with each other, or the launch reaches outside
        # its tensors under checked accesses: the kernel, not the capture
        return {**fields, "outcome": "refused",
                "reason": f"the captured launch cannot be checked: {report.get('stop_reason')}"}
    if base.get("verdict") not in (None, "PASS"):   # the captured launch does not replay as captured: ours
        return {**fields, "outcome": "tool failure",
                "reason": f"the replay of the captured launch failed its own check: {report.get('stop_reason')}"}
    if report.get("status") in PROPOSER_STOPS:   # an LLM that went down or never answered usably
        last = next((a for a in reversed(report.get("attempts") or []) if a.get("verdict") == "NO_CANDIDATE"), {})
        return {**fields, "outcome": "proposer failed",
                "reason": f"the run ended '{report.get('status')}': {report.get('stop_reason')}"
                          + (f" (the last proposal: {str(last.get('reason'))[:200]})" if last else "")
                          + (f"; the best so far: {best_name}" if best.get("kind") == "candidate" else "")}
    if report.get("status") != "finished":
        return {**fields, "outcome": "tool failure",
                "reason": f"the run did not finish ({report.get('status')}): {report.get('stop_reason')}"}
    if best.get("time_ms") is not None and base.get("time_ms") is not None:     # measured on a GPU
        speedup = base["time_ms"] / best["time_ms"]
        spread = speedup * math.hypot((base.get("time_spread_ms") or 0) / base["time_ms"],
                                      (best.get("time_spread_ms") or 0) / best["time_ms"])
        fields.update(speedup=round(speedup, 4), speedup_spread=round(spread, 4))
        if best.get("kind") == "candidate" and best.get("beyond_noise_vs_baseline"):
            return {**fields, "outcome": "optimized",
                    "reason": f"{best_name}: {speedup:.3f}x ± {spread:.3f} over the kernel's own order "
                              f"({base['time_ms']:.4f} -> {best['time_ms']:.4f} ms), beyond the measured spread"}
        return {**fields, "outcome": "verified, no gain", "reason": why_no_gain(report, summary)}
    predicted = (f"verified; simulated only (no GPU): predicted L2 {_pct(base.get('predicted_l2_hit_rate'))} -> "
                 f"{_pct(best.get('predicted_l2_hit_rate'))} ({best_name})")
    if best.get("kind") == "candidate" and (best.get("l2_gain_vs_baseline") or 0) >= 1e-3:
        return {**fields, "outcome": "verified, no gain",
                "reason": f"{predicted}; not timed: a GPU measures whether it is a gain"}
    return {**fields, "outcome": "verified, no gain", "reason": f"{predicted}; {why_no_gain(report, summary)}"}


def why_no_gain(report: dict, summary: dict) -> str:
    """Why no order beat the kernel's own: one wave; at the roof; on a GPU, the orders timed there
    (an untraced kernel's note beside them); not traced; no reuse; or none beyond noise."""
    base, best = report.get("baseline") or {}, report.get("best") or {}
    work = report.get("workload") or {}
    programs, per_wave = work.get("programs"), work.get("programs_per_wave")
    if programs and per_wave and programs <= per_wave and _l2_domains(report.get("hardware")) == 1:
        return (f"under one wave: {programs} programs, {per_wave} run at once ({work.get('wave_note')}) on one "
                f"L2: every order reads the same tiles in the same window")
    l2 = base.get("l2_hit_rate")
    if l2 is not None and l2 >= L2_ROOF:
        return f"at the roof: the kernel's own order already hits L2 {l2:.1%} ({base.get('source')})"
    untraced = [n for n in summary.get("lift_notes", []) if n.startswith("no access model")]
    timed = [a for a in report.get("attempts") or () if a.get("time_ms") is not None]
    if timed and base.get("time_ms") is not None:   # on a GPU: the orders themselves were timed
        names = ", ".join(str(a.get("name")) for a in timed[:4]) + (" ..." if len(timed) > 4 else "")
        note = f"; the simulator could not rank them (not traced: {untraced[0][:160]})" if untraced else ""
        return (f"no order beyond noise of the kernel's own: {len(timed)} timed on the GPU ({names}; "
                f"{report.get('stop_reason')}){note}")
    if untraced:
        return f"not traced: {untraced[0][:240]}"
    predicted = [f.get("predicted_l2_hit_rate") for f in (base, best)]
    if None not in predicted and max(predicted) < 1e-3:
        return "no reuse between tiles: predicted L2 0.0% under every order tried (each tile reads data of its own)"
    tried = len(report.get("attempts") or [])
    if not tried:   # nothing was timed against it: the stop says why (no catalog order differs...)
        return f"no order tried: {report.get('stop_reason')}"
    return f"no order beyond noise of the kernel's own ({tried} tried: {report.get('stop_reason')})"


def _l2_domains(hardware: str | None) -> int | None:
    """The L2 domains of the run's hardware spec: with several, the order decides which tiles share
    each one even within one wave (bottleneck.order_cannot_matter)."""
    from swizzleperf.hwspecs import load_spec
    return load_spec(hardware).l2_domains if hardware else None


def _pct(value) -> str:
    return "n/a" if value is None else f"{value:.1%}"


def _round(value):
    return None if value is None else round(float(value), 3)


def main(argv: list | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m swizzleperf.eval.app_worker", description=__doc__.splitlines()[0])
    parser.add_argument("app", help="the app file (run as `python APP` in its own folder)")
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--iterations", type=int, default=2)
    parser.add_argument("--budget", type=float, default=600.0, help="seconds for the whole row")
    parser.add_argument("--row", required=True, help="where the row is written (JSON)")
    parser.add_argument("--hw", default=None)
    parser.add_argument("--no-ncu", action="store_true", help="time the orders without profiling each with ncu")
    parser.add_argument("--llm", default=None, help="the LLM's options as JSON (LLM_OPTIONS but base_url, which "
                                                    f"comes from ${BASE_URL_VARIABLE}); default the built-in policy")
    args = parser.parse_args(argv)
    # the endpoint (credentials included) out of this process's environment before anything runs: the
    # app and the workers it starts never see it (the API key is withheld from them by sandbox.app_env)
    base_url = os.environ.pop(BASE_URL_VARIABLE, None)
    llm = {**json.loads(args.llm), "base_url": base_url} if args.llm else {}

    def interrupt(signum, frame):   # the suite's budget: the app is stopped, the run saved
        raise KeyboardInterrupt(signal.Signals(signum).name)
    signal.signal(signal.SIGTERM, interrupt)
    # the app as listed, its links not followed: a linked app keeps its own name (docs/eval.md) and a
    # link loop is the app's failure to start, not a traceback of ours (#41, round eight)
    app_file = Path(os.path.abspath(args.app))
    os.chdir(app_file.parent)
    row = _Row(Path(args.row), app_file.name)
    evaluate(app_file, Path(args.workdir).resolve(), args.iterations, args.budget, row, args.hw, not args.no_ncu, llm)


if __name__ == "__main__":
    main()
