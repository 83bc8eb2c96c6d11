"""Triton 3.6, the GPU machines' image, beside the installed Triton: a folder holding its ``triton``
package (``SWIZZLEPERF_TRITON36``, or /tmp/tri36: ``pip install --no-deps --target /tmp/tri36
triton==3.6.0``). Tests that run code under it do so in a subprocess, and skip where there is none."""
from __future__ import annotations

import os
from pathlib import Path

TRITON36 = next((Path(p) for p in (os.environ.get("SWIZZLEPERF_TRITON36"), "/tmp/tri36")
                 if p and (Path(p) / "triton").is_dir()), None)
SKIP_REASON = ("no Triton 3.6 to run under: set SWIZZLEPERF_TRITON36 to a folder holding its triton "
               "package (as /tmp/tri36 does)")


def env_with_triton36() -> dict:
    """This process's environment with Triton 3.6 first on PYTHONPATH (its workers inherit it)."""
    return dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(TRITON36), os.environ.get("PYTHONPATH")])))
