"""The dispatch probe's summary on a placement written by hand, and the probe itself on a GPU."""
import numpy as np
import pytest

import json

from swizzleperf.profiling.dispatch_probe import (ProbeError, describe, load, probe, program_partitions,
                                                  split_two, summarize)


def test_summary_of_a_hand_written_placement():
    # 8 programs on 4 SMs, two per SM, ids 0-3 start at once, 4-7 after the first wave (spin 100).
    sm = np.array([3, 3, 0, 0, 3, 3, 0, 0])
    start = np.array([0, 1, 2, 3, 150, 151, 152, 153])
    s = summarize(sm, start, spin_ns=100)
    assert s["first_wave_programs"] == 4 and s["distinct_sms"] == 2
    assert s["started_in_id_order"] and s["neighbours_on_same_sm"] == pytest.approx(4 / 7)


def test_split_two_cuts_at_the_largest_gap():
    latency = np.array([290.0, 376.0, 291.5, 380.0, 288.0, 371.0])
    assert split_two(latency).tolist() == [0, 1, 0, 1, 0, 1]


STORED = {"device": "NVIDIA test", "num_sms": 4,
          "placement": {"1": {"sm_of_program": [3, 0, 2, 1],
                              "summary": {"first_programs_sm": [3, 0, 2, 1], "first_wave_programs": 4,
                                          "distinct_sms": 4, "neighbours_on_same_sm": 0.0}}},
          "partitions": {"partition_of_sm": [0, 0, 1, 1], "references_agree": True,
                         "cycles_after_reference": {"0": [290, 291, 376, 377], "2": [375, 378, 290, 292]},
                         "cycles_cold": [690, 692, 695, 700], "cycles_self_warm": [290, 290, 291, 289],
                         "cycles_after_own_far_read": [290, 291, 290, 290]}}


def test_program_partitions_repeat_the_probe_over_the_grid():
    part, sms = program_partitions(STORED, num_programs=6, programs_per_sm=2)  # nearest level: 1
    assert part.tolist() == [1, 0, 1, 0, 1, 0] and sms.tolist() == [2, 2]


def test_load_and_describe(tmp_path):
    path = tmp_path / "probe_h200.json"
    path.write_text(json.dumps(STORED))
    text = describe(load(path))
    assert "L2 partitions: [2, 2] SMs (the two references agree)" in text
    assert "290 cycles/load on its partition's SMs, 376 on the others'" in text
    path.write_text(json.dumps({"device": "x", "sm_of_program": [0]}))  # the older format
    with pytest.raises(ProbeError, match="no partition map"):
        load(path)
    with pytest.raises(ProbeError, match="cannot read"):
        load(tmp_path / "missing.json")


@pytest.mark.gpu
def test_probe_on_the_gpu():
    import torch
    result = probe(num_programs=512)
    num_sms = torch.cuda.get_device_properties(0).multi_processor_count
    for level, run in result["placement"].items():
        sm = np.array(run["sm_of_program"])
        assert (sm >= 0).all() and run["summary"]["first_wave_programs"] <= num_sms * int(level)
    parts = result["partitions"]
    assert len(parts["partition_of_sm"]) == num_sms and parts["references_agree"]
