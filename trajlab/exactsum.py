"""Order-independent float means for polars group-bys: the same bytes whatever the row order, chunking or threads.

A float sum depends on the order it adds in (and polars adds in chunks, per thread, with SIMD lanes), so two
scans of the same input gave ``steps.mean_score`` values that differ in the last bits. Here each value is cut,
exactly, into three fixed-point integer limbs (``2^-20``, ``2^-51`` and ``2^-82`` units; everything below
``2^-82`` is dropped, the same way every time), the limbs are summed as 64-bit integers -- exact, so in any
order -- and the mean is the correctly rounded quotient of the integer total. Groups whose values are too large
for the limbs (``|x| * n >= 2^42``) fall back to the exact rational mean of the group's values.
Non-finite values behave as in a float mean: any NaN (or both infinities) gives NaN, one infinity gives it.

:func:`mean_exprs` gives the aggregation expressions of one column, :func:`finish_mean` turns one row of the
aggregated frame into the mean; :func:`reference_mean` is the plain-Python reference the differential test
compares them with.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from fractions import Fraction
from typing import Any

#: the fixed-point scales of the three limbs (bits after the binary point)
LIMB_BITS = (20, 51, 82)
#: beyond this ``max|x| * n``, the first limb's 64-bit sum could overflow: such groups use reference_mean
LIMIT = float(2 ** 42)


def mean_exprs(col: str, prefix: str) -> list[Any]:
    """Polars aggregation expressions (inside ``group_by().agg``) whose results :func:`finish_mean` turns into
    the exact mean of ``col``'s non-null values; their names start with ``prefix``."""
    import polars as pl

    x = pl.col(col).cast(pl.Float64)
    fin = x.filter(x.is_finite())
    s1 = fin * float(2 ** LIMB_BITS[0])
    k1 = s1.floor()
    r1 = (s1 - k1) * float(2 ** (LIMB_BITS[1] - LIMB_BITS[0]))
    k2 = r1.floor()
    k3 = ((r1 - k2) * float(2 ** (LIMB_BITS[2] - LIMB_BITS[1]))).floor()
    return [
        x.drop_nulls().len().cast(pl.Int64).alias(f"{prefix}n"),
        k1.cast(pl.Int64, strict=False).sum().alias(f"{prefix}k1"),
        k2.cast(pl.Int64).sum().alias(f"{prefix}k2"),
        k3.cast(pl.Int64).sum().alias(f"{prefix}k3"),
        fin.abs().max().alias(f"{prefix}max"),
        x.is_nan().any().alias(f"{prefix}nan"),
        (x == math.inf).any().alias(f"{prefix}pinf"),
        (x == -math.inf).any().alias(f"{prefix}ninf"),
    ]


def finish_mean(row: dict[str, Any], prefix: str, values: Any = None) -> float | None:
    """The mean from one aggregated row (:func:`mean_exprs`; the helper columns are popped from ``row``), or
    None for a group without values. ``values``: a callable returning the group's values, used only when the
    group is too large for the limbs (:data:`LIMIT`)."""
    n, k1, k2, k3, big, nan, pinf, ninf = (row.pop(f"{prefix}{k}") for k in
                                           ("n", "k1", "k2", "k3", "max", "nan", "pinf", "ninf"))
    if not n:
        return None
    if nan or (pinf and ninf):
        return math.nan
    if pinf or ninf:
        return math.inf if pinf else -math.inf
    if big is not None and big * n >= LIMIT:
        if values is None:
            raise ValueError("values too large for the fixed-point limbs and no values given")
        return reference_mean(values())
    total = ((k1 or 0) << (LIMB_BITS[2] - LIMB_BITS[0])) + ((k2 or 0) << (LIMB_BITS[2] - LIMB_BITS[1])) + (k3 or 0)
    return float(Fraction(total, n << LIMB_BITS[2]))


def reference_mean(values: Iterable[float | None]) -> float | None:
    """The reference: the exact mean of the non-null values, correctly rounded (None if none; NaN and the
    infinities as in a float mean)."""
    v = [float(x) for x in values if x is not None]
    if not v:
        return None
    if not all(math.isfinite(x) for x in v):
        pos, neg = math.inf in v, -math.inf in v  # NaN and the infinities: as in a float mean
        return math.nan if any(math.isnan(x) for x in v) or (pos and neg) else (math.inf if pos else -math.inf)
    return float(sum((Fraction(x) for x in v), Fraction(0)) / len(v))
