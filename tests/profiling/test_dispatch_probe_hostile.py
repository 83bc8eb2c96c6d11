"""A stored dispatch probe is data: a hostile partition map is one ProbeError (the run then places
programs by the spec), never an 8 TiB allocation or an OverflowError (#41, third replay)."""
import json

import pytest

from swizzleperf.profiling import dispatch_probe


@pytest.mark.parametrize("part", [[2 ** 40], [10 ** 30], [-1], ["0"], [0.5], [], {"0": 1}])
def test_a_hostile_partition_map_is_one_probe_error(tmp_path, part):
    path = tmp_path / "probe_mi300x.json"
    path.write_text(json.dumps({"partitions": {"partition_of_sm": part}, "placement": {"1": {"sm_of_program": [0]}}}))
    with pytest.raises(dispatch_probe.ProbeError):
        dispatch_probe.load(path)
