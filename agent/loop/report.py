"""The run's outputs in its folder: the best kernel file, its diff, report.json and report.md."""
from __future__ import annotations

import json
import math
import numbers
from pathlib import Path

from swizzleperf.agent.proposers.llm import DETAIL_SHOWN
from swizzleperf.agent.verification import lessons
from swizzleperf.agent.verification.verify import Verdict
from swizzleperf.profiling.roof import stop_line
from swizzleperf.sandbox import untrusted
from swizzleperf.sandbox.write_back import replace_file, verified_text, write_sealed


def figures(attempt: dict | None) -> dict | None:
    """The headline figures of an attempt for the report (None for a missing attempt)."""
    if not attempt:
        return None
    m = attempt.get("metrics") or {}
    return {"name": attempt.get("name"), "catalog_twin": attempt.get("catalog_twin"), "iteration": attempt.get("iteration"),
            "verdict": attempt.get("verdict"), "reason": attempt.get("reason", ""),
            "l2_hit_rate": m.get("l2_hit_rate"), "source": m.get("l2_source"),
            "time_ms": m.get("time_ms"), "time_spread_ms": m.get("time_spread_ms"),
            "time_source": m.get("time_source"), "dram_bytes": m.get("dram_bytes"),
            "dram_source": m.get("dram_source"), "predicted_l2_hit_rate": m.get("predicted_l2_hit_rate"),
            "predicted_source": m.get("predicted_source"), "tflops": m.get("tflops"),
            "notes": m.get("notes", ""), "cross_domain_bytes": m.get("predicted_cross_domain_bytes"),
            **{k: m[k] for k in _DISTRIBUTED_FIGURES if m.get(k) is not None}}


#: The figures of each attempt in report.json's ``attempts``.
_ATTEMPT_FIGURES = ("l2_hit_rate", "time_ms", "dram_bytes", "predicted_cross_domain_bytes",
                    "predicted_time_ms", "time_spread_ms", "predicted_interval_ms", "calibrated_predicted_ms",
                    "committed_ms", "torch_nccl_ms", "config")

#: What a distributed candidate's metrics add (agent/distributed/evaluator.py): the overlap model's figures
#: (raw, with its interval, and calibrated), the measured ones against torch + NCCL in the same
#: rounds, a committed measurement, and what the numerics ran with.
_DISTRIBUTED_FIGURES = ("predicted_time_ms", "predicted_compute_ms", "predicted_comm_ms",
                        "predicted_hidden_share", "predicted_breakdown", "predicted_notes",
                        "predicted_interval_ms", "predicted_lower_bound_ms", "predicted_extrapolated",
                        "predicted_extrapolated_why", "calibrated_predicted_ms", "torch_nccl_predicted_ms",
                        "torch_nccl_ms", "torch_nccl_spread_ms", "paired_gain_ms", "paired_spread_ms",
                        "model_error_raw", "model_error_calibrated_before", "committed_ms",
                        "committed_spread_ms", "committed_source", "verified_at", "config", "rounds_ms",
                        "host_ms")


def build_report(state: dict, run: dict, target_message: str, extra: dict | None = None,
                 requests: list | None = None) -> dict:
    """report.json's content from the loop's final state and the run's row; ``extra`` is what the
    run's evaluator adds (a distributed run: world size, problem, torch + NCCL's figures);
    ``requests``: the run's requests to an LLM as its transcript has them (``tokens_source``,
    ``prompt_detail``; record.py's ``requests`` rows), None where the caller has none to give
    (``tokens_source`` is then None: not known)."""
    best, baseline, expert = state.get("best"), state.get("baseline"), state.get("expert")
    history = state.get("history", [])
    report = {"kernel": run["kernel"], "kernel_path": run["kernel_path"], "hardware": run["hardware"],
              "mode": run["mode"], "target": target_message, "run_id": run["run_id"],
              "run_dir": run["run_dir"], "proposer": run["proposer"],
              "iterations": int(state.get("iteration", 0)), "stop_reason": state.get("stop_reason", ""),
              "baseline": figures(baseline), "expert": figures(expert), "best": figures(best),
              "attempts": [{k: h.get(k) for k in ("iteration", "name", "catalog_twin", "verdict", "reason", "lesson")}
                           | {k: (h.get("metrics") or {}).get(k) for k in _ATTEMPT_FIGURES}
                           for h in history],
              "confirmation": state.get("confirmation"),
              "prompt_tokens": sum(h.get("prompt_tokens") or 0 for h in history),
              "completion_tokens": sum(h.get("completion_tokens") or 0 for h in history),
              "cost_usd": sum(h.get("cost_usd") or 0.0 for h in history),
              "tokens_source": None if requests is None else tokens_source(requests), **(extra or {})}
    details = prompt_details(requests or [])
    if details:
        report["prompt_detail"] = details
    if best:
        verified = best.get("verdict") == Verdict.PASS.value
        report["best"].update(permutation_verified=verified, numerics_verified=verified,
                              swizzle_source=best.get("source", ""), kind=best.get("kind"),
                              kernel_sha256=best.get("kernel_sha256"),   # of the verified text (--in-place)
                              # proven on every grid, or checked up to a box and guarded (agent/verification/prove.py)
                              permutation_scope=best.get("permutation_scope") if verified else None)
        # where the outputs were compared with the reference: report.md's words (#16)
        report["best"]["numerics_scope"] = numerics_text(report) if verified else None
        report["best"].update(_comparisons(best, baseline, expert, run["mode"]))
    if report.get("distributed"):
        _with_confirmed_torch(report)
        report["distributed"].update(_distributed_outcome(report, history))
    report.update(roof_fields(state, run["hardware"]))
    if report.get("best") and not report.get("distributed"):
        _with_predicted_gain_limits(report)
    return report


def roof_fields(state: dict, hardware: str) -> dict:
    """report.json's ``roof``: per order (baseline, expert, best, each attempt by iteration) what
    profiling/roof.py found for it: TFLOP/s and its share of the compute peak, DRAM and L2 GB/s and
    their shares, the binding roof, "% of roof" and the most any tile order can gain (measured), or
    the predicted bytes and "not measured" (simulated); and ``peaks``: each peak of the hardware
    spec that a share used, with its source (hwspecs/*.yaml). Empty where no attempt has a roof."""
    from swizzleperf import hwspecs
    keys = ("status", "tflops", "gbps", "l2_gbps", "shares", "binding", "binding_why", "floor_ms",
            "roof_share", "max_gain", "dram_bytes", "dram_source", "l2_bytes", "l2_source", "flops",
            "min_bytes", "time_ms", "line")
    rows = [(label, state.get(label)) for label in ("baseline", "expert", "best")]
    rows += [(f"attempt {h.get('iteration')}", h) for h in state.get("history", [])]
    orders = {label: {"name": a.get("name"), **{k: a["metrics"]["roof"].get(k) for k in keys}}
              for label, a in rows if a and ((a.get("metrics") or {}).get("roof"))}
    if not orders:
        return {}
    first = next(a["metrics"]["roof"]["peaks"] for _, a in rows if a and (a.get("metrics") or {}).get("roof"))
    try:
        sources = hwspecs.value_sources(hardware)
    except hwspecs.UnknownHardwareError:
        sources = {}
    fields = {"flops": first.get("flops_field"), "dram_bytes_per_s": "dram_bytes_per_s",
              "l2_bytes_per_s": "l2_bytes_per_s"}
    peaks = {key: {"value": first.get(key), "field": field, "source": sources.get(field or "", "no such peak in the spec"),
                   **({"what": first.get("flops_what")} if key == "flops" else {})}
             for key, field in fields.items()}
    return {"roof": {"orders": orders, "peaks": peaks, "rule": _ROOF_RULE}}


