"""The reward plugin's keys read back from a scan of verl dumps: task vs. format reward per step.

verl writes the keys ``compute_score`` returns into legacy training dumps and validation dumps (V1 training dumps
carry none); ``scan`` keeps every key it does not map in ``trajectories.extra`` (JSON). :func:`reward_steps`
averages the plugin's keys per (run, split, step) over the trajectories that carry them; the report plots them.

The reward's record files (:mod:`trajlab.verl.records`, ``reward_kwargs record_dir``) are read back here too:
:func:`assign_record_runs` gives each file the run of the scanned dumps beside it, and
:func:`record_step_columns` the exact-token ``steps`` columns per (run, step) that scan fills for verl runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

#: the keys that mark a record as scored by the plugin (all of them must be present)
MARKER_KEYS = ("task_score", "format_reward", "malformed_calls")
#: the keys averaged per step (``score`` is the dump's own column, ``trajectories.score``; the rest come from
#: ``trajectories.extra``)
MEAN_KEYS = ("score", "task_score", "format_reward", "tool_calls", "malformed_calls", "verl_dropped_calls")


def reward_steps(out: Path | str, *, run: str | None = None, split: str | None = None) -> list[dict[str, Any]]:
    """Per (run, split, step), sorted: ``trajectories`` (that carry the plugin's keys) and the mean of each of
    :data:`MEAN_KEYS`. Empty when no trajectory carries them."""
    import polars as pl

    from trajlab.tables import table_path  # pyarrow: only where a scan is read, never in the plugin's imports

    path = table_path(out, "trajectories")
    if not Path(path).is_file():
        return []
    lf = pl.scan_parquet(path).select("run", "split", "step", "score", "extra")
    if run is not None:
        lf = lf.filter(pl.col("run") == run)
    if split is not None:
        lf = lf.filter(pl.col("split") == split)
    lf = lf.filter(pl.col("extra").is_not_null() & pl.col("step").is_not_null())
    cols = [pl.col("extra").str.json_path_match(f"$.{k}").cast(pl.Float64, strict=False).alias(k)
            for k in MEAN_KEYS if k != "score"]
    df = lf.with_columns(pl.col("score").cast(pl.Float64), *cols).filter(pl.all_horizontal(pl.col(k).is_not_null() for k in MARKER_KEYS))
    from trajlab.exactsum import finish_mean, mean_exprs

    keys = ["run", "split", "step"]
    agg = (df.group_by(keys)  # exact means: the same figures whatever the row order (streamed: extra is big)
           .agg(pl.len().cast(pl.Int64).alias("trajectories"), *[e for k in MEAN_KEYS for e in mean_exprs(k, f"_{k}_")])
           .sort(keys).collect(engine="streaming"))
    rows = agg.to_dicts()
    for r in rows:
        for k in MEAN_KEYS:
            r[k] = finish_mean(r, f"_{k}_", lambda k=k, r=r: df.filter(
                (pl.col("run") == r["run"]) & (pl.col("split") == r["split"]) & (pl.col("step") == r["step"]))
                .select(k).collect().to_series().to_list())
    return [{**{c: r[c] for c in (*keys, "trajectories")}, **{k: r[k] for k in MEAN_KEYS}} for r in rows]


def plugin_summary(out: Path | str) -> dict[str, Any] | None:
    """What a scan says about the plugin's keys: ``{"trajectories", "steps", "splits", "mean_task_score",
    "mean_format_reward"}`` over the trajectories that carry them, or None when none does."""
    rows = reward_steps(out)
    n = sum(r["trajectories"] for r in rows)
    if not n:
        return None

    def mean(key: str) -> float:
        return sum(r[key] * r["trajectories"] for r in rows) / n

    return {"trajectories": n, "steps": len({(r["run"], r["split"], r["step"]) for r in rows}),
            "splits": sorted({r["split"] for r in rows}), "mean_task_score": mean("task_score"),
            "mean_format_reward": mean("format_reward")}


#: the ``steps`` columns :func:`record_step_columns` fills from the reward's record files
RECORD_STEP_COLUMNS = ("generated_tokens", "control_logprob_mean", "control_low_prob_share")


def record_step_columns(files_by_run: dict[str, list[Path]]) -> dict[tuple[str, int], dict[str, Any]]:
    """Per (run, step): the exact-token ``steps`` columns (:data:`RECORD_STEP_COLUMNS`) from the verl reward's
    record files of each run (:mod:`trajlab.verl.records`; training samples with exact tokens only). The
    low-probability share is the reward's (its ``control_prob``)."""
    from trajlab.verl.records import is_training_record, read_records, step_figures

    out: dict[tuple[str, int], dict[str, Any]] = {}
    for run, files in files_by_run.items():
        rows = []
        for d in sorted({f.parent for f in files}):
            rows += [r for r in read_records(d) if is_training_record(r)]
        for fig in step_figures(rows):
            if fig["step"] is None or not fig["exact_samples"]:
                continue
            out[(run, int(fig["step"]))] = {
                "generated_tokens": int(fig["generated_tokens"]),
                "control_logprob_mean": fig["control_logprob_mean"],
                "control_low_prob_share": fig["control_low_prob_share"]}
    return out


def assign_record_runs(record_files: list[Path], inputs: list[tuple[Path, str]]) -> dict[str, list[Path]]:
    """Each record file's run: the run of the scanned input files that share its deepest directory (``inputs``:
    (path, run) pairs; a record file no input shares a directory with is left out)."""
    import os

    out: dict[str, list[Path]] = {}
    if not inputs:
        return out
    dirs = [(os.path.realpath(p.parent), run) for p, run in inputs]
    for f in record_files:
        fd = os.path.realpath(f.parent)
        best: tuple[int, str] | None = None
        for d, run in dirs:
            common = os.path.commonpath([fd, d])
            depth = len(Path(common).parts) if common else 0
            if best is None or depth > best[0] or (depth == best[0] and run < best[1]):
                best = (depth, run)
        if best is not None and best[0] > 1:
            out.setdefault(best[1], []).append(f)
    return out
