"""Figures of one timing session (issue #44, agent/distributed/session.py and the report that uses it):
the share of the way to the perfect-overlap bound only from the head-to-head's own rounds, refused
across sessions and on a figure the answer rejected; the spread rule both ways (a tie is a tie,
whichever side it favours); the host's pace beside the GPUs' where the host was slower."""
from __future__ import annotations

import pytest

from swizzleperf.agent.distributed import session
from swizzleperf.agent.loop import report as report_mod

TORCH = [3.10, 3.08, 3.12, 3.11, 3.09, 3.10]
OURS = [2.88, 2.86, 2.90, 2.87, 2.89, 2.88]
GEMM = [2.73, 2.72, 2.74, 2.73, 2.72, 2.73]


def _report(best_rounds=OURS, h2h_refs=None, references=None, contenders=None) -> dict:
    """A measured run's report as build_report leaves it before ``_distributed_outcome``: the best
    re-timed in the head-to-head (its rounds beside torch + NCCL's), the run's earlier references
    (torch + NCCL 3.20 there, the bound 2.73: another session)."""
    best = {"name": "push_copy_engine", "verdict": "PASS", "kind": "candidate", "time_ms": 2.88, "time_spread_ms": 0.02,
            "rounds_ms": list(best_rounds), "config": {"pattern": "push_copy_engine"}}
    refs = references or {"torch_nccl_ms": 3.20, "torch_nccl_spread_ms": 0.02, "gemm_alone_ms": 2.73,
                          "comm_alone_ms": 0.5, "overlap_bound_ms": 2.73, "torch_fused_ms": 2.93,
                          "torch_fused_spread_ms": 0.02, "notes": {"torch_fused": "fused_all_gather_matmul"}}
    report = {"mode": "measured", "best": best, "baseline": None,
              "confirmation": {"contenders": contenders or [dict(best)]},
              "distributed": {"references": refs, "confirmed_torch_nccl": {
                  "torch_nccl_ms": 3.10, "torch_nccl_spread_ms": 0.02, "rounds_ms": TORCH,
                  "references": h2h_refs or {}}}}
    report_mod._with_confirmed_torch(report)
    return report


def test_no_share_of_the_way_across_two_timing_sessions():
    """The bound's parts timed only in the run's references rounds: no percentage (the old report
    gave (3.20 - 2.88) / (3.20 - 2.73) = 68 % from two sessions), and report.md says why."""
    report = _report()
    out = report_mod._distributed_outcome(report, [])
    assert "way_to_bound" not in out
    assert out["way_to_bound_note"].startswith("not from one session")
    report["distributed"].update(out, world_size=2)
    text = "\n".join(report_mod.session_lines(out["session"]))
    assert "%" not in text.split(session.WAY_NAME)[1].split("defined as")[0]
    assert "not from one session" in text and session.WAY_DEFINITION in text


def test_the_share_of_the_way_comes_from_the_head_to_heads_own_rounds():
    """With the GEMM alone timed in the head-to-head's rounds: per round (torch - ours) / (torch -
    max(GEMM, torch - GEMM)); here about 60 %, where the references' torch + NCCL gave 68 %."""
    report = _report(h2h_refs={"gemm_alone": {"rounds_ms": GEMM}})
    out = report_mod._distributed_outcome(report, [])
    shares = [(t - c) / (t - g) for t, c, g in zip(TORCH, OURS, GEMM)]
    assert out["way_to_bound"] == pytest.approx(sorted(shares)[2] / 2 + sorted(shares)[3] / 2)
    assert 0.55 < out["way_to_bound"] < 0.65 and out["way_to_bound_spread"] >= 0
    text = "\n".join(report_mod.session_lines(out["session"]))
    assert f"{session.WAY_NAME}: {100 * out['way_to_bound']:.0f} % ±" in text and "over 6 rounds" in text


def test_no_share_of_the_way_on_a_figure_the_answer_rejected():
    """AG + GEMM llama8b-up-4k on two H200s: push_copy_engine's bimodal 0.362 ± 0.240 ms was the
    fastest by median, the answer went to torch + NCCL; the way (79 % in the old table) is not
    computed on it."""
    bimodal = [0.36, 0.60, 0.36, 0.61, 0.36, 0.60]
    torch = [0.44, 0.43, 0.44, 0.45, 0.43, 0.44]
    report = _report(best_rounds=bimodal, h2h_refs={"gemm_alone": {"rounds_ms": [0.338] * 6}})
    report["distributed"]["confirmed_torch_nccl"]["rounds_ms"] = torch
    report["best"].update(time_ms=0.36, time_spread_ms=0.24)
    report["confirmation"]["contenders"] = [dict(report["best"])]
    report_mod._with_confirmed_torch(report)
    out = report_mod._distributed_outcome(report, [])
    assert out["answer"]["use"] == "torch + NCCL"
    assert "way_to_bound" not in out and "rejected" in out["way_to_bound_note"]