#: How report.md and report.json explain the roof (profiling/roof.py's module docstring, short).
_ROOF_RULE = ("bound by the peak with the largest achieved share; 'latency / too few waves' when the launch has "
              "fewer programs than one wave or every share is under 40 %; a tile order changes the bytes moved, "
              "not the FLOPs or the compulsory bytes, so no order can run under max(FLOPs / compute peak, "
              "compulsory bytes / DRAM peak): '% of roof' is that floor over the time, and the most any order can "
              "gain is time / floor - 1")


def roof_lines(report: dict) -> list:
    """report.md's "Roof" section: one row per order with a roof, then the peaks with their sources."""
    r = report.get("roof") or {}
    if not r.get("orders"):
        return []
    lines = ["", "## Roof", "", "| order | TFLOP/s | % of compute peak | DRAM GB/s | % of DRAM peak | L2 GB/s | "
             "% of L2 peak | bound by | % of roof | most any order can gain |", "|---|---|---|---|---|---|---|---|---|---|"]
    for label, o in r["orders"].items():
        s = o.get("shares") or {}
        # label ("best", "attempt 3") and binding ("DRAM", "compute") are ours; the name may be a reply's
        if o.get("status") != "measured":   # a byte count is no rate: said as what it is (#15)
            dram = ("not measured" if o.get("dram_bytes") is None
                    else f"not measured ({o['dram_bytes'] / 1e9:.2f} GB predicted)")
            lines.append(f"| {label}: {md_text(o.get('name'))} | not measured | not measured | {dram} | "
                         f"not measured | not measured | not measured | {o.get('binding')} (predicted) | "
                         f"not measured | not measured |")
            continue
        lines.append(f"| {label}: {md_text(o.get('name'))} | {_num1(o.get('tflops'))} | {_pct(s.get('compute'))} | "
                     f"{_num1(o.get('gbps'))} | {_pct(s.get('DRAM'))} | {_num1(o.get('l2_gbps'))} | {_pct(s.get('L2'))} | "
                     f"{o.get('binding')} | {_pct(o.get('roof_share'))} | {_pct(o.get('max_gain'))} |")
    best = r["orders"].get("best") or {}
    if best.get("status") == "measured" and isinstance(best.get("roof_share"), float):
        # our own sentence of numbers, written as it reads
        lines.append(f"\nbest: {stop_line(best)}")
    lines.append("")
    for key, p in r["peaks"].items():
        value = "none" if p["value"] is None else (f"{p['value'] / 1e12:.1f} TFLOP/s" if key == "flops"
                                                    else f"{p['value'] / 1e9:.0f} GB/s")
        what = f" ({p['what']})" if p.get("what") else ""   # the spec's words (hwspecs/*.yaml), and ours
        lines.append(f"- {p['field'] or key}{what}: {value}: {p['source']}")
    lines.append(f"- rule: {r['rule']}")
    return lines


def _num1(x) -> str:
    return "n/a" if x is None else f"{x:.1f}"


def _distributed_outcome(report: dict, history: list) -> dict:
    """What a distributed run concludes: the hand bench's point (the best of the patterns at the
    kernel's default knobs measured in this run), the answer (agent/distributed/measured.answer: the best
    configuration when it beats torch + NCCL beyond the paired spread, else the fastest of the
    head-to-head's contenders that does, else torch + NCCL), and the figures of one timing session
    (agent/distributed/session.py): the answer's configuration against torch + NCCL, torch's fused
    op and the cuBLAS GEMM in the same rounds, a tie named a tie, and the share of the way to the
    perfect-overlap bound only where the bound's parts were timed in those rounds and the answer
    did not reject the figure (``way_to_bound`` is then set, else ``way_to_bound_note`` says why)."""
    from swizzleperf.agent.distributed.measured import answer
    from swizzleperf.agent.distributed.session import session_figures
    d, best = report["distributed"], report.get("best") or {}
    defaults = [figures(h) for h in history if h.get("verdict") == Verdict.PASS.value
                and _at_default_knobs((h.get("metrics") or {}).get("config"), d.get("gemm_config") or {})
                and (h.get("metrics") or {}).get("time_ms") is not None]
    if (report.get("baseline") or {}).get("time_ms") is not None:
        defaults.append(report["baseline"])     # the kernel's default pattern at its default knobs
    contenders = (report.get("confirmation") or {}).get("contenders")
    verified = best if best.get("verdict") == Verdict.PASS.value else None
    out = {"hand_bench": min(defaults, key=lambda f: f["time_ms"]) if defaults else None,
           "answer": answer(verified, report["mode"], d.get("references"), contenders)}
    if report["mode"] != "measured" or not verified or verified.get("time_ms") is None:
        return out
    chosen, rejected = _chosen_figures(out["answer"], verified, contenders or [])
    session = session_figures(chosen, d.get("confirmed_torch_nccl"), rejected)
    out["session"] = session
    if session["way"]["value"] is not None:
        out["way_to_bound"], out["way_to_bound_spread"] = session["way"]["value"], session["way"]["spread"]
    else:
        out["way_to_bound_note"] = session["way"]["why"]
    return out


def _chosen_figures(answer: dict, best: dict, contenders: list) -> tuple:
    """``(figures, why rejected)``: the configuration the answer recommends (the best, or the
    head-to-head contender it names); where the answer is torch + NCCL, the best with the reason
    its figure was rejected."""
    if answer.get("use") != "configuration":
        return best, (f"the best found, {best.get('name')}, does not beat torch + NCCL beyond its paired spread "
                      "(the answer is torch + NCCL)")
    if answer.get("name") in (None, best.get("name")):
        return best, ""
    return next((c for c in contenders if c.get("name") == answer["name"]), best), ""


def _at_default_knobs(config: dict | None, run_defaults: dict) -> bool:
    """Whether a configuration is a pattern at the knobs the run started from (what the hand bench
    times): nothing but the pattern, a tile order (the pattern sweep carries the best one) and the
    GEMM configuration tuned for the shape, at its values."""
    if not config or "pattern" not in config:
        return False
    return all(k in ("pattern", "swizzle") or run_defaults.get(k) == v for k, v in config.items())


