"""Choosing the best: medians against spreads, head-to-head rounds compared pairwise."""
import pytest

from swizzleperf.agent.verification import lessons


def _timed(t, spread, rounds=None, dram=1.0, kind="candidate"):
    m = {"time_ms": t, "time_spread_ms": spread, "dram_bytes": dram, "l2_hit_rate": 0.5}
    if rounds:
        m["rounds_ms"] = rounds
    return {"metrics": m, "verdict": "PASS", "kind": kind, "name": f"t{t}", "iteration": 1}


def test_a_gain_smaller_than_the_spread_is_noise():
    assert lessons.beyond_noise(_timed(3.30, 0.02), _timed(3.40, 0.02), "measured")
    assert not lessons.beyond_noise(_timed(3.38, 0.05), _timed(3.40, 0.02), "measured")


def test_head_to_head_rounds_are_compared_pairwise():
    # Both drift by 0.15 ms over the rounds (IQR 0.07 each), but A is 0.07 ms faster in every round.
    a = _timed(3.39, 0.07, [3.30, 3.35, 3.40, 3.45, 3.39])
    b = _timed(3.46, 0.07, [3.37, 3.42, 3.47, 3.52, 3.46])
    assert lessons.beyond_noise(a, b, "measured") and not lessons.beyond_noise(b, a, "measured")
    assert lessons.choose_confirmed([b, a]) is a


def test_ties_go_to_the_fewer_dram_bytes():
    fast_heavy = _timed(3.39, 0.05, dram=3e9)
    light = _timed(3.40, 0.05, dram=2e9)
    assert lessons.choose_confirmed([fast_heavy, light]) is light


def test_simulated_mode_ranks_by_hit_rate():
    a = {"metrics": {"l2_hit_rate": 0.84, "dram_bytes": 1.0}}
    b = {"metrics": {"l2_hit_rate": 0.81, "dram_bytes": 1.0}}
    assert lessons.better(a, b, "simulated") and lessons.beyond_noise(a, b, "simulated")


def test_lessons_say_why_and_how_far_off_the_prediction_was():
    rejected = {"name": "naive", "verdict": "NOT_PERMUTATION"}
    assert "remainder" in lessons.lesson(rejected, {}, {}, "simulated")
    attempt = {"name": "g16", "verdict": "PASS",
               "metrics": {"l2_hit_rate": 0.80, "l2_source": "measured:ncu", "predicted_l2_hit_rate": 0.95,
                           "time_ms": 3.37, "time_spread_ms": 0.04}}
    best = {"metrics": {"time_ms": 3.40, "time_spread_ms": 0.02}}
    baseline = {"metrics": {"time_ms": 3.90, "l2_hit_rate": 0.45}}
    text = lessons.lesson(attempt, best, baseline, "measured")
    assert "+15.0 points" in text and "within noise" in text and "1.16x the baseline" in text


def test_the_prediction_is_compared_with_ncus_read_lookups_where_given():
    """The simulator counts reads only; ncu's all-sector rate counts stores as hits (a transpose:
    50 % all sectors, 0 % read lookups on an H100), so the lesson compares like with like."""
    attempt = {"name": "t", "verdict": "PASS",
               "metrics": {"l2_hit_rate": 0.50, "l2_read_hit_rate": 0.02, "l2_source": "measured:ncu",
                           "predicted_l2_hit_rate": 0.0}}
    text = lessons.lesson(attempt, {}, {"metrics": {"l2_hit_rate": 0.5}}, "measured")
    assert "-2.0 points against ncu's read lookups 2.0%" in text
    del attempt["metrics"]["l2_read_hit_rate"]
    assert "-50.0 points against measured:ncu 50.0%" in lessons.lesson(attempt, {}, {}, "measured")


URL = "http://127.0.0.1:8089/v1"


@pytest.mark.parametrize("reason, expected", [
    (f"LLM endpoint {URL}: no usable reply within the 300 s deadline of a proposal (2 request(s); deadline: "
     f"cancelled while the reply was streaming)", "no reply in time; not a verdict on any order."),
    (f"LLM endpoint {URL} returned HTTP 503: busy (3 requests)",
     "no usable answer from the model's server; not a verdict on any order."),
    (f"model 'qwen' not found at {URL}: HTTP 404: no such model",
     "no usable answer from the model's server; not a verdict on any order."),
    ("no usable reply after 3 attempts: line 10: `if` is not allowed; the last reply began: '...'",
     "no candidate; every reply was refused before verification."),
])
def test_a_proposal_without_candidate_gets_a_lesson_without_the_endpoint(reason, expected):
    """A lost request once read "none was rejected (NO_CANDIDATE): the proposer produced no
    candidate" beside the endpoint's URL, in the prompt of every later proposal (2026-12-07)."""
    attempt = {"name": "none", "verdict": "NO_CANDIDATE", "reason": reason}
    text = lessons.lesson(attempt, {}, {}, "simulated")
    assert text == expected and URL not in text
