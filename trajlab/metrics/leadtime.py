"""When the reward broke down, and how many steps earlier trajlab's early warning fired (the *lead time*).

The breakdown test is of the same kind as the malformed-rate early warning (:mod:`trajlab.trends`), made for a
continuous metric. For each run, walk the steps where the metric has a finite value, in order. At step *t*, the
*baseline* is the values of every earlier step (mean ``m0``, standard deviation ``s0``); the *window* is step *t*
and the next ``window - 1`` steps (default 5). Step *t* is a breakdown when, with at least
``min_baseline_steps`` earlier steps,

* the step's own value is below ``m0`` (``direction="up"``: above),
* the window's mean is at least ``drop`` (0.2) x ``max(|m0|, s0)`` below ``m0`` (up: above), and more than
  rounding (``1e-9 x max(1, |m0|)``: a metric flat at 0 has neither spread nor scale), and
* a one-sided two-sample z-test of the window's mean against the baseline's mean, with the baseline's spread
  (``z = (m0 - mean) / (s0 * sqrt(1/n_window + 1/n_baseline))``), gives ``p < alpha`` (1e-3), and
* the metric stays down: the *confirmation window*, the ``window`` steps after the window (as many as were
  logged, at least one), passes the same two conditions against the same baseline. A fall that is not yet
  followed by a logged step is not reported.

The first such step is where the metric fell. The confirmation is what makes "broke down" mean "fell and stayed
down": testing every step of a long run at ``alpha`` finds a 5-step dip somewhere in pure noise in 20-30% of
300-step runs (simulated: a reward that is N(0, 0.05), N(-0.5, 0.1) or the mean of 16 Bernoulli(0.3) draws per
step); with the confirmation, 1-2%. On the sample runs the breakdown step is the same (108) either way. The lead time is that step minus the early-warning step: positive
when trajlab warned before the reward fell ("warned N steps before the reward fell"), negative when after.

The metric is the reward verl logs (``critic/score/mean``, else ``critic/rewards/mean``, else the first
``val-core/...`` metric) unless one is named.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

BREAKDOWN_DEFAULTS: dict[str, Any] = {"window": 5, "alpha": 1e-3, "drop": 0.2, "min_baseline_steps": 5}
#: the metrics tried, in order, when none is named
REWARD_METRICS = ("critic/score/mean", "critic/rewards/mean")
#: a window mean this close to the baseline's (relative, for values above 1) is rounding, not a fall: a metric flat
#: at exactly 0 has no spread and no relative threshold, so float jitter alone would otherwise read as p = 0
ROUNDING = 1e-9
DIRECTIONS = ("down", "up")


def breakdown(
    series: Sequence[tuple[int, float]],
    *,
    direction: str = "down",
    window: int = BREAKDOWN_DEFAULTS["window"],
    alpha: float = BREAKDOWN_DEFAULTS["alpha"],
    drop: float = BREAKDOWN_DEFAULTS["drop"],
    min_baseline_steps: int = BREAKDOWN_DEFAULTS["min_baseline_steps"],
) -> dict[str, Any] | None:
    """The first step where ``series`` (``(step, value)``, any order; non-finite values ignored) breaks down by
    the test in the module docstring, or None. Returns ``step``, ``baseline_mean``, ``baseline_sd``,
    ``baseline_steps``, ``window_mean``, ``window`` (its steps), ``p_value``, ``direction`` and ``statistic``."""
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {DIRECTIONS}, not {direction!r}")
    sign = 1.0 if direction == "down" else -1.0
    seq = sorted((int(s), float(v)) for s, v in series if v is not None and math.isfinite(v))
    total = sq = 0.0
    for i, (step, v) in enumerate(seq):
        if i >= max(2, min_baseline_steps):
            m0 = total / i
            s0 = math.sqrt(max(0.0, (sq - i * m0 * m0) / (i - 1)))
            win = seq[i:i + window]
            confirm = seq[i + window:i + 2 * window]
            if sign * (m0 - v) > 0 and confirm:
                mean, p = _window_test([x for _, x in win], m0, s0, i, sign, drop)
                p_confirm = _window_test([x for _, x in confirm], m0, s0, i, sign, drop)[1]
                if p < alpha and p_confirm < alpha:
                    word = "below" if direction == "down" else "above"
                    return {
                        "step": step,
                        "baseline_mean": m0,
                        "baseline_sd": s0,
                        "baseline_steps": i,
                        "window_mean": mean,
                        "window": [s for s, _ in win],
                        "p_value": p,
                        "confirm_window": [s for s, _ in confirm],
                        "confirm_p_value": p_confirm,
                        "direction": direction,
                        "statistic": (
                            f"one-sided z-test of the mean over steps {win[0][0]}..{win[-1][0]} against the mean "
                            f"of all {i} earlier steps with their spread (p < {alpha:g}; mean {word} the baseline "
                            f"by >= {drop:g} x max(|baseline|, sd)), confirmed over steps "
                            f"{confirm[0][0]}..{confirm[-1][0]}"),
                    }
        total += v
        sq += v * v
    return None


def _window_test(values: Sequence[float], m0: float, s0: float, n_base: int, sign: float,
                 drop: float) -> tuple[float, float]:
    """``(mean, p)`` of one window against the baseline (mean ``m0``, sd ``s0`` over ``n_base`` steps): ``p`` is
    the one-sided z-test's, or 1.0 when the window's mean is not below (``sign`` -1: above) the baseline by
    ``drop`` x max(|m0|, s0) and by more than rounding."""
    mean = sum(values) / len(values)
    gap = sign * (m0 - mean)
    if not (gap > ROUNDING * max(1.0, abs(m0)) and gap >= drop * max(abs(m0), s0)):
        return mean, 1.0
    se = s0 * math.sqrt(1.0 / len(values) + 1.0 / n_base)
    return mean, (0.0 if se == 0 else 0.5 * math.erfc(gap / se / math.sqrt(2)))


def pick_metric(names: Iterable[str], wanted: str | None = None) -> str | None:
    """The metric a run's lead time is measured on: ``wanted`` when the run logged it, else the first of
    :data:`REWARD_METRICS` it logged, else its first ``val-core/`` metric (sorted), else None."""
    have = set(names)
    if wanted:
        return wanted if wanted in have else None
    for m in REWARD_METRICS:
        if m in have:
            return m
    val = sorted(n for n in have if n.startswith("val-core/"))
    return val[0] if val else None


def sentence(lead: int | None, metric: str, warn_step: int | None, fell_step: int | None,
             last_step: int | None = None) -> str:
    """The lead time in words."""
    what = "the reward" if metric in REWARD_METRICS or metric.startswith("val-core/") else metric
    if warn_step is not None and fell_step is not None and lead is not None:
        n = abs(lead)
        steps = f"{n} step{'s' if n != 1 else ''}"
        if lead > 0:
            return f"warned {steps} before {what} fell (warning at step {warn_step}, {metric} fell at step {fell_step})"
        if lead < 0:
            return f"warned {steps} after {what} fell ({metric} fell at step {fell_step}, warning at step {warn_step})"
        return f"warned at the step {what} fell (step {warn_step})"
    if warn_step is not None:
        upto = f" through step {last_step}" if last_step is not None else ""
        return f"warning at step {warn_step}; {metric} did not break down{upto} by the stated test"
    if fell_step is not None:
        return f"no early warning; {metric} fell at step {fell_step}"
    return f"no early warning, and {metric} did not break down"


def lead_time(series: Sequence[tuple[int, float]], metric: str, warning: dict[str, Any] | None,
              direction: str = "down", **test: Any) -> dict[str, Any]:
    """The lead-time record of one run: ``metric``, ``direction``, ``breakdown`` (:func:`breakdown`'s dict or
    None), ``warning_step``, ``breakdown_step``, ``lead_steps`` (breakdown step - warning step, or None) and
    ``sentence``."""
    fell = breakdown(series, direction=direction, **test)
    warn_step = warning.get("step") if warning else None
    fell_step = fell["step"] if fell else None
    lead = fell_step - warn_step if fell_step is not None and warn_step is not None else None
    last = max((int(s) for s, v in series if v is not None and math.isfinite(v)), default=None)
    return {
        "metric": metric,
        "direction": direction,
        "warning_step": warn_step,
        "breakdown_step": fell_step,
        "lead_steps": lead,
        "breakdown": fell,
        "metric_steps": sum(1 for _, v in series if v is not None and math.isfinite(v)),
        "sentence": sentence(lead, metric, warn_step, fell_step, last),
    }
