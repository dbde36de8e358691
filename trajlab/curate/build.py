"""``build_sft_pool``: scan tables in, the interleaved-SFT pool (three kinds, mixed and split) out."""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl

from trajlab.curate.card import command_line, sha256_file, write_card, write_manifest
from trajlab.curate.error_demos import build_error_demos
from trajlab.curate.hints import build_hints, load_hint_rules
from trajlab.curate.lengths import TokenCounter
from trajlab.curate.mix import achieved_ratio, mix, split_prompts
from trajlab.curate.ood import OodSource, build_ood_rows
from trajlab.curate.options import PoolOptions
from trajlab.curate.samples import KINDS, Sample
from trajlab.curate.scan_tables import ScanTables, open_scan, parse_tools, restrict_runs, split_at_step
from trajlab.curate.select_positive import score_flags, select_positives
from trajlab.curate.specs import OOD_SPEC
from trajlab.curate.summary import PoolSummary
from trajlab.curate.writers import write_samples
from trajlab.errors import TrajlabError, param
from trajlab.outpaths import check_out_dir, prepare_out_dir
from trajlab.rules_match import check_scan_rules
from trajlab.tables import write_table

#: Every file name the pool writes (stale ones from an earlier run with other options are removed).
POOL_FILES = ("positive", "error_demo", "hint", "train", "val", "ood_eval")
FILE_WHAT = {
    "positive": "every positive candidate (after dedupe and the per-group cap)",
    "error_demo": "every error-demonstration candidate",
    "hint": "every hint candidate",
    "train": "the mix, training prompts",
    "val": "the mix, validation prompts (no prompt shared with train)",
    "ood_eval": "format-OOD evaluation prompts (held-back prompts, renamed tools / other format)",
}


