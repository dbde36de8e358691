"""Positive demonstrations: clean, finished, well-scored trajectories, deduplicated, capped per prompt group.

A trajectory is a candidate when it comes from a source split (``train`` dumps by default: validation prompts
of the RL run must not leak into SFT), has no ``error``/``warning`` finding anywhere, ends with a final
answer, is not truncated, and its score passes the score rule:

* ``group`` (default): ``score > 0`` and (above its group's median, or equal to the group's best score) —
  a GRPO group where every rollout scored 1.0 still gives positives;
* a number ``N``: ``score >= N``;  ``any``: the score is not checked.

Candidates are ranked inside their group by score (higher first), then by the rescore intrusion mass when a
rescore exists (calmer first), then by a seeded hash; duplicates (same whitespace-normalised conversation) are
dropped, trajectories longer than ``--max-tokens`` are skipped, and at most ``--per-group`` are kept per group.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import polars as pl

from trajlab.curate.conversation import attach_calls, build_conversation
from trajlab.curate.options import PoolOptions, ScoreRule
from trajlab.curate.samples import Gate, Sample, prompt_key, seeded_unit
from trajlab.curate.scan_tables import ScanTables

#: Trajectories whose text is loaded at once (bounds memory on large scans).
BATCH = 2000


def score_flags(light: pl.DataFrame, rule: ScoreRule) -> pl.DataFrame:
    """``light`` plus ``score_ok`` (passes the rule) and ``score_failed`` (scored, and fails it)."""
    score = pl.col("score")
    if rule.mode == "any":
        ok = pl.lit(True)
    elif rule.mode == "threshold":
        ok = score.is_not_null() & (score >= rule.threshold)
    else:
        med = score.median().over("group_id")
        best = score.max().over("group_id")
        ok = score.is_not_null() & (score > 0) & ((score > med) | (score == best))
    df = light.with_columns(ok.fill_null(False).alias("score_ok"))
    return df.with_columns((score.is_not_null() & ~pl.col("score_ok")).alias("score_failed"))


@dataclass
class PositiveResult:
    samples: list[Sample]
    by_group: dict[str, list[Sample]]  # kept positives per group, best first (hints reuse them)
    stats: dict[str, int] = field(default_factory=dict)  # why trajectories were not positives


def candidate_frame(tables: ScanTables, opts: PoolOptions) -> tuple[pl.DataFrame, dict[str, int]]:
    """Trajectories eligible as positives (ranked), and counts of why the others were not."""
    light = score_flags(tables.light.filter(pl.col("split").is_in(list(opts.source_splits))), opts.score_rule)
    bad_ids = tables.bad_findings.select("trajectory_id").unique()
    light = light.join(bad_ids.with_columns(pl.lit(True).alias("has_finding")), on="trajectory_id", how="left")
    light = light.with_columns(pl.col("has_finding").fill_null(False))
    stats = {
        "trajectories": light.height,
        "with_error_or_warning": int(light["has_finding"].sum() or 0),
        "no_final_answer": int((~light["has_final_answer"]).sum() or 0),
        "truncated": int(light["truncated"].sum() or 0),
        "score_rejected": int((~light["score_ok"]).sum() or 0),
        # rejected by the score rule alone: what relaxing --min-score would turn into positives
        "only_score_rejected": int(light.filter(
            ~pl.col("has_finding") & (pl.col("n_malformed_calls") == 0) & pl.col("has_final_answer")
            & ~pl.col("truncated") & ~pl.col("score_ok")).height),
    }
    elig = light.filter(
        ~pl.col("has_finding")
        & (pl.col("n_malformed_calls") == 0)
        & pl.col("has_final_answer")
        & ~pl.col("truncated")
        & pl.col("score_ok")
    )
    if tables.rescore_scores is not None:
        elig = elig.join(tables.rescore_scores, on="trajectory_id", how="left")
    else:
        elig = elig.with_columns(pl.lit(None, dtype=pl.Float64).alias("intrusion"))
    tiebreak = [seeded_unit(opts.seed, t) for t in elig["trajectory_id"].to_list()]
    elig = elig.with_columns(pl.Series("tiebreak", tiebreak, dtype=pl.Float64))
    elig = elig.sort(
        ["group_id", "score", "intrusion", "tiebreak"],
        descending=[False, True, False, False],
        nulls_last=True,
    )
    stats["eligible"] = elig.height
    return elig, stats


def _batches(groups: list[tuple[str, list[str]]], size: int) -> Iterator[list[tuple[str, list[str]]]]:
    batch: list[tuple[str, list[str]]] = []
    n = 0
    for g in groups:
        batch.append(g)
        n += len(g[1])
        if n >= size:
            yield batch
            batch, n = [], 0
    if batch:
        yield batch


def select_positives(
    tables: ScanTables,
    opts: PoolOptions,
    *,
    fits: Callable[[Sample], bool] | None = None,
    task: Callable[[str, int], Callable[[int], None]] | None = None,
) -> PositiveResult:
    """Build the positive samples (all kept candidates: the ``positive`` file) and the per-group lists.

    ``task(description, total)`` returns a progress callback (advanced by trajectories looked at).
    """
    elig, stats = candidate_frame(tables, opts)
    advance = task("positives", elig.height) if task is not None else None
    rows = {r["trajectory_id"]: r for r in elig.iter_rows(named=True)}
    groups: dict[str, list[str]] = {}
    for tid, gid in zip(elig["trajectory_id"].to_list(), elig["group_id"].to_list(), strict=True):
        groups.setdefault(gid, []).append(tid)
    gate = Gate(fits)
    by_group: dict[str, list[Sample]] = {}
    out: list[Sample] = []
    # only the first few per group are ever needed: read a margin for duplicates (all of them when a length
    # limit may skip many)
    look = None if fits is not None else opts.per_group * 4 + 4
    for batch in _batches(sorted(groups.items()), BATCH):
        ids = [t for _, tids in batch for t in tids[:look]]
        heavy = tables.heavy(ids)
        turns = tables.turns_of(ids)
        calls = tables.calls_of(ids) if opts.style == "openai" else {}
        for gid, tids in batch:
            kept: list[Sample] = []
            for tid in tids[:look]:
                if len(kept) >= opts.per_group:
                    break
                r, h = rows[tid], heavy.get(tid)
                if h is None:
                    continue
                tts = turns.get(tid, [])
                conv = build_conversation(h["input"], tts)
                if opts.style == "openai":
                    attach_calls(
                        conv.messages, {t[0]: t[3] for t in tts}, {t[0]: t[2] for t in tts}, calls.get(tid, [])
                    )
                s = Sample(
                    kind="positive",
                    trajectory_id=tid,
                    step=r["step"],
                    group_id=gid,
                    prompt_key=prompt_key(h["input"]),
                    tool_format=r["tool_format"],
                    enable_thinking=conv.enable_thinking,
                    messages=conv.messages,
                    score=r["score"],
                    rank=float(len(kept)),
                    tools_json=h["tools"],
                )
                if gate.admit(s):
                    kept.append(s)
            if kept:
                by_group[gid] = kept
                out.extend(kept)
        if advance is not None:
            advance(sum(len(t) for _, t in batch))
    stats["duplicates"] = gate.duplicates
    stats["too_long"] = gate.too_long
    stats["kept"] = len(out)
    stats["groups"] = len(by_group)
    return PositiveResult(out, by_group, stats)
