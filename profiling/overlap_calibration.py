"""The overlap model recalibrated for one machine and problem from the run's own measurements.

profiling/overlap_model.py prices a launch from the hardware spec and parameters fitted on other
machines (bench/results/overlap_model_validation.md): on two H100s it priced the per-rank GEMM of
all_gather_gemm at llama70b-up-8k 15 % fast (2.865 ms against 3.361 measured alone, issue #22),
and on the same machine it priced a copy-engine pattern at a third of its measured time while it
priced bulk_sync within 12 % (2026-11-25, the rank pool's smoke run). So one scale for the whole
model does not hold: the calibration keeps one scale per *group* (a pattern: what shares a
schedule in the model), the median of measured / predicted over that group's measurements, and
for a group not measured yet the median of the groups' scales (one mispriced pattern does not
drag the others). The model still ranks within a group; the calibration rescales it for this
machine.

Errors are reported honestly: ``error_before`` is each observation's error *before* it was seen
(the raw model for the first, the calibration of the earlier observations after that), never an
in-sample fit; ``error_after`` is the final calibration's in-sample error, labelled so.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

#: The interval of a prediction that comes without one (the overlap model of before issue #25):
#: +- 15 %, twice the 7.6 % median error of the model on the 4- and 8-GPU runs it was not fitted
#: on (bench/results/overlap_model_validation.md, 29 cases). A prediction's own interval, where the
#: model gives one (``interval_ms``), is used instead.
FALLBACK_RELATIVE_INTERVAL = 0.15
#: The largest relative margin a calibrated prediction is given (pruning keeps what lies within).
MAX_MARGIN = 0.5


@dataclass(frozen=True)
class Observation:
    """One measured configuration: its name and group, the model's raw ``time_ms``, the measured
    time (ms) and ``before_ms``, the calibrated prediction made before this measurement was seen."""

    name: str
    group: str
    predicted_ms: float
    measured_ms: float
    before_ms: float


@dataclass
class Calibration:
    """The running recalibration of one run (see the module docstring).

    Attributes:
        observations: every measurement added, in order.
    """

    observations: list = field(default_factory=list)

    def scales(self) -> dict:
        """group -> the median of measured / predicted over its observations."""
        ratios = {}
        for o in self.observations:
            ratios.setdefault(o.group, []).append(o.measured_ms / o.predicted_ms)
        return {group: statistics.median(values) for group, values in ratios.items()}

    def scale(self, group: str) -> float:
        """The scale of ``group``: its own, else the median of every measured group's, else 1."""
        scales = self.scales()
        if group in scales:
            return scales[group]
        return statistics.median(scales.values()) if scales else 1.0

    def predict(self, prediction: dict, group: str) -> float:
        """The calibrated time (ms) of a raw prediction (``time_ms`` or ``predicted_time_ms``) of a
        configuration in ``group``."""
        return self.scale(group) * _total(prediction)

    def add(self, name: str, group: str, prediction: dict, measured_ms: float) -> Observation:
        """Record a measurement of a configuration of ``group``. Returns the observation (with the
        prediction made before it, for the error report).

        Raises:
            ValueError: a measured time that is not a positive finite number, or a prediction
                without a positive time.
        """
        if not (isinstance(measured_ms, (int, float)) and math.isfinite(measured_ms) and measured_ms > 0):
            raise ValueError(f"a measured time must be a positive number of ms, got {measured_ms!r}")
        predicted = _total(prediction)
        if not predicted > 0:
            raise ValueError(f"a prediction must be a positive time, got {predicted!r}")
        observation = Observation(name, group, predicted, float(measured_ms), self.predict(prediction, group))
        self.observations.append(observation)
        return observation

    def summary(self) -> dict:
        """What the report says of the calibration: the scales, the number of observations, and
        the median absolute relative error of the raw model, of the calibrated prediction made
        before each measurement (from the second on), and of the final calibration (in-sample)."""
        obs = self.observations
        raw = [abs(o.predicted_ms - o.measured_ms) / o.measured_ms for o in obs]
        before = [abs(o.before_ms - o.measured_ms) / o.measured_ms for o in obs[1:]]
        after = [abs(self.scale(o.group) * o.predicted_ms - o.measured_ms) / o.measured_ms for o in obs]
        return {"observations": len(obs), "scales": self.scales(),
                "raw_median_error": _median(raw), "before_median_error": _median(before),
                "before_cases": len(before), "after_median_error": _median(after),
                "per_observation": [{"name": o.name, "group": o.group, "predicted_ms": o.predicted_ms,
                                     "calibrated_before_ms": o.before_ms, "measured_ms": o.measured_ms}
                                    for o in obs]}

    def margin(self) -> float:
        """The relative uncertainty of a calibrated prediction: the median error the calibration
        made before seeing a measurement, at least the fallback interval, at most ``MAX_MARGIN``;
        with fewer than two such errors, twice the fallback (little learnt yet about this machine)."""
        before = [abs(o.before_ms - o.measured_ms) / o.measured_ms for o in self.observations[1:]]
        if len(before) < 2:
            return 2 * FALLBACK_RELATIVE_INTERVAL
        return min(MAX_MARGIN, max(FALLBACK_RELATIVE_INTERVAL, statistics.median(before)))


def interval(prediction: dict) -> tuple:
    """``(low_ms, high_ms)`` of a raw prediction: its own ``interval_ms`` (or ``predicted_interval_ms``)
    where the overlap model gives one, else +- ``FALLBACK_RELATIVE_INTERVAL`` of its time."""
    own = prediction.get("interval_ms") or prediction.get("predicted_interval_ms")
    if own and len(own) == 2 and all(isinstance(v, (int, float)) for v in own):
        return float(own[0]), float(own[1])
    total = _total(prediction)
    return total * (1 - FALLBACK_RELATIVE_INTERVAL), total * (1 + FALLBACK_RELATIVE_INTERVAL)


def _total(prediction: dict) -> float:
    total = prediction.get("time_ms", prediction.get("predicted_time_ms"))
    if total is None:
        raise ValueError("a prediction needs time_ms (or predicted_time_ms)")
    return float(total)


def _median(values: list):
    return statistics.median(values) if values else None
