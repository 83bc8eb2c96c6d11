"""Judging attempts: which is better, whether a gain is beyond the measured noise, and the one-line
lesson the reflect step writes for the next proposal."""
from __future__ import annotations

import numpy as np

from swizzleperf.agent.verification.verify import Verdict

_ADVICE = {
    Verdict.INVALID.value: "write only the rewrite target with the allowed operations",
    Verdict.NOT_PERMUTATION.value: "every tile must be computed exactly once; handle the remainder "
                                   "when the grid is not a multiple of the group or domain count",
    Verdict.MISMATCH.value: "the order must not change what each program computes",
    Verdict.COMPILE_ERROR.value: "keep to integer tl operations that compile",
    Verdict.RUNTIME_ERROR.value: "the target must run elementwise on a vector of program ids (use tl.where, not if)",
    Verdict.TIMEOUT.value: "keep the target cheap: no unbounded loops",
    Verdict.CRASH.value: "keep the target simple enough to compile and run",
}
#: Said of a proposal that produced no candidate for want of an answer: nothing about an order.
NOT_A_VERDICT = "not a verdict on any order"


def score(attempt: dict, mode: str) -> tuple:
    """Sort key, lower is better: measured time (measured mode), else predicted L2 hit rate
    (higher is better) then DRAM bytes."""
    m = attempt.get("metrics") or {}
    if mode == "measured" and m.get("time_ms") is not None:
        return (m["time_ms"],)
    return (-m.get("l2_hit_rate", 0.0), m.get("dram_bytes", 0.0))


def better(attempt: dict, best: dict, mode: str) -> bool:
    """True when ``attempt`` scores strictly better than ``best``."""
    return score(attempt, mode) < score(best, mode)


def beyond_noise(attempt: dict, best: dict, mode: str) -> bool:
    """True when the gain over ``best`` exceeds the measured spread; in simulated mode, any gain
    of 0.1 percentage point of hit rate or more.

    Two attempts timed head to head (same rounds) are compared round by round: the median of the
    per-round differences must exceed their interquartile range. Otherwise the difference of the
    medians must exceed the larger of the two interquartile ranges."""
    a, b = attempt.get("metrics") or {}, best.get("metrics") or {}
    paired_a, paired_b = a.get("rounds_ms"), b.get("rounds_ms")
    if mode == "measured" and paired_a and paired_b and len(paired_a) == len(paired_b):
        diff = np.asarray(paired_b) - np.asarray(paired_a)  # > 0: attempt faster in that round
        q25, q50, q75 = np.quantile(diff, [0.25, 0.5, 0.75])
        return bool(q50 > 0 and q50 > q75 - q25)
    if mode == "measured" and a.get("time_ms") is not None and b.get("time_ms") is not None:
        noise = max(a.get("time_spread_ms") or 0.0, b.get("time_spread_ms") or 0.0)
        return b["time_ms"] - a["time_ms"] > noise
    return a.get("l2_hit_rate", 0.0) - b.get("l2_hit_rate", 0.0) >= 1e-3


def lesson(attempt: dict, best: dict, baseline: dict, mode: str) -> str:
    """One sentence for the history: why a candidate failed, or how it did against the best and
    the baseline, and how far the simulator's prediction was from the measurement."""
    name, verdict = attempt["name"], attempt["verdict"]
    if verdict == Verdict.NO_CANDIDATE.value:
        return no_candidate(attempt.get("reason") or "") + "."
    if verdict != Verdict.PASS.value:
        return f"{name} was rejected ({verdict}): {_ADVICE.get(verdict, 'see the reason')}."
    m, bm, base = attempt["metrics"], best.get("metrics") or {}, baseline.get("metrics") or {}
    parts = [f"{name}: L2 hit rate {m['l2_hit_rate']:.1%} ({m['l2_source']})"]
    if m.get("l2_source", "").startswith("measured"):
        measured, what = measured_read_hit_rate(m)
        error = (m["predicted_l2_hit_rate"] - measured) * 100
        parts.append(f"simulator predicted {m['predicted_l2_hit_rate']:.1%} of reads hitting "
                     f"({error:+.1f} points against {what} {measured:.1%})")
    if m.get("time_ms") is not None and bm.get("time_ms") is not None:
        verdict_text = ("faster than the best beyond noise" if better(attempt, best, mode)
                        and beyond_noise(attempt, best, mode) else
                        "within noise of the best" if not beyond_noise(best, attempt, mode)
                        else "slower than the best")
        parts.append(f"{m['time_ms']:.3f} ms ± {m['time_spread_ms']:.3f} vs best {bm['time_ms']:.3f} "
                     f"ms: {verdict_text}; {base['time_ms'] / m['time_ms']:.2f}x the baseline")
    else:
        delta = (m["l2_hit_rate"] - base.get("l2_hit_rate", 0.0)) * 100
        parts.append(f"{delta:+.1f} points over the baseline")
    return "; ".join(parts) + "."


def no_candidate(reason: str) -> str:
    """The lesson of a proposal that produced no candidate, from its ``reason`` (the proposer's
    error), in words the next proposal can use: never the endpoint, its URL or what the server
    said (a model can act on none of it, and each later prompt paid about 60 tokens for it,
    2026-12-07). An endpoint that gave no usable answer (``chat.Conversation``'s and
    ``chat._endpoint_message``'s errors) is said to be no verdict on any order."""
    if reason.startswith(("LLM endpoint ", "model '")):
        what = "no reply in time" if " deadline" in reason else "no usable answer from the model's server"
        return f"{what}; {NOT_A_VERDICT}"
    if reason.startswith("no usable reply after"):
        return "no candidate; every reply was refused before verification"
    return f"the proposer produced no candidate; {NOT_A_VERDICT}"


