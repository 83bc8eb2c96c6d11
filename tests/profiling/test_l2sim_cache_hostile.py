"""The simulation cache holds only data (#41): whatever its folder holds, a lookup never unpickles,
never reads or deletes a file a row names, and a stored value that is not a result (a wrong type, a
missing field, too deep, too long) is a miss: simulated again and overwritten, never a traceback.

The diskcache database the cache used before (``cache.db``, rows with a ``mode`` and a
``filename`` that diskcache's fetch obeyed) is planted beside the new one with a pickled value whose
unpickling would create a marker file, and a row naming a file outside the folder; the simulator's
own table (``simulations.sqlite3``) is planted with values of the wrong shape. Each test has a cache
folder of its own."""
from __future__ import annotations

import json
import pickle
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from swizzleperf.profiling import l2sim
from swizzleperf.profiling.l2sim import simulate
from test_l2sim import B, make_hw, make_trace
from test_l2sim_cache import replays  # noqa: F401 (the fixture)


class _Payload:
    """Unpickling this creates ``marker``."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def _case():
    trace, hw = make_trace([[[0], [1]], [[0], [2]]]), make_hw(l2_bytes=2 * B)
    return trace, hw, l2sim._cache_key(trace, np.arange(2), hw, None)


def test_a_pickled_row_and_a_row_naming_an_outside_file_are_never_followed(own_cache, replays, tmp_path):
    diskcache = pytest.importorskip("diskcache", reason="plants the database format the cache used before")
    trace, hw, key = _case()
    marker, outside = tmp_path / "unpickled", tmp_path / "precious.txt"
    outside.write_text("keep me")
    with diskcache.Cache(str(own_cache), disk=diskcache.JSONDisk) as cache:
        cache.set(key, {"l2_hit_rate": 0.5})
        cache.set("another", {"l2_hit_rate": 0.5})
        cache._sql("UPDATE Cache SET mode = ?, value = ? WHERE rowid = 1",
                   (diskcache.core.MODE_PICKLE, pickle.dumps(_Payload(marker))))
        cache._sql("UPDATE Cache SET mode = ?, value = NULL, filename = ? WHERE rowid = 2",
                   (diskcache.core.MODE_BINARY, str(outside)))
    result = simulate(trace, np.arange(2), hw)
    assert not marker.exists(), "a cached value was unpickled"
    assert result.l2_hit_bytes == B and len(replays) == 1
    assert outside.read_text() == "keep me"
    for _ in range(3):   # later stores (and any eviction) leave the outside file alone
        simulate(trace, np.arange(2)[::-1].copy(), hw)
    assert outside.read_text() == "keep me" and not marker.exists()


DEEP = "[" * 50_000 + "]" * 50_000


@pytest.mark.parametrize("name", [
    "l2_hit_rate as text", "a missing field", "an extra field", "a rate above 1", "bytes as a float",
    "a list for a number", "a value nested 50 000 deep", "a value of 1 MB", "not JSON", "a number",
    "a blob", "NaN",
])
def test_a_stored_value_that_is_not_a_result_is_simulated_again_and_overwritten(own_cache, replays, name):
    trace, hw, key = _case()
    good = simulate(trace, np.arange(2), hw).to_dict()      # creates the table
    value = {
        "l2_hit_rate as text": json.dumps({**good, "l2_hit_rate": "lots"}),
        "a missing field": json.dumps({k: v for k, v in good.items() if k != "model"}),
        "an extra field": json.dumps({**good, "__class__": "os.system"}),
        "a rate above 1": json.dumps({**good, "l2_hit_rate": 7.0}),
        "bytes as a float": json.dumps({**good, "l2_read_bytes": 1.5}),
        "a list for a number": json.dumps({**good, "dram_read_bytes": [1]}),
        "a value nested 50 000 deep": json.dumps({**good, "model": "x"})[:-1] + ', "deep": ' + DEEP + "}",
        "a value of 1 MB": json.dumps({**good, "model": "x" * (1 << 20)}),
        "not JSON": "{not json",
        "a number": 5,
        "a blob": sqlite3.Binary(json.dumps(good).encode()),
        "NaN": json.dumps({**good, "l2_hit_rate": float("nan")}),
    }[name]
    with sqlite3.connect(own_cache / l2sim.CACHE_FILE) as db:
        db.execute("UPDATE simulations SET value = ? WHERE key = ?", (value, key))
    result = simulate(trace, np.arange(2), hw)
    assert result.l2_hit_bytes == B and isinstance(result.l2_hit_rate, float)
    assert len(replays) == 2, "the bad value was believed"
    with sqlite3.connect(own_cache / l2sim.CACHE_FILE) as db:
        (stored,), = db.execute("SELECT value FROM simulations WHERE key = ?", (key,)).fetchall()
    assert json.loads(stored)["l2_hit_rate"] == result.l2_hit_rate   # overwritten with the result
    simulate(trace, np.arange(2), hw)
    assert len(replays) == 2                 # and read back from then on


def test_the_cache_keeps_at_most_its_row_limit(own_cache, replays, monkeypatch):
    monkeypatch.setattr(l2sim, "CACHE_ROWS", 3)
    trace, hw, _ = _case()
    hws = [make_hw(l2_bytes=(2 + i) * B) for i in range(5)]
    for each in hws:
        simulate(trace, np.arange(2), each)
    with sqlite3.connect(own_cache / l2sim.CACHE_FILE) as db:
        (count,), = db.execute("SELECT count(*) FROM simulations").fetchall()
    assert count == 3
    simulate(trace, np.arange(2), hws[-1])   # the newest are kept
    assert len(replays) == 5