class _Progress:
    """Thin wrapper over a rich progress bar on stderr; a no-op when disabled."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self._p: Any = None

    @contextlib.contextmanager
    def run(self) -> Iterator[_Progress]:
        if not self.enabled:
            yield self
            return
        from trajlab.progress import (
            BarColumn,
            MofNCompleteColumn,
            TextColumn,
            TimeElapsedColumn,
            progress_bar,
        )

        with progress_bar(
            TextColumn("{task.description:<22}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn()
        ) as p:
            self._p = p
            yield self
        self._p = None

    def task(self, description: str, total: int) -> Any:
        if self._p is None:
            return lambda n=1: None
        tid = self._p.add_task(description, total=max(total, 1))

        def advance(n: int = 1) -> None:
            self._p.advance(tid, n)

        return advance


def _zero_ratio(ratio: tuple[float, float, float], *kinds: str) -> str | None:
    """``ratio`` with ``kinds`` set to 0, as a ``--ratio`` value; None when nothing would be left to build."""
    parts = list(ratio)
    for kind in kinds:
        parts[KINDS.index(kind)] = 0
    return ":".join(f"{v:g}" for v in parts) if any(parts) else None


def _no_candidates(kind: str, stats: dict[str, int], opts: PoolOptions) -> TrajlabError:
    """The error for a kind the ratio asks for that has no candidates; its hint names only changes that can
    help with the counts at hand (each one runs as written)."""
    splits = ", ".join(opts.source_splits)
    fixes: list[str] = []
    if kind == "positive":
        why = (
            f"no positive candidates among {stats.get('trajectories', 0)} trajectories of split(s) {splits}: "
            f"{stats.get('with_error_or_warning', 0)} have an error/warning finding, "
            f"{stats.get('no_final_answer', 0)} have no final answer, {stats.get('truncated', 0)} are truncated, "
            f"{stats.get('score_rejected', 0)} fail the score rule ({opts.score_rule.describe()})"
        )
        if stats.get("too_long"):
            why += f", {stats['too_long']} are longer than {param('max_tokens')}"
            fixes.append(f"raise {param('max_tokens')}")
        if stats.get("only_score_rejected") and opts.score_rule.mode != "any":
            fixes.append(f"relax the score rule ({param('min_score', 'any')})")
        alt = _zero_ratio(opts.ratio_parts, "positive", "hint")  # hints pair a failure with a positive: none either
        if alt:
            fixes.append(f"build without positives and hints ({param('ratio', alt)})")
    elif kind == "error_demo":
        why = (
            f"no error-demonstration candidates: the scan has {stats.get('malformed_calls', 0)} malformed calls in "
            f"split(s) {splits}; {stats.get('no_repair', 0)} have no confident repair (calls.repaired is null), "
            f"{stats.get('earlier_turn_malformed', 0)} follow an earlier malformed turn, "
            f"{stats.get('repair_rejected', 0)} have a repair that does not re-parse cleanly"
        )
        if stats.get("too_long"):
            why += f", {stats['too_long']} are longer than {param('max_tokens')}"
            fixes.append(f"raise {param('max_tokens')}")
        alt = _zero_ratio(opts.ratio_parts, "error_demo")
        if alt:
            fixes.append(f"build without error demonstrations ({param('ratio', alt)})")
        fixes.append("scan a run that has repairable malformed calls")
    else:
        why = (
            f"no hint candidates: {stats.get('groups_with_failures', 0)} prompt groups have malformed or low-scoring "
            f"rollouts, and {stats.get('groups_with_failures_and_positive', 0)} of them also have a positive"
        )
        if stats.get("too_long"):
            why += f" ({stats['too_long']} hint samples were longer than {param('max_tokens')})"
            fixes.append(f"raise {param('max_tokens')}")
        alt = _zero_ratio(opts.ratio_parts, "hint")
        if alt:
            fixes.append(f"build without hints ({param('ratio', alt)})")
        if stats.get("groups_with_failures") and opts.score_rule.mode != "any":
            fixes.append(f"relax the score rule ({param('min_score', 'any')}) so failing groups have positives")
    return TrajlabError(why, hint="; or ".join(fixes) if fixes else None)


def _ood_sources(
    tables: ScanTables, samples: list[Sample], val_keys: set[str]
) -> list[OodSource]:
    """One source per validation prompt, preferring a clean (positive/hint) trajectory for the reference."""
    pick: dict[str, Sample] = {}
    for s in sorted(samples, key=lambda s: (s.kind == "error_demo", s.rank, s.sample_id)):
        if s.prompt_key in val_keys and s.prompt_key not in pick:
            pick[s.prompt_key] = s
    if not pick:
        return []
    ids = sorted({s.trajectory_id for s in pick.values()})
    heavy = tables.heavy(ids)
    turns = tables.turns_of(ids)
    calls = tables.calls_of(ids)
    out: list[OodSource] = []
    for key, s in sorted(pick.items()):
        h = heavy.get(s.trajectory_id)
        if h is None:
            continue
        tools = parse_tools(h["tools"])
        src = OodSource(
            trajectory_id=s.trajectory_id,
            group_id=s.group_id,
            prompt_key=key,
            step=s.step,
            input=h["input"] or "",
            tool_format=s.tool_format or "none",
            tools=[dict(t) for t in tools] if tools else [],
        )
        if s.kind != "error_demo":
            first = next((t for t in turns.get(s.trajectory_id, []) if t[1] == "assistant"), None)
            if first is not None:
                src.first_turn = first[2]
                src.first_turn_calls = [
                    {**c, "start": int(c["char_start"]) - first[3], "end": int(c["char_end"]) - first[3]}
                    for c in calls.get(s.trajectory_id, [])
                    if int(c["turn_index"]) == first[0]
                ]
        out.append(src)
    return out


def _grouping(tables: Any, opts: PoolOptions) -> list[dict[str, Any]]:
    """What looks wrong with the prompt groups the pool was cut from (:func:`trajlab.groups.grouping_warnings`)."""
    from trajlab.groups import grouping_warnings

    lf = tables.lazy("trajectories")
    run = pl.col("run") if "run" in lf.collect_schema().names() else pl.lit("")
    traj = lf.select("trajectory_id", run.alias("run"), "split", "step", "input").join(
        tables.light.lazy().select("trajectory_id", "group_id"), on="trajectory_id")
    return grouping_warnings(traj, opts.rollout_n)


def build_sft_pool(
    scan_dir: str | Path,
    out: str | Path | None = None,
    options: PoolOptions | None = None,
    *,
    progress: bool = True,
) -> PoolSummary:
    """Build the interleaved-SFT pool from the tables of a scan.

    Args:
        scan_dir: output directory of ``trajlab scan``.
        out: pool directory (default ``scan_dir/sft_pool``).
        options: what to build (:class:`~trajlab.curate.options.PoolOptions`: ratio, score rule, limits, style,
            OOD set, seed, rule packs, source splits, runs; default: all defaults).
        progress: show progress bars on stderr.

    Returns:
        A :class:`PoolSummary`. Raises :class:`TrajlabError` for a missing/incomplete scan, a kind requested by
        the ratio that has no candidates (the message says why and what to change); bad options already raise
        when the :class:`PoolOptions` is made.

    Example::

        build_sft_pool("out", "out/pool", PoolOptions(ratio="5:3:2", val_fraction=0.1), progress=False)
    """
    opts = options if options is not None else PoolOptions()
    scan_dir = Path(scan_dir)
    pool = Path(out) if out is not None else scan_dir / "sft_pool"
    tables = open_scan(scan_dir)
    check_out_dir(pool, kind="sft_pool")  # refuse a user's directory before the work, write nothing yet
    restrict_runs(tables, opts.runs)
    if opts.rollout_n:  # the groups of records without a uid: runs of N consecutive records of a file
        from trajlab.groups import rollout_group_expr

        pos_cols = tables.lazy("trajectories").select("trajectory_id", "source_path", "source_line").collect()
        tables.light = (tables.light.drop("group_id").join(
            pos_cols.join(tables.light.select("trajectory_id", "group_id"), on="trajectory_id")
            .with_columns(rollout_group_expr(opts.rollout_n)).select("trajectory_id", "group_id"),
            on="trajectory_id", how="left", maintain_order="left").select(tables.light.columns))
    present = sorted(set(tables.light["split"].to_list()))
    if not tables.light.filter(pl.col("split").is_in(list(opts.source_splits))).height:
        raise TrajlabError(
            f"{scan_dir}: no trajectories from split(s) {', '.join(opts.source_splits)} "
            f"(the scan has: {', '.join(present) or 'no trajectories at all'})",
            hint=(f"choose the dumps to learn from with {param('source_splits')} (this scan has: "
                  f"{param('source_splits', present[0])})"
                  if present else "scan dumps that hold trajectories first"),
        )
    rules = load_hint_rules(opts.rules_dirs)
    counter = None
    if opts.tokenizer:
        from trajlab.rescore.tokenizers import load_tokenizer

        counter = TokenCounter(load_tokenizer(opts.tokenizer), opts.max_tokens)
    fits = counter.fits if counter is not None and opts.max_tokens is not None else None
    warnings: list[str] = []
    match = check_scan_rules(scan_dir, opts.rules_dirs)  # repair targets are re-classified: say when rules differ
    rules_warning = match.warning("build-sft-pool") if match is not None else None
    if rules_warning:
        warnings.append(rules_warning)

    prog = _Progress(progress)
    with prog.run():
        before, after = split_at_step(tables, opts.split_step)
        pos = select_positives(before, opts, fits=fits, task=prog.task)
        err = build_error_demos(after, opts, rules, fits=fits, task=prog.task)
        scored = score_flags(after.light.filter(pl.col("split").is_in(list(opts.source_splits))), opts.score_rule)
        targets = pos if after is before else select_positives(after, opts, fits=fits)  # a hint's model answer
        hin = build_hints(after, opts, rules, targets.by_group, scored, fits=fits)
        by_kind = {"positive": pos.samples, "error_demo": err.samples, "hint": hin.samples}
        stats = {"positive": pos.stats, "error_demo": err.stats, "hint": hin.stats}
        for k, r in zip(KINDS, opts.ratio_parts, strict=True):
            if r > 0 and not by_kind[k]:
                raise _no_candidates(k, stats[k], opts)
        if counter is not None:  # lengths for every candidate (the file columns), not only the filtered ones
            for ss in by_kind.values():
                for s in ss:
                    counter.count(s)

        every = [s for ss in by_kind.values() for s in ss]
        if opts.rollout_n:  # identical text (a stripped image) is no prompt identity: the rollout groups are
            for s in every:
                if s.group_id.startswith(f"rn{opts.rollout_n}:"):
                    s.prompt_key = s.group_id
        val_keys = split_prompts((s.prompt_key for s in every), opts.val_fraction, opts.seed)
        for s in every:
            s.split = "val" if s.prompt_key in val_keys else "train"
        if opts.val_fraction > 0 and not val_keys:
            warnings.append("only one prompt among the candidates: nothing could be held out for validation")

        chosen, taken = mix(by_kind, opts.ratio_parts, opts.max_samples, opts.seed)
        avail = {k: len(by_kind[k]) for k in KINDS}
        shortfall = None
        wanted_total = opts.max_samples
        if wanted_total is not None:
            short = [k for k, r in zip(KINDS, opts.ratio_parts, strict=True) if r > 0 and taken[k] >= avail[k]
                     and taken[k] < round(wanted_total * r / sum(opts.ratio_parts))]
            if short:
                shortfall = (
                    f"{', '.join(short)} had fewer candidates than their share of --max-samples {wanted_total} "
                    f"(ratio {opts.ratio_text}); the achieved mix is {achieved_ratio(taken, opts.ratio_parts)} "
                    f"with {sum(taken.values())} samples"
                )
        else:
            limiting = [k for k, r in zip(KINDS, opts.ratio_parts, strict=True) if r > 0 and taken[k] >= avail[k]]
            unused = {k: avail[k] - taken[k] for k in KINDS if avail[k] > taken[k]}
            if limiting and unused:
                shortfall = (
                    f"{', '.join(limiting)} limited the pool to {sum(taken.values())} samples at ratio "
                    f"{opts.ratio_text}; left out: "
                    + ", ".join(f"{n} {k}" for k, n in unused.items())
                    + " (use --max-samples to keep more and accept a different mix)"
                )
        if shortfall:
            warnings.append(shortfall)

        train = [s for s in chosen if s.split == "train"]
        val = [s for s in chosen if s.split == "val"]

        write = prog.task("writing", len(POOL_FILES))
        prepare_out_dir(pool, kind="sft_pool")
        files: dict[str, int] = {}
        for name, ss in (("positive", pos.samples), ("error_demo", err.samples), ("hint", hin.samples),
                         ("train", train), ("val", val)):
            files[f"{name}.parquet"] = write_samples(ss, opts.style, pool / f"{name}.parquet")
            write()
        ood_info = None
        if opts.ood_eval:
            rows, ood_stats = build_ood_rows(_ood_sources(tables, every, val_keys), rules, opts.seed, opts.ood_prompts,
                                           opts.ood_format)
            write_table(OOD_SPEC, rows, pool / "ood_eval.parquet")
            files["ood_eval.parquet"] = len(rows)
            ood_info = {"rows": len(rows), **ood_stats}
            if not rows:
                warnings.append(
                    "--ood-eval: no OOD prompt could be built (validation prompts need a tools block in the system "
                    f"prompt and a known format): {ood_stats}"
                )
        else:
            (pool / "ood_eval.parquet").unlink(missing_ok=True)
        write()

    def kind_counts(ss: list[Sample]) -> dict[str, int]:
        c = Counter(s.kind for s in ss)
        return {k: c.get(k, 0) for k in KINDS}

    cats: dict[str, dict[str, int]] = {}
    for s in chosen:
        if s.kind == "positive":
            continue
        for c in s.categories:
            cats.setdefault(c, {}).setdefault(s.kind, 0)
            cats[c][s.kind] += 1
    info: dict[str, Any] = {
        "scan_dir": str(scan_dir),
        "command": command_line(str(scan_dir), str(pool), opts),
        "options": {
            "ratio": opts.ratio_text,
            "min_score": opts.score_rule.mode if opts.score_rule.mode != "threshold" else opts.score_rule.threshold,
            "per_group": opts.per_group,
            "tokenizer": opts.tokenizer,
            "max_tokens": opts.max_tokens,
            "val_fraction": opts.val_fraction,
            "max_samples": opts.max_samples,
            "style": opts.style,
            "ood_eval": opts.ood_eval,
            "ood_prompts": opts.ood_prompts,
            "seed": opts.seed,
            "rules_dirs": list(opts.rules_dirs),
            "source_splits": list(opts.source_splits),
            "runs": list(opts.runs),
            "split_step": opts.split_step,
        },
        "score_rule": opts.score_rule.describe(),
        "feedback_role": rules.feedback_role,
        "ratio": {"requested": opts.ratio_text, "achieved": achieved_ratio(taken, opts.ratio_parts)},
        "grouping": _grouping(tables, opts),
        "shortfall": shortfall,
        "kinds": {
            k: {
                "candidates": avail[k],
                "selected": taken[k],
                "train": kind_counts(train)[k],
                "val": kind_counts(val)[k],
                "steps": sorted({s.step for s in chosen if s.kind == k and s.step is not None}),
                "dropped": stats[k],
            }
            for k in KINDS
        },
        "categories": cats,
        "split": {
            "train_prompts": len({s.prompt_key for s in every} - val_keys),
            "val_prompts": len(val_keys),
        },
        "rescore": tables.rescore_label,
        "scan_manifest": {k: tables.manifest.get(k) for k in ("trajlab_version", "schema_version", "rules_hash")
                          if k in tables.manifest},
        "ood": ood_info,
        "files": [
            {"path": name, "rows": n, "what": FILE_WHAT[name.removesuffix(".parquet")],
             "sha256": sha256_file(pool / name)}
            for name, n in files.items()
        ],
        "warnings": warnings,
    }
    for name in POOL_FILES:  # stale files of an earlier run with other options
        if f"{name}.parquet" not in files:
            (pool / f"{name}.parquet").unlink(missing_ok=True)
    write_card(pool, info)
    write_manifest(pool, info)
    return PoolSummary(
        pool_dir=pool,
        style=opts.style,
        ratio_requested=opts.ratio_text,
        ratio_achieved=achieved_ratio(taken, opts.ratio_parts),
        candidates=avail,
        selected=dict(taken),
        train=kind_counts(train),
        val=kind_counts(val),
        train_rows=files["train.parquet"],
        val_rows=files["val.parquet"],
        files=files,
        stats=stats,
        shortfall=shortfall,
        ood_rows=ood_info["rows"] if ood_info else None,
        warnings=warnings,
        rules_match=match.as_dict() if match is not None else None,
    )