def _with_confirmed_torch(report: dict) -> None:
    """After the head-to-head at the end of a measured run, the configurations' comparisons with
    torch + NCCL come from its rounds too (torch + NCCL was timed in them): the paired gain is
    recomputed round by round for every figure that carries the head-to-head's ``rounds_ms``
    (the best, the baseline, the expert and each of the confirmation's contenders)."""
    import statistics
    confirmed = report["distributed"].get("confirmed_torch_nccl") or {}
    torch_rounds = confirmed.get("rounds_ms")
    if not torch_rounds:
        return
    contenders = (report.get("confirmation") or {}).get("contenders") or []
    for f in [report.get(label) for label in ("best", "baseline", "expert")] + contenders:
        rounds = (f or {}).get("rounds_ms")
        if not rounds or len(rounds) != len(torch_rounds):
            continue
        gains = [t - c for c, t in zip(rounds, torch_rounds)]
        q = statistics.quantiles(gains, n=4) if len(gains) > 1 else [gains[0]] * 3
        f.update(torch_nccl_ms=confirmed["torch_nccl_ms"], torch_nccl_spread_ms=confirmed["torch_nccl_spread_ms"],
                 paired_gain_ms=statistics.median(gains), paired_spread_ms=q[2] - q[0])


def _comparisons(best: dict, baseline: dict | None, expert: dict | None, mode: str) -> dict:
    out = {}
    for label, other in (("baseline", baseline), ("expert", expert)):
        bm, om = best.get("metrics") or {}, (other or {}).get("metrics") or {}
        if other is not None and (other is best or other.get("source") == best.get("source")):
            # the same order twice: no change, whatever two samples say
            out[f"same_as_{label}"] = True
            if bm.get("time_ms") and om.get("time_ms"):
                out[f"speedup_vs_{label}"], out[f"beyond_noise_vs_{label}"] = 1.0, False
        elif bm.get("time_ms") and om.get("time_ms"):
            out[f"speedup_vs_{label}"] = om["time_ms"] / bm["time_ms"]
            out[f"beyond_noise_vs_{label}"] = lessons.beyond_noise(best, other, mode)
        if bm.get("l2_hit_rate") is not None and om.get("l2_hit_rate") is not None:
            out[f"l2_gain_vs_{label}"] = bm["l2_hit_rate"] - om["l2_hit_rate"]
    return out


def tokens_source(requests: list) -> str:
    """Where a run's token counts come from, over its requests sent (those recorded ``none: not
    sent`` carry no tokens): ``"the server's usage (4 of 4 requests)"``, ``"estimated: 4 of 4
    requests without server usage"`` (chat.py estimates what a server does not count, e.g.
    llama-cpp-python's streams), or ``"no LLM request sent"``. report.json's ``tokens_source``,
    report.md's tokens line and the eval's tokens column."""
    sources = [str(r.get("tokens_source") or "") for r in requests]
    sent = [s for s in sources if not s.startswith("none")]
    if not sent:
        return "no LLM request sent"
    estimated = sum(not s.startswith("server") for s in sent)
    if not estimated:
        return f"the server's usage ({len(sent)} of {len(sent)} requests)"
    return f"estimated: {estimated} of {len(sent)} requests without server usage"


#: What the prompt of each level of detail shows: the proposer's own words (llm.py).
PROMPT_DETAIL_SHOWN = DETAIL_SHOWN


def prompt_details(requests: list) -> list:
    """The level of detail of the prompts each proposal's model read: ``[{"iteration", "detail":
    [levels, in the order sent], "requests"}]`` over the requests that carry ``prompt_detail`` (a
    transcript written before it was recorded has none: ``[]``) and that the model answered (a
    reply, or an ``ok`` outcome: a prompt the server refused as too long was never read). A re-ask
    may go out at a lower level."""
    out = {}
    for r in requests:
        level, iteration = r.get("prompt_detail"), r.get("iteration")
        if isinstance(level, bool) or not isinstance(level, numbers.Real) or not math.isfinite(level) \
                or not (r.get("reply") or r.get("outcome", "ok") == "ok"):   # None, NaN (a missing column)
            continue
        if isinstance(iteration, numbers.Real) and math.isfinite(iteration):
            iteration = int(iteration)
        entry = out.setdefault(iteration, {"iteration": iteration, "detail": [], "requests": 0})
        entry["requests"] += 1
        if int(level) not in entry["detail"]:
            entry["detail"].append(int(level))
    return list(out.values())


def prompt_detail_lines(report: dict) -> list:
    """report.md's "Prompt detail" section: the proposals sent at each level, and what it left out."""
    details = report.get("prompt_detail") or []
    if not details:
        return []
    levels = sorted({level for d in details for level in d["detail"]})
    lines = ["", "## Prompt detail", "",
             "Each proposal's prompt went out at the most detailed level that fit the model's context window "
             "with room for its reply (0 shows everything):", ""]
    for level in levels:
        sent = [str(d["iteration"]) for d in details if level in d["detail"]]
        shown = PROMPT_DETAIL_SHOWN.get(level, "a level this report does not know")
        lines.append(f"- detail {level}: proposal{'s' if len(sent) > 1 else ''} {', '.join(sent)}: {shown}")
    return lines


def tokens_line(report: dict) -> str:
    """report.md's tokens line, labelled with where the counts come from (``tokens_source``)."""
    counts = f"{report['prompt_tokens']} in, {report['completion_tokens']} out; cost ${report['cost_usd']:.4f}"
    source = report.get("tokens_source")
    if source is None:
        return f"tokens: {counts}" if not (report["prompt_tokens"] or report["completion_tokens"]) else \
            f"tokens (source not recorded): {counts}"
    if source == "no LLM request sent":
        return "tokens: none (no LLM request sent)"
    return f"tokens ({source}): {counts}"


def write_outputs(run_dir: Path, report: dict, best: dict | None, kernel_filename: str) -> None:
    """Write report.json, report.md and, when there is a verified best, the best kernel and diff.
    The best kernel is the text that was verified (issue #41): its candidate file is read through
    the digest kept with it (sandbox/write_back.py's ``verified_text``) and written read-only; a
    file changed since is not copied, ``best_kernel_refused`` says why in one line.
    ``kernel_filename``: the best kernel's name in the run folder.

    Every file is rendered before any is written, so that a report that cannot be rendered leaves
    the run folder as it was (report.json and report.md never disagree, #41h), and each is written
    as a new file over its name (``replace_file``: a link or a named pipe planted in the run
    folder is replaced, never written through or waited on).

    Raises:
        OSError: a file cannot be written (a full disk); KeyError, TypeError, ValueError: a report
            whose content cannot be rendered (nothing written then).
    """
    run_dir.mkdir(parents=True, exist_ok=True)
    texts, best_text = {}, None
    if best and best.get("kernel_file"):
        best_text, why = verified_text(Path(best["kernel_file"]), best.get("kernel_sha256"), run_dir)
        if best_text is None:
            report.update(best_kernel_file=None, best_kernel_refused=f"not written: {why}")
        else:
            report["best_kernel_file"] = str(run_dir / kernel_filename)
        if report.get("distributed"):
            if best_text is not None:
                texts.update(_distributed_next(report, best))
        else:
            texts["best.diff"] = best.get("diff", "")
    texts["report.json"] = json.dumps(report, indent=2, default=str)
    texts["report.md"] = render_markdown(report)
    if best_text is not None:
        write_sealed(run_dir / kernel_filename, best_text)
    for name, text in texts.items():
        replace_file(run_dir / name, text.encode("utf-8", "backslashreplace"))


