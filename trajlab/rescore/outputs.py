"""Where and how ``trajlab rescore`` writes its tables: per-rank part files, merge, resume, the compare table and
``drift.json`` (the tables' specs: :mod:`trajlab.rescore.specs`).

Layout under the scan directory ``OUT``::

    OUT/rescore/<checkpoint label>/
        tokens.parquet  spikes.parquet  trajectory_scores.parquet  malformations.parquet
        control_stats.parquet  positions.parquet  token_mass.parquet  manifest.json
        parts/<table>/r<rank>-<seq>.parquet      (while running; removed after the merge)
    OUT/rescore/compare.parquet
    OUT/rescore/{calibration,paired,discovered,distribution}.parquet   (trajlab.rescore.drift)
    OUT/rescore/drift.json   (the reference and each checkpoint's calibrated and paired headline)

Each rank writes one part per block of trajectories, ``trajectory_scores`` last: a part whose
``trajectory_scores`` file exists is complete, anything else is a leftover of an interrupted run and is deleted
on ``--resume``. Resume also folds the merged tables of an earlier complete run back into the parts, so the
final merge always covers every trajectory scored so far -- but only when no complete part is left: merged
tables beside complete parts were either made from those very parts (a run killed between the merge and the
removal of its parts) or belong to an older run that a fresh run is replacing, and folding them would count
rows twice. The parts are removed ``trajectory_scores`` first, so a removal cut short leaves no part that looks
complete. A fresh (non-resume) run drops the checkpoint's earlier merged tables before it starts. Merged tables
are sorted by their key, so the bytes do not depend on how the work was split across ranks or runs, and a
resumed run ends byte for byte where a clean run does.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from trajlab.rescore.specs import (
    COMPARE,
    CONTROL_STATS,
    MALFORMATIONS,
    POSITIONS,
    SPIKES,
    TOKEN_MASS,
    TOKENS,
    TRAJECTORY_SCORES,
)
from trajlab.tables import TableSpec, read_parts, to_table, write_table

MASS_GROUPS: tuple[str, ...] = ("structural", "content")


PER_CHECKPOINT: tuple[tuple[str, TableSpec], ...] = (
    ("tokens", TOKENS),
    ("spikes", SPIKES),
    ("malformations", MALFORMATIONS),
    ("control_stats", CONTROL_STATS),
    ("positions", POSITIONS),
    ("token_mass", TOKEN_MASS),
    ("trajectory_scores", TRAJECTORY_SCORES),  # last: marks a part complete
)
_PART_RE = re.compile(r"^r(\d+)-(\d+)\.parquet$")


def label_dir(out: Path, label: str) -> Path:
    return Path(out) / "rescore" / label


def parts_dir(out: Path, label: str) -> Path:
    return label_dir(out, label) / "parts"


def write_part(pdir: Path, rank: int, seq: int, tables: dict[str, pa.Table | Sequence[dict[str, Any]]]) -> None:
    """Write one part (every per-checkpoint table), ``trajectory_scores`` last."""
    name = f"r{rank:03d}-{seq:06d}.parquet"
    for key, spec in PER_CHECKPOINT:
        t = tables.get(key)
        write_table(spec, t if t is not None else [], pdir / key / name, sort=False)


def clear_parts(pdir: Path) -> None:
    """Remove the parts directory, ``trajectory_scores`` first (a removal cut short leaves no complete part)."""
    if pdir.exists():
        marks = pdir / "trajectory_scores"
        if marks.exists():
            shutil.rmtree(marks)
        shutil.rmtree(pdir)


def clear_merged(out: Path, label: str) -> None:
    """Remove a checkpoint's merged tables and manifest (a fresh run is replacing them; ``trajectory_scores``
    first, so a removal cut short leaves nothing that ``--resume`` would fold back in)."""
    ldir = label_dir(out, label)
    for key, _spec in reversed(PER_CHECKPOINT):
        (ldir / f"{key}.parquet").unlink(missing_ok=True)
    (ldir / "manifest.json").unlink(missing_ok=True)


def complete_parts(pdir: Path) -> list[str]:
    d = pdir / "trajectory_scores"
    return sorted(p.name for p in d.glob("*.parquet") if _PART_RE.match(p.name)) if d.exists() else []


def _options_path(out: Path, label: str) -> Path:
    return parts_dir(out, label) / "options.json"


def write_resume_options(out: Path, label: str, opts: dict[str, Any]) -> None:
    """Record the options the parts of ``label`` are scored with (checked by ``--resume``)."""
    from trajlab.atomic import atomic_write_json

    atomic_write_json(_options_path(out, label), opts, fsync=False)


def check_resume_options(out: Path, label: str, opts: dict[str, Any]) -> None:
    """``--resume`` only continues a run scored with the same options: the earlier run's options (its parts'
    ``options.json``, else its finished ``manifest.json``) must equal ``opts``; else a one-line error."""
    import json

    from trajlab.errors import TrajlabError, param

    prev: dict[str, Any] | None = None
    from trajlab.outpaths import read_json_object

    for src in (_options_path(out, label), label_dir(out, label) / "manifest.json"):
        raw, _ = read_json_object(src)
        if not raw:  # missing or damaged: the next source, else nothing to compare with
            continue
        if src.name == "manifest.json":
            ck = raw.get("checkpoint")
            raw = {"checkpoint": ck.get("path") if isinstance(ck, dict) else None, "tokenizer": raw.get("tokenizer"),
                   "dtype": raw.get("dtype"), "tokens_mode": raw.get("tokens_mode"),
                   "thresholds": raw.get("thresholds")}
        prev = raw
        break
    if prev is None:
        return
    changed = sorted(k for k in opts if prev.get(k) != json.loads(json.dumps(opts[k])))
    if changed:
        raise TrajlabError(
            f"{param('resume')}: checkpoint {label} was scored with other {', '.join(changed)} than now; its results "
            "cannot be continued with these options", hint=f"run without {param('resume')} to score it again from the start")


def prepare_resume(out: Path, label: str) -> set[str]:
    """Drop incomplete parts, fold an earlier merged result into the parts, return the ids already scored."""
    ldir = label_dir(out, label)
    pdir = parts_dir(out, label)
    if complete_parts(pdir):
        # merged tables beside complete parts: made from them (killed before the parts were removed), or an
        # older run's that a fresh run replaces; the parts are what this run continues, never both
        clear_merged(out, label)
    elif (ldir / "trajectory_scores.parquet").exists():
        # a finished earlier run: its merged tables become part r999-000000 (kept by the next merge)
        for key, _spec in PER_CHECKPOINT:
            src = ldir / f"{key}.parquet"
            if src.exists():
                dst = pdir / key / "r999-000000.parquet"
                dst.parent.mkdir(parents=True, exist_ok=True)
                src.replace(dst)
    done = set(complete_parts(pdir))
    for key, _spec in PER_CHECKPOINT:
        d = pdir / key
        if d.exists():
            for p in d.iterdir():
                if p.name not in done:
                    p.unlink()
    return done_ids(out, label)


def done_ids(out: Path, label: str) -> set[str]:
    """Trajectory ids in the complete parts of a checkpoint (read-only; see :func:`prepare_resume`)."""
    pdir = parts_dir(out, label)
    ids: set[str] = set()
    for name in complete_parts(pdir):
        t = pq.read_table(pdir / "trajectory_scores" / name, columns=["trajectory_id"])
        ids.update(t.column(0).to_pylist())
    return ids


def next_seq(pdir: Path, rank: int) -> int:
    seqs = [int(m.group(2)) for n in complete_parts(pdir) if (m := _PART_RE.match(n)) and int(m.group(1)) == rank]
    return max(seqs, default=-1) + 1


def merge_parts(out: Path, label: str, *, keep_parts: bool = False) -> list[str]:
    """Merge every complete part of a checkpoint into its final tables (control_stats sums are re-added).

    Returns the names of the merged parts (``r<rank>-<seq>``; ``r999`` is an earlier run kept by ``--resume``).
    """
    pdir = parts_dir(out, label)
    ldir = label_dir(out, label)
    done = complete_parts(pdir)
    for key, spec in PER_CHECKPOINT:
        files = [pdir / key / n for n in done if (pdir / key / n).exists()]
        table = read_parts(spec, files)
        if key == "control_stats":
            table = _sum_control_stats(table)
        elif key == "token_mass":
            table = _sum_token_mass(table)
        write_table(spec, table, ldir / f"{key}.parquet")
    if not keep_parts:
        clear_parts(pdir)
    return [n.removesuffix(".parquet") for n in done]


def _sum_control_stats(t: pa.Table) -> pa.Table:
    if t.num_rows == 0:
        return t
    import polars as pl

    df = pl.from_arrow(t)
    agg = (
        df.group_by(["checkpoint", "control_token", "control_token_id", "region"])
        .agg(
            pl.col("control_strings").first(),
            pl.col("n_positions").sum(),
            pl.col("sum_prob").sum(),
            pl.col("max_prob").max(),
            pl.col("n_logged").sum(),
            pl.col("sum_logged_prob").sum(),
            pl.col("n_intrusions").sum(),
            pl.col("n_dropouts").sum(),
        )
        .with_columns((pl.col("sum_prob") / pl.col("n_positions")).alias("mean_prob"))
    )
    return to_table(CONTROL_STATS, agg.to_arrow())


def _sum_token_mass(t: pa.Table) -> pa.Table:
    if t.num_rows == 0:
        return t
    import polars as pl

    agg = pl.from_arrow(t).group_by(["checkpoint", "group", "token_id"]).agg(pl.col("mass").sum(),
                                                                             pl.col("logged_mass").sum())
    return to_table(TOKEN_MASS, agg.to_arrow())


def build_compare(out: Path, checkpoints: Sequence[tuple[str, int | None]]) -> pa.Table:
    """The compare table over checkpoints in run order, from each one's merged ``control_stats``."""
    import polars as pl

    frames = []
    for idx, (label, step) in enumerate(checkpoints):
        p = label_dir(out, label) / "control_stats.parquet"
        if not p.exists():
            continue
        df = pl.from_arrow(pq.read_table(p))
        if df.height == 0:
            continue
        per_region = df.select(
            "control_token", "region", "n_positions", "sum_prob", n_spikes=pl.col("n_intrusions") + pl.col("n_dropouts")
        )
        # region "all": n_positions summed over regions once per token, sums over regions
        all_rows = per_region.group_by("control_token").agg(
            pl.lit("all").alias("region"),
            pl.col("n_positions").sum(),
            pl.col("sum_prob").sum(),
            pl.col("n_spikes").sum(),
        )
        per_region = per_region.group_by(["control_token", "region"]).agg(
            pl.col("n_positions").max(), pl.col("sum_prob").sum(), pl.col("n_spikes").sum()
        )
        both = pl.concat([per_region, all_rows.select(per_region.columns)])
        both = both.with_columns(
            checkpoint=pl.lit(label),
            checkpoint_index=pl.lit(idx, dtype=pl.Int32),
            step=pl.lit(step, dtype=pl.Int64),
            mean_prob=pl.col("sum_prob") / pl.col("n_positions"),
            spike_rate=pl.col("n_spikes") / pl.col("n_positions"),
        )
        frames.append(both)
    if not frames:
        return COMPARE.schema.empty_table()
    df = pl.concat(frames).sort(["control_token", "region", "checkpoint_index"])
    key = ["control_token", "region"]
    df = df.with_columns(
        previous_checkpoint=pl.col("checkpoint").shift(1).over(key),
        previous_mean_prob=pl.col("mean_prob").shift(1).over(key),
        previous_spike_rate=pl.col("spike_rate").shift(1).over(key),
    ).with_columns(
        delta_mean_prob=pl.col("mean_prob") - pl.col("previous_mean_prob"),
        ratio_mean_prob=pl.when(pl.col("previous_mean_prob") > 0)
        .then(pl.col("mean_prob") / pl.col("previous_mean_prob"))
        .otherwise(None),
        delta_spike_rate=pl.col("spike_rate") - pl.col("previous_spike_rate"),
    )
    return to_table(COMPARE, df.to_arrow())


