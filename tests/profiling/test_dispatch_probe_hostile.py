"""A stored dispatch probe is data: a hostile partition map is one ProbeError (the run then places
programs by the spec), never an 8 TiB allocation or an OverflowError (#41, third replay). Nor is
a planted or corrupt probe file a traceback (#41, a later replay): 200 000 nested ``[`` (a
RecursionError), a placement of strings (a TypeError), an empty or null placement (``min() arg is
an empty sequence``), a file too long, a named pipe: each is one ProbeError naming the file, so that
``simulate --probe FILE`` ends with one line and ``optimize`` places programs by the spec instead."""
import json
import os

import numpy as np
import pytest
from run_cli import assert_one_line_error, swizzleperf

from swizzleperf.profiling import dispatch_probe



@pytest.fixture(autouse=True)
def _private_home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "home" / ".cache"))


@pytest.mark.parametrize("part", [[2 ** 40], [10 ** 30], [-1], ["0"], [0.5], [], {"0": 1}])
def test_a_hostile_partition_map_is_one_probe_error(tmp_path, part):
    path = tmp_path / "probe_mi300x.json"
    path.write_text(json.dumps({"partitions": {"partition_of_sm": part}, "placement": {"1": {"sm_of_program": [0]}}}))
    with pytest.raises(dispatch_probe.ProbeError):
        dispatch_probe.load(path)


def _good() -> dict:
    """A probe as ``hw --probe`` writes it, on a GPU of 4 SMs in two partitions."""
    summary = {"first_programs_sm": [3, 0, 2, 1], "started_in_id_order": True, "first_wave_programs": 4,
               "distinct_sms": 4, "neighbours_on_same_sm": 0.0}
    return {"device": "NVIDIA test", "num_sms": 4, "spin_ns": 20000,
            "placement": {"1": {"sm_of_program": [3, 0, 2, 1], "start_ns": [0, 1, 2, 3], "summary": summary},
                          "2": {"sm_of_program": [3, 3, 0, 0], "start_ns": [0, 1, 2, 3], "summary": summary}},
            "partitions": {"partition_of_sm": [0, 0, 1, 1], "references_agree": True,
                           "cycles_after_reference": {"0": [290, 291, 376, 377], "2": [375, 378, 290, 292]},
                           "cycles_cold": [690, 692, 695, 700], "cycles_self_warm": [290, 290, 291, 289],
                           "cycles_after_own_far_read": [290, 291, 290, 290], "lines": 2048, "repeats": 3}}


def _full_size() -> dict:
    """A probe of the size ``hw --probe`` writes on an H200 (132 SMs, 8192 programs at one and two
    programs per SM, about 200 KB), its placement and cycles made up."""
    sms, programs = 132, 8192
    rng = np.random.default_rng(0)
    levels = {}
    for level in (1, 2):
        sm = rng.integers(0, sms, programs)
        start = np.arange(programs) * 10
        levels[str(level)] = {"sm_of_program": sm.tolist(), "start_ns": start.tolist(),
                              "summary": dispatch_probe.summarize(sm, start, 20_000)}
    part = [s % 2 for s in range(sms)]
    cycles = lambda near, far, ref: [near if part[s] == part[ref] else far for s in range(sms)]
    return {"device": "NVIDIA H200", "num_sms": sms, "spin_ns": 20_000, "placement": levels,
            "partitions": {"partition_of_sm": part, "references_agree": True,
                           "cycles_after_reference": {"0": cycles(290.0, 376.5, 0), "95": cycles(291.0, 377.0, 95)},
                           "cycles_cold": [690.0] * sms, "cycles_self_warm": [290.0] * sms,
                           "cycles_after_own_far_read": [376.0] * sms, "lines": 2048, "repeats": 3}}


def _changed(**parts) -> dict:
    """``_good()`` with the fields at dotted paths (``placement.1.summary``) replaced."""
    probe = _good()
    for dotted, value in parts.items():
        *above, last = dotted.split(".")
        node = probe
        for key in above:
            node = node[key]
        node[last] = value
    return probe