def _distributed_next(report: dict, best: dict) -> dict:
    """A distributed run's best as something to run, ``{file name: text}`` for its run folder:
    best.diff where its tile order changed the source (else none: a configuration is launch
    knobs, not a diff), and ``best_command.sh``, the command that verifies and times it against
    torch + NCCL on W GPUs (agent/distributed/__main__.py's ``run``); ``report["best_command"]``
    set to that command."""
    import shlex
    texts = {"best.diff": best["diff"]} if best.get("diff") else {}
    d = report["distributed"]
    config = (best.get("metrics") or {}).get("config")
    if not config:   # a configuration kept only as its text: read within untrusted's bounds
        try:
            config = untrusted.loads(best.get("source") or "{}", "the best configuration's text")
        except untrusted.UntrustedInput:
            config = {}
    config = json.dumps(config)
    command = ["python", "-m", "swizzleperf.agent.distributed", "run", "--kernel", report["best_kernel_file"],
               "--config", config, "--problem", str(d["problem"]), "--world-size", str(d["world_size"])]
    text = " ".join(shlex.quote(c) for c in command)
    texts["best_command.sh"] = ("#!/bin/sh\n# verify and time the best configuration against torch + NCCL on W "
                                "GPUs\n" + text + "\n")
    report["best_command"] = text
    return texts


def _pct(x) -> str:
    return "n/a" if x is None else f"{x:.1%}"


def _ms(f: dict) -> str:
    """A measured time with its spread (``"3.355 ± 0.013 ms"``); a time kept without its spread
    as such (``"3.355 ms"``); ``"not measured"``."""
    if f.get("time_ms") is None:
        return "not measured"
    return f"{f['time_ms']:.3f}{_spread(f.get('time_spread_ms'))} ms"


def _spread(spread) -> str:
    """`` ± 0.013`` after a figure; nothing where the figure has no spread."""
    return "" if spread is None else f" ± {spread:.3f}"


def render_markdown(report: dict) -> str:
    """report.md: the headline table, the stop reason, every attempt, the best swizzle."""
    # the tool's own text as it is (hardware and mode: a spec's name and our word; target and proposer:
    # our sentences of a spec, the driver's device name, the user's --model and --base-url, redacted);
    # md_text where a reply or the user's kernel file has a say: the kernel's name, a stop reason
    # (it quotes a proposal's reason), every name, reason, lesson and source below
    lines = [f"# swizzleperf run {md_text(report['run_id'])}: {md_text(report['kernel'])} on "
             f"{report['hardware']} ({report['mode']})", "", f"- {report['target']}",
             f"- proposer: {report['proposer']}",
             f"- iterations: {report['iterations']}; stopped: {md_text(report['stop_reason'])}",
             f"- {tokens_line(report)}", "",
             *(distributed_table(report) if report.get("distributed") else _order_table(report))]
    best = report.get("best") or {}
    for label in (() if report.get("distributed") else ("baseline", "expert")):
        key = f"speedup_vs_{label}"
        if best.get(f"same_as_{label}"):
            lines.append(f"\nthe best is the {label}'s own order: no change")
        elif key in best:
            noise = "" if best[f"beyond_noise_vs_{label}"] else " (within the measured spread: no real change)"
            lines.append(f"\nspeedup vs {label}: {best[key]:.3f}x{noise}")
    lines += _expert_lines(report)
    lines += _library_lines(report.get("library"))
    lines += _workload_lines(report.get("workload"))
    lines += roof_lines(report)
    lines += prompt_detail_lines(report)
    lines += ["", "## Attempts", "", "| # | name | verdict | L2 hit rate | DRAM | cross-domain | time (ms) | lesson / reason |",
              "|---|---|---|---|---|---|---|---|"]
    for a in report["attempts"]:
        text = (a.get("lesson") or "") if a.get("verdict") == Verdict.PASS.value else \
            f"{a.get('reason') or ''} ({(a.get('lesson') or '').split(': ', 1)[-1].rstrip('.')})"
        text = _with_mark(md_text(text), _error_mark(report, a))
        t = "" if a.get("time_ms") is None else f"{a['time_ms']:.3f}"
        if t and a.get("time_spread_ms") is not None:
            t += f" ± {a['time_spread_ms']:.3f}"
        if not t and a.get("predicted_time_ms") is not None:
            t = f"{a['predicted_time_ms']:.3f} predicted" + _interval_text(a.get("predicted_interval_ms"))
            if a.get("committed_ms") is not None:
                t += f"; {a['committed_ms']:.3f} measured earlier"
        lines.append(f"| {a['iteration']} | {md_text(shown_name(a))} | {md_text(a['verdict'])} | {_pct(a.get('l2_hit_rate'))} | "
                     f"{_gb(a.get('dram_bytes'))} | {_gb(a.get('predicted_cross_domain_bytes'))} | {t} | {text} |")
    if report.get("best_kernel_refused"):
        lines.append(f"\nThe best kernel file: {md_text(report['best_kernel_refused'])}")
    if best.get("swizzle_source"):
        title = "Best configuration" if report.get("distributed") else "Best swizzle"
        fence = "json" if report.get("distributed") else "python"
        lines += ["", f"## {title} ({md_text(shown_name(best))}, verified: permutation {best['permutation_verified']}, "
                      f"{md_text(numerics_text(report))})", "",
                  *([md_text(best["permutation_scope"][:1].upper() + best["permutation_scope"][1:]) + ".", ""]
                    if best.get("permutation_scope") else []),
                  *fenced(str(best["swizzle_source"]), fence)]
    return "\n".join(lines) + "\n"


def _error_mark(report: dict, attempt: dict) -> str:
    """`` (within the simulator's error)`` after a verified attempt whose predicted L2 gain over the
    baseline is smaller than the simulator's error on this kernel (``simulator_error``)."""
    base = (report.get("baseline") or {}).get("l2_hit_rate")
    if attempt.get("verdict") != Verdict.PASS.value or attempt.get("l2_hit_rate") is None or base is None \
            or not within_error(attempt["l2_hit_rate"] - base, report.get("simulator_error")):
        return ""
    return f" (within the simulator's error of {report['simulator_error']['points']:.1f} points)"


def _with_mark(text: str, mark: str) -> str:
    """``text`` with ``mark`` inside its closing full stop: "... over the baseline (within ...)."."""
    return text if not mark else text.rstrip(".") + mark + "."


def numerics_text(report: dict) -> str:
    """Where the best's outputs were compared with the reference, for report.md and the console:
    "numerics verified at check M=100, N=72, K=80 (bfloat16); not at the default M=16384, ..."
    (a CPU compares the small ``check`` problem through the interpreter; a GPU ``default`` too);
    a distributed run's own line (``verified_at``)."""
    best = report.get("best") or {}
    if not best.get("numerics_verified"):
        return "numerics not verified"
    workload = report.get("workload") or {}
    problems = workload.get("numerics_problems")
    if not problems:
        return f"numerics verified at {best['verified_at']}" if best.get("verified_at") else "numerics verified"
    sizes = lambda p: ", ".join(f"{k}={v}" for k, v in p.items())
    text = "numerics verified at " + " and ".join(f"{name} {sizes(p)}" for name, p in problems.items())
    text += f" ({workload.get('dtype')})" if workload.get("dtype") else ""
    if "default" not in problems and workload.get("problem"):
        text += f"; not at the default {sizes(workload['problem'])} (a GPU checks it)"
    return text


