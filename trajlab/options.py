"""Validation of numeric command-line option values shared by the commands (a bad value is a usage error,
exit 2, printed in one line like every other usage error)."""

from __future__ import annotations

import math


def _bad(message: str) -> Exception:
    import typer

    return typer.BadParameter(message)


def check_rate(value: float | None, name: str) -> None:
    """A rate option (``--fail-above``): a finite number in [0, 1] (``nan``, ``inf``, ``-0.1`` are refused)."""
    if value is not None and not (math.isfinite(value) and 0.0 <= value <= 1.0):
        raise _bad(f"{name} {value}: give a rate between 0 and 1 (e.g. 0.2)")


def check_min(value: int | float | None, low: int | float, name: str) -> None:
    """A count option that must be at least ``low`` (and finite)."""
    if value is not None and not (math.isfinite(value) and value >= low):
        raise _bad(f"{name} {value}: must be at least {low}")
