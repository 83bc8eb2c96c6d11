"""Figures of one timing session (issue #44): every ratio, share of the way and "faster than" that a
distributed run reports is computed from the rounds of one timing session, the numerator and the
denominator paired round by round, with the paired spread.

The session is the run's final head-to-head (agent/loop/graph.py's ``confirm``): the contenders,
torch + NCCL and, where the ranks timed them there (``compare``'s ``references``), torch's fused op,
the per-rank cuBLAS GEMM alone and the communication alone, every one in the same rounds. A figure
whose parts were timed in different sessions (the run's earlier ``references`` rounds against the
head-to-head's) is not computed: the two sessions differed by -4 to +6 points of the way per row
on two H200s (bench/results/dist_optimize_h100x2.md), more than some of the gaps reported.

The spread rule, both ways: a paired difference larger than its interquartile range is a win or a
loss; one inside it is a tie, whichever side the medians favour.
"""
from __future__ import annotations

import statistics

#: The one name of the quantity, and its definition, written wherever the figure is shown.
WAY_NAME = "share of the way to the perfect-overlap bound"
WAY_DEFINITION = ("(torch + NCCL - ours) / (torch + NCCL - bound), bound = max(cuBLAS GEMM alone, communication "
                  "alone; where the kernel gives no communication part, torch + NCCL minus its GEMM), every term "
                  "from the same round of one timing session; the median of the per-round shares, ± their "
                  "interquartile range")

#: The references a head-to-head may time beside torch + NCCL, and how the report names them.
REFERENCES = {"torch_fused": "torch's fused op", "gemm_alone": "the cuBLAS GEMM alone",
              "comm_alone": "the communication alone"}


#: How a verdict reads.
WORDS = {"faster": "faster beyond the paired spread", "slower": "slower beyond the paired spread",
         "tie": "a tie: the difference is inside the paired spread, whichever side it favours"}


def iqr(values: list) -> float:
    if len(values) < 2:
        return 0.0
    q = statistics.quantiles(values, n=4)
    return q[2] - q[0]


def verdict(gain: float, spread: float) -> str:
    """``"faster"`` / ``"slower"`` where the paired gain (> 0: ours faster) is beyond its spread,
    else ``"tie"``: the rule applied both ways."""
    if gain > 0 and gain > spread:
        return "faster"
    if gain < 0 and -gain > spread:
        return "slower"
    return "tie"


def versus(ours: list, other: list, other_name: str) -> dict:
    """Ours against another contender timed in the same rounds: ``{name, ratio (other / ours, of
    the medians), gain_ms, spread_ms (paired, per round), verdict, line}``."""
    if not ours or len(ours) != len(other):
        return {"name": other_name, "verdict": None,
                "line": f"against {other_name}: not timed in the same rounds: no verdict"}
    gains = [o - c for c, o in zip(ours, other)]
    gain, spread = statistics.median(gains), iqr(gains)
    ratio = statistics.median(other) / statistics.median(ours)
    said = verdict(gain, spread)
    return {"name": other_name, "ratio": ratio, "gain_ms": gain, "spread_ms": spread, "verdict": said,
            "line": f"against {other_name}: {ratio:.2f}x (paired gain {gain:+.3f} ± {spread:.3f} ms over "
                    f"{len(gains)} rounds): {WORDS[said]}"}


def way_to_bound(ours: list, torch_nccl: list, gemm: list | None, comm: list | None = None) -> dict:
    """The ``WAY_NAME`` of one session: ``{value, spread, rounds}``, or ``{value: None, why}``
    where the bound's parts were not timed in these rounds or torch + NCCL left no way to go."""
    n = len(ours)
    if not n or len(torch_nccl) != n or not gemm or len(gemm) != n or (comm is not None and len(comm) != n):
        return {"value": None, "why": "not from one session: the bound's parts (the cuBLAS GEMM alone, the "
                                      "communication alone) were not timed in the rounds of ours and torch + "
                                      "NCCL, so no percentage is given"}
    shares = []
    for r in range(n):
        comm_r = comm[r] if comm is not None else max(0.0, torch_nccl[r] - gemm[r])
        headroom = torch_nccl[r] - max(gemm[r], comm_r)
        if headroom <= 0:
            return {"value": None, "why": f"torch + NCCL was at or under the bound in round {r + 1}: no way to go"}
        shares.append((torch_nccl[r] - ours[r]) / headroom)
    return {"value": statistics.median(shares), "spread": iqr(shares), "rounds": n}


