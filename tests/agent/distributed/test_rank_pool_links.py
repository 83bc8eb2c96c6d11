"""The rank pool writes its settings and its supervisor's log into its folder in the run folder:
a link planted at either name was written through, a named pipe there blocked the pool's start
for ever. Both are new files renamed over the name now, as every file a run writes (#41)."""
from __future__ import annotations

import os

import pytest
from hang_guard import never_blocks

from swizzleperf.agent.distributed.rank_pool import RankPool


@pytest.fixture(autouse=True)
def _private_home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


@pytest.mark.parametrize("kind", ["a link", "a named pipe"])
@pytest.mark.parametrize("name", ["settings.json", "supervisor.log"])
def test_what_is_planted_in_the_pools_folder_is_replaced(tmp_path, name, kind):
    pool = RankPool(2, "cpu", 8 << 20, tmp_path / "run", max_spins=1 << 11)
    planted = tmp_path / "run" / "pool1" / name   # the folder of the pool's first start
    planted.parent.mkdir(parents=True)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    if kind == "a link":
        planted.symlink_to(victim)
    else:
        os.mkfifo(planted)
    try:
        with never_blocks(60, f"the pool's start on a pipe planted at {name}"):
            pool.begin()
    finally:
        pool.close()
    assert victim.read_text() == "precious\n", f"{name}: written through a link"
    assert not planted.is_symlink() and planted.is_file()