def test_the_share_of_the_way_is_the_answers_not_the_rejected_fastests():
    """The answer passes over a bimodal fastest for a steady contender: the share of the way is
    computed on the contender the answer names, from its own rounds in the head-to-head."""
    bimodal = [2.50, 3.30, 2.50, 3.30, 2.50, 3.30]
    steady = [2.95, 2.93, 2.97, 2.94, 2.96, 2.95]
    report = _report(best_rounds=bimodal, h2h_refs={"gemm_alone": {"rounds_ms": GEMM}},
                     contenders=[{"name": "push_copy_engine", "time_ms": 2.9, "time_spread_ms": 0.8,
                                  "rounds_ms": bimodal, "config": {"pattern": "push_copy_engine"}},
                                 {"name": "default", "time_ms": 2.95, "time_spread_ms": 0.02,
                                  "rounds_ms": steady, "config": {"pattern": "push"}}])
    out = report_mod._distributed_outcome(report, [])
    assert out["answer"]["config"] == {"pattern": "push"}
    shares = sorted((t - c) / (t - g) for t, c, g in zip(TORCH, steady, GEMM))
    assert out["way_to_bound"] == pytest.approx((shares[2] + shares[3]) / 2)


@pytest.mark.parametrize("other, said", [
    ([o + 0.01 for o in OURS], "tie"),          # the other slower by 0.01 with a 0.02 spread: a tie, not a win
    ([o - 0.01 for o in OURS], "tie"),          # the other faster inside the spread: a tie, not a loss
    ([o + 0.20 for o in OURS], "faster"),
    ([o - 0.20 for o in OURS], "slower"),
])
def test_the_spread_rule_both_ways(other, said):
    noisy = [o + d for o, d in zip(other, (0.0, 0.02, -0.02, 0.01, -0.01, 0.0))]
    v = session.versus(OURS, noisy, "torch's fused op")
    assert v["verdict"] == said, v
    if said == "tie":
        assert "a tie: the difference is inside the paired spread, whichever side it favours" in v["line"]


def test_torchs_fused_op_is_a_tie_or_a_win_only_from_the_same_rounds():
    """torch's fused op with a higher median than ours, but timed in the references' rounds only:
    no verdict; timed in the head-to-head within the paired spread: a tie (the old text said
    'slower than our best' at all six)."""
    apart = report_mod._distributed_outcome(_report(), [])["session"]["versus"]
    fused = next(v for v in apart if v["name"] == "torch's fused op")
    assert fused["verdict"] is None and "not timed in the same rounds" in fused["line"]
    close = [o + d for o, d in zip(OURS, (0.03, -0.02, 0.04, -0.01, 0.05, 0.0))]
    same = report_mod._distributed_outcome(_report(h2h_refs={"torch_fused": {"rounds_ms": close}}), [])
    fused = next(v for v in same["session"]["versus"] if v["name"] == "torch's fused op")
    assert fused["verdict"] == "tie" and fused["ratio"] > 1.0


def test_the_answer_line_gives_no_verdict_between_sessions():
    """The answer's note on torch's fused op does not call it faster than a configuration timed in
    other rounds (it did: 'faster still' whenever its median was lower)."""
    from swizzleperf.agent.distributed import measured
    refs = {"torch_nccl_ms": 3.2, "torch_nccl_spread_ms": 0.02, "torch_fused_ms": 2.85, "torch_fused_spread_ms": 0.02,
            "notes": {"torch_fused": "fused_all_gather_matmul"}}
    best = {"name": "x", "time_ms": 2.88, "time_spread_ms": 0.02, "torch_nccl_ms": 3.1, "torch_nccl_spread_ms": 0.02,
            "paired_gain_ms": 0.22, "paired_spread_ms": 0.02}
    line = measured.answer(best, "measured", refs)["line"]
    assert "faster still" not in line and "no verdict between them" in line


def test_a_host_paced_row_shows_both_figures():
    """GEMM + RS push_copy_engine at o-4k on two H100s: the host 0.470 ms to queue a launch the
    GPUs ran in 0.376 (torch + NCCL 0.515): 1.37x queued ahead, at most 1.10x launched one by one."""
    f = {"name": "push_copy_engine", "verdict": "PASS", "time_ms": 0.376, "time_spread_ms": 0.004,
         "torch_nccl_ms": 0.515, "paired_gain_ms": 0.139, "paired_spread_ms": 0.005, "host_ms": 0.470,
         "time_source": "measured"}
    paced = session.host_paced(f)
    assert paced["ratio_queued"] == pytest.approx(1.37, abs=0.005)
    assert paced["ratio_host_paced"] == pytest.approx(1.096, abs=0.001)
    row = report_mod._config_row("best: push_copy_engine", f, {}, {"time_ms": None})
    assert "host 0.470 to queue one launch" in row and "at most 1.10x launched one by one" in row
    assert session.host_paced({**f, "host_ms": 0.30}) is None
    assert "launched one by one" not in report_mod._config_row("best", {**f, "host_ms": 0.30}, {}, {"time_ms": None})