#: Characters that start or end inline Markdown anywhere in a line (emphasis, code spans, links,
#: images, raw HTML, entities, strikethrough, math, table cells, e-mail autolinks, headings'
#: closing sequences); each is backslash-escaped (CommonMark escapes every ASCII punctuation).
_MD_INLINE = frozenset("\\`*_[](){}<>!|~&@$#")


def md_text(value) -> str:
    """``value`` as Markdown text that renders as exactly these characters on one line: whitespace
    collapsed, the characters of inline Markdown backslash-escaped, and so are a ``:`` that could
    begin a URL (any not followed by a digit: ``grouped-n:32`` stays as it is) and the ``.`` of
    ``www.``: no emphasis, link, autolink, HTML, code span or table cell can come out of a reply's
    name or reason. For text placed mid-line (after a table bar, a list dash or a label)."""
    text = " ".join(str(value).split())
    out = []
    for i, c in enumerate(text):
        url_colon = c == ":" and not text[i + 1:i + 2].isdigit()
        www_dot = c == "." and text[max(0, i - 3):i].lower() == "www"
        out.append("\\" + c if c in _MD_INLINE or url_colon or www_dot else c)
    return "".join(out)


def fenced(text: str, info: str = "") -> list:
    """A fenced code block of ``text`` that nothing inside can close: its fence is one backtick
    longer than the longest run of backticks in the text (three at least). Lines of the block."""
    longest, run = 0, 0
    for c in text:
        run = run + 1 if c == "`" else 0
        longest = max(longest, run)
    fence = "`" * max(3, longest + 1)
    return [fence + info, text.rstrip("\n"), fence]


def _gb(n) -> str:
    return "" if n is None else f"{n / 1e9:.2f} GB"


def _expert_lines(report: dict) -> list:
    """Why the expert scored what it did: its figures against the baseline's."""
    expert, baseline = report.get("expert"), report.get("baseline")
    if not expert or not baseline or expert.get("verdict") != Verdict.PASS.value or expert.get("l2_hit_rate") is None:
        return []
    text = (f"\nexpert {expert['name']}: L2 hit rate {_pct(expert['l2_hit_rate'])} against the baseline's "
            f"{_pct(baseline.get('l2_hit_rate'))} ({expert['source']})")
    if expert.get("dram_bytes") is not None and baseline.get("dram_bytes") is not None:
        text += f", DRAM {_gb(expert['dram_bytes'])} against {_gb(baseline['dram_bytes'])} ({expert['dram_source']})"
    if expert.get("time_ms") is not None and baseline.get("time_ms") is not None:
        text += f", {_ms(expert)} against {_ms(baseline)}"
    return [_with_mark(text, _error_mark(report, expert)) + "."]


def _library_lines(library: dict | None) -> list:
    """The fastest order's launch configurations against the vendor library (agent/verification/evaluate.py's
    ``tune_launch``, measured in one interleaved run): the row that says whether we beat it."""
    if not library:
        return []
    if library.get("verdict") != Verdict.PASS.value:
        return ["", f"launch tuning failed: {md_text(library.get('verdict'))}: {md_text(library.get('reason'))}"]
    name = md_text(library.get("library_name") or "the library")
    lines = ["", "## Against the library (measured, interleaved launch by launch)", "",
             "| what | time ms (median ± IQR) | library / this (paired per round, median ± IQR) |", "|---|---|---|"]
    configs = library.get("configs") or []
    own = configs[0] if configs and library.get("default_ms") is not None else None   # the spec's meta comes first
    chosen = next((c for c in configs if c.get("meta") == library["best_meta"]), None)
    rows = [("the kernel's launch configuration" + (" (also the chosen one)" if own is not None and chosen is own else ""),
             library.get("default_ms"), library.get("default_spread_ms"), own)]
    if chosen is not own or own is None:
        rows.append(("chosen launch configuration: " + ", ".join(f"{k}={v}" for k, v in library["best_meta"].items()),
                     library["best_ms"], library["best_spread_ms"], chosen))
    for label, ms, spread, row in rows:
        if ms is None:
            continue
        lines.append(f"| {md_text(label)} | {ms:.3f}{'' if spread is None else f' ± {spread:.3f}'} | "
                     f"{_library_ratio(library, ms, row)} |")
    if library.get("library_ms") is not None:
        lines.append(f"| {name} | {library['library_ms']:.3f} ± {library['library_spread_ms']:.3f} | 1.000x |")
    selection = library.get("selection")
    if selection:
        lines.append(f"\norder: {md_text(Path(library['kernel_file']).name)}; the configuration chosen from "
                     f"{len(selection.get('configs') or [])} timed ({len(selection.get('rejected') or {})} rejected) "
                     f"in {selection.get('rounds')} selection rounds, where it took {selection.get('best_ms'):.3f} ms; "
                     f"{md_text(library.get('confirmation'))}: the figures above are from those "
                     f"{library['rounds']} rounds")
        lines += _chosen_against_own(own, chosen)
    else:
        lines.append(f"\norder: {md_text(Path(library['kernel_file']).name)}; {len(library['configs'])} "
                     f"configurations timed, {len(library.get('rejected') or {})} rejected, {library['rounds']} "
                     f"rounds; the best chosen in the rounds that report it (not confirmed)")
    return lines


def _chosen_against_own(own: dict | None, chosen: dict | None) -> list:
    """Whether the chosen launch configuration beat the kernel's own in the confirmation rounds,
    the spread rule applied both ways (#44): each one's library / this paired per round; a
    difference inside the larger of the two spreads is a tie, whichever it favours."""
    if own is None or chosen is None or chosen is own or None in (own.get("library_ratio"), chosen.get("library_ratio")):
        return []
    gain = chosen["library_ratio"] - own["library_ratio"]
    spread = max(own["library_ratio_spread"] or 0.0, chosen["library_ratio_spread"] or 0.0)
    verdict = ("inside the larger paired spread: **a tie**, the chosen configuration is not shown faster than "
               "the kernel's own" if abs(gain) <= spread else
               "beyond the paired spread: faster than the kernel's own" if gain > 0 else
               "beyond the paired spread: **slower** than the kernel's own")
    return [f"\nthe chosen configuration against the kernel's own in those rounds: {chosen['library_ratio']:.3f}x ± "
            f"{chosen['library_ratio_spread']:.3f} against {own['library_ratio']:.3f}x ± {own['library_ratio_spread']:.3f} "
            f"of the library's time, {verdict}"]


def _library_ratio(library: dict, ms: float, row: dict | None) -> str:
    """library / this: the paired per-round median ± IQR where the run has it, else the ratio of
    the medians (older reports), said so."""
    if row is not None and row.get("library_ratio") is not None:
        return f"{row['library_ratio']:.3f}x ± {row['library_ratio_spread']:.3f}"
    if library.get("library_ms"):
        return f"{library['library_ms'] / ms:.3f}x (of the medians)"
    return ""


