"""GRPO prompt groups you can trust: groups from ``--rollout-n`` (consecutive records) and the checks that say
when a scan's grouping is suspicious.

verl writes a prompt's ``rollout.n`` samples together, so with ``n`` known, records ``1..n`` of a file form one
group, ``n+1..2n`` the next, and so on (:func:`rollout_group_expr`). Without it, a dump with a ``uid`` groups by
the uid and a legacy dump by the prompt text -- which collapses when the text that told prompts apart was
stripped (an image placeholder decoded without its special tokens). :func:`grouping_warnings` reads the
``trajectories`` table and names what looks wrong: a step that is one group, identical inputs that mention an
image, group sizes that disagree across the run's steps, ``--rollout-n`` groups that mix different prompts.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import polars as pl

#: prefix of the groups that come from the prompt text (records without a uid)
TEXT_GROUP_PREFIX = "p:"
#: image/video placeholders as decoded by common vision chat templates, and an image label followed only by
#: blank lines (the placeholder's special tokens stripped when the dump was decoded); polars runs the pattern
#: (Rust regex syntax, which this pattern shares with Python's)
VISION_RESIDUE = re.compile(
    r"<image>|<video>|<\|image_pad\|>|<\|video_pad\|>|<\|vision_start\|>|<\|vision_end\|>|<img>|\[IMG\]|"
    r"<start_of_image>|<\|image\|>|(?i:\b(?:image|picture|photo|video)\b[^\n]{0,40}:[ \t]*\n[ \t]*\n)")
#: a step needs at least this many trajectories before "the whole step is one group" is said
MIN_STEP = 4


def rollout_group_expr(n: int) -> pl.Expr:
    """``group_id`` with ``--rollout-n n``: records without a uid (text groups) are grouped by position, ``n``
    consecutive records of a file per group (``rn<n>:<file>:<index>``); uid groups are kept."""
    import polars as pl

    pos = ((pl.col("source_line") - 1) // n).cast(pl.String)
    return (pl.when(pl.col("group_id").str.starts_with(TEXT_GROUP_PREFIX))
            .then(pl.lit(f"rn{n}:") + pl.col("source_path") + pl.lit(":") + pos)
            .otherwise(pl.col("group_id")).alias("group_id"))


def regroup_table(table: Any, n: int | None) -> Any:
    """A ``trajectories`` Arrow table with :func:`rollout_group_expr` applied (unchanged when ``n`` is None)."""
    if not n or table.num_rows == 0:
        return table
    import polars as pl

    df = pl.from_arrow(table)
    assert isinstance(df, pl.DataFrame)
    return df.with_columns(rollout_group_expr(n)).to_arrow().cast(table.schema)


def grouping_warnings(traj: pl.LazyFrame | pl.DataFrame, rollout_n: int | None = None) -> list[dict[str, Any]]:
    """What looks wrong with the prompt groups of a ``trajectories`` table (columns ``run``, ``split``, ``step``,
    ``group_id``, ``input``): one dict per finding, with ``kind``, ``run``, figures and a ``message``."""
    import polars as pl

    lf = traj.lazy() if isinstance(traj, pl.DataFrame) else traj
    # one row per group, holding no prompt text: its size, how many distinct inputs (by hash), and whether its
    # first input mentions an image whose placeholder is gone (streamed: a big scan's prompts are never all loaded)
    # (each row's hash and image test come first, so that no group holds a prompt: holding each group's first
    # input for the test was 330 MiB of a 1.5 GB scan's summary)
    groups = (lf.select("run", "split", "step", "group_id", pl.col("input").hash().alias("_hash"),
                        pl.col("input").fill_null("").str.contains(VISION_RESIDUE.pattern).alias("_vision"))
              .group_by("run", "split", "step", "group_id")
              .agg(pl.len().alias("size"), pl.col("_hash").n_unique().alias("inputs"),
                   pl.col("_vision").first().alias("vision"))
              .collect(engine="streaming"))
    out: list[dict[str, Any]] = []
    fix = "pass --rollout-n N (verl's actor_rollout_ref.rollout.n) so that N consecutive records form a group"
    for (run,), g in groups.sort("run", "split", "step", "group_id").group_by("run", maintain_order=True):
        text = g.filter(pl.col("group_id").str.starts_with(TEXT_GROUP_PREFIX))
        per_step = g.group_by("split", "step").agg(pl.len().alias("groups"), pl.col("size").sum().alias("n"))
        whole = per_step.join(text.group_by("split", "step").len("text_groups"), on=["split", "step"])
        whole = whole.filter((pl.col("groups") == 1) & (pl.col("n") >= MIN_STEP))
        if whole.height:
            sizes = sorted(set(whole["n"].to_list()))
            vision = bool(text["vision"].any())
            why = (" (the inputs mention an image whose placeholder was stripped, so different images read the same)"
                   if vision else "")
            out.append({
                "kind": "one_group_per_step", "run": run, "steps": whole.height,
                "trajectories_per_step": sizes,
                "message": f"run {run}: in {whole.height} step(s) every trajectory falls in one prompt group "
                           f"({', '.join(f'{x:,}' for x in sizes[:3])} trajectories): the records have no uid and "
                           f"their inputs are identical{why}; {fix}",
            })
        elif text.height:
            vis = text.filter((pl.col("size") > 1) & pl.col("vision"))
            if vis.height:
                out.append({
                    "kind": "identical_vision_inputs", "run": run, "groups": vis.height,
                    "message": f"run {run}: {vis.height:,} prompt groups come from inputs that mention an image "
                               f"whose placeholder was stripped; different images may share a group; {fix}",
                })
        for (split,), gs in g.group_by("split", maintain_order=True):  # (validation often samples n = 1)
            if gs.height < 2:
                continue
            mode = int(gs["size"].mode().sort()[-1])
            odd = gs.filter(pl.col("size") != mode)
            # (a step's last group may be short when a file was cut: only sizes that differ in steps count)
            if odd.height and odd["step"].n_unique() > 1:
                other = sorted(set(odd["size"].to_list()))
                out.append({
                    "kind": "group_sizes_differ", "run": run, "split": split, "usual_size": mode,
                    "odd_groups": odd.height, "odd_sizes": other[:10],
                    "message": f"run {run} ({split}): most prompt groups have {mode} trajectories, but "
                               f"{odd.height:,} have {', '.join(map(str, other[:5]))}{'…' if len(other) > 5 else ''} "
                               "(merged or split groups?); per-group statistics may be off",
                })
        if rollout_n:
            mixed = g.filter(pl.col("group_id").str.starts_with(f"rn{rollout_n}:") & (pl.col("inputs") > 1))
            if mixed.height:
                out.append({
                    "kind": "rollout_n_mixes_prompts", "run": run, "groups": mixed.height,
                    "message": f"run {run}: {mixed.height:,} groups of --rollout-n {rollout_n} consecutive records "
                               f"hold different prompts: is verl's rollout.n {rollout_n}?",
                })
    return out
