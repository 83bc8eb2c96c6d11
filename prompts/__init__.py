"""The prompts: Jinja2 templates (``*.j2`` in this folder) and the one environment that renders
them, with its filters (``bytes``, ``mib``, ``gb``, ``num``, ``label``, ``figures``, ``shown_figures``,
``first_lines``).
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
                       gb=gb, shown_figures=shown_figures,
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


def shown_figures(metrics: dict) -> list:
    """``[(name, text, source)]``: :func:`figures` as the prompt shows them: a ``*_bytes`` figure
    in GB (:func:`gb`), any other number as ``num`` writes it; a ``predicted_<name>`` figure left
    out where ``<name>`` is shown beside it with the same text and source (a simulated run's
    ``l2_hit_rate`` is its prediction)."""
    shown = [(name, gb(value) if name.endswith("_bytes") else _format_number(value), source)
             for name, value, source in figures(metrics)]
    seen = {(name, text, source) for name, text, source in shown}
    return [(name, text, source) for name, text, source in shown
            if not (name.startswith("predicted_") and (name[len("predicted_"):], text, source) in seen)]


def gb(value: float, unit: bool = True, sign: bool = False) -> str:
    """Bytes in decimal gigabytes, the one unit the prompt gives DRAM and L2 traffic in (the roof
    line's, profiling/roof.py): two decimals, ``805306368`` -> ``"0.81 GB"``; three significant
    digits below 0.1 GB, where two decimals would write a small kernel's traffic as 0.00
    (``12345678`` -> ``"0.0123 GB"``). ``unit=False``: the number alone; ``sign``: ``+`` or ``-``."""
    number = value / 1e9
    plus = "+" if sign else ""
    text = f"{number:{plus}.2f}" if abs(number) >= 0.1 or number == 0 else f"{number:{plus}.3g}"
    return f"{text} GB" if unit else text


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
