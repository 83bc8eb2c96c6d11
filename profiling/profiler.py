"""One profile interface over the vendors' profilers, and the *filtered profile* they all return.

A profiler (ncu on NVIDIA, rocprofv3 / rocprof-compute on AMD) runs the kernel module's worker on
exactly the kernel's dispatches, keeps its raw output in a folder of the run, and reduces what it
read to a few *figures* under vendor-neutral names (``time_ms``, ``l2_hit_rate``, ``dram_bytes``,
...). :func:`filtered` turns figures into the filtered profile: a ranked list of entries, each with
its value, unit, source (``measured:ncu``, ``measured:rocprofv3``, ``simulated:mi300x``) and one
line of meaning. The same filter sits over every backend and over the simulator's prediction, so
the prompt and ``swizzleperf profile`` show one shape whatever measured it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol


#: The worker whose ``run_once`` stage every profiler runs under its tool, as ``python -m`` starts
#: it (agent/verification/worker.py; a command line, not an import).
WORKER = "swizzleperf.agent.verification.worker"


class ProfilerError(RuntimeError):
    """A profiler is missing, failed, or its output could not be read; the message is one line
    that says what failed, what was expected and what was found."""


@dataclass(frozen=True)
class FigureInfo:
    """What one figure of the filtered profile is: its unit and one line of meaning."""

    unit: str
    meaning: str


#: The figures that bear on a swizzle or overlap decision, most decisive first (their rank).
#: Units: ms, fraction (0..1), bytes, count.
FIGURES: dict[str, FigureInfo] = {
    "time_ms": FigureInfo("ms", "duration of one dispatch of the kernel: the objective, lower is better"),
    "l2_hit_rate": FigureInfo("fraction", "share of L2 lookups served by the L2; tile orders that share "
                                          "data within a domain raise it"),
    "dram_bytes": FigureInfo("bytes", "bytes between the L2 and memory, reads + writes: what a better "
                                      "order saves"),
    "dram_read_bytes": FigureInfo("bytes", "bytes the L2 read from memory (on AMD over Infinity Fabric: "
                                           "Infinity Cache or HBM)"),
    "l2_hit_rate_min_domain": FigureInfo("fraction", "hit rate of the worst L2 domain (XCD / partition): "
                                                     "one starved domain holds the kernel back"),
    "l2_hit_rate_per_domain": FigureInfo("fraction", "hit rate of each L2 domain in order (XCD 0..n-1 on AMD)"),
    "cross_domain_bytes": FigureInfo("bytes", "bytes served across L2 partitions (NVIDIA fabric) or "
                                              "predicted to cross domains"),
    "mall_hit_rate": FigureInfo("fraction", "share of the L2's memory reads served by the Infinity Cache "
                                            "(MALL); a remap tuned for L2 alone can lower it"),
    "dram_write_bytes": FigureInfo("bytes", "bytes the L2 wrote back to memory"),
    "l2_requests": FigureInfo("count", "L2 requests of one dispatch (TCC_REQ on AMD, SM read lookups on NVIDIA)"),
    "l1_hit_rate": FigureInfo("fraction", "L1 hit rate of the SMs/CUs; orders rarely change it"),
    "waves_per_cu": FigureInfo("count", "waves of programs per SM/CU: tail effects when it is just over a "
                                        "whole number"),
    "dispatches": FigureInfo("count", "dispatches averaged, after the warm-up ones were skipped"),
}
_RANK = {name: rank for rank, name in enumerate(FIGURES, start=1)}


def filtered(figures: dict, source: str, sources: dict | None = None) -> list[dict]:
    """The filtered profile of ``figures`` (figure name -> number, or list of numbers for
    ``l2_hit_rate_per_domain``): one entry per known figure that has a finite value, ranked.

    Each entry is ``{"name", "value", "unit", "source", "meaning", "rank"}`` (plain JSON data, so
    the run record and the prompt can hold it). ``sources`` overrides the source of single
    figures (``{"l2_hit_rate": "measured:ncu:read-lookups"}``). Unknown names are left out: the raw
    output keeps everything.
    """
    entries = []
    for name, value in figures.items():
        if name not in FIGURES or not _finite(value):
            continue
        value = [round(float(v), 4) for v in value] if isinstance(value, (list, tuple)) else float(value)
        info = FIGURES[name]
        entries.append({"name": name, "value": value, "unit": info.unit,
                        "source": (sources or {}).get(name, source), "meaning": info.meaning,
                        "rank": _RANK[name]})
    return sorted(entries, key=lambda e: e["rank"])


def with_changes(profile: list[dict], baseline: list[dict] | None = None,
                 best: list[dict] | None = None) -> list[dict]:
    """``profile`` with, per scalar entry, ``vs_baseline`` and ``vs_best``: the change of the value
    against the same figure of the baseline's / the best's profile (value - reference, in the
    entry's unit; ``None`` where the reference lacks it). Lists (per-domain rates) get none."""
    references = {"vs_baseline": _values(baseline), "vs_best": _values(best)}
    out = []
    for entry in profile:
        changes = {}
        for key, values in references.items():
            ref = values.get(entry["name"])
            scalar = not isinstance(entry["value"], list) and ref is not None
            changes[key] = entry["value"] - ref if scalar else None
        out.append({**entry, **changes})
    return out


def from_prediction(predicted: dict) -> list[dict]:
    """The filtered profile of the simulator's figures (``Measurer.predict``'s dict), labelled
    with their source (``simulated:<spec>``)."""
    per_domain = list(predicted.get("predicted_per_domain_hit_rate") or [])
    figures = {"l2_hit_rate": predicted.get("predicted_l2_hit_rate"),
               "dram_bytes": predicted.get("predicted_dram_bytes"),
               "cross_domain_bytes": predicted.get("predicted_cross_domain_bytes")}
    if len(per_domain) > 1:
        figures.update(l2_hit_rate_per_domain=per_domain, l2_hit_rate_min_domain=min(per_domain))
    return filtered(figures, predicted["predicted_source"])


def _values(profile: list[dict] | None) -> dict:
    return {e["name"]: e["value"] for e in profile or () if not isinstance(e["value"], list)}


def _finite(value) -> bool:
    if isinstance(value, (list, tuple)):
        return bool(value) and all(_finite(v) for v in value)
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


@dataclass
class Profile:
    """What one profiler run of one kernel gives back.

    Attributes:
        figures: vendor-neutral figures (see ``FIGURES``: ms, fractions, bytes, counts).
        source: ``"measured:ncu"``, ``"measured:rocprofv3"``, ``"measured:rocprof-compute"``.
        raw: the counters as read (counter name -> mean over the profiled dispatches).
        raw_dir: the folder holding the tool's own output files (None where none is kept).
        notes: one line each for what was read but could not be used (a missing counter, an
            optional pass that failed, an invariant that did not hold).
    """

    figures: dict
    source: str
    raw: dict = field(default_factory=dict)
    raw_dir: Path | None = None
    notes: list = field(default_factory=list)

    def filtered(self) -> list[dict]:
        """This profile's figures through the common filter."""
        return filtered(self.figures, self.source)


class Profiler(Protocol):
    """A vendor's profiler behind one interface (agent/verification/measure.py picks one by the
    device)."""

    name: str  # the tool, as it appears in sources: "ncu", "rocprofv3", "rocprof-compute"

    def available(self) -> bool:
        """Whether the tool is installed (found on PATH or in its usual folder)."""

    def profile(self, kernel_path: Path, kernel_name: str, dtype: str, out_dir: Path) -> Profile:
        """Profile the kernel ``kernel_name`` of the module at ``kernel_path`` at its default
        problem, warm-up dispatches skipped; the tool's raw output is kept under ``out_dir``.

        Raises:
            ProfilerError: the tool is missing or failed, or its output holds no usable dispatch.
        """
