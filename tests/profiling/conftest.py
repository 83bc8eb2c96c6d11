"""Fixtures shared by the profiling tests."""
import pytest

from swizzleperf.profiling import l2sim


@pytest.fixture
def own_cache(tmp_path, monkeypatch):
    """A simulation cache folder of the test's own (and a private HOME), the process's open caches
    forgotten before and after: hermetic."""
    folder = tmp_path / "simulations"
    monkeypatch.setenv(l2sim.CACHE_ENV, str(folder))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    l2sim._open_cache.cache_clear()
    yield folder
    l2sim._open_cache.cache_clear()
