"""Tables written by ``trajlab rescore``: specs, per-rank part files, merge, resume and the compare table.

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
final merge always covers every trajectory scored so far. Merged tables are sorted by their key, so the bytes
do not depend on how the work was split across ranks or runs.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from trajlab.tables import BOOL, F64, I32, I64, STR, C, TableSpec, register, to_table, write_table

F32 = pa.float32()

TOKENS = register(
    TableSpec(
        "rescore_tokens",
        "rescore/<label>/tokens: one row per scored (assistant) token and checkpoint.",
        (
            C("checkpoint", STR, "checkpoint label", False),
            C("trajectory_id", STR, "trajectories.trajectory_id", False),
            C("turn_index", I32, "assistant turn the token belongs to", False),
            C("position", I64, "index of the token in the rebuilt token stream (prompt included)", False),
            C("token_id", I64, "logged token id", False),
            C("token", STR, "logged token, decoded", False),
            C("char_start", I64, "offset into trajectories.output (a re-inserted <|im_end|> has an empty range)", False),
            C("char_end", I64, "end offset (exclusive)", False),
            C("region", STR, "structural | function_name | param_name | param_value | text | think", False),
            C("logprob", F32, "log-probability of the logged token", False),
            C("entropy", F32, "entropy of the next-token distribution (nats)", False),
            C("top_token", STR, "most likely token, decoded", False),
            C("top_prob", F32, "its probability", False),
            C("control_mass", F32, "probability mass on the trajectory format's control-token set", False),
            C("top_control_token", STR, "most likely control token (null when the set is empty)"),
            C("top_control_prob", F32, "its probability", False),
        ),
        ("trajectory_id", "position"),
    )
)

SPIKES = register(
    TableSpec(
        "rescore_spikes",
        "rescore/<label>/spikes: intrusion and dropout spikes (definitions in rules/control_tokens.yaml).",
        (
            C("checkpoint", STR, "checkpoint label", False),
            C("trajectory_id", STR, "trajectories.trajectory_id", False),
            C("step", I64, "rollout step of the trajectory"),
            C("split", STR, ""),
            C("turn_index", I32, "turns.turn_index of the assistant turn", False),
            C("position", I64, "index in the rebuilt token stream", False),
            C("kind", STR, "intrusion (control mass >= tau at a content position) | dropout (logged control token <= 1-tau)", False),
            C("token_id", I64, "logged token id", False),
            C("token", STR, "logged token, decoded", False),
            C("char_start", I64, "offset into trajectories.output", False),
            C("char_end", I64, "end offset into trajectories.output (exclusive)", False),
            C("region", STR, "structural | function_name | param_name | param_value | text | think", False),
            C("value", F64, "the statistic compared with tau: control mass (intrusion) or logged-token probability (dropout)", False),
            C("control_token", STR, "top control token (intrusion) or the logged control token (dropout)"),
            C("control_prob", F64, "its probability", False),
            C("logprob", F64, "log-probability of the logged token", False),
            C("top_token", STR, "most likely token", False),
            C("top_prob", F64, "probability of the most likely token", False),
        ),
        ("trajectory_id", "position", "kind"),
    )
)

_REGION_COLS = tuple(
    C(f"mean_logprob_{r}", F64, f"mean logprob of tokens in {r} regions")
    for r in ("structural", "function_name", "param_name", "param_value", "text", "think")
)

TRAJECTORY_SCORES = register(
    TableSpec(
        "rescore_trajectory_scores",
        "rescore/<label>/trajectory_scores: one row per rescored trajectory and checkpoint.",
        (
            C("checkpoint", STR, "checkpoint label", False),
            C("trajectory_id", STR, "trajectories.trajectory_id", False),
            C("step", I64, ""),
            C("split", STR, ""),
            C("score", F64, "reward as dumped"),
            C("tool_format", STR, ""),
            C("n_tokens", I64, "tokens in the rebuilt stream (prompt included)", False),
            C("n_scored", I64, "assistant tokens scored", False),
            C("n_calls", I32, "tool calls in the trajectory (scan)", False),
            C("n_malformed_calls", I32, "malformed calls in the trajectory (scan)", False),
            C("roundtrip_ok", BOOL, "decoding the rebuilt stream gives back exactly input + output", False),
            C("stream_note", STR, "why the stream may differ from what the model saw"),
            C("mean_logprob", F64, "mean logprob over scored tokens"),
            C("mean_entropy", F64, ""),
            C("max_intrusion_mass", F64, "highest control mass at a content position"),
            C("min_structural_prob", F64, "lowest probability of a logged structural token"),
            C("n_intrusion_positions", I64, "content positions (eligible for intrusion)", False),
            C("n_intrusions", I64, "intrusion spikes", False),
            C("n_dropout_positions", I64, "logged control tokens (eligible for dropout)", False),
            C("n_dropouts", I64, "dropout spikes", False),
            *_REGION_COLS,
        ),
        ("trajectory_id",),
    )
)

MALFORMATIONS = register(
    TableSpec(
        "rescore_malformations",
        "rescore/<label>/malformations: where each malformed call departs from its repair (or, without one, "
        "where its first error starts), and the probability of the malformed vs the well-formed continuation.",
        (
            C("checkpoint", STR, "checkpoint label", False),
            C("call_id", STR, "calls.call_id", False),
            C("trajectory_id", STR, "trajectories.trajectory_id", False),
            C("turn_index", I32, "turns.turn_index of the assistant turn", False),
            C("step", I64, ""),
            C("split", STR, ""),
            C("categories", pa.list_(STR), "the call's categories", False),
            C("diff_offset", I64, "offset into output of the first char where raw and repaired differ (no repair: of the first error finding)", False),
            C("context", STR, "up to 40 chars of the call before that point", False),
            C("position", I64, "index in the token stream of the malformed token"),
            C("char_start", I64, "the malformed token's offsets into output"),
            C("char_end", I64, "end offset into trajectories.output (exclusive)"),
            C("malformed_token", STR, "logged token at the malformation"),
            C("malformed_token_id", I64, ""),
            C("malformed_prob", F64, "probability of the malformed continuation"),
            C("repaired_token", STR, "first token of the repaired text from the same char"),
            C("repaired_token_id", I64, ""),
            C("repaired_prob", F64, "probability of the well-formed continuation"),
            C("log_odds", F64, "log malformed_prob - log repaired_prob (> 0: the checkpoint prefers the malformation)"),
            C("top_token", STR, ""),
            C("top_prob", F64, "probability of the most likely token"),
            C("control_mass", F64, ""),
            C("note", STR, "why a value is missing, if one is"),
        ),
        ("trajectory_id", "turn_index", "call_id"),
    )
)

CONTROL_STATS = register(
    TableSpec(
        "rescore_control_stats",
        "rescore/<label>/control_stats: per control token and region, the probability the checkpoint gives it.",
        (
            C("checkpoint", STR, "checkpoint label", False),
            C("control_token", STR, "decoded control token", False),
            C("control_token_id", I64, "its id in the checkpoint's tokenizer", False),
            C("control_strings", pa.list_(STR), "rule strings that resolve to this token", False),
            C("region", STR, "region of the scored positions", False),
            C("n_positions", I64, "scored positions in the region whose format's control set has this token", False),
            C("sum_prob", F64, "sum of the token's probability over those positions", False),
            C("mean_prob", F64, "sum_prob / n_positions", False),
            C("max_prob", F64, "highest probability the token got at one of those positions", False),
            C("n_logged", I64, "positions where it is the logged token", False),
            C("sum_logged_prob", F64, "sum of its probability where it is logged", False),
            C("n_intrusions", I64, "intrusion spikes where it is the top control token", False),
            C("n_dropouts", I64, "dropout spikes where it is the logged token", False),
        ),
        ("control_token_id", "region"),
    )
)

COMPARE = register(
    TableSpec(
        "rescore_compare",
        "rescore/compare: per control token and region, how mean probability and spike rate moved from one "
        "checkpoint to the next (region 'all' sums every region).",
        (
            C("checkpoint", STR, "checkpoint label", False),
            C("checkpoint_index", I32, "order of the checkpoint in the run", False),
            C("step", I64, "global step of the checkpoint, when known"),
            C("previous_checkpoint", STR, "null for the first checkpoint"),
            C("control_token", STR, "decoded control token", False),
            C("region", STR, "region of the scored positions, or 'all'", False),
            C("n_positions", I64, "scored positions counted for this token and region", False),
            C("mean_prob", F64, "mean probability the checkpoint gives the token there", False),
            C("previous_mean_prob", F64, "the same for the previous checkpoint"),
            C("delta_mean_prob", F64, "mean_prob - previous_mean_prob"),
            C("ratio_mean_prob", F64, "mean_prob / previous_mean_prob"),
            C("spike_rate", F64, "(intrusions + dropouts attributed to the token) / n_positions", False),
            C("previous_spike_rate", F64, "the same for the previous checkpoint"),
            C("delta_spike_rate", F64, "spike_rate - previous_spike_rate"),
        ),
        ("control_token", "region", "checkpoint_index"),
    )
)

POSITIONS = register(
    TableSpec(
        "rescore_positions",
        "rescore/<label>/positions: per scored token, what the reference comparison needs (logged-token "
        "logprob, control-token probabilities at content positions); joined across checkpoints on "
        "(trajectory_id, position).",
        (
            C("checkpoint", STR, "checkpoint label", False),
            C("trajectory_id", STR, "trajectories.trajectory_id", False),
            C("position", I64, "index of the token in the rebuilt token stream", False),
            C("region", STR, "structural | function_name | param_name | param_value | text | think", False),
            C("token_id", I64, "logged token id", False),
            C("logprob", F32, "log-probability of the logged token", False),
            C("is_control", BOOL, "the logged token is a control token of the trajectory's format", False),
            C("control_mass", F32, "probability mass on the format's control-token set", False),
            C("control_probs", pa.list_(F32), "at intrusion-eligible positions: probability of each control token "
              "(manifest.json control_tokens order; NaN for tokens outside the format's set); else null"),
        ),
        ("trajectory_id", "position"),
    )
)

MASS_GROUPS: tuple[str, ...] = ("structural", "content")

TOKEN_MASS = register(
    TableSpec(
        "rescore_token_mass",
        "rescore/<label>/token_mass: per vocabulary token, its next-token probability summed over the "
        "structural and content positions (tokens whose sum is below 1e-6 in a block are left out).",
        (
            C("checkpoint", STR, "checkpoint label", False),
            C("group", STR, "structural (region structural) | content (the intrusion regions)", False),
            C("token_id", I64, "vocabulary id", False),
            C("mass", F64, "sum over the group's positions of the token's probability", False),
            C("logged_mass", F64, "the part of mass from positions where the token is the logged one", False),
        ),
        ("group", "token_id"),
    )
)

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
    if pdir.exists():
        shutil.rmtree(pdir)


def complete_parts(pdir: Path) -> list[str]:
    d = pdir / "trajectory_scores"
    return sorted(p.name for p in d.glob("*.parquet") if _PART_RE.match(p.name)) if d.exists() else []


def _options_path(out: Path, label: str) -> Path:
    return parts_dir(out, label) / "options.json"


def write_resume_options(out: Path, label: str, opts: dict[str, Any]) -> None:
    """Record the options the parts of ``label`` are scored with (checked by ``--resume``)."""
    from trajlab.tables import atomic_write_json

    atomic_write_json(_options_path(out, label), opts, fsync=False)


def check_resume_options(out: Path, label: str, opts: dict[str, Any]) -> None:
    """``--resume`` only continues a run scored with the same options: the earlier run's options (its parts'
    ``options.json``, else its finished ``manifest.json``) must equal ``opts``; else a one-line error."""
    import json

    from trajlab.errors import TrajlabError, param

    prev: dict[str, Any] | None = None
    for src in (_options_path(out, label), label_dir(out, label) / "manifest.json"):
        try:
            raw = json.loads(src.read_text())
        except (OSError, ValueError):
            continue
        if src.name == "manifest.json":
            raw = {"checkpoint": raw.get("checkpoint", {}).get("path"), "tokenizer": raw.get("tokenizer"),
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
    if (ldir / "trajectory_scores.parquet").exists():
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


def _concat(spec: TableSpec, files: Iterable[Path]) -> pa.Table:
    tables = [to_table(spec, pq.read_table(p)) for p in files]
    return pa.concat_tables(tables) if tables else spec.schema.empty_table()


def merge_parts(out: Path, label: str, *, keep_parts: bool = False) -> list[str]:
    """Merge every complete part of a checkpoint into its final tables (control_stats sums are re-added).

    Returns the names of the merged parts (``r<rank>-<seq>``; ``r999`` is an earlier run kept by ``--resume``).
    """
    pdir = parts_dir(out, label)
    ldir = label_dir(out, label)
    done = complete_parts(pdir)
    for key, spec in PER_CHECKPOINT:
        files = [pdir / key / n for n in done if (pdir / key / n).exists()]
        table = _concat(spec, files)
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


# ------------------------------------------------------------------ against the reference (trajlab.rescore.drift)
CALIBRATION = register(
    TableSpec(
        "rescore_calibration",
        "rescore/calibration: reference-calibrated spikes per checkpoint, kind, control token and region; the "
        "threshold is a quantile of the reference checkpoint's own distribution.",
        (
            C("checkpoint", STR, "checkpoint label", False),
            C("checkpoint_index", I32, "order of the checkpoint in the run", False),
            C("step", I64, "global step of the checkpoint, when known"),
            C("reference", STR, "label of the reference checkpoint", False),
            C("kind", STR, "intrusion (P(token) at content positions above the reference's q-quantile) | "
              "dropout (P(logged control token) below the reference's (1-q)-quantile)", False),
            C("control_token", STR, "decoded control token", False),
            C("region", STR, "region of the positions", False),
            C("quantile", F64, "--calibration-quantile q", False),
            C("threshold", F64, "the reference's quantile (intrusion: q, dropout: 1-q)", False),
            C("reference_units", I64, "reference positions the threshold comes from", False),
            C("units", I64, "this checkpoint's positions in the cell", False),
            C("spikes", I64, "positions beyond the threshold", False),
            C("rate", F64, "spikes / units", False),
        ),
        ("checkpoint_index", "kind", "control_token", "region"),
    )
)

PAIRED = register(
    TableSpec(
        "rescore_paired",
        "rescore/paired: position-by-position change against the reference (same trajectories, same positions), "
        "with percentile bootstrap intervals over trajectories.",
        (
            C("checkpoint", STR, "checkpoint label", False),
            C("checkpoint_index", I32, "order of the checkpoint in the run", False),
            C("step", I64, "global step of the checkpoint, when known"),
            C("reference", STR, "label of the reference checkpoint", False),
            C("scope", STR, "drift (toward spikes, all eligible positions) | region | intrusion (a control token "
              "at content positions) | dropout (a logged control token) | malformation (a category)", False),
            C("name", STR, "region, control token or malformation category ('all' for drift)", False),
            C("measure", STR, "the paired quantity, e.g. 'log P(logged)', 'log P(token)', 'log P(malformed)', "
              "'log P(repaired)', 'log odds', 'P toward spikes' (+ control mass at content positions, - P(logged "
              "control token))", False),
            C("n", I64, "paired positions (or malformation points)", False),
            C("trajectories", I64, "trajectories they come from (the bootstrap resamples these)", False),
            C("median", F64, "median delta (checkpoint - reference): nats, or probability for 'P toward spikes'", False),
            C("median_lo", F64, "2.5% bootstrap bound of the median"),
            C("median_hi", F64, "97.5% bootstrap bound of the median"),
            C("mean", F64, "mean delta, same units", False),
            C("mean_lo", F64, "2.5% bootstrap bound of the mean"),
            C("mean_hi", F64, "97.5% bootstrap bound of the mean"),
            C("share_up", F64, "share of positions where the quantity went up", False),
        ),
        ("checkpoint_index", "scope", "name", "measure"),
    )
)

DISCOVERED = register(
    TableSpec(
        "rescore_discovered",
        "rescore/discovered: tokens (any, not only the configured control tokens) whose probability at positions "
        "where they were not the logged token grew most between the reference and each checkpoint (top 20 per "
        "group).",
        (
            C("checkpoint", STR, "checkpoint label", False),
            C("checkpoint_index", I32, "order of the checkpoint in the run", False),
            C("step", I64, "global step of the checkpoint, when known"),
            C("reference", STR, "label of the reference checkpoint", False),
            C("group", STR, "structural | content positions", False),
            C("rank", I32, "1 = highest score", False),
            C("token_id", I64, "vocabulary id", False),
            C("token", STR, "decoded token", False),
            C("is_control", BOOL, "already a configured control token", False),
            C("n_positions", I64, "positions in the group", False),
            C("reference_prob", F64, "reference's mean probability of the token where it is not logged", False),
            C("prob", F64, "this checkpoint's mean probability there", False),
            C("gained", F64, "prob - reference_prob: mass gained per position", False),
            C("ratio", F64, "prob / reference_prob"),
            C("score", F64, "gained x ln((prob + 1e-6) / (reference_prob + 1e-6)): mass gained, weighted by how new "
              "it is (the token's term of a KL divergence)", False),
        ),
        ("checkpoint_index", "group", "rank"),
    )
)

DISTRIBUTION = register(
    TableSpec(
        "rescore_distribution",
        "rescore/distribution: per checkpoint, a histogram of control-token probability (log10 bins): control "
        "mass at content positions (intrusion) and the logged control token's probability (dropout).",
        (
            C("checkpoint", STR, "checkpoint label", False),
            C("checkpoint_index", I32, "order of the checkpoint in the run", False),
            C("step", I64, "global step of the checkpoint, when known"),
            C("is_reference", BOOL, "this checkpoint is the reference", False),
            C("kind", STR, "intrusion | dropout", False),
            C("bin", I32, "bin index", False),
            C("log10_lo", F64, "lower edge, log10 probability (the first bin also holds everything below)", False),
            C("log10_hi", F64, "upper edge", False),
            C("count", I64, "positions in the bin", False),
            C("share", F64, "count / positions of the kind", False),
        ),
        ("checkpoint_index", "kind", "bin"),
    )
)


_DRIFT_KEYS = ("calibrated_spike_rate", "calibrated_spikes", "calibrated_units", "calibrated_intrusion_rate",
               "calibrated_dropout_rate", "paired_drift", "paired_drift_lo", "paired_drift_hi", "paired_points")


def write_drift_json(out: Path, reference: str | None, quantile: float, checkpoints: Sequence[Any]) -> Path:
    """``OUT/rescore/drift.json``: the reference and each checkpoint's calibrated and paired headline."""
    from trajlab.tables import atomic_write_json

    p = Path(out) / "rescore" / "drift.json"
    atomic_write_json(p, {"reference": reference, "calibration_quantile": quantile,
                          "checkpoints": {c.label: {k: getattr(c, k) for k in _DRIFT_KEYS} for c in checkpoints}})
    return p


def read_drift_json(out: Path, summary: Any) -> None:
    """Fill ``summary`` (a :class:`~trajlab.rescore.RescoreSummary`) from ``drift.json`` (ranks other than 0)."""
    import json

    d = json.loads((Path(out) / "rescore" / "drift.json").read_text(encoding="utf-8"))
    summary.reference = d["reference"]
    for c in summary.checkpoints:
        for k, v in d["checkpoints"].get(c.label, {}).items():
            setattr(c, k, v)
