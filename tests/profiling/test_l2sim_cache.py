"""The simulator's disk cache (profiling/l2sim.py, "Cache"): a repeated simulation is read back,
any change to what a result depends on is a new simulation, and a cache that is off or broken
never stops one. Each test has a cache folder of its own (not the session's of conftest.py)."""
from __future__ import annotations

import dataclasses
import json
import sqlite3

import numpy as np
import pytest

from swizzleperf.profiling import l2sim
from swizzleperf.profiling.l2sim import simulate
from test_l2sim import B, make_hw, make_trace


@pytest.fixture
def own_cache(tmp_path, monkeypatch):
    folder = tmp_path / "simulations"
    monkeypatch.setenv(l2sim.CACHE_ENV, str(folder))
    return folder


@pytest.fixture
def replays(monkeypatch):
    """The number of replays run so far (a replay is a simulation that the cache did not answer)."""
    calls = []
    real = l2sim._replay

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)
    monkeypatch.setattr(l2sim, "_replay", counted)
    return calls


def _two_programs():
    # two programs share block 0; L2 of 2 blocks: 0 m, 1 m, 0 h, 2 m -> 1 hit of 4 reads
    return make_trace([[[0], [1]], [[0], [2]]]), make_hw(l2_bytes=2 * B)


def _figures(result: l2sim.SimResult) -> dict:
    return {k: v for k, v in result.to_dict().items() if k != "seconds"}


def test_a_repeated_simulation_is_read_back_with_the_same_figures(own_cache, replays):
    trace, hw = _two_programs()
    first = simulate(trace, np.arange(2), hw)
    again = simulate(trace, np.arange(2), hw)
    assert len(replays) == 1 and any(own_cache.iterdir())
    assert _figures(again) == _figures(first) and again.l2_hit_bytes == B
    assert again.seconds < first.seconds + 1.0     # this call's time, not the first one's


def test_whatever_a_result_depends_on_is_in_its_key(own_cache, replays, monkeypatch):
    trace, hw = _two_programs()
    order = np.arange(2)
    variants = [
        (trace, order[::-1].copy(), hw, None),
        (trace, order, dataclasses.replace(hw, l2_bytes_per_domain=3 * B), None),
        (trace, order, dataclasses.replace(hw, name="toy2"), None),
        (dataclasses.replace(trace, block_bytes=trace.block_bytes * 2), order, hw, None),
        (dataclasses.replace(trace, programs_per_cu=2), order, hw, None),
        (dataclasses.replace(trace, l1_cached=True), order, hw, None),
        (dataclasses.replace(trace, source="another model"), order, hw, None),
    ]
    keys = {l2sim._cache_key(trace, order, hw, None)}
    keys |= {l2sim._cache_key(*variant) for variant in variants}
    keys.add(l2sim._cache_key(trace, order, hw, {"device": "X", "placement": [0, 1]}))
    assert len(keys) == len(variants) + 2
    simulate(trace, order, hw)
    for variant in variants:
        simulate(*variant)
    assert len(replays) == 1 + len(variants)
    # the simulator's own code is in the key: another code digest, another simulation
    monkeypatch.setattr(l2sim, "_code_digest", lambda: "another simulator")
    simulate(trace, order, hw)
    assert len(replays) == 2 + len(variants)


def test_off_simulates_every_time_and_writes_nothing(tmp_path, monkeypatch, replays):
    monkeypatch.setenv(l2sim.CACHE_ENV, "off")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    trace, hw = _two_programs()
    simulate(trace, np.arange(2), hw)
    simulate(trace, np.arange(2), hw)
    assert len(replays) == 2 and not any(tmp_path.iterdir())


def test_a_cache_that_cannot_be_used_never_stops_a_simulation(tmp_path, monkeypatch, replays):
    trace, hw = _two_programs()
    not_a_folder = tmp_path / "file"
    not_a_folder.write_text("x")
    monkeypatch.setenv(l2sim.CACHE_ENV, str(not_a_folder))
    assert simulate(trace, np.arange(2), hw).l2_hit_bytes == B
    # a stored value that is not a result (written by another version, or damaged) is simulated again
    folder = tmp_path / "simulations"
    monkeypatch.setenv(l2sim.CACHE_ENV, str(folder))
    simulate(trace, np.arange(2), hw)
    with sqlite3.connect(folder / l2sim.CACHE_FILE) as db:
        db.execute("UPDATE simulations SET value = ?", (json.dumps({"l2_hit_rate": "lots"}),))
    assert simulate(trace, np.arange(2), hw).l2_hit_bytes == B
    assert len(replays) == 3
