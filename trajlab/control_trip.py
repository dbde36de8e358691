"""The control-token trip: the first step where a run's control-token statistic leaves the band its own first steps
set -- the breaker's threshold τ, calibrated per run instead of a fixed constant.

The research behind trajlab names control-token probability spikes as the early sign of a collapsing tool-use run
and a fixed τ as the open problem: the level of ``control_logprob_mean`` differs by model family, tokenizer and
task. So τ comes from the run itself: over the first :data:`BASELINE_STEPS` steps that have the statistic, the
median and the scaled median absolute deviation (1.4826 × MAD, the standard deviation of normal noise, floored at
:func:`scale_floor`) give the band, and τ = median − :data:`K` × scale (for a statistic that rises when things go
wrong, ``control_low_prob_share``: median + K × scale). The trip is the first of :data:`CONSECUTIVE` consecutive
steps past τ after the baseline. A fixed τ stays available (``tau=``).

The defaults were chosen on simulated healthy runs (150 steps of per-step noise, independent and AR(1) with φ = 0.5;
``benchmarks/bench_control_trip.py`` measures them again): baseline 20, K = 5, 3 consecutive steps trip under 0.1%
of healthy runs with independent noise and 0.4-0.8% with AR(1) noise, and trip a median 10-11 steps after a fall of
half a noise sd per step begins; a baseline of 10 steps with K = 3, 2 in a row, trips 12-33% of healthy runs.
``tests/test_control_trip.py`` checks the rate and the detection of a falling statistic.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

#: steps with the statistic that calibrate τ (the trip is evaluated only after them)
BASELINE_STEPS = 20
#: τ is this many scaled MADs from the baseline's median
K = 5.0
#: steps past τ in a row that make a trip (the trip's step is the first of them)
CONSECUTIVE = 3
#: the statistics a trip can follow, and which way is bad
STATISTICS: dict[str, str] = {"control_logprob_mean": "down", "control_low_prob_share": "up"}


@dataclass(frozen=True)
class ControlThreshold:
    """τ and where it came from."""

    statistic: str
    direction: str  # down: bad below tau; up: bad above tau
    tau: float
    method: str  # calibrated | fixed
    center: float | None = None  # the baseline's median (calibrated)
    scale: float | None = None  # 1.4826 × MAD of the baseline, floored (calibrated)
    baseline_steps: tuple[int, int] | None = None  # first and last step of the baseline (calibrated)
    k: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def scale_floor(center: float) -> float:
    """The smallest scale a calibration uses: 1% of the baseline's level, at least 0.001 (a baseline of identical
    values would otherwise trip on the first wobble)."""
    return max(1e-3, 0.01 * abs(center))


def _median(xs: list[float]) -> float:
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def series(rows: Iterable[Mapping[str, Any]], statistic: str) -> list[tuple[int, float]]:
    """``(step, value)`` of ``statistic`` over ``rows`` (steps rows or record step figures), sorted by step; rows
    without a step or a finite value are left out."""
    out = []
    for r in rows:
        step, v = r.get("step"), r.get(statistic)
        if isinstance(step, int) and not isinstance(step, bool) and isinstance(v, (int, float)) and math.isfinite(v):
            out.append((step, float(v)))
    return sorted(out)


def calibrate(values: list[tuple[int, float]], statistic: str = "control_logprob_mean", *,
              baseline: int = BASELINE_STEPS, k: float = K, tau: float | None = None) -> ControlThreshold | None:
    """τ for ``values`` (``(step, value)``, sorted): fixed when ``tau`` is given, else from the first ``baseline``
    values; None while fewer values than that are in."""
    if statistic not in STATISTICS:
        raise ValueError(f"unknown control-token statistic {statistic!r}; one of: {', '.join(STATISTICS)}")
    direction = STATISTICS[statistic]
    if tau is not None:
        return ControlThreshold(statistic, direction, float(tau), "fixed")
    if len(values) < baseline:
        return None
    base = [v for _, v in values[:baseline]]
    center = _median(base)
    scale = max(1.4826 * _median([abs(v - center) for v in base]), scale_floor(center))
    t = center - k * scale if direction == "down" else center + k * scale
    return ControlThreshold(statistic, direction, t, "calibrated", center, scale,
                            (values[0][0], values[baseline - 1][0]), k)


def control_trip(rows: Iterable[Mapping[str, Any]], statistic: str = "control_logprob_mean", *,
                 baseline: int = BASELINE_STEPS, k: float = K, consecutive: int = CONSECUTIVE,
                 tau: float | None = None) -> dict[str, Any] | None:
    """The first step where ``statistic`` is past τ (:func:`calibrate`) for ``consecutive`` steps in a row, after
    the baseline (after the first step, for a fixed τ): ``{"step", "value", "noticed_step", "threshold": {...}}``,
    or None (no trip, or not calibrated yet)."""
    values = series(rows, statistic)
    th = calibrate(values, statistic, baseline=baseline, k=k, tau=tau)
    if th is None:
        return None
    start = 0 if th.method == "fixed" else baseline
    streak: list[tuple[int, float]] = []
    for step, v in values[start:]:
        past = v < th.tau if th.direction == "down" else v > th.tau
        streak = [*streak, (step, v)] if past else []
        if len(streak) >= consecutive:
            return {"step": streak[0][0], "value": streak[0][1], "noticed_step": step, "threshold": th.as_dict()}
    return None


def describe(trip: Mapping[str, Any]) -> str:
    """One line for a control-token trip: the statistic, its value, τ and how τ was set."""
    th = trip["threshold"]
    how = (f"calibrated on steps {th['baseline_steps'][0]}..{th['baseline_steps'][1]}: median {th['center']:.4f} "
           f"{'-' if th['direction'] == 'down' else '+'} {th['k']:g} x {th['scale']:.4f}"
           if th["method"] == "calibrated" else "fixed")
    side = "below" if th["direction"] == "down" else "above"
    return f"{th['statistic']} {trip['value']:.4f} {side} tau {th['tau']:.4f} ({how}) from step {trip['step']}"
