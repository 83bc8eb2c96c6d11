"""The file paths of a worker request made absolute: a worker runs in an empty directory of its
own (sandbox/__init__.py), so a path relative to the agent's directory would name nothing there."""
from __future__ import annotations

from pathlib import Path

_PATH_KEYS = ("kernel_path", "mapping_path", "reference_path")


def absolute_paths(request: dict) -> dict:
    """``request`` with its file paths (``kernel_path``, ``mapping_path``, ``compare_paths``, and
    those of ``items``) made absolute: the worker runs in a directory of its own."""
    out = {k: str(Path(v).resolve()) if k in _PATH_KEYS and v else v for k, v in request.items()}
    if "compare_paths" in out:
        out["compare_paths"] = [str(Path(p).resolve()) for p in out["compare_paths"]]
    if "items" in out:
        out["items"] = [absolute_paths(item) for item in out["items"]]
    return out