def _workload_lines(workload: dict | None) -> list:
    if not workload:
        return []
    sizes = ", ".join(f"{k}={v}" for k, v in workload["problem"].items())
    meta = ", ".join(f"{k}={v}" for k, v in workload["meta"].items())
    return ["", "## Workload", "", f"- problem: {sizes}; dtype {workload['dtype']}",
            f"- meta-parameters: {meta or 'none'}",
            f"- tile grid {' x '.join(map(str, workload['tile_grid']))} = {workload['programs']} programs; "
            f"{workload['programs_per_wave']} programs per wave ({workload['wave_note']})"]


def _order_table(report: dict) -> list:
    lines = ["| order | L2 hit rate | source | time | time source | DRAM bytes |", "|---|---|---|---|---|---|"]
    for label in ("baseline", "expert", "best"):
        f = report.get(label)
        if f:
            dram = "n/a" if f.get("dram_bytes") is None else f"{f['dram_bytes'] / 1e9:.2f} GB ({f['dram_source']})"
            lines.append(f"| {label}: {md_text(shown_name(f))} | {_pct(f['l2_hit_rate'])} | {f['source']} | "
                         f"{' | '.join(time_cells(f))} | {dram} |")
    return lines + [f"\n{note}" for note in order_notes(report)]


def shown_name(f: dict) -> str:
    """An order's name as reports and the console show it: a proposal whose tile map is a catalog
    order ranked in its prompt says so (``llm (= the catalog's grouped-n:32, ranked in its
    prompt)``): credited to the catalog, not to the model."""
    twin = f.get("catalog_twin")
    return f"{f.get('name')} (= the catalog's {twin}, ranked in its prompt)" if twin else str(f.get("name"))


def time_cells(f: dict) -> tuple:
    """``(time, time source)`` of one order, in that order, for report.md and the console alike:
    ``("3.355 ± 0.013 ms", "measured:events:NVIDIA H200")`` or ``("not measured", "n/a")``."""
    if f.get("time_ms") is None:
        return "not measured", "n/a"
    return _ms(f), f.get("time_source") or "n/a"


def order_notes(report: dict) -> list:
    """Why a single-GPU run's order table reads as it does where a newcomer would ask: DRAM bytes
    that stay put while the L2 hit rate moves (the simulated GPU's last-level cache or its other
    L2 partition serves the misses), and an expert below the baseline on a GPU whose dispatch sends
    neighbouring programs to different L2 domains; what the best's predicted gain is worth
    (``_gain_notes``). One sentence each, from the report's figures."""
    if report.get("distributed"):
        return []
    from swizzleperf import hwspecs
    try:
        spec = hwspecs.load_spec(report["hardware"]) if report.get("hardware") else None
    except hwspecs.UnknownHardwareError:
        spec = None
    notes = [_same_dram_note(report, spec)] if spec else []
    notes += _gain_notes(report)
    notes += [_expert_domain_note(report, spec)] if spec else []
    return [note for note in notes if note]


#: Relative difference under which two orders' predicted DRAM bytes are the same: the simulator
#: counts a few halo or boundary blocks more for some orders, so orders that all move the compulsory
#: bytes differ by a hair (stencil2d on the MI300X, 2026-12-07: 2.147 GB against 2.150 GB, 0.1 %);
#: 0.5 % is five times that, and far under what an order that saves DRAM traffic saves (tens of %).
SAME_DRAM_SHARE = 0.005

#: The L2 simulator's validated error per bundled kernel: the mean absolute error, in points, of its
#: hit rate against ncu's SM read hit rate on an NVIDIA H200, from bench/results/simulator_validation.md,
#: section "H200, 2026-11-22: summary (the current model)" (gemm: "same chip as the probe");
#: tests/agent/loop/test_predicted_gains.py checks it against that page. No other GPU has a
#: per-kernel figure, so a run on another (the simulated MI300X) is given this one, said so.
SIMULATOR_ERROR_POINTS = {"gemm": 5.0, "smith_waterman": 1.4, "softmax": 0.0, "transpose": 0.0,
                          "black_scholes": 0.0, "layernorm": 0.3, "elementwise": 5.6, "fdtd2d": 8.8,
                          "stencil2d": 11.5, "spmv": 26.3}
SIMULATOR_ERROR_SOURCE = "bench/results/simulator_validation.md"
SIMULATOR_ERROR_GPU = "h200"


def same_dram(a: float, b: float) -> bool:
    """Whether two DRAM byte counts are the same within ``SAME_DRAM_SHARE``."""
    return abs(a - b) <= SAME_DRAM_SHARE * max(abs(a), abs(b))


def simulator_error(report: dict) -> dict | None:
    """The simulator's validated error on this run's kernel (``SIMULATOR_ERROR_POINTS``): only for a
    bundled kernel's own file (another file of the same name is another kernel) whose L2 figures
    are the simulator's; None otherwise."""
    kernel, path = report.get("kernel"), report.get("kernel_path")
    source = str((report.get("baseline") or {}).get("source") or "")
    bundled = Path(__file__).resolve().parents[2] / "kernels" / f"{kernel}.py"
    if kernel not in SIMULATOR_ERROR_POINTS or not source.startswith("simulated") or not path:
        return None
    try:
        if Path(path).resolve() != bundled:
            return None
    except (OSError, RuntimeError, ValueError):   # a path that cannot be resolved is not the bundled file
        return None
    return {"kernel": kernel, "points": SIMULATOR_ERROR_POINTS[kernel], "gpu": SIMULATOR_ERROR_GPU,
            "what": "mean absolute error of the predicted L2 hit rate against ncu's SM read hit rate",
            "source": SIMULATOR_ERROR_SOURCE}


def within_error(gain: float | None, error: dict | None) -> bool:
    """Whether a predicted L2 gain (a share, 0.081) is smaller than the simulator's error (points)."""
    return error is not None and gain is not None and abs(gain) * 100 < error["points"]


def _with_predicted_gain_limits(report: dict) -> None:
    """What a predicted gain is worth, in report.json (the loop's choice of the best untouched):
    ``simulator_error`` and the best's ``l2_gain_within_simulator_error_vs_*`` where the L2 gains
    are the simulator's and its error on this kernel is known; the best's ``no_time_gain`` where its
    predicted DRAM bytes are the baseline's and the predicted binding roof is DRAM: then no order's
    L2 hit rate can make it faster."""
    best, baseline = report["best"], report.get("baseline") or {}
    error = simulator_error(report)
    if error is not None:
        report["simulator_error"] = error
        for label in ("baseline", "expert"):
            if best.get(f"l2_gain_vs_{label}") is not None:
                best[f"l2_gain_within_simulator_error_vs_{label}"] = within_error(best[f"l2_gain_vs_{label}"], error)
    roof = ((report.get("roof") or {}).get("orders") or {}).get("best") or {}
    if best.get("same_as_baseline") or roof.get("status") == "measured" or roof.get("binding") != "DRAM" \
            or not str(best.get("dram_source") or "").startswith("simulated") \
            or None in (best.get("dram_bytes"), baseline.get("dram_bytes")) \
            or not same_dram(best["dram_bytes"], baseline["dram_bytes"]):
        return
    floor = f" (no order can run under {roof['floor_ms']:.3f} ms)" if isinstance(roof.get("floor_ms"), float) else ""
    best["no_time_gain"] = (f"predicted: no time gain possible from the order: the best's DRAM bytes are the "
                            f"baseline's ({_gb(best['dram_bytes'])}, within {SAME_DRAM_SHARE:.1%}) and the binding "
                            f"roof is DRAM{floor}, so a higher L2 hit rate does not make it faster.")