# The red-team's payloads (#41: /tmp/redteam41g/probes/), then the other shapes the simulator or
# describe() would have tripped on.
HOSTILE = {
    "deep": "[" * 200_000 + "]" * 200_000,
    "deep in a field": '{"partitions":' + "[" * 100_000 + "]" * 100_000 + ', "placement": {}}',
    "short": json.dumps({"partitions": {"partition_of_sm": [0, 0, 0]}, "placement": []}),
    "placement of a string": json.dumps(_changed(**{"placement": {"1": "x"}})),
    "null placement": json.dumps(_changed(placement=None)),
    "empty placement": json.dumps(_changed(placement={})),
    "a level that is no number": json.dumps(_changed(**{"placement": {"x": _good()["placement"]["1"]}})),
    "sm_of_program a string": json.dumps(_changed(**{"placement.1.sm_of_program": "0123"})),
    "sm_of_program empty": json.dumps(_changed(**{"placement.1.sm_of_program": []})),
    "an SM outside the map": json.dumps(_changed(**{"placement.2.sm_of_program": [0, 4]})),
    "a negative SM": json.dumps(_changed(**{"placement.1.sm_of_program": [0, -1]})),
    "an SM of 2**70": json.dumps(_changed(**{"placement.1.sm_of_program": [2 ** 70]})),
    "no device": json.dumps({k: v for k, v in _good().items() if k != "device"}),
    "a device of a list": json.dumps(_changed(device=["NVIDIA"])),
    "a device with a newline": json.dumps(_changed(device="NVIDIA\n\x1b[31mH100")),
    "a summary of a string": json.dumps(_changed(**{"placement.1.summary": "x"})),
    "a summary with a string count": json.dumps(_changed(**{"placement.1.summary.first_wave_programs": "4"})),
    "cycles of strings": json.dumps(_changed(**{"partitions.cycles_cold": ["690"] * 4})),
    "cycles of the wrong length": json.dumps(_changed(**{"partitions.cycles_self_warm": [290]})),
    "a reference outside the map": json.dumps(_changed(**{"partitions.cycles_after_reference": {"9": [1, 2, 3, 4]}})),
    "references_agree a string": json.dumps(_changed(**{"partitions.references_agree": "yes"})),
    "NaN cycles": json.dumps(_changed(**{"partitions.cycles_cold": [float("nan")] * 4})),
    "not JSON": "{",
    "a list": "[1, 2]",
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_a_planted_probe_is_one_probe_error_naming_the_file(tmp_path, name):
    path = tmp_path / "probe_mi300x.json"
    path.write_text(HOSTILE[name])
    with pytest.raises(dispatch_probe.ProbeError) as caught:
        dispatch_probe.load(path)
    message = str(caught.value)
    assert str(path) in message and "\n" not in message and len(message) < 1000, message


def test_a_probe_that_is_too_long_not_utf8_a_folder_or_a_pipe_is_one_probe_error(tmp_path):
    long = tmp_path / "long.json"
    with open(long, "wb") as handle:   # sparse: nothing is written but its length
        handle.truncate(dispatch_probe.MAX_PROBE_BYTES + 1)
    binary = tmp_path / "binary.json"
    binary.write_bytes(b'{"device": "\xff\xfe"}')
    pipe = tmp_path / "pipe.json"
    os.mkfifo(pipe)                    # opened without blocking and refused, never read for ever
    for path, expected in ((long, "longer than"), (binary, "UTF-8"), (tmp_path, "not a regular file"),
                           (pipe, "not a regular file"), (tmp_path / "missing.json", "cannot read")):
        with pytest.raises(dispatch_probe.ProbeError, match=expected) as caught:
            dispatch_probe.load(path)
        assert "\n" not in str(caught.value) and str(path) in str(caught.value)


def test_a_good_probe_loads_as_it_was_written_and_is_described(tmp_path):
    path = tmp_path / "probe_h200.json"
    path.write_text(json.dumps(_good()))
    assert dispatch_probe.load(path) == _good()
    assert "L2 partitions: [2, 2] SMs" in dispatch_probe.describe(dispatch_probe.load(path))
    path.write_text(json.dumps(_full_size()))
    measured = dispatch_probe.load(path)
    assert len(measured["partitions"]["partition_of_sm"]) == 132 and "references agree" in dispatch_probe.describe(measured)
    # a probe written by hand with only what the simulator reads is used, and described as far as it goes
    minimal = {"device": "NVIDIA test", "placement": {"1": {"sm_of_program": [1, 0]}},
               "partitions": {"partition_of_sm": [0, 1]}}
    path.write_text(json.dumps(minimal))
    assert dispatch_probe.load(path) == minimal
    assert "L2 partitions: [1, 1] SMs" in dispatch_probe.describe(minimal)


@pytest.mark.parametrize("name", ["deep", "deep in a field", "short", "placement of a string", "null placement"])
def test_simulate_with_a_planted_probe_ends_with_one_line(tmp_path, gemm_path, name):
    (tmp_path / "bad.json").write_text(HOSTILE[name])
    proc = swizzleperf("simulate", str(gemm_path), "--probe", str(tmp_path / "bad.json"), cwd=tmp_path, timeout=300)
    assert_one_line_error(proc, "bad.json")
    assert proc.returncode == 2


@pytest.mark.parametrize("name", list(HOSTILE))
def test_a_run_leaves_a_planted_probe_out_in_one_line(tmp_path, name):
    """What ``optimize`` does with the probe of its working folder (agent/loop/run.py
    ``_stored_probe``): one line, then programs placed by the spec."""
    from swizzleperf import hwspecs
    from swizzleperf.agent.loop.run import _stored_probe
    workdir = tmp_path / ".swizzleperf"
    workdir.mkdir()
    (workdir / "probe_mi300x.json").write_text(HOSTILE[name])
    events = []
    assert _stored_probe(workdir, hwspecs.resolve_target("mi300x"), lambda kind, data: events.append(data["name"])) is None
    assert len(events) == 1 and "by the spec instead" in events[0] and "\n" not in events[0], events


def test_optimize_with_a_planted_probe_runs_and_says_why_in_one_line(tmp_path, gemm_path):
    (tmp_path / ".swizzleperf").mkdir()
    (tmp_path / ".swizzleperf" / "probe_mi300x.json").write_text(HOSTILE["placement of a string"])
    (tmp_path / "gemm.py").write_text(gemm_path.read_text())
    proc = swizzleperf("optimize", "gemm.py", "-n", "1", "--no-ncu", cwd=tmp_path)
    assert proc.returncode == 0 and "Traceback" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    said = " ".join(proc.stdout.split())
    assert "probe_mi300x.json" in said and "the simulator places programs by the spec instead" in said, said
