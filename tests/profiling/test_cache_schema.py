"""The simulation cache's database holds only what the store creates (red-team C02a/C02b, C01): a
database whose ``simulations`` is a view over an endless query, or that carries a trigger, another
table or index, is not used at all (every lookup a miss, nothing written, one line on stderr, never
a hang or a traceback); every statement is bounded (``StatementBound``); and a stored row must be
one the simulator writes: its ``source`` ``simulated:<spec name>`` of the spec simulated, its
``model`` one printable line without ``|``, its byte counts consistent.

Each test has a cache folder, HOME and XDG_CACHE_HOME of its own."""
from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from swizzleperf.profiling import l2sim
from swizzleperf.sandbox import untrusted
from swizzleperf.profiling.l2sim import simulate
from test_l2sim import B, make_hw, make_trace
from test_l2sim_cache import replays  # noqa: F401 (the fixture)

ROOT = Path(__file__).resolve().parents[2]
TABLE = "CREATE TABLE simulations (key TEXT PRIMARY KEY, value TEXT NOT NULL)"
ENDLESS_VIEW = ("CREATE VIEW simulations AS WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM n) "
                "SELECT printf('%040d', x) AS key, 'v' AS value FROM n")


def _plant(folder: Path, *statements: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / l2sim.CACHE_FILE
    with sqlite3.connect(path) as db:
        for statement in statements:
            db.execute(statement)
    return path


def _case():
    trace, hw = make_trace([[[0], [1]], [[0], [2]]]), make_hw(l2_bytes=2 * B)
    return trace, hw, l2sim._cache_key(trace, np.arange(2), hw, None)


def test_a_view_over_an_endless_query_is_not_used_and_never_hangs(tmp_path):
    """The red team's C02a, in a process of its own (before the fix it never ended)."""
    folder = tmp_path / "simulations"
    _plant(folder, ENDLESS_VIEW)
    script = textwrap.dedent(f"""
        import numpy as np
        from swizzleperf.profiling.l2sim import simulate
        from test_l2sim import make_hw, make_trace, B
        trace, hw = make_trace([[[0], [1]], [[0], [2]]]), make_hw(l2_bytes=2 * B)
        for _ in range(2):
            print(simulate(trace, np.arange(2), hw).l2_hit_bytes)
    """)
    env = {**os.environ, "HOME": str(tmp_path / "home"), "XDG_CACHE_HOME": str(tmp_path / "xdg"),
           l2sim.CACHE_ENV: str(folder),
           "PYTHONPATH": os.pathsep.join([os.environ.get("PYTHONPATH", ""), str(ROOT / "tests" / "profiling"),
                                          str(ROOT / "tests" / "helpers")]).lstrip(os.pathsep)}
    started = time.monotonic()
    try:
        done = subprocess.run([sys.executable, "-c", script], env=env, cwd=tmp_path, capture_output=True,
                              text=True, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("a lookup in a cache whose table is an endless view hung")
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == [str(B), str(B)]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "a view named simulations" in lines[0] and "not used" in lines[0], lines
    assert time.monotonic() - started < 60


@pytest.mark.parametrize("name, statements", [
    ("a trigger inserting rows", [TABLE, "CREATE TABLE log (x)",
                                  "CREATE TRIGGER t AFTER INSERT ON simulations BEGIN INSERT INTO log WITH RECURSIVE "
                                  "n(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM n LIMIT 200000) SELECT x FROM n; END"]),
    ("another table", [TABLE, "CREATE TABLE log (x)"]),
    ("another index", [TABLE, "CREATE INDEX by_value ON simulations (value)"]),
    ("a view of another name", [TABLE, "CREATE VIEW v AS SELECT 1"]),
    ("its table defined otherwise", ["CREATE TABLE simulations (key TEXT PRIMARY KEY, value TEXT NOT NULL "
                                     "DEFAULT (zeroblob(1000000)))"]),
])
def test_a_database_holding_what_the_store_never_creates_is_not_used(own_cache, replays, capfd, name, statements):
    path = _plant(own_cache, *statements)
    with sqlite3.connect(path) as db:
        before = db.execute("SELECT type, name, sql FROM sqlite_master ORDER BY name").fetchall()
    trace, hw, _ = _case()
    for _ in range(3):
        assert simulate(trace, np.arange(2), hw).l2_hit_bytes == B
    assert len(replays) == 3, "a lookup in an unusable cache answered"
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT type, name, sql FROM sqlite_master ORDER BY name").fetchall() == before
        assert db.execute("SELECT count(*) FROM simulations").fetchone() == (0,), "a result was written"
        if "log" in {row[1] for row in before}:
            assert db.execute("SELECT count(*) FROM log").fetchone() == (0,), "the trigger ran"
    err = capfd.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not used" in err[0] and str(path) in err[0], err


@pytest.mark.parametrize("name", ["simulations.sqlite3", "simulations.sqlite3-wal"])
def test_a_cache_file_that_is_a_link_is_not_used_and_the_file_it_names_left_alone(own_cache, replays, capfd, tmp_path,
                                                                                  name):
    """#41 round thirteen: SQLite writes through a link; a cache (or its write-ahead log) that is one is
    not used, and the user's file it names stays as it was."""
    victim = tmp_path / "users" / "__init__.py"
    victim.parent.mkdir()
    victim.write_bytes(b"")
    own_cache.mkdir(parents=True, exist_ok=True)
    (own_cache / name.replace("simulations.sqlite3", l2sim.CACHE_FILE)).symlink_to(victim)
    trace, hw, _ = _case()
    for _ in range(2):
        assert simulate(trace, np.arange(2), hw).l2_hit_bytes == B
    assert len(replays) == 2, "a lookup in an unusable cache answered"
    assert victim.read_bytes() == b""
    err = capfd.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "symbolic link" in err[0] and "not used" in err[0], err


def test_a_planted_object_name_reaches_stderr_without_its_escape_codes(own_cache, replays, capfd):
    _plant(own_cache, TABLE, 'CREATE TABLE "x\x1b]0;PWNED\x07\x1b[2J" (x)')
    trace, hw, _ = _case()
    simulate(trace, np.arange(2), hw)
    err = capfd.readouterr().err
    assert "\x1b" not in err and "\x07" not in err and "x?]0;PWNED??[2J" in err


def test_a_statement_is_aborted_after_its_bound(own_cache, replays, monkeypatch):
    """A trigger planted after the cache was opened (another process) fires on the store's insert:
    the insert is aborted after ``CACHE_STATEMENT_S`` and rolled back; the simulation goes on."""
    monkeypatch.setattr(l2sim, "CACHE_STATEMENT_S", 0.2, raising=False)
    trace, hw, _ = _case()
    simulate(trace, np.arange(2), hw)                         # opens the cache, stores one result
    path = own_cache / l2sim.CACHE_FILE
    _plant(own_cache, "CREATE TABLE log (x)",
           "CREATE TRIGGER t AFTER INSERT ON simulations BEGIN INSERT INTO log WITH RECURSIVE "
           "n(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM n LIMIT 5000000) SELECT x FROM n; END")
    started = time.monotonic()
    assert simulate(trace, np.arange(2)[::-1].copy(), hw).l2_read_bytes > 0
    elapsed = time.monotonic() - started
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT count(*) FROM log").fetchone() == (0,), "the trigger's statement ran to its end"
        assert db.execute("SELECT count(*) FROM simulations").fetchone() == (1,)
    assert elapsed < 30


def test_the_bound_aborts_an_endless_statement():
    bound = untrusted.StatementBound(0.2)
    db = sqlite3.connect(":memory:")
    bound.install(db)
    bound.arm()
    started = time.monotonic()
    with pytest.raises(sqlite3.OperationalError, match="interrupted"):
        db.execute("WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM n) SELECT count(*) FROM n").fetchone()
    assert time.monotonic() - started < 10
    bound.arm()
    assert db.execute("SELECT 1").fetchone() == (1,)          # the next statement has a bound of its own


# ------------------------------------------------------------------------------ C01: stored rows
def _poison(good: dict) -> dict:
    return {
        "escape codes in source": {**good, "source": "simulated:toy\x1b[2J\x1b]0;PWNED\x07|x|<script>"},
        "another spec's source": {**good, "source": "simulated:mi300x"},
        "a source not the simulator's": {**good, "source": "measured:toy"},
        "escape codes in model": {**good, "model": "\x1b[31m" * 200},
        "a bar in model": {**good, "model": "x|y"},
        "a newline in model": {**good, "model": "one\ntwo"},
        "more hits than reads": {**good, "l2_hit_bytes": good["l2_read_bytes"] * 10, "l2_hit_rate": 1.0},
        "more DRAM reads than misses": {**good, "dram_read_bytes": good["l2_read_bytes"] * 2},
        "more cross-domain bytes than misses": {**good, "cross_domain_bytes": good["l2_read_bytes"] + 1},
        "zero reads with a hit rate": {**good, "l2_read_bytes": 0, "l2_hit_bytes": 0, "dram_read_bytes": 0,
                                       "cross_domain_bytes": 0},
        "zero reads with a domain's hit rate": {**good, "l2_read_bytes": 0, "l2_hit_bytes": 0, "dram_read_bytes": 0,
                                                "cross_domain_bytes": 0, "l2_hit_rate": 0.0},
        "zero misses with an LLC hit rate": {**good, "l2_read_bytes": 0, "l2_hit_bytes": 0, "dram_read_bytes": 0,
                                             "cross_domain_bytes": 0, "l2_hit_rate": 0.0,
                                             "per_domain_hit_rate": [0.0], "llc_hit_rate": 0.5},
        "a hit rate not hits over reads": {**good, "l2_hit_rate": min(1.0, good["l2_hit_rate"] + 0.5)},
        "negative bytes": {**good, "dram_write_bytes": -1},
        "a hit rate per domain too few": {**good, "per_domain_hit_rate": []},
    }


@pytest.mark.parametrize("name", list(_poison({"l2_read_bytes": 1, "l2_hit_rate": 0.0})))
def test_a_stored_row_the_simulator_would_not_write_is_a_miss(own_cache, replays, name):
    trace, hw, key = _case()
    good = simulate(trace, np.arange(2), hw).to_dict()
    assert good["source"] == "simulated:toy" and good["l2_read_bytes"] > good["l2_hit_bytes"] > 0
    value = _poison(good)[name]
    with sqlite3.connect(own_cache / l2sim.CACHE_FILE) as db:
        db.execute("UPDATE simulations SET value = ? WHERE key = ?", (json.dumps(value), key))
    result = simulate(trace, np.arange(2), hw)
    assert len(replays) == 2, "the poisoned row was believed"
    assert result.source == "simulated:toy" and "\x1b" not in result.model and "|" not in result.model
    with sqlite3.connect(own_cache / l2sim.CACHE_FILE) as db:
        (stored,), = db.execute("SELECT value FROM simulations WHERE key = ?", (key,)).fetchall()
    assert json.loads(stored) == {**good, "seconds": json.loads(stored)["seconds"]}   # overwritten


def test_a_row_the_simulator_writes_is_still_read_back(own_cache, replays):
    trace, hw, _ = _case()
    first = simulate(trace, np.arange(2), hw)
    again = simulate(trace, np.arange(2), hw)
    assert len(replays) == 1 and again.l2_hit_bytes == first.l2_hit_bytes and again.source == "simulated:toy"