def host_paced(f: dict) -> dict | None:
    """Where queueing one launch took the host longer than the GPUs ran it (``host_ms`` >
    ``time_ms``): both figures and torch + NCCL's ratio at each pace (launched one by one, a
    launch takes at least the host's time, so that ratio is at most torch + NCCL / host)."""
    host, gpu, torch_ms = f.get("host_ms"), f.get("time_ms"), f.get("torch_nccl_ms")
    if host is None or not gpu or host <= gpu:
        return None
    out = {"host_ms": host, "gpu_ms": gpu,
           "line": f"queueing one launch took the host {host:.3f} ms, longer than the GPUs' {gpu:.3f} ms"}
    if torch_ms:
        out.update(ratio_queued=torch_ms / gpu, ratio_host_paced=torch_ms / host)
        out["line"] += (f": {torch_ms / gpu:.2f}x torch + NCCL queued ahead of the GPUs, at most "
                        f"{torch_ms / host:.2f}x launched one by one")
    return out


def session_figures(chosen: dict | None, head_to_head: dict | None, rejected: str = "") -> dict:
    """The figures of one configuration (``chosen``: the answer's, or the best where the answer is
    torch + NCCL) against what was timed in the same rounds: torch + NCCL (its paired figures,
    from the head-to-head where ``chosen`` has its ``rounds_ms``, else from its own timing), and
    what the head-to-head timed beside it (``head_to_head``: ``rounds_ms`` of torch + NCCL,
    ``references``: name -> ``{rounds_ms}``). ``rejected``: why the answer rejected this figure;
    then no share of the way is computed on it.

    Returns ``{session, way, versus: [...], host}``."""
    f, h2h = chosen or {}, head_to_head or {}
    ours, torch_rounds = f.get("rounds_ms") or [], h2h.get("rounds_ms") or []
    in_h2h = bool(ours) and len(ours) == len(torch_rounds)
    refs = (h2h.get("references") or {}) if in_h2h else {}
    session = (f"the final head-to-head, {len(ours)} rounds" if in_h2h
               else "its own timing against torch + NCCL" if f.get("paired_gain_ms") is not None
               else "none")
    rows = [_versus_torch(f)] if f.get("paired_gain_ms") is not None else []
    rows += [versus(ours if in_h2h else [], (refs.get(key) or {}).get("rounds_ms") or [], label)
             for key, label in REFERENCES.items() if key != "comm_alone"]
    if rejected:
        way = {"value": None, "why": f"not computed on a figure the answer rejected: {rejected}"}
    elif not f:
        way = {"value": None, "why": "no configuration was measured"}
    else:
        way = way_to_bound(ours if in_h2h else [], torch_rounds, (refs.get("gemm_alone") or {}).get("rounds_ms"),
                           (refs.get("comm_alone") or {}).get("rounds_ms"))
    return {"session": session, "way": {**way, "name": WAY_NAME, "definition": WAY_DEFINITION},
            "versus": rows, "host": host_paced(f)}


def _versus_torch(f: dict) -> dict:
    """Against torch + NCCL from the configuration's own paired figures (one session)."""
    gain, spread = f["paired_gain_ms"], f.get("paired_spread_ms") or 0.0
    said = verdict(gain, spread)
    ratio = f["torch_nccl_ms"] / f["time_ms"]
    return {"name": "torch + NCCL", "ratio": ratio, "gain_ms": gain, "spread_ms": spread, "verdict": said,
            "line": f"against torch + NCCL: {ratio:.2f}x (paired gain {gain:+.3f} ± {spread:.3f} ms): {WORDS[said]}"}
