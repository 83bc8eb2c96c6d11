"""What the prompt says in figures: one unit for bytes, no goal no order can reach, no line the
model cannot act on.

A real Qwen2.5-Coder-1.5B run (2026-12-07) was shown one DRAM quantity as ``8.053e+08 bytes``,
``768 MiB``, ``0.81 GB`` and ``805306368``, asked for "fewer DRAM bytes" when every known order
moved the same bytes, and given each lost request's endpoint URL and a garbled lesson.
"""
from __future__ import annotations

import re

import pytest
from test_llm_proposer import TARGET

from swizzleperf.agent.proposers.base import ProposalContext
from swizzleperf.agent.proposers.llm import render_messages
from swizzleperf.agent.verification import lessons
from swizzleperf.hwspecs import load_spec

DRAM = 805306368            # gemm's predicted DRAM bytes on an MI300X: 768 MiB, 0.81 GB
ROOF = {"status": "predicted", "line": "0.81 GB DRAM predicted, would be compute-bound; no order can run "
                                       "under 1.682 ms; achieved rates not measured"}
ENDPOINT = "http://127.0.0.1:8089/v1"
LOST = (f"LLM endpoint {ENDPOINT}: no usable reply within the 300 s deadline of a proposal (2 request(s); "
        f"deadline: cancelled while the reply was streaming)")


def _profile_log(dram: float) -> list:
    return [
        {"rank": 2, "name": "l2_hit_rate", "value": 0.8112, "unit": "fraction", "source": "simulated:mi300x",
         "meaning": "share of L2 lookups served by the L2"},
        {"rank": 3, "name": "dram_bytes", "value": dram, "unit": "bytes", "source": "simulated:mi300x",
         "meaning": "bytes between the L2 and memory"},
        {"rank": 7, "name": "cross_domain_bytes", "value": 1.086e9, "unit": "bytes", "source": "simulated:mi300x",
         "meaning": "bytes predicted to cross domains"},
    ]


def _metrics(rate: float, dram: float) -> dict:
    return {"l2_hit_rate": rate, "l2_source": "simulated:mi300x", "dram_bytes": dram,
            "dram_source": "simulated:mi300x", "predicted_l2_hit_rate": rate,
            "predicted_source": "simulated:mi300x", "roof": ROOF}


def _context(drams=(DRAM, DRAM, DRAM), history=(), best=None) -> ProposalContext:
    ranking = [{"name": f"grouped-m:{8 * (i + 1)}", "source": TARGET, "predicted_l2_hit_rate": 0.84 - 0.01 * i,
                "predicted_dram_bytes": d, "predicted_source": "simulated:mi300x", "tried": ""}
               for i, d in enumerate(drams)]
    baseline = {"iteration": 0, "kind": "baseline", "name": "baseline", "verdict": "PASS",
                "metrics": _metrics(0.8112, DRAM)}
    return ProposalContext(
        kernel_name="gemm", kernel_source=TARGET, target_name="swizzle", target_source=TARGET,
        hardware=load_spec("mi300x"), mode="simulated", problem={"M": 16384, "N": 16384, "K": 4096},
        meta={"BLOCK_M": 128, "BLOCK_N": 256}, tile_grid=(128, 64), swizzle_args=(128, 64),
        analysis="Each A row-panel is read by 64 programs.",
        profile={"l2_hit_rate": 0.8112, "dram_bytes": DRAM, "profile": _profile_log(DRAM), "roof": ROOF},
        history=list(history), best=best or baseline, iteration=len(history) + 1, evidence=lambda: ranking)


def _user(context: ProposalContext, detail: int = 0) -> str:
    return render_messages(context, detail)[1]["content"]


@pytest.mark.parametrize("detail", [0, 2, 3])
def test_every_byte_quantity_of_the_prompt_is_in_decimal_gigabytes(detail):
    passed = {"iteration": 1, "kind": "candidate", "name": "llm", "verdict": "PASS", "reason": "",
              "lesson": "llm: L2 hit rate 84.0% (simulated:mi300x); +2.8 points over the baseline.",
              "metrics": _metrics(0.8395, DRAM), "source": TARGET}
    user = _user(_context(history=[passed], best=passed), detail)
    assert "MiB" not in user.split("## Kernel")[1]          # the hardware's capacities stay binary
    for raw in ("805306368", "8.053e+08", "768 MiB", "GiB"):
        assert raw not in user, raw
    assert "0.81 GB" in user
    assert re.search(r"\| grouped-m:8 \| 84\.0 % \| 0\.81 GB \|", user)
    assert "dram_bytes = 0.81 GB (simulated:mi300x)" in user
    if detail < 3:
        assert "| dram_bytes | 0.81 | GB |" in user and "| cross_domain_bytes | 1.09 | GB |" in user


def test_a_small_traffic_keeps_three_significant_digits():
    context = _context(drams=(12_345_678, 12_345_678))
    assert "| 0.0123 GB |" in _user(context)


def test_the_goal_asks_for_fewer_dram_bytes_only_where_orders_differ_in_them():
    same = _user(_context(drams=(DRAM, DRAM * 1.004, DRAM)))   # within 0.5 %: the same bytes
    assert "higher predicted L2 hit rate" in same and "fewer DRAM bytes" not in same
    differ = _user(_context(drams=(DRAM, DRAM * 1.2, DRAM)))
    assert "fewer DRAM bytes" in differ


@pytest.mark.parametrize("detail", [0, 1, 2, 3])
def test_a_proposal_lost_to_the_endpoint_is_one_short_line_without_the_url(detail):
    lost = {"iteration": 1, "kind": "candidate", "name": "none", "verdict": "NO_CANDIDATE", "reason": LOST,
            "metrics": {}, "source": ""}
    lost["lesson"] = lessons.lesson(lost, {}, {}, "simulated")
    user = _user(_context(history=[lost]), detail)
    assert "- Attempt 1: no reply in time; not a verdict on any order\n" in user
    assert ENDPOINT not in user and "127.0.0.1" not in user and "none was rejected" not in user


def test_a_proposal_whose_replies_were_refused_still_says_why():
    reason = ("no usable reply after 3 attempts: line 10: `if` is not allowed; the last reply began: "
              "'```python\\n@triton.jit'")
    refused = {"iteration": 1, "kind": "candidate", "name": "none", "verdict": "NO_CANDIDATE", "reason": reason,
               "metrics": {}, "source": ""}
    refused["lesson"] = lessons.lesson(refused, {}, {}, "simulated")
    user = _user(_context(history=[refused]), 1)
    assert "- Attempt 1: no candidate: no usable reply after 3 attempts: line 10: `if` is not allowed\n" in user
    assert "the last reply began" not in user and "none was rejected" not in user


def test_best_so_far_shows_a_prediction_only_where_it_differs_from_the_figure_beside_it():
    best = {"iteration": 2, "kind": "candidate", "name": "llm", "verdict": "PASS", "reason": "", "lesson": "",
            "metrics": _metrics(0.8395, DRAM), "source": TARGET}
    user = _user(_context(history=[best], best=best), 3)
    line = next(line for line in user.splitlines() if line.startswith("Attempt 2: llm"))
    assert "l2_hit_rate = 0.8395" in line and "predicted_l2_hit_rate" not in line
    measured = dict(best, metrics={**best["metrics"], "l2_source": "measured:ncu", "l2_hit_rate": 0.79})
    line = next(line for line in _user(_context(history=[measured], best=measured), 3).splitlines()
                if line.startswith("Attempt 2: llm"))
    assert "l2_hit_rate = 0.79 (measured:ncu)" in line and "predicted_l2_hit_rate = 0.8395" in line