def target_reached(best: dict, baseline: dict, mode: str, target_speedup: float | None,
                   target_l2: float | None) -> str | None:
    """The stop reason when the best meets a target, else None."""
    m, base = best.get("metrics") or {}, baseline.get("metrics") or {}
    if target_speedup and m.get("time_ms") and base.get("time_ms"):
        if base["time_ms"] / m["time_ms"] >= target_speedup:
            return f"target reached: {base['time_ms'] / m['time_ms']:.2f}x >= {target_speedup}x"
    if target_l2 is not None and m.get("l2_hit_rate", 0.0) >= target_l2:
        return f"target reached: L2 hit rate {m['l2_hit_rate']:.1%} >= {target_l2:.1%}"
    return None


MAX_CONTENDERS = 5


def contenders(state: dict, mode: str) -> list:
    """What the final head-to-head re-times: the best, the verified candidates whose median is
    within the measured spread of the best's (fastest first), the expert order and the baseline
    (so that every speedup reported is of one head-to-head); at most ``MAX_CONTENDERS``. Empty
    outside measured mode."""
    best = state.get("best")
    if mode != "measured" or not best or (best.get("metrics") or {}).get("time_ms") is None:
        return []
    references = [a for a in (state.get("expert"), state.get("baseline"))
                  if a and a.get("verdict") == Verdict.PASS.value and a.get("kernel_file") != best["kernel_file"]]
    close = sorted((h for h in _passed(state) if h["kernel_file"] != best["kernel_file"]
                    and not beyond_noise(best, h, mode)), key=lambda h: h["metrics"]["time_ms"])
    return [best] + close[:MAX_CONTENDERS - 1 - len(references)] + references


def _passed(state: dict) -> list:
    """Full attempts (with kernel files and metrics) of the verified candidates of a run."""
    return [a for a in state.get("history", []) if a.get("verdict") == Verdict.PASS.value
            and (a.get("metrics") or {}).get("time_ms") is not None]


def with_confirmed_time(attempt: dict, time_ms: float, spread_ms: float, rounds_ms: list,
                        target, selection: bool = False) -> dict:
    """The attempt with its head-to-head time as the headline time (the first measurement kept
    as ``first_time_ms``, the per-round medians as ``rounds_ms``). ``selection``: this is the
    confirmation after the head-to-head that chose the best; that head-to-head's time is kept as
    ``selection_time_ms`` and the first measurement stays."""
    m = dict(attempt["metrics"])
    device = target.device.name if target.device else "GPU"
    if selection:
        m.update(selection_time_ms=m.get("time_ms"), selection_time_spread_ms=m.get("time_spread_ms"))
        what = f"confirmation head-to-head, {len(rounds_ms)} fresh rounds apart from the selection"
    else:
        m.update(first_time_ms=m.get("time_ms"), first_time_spread_ms=m.get("time_spread_ms"))
        what = f"head-to-head, {len(rounds_ms)} rounds"
    m.update(time_ms=time_ms, time_spread_ms=spread_ms, rounds_ms=list(rounds_ms),
             time_source=f"measured:events:{device} ({what})")
    return {**attempt, "metrics": m}


def choose_confirmed(attempts: list) -> dict:
    """The fastest by head-to-head median; among those within the spread of the fastest, the one
    that moves the fewest DRAM bytes (less memory traffic at equal speed)."""
    fastest = min(attempts, key=lambda a: a["metrics"]["time_ms"])
    tied = [a for a in attempts if not beyond_noise(fastest, a, "measured")]
    return min(tied, key=lambda a: (a["metrics"].get("dram_bytes") or float("inf"), a["metrics"]["time_ms"]))


def confirmed_summary(attempt: dict) -> dict:
    m = attempt["metrics"]
    return {"kind": attempt["kind"], "iteration": attempt["iteration"], "name": attempt["name"],
            "time_ms": m["time_ms"], "time_spread_ms": m["time_spread_ms"],
            "first_time_ms": m.get("first_time_ms"), "l2_hit_rate": m.get("l2_hit_rate"),
            "dram_bytes": m.get("dram_bytes"), "config": m.get("config"), "rounds_ms": m.get("rounds_ms")}


def measured_read_hit_rate(metrics: dict) -> tuple:
    """``(rate, what)``: the measured L2 hit rate that the simulator's prediction is compared with.
    The simulator counts read bytes only (profiling/l2sim.py); ncu's ``lts__t_sector_hit_rate.pct``
    counts every stored sector as a hit too (near 50 % for any streaming kernel: a 2-D transpose
    read 50 % there and 0 % in its read lookups on an H100, bench/results/user_kernels_h100.md), so
    the SMs' read lookups (``l2_read_hit_rate``) are the like-for-like figure where ncu gave them."""
    if metrics.get("l2_read_hit_rate") is not None:
        return metrics["l2_read_hit_rate"], "ncu's read lookups"
    return metrics["l2_hit_rate"], metrics.get("l2_source", "the measurement")
