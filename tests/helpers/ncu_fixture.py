"""A recorded ncu profile (tests/profiling/fixtures/ncu/gemm_h200.json: kernels/gemm.py on an H200)
turned into the metrics agent/verification/measure.py gives a measured candidate, with its roof."""
from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

FIXTURE = json.loads((Path(__file__).parents[1] / "profiling" / "fixtures" / "ncu" / "gemm_h200.json").read_text())


def h200_measurer(monkeypatch, raw: dict):
    """A Measurer of kernels/gemm.py on an H200 whose ncu run returns the recorded metrics ``raw``."""
    from swizzleperf import hwspecs
    from swizzleperf.agent.verification import measure
    from swizzleperf.kernels.gemm import SPEC
    monkeypatch.setattr(measure, "profile_launch", lambda *args, **kwargs: raw)
    target = SimpleNamespace(spec=hwspecs.load_spec("h200"), mode="measured",
                             device=SimpleNamespace(name="NVIDIA H200"))
    m = measure.Measurer(spec=SPEC, target=target)
    m.__dict__.update(ncu_path="/usr/bin/ncu", trace=SimpleNamespace(programs_per_cu=1))  # cached properties
    return m


def measured_metrics(monkeypatch, order: str, time_ms: float | None = None) -> dict:
    """The metrics of ``order`` measured on the H200 from the recorded ncu profile; the time is ncu's
    duration (standing in for the events' median) unless ``time_ms`` is given."""
    raw = FIXTURE["launches"][order]
    m = h200_measurer(monkeypatch, raw)
    metrics = {"time_ms": time_ms or raw["gpu__time_duration.sum"] / 1e6, "time_spread_ms": 0.02,
               "time_source": "measured:events:NVIDIA H200", **m._ncu(Path("gemm.py"))}
    metrics["roof"] = m.roof(metrics)
    return metrics
