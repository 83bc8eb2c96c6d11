"""A pytest plugin (``-p parallel_tests`` in pyproject.toml's addopts): ``pytest`` runs the tests on
every core, up to four, with pytest-xdist, one test module per process (``--dist loadscope``: the
tests of a module share its module-scoped fixtures, a capture or an eval, set up once).

It stays out of the way when the command line chooses (``-n``, ``--dist``, ``-p no:xdist``),
when pytest-xdist is not installed, when only collecting, inside an xdist worker, and when a GPU
device node is present: the GPU tests time kernels, and two of them at once on one GPU would time
each other.
"""
from __future__ import annotations

import glob
import os

#: Processes at most: the CLI tests each start a run with worker subprocesses of about 1 GB.
MAX_PROCESSES = 4


def _gpu_present() -> bool:
    """An NVIDIA (``/dev/nvidia0``...) or AMD (``/dev/kfd``) device node exists."""
    return bool(glob.glob("/dev/nvidia[0-9]*")) or os.path.exists("/dev/kfd")


def pytest_load_initial_conftests(early_config, parser, args: list) -> None:
    options = early_config.known_args_namespace
    chosen = (getattr(options, "numprocesses", None) is not None
              or getattr(options, "dist", "no") != "no")
    if (not early_config.pluginmanager.hasplugin("xdist") or chosen or options.collectonly
            or os.environ.get("PYTEST_XDIST_WORKER") or _gpu_present()):
        return
    args += ["-n", "auto", f"--maxprocesses={MAX_PROCESSES}", "--dist", "loadscope"]