def _gain_notes(report: dict) -> list:
    """The best's ``no_time_gain``, and its predicted L2 gains that are within the simulator's error."""
    best = report.get("best") or {}
    notes = [best["no_time_gain"]] if best.get("no_time_gain") else []
    error = report.get("simulator_error")
    inside = [f"{100 * best[f'l2_gain_vs_{label}']:+.1f} points over the {label}" for label in ("baseline", "expert")
              if best.get(f"l2_gain_within_simulator_error_vs_{label}")]
    if error and inside:
        notes.append(f"The best's predicted L2 gain, {' and '.join(inside)}, is within the simulator's error on "
                     f"{error['kernel']} ({_error_text(report)}): a tie as far as the simulator can tell.")
    return notes


def _error_text(report: dict) -> str:
    """``"11.5 points, the mean absolute error ... (bench/...); not validated on the mi300x"``."""
    error = report["simulator_error"]
    text = f"{error['points']:.1f} points, the {error['what']} on an {error['gpu'].upper()}, {error['source']}"
    return text + ("" if report.get("hardware") == error["gpu"] else f"; not validated on the {report.get('hardware')}")


def _verified(report: dict) -> list:
    """The verified orders' figures: baseline, expert, best and every attempt."""
    orders = [report.get(label) for label in ("baseline", "expert", "best")] + list(report.get("attempts") or [])
    return [f for f in orders if f and f.get("verdict") == Verdict.PASS.value]


def _same_dram_note(report: dict, spec) -> str:
    orders = [f for f in _verified(report) if f.get("dram_bytes") is not None and f.get("l2_hit_rate") is not None]
    source = (report.get("baseline") or {}).get("dram_source") or ""
    rates, drams = [f["l2_hit_rate"] for f in orders], [f["dram_bytes"] for f in orders]
    if len(orders) < 2 or not source.startswith("simulated") or not same_dram(min(drams), max(drams)) \
            or max(rates) - min(rates) < 0.01:
        return ""
    within = "" if min(drams) == max(drams) else f" within {SAME_DRAM_SHARE:.1%}"
    head = (f"DRAM bytes are the same for every order{within} ({_gb(orders[0]['dram_bytes'])}) while the L2 hit "
            f"rate ranges {min(rates):.0%}-{max(rates):.0%}: ")
    if spec.llc_bytes:
        cache = f"{spec.llc_bytes / 2 ** 20:.0f} MiB last-level cache" + (" (Infinity Cache)" if spec.vendor == "amd" else "")
        return (head + f"in the simulator every L2 miss here is served by the {spec.name}'s {cache} once its data "
                f"was first read from DRAM, so the orders differ in the traffic between the L2s and that cache "
                f"(and in L2 hit rate), not in DRAM bytes.")
    if spec.l2_domains > 1 and spec.domain_miss_path in ("peer_domains", "home_partition"):
        return (head + f"in the simulator a miss in one L2 partition of the {spec.name} is served by the other "
                f"partition once its data was first read from DRAM, so the orders differ in the traffic between "
                f"the partitions (and in L2 hit rate), not in DRAM bytes.")
    return ""


def _expert_domain_note(report: dict, spec) -> str:
    expert, baseline = report.get("expert"), report.get("baseline")
    if not expert or not baseline or expert.get("verdict") != Verdict.PASS.value \
            or baseline.get("verdict") != Verdict.PASS.value or None in (expert.get("l2_hit_rate"), baseline.get("l2_hit_rate")) \
            or expert["l2_hit_rate"] > baseline["l2_hit_rate"] - 0.01 \
            or spec.dispatch != "round_robin_domains" or spec.l2_domains < 2:
        return ""
    domain = "XCD" if spec.vendor == "amd" else "L2 domain"
    text = (f"The expert {expert['name']} scores below the baseline on the {spec.name}: its dispatch sends program "
            f"p to {domain} p % {spec.l2_domains}, each {domain} with its own {spec.l2_bytes_per_domain / 2 ** 20:.0f} "
            f"MiB L2, so programs that the order places side by side to share data run on different {domain}s")
    if expert.get("cross_domain_bytes") is not None and baseline.get("cross_domain_bytes") is not None:
        text += (f": {_gb(expert['cross_domain_bytes'])} of its L2 misses were at that moment in another {domain}'s "
                 f"L2, against {_gb(baseline['cross_domain_bytes'])} for the baseline")
    return text + f". Orders that keep the programs sharing data on one {domain} (the xcd-* orders) avoid this."


def distributed_table(report: dict) -> list:
    """A distributed run against what the user would run (torch + NCCL): the answer first, then
    every configuration and reference with its source. Measured times carry their spread;
    predictions carry their interval and are never called a speedup. The predicted columns add
    up: time = compute + exposed when the GPU bounds the launch, = the host's enqueue time when
    the host does."""
    d = report["distributed"]
    torch_pred = d["torch_nccl"]
    refs = d.get("references") or {}
    sizes = ", ".join(f"{k}={v}" for k, v in d["sizes"].items())
    lines = [f"- problem {d['problem']} ({sizes}), {d['world_size']} ranks",
             f"- **answer**: {(d.get('answer') or {}).get('line', 'none')}"]
    best = report.get("best") or {}
    if best.get("verified_at"):
        lines.append(f"- best: {best['verified_at']}")
    lines += ["", "| configuration | time (ms) | source | vs torch + NCCL | predicted (ms, interval) | "
              "calibrated (ms) | compute (ms) | exposed (ms) | host (ms) | bound by |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    rows = [("best", best), ("kernel default", report.get("baseline")), ("expert", report.get("expert")),
            ("hand bench (best pattern at default knobs)", d.get("hand_bench"))]
    shown = set()
    for label, f in rows:
        if not f or f.get("verdict") != Verdict.PASS.value or (label != "best" and f.get("name") in shown):
            continue
        shown.add(f.get("name"))
        name = f["name"] if f["name"] != "default" else (f.get("config") or {}).get("pattern", "default")
        lines.append(_config_row(f"{label}: {md_text(name)}", f, refs, torch_pred))
    lines += _reference_rows(refs, torch_pred, report["mode"])
    lines += _distributed_notes(report, refs)
    return lines


