"""The dispatch probe's summary on a placement written by hand, and the probe itself on a GPU."""
import numpy as np
import pytest

from swizzleperf.profiling.dispatch_probe import probe, summarize


def test_summary_of_a_hand_written_placement():
    # 8 programs on 4 SMs, two per SM, ids 0-3 start at once, 4-7 after the first wave (spin 100).
    sm = np.array([3, 3, 0, 0, 3, 3, 0, 0])
    start = np.array([0, 1, 2, 3, 150, 151, 152, 153])
    s = summarize(sm, start, spin_ns=100)
    assert s["first_wave_programs"] == 4 and s["distinct_sms"] == 2
    assert s["started_in_id_order"] and s["neighbours_on_same_sm"] == pytest.approx(4 / 7)


@pytest.mark.gpu
def test_probe_on_the_gpu():
    result = probe(num_programs=512)
    sm = np.array(result["sm_of_program"])
    assert (sm >= 0).all() and result["summary"]["first_wave_programs"] >= 64
