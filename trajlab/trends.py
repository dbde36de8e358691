"""Per-step aggregates and the early-warning statistic for the malformed-call rate.

Early warning (trajlab's own, documented definition): for the ``train`` split (or the split with the most
steps), walk the steps in order. At step *t*, the *baseline* is the pooled malformed-call rate of every
earlier step, ``p0 = (m_<t + 0.5) / (c_<t + 1)`` (Jeffreys-style so a clean baseline is not zero). The
*window* is step *t* and the next ``window - 1`` steps (default 3). Step *t* is flagged when, with at least
``min_baseline_steps`` earlier steps,

* the step's own rate is above ``p0``,
* the window's rate is at least ``ratio`` (2) times ``p0``, and
* a one-sided exact binomial test of the window's malformed count against ``p0`` gives ``p < alpha`` (1e-3).

The first flagged step is the early warning: the point where the rate rises significantly above its own
earlier baseline and stays up.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pyarrow as pa

from trajlab.tables import STEPS, table_path, to_table

EW_DEFAULTS = {"window": 3, "alpha": 1e-3, "ratio": 2.0, "min_baseline_steps": 5}


def steps_table(out: Path | str) -> pa.Table:
    """Aggregate ``trajectories`` and ``calls`` of a scan directory per (split, step)."""
    import polars as pl

    traj = (
        pl.scan_parquet(table_path(out, "trajectories"))
        .group_by(["split", "step"])
        .agg(
            pl.len().cast(pl.Int64).alias("trajectories"),
            pl.col("n_calls").sum().cast(pl.Int64).alias("calls"),
            pl.col("n_malformed_calls").sum().cast(pl.Int64).alias("malformed_calls"),
            (pl.col("n_malformed_calls") > 0).sum().cast(pl.Int64).alias("trajectories_with_malformed"),
            pl.col("score").sort().mean().alias("mean_score"),  # sorted first: the same sum in every run
            pl.col("has_final_answer").cast(pl.Float64).mean().alias("final_answer_rate"),
        )
        .collect()
    )
    cats = (
        pl.scan_parquet(table_path(out, "calls"))
        .filter(pl.col("status") == "malformed")
        .select("split", "step", pl.col("categories").alias("category"))
        .explode("category")
        .drop_nulls("category")
        .group_by(["split", "step", "category"])
        .agg(pl.len().cast(pl.Int64).alias("n"))
        .sort(["split", "step", "category"])
        .collect()
    )
    by_key: dict[tuple[str, Any], list[tuple[str, int]]] = {}
    for split, step, cat, n in cats.iter_rows():
        by_key.setdefault((split, step), []).append((cat, n))
    rows = []
    for r in traj.sort(["split", "step"], nulls_last=False).iter_rows(named=True):
        calls = r["calls"] or 0
        rows.append(
            {
                **r,
                "calls": calls,
                "malformed_calls": r["malformed_calls"] or 0,
                "malformed_rate": (r["malformed_calls"] / calls) if calls else None,
                "final_answer_rate": r["final_answer_rate"] or 0.0,
                "category_counts": by_key.get((r["split"], r["step"]), []),
            }
        )
    return to_table(STEPS, rows)


def _binom_sf(k: int, n: int, p: float) -> float:
    """P(X >= k) for X ~ Binomial(n, p), exact in log space (terms decrease past the mean, so stop early)."""
    if k <= 0:
        return 1.0
    if k > n:
        return 0.0
    if p <= 0.0:
        return 0.0
    if p >= 1.0:
        return 1.0
    lp, lq = math.log(p), math.log1p(-p)
    lgn = math.lgamma(n + 1)
    total = 0.0
    for x in range(k, n + 1):
        term = math.exp(lgn - math.lgamma(x + 1) - math.lgamma(n - x + 1) + x * lp + (n - x) * lq)
        total += term
        if x > n * p and term < total * 1e-15:
            break
    return min(total, 1.0)


def early_warning(
    steps: pa.Table | list[dict[str, Any]],
    *,
    split: str | None = None,
    window: int = EW_DEFAULTS["window"],
    alpha: float = EW_DEFAULTS["alpha"],
    ratio: float = EW_DEFAULTS["ratio"],
    min_baseline_steps: int = EW_DEFAULTS["min_baseline_steps"],
) -> dict[str, Any] | None:
    """The first step where the malformed-call rate rises significantly above its earlier baseline.

    Returns ``None`` when no step qualifies, else a dict with ``split``, ``step``, ``baseline_rate``,
    ``window_rate``, ``p_value``, ``window`` and a one-line ``statistic`` description.
    """
    rows = steps.to_pylist() if isinstance(steps, pa.Table) else list(steps)
    rows = [r for r in rows if r.get("step") is not None]
    if not rows:
        return None
    if split is None:
        counts: dict[str, int] = {}
        for r in rows:
            counts[r["split"]] = counts.get(r["split"], 0) + 1
        split = "train" if "train" in counts else max(counts, key=lambda s: counts[s])
    seq = sorted((r for r in rows if r["split"] == split and (r.get("calls") or 0) > 0), key=lambda r: r["step"])
    m_before = c_before = 0
    for i, r in enumerate(seq):
        if i >= min_baseline_steps:
            p0 = (m_before + 0.5) / (c_before + 1)
            win = seq[i : i + window]
            m = sum(x["malformed_calls"] for x in win)
            c = sum(x["calls"] for x in win)
            own = r["malformed_calls"] / r["calls"]
            if own > p0 and c and m / c >= ratio * p0:
                pv = _binom_sf(m, c, p0)
                if pv < alpha:
                    return {
                        "split": split,
                        "step": int(r["step"]),
                        "baseline_rate": p0,
                        "baseline_steps": i,
                        "window_rate": m / c,
                        "window": [int(x["step"]) for x in win],
                        "p_value": pv,
                        "statistic": (
                            f"one-sided exact binomial test of the malformed-call count over steps "
                            f"{win[0]['step']}..{win[-1]['step']} against the pooled rate of all earlier steps "
                            f"(p < {alpha:g}, rate >= {ratio:g}x baseline)"
                        ),
                    }
        m_before += r["malformed_calls"]
        c_before += r["calls"]
    return None


def category_steps(out: Path | str) -> dict[tuple[str, int], dict[str, int]]:
    """``{(split, step): {category: malformed calls}}`` read back from the ``steps`` table."""
    import pyarrow.parquet as pq

    t = pq.read_table(table_path(out, "steps"), columns=["split", "step", "category_counts"])
    return {(r["split"], r["step"]): dict(r["category_counts"]) for r in t.to_pylist()}