def _config_row(label: str, f: dict, refs: dict, torch_pred: dict) -> str:
    from swizzleperf.agent.distributed.session import host_paced
    if f.get("time_ms") is not None:
        t, source = f"{f['time_ms']:.3f}{_spread(f.get('time_spread_ms'))}", f.get("time_source")
        torch_ms = f.get("torch_nccl_ms") or refs.get("torch_nccl_ms")
        ratio = (f"{torch_ms / f['time_ms']:.2f}x (paired gain {f['paired_gain_ms']:+.3f}"
                 f"{_spread(f.get('paired_spread_ms'))} ms)" if torch_ms and f.get("paired_gain_ms") is not None
                 else "n/a")
        paced = host_paced(f)
        if paced:    # the host slower than the GPUs: both figures (#44)
            t += f" (GPUs, queued ahead); host {paced['host_ms']:.3f} to queue one launch"
            if "ratio_host_paced" in paced and ratio != "n/a":
                ratio += f"; at most {paced['ratio_host_paced']:.2f}x launched one by one"
    elif f.get("committed_ms") is not None:
        t, source = f"{f['committed_ms']:.3f}", f.get("committed_source")
        ratio = "not measured in this run"
    else:
        t, source, ratio = "not measured", "n/a", _predicted_ratio(f, torch_pred)
    predicted = "n/a" if f.get("predicted_time_ms") is None else (
        f"{f['predicted_time_ms']:.3f}{_interval_text(f.get('predicted_interval_ms'))} ({f.get('predicted_source')})")
    compute = f.get("predicted_compute_ms")
    gpu_bound = f.get("predicted_notes") != "host"
    exposed = (f["predicted_time_ms"] - compute if gpu_bound and compute is not None
               else (1 - (f.get("predicted_hidden_share") or 0)) * (f.get("predicted_comm_ms") or 0))
    host = (f.get("predicted_breakdown") or {}).get("host")
    return (f"| {label} | {t} | {source} | {ratio} | {predicted} | {_num(f.get('calibrated_predicted_ms'))} | "
            f"{_num(compute)} | {_num(exposed)} | {_num(host)} | {'host' if not gpu_bound else 'GPU'} |")


def _predicted_ratio(f: dict, torch_pred: dict) -> str:
    """torch + NCCL's predicted time over the configuration's, as an interval, labelled predicted."""
    interval = f.get("predicted_interval_ms")
    if not interval or not torch_pred.get("time_ms"):
        return "n/a"
    t_low, t_high = torch_pred.get("interval_ms") or (torch_pred["time_ms"], torch_pred["time_ms"])
    return f"{t_low / interval[1]:.2f}-{t_high / interval[0]:.2f}x predicted, not measured"


def _reference_rows(refs: dict, torch_pred: dict, mode: str) -> list:
    """torch + NCCL (measured where the ranks ran, predicted otherwise), torch's fused op, the
    per-rank cuBLAS GEMM alone, the communication alone, and the perfect-overlap bound."""
    notes = refs.get("notes") or {}
    rows = []
    if refs.get("torch_nccl_ms") is not None:
        rows.append(f"| torch + NCCL (what the user would run) | {refs['torch_nccl_ms']:.3f} ± "
                    f"{refs['torch_nccl_spread_ms']:.3f} | measured, {refs['rounds']} interleaved rounds | 1.00x | "
                    f"{_num(torch_pred['time_ms'])}{_interval_text(torch_pred.get('interval_ms'))} | | "
                    f"{_num(refs.get('gemm_alone_ms'))} | {_num(refs.get('comm_alone_ms'))} | | GPU |")
    else:
        rows.append(f"| torch + NCCL (what the user would run) | not measured | n/a | 1.00x | "
                    f"{_num(torch_pred['time_ms'])}{_interval_text(torch_pred.get('interval_ms'))} "
                    f"({torch_pred['source']}) | | {_num(torch_pred['compute_ms'])} | {_num(torch_pred['comm_ms'])} | | GPU |")
    if mode != "measured" or refs.get("torch_nccl_ms") is None:
        return rows
    fused = refs.get("torch_fused_ms")
    rows.append(f"| torch fused ({notes.get('torch_fused', 'none')}) | "
                + (f"{fused:.3f} ± {refs['torch_fused_spread_ms']:.3f} | measured | {refs['torch_nccl_ms'] / fused:.2f}x"
                   if fused else "none | | ") + " | | | | | | |")
    for key, label in (("gemm_alone", "per-rank GEMM alone (cuBLAS, torch.matmul)"),
                       ("comm_alone", "communication alone")):
        value = refs.get(f"{key}_ms")
        source = refs.get(f"{key}_source", "measured")
        spread = refs.get(f"{key}_spread_ms")
        rows.append(f"| {label} | {_num(value)}{'' if spread is None else f' ± {spread:.3f}'} | {source} | | | | | | | |")
    bound = refs.get("overlap_bound_ms")
    if bound:
        rows.append(f"| perfect-overlap bound: max(GEMM alone, communication alone) | {bound:.3f} | measured parts | "
                    f"{refs['torch_nccl_ms'] / bound:.2f}x | | | | | | |")
    return rows


def _distributed_notes(report: dict, refs: dict) -> list:
    d = report["distributed"]
    lines = []
    lines += session_lines(d.get("session"))
    calibration = d.get("calibration") or {}
    if calibration.get("observations"):
        what = "this run's measurements" if report["mode"] == "measured" else "measurements committed earlier"
        lines.append(f"\nThe overlap model, recalibrated on {what} ({calibration['observations']}): median error "
                     f"{_pct(calibration['raw_median_error'])} raw; "
                     + (f"{_pct(calibration['before_median_error'])} calibrated, each prediction made before its "
                        f"measurement ({calibration['before_cases']} cases); "
                        if calibration.get("before_cases") else "")
                     + f"{_pct(calibration['after_median_error'])} in-sample after the last fit.")
    committed = d.get("committed") or []
    if report["mode"] != "measured" and committed:
        listed = "; ".join(f"{c.get('pattern') or 'best pattern'} {c['time_ms']:.3f} ms ({c['source']}, {c['device']})"
                           for c in committed[:6])
        lines.append(f"\nMeasured earlier for this kernel, problem, W and GPU kind (ranked by these where the "
                     f"configuration matches): {listed}.")
    pool = d.get("pool") or {}
    if pool.get("restarts"):
        lines.append(f"\nThe rank pool was replaced {len(pool['restarts'])} time(s): "
                     + "; ".join(pool["restarts"][:3]))
    if refs.get("error"):
        lines.append(f"\nThe references were not measured: {refs['error']}")
    if report.get("best_command"):
        lines.append(f"\nWhat to run next: `{report['best_command']}` (verifies and times the best configuration "
                     f"against torch + NCCL on {d['world_size']} GPUs).")
    return lines


def session_lines(session: dict | None) -> list:
    """report.md's figures of one timing session: what the answer's configuration was timed
    against in the same rounds (a tie called a tie), the share of the way with its definition (or
    why none is given), and the host's pace beside the GPUs' where the host was slower."""
    if not session:
        return []
    lines = [f"\nFigures of one timing session ({md_text(session['session'])}):"]
    lines += [f"- {md_text(v['line'])}" for v in session["versus"]]
    way = session["way"]
    figure = (f"{100 * way['value']:.0f} % ± {100 * way['spread']:.0f} points over {way['rounds']} rounds"
              if way.get("value") is not None else md_text(way["why"]))
    lines.append(f"- {way['name']}: {figure}; defined as {way['definition']}")
    if session.get("host"):
        lines.append(f"- host: {md_text(session['host']['line'])}")
    return lines


def _interval_text(interval) -> str:
    if not interval or len(interval) != 2:
        return ""
    return f" [{interval[0]:.3f}-{interval[1]:.3f}]"


def _num(x) -> str:
    return "n/a" if x is None else f"{x:.3f}"
