"""Per-step aggregates per run and the early-warning statistic for the malformed-call rate.

Everything here is per *run* (one experiment, :mod:`trajlab.ingest.runs`): step 84 of one run and step 84 of
another are never pooled. Early warning (trajlab's own, documented definition), for each run: for the ``train`` split (or the split with the most
steps), walk the steps in order. At step *t*, the *baseline* is the pooled malformed-call rate of every
earlier step, ``p0 = (m_<t + 0.5) / (c_<t + 1)`` (Jeffreys-style so a clean baseline is not zero). The
*window* is step *t* and the next ``window - 1`` steps (default 3). Step *t* is flagged when, with at least
``min_baseline_steps`` earlier steps,

* the step's own rate is above ``p0``,
* the window's rate is at least ``ratio`` (2) times ``p0``, with at least ``min_window_malformed`` (3) malformed
  calls in it (two broken calls after a spotless baseline are not a rise), and
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

EW_DEFAULTS: dict[str, Any] = {"window": 3, "alpha": 1e-3, "ratio": 2.0, "min_baseline_steps": 5, "min_window_malformed": 3}


def steps_table(out: Path | str, *, control_prob: float = 0.5,
                record_columns: dict[tuple[str, int], dict[str, Any]] | None = None) -> pa.Table:
    """Aggregate ``trajectories``, ``calls`` and ``rollout_tokens`` of a scan directory per (run, split, step)
    (``control_prob``: the probability below which a sampled control token counts as low). ``record_columns``:
    per (run, step), exact-token columns from the verl reward's record files
    (:func:`trajlab.verl.readback.record_step_columns`), filled into ``train`` rows that have no exact tokens of
    their own."""
    import polars as pl

    tok_path = table_path(out, "rollout_tokens")
    rows = aggregate_steps(pl.scan_parquet(table_path(out, "trajectories")),
                           pl.scan_parquet(table_path(out, "calls")),
                           pl.scan_parquet(tok_path) if tok_path.is_file() else None,
                           control_prob=control_prob)
    for r in rows if record_columns else ():
        got = record_columns.get((r["run"], r["step"])) if r["split"] == "train" else None  # type: ignore[union-attr]
        if got is not None and r.get("generated_tokens") is None:
            r.update(got)
    return to_table(STEPS, rows)


def token_aggregates(traj_lf: Any, tokens_lf: Any, control_prob: float = 0.5) -> dict[tuple[Any, ...], dict[str, Any]]:
    """Per (run, split, step): the exact-token figures of ``steps`` (generated tokens, control-token log-probs,
    the share of control tokens sampled below ``control_prob``, the train-inference mismatch), from
    ``rollout_tokens`` rows (polars LazyFrames). Steps without exact tokens are absent."""
    import math

    import polars as pl

    from trajlab.exactsum import finish_mean, mean_exprs

    keys = ["run", "split", "step"]
    gen = tokens_lf.filter(pl.col("generated")).join(
        traj_lf.select("trajectory_id", "run", "split", "step"), on="trajectory_id", how="inner")
    lp = pl.col("logprob")
    gen = gen.with_columns(
        pl.when(pl.col("control")).then(lp).alias("_ctrl_lp"),
        (lp - pl.col("train_logprob")).abs().alias("_diff"),
    ).with_columns(pl.when(pl.col("control")).then(pl.col("_diff")).alias("_ctrl_diff"),
                   pl.when(pl.col("_ctrl_lp").is_not_null())
                   .then((pl.col("_ctrl_lp") < math.log(control_prob)).cast(pl.Float64)).alias("_low"))
    means = {"control_logprob_mean": "_ctrl_lp", "control_low_prob_share": "_low",
             "logprob_mismatch": "_diff", "control_logprob_mismatch": "_ctrl_diff"}
    agg = (
        gen.group_by(keys)
        .agg(pl.len().cast(pl.Int64).alias("generated_tokens"),
             *[e for name, col in means.items() for e in mean_exprs(col, f"_{name}_")])
        .collect()
    )
    got = {}
    for r in agg.iter_rows(named=True):
        for name, col in means.items():  # exact means: the same bytes in every run, whatever the row order
            r[name] = finish_mean(r, f"_{name}_", lambda c=col, k=(r["run"], r["split"], r["step"]):
                                  group_values(gen, keys, k, c))
        got[(r["run"], r["split"], r["step"])] = r
    return got


def group_values(lf: Any, keys: list[str], key: tuple[Any, ...], col: str) -> list[Any]:
    """The values of ``col`` in the group ``key`` of ``lf`` (the rare group too large for exact limbs)."""
    import polars as pl

    cond = pl.lit(True)
    for k, v in zip(keys, key, strict=True):
        cond = cond & (pl.col(k).is_null() if v is None else (pl.col(k) == v))
    return lf.filter(cond).select(col).collect().to_series().to_list()


def aggregate_steps(traj_lf: Any, calls_lf: Any, tokens_lf: Any = None, *, control_prob: float = 0.5
                    ) -> list[dict[str, Any]]:
    """The ``steps`` rows (sorted by run, split, step) of ``trajectories`` and ``calls`` rows given as polars
    LazyFrames (a scan's tables, or the parts of one range while watching), with the exact-token figures of
    ``rollout_tokens`` rows when given (:func:`token_aggregates`; null where there are none)."""
    import polars as pl

    from trajlab.exactsum import finish_mean, mean_exprs

    keys = ["run", "split", "step"]
    traj = (
        traj_lf
        .group_by(keys)
        .agg(
            pl.len().cast(pl.Int64).alias("trajectories"),
            pl.col("n_calls").sum().cast(pl.Int64).alias("calls"),
            pl.col("n_malformed_calls").sum().cast(pl.Int64).alias("malformed_calls"),
            (pl.col("n_malformed_calls") > 0).sum().cast(pl.Int64).alias("trajectories_with_malformed"),
            *mean_exprs("score", "_score_"),  # exact: the same bytes in every run, whatever the row order
            pl.col("has_final_answer").cast(pl.Float64).mean().alias("final_answer_rate"),
        )
        .collect()
    )
    cats = (
        calls_lf
        .filter(pl.col("status") == "malformed")
        .select("trajectory_id", "split", "step", pl.col("categories").alias("category"))
        .join(traj_lf.select("trajectory_id", "run"), on="trajectory_id", how="left")
        .explode("category")
        .drop_nulls("category")
        .group_by(["run", "split", "step", "category"])
        .agg(pl.len().cast(pl.Int64).alias("n"))
        .sort(["run", "split", "step", "category"])
        .collect()
    )
    warned = {
        (run, split, step): n for run, split, step, n in (
            calls_lf.filter(pl.col("status") == "warning")
            .select("trajectory_id", "split", "step")
            .join(traj_lf.select("trajectory_id", "run"), on="trajectory_id", how="left")
            .group_by(["run", "split", "step"]).agg(pl.len().cast(pl.Int64).alias("n"))
            .collect().iter_rows())
    }
    by_key: dict[tuple[str, str, Any], list[tuple[str, int]]] = {}
    for run, split, step, cat, n in cats.iter_rows():
        by_key.setdefault((run, split, step), []).append((cat, n))
    exact = token_aggregates(traj_lf, tokens_lf, control_prob) if tokens_lf is not None else {}
    rows = []
    for r in traj.sort(keys, nulls_last=False).iter_rows(named=True):
        r["mean_score"] = finish_mean(r, "_score_", lambda k=(r["run"], r["split"], r["step"]):
                                      group_values(traj_lf, keys, k, "score"))
        calls = r["calls"] or 0
        rows.append(
            {
                **r,
                "calls": calls,
                "malformed_calls": r["malformed_calls"] or 0,
                "malformed_rate": (r["malformed_calls"] / calls) if calls else None,
                "warning_calls": (w := warned.get((r["run"], r["split"], r["step"]), 0)),
                "warning_rate": (w / calls) if calls else None,
                "final_answer_rate": r["final_answer_rate"] or 0.0,
                "category_counts": by_key.get((r["run"], r["split"], r["step"]), []),
                **{k: v for k, v in exact.get((r["run"], r["split"], r["step"]), {}).items()
                   if k not in ("run", "split", "step")},
            }
        )
    return rows


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
    run: str | None = None,
    window: int = EW_DEFAULTS["window"],
    alpha: float = EW_DEFAULTS["alpha"],
    ratio: float = EW_DEFAULTS["ratio"],
    min_baseline_steps: int = EW_DEFAULTS["min_baseline_steps"],
    min_window_malformed: int = EW_DEFAULTS["min_window_malformed"],
) -> dict[str, Any] | None:
    """The first step where the malformed-call rate of one run rises significantly above its earlier baseline.

    ``run`` picks the run's rows (rows without a ``run`` key belong to every run); with ``run=None`` the rows
    must be those of one run -- use :func:`run_warnings` for a table of several runs.
    Returns ``None`` when no step qualifies, else a dict with ``split``, ``step``, ``baseline_rate``,
    ``window_rate``, ``p_value``, ``window`` and a one-line ``statistic`` description.
    """
    rows = steps.to_pylist() if isinstance(steps, pa.Table) else list(steps)
    rows = [r for r in rows if r.get("step") is not None and (run is None or r.get("run", run) == run)]
    if not rows:
        return None
    runs_seen = {r.get("run") for r in rows}
    if len(runs_seen) > 1:
        raise ValueError(f"early_warning got the steps of {len(runs_seen)} runs; pass run= or use run_warnings()")
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
            if own > p0 and c and m >= min_window_malformed and m / c >= ratio * p0:
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


def run_names(steps: pa.Table | list[dict[str, Any]]) -> list[str]:
    """The runs of a steps table, sorted."""
    rows = steps.to_pylist() if isinstance(steps, pa.Table) else steps
    return sorted({r.get("run") or "" for r in rows})


def run_warnings(steps: pa.Table | list[dict[str, Any]], **kwargs: Any) -> dict[str, dict[str, Any] | None]:
    """:func:`early_warning` of every run in ``steps``: ``{run: warning or None}`` (runs sorted)."""
    rows = steps.to_pylist() if isinstance(steps, pa.Table) else list(steps)
    return {run: early_warning([r for r in rows if (r.get("run") or "") == run], **kwargs) for run in run_names(rows)}


def first_warning(warnings: dict[str, dict[str, Any] | None]) -> dict[str, Any] | None:
    """The earliest (by step, then run name) of several runs' warnings, with its ``run`` added when there are
    several runs (one run: the warning exactly as :func:`early_warning` gives it), or None."""
    got = sorted(((w["step"], run) for run, w in warnings.items() if w))
    if not got:
        return None
    run = got[0][1]
    first = warnings[run]
    assert first is not None  # (only runs with a warning are in ``got``)
    return {**first, "run": run} if len(warnings) > 1 else first


def recent_rate(steps: list[dict[str, Any]], window: int, *, run: str | None = None,
                split: str = "train") -> float | None:
    """Malformed-call rate pooled over the last ``window`` steps of ``split`` of ``run`` (``split`` falls back
    to any split when the run has none of it; ``run=None``: rows of one run)."""
    rows = [s for s in steps if s["step"] is not None and (run is None or s.get("run") == run)]
    rows = [s for s in rows if s["split"] == split] or rows
    rows = sorted(rows, key=lambda s: s["step"])[-window:] if window > 0 else rows
    calls = sum(s["calls"] for s in rows)
    return (sum(s["malformed_calls"] for s in rows) / calls) if calls else None


def category_steps(out: Path | str) -> dict[tuple[str, str, int], dict[str, int]]:
    """``{(run, split, step): {category: malformed calls}}`` read back from the ``steps`` table."""
    import pyarrow.parquet as pq

    t = pq.ParquetFile(table_path(out, "steps")).read(columns=["run", "split", "step", "category_counts"])
    return {(r["run"], r["split"], r["step"]): dict(r["category_counts"]) for r in t.to_pylist()}


def _pooled(rows: list[dict[str, Any]]) -> float | None:
    calls = sum(r["calls"] for r in rows)
    return sum(r["malformed_calls"] for r in rows) / calls if calls else None


def _mean_score(rows: list[dict[str, Any]]) -> float | None:
    got = [(r["mean_score"], r["trajectories"]) for r in rows if r.get("mean_score") is not None]
    n = sum(w for _, w in got)
    return sum(v * w for v, w in got) / n if n else None


def run_summaries(steps: pa.Table, warnings: dict[str, dict[str, Any] | None] | None = None,
                  *, top: int = 3) -> list[dict[str, Any]]:
    """One comparison row per run (runs sorted): totals, steps covered, malformed rate and mean score over the
    first and the last quarter of its steps (``early``/``late``; at least one step each), its early warning and
    its top categories, from the scan's ``steps`` table.
    """
    rows = steps.to_pylist()
    warnings = warnings if warnings is not None else run_warnings(steps)
    result = []
    for run in run_names(rows):
        rr = [r for r in rows if r["run"] == run]
        stepped = [r for r in rr if r["step"] is not None]
        counts: dict[str, int] = {}
        main_split = "train" if any(r["split"] == "train" for r in stepped) else (
            max({r["split"] for r in stepped}, key=lambda s: sum(1 for r in stepped if r["split"] == s))
            if stepped else None)
        seq = sorted((r for r in stepped if r["split"] == main_split), key=lambda r: r["step"])
        q = max(1, len(seq) // 4)
        early, late = seq[:q], seq[-q:]
        for r in rr:
            for k, v in (r["category_counts"] or []):
                counts[k] = counts.get(k, 0) + v
        calls = sum(r["calls"] for r in rr)
        bad = sum(r["malformed_calls"] for r in rr)
        n_traj = sum(r["trajectories"] for r in rr)
        result.append({
            "run": run,
            "trajectories": n_traj,
            "calls": calls,
            "malformed_calls": bad,
            "malformed_rate": bad / calls if calls else None,
            "split": main_split,
            "steps": len(seq),
            "first_step": seq[0]["step"] if seq else None,
            "last_step": seq[-1]["step"] if seq else None,
            "early_steps": [early[0]["step"], early[-1]["step"]] if seq else None,
            "late_steps": [late[0]["step"], late[-1]["step"]] if seq else None,
            "early_rate": _pooled(early) if seq else None,
            "late_rate": _pooled(late) if seq else None,
            "early_score": _mean_score(early) if seq else None,
            "late_score": _mean_score(late) if seq else None,
            "mean_score": _mean_score(rr),
            "early_warning": warnings.get(run),
            "top_categories": [{"category": k, "calls": v}
                               for k, v in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:top]],
        })
    return result


def tripped_runs(steps: list[dict[str, Any]], threshold: float, window: int,
                 split: str = "train") -> list[dict[str, Any]]:
    """``--fail-above``: every run whose malformed-call rate over its last ``window`` steps (see
    :func:`recent_rate`) exceeds ``threshold``, as ``{"run", "rate", "last_step"}`` (runs sorted)."""
    out = []
    for run in run_names(steps):
        rate = recent_rate(steps, window, run=run, split=split)
        if rate is not None and rate > threshold:
            last = max((s["step"] for s in steps if s.get("run") == run and s["step"] is not None), default=None)
            out.append({"run": run, "rate": rate, "last_step": last})
    return out
