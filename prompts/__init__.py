"""The prompts: Jinja2 templates (``*.j2`` in this folder) and the one environment that renders
them, with its filters (``bytes``, ``mib``, ``num``, ``label``, ``figures``, ``first_lines``).
Nothing prompt-like is written in Python elsewhere.

Imports nothing of the package: profiling (the access analysis, prompts/analysis.j2) and the
agent (the proposers' messages, the distributed evaluator's analysis) render through it.
"""
from __future__ import annotations

import functools
import math
from enum import Enum
from typing import Any

import jinja2


@functools.lru_cache(maxsize=1)
def _environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.PackageLoader("swizzleperf.prompts", ""),
                             undefined=jinja2.StrictUndefined, trim_blocks=True,
                             lstrip_blocks=True, keep_trailing_newline=True)
    env.filters.update(bytes=_format_bytes, num=_format_number, label=_label, figures=figures, mib=_mib,
                       first_lines=lambda text, n: "\n".join(text.splitlines()[:n]))
    return env


#: Where each figure's source is kept in a metrics dict (the loop's names), besides ``<name>_source``.
_SOURCE_KEYS = {"l2_hit_rate": "l2_source", "time_ms": "time_source", "time_spread_ms": "time_source",
                "dram_bytes": "dram_source", "predicted_l2_hit_rate": "predicted_source",
                "predicted_dram_bytes": "predicted_source", "predicted_time_ms": "predicted_source"}


def figures(metrics: dict) -> list:
    """``[(name, value, source)]`` of a metrics dict: the numbers, each with its source (measured
    or simulated, '' where none is recorded); source keys and the ranked profile left out."""
    out = []
    for key, value in (metrics or {}).items():
        if key.endswith("_source") or key in ("source", "profile") or not isinstance(value, (int, float)):
            continue
        source = metrics.get(f"{key}_source") or metrics.get(_SOURCE_KEYS.get(key, "")) or metrics.get("source") or ""
        out.append((key, value, source))
    return out


def _format_bytes(value: float) -> str:
    """``52428800`` -> ``"50 MiB"``; the unit that keeps the number readable."""
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if value >= size:
            return f"{value / size:.4g} {unit}"
    return f"{value:g} B"


def _mib(value: float) -> str:
    """``52428800`` -> ``"50.0 MiB"``; KiB below a MiB (prompts/analysis.j2)."""
    return f"{value / 2**20:.1f} MiB" if value >= 2**20 else f"{value / 2**10:.1f} KiB"


def _format_number(value: Any) -> str:
    if isinstance(value, float) and math.isfinite(value):
        return f"{value:.4g}"
    return str(value)


def _label(value: Any) -> str:
    """An enum by its name (``PASS``), anything else as text."""
    return value.name if isinstance(value, Enum) else str(value)


def render(template: str, **variables: Any) -> str:
    """Render one template of ``prompts/`` by name."""
    return _environment().get_template(template).render(**variables)
