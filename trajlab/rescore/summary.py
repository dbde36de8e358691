"""What a rescore found: :class:`RescoreSummary` and one :class:`CheckpointSummary` per checkpoint,
with :func:`fill_from_tables` (a checkpoint's totals read back from its merged tables).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa


@dataclass
class CheckpointSummary:
    """What one checkpoint's rescore found (rank 0 sees the totals over every rank)."""

    label: str
    path: str
    kind: str
    step: int | None
    out_dir: str
    trajectories: int = 0
    skipped_resume: int = 0
    tokens: int = 0
    scored_tokens: int = 0
    roundtrip_mismatches: int = 0
    intrusion_positions: int = 0
    intrusions: int = 0
    dropout_positions: int = 0
    dropouts: int = 0
    spike_rate: float = 0.0  # absolute τ: (intrusions + dropouts) / eligible positions
    calibrated_spike_rate: float = 0.0  # against the reference's own distribution (the --fail-above statistic)
    calibrated_spikes: int = 0
    calibrated_units: int = 0
    calibrated_intrusion_rate: float | None = None
    calibrated_dropout_rate: float | None = None
    paired_drift: float | None = None  # median Δ log odds P(malformed)/P(repaired) vs the reference
    paired_drift_lo: float | None = None
    paired_drift_hi: float | None = None
    paired_points: int = 0
    mean_logprob: float | None = None
    #: exact-token sources: scored tokens with a logged log-prob, and mean |this checkpoint's - logged| over them
    logged_tokens: int = 0
    logged_logprob_gap: float | None = None
    malformations: int = 0
    mean_malformed_prob: float | None = None
    mean_repaired_prob: float | None = None
    malformed_preferred: int = 0  # malformations where P(malformed) > P(repaired)
    log_odds_by_category: dict[str, float] = field(default_factory=dict)  # median log P(malformed)/P(repaired)
    seconds: float = 0.0
    tokens_per_s: float = 0.0
    control_family: str = ""
    skipped_control_strings: list[str] = field(default_factory=list)


@dataclass
class RescoreSummary:
    """Result of :func:`rescore`."""

    out: str
    trajectories_selected: int
    checkpoints: list[CheckpointSummary]
    compare_path: str | None
    fail_above: float | None = None
    rank: int = 0
    world_size: int = 1
    top_moves: list[dict[str, Any]] = field(default_factory=list)  # paired moves vs the reference, biggest first
    reference: str | None = None
    calibration_quantile: float = 0.999
    discovered: list[dict[str, Any]] = field(default_factory=list)
    malformation_drift: list[dict[str, Any]] = field(default_factory=list)
    #: how the classifier rules of this rescore compare with the scan's (:class:`trajlab.rules_match.RulesMatch`)
    rules_match: dict[str, Any] | None = None
    #: one line each, shown with the summary (e.g. the rules differ from the scan's)
    warnings: list[str] = field(default_factory=list)

    @property
    def exceeded(self) -> bool:
        """True when ``fail_above`` is set and a checkpoint's calibrated spike rate is above it."""
        return self.fail_above is not None and any(
            c.calibrated_spike_rate > self.fail_above for c in self.checkpoints
        )

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["exceeded"] = self.exceeded
        return d



def fill_from_tables(s: CheckpointSummary, ldir: Path) -> None:
    """Totals over every rank and resumed part, read back from the merged tables."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    ts = pq.read_table(ldir / "trajectory_scores.parquet")
    s.trajectories = ts.num_rows
    if ts.num_rows:
        col = lambda n: ts.column(n)  # noqa: E731
        s.tokens = int(pc.sum(col("n_tokens")).as_py() or 0)
        s.scored_tokens = int(pc.sum(col("n_scored")).as_py() or 0)
        s.roundtrip_mismatches = int(pc.sum(pc.invert(col("roundtrip_ok")).cast(pa.int64())).as_py() or 0)
        s.intrusion_positions = int(pc.sum(col("n_intrusion_positions")).as_py() or 0)
        s.intrusions = int(pc.sum(col("n_intrusions")).as_py() or 0)
        s.dropout_positions = int(pc.sum(col("n_dropout_positions")).as_py() or 0)
        s.dropouts = int(pc.sum(col("n_dropouts")).as_py() or 0)
        elig = s.intrusion_positions + s.dropout_positions
        s.spike_rate = (s.intrusions + s.dropouts) / elig if elig else 0.0
        w = pc.multiply(pc.fill_null(col("mean_logprob"), 0.0), col("n_scored").cast(pa.float64()))
        s.mean_logprob = float(pc.sum(w).as_py()) / s.scored_tokens if s.scored_tokens else None
    mal = pq.read_table(ldir / "malformations.parquet")
    both = mal.filter(pc.and_(pc.is_valid(mal.column("malformed_prob")), pc.is_valid(mal.column("repaired_prob"))))
    s.malformations = both.num_rows
    if both.num_rows:
        mp = both.column("malformed_prob")
        rp = both.column("repaired_prob")
        s.mean_malformed_prob = float(pc.mean(mp).as_py())
        s.mean_repaired_prob = float(pc.mean(rp).as_py())
        s.malformed_preferred = int(pc.sum(pc.greater(mp, rp).cast(pa.int64())).as_py() or 0)
        import polars as pl

        frame = pl.from_arrow(both.select(["categories", "log_odds"]))
        assert isinstance(frame, pl.DataFrame)  # a table gives a frame (a bare array would give a Series)
        df = frame.explode("categories")
        med = df.group_by("categories").agg(pl.col("log_odds").median()).sort("categories")
        s.log_odds_by_category = {r["categories"]: float(r["log_odds"]) for r in med.to_dicts() if r["categories"]}
