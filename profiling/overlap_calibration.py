"""The overlap model recalibrated for one machine and problem from the run's own measurements.

profiling/overlap_model.py prices a launch from the hardware spec and parameters fitted on other
machines (eval/results/overlap_model_validation.md): on two H100s it priced the per-rank GEMM of
all_gather_gemm at llama70b-up-8k 15 % fast (2.865 ms against 3.361 measured alone, issue #22).
A run that measures configurations on the GPUs it has can correct that as it goes: each
measurement is an observation of ``(prediction, measured time)``, and the calibrated prediction
is

    t' = s_compute * compute_ms + s_rest * (time_ms - compute_ms)

with the two scales fitted by least squares to the observations so far (one observation, or
observations that cannot tell the two parts apart: one common scale). ``compute_ms`` is the
model's compute part as the configuration runs it and ``time_ms - compute_ms`` everything beyond
(exposed communication, tails, barriers, the host's enqueue cost when it bounds the launch). The
model still ranks; the calibration only rescales its two parts for this machine.

Errors are reported honestly: ``error_before`` is each observation's error *before* it was seen
(the raw model for the first, the calibration of the earlier observations after that), never an
in-sample fit; ``error_after`` is the fit's in-sample error on every observation, labelled so.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

#: The interval of a prediction that comes without one (the overlap model of before issue #25):
#: +- 15 %, twice the 7.6 % median error of the model on the 4- and 8-GPU runs it was not fitted
#: on (eval/results/overlap_model_validation.md, 29 cases). A prediction's own interval, where the
#: model gives one (``interval_ms``), is used instead.
FALLBACK_RELATIVE_INTERVAL = 0.15
#: Scales are kept within this factor of 1: a fit outside it says the model's structure, not its
#: constants, is wrong for this configuration, and one outlier must not make the others absurd.
MAX_SCALE = 4.0


@dataclass(frozen=True)
class Observation:
    """One measured configuration: its name, the model's ``time_ms`` and ``compute_ms`` (raw,
    uncalibrated) and the measured time (ms); ``before_ms`` the calibrated prediction made
    before this measurement was seen."""

    name: str
    predicted_ms: float
    compute_ms: float
    measured_ms: float
    before_ms: float


@dataclass
class Calibration:
    """The running recalibration of one run (see the module docstring).

    Attributes:
        scale_compute, scale_rest: the fitted scales (1.0 before any observation).
        observations: every measurement added, in order.
    """

    scale_compute: float = 1.0
    scale_rest: float = 1.0
    observations: list = field(default_factory=list)

    def predict(self, prediction: dict) -> float:
        """The calibrated time (ms) of a raw prediction (``time_ms`` / ``predicted_time_ms`` and
        ``compute_ms`` / ``predicted_compute_ms``)."""
        total, compute = _parts(prediction)
        return self.scale_compute * compute + self.scale_rest * max(0.0, total - compute)

    def add(self, name: str, prediction: dict, measured_ms: float) -> Observation:
        """Record a measurement and refit. Returns the observation (with the prediction made
        before it, for the error report).

        Raises:
            ValueError: a measured time that is not a positive finite number.
        """
        if not (isinstance(measured_ms, (int, float)) and math.isfinite(measured_ms) and measured_ms > 0):
            raise ValueError(f"a measured time must be a positive number of ms, got {measured_ms!r}")
        total, compute = _parts(prediction)
        observation = Observation(name, total, compute, float(measured_ms), self.predict(prediction))
        self.observations.append(observation)
        self._fit()
        return observation

    def _fit(self) -> None:
        obs = self.observations
        common = statistics.median(o.measured_ms / o.predicted_ms for o in obs if o.predicted_ms > 0)
        # least squares of measured = a * compute + b * rest, in relative terms (each observation
        # weighted by 1 / measured, so that a 3 ms and a 0.3 ms configuration count alike)
        rows = [(o.compute_ms / o.measured_ms, max(0.0, o.predicted_ms - o.compute_ms) / o.measured_ms)
                for o in obs]
        sxx = sum(c * c for c, _ in rows)
        syy = sum(r * r for _, r in rows)
        sxy = sum(c * r for c, r in rows)
        sx, sy = sum(c for c, _ in rows), sum(r for _, r in rows)
        det = sxx * syy - sxy * sxy
        if len(obs) < 2 or det <= 1e-9 * max(sxx * syy, 1e-30):
            self.scale_compute = self.scale_rest = _clamp(common)
            return
        a = (sx * syy - sy * sxy) / det
        b = (sy * sxx - sx * sxy) / det
        if a <= 0 or b <= 0:  # the parts cannot be told apart with a positive sign: one scale
            self.scale_compute = self.scale_rest = _clamp(common)
            return
        self.scale_compute, self.scale_rest = _clamp(a), _clamp(b)

    def summary(self) -> dict:
        """What the report says of the calibration: the scales, the number of observations, and
        the median absolute relative error of the raw model, of the calibrated prediction made
        before each measurement (from the second on), and of the final fit (in-sample)."""
        obs = self.observations
        raw = [abs(o.predicted_ms - o.measured_ms) / o.measured_ms for o in obs]
        before = [abs(o.before_ms - o.measured_ms) / o.measured_ms for o in obs[1:]]
        after = [abs(self.predict({"time_ms": o.predicted_ms, "compute_ms": o.compute_ms}) - o.measured_ms)
                 / o.measured_ms for o in obs]
        return {"observations": len(obs), "scale_compute": self.scale_compute, "scale_rest": self.scale_rest,
                "raw_median_error": _median(raw), "before_median_error": _median(before),
                "before_cases": len(before), "after_median_error": _median(after),
                "per_observation": [{"name": o.name, "predicted_ms": o.predicted_ms,
                                     "calibrated_before_ms": o.before_ms, "measured_ms": o.measured_ms}
                                    for o in obs]}

    def margin(self) -> float:
        """The relative uncertainty of a calibrated prediction: the largest error the calibration
        made before seeing a measurement, at least the fallback interval; with fewer than two
        such errors, twice the fallback (nothing learnt yet about this machine)."""
        before = [abs(o.before_ms - o.measured_ms) / o.measured_ms for o in self.observations[1:]]
        if len(before) < 2:
            return 2 * FALLBACK_RELATIVE_INTERVAL
        return max(FALLBACK_RELATIVE_INTERVAL, max(before))


def interval(prediction: dict) -> tuple:
    """``(low_ms, high_ms)`` of a raw prediction: its own ``interval_ms`` (or ``predicted_interval_ms``)
    where the overlap model gives one, else +- ``FALLBACK_RELATIVE_INTERVAL`` of its time."""
    own = prediction.get("interval_ms") or prediction.get("predicted_interval_ms")
    if own and len(own) == 2 and all(isinstance(v, (int, float)) for v in own):
        return float(own[0]), float(own[1])
    total, _ = _parts(prediction)
    return total * (1 - FALLBACK_RELATIVE_INTERVAL), total * (1 + FALLBACK_RELATIVE_INTERVAL)


def interval_source(prediction: dict) -> str:
    """Where ``interval`` took the interval from (one phrase for reports)."""
    if prediction.get("interval_ms") or prediction.get("predicted_interval_ms"):
        return "the overlap model's interval"
    return (f"+-{FALLBACK_RELATIVE_INTERVAL:.0%}: twice the model's median error on unseen runs "
            f"(eval/results/overlap_model_validation.md)")


def _parts(prediction: dict) -> tuple:
    total = prediction.get("time_ms", prediction.get("predicted_time_ms"))
    compute = prediction.get("compute_ms", prediction.get("predicted_compute_ms"))
    if total is None:
        raise ValueError("a prediction needs time_ms (or predicted_time_ms)")
    compute = total if compute is None else min(compute, total)
    return float(total), float(compute)


def _clamp(scale: float) -> float:
    return min(MAX_SCALE, max(1.0 / MAX_SCALE, scale))


def _median(values: list):
    return statistics.median(values) if values else None