def write_compare(out: Path, checkpoints: Sequence[tuple[str, int | None]]) -> Path:
    return write_table(COMPARE, build_compare(out, checkpoints), Path(out) / "rescore" / "compare.parquet")



_DRIFT_KEYS = ("calibrated_spike_rate", "calibrated_spikes", "calibrated_units", "calibrated_intrusion_rate",
               "calibrated_dropout_rate", "paired_drift", "paired_drift_lo", "paired_drift_hi", "paired_points")


def write_drift_json(out: Path, reference: str | None, quantile: float, checkpoints: Sequence[Any]) -> Path:
    """``OUT/rescore/drift.json``: the reference and each checkpoint's calibrated and paired headline."""
    from trajlab.atomic import atomic_write_json

    p = Path(out) / "rescore" / "drift.json"
    from trajlab.ownfiles import marked_json

    atomic_write_json(p, marked_json("rescore drift", {
        "reference": reference, "calibration_quantile": quantile,
        "checkpoints": {c.label: {k: getattr(c, k) for k in _DRIFT_KEYS} for c in checkpoints}}))
    return p


def read_drift_json(out: Path, summary: Any) -> None:
    """Fill ``summary`` (a :class:`~trajlab.rescore.RescoreSummary`) from ``drift.json`` (ranks other than 0)."""
    import json

    d = json.loads((Path(out) / "rescore" / "drift.json").read_text(encoding="utf-8"))
    summary.reference = d["reference"]
    for c in summary.checkpoints:
        for k, v in d["checkpoints"].get(c.label, {}).items():
            setattr(c, k, v)
