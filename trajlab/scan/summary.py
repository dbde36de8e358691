"""What a scan reports: :class:`ScanSummary` (printed by the CLI, ``--json``) and ``manifest.json``.

Both are computed from the merged tables, so a re-scan that reuses every part reports the same figures.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from trajlab import __version__
from trajlab.ingest import display_name
from trajlab.rulepacks import rules_hash
from trajlab.scan.parts import PART_TABLES
from trajlab.scan.plan import FileEntry
from trajlab.tables import METRICS, SCHEMA_VERSION, STEPS, table_path
from trajlab.trends import first_warning, recent_rate, run_summaries, run_warnings


@dataclass
class ScanSummary:
    """What a scan found; printed by the CLI and stored under ``summary`` in ``manifest.json``."""

    out: str
    files: int = 0
    files_reused: int = 0
    bytes: int = 0
    trajectories: int = 0
    calls: int = 0
    malformed_calls: int = 0
    malformed_rate: float | None = None
    trajectories_with_malformed: int = 0
    final_answer_rate: float | None = None
    schema_checked_rate: float | None = None
    top_categories: list[tuple[str, int]] = field(default_factory=list)
    ingest_errors: int = 0
    ingest_error_examples: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # what discovery left out on purpose, with why
    steps: list[dict[str, Any]] = field(default_factory=list)  # per-step (run, split, step, calls, malformed, rate)
    early_warning: dict[str, Any] | None = None  # the earliest warning of any run (with its "run")
    runs: list[dict[str, Any]] = field(default_factory=list)  # one summary per run (trajlab.trends.run_summaries)
    #: trajectories whose prompt (or --tools, or the record) declares tools or a call format: where tool calls
    #: are expected at all (0 with 0 calls: a tool-less run, whose call checks and early warning do not apply)
    trajectories_with_tools: int = 0
    #: trajectories that make calls with no tool schema known (what ``--tools FILE`` would let the schema checks read)
    unchecked_with_calls: int = 0
    truncated: int = 0  # trajectories whose output stops inside a structure (trajectories.truncated)
    #: why outputs are truncated or have no final answer: end_reason → trajectories (trajlab.ending.END_REASONS)
    end_reasons: dict[str, int] = field(default_factory=dict)
    #: suspicious GRPO grouping (trajlab.groups.grouping_warnings): one dict per finding, with its words in "message"
    grouping: list[dict[str, Any]] = field(default_factory=list)
    #: per file: which engine read it and why the columnar engine did not (``file``, ``engine``, ``fallback``)
    engines: list[dict[str, Any]] = field(default_factory=list)
    #: trajectories whose prompt declares tools in a form no call format reads (format none, no schema read)
    unread_tool_declarations: int = 0
    elapsed_s: float = 0.0
    #: the verl reward plugin's keys found in the dumps (:func:`trajlab.verl.readback.plugin_summary`), or None
    reward_plugin: dict[str, Any] | None = None
    #: the trainer's metrics logs read (trajlab.metrics.load.scan_metrics: logs, runs, problems)
    metrics: dict[str, Any] = field(default_factory=dict)
    #: per run: when the reward (or --lead-metric) broke down and how far ahead the warning was
    lead_times: list[dict[str, Any]] = field(default_factory=list)
    #: event files written with --tensorboard
    tensorboard: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """Plain data (``--json``, ``manifest.json``). With one run, the per-step rows do not repeat its name,
        so the output is what it was before runs, plus the ``runs`` list."""
        d = asdict(self)
        d["top_categories"] = [{"category": c, "calls": n} for c, n in self.top_categories]
        if len(self.runs) <= 1:
            d["steps"] = [{k: v for k, v in row.items() if k != "run"} for row in d["steps"]]
        return d

    def recent_rate(self, window: int, split: str = "train", run: str | None = None) -> float | None:
        """Malformed-call rate pooled over the last ``window`` steps of ``split`` of ``run`` (falls back to any
        split; ``run=None`` with one run: that run)."""
        if run is None and len(self.runs) == 1:
            run = self.runs[0]["run"]
        return recent_rate(self.steps, window, run=run, split=split)


def summarise(out: Path, keep: list[FileEntry], steps: pa.Table, elapsed: float, *,
              rollout_n: int | None = None) -> ScanSummary:
    """The summary of the tables in ``out`` (``keep``: the files merged into them)."""
    import polars as pl

    s = ScanSummary(out=str(out))
    s.files = len(keep)
    s.files_reused = sum(1 for e in keep if e.reused)
    s.bytes = sum(e.size for e in keep)
    traj = pl.scan_parquet(table_path(out, "trajectories")).select(
        pl.len().alias("n"),
        pl.col("n_calls").sum().alias("calls"),
        pl.col("n_malformed_calls").sum().alias("bad"),
        (pl.col("n_malformed_calls") > 0).sum().alias("twm"),
        pl.col("has_final_answer").mean().alias("far"),
        pl.col("schema_checked").mean().alias("sc"),
        (pl.col("schema_checked") | (pl.col("tool_format").fill_null("none") != "none")).sum().alias("wt"),
        pl.col("truncated").sum().alias("tr"),
        ((pl.col("n_calls") > 0) & ~pl.col("schema_checked")).sum().alias("uc"),
    ).collect().row(0, named=True)
    s.unchecked_with_calls = int(traj["uc"] or 0)
    s.trajectories_with_tools = int(traj["wt"] or 0)
    s.truncated = int(traj["tr"] or 0)
    reasons = (pl.scan_parquet(table_path(out, "trajectories")).drop_nulls("end_reason").group_by("end_reason").len()
               .sort(["len", "end_reason"], descending=[True, False]).collect())
    s.end_reasons = {str(r): int(n) for r, n in reasons.iter_rows()}
    s.trajectories = int(traj["n"])
    s.calls = int(traj["calls"] or 0)
    s.malformed_calls = int(traj["bad"] or 0)
    s.trajectories_with_malformed = int(traj["twm"] or 0)
    s.malformed_rate = s.malformed_calls / s.calls if s.calls else None
    s.final_answer_rate = traj["far"]
    s.schema_checked_rate = traj["sc"]
    s.unread_tool_declarations = unread_tool_declarations(out)
    cats = (
        pl.scan_parquet(table_path(out, "calls"))
        .filter(pl.col("status") == "malformed")
        .select(pl.col("categories").alias("category"))
        .explode("category")
        .drop_nulls()
        .group_by("category")
        .len()
        .sort(["len", "category"], descending=[True, False])
        .collect()
    )
    s.top_categories = [(r[0], int(r[1])) for r in cats.iter_rows()]
    errs_lf = pl.scan_parquet(table_path(out, "ingest_errors"))
    s.ingest_errors = int(errs_lf.select(pl.len()).collect().item())
    s.ingest_error_examples = [
        f"{r['source_path']}:{r['line'] if r['line'] is not None else '-'}: {r['reason']}"
        for r in errs_lf.head(5).collect().iter_rows(named=True)
    ]
    s.steps = [
        {
            "run": r["run"],
            "split": r["split"],
            "step": r["step"],
            "trajectories": r["trajectories"],
            "calls": r["calls"],
            "malformed_calls": r["malformed_calls"],
            "malformed_rate": r["malformed_rate"],
            "mean_score": r["mean_score"],
            "final_answer_rate": r["final_answer_rate"],
        }
        for r in steps.select([c for c in steps.column_names if c != "category_counts"]).to_pylist()
    ]
    warnings = run_warnings(steps)
    s.early_warning = first_warning(warnings)
    s.runs = run_summaries(steps, warnings)
    from trajlab.groups import grouping_warnings

    s.grouping = grouping_warnings(pl.scan_parquet(table_path(out, "trajectories")).select(
        "run", "split", "step", "group_id", "input"), rollout_n)
    s.engines = [{"file": e.rel, **file_engine(e.stats)} for e in keep]
    from trajlab.verl.readback import plugin_summary

    s.reward_plugin = plugin_summary(out)
    s.elapsed_s = round(elapsed, 3)
    return s


def unread_tool_declarations(out: Path) -> int:
    """How many trajectories in ``out`` declare tools in their prompt in a form trajlab does not read: no call
    format detected, no schema read, and the prompt matches
    :data:`~trajlab.ingest.tool_schemas.DECLARES_TOOLS_PATTERN`."""
    import polars as pl

    from trajlab.ingest.tool_schemas import DECLARES_TOOLS_PATTERN

    return int(
        pl.scan_parquet(table_path(out, "trajectories"))
        .filter((pl.col("tool_format") == "none") & ~pl.col("schema_checked")
                & pl.col("input").str.contains(DECLARES_TOOLS_PATTERN))
        .select(pl.len())
        .collect(engine="streaming")  # the prompts of a big scan are never all loaded
        .item()
    )


def file_engine(stats: list[dict[str, Any]]) -> dict[str, Any]:
    """Which engine read a file (``mixed`` when its ranges differ) and why the columnar engine did not read it
    (the distinct reasons of its ranges, or None), from its ranges' stats."""
    engines = sorted({str(s.get("engine")) for s in stats})
    reasons = list(dict.fromkeys(s["fallback"] for s in stats if s.get("fallback")))
    return {"engine": engines[0] if len(engines) == 1 else "mixed", "fallback": "; ".join(reasons) or None}


def manifest(entries: list[FileEntry], summary: ScanSummary, *, options: dict[str, Any],
             rules_dirs: tuple[str, ...], merge_key: str, table_rows: dict[str, int] | None = None) -> dict[str, Any]:
    """The content of ``manifest.json``: versions, options, every input file, the tables and the summary."""
    return {
        "trajlab_version": __version__,
        "schema_version": SCHEMA_VERSION,
        "rules_hash": rules_hash(rules_dirs),
        "options": options,
        "inputs": [
            {
                "path": display_name(str(e.path)),
                "rel": e.rel,
                "run": e.run,
                "format": e.fmt,
                "size": e.size,
                "mtime_ns": e.path.stat().st_mtime_ns,
                "sha1": e.sha,
                "records": sum(s["rows"]["trajectories"] for s in e.stats),
                "reused": e.reused,
                **file_engine(e.stats),
            }
            for e in entries
        ],
        "tables": {s.name: f"{s.name}.parquet" for s in (*PART_TABLES, STEPS, METRICS)},
        "merge_key": merge_key,
        **({"table_rows": table_rows} if table_rows is not None else {}),
        "summary": {k: v for k, v in summary.to_dict().items() if k not in ("steps", "elapsed_s", "files_reused", "engines")},
    }
