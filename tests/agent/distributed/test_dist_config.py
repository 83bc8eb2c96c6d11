"""The distributed configuration's schema (#21): its shape refused in one line (deep JSON, huge
integers, a number for a swizzle, a list for a pattern), and knobs of the wrong type OUTSIDE_SPACE
(``32.0`` is not ``32``, ``true`` is not ``1``), on two kernels' spaces."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from swizzleperf.agent.distributed import config as dist_config
from swizzleperf.agent.distributed.evaluator import OutsideSpace, parse_candidate
from swizzleperf.agent.verification.candidate import CandidateError
from swizzleperf.agent.verification.load import load_spec

ROOT = Path(__file__).resolve().parents[3]
AGG = ROOT / "kernels" / "distributed" / "all_gather_gemm.py"
GAS = ROOT / "kernels" / "distributed" / "gemm_all_scatter.py"


@pytest.fixture(scope="module")
def agg():
    return load_spec(AGG)


@pytest.fixture(scope="module")
def gas():
    return load_spec(GAS)


@pytest.mark.parametrize("text, expected", [
    ("[" * 100_000 + "]" * 100_000, "characters, more than the"),
    ('{"pattern": ' + "[" * 50 + "]" * 50 + "}", "nests 51 levels deep"),
    ('{"pattern": "push", "COMM_SMS": ' + "9" * 5000 + "}", "an integer of 5000 digits"),
    ('{"pattern": "push", "swizzle": 5}', "'swizzle' must be a catalog name (at most 64 characters) or the source"),
    ('{"pattern": "push", "swizzle": "' + "x" * 5000 + '"}', "got 5000 characters without a `def`"),
    ('{"pattern": ["push", "pull"]}', "'pattern' must be the name of a pattern"),
    ('{"pattern": "push", "COMM_SMS": [16]}', "'COMM_SMS' must be a knob name"),
    ('{"pattern": "push", "COMM_SMS": null}', "got None"),
    ('{"COMM_SMS": 16}', 'has no "pattern"'),
    ("[1, 2]", "must be a JSON object, got list"),
    ("{not json", "is not JSON"),
    ('{"pattern": "push", "swizzle": "@triton.jit\\ndef swizzle(pid, m, n):\\n    return '
     + "+".join(["pid"] * 2500) + '"}', "nests expressions more than 64 levels"),
])
def test_a_configuration_of_the_wrong_shape_is_invalid_in_one_line(agg, text, expected):
    with pytest.raises(CandidateError) as info:
        parse_candidate(text, agg)
    assert not isinstance(info.value, OutsideSpace)
    assert expected in str(info.value) and "\n" not in str(info.value) and len(str(info.value)) < 700


@pytest.mark.parametrize("kernel, config, expected", [
    ("agg", {"pattern": "push", "COMM_SMS": 32.0}, "COMM_SMS must be one of 8, 16, 32, got 32.0 (number"),
    ("agg", {"pattern": "push_copy_engine", "CE_GROUPS": True}, "CE_GROUPS must be one of 1, 2, 4, 8, got True"),
    ("agg", {"pattern": "push", "COMM_SMS": "16"}, "got '16' (text, not integer)"),
    ("gas", {"pattern": "bulk_sync", "BLOCK_M": 128.0}, "BLOCK_M must be one of"),
    ("gas", {"pattern": "bulk_sync", "EPILOGUE_SUBTILE": False}, "EPILOGUE_SUBTILE must be one of 0, 1, got False"),
    ("gas", {"pattern": "bulk_sync", "COMM_SMS": 12}, "COMM_SMS must be one of 8, 16, 32, got 12"),
])
def test_knobs_of_the_wrong_type_are_outside_the_space(request, kernel, config, expected):
    with pytest.raises(OutsideSpace) as info:
        parse_candidate(json.dumps(config), request.getfixturevalue(kernel))
    assert expected in str(info.value), str(info.value)


def test_values_of_the_right_type_pass_exactly(agg, gas):
    assert parse_candidate('{"pattern": "push", "COMM_SMS": 32}', agg).meta == {"COMM_SMS": 32}
    candidate = parse_candidate('{"pattern": "bulk_sync", "BLOCK_M": 128, "swizzle": "grouped-m:8"}', gas)
    assert candidate.meta == {"BLOCK_M": 128} and type(candidate.meta["BLOCK_M"]) is int
    assert candidate.swizzle == "grouped-m:8"
    assert dist_config.load('{"pattern": "x", "flag": true, "f": 1.5}') == {"pattern": "x", "flag": True, "f": 1.5}
