"""Rescore results for the report: spike rates per checkpoint, the control tokens that moved most, and the
drift page (every checkpoint against the reference: calibrated spikes, paired drift, distributions,
malformation log odds by category, discovered tokens).

Reads the ``rescore_*`` views of :mod:`trajlab.query` (tables written by ``trajlab rescore``, see
:mod:`trajlab.rescore.outputs`). Checkpoints are ordered as the run orders them (``rescore_compare``'s
``checkpoint_index``), else by the step in their label.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from trajlab.duckrows import query_rows

if TYPE_CHECKING:  # pragma: no cover
    import duckdb


@dataclass
class RescoreData:
    """Spike rates per checkpoint and per-token movements (from the rescore tables)."""

    checkpoints: list[str]
    intrusion: list[float | None]
    dropout: list[float | None]
    units: str
    rows: list[dict[str, Any]]  # per checkpoint: positions, spikes, rates, mean probabilities
    moved: list[dict[str, Any]] = field(default_factory=list)  # token, delta, first, last
    moved_units: str = ""
    note: str | None = None
    drift: DriftData | None = None  # against the reference, when ``trajlab rescore`` wrote its drift tables


@dataclass
class DriftData:
    """The drift page: every checkpoint against the reference (``rescore_calibration``, ``rescore_paired``, ...)."""

    reference: str
    quantile: float
    checkpoints: list[dict[str, Any]]  # label, step, calibrated_rate, paired_drift (+ _lo/_hi), is_reference
    distribution: dict[str, list[dict[str, Any]]]  # kind -> rows (checkpoint, step, log10_lo, log10_hi, share)
    log_odds: dict[str, list[float | None]]  # category -> median log odds per entry of ``checkpoints``
    discovered: list[dict[str, Any]]  # the last checkpoint's top tokens (not configured control tokens first)



SPIKE_UNITS = "eligible positions"
MOVED_UNITS = "mean probability, 0-1"


def _natural(label: str) -> tuple[Any, ...]:
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", label))


def checkpoint_order(con: duckdb.DuckDBPyConnection, views: set[str], labels: list[str]) -> list[tuple[str, int | None]]:
    """``(label, step)`` in run order."""
    known: dict[str, tuple[int, int | None]] = {}
    if "rescore_compare" in views:
        for r in query_rows(con, "SELECT checkpoint, min(checkpoint_index) AS i, max(step) AS step FROM rescore_compare "
                            "GROUP BY checkpoint"):
            known[r["checkpoint"]] = (r["i"], r["step"])
    big = 1 << 30
    return [(lab, known.get(lab, (big, None))[1])
            for lab in sorted(labels, key=lambda lab: (known.get(lab, (big, None))[0], _natural(lab)))]


def rescore_data(con: duckdb.DuckDBPyConnection, views: set[str], *, top_tokens: int = 12) -> RescoreData | None:
    """Spike rates per checkpoint and token movements, or ``None`` when ``trajlab rescore`` has not run."""
    if "rescore_trajectory_scores" not in views:
        return None
    per = {r["checkpoint"]: r for r in query_rows(con, """
        SELECT checkpoint, count(*) AS trajectories, sum(n_scored) AS scored_tokens,
               sum(n_intrusions) AS intrusions, sum(n_intrusion_positions) AS intrusion_positions,
               sum(n_dropouts) AS dropouts, sum(n_dropout_positions) AS dropout_positions,
               sum(mean_logprob * n_scored) / nullif(sum(n_scored) FILTER (WHERE mean_logprob IS NOT NULL), 0)
                   AS mean_logprob
        FROM rescore_trajectory_scores GROUP BY checkpoint""")}
    if not per:
        return None
    mal: dict[str, dict[str, Any]] = {}
    if "rescore_malformations" in views:
        mal = {r["checkpoint"]: r for r in query_rows(con, """
            SELECT checkpoint,
                   count(*) FILTER (WHERE malformed_prob IS NOT NULL AND repaired_prob IS NOT NULL) AS scored,
                   count(*) FILTER (WHERE malformed_prob > repaired_prob) AS preferred
            FROM rescore_malformations GROUP BY checkpoint""")}
    order = checkpoint_order(con, views, list(per))
    rows, intrusion, dropout = [], [], []
    for label, step in order:
        p = per[label]
        ir = p["intrusions"] / p["intrusion_positions"] if p["intrusion_positions"] else None
        dr = p["dropouts"] / p["dropout_positions"] if p["dropout_positions"] else None
        intrusion.append(ir)
        dropout.append(dr)
        m = mal.get(label, {})
        rows.append({
            "checkpoint": label,
            "step": step,
            "trajectories": int(p["trajectories"]),
            "scored_tokens": int(p["scored_tokens"] or 0),
            "intrusions": int(p["intrusions"] or 0),
            "intrusion_rate": ir,
            "dropouts": int(p["dropouts"] or 0),
            "dropout_rate": dr,
            "mean_logprob": p["mean_logprob"],
            "malformations_scored": int(m.get("scored") or 0),
            "malformed_preferred": int(m.get("preferred") or 0),
        })
    data = RescoreData([lab for lab, _ in order], intrusion, dropout, SPIKE_UNITS, rows, moved_units=MOVED_UNITS)
    if len(order) < 2:
        data.note = "One checkpoint only: rescore two or more to see which control tokens move."
    elif "rescore_compare" in views:
        first, last = order[0][0], order[-1][0]
        data.moved = query_rows(con, """
            WITH a AS (SELECT control_token, mean_prob FROM rescore_compare WHERE region = 'all' AND checkpoint = ?),
                 b AS (SELECT control_token, mean_prob FROM rescore_compare WHERE region = 'all' AND checkpoint = ?)
            SELECT a.control_token AS token, a.mean_prob AS first, b.mean_prob AS last, b.mean_prob - a.mean_prob AS delta
            FROM a JOIN b USING (control_token)
            ORDER BY abs(b.mean_prob - a.mean_prob) DESC, token LIMIT ?""", [first, last, top_tokens])
        data.moved = [m for m in data.moved if m["delta"] is not None]
    data.drift = drift_data(con, views, order)
    return data


def drift_data(con: duckdb.DuckDBPyConnection, views: set[str],
               order: list[tuple[str, int | None]]) -> DriftData | None:  # fmt: skip
    """The drift page's data, or ``None`` when the rescore drift tables are missing (an older rescore)."""
    if "rescore_calibration" not in views or "rescore_paired" not in views:
        return None
    cal = {r["checkpoint"]: r for r in query_rows(con, """
        SELECT checkpoint, any_value(reference) AS reference, any_value(quantile) AS quantile,
               sum(spikes) / nullif(sum(units), 0) AS rate
        FROM rescore_calibration GROUP BY checkpoint""")}
    if not cal:
        return None
    ref = next(iter(cal.values()))["reference"]
    q = float(next(iter(cal.values()))["quantile"])
    pd = {r["checkpoint"]: r for r in query_rows(con, """
        SELECT checkpoint, median, median_lo, median_hi, n FROM rescore_paired
        WHERE scope = 'malformation' AND name = 'all' AND measure = 'log odds'""")}
    cps = []
    for label, step in order:
        if label not in cal:
            continue
        p = pd.get(label, {})
        is_ref = label == ref
        cps.append({"checkpoint": label, "step": step, "is_reference": is_ref, "calibrated_rate": cal[label]["rate"],
                    "paired_drift": 0.0 if is_ref else p.get("median"),
                    "paired_lo": 0.0 if is_ref else p.get("median_lo"),
                    "paired_hi": 0.0 if is_ref else p.get("median_hi"), "paired_points": p.get("n")})  # fmt: skip
    dist: dict[str, list[dict[str, Any]]] = {}
    if "rescore_distribution" in views:
        for r in query_rows(con, """SELECT checkpoint, step, kind, bin, log10_lo, log10_hi, share, is_reference
                               FROM rescore_distribution ORDER BY kind, checkpoint_index, bin"""):
            dist.setdefault(r["kind"], []).append(r)
    log_odds: dict[str, list[float | None]] = {}
    if "rescore_malformations" in views:
        idx = {c["checkpoint"]: i for i, c in enumerate(cps)}
        for r in query_rows(con, """
                SELECT checkpoint, category, median(log_odds) AS lo FROM
                    (SELECT checkpoint, unnest(categories) AS category, log_odds FROM rescore_malformations
                     WHERE log_odds IS NOT NULL)
                GROUP BY ALL ORDER BY category"""):
            if r["checkpoint"] in idx:
                log_odds.setdefault(r["category"], [None] * len(cps))[idx[r["checkpoint"]]] = r["lo"]
    disc: list[dict[str, Any]] = []
    if "rescore_discovered" in views and len(cps) > 1:
        last = cps[-1]["checkpoint"]
        disc = query_rows(con, """
            SELECT checkpoint, "group", rank, token, token_id, is_control, reference_prob, prob, gained, ratio, score
            FROM rescore_discovered WHERE checkpoint = ? ORDER BY is_control, score DESC, token_id LIMIT 12""", [last])
    return DriftData(ref, q, cps, dist, log_odds, disc)
