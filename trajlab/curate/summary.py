"""What ``build-sft-pool`` made (:class:`PoolSummary`) and its rich summary table for the terminal."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from trajlab.curate.samples import KINDS


@dataclass
class PoolSummary:
    """Counts and files of one pool; ``as_dict()`` is what ``--json`` prints."""

    pool_dir: Path
    style: str
    ratio_requested: str
    ratio_achieved: str
    candidates: dict[str, int]
    selected: dict[str, int]
    train: dict[str, int]
    val: dict[str, int]
    train_rows: int
    val_rows: int
    files: dict[str, int]  # file name -> rows
    stats: dict[str, dict[str, int]] = field(default_factory=dict)  # per kind: why candidates were dropped
    shortfall: str | None = None
    ood_rows: int | None = None
    warnings: list[str] = field(default_factory=list)
    #: how the classifier rules of the pool compare with the scan's (:class:`trajlab.rules_match.RulesMatch`)
    rules_match: dict[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["pool_dir"] = str(self.pool_dir)
        return d


def summary_table(s: PoolSummary) -> Any:
    """A rich table: per kind, candidates / in the mix / train / val and the share requested vs achieved."""
    from rich.table import Table

    req = [float(x) for x in s.ratio_requested.split(":")]
    total_sel = sum(s.selected.values()) or 1
    t = Table(title=f"SFT pool → {s.pool_dir}", title_justify="left")
    for col in ("kind", "candidates", "in mix", "train", "val", "share wanted", "share got"):
        t.add_column(col, justify="left" if col == "kind" else "right")
    for k, r in zip(KINDS, req, strict=True):
        t.add_row(
            k,
            str(s.candidates.get(k, 0)),
            str(s.selected.get(k, 0)),
            str(s.train.get(k, 0)),
            str(s.val.get(k, 0)),
            f"{r / sum(req):.0%}",
            f"{s.selected.get(k, 0) / total_sel:.0%}",
        )
    t.add_row(
        "total",
        str(sum(s.candidates.values())),
        str(sum(s.selected.values())),
        str(sum(s.train.values())),
        str(sum(s.val.values())),
        s.ratio_requested,
        s.ratio_achieved,
        style="bold",
    )
    return t
