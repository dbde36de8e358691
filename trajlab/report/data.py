"""What the report shows, read from a trajlab output directory through the read-only DuckDB views.

:func:`collect` returns a :class:`ReportData`: run overview, per-step series (all categories and each
category), the early-warning step, top garbled names with their nearest tools, one example per category
(offending span + repair) and, when ``trajlab rescore`` ran, spike rates per checkpoint and the control
tokens that moved most. With several runs in the scan, the runs compared (one row per run, every run's
per-step series on one step axis, categories by run); the per-step sections then show one run. Every query aggregates inside DuckDB, so memory stays bounded on large scans.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trajlab.duckrows import query_rows, view_names
from trajlab.errors import TableError, param
from trajlab.report.rescore_data import RescoreData, rescore_data

if TYPE_CHECKING:  # pragma: no cover
    import duckdb


#: DuckDB's memory bound while the report reads a scan (it spills past it): every query aggregates in DuckDB and
#: only the picked examples carry text, so the report's peak stays near this plus the page, at any scan size
REPORT_MEMORY = "1GiB"
#: characters of the output shown on each side of a turn-level finding's span
EXCERPT_CHARS = 160


@dataclass
class Example:
    """One finding shown in full: the text around it with the span located, and the repair."""

    category: str
    severity: str
    message: str
    rule_id: str
    trajectory_id: str
    step: int | None
    split: str | None
    text: str  # the call's raw text, or an excerpt of the output for turn-level findings
    span_start: int  # offsets into ``text``
    span_end: int
    repaired: str | None
    repair_note: str | None
    function_name: str | None
    matched_tool: str | None
    count: int  # how many findings of this category the scan has
    in_call: bool = True  # ``text`` is the call as generated (else an excerpt of the output around the span)


@dataclass
class ReportData:
    out: str
    split: str
    overview: dict[str, Any]
    steps: list[dict[str, Any]]
    categories: dict[str, list[int]]  # category -> malformed calls carrying it, per entry of ``steps``
    category_totals: list[tuple[str, int]]
    other_categories: list[str]
    early_warning: dict[str, Any] | None
    garbled: list[dict[str, Any]]
    examples: list[Example]
    manifest: dict[str, Any]
    rescore: RescoreData | None = None
    window: int = 1  # steps pooled by the charts' rolling lines
    run: str | None = None  # the run the per-step sections show (None: the scan has one run, or no run column)
    runs: list[dict[str, Any]] = field(default_factory=list)  # trajlab.trends.run_summaries, one per run
    run_steps: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # run -> its steps of its main split
    run_categories: dict[str, dict[str, int]] = field(default_factory=dict)  # run -> category -> malformed calls
    runs_window: int = 1  # steps pooled by the runs chart
    manifest_problem: str | None = None  # why manifest.json could not be used (the report is made from the tables)
    training: list[dict[str, Any]] = field(default_factory=list)  # trajlab.report.training panels, one per run


def auto_window(calls_per_step: list[int], target_calls: int = 50) -> int:
    """Steps to pool so a window holds about ``target_calls`` tool calls (median step), at most 1/8 of the run."""
    counts = sorted(c for c in calls_per_step if c)
    if not counts:
        return 1
    median = counts[len(counts) // 2]
    return max(1, min(-(-target_calls // median), len(calls_per_step) // 8 or 1))


def rolling_ratio(num: list[float | None], den: list[float | None], window: int) -> list[float | None]:
    """Trailing pooled ratio: sum(num) / sum(den) over the last ``window`` entries (None where den sums to 0).

    Entries whose numerator is None (no value at that step) are left out of both sums.
    """
    out: list[float | None] = []
    for i in range(len(num)):
        lo = max(0, i - window + 1)
        pairs = [(n, d) for n, d in zip(num[lo:i + 1], den[lo:i + 1], strict=True) if n is not None and d]
        d = sum(d for _, d in pairs)
        out.append(sum(n for n, _ in pairs) / d if d else None)
    return out


def _usable_manifest(manifest: dict[str, Any]) -> dict[str, Any]:
    """The parts of a scan's manifest the report shows, each dropped when it has the wrong shape (a damaged or
    hand-edited manifest degrades the report's header and early warning, never the tables)."""
    keep: dict[str, Any] = {}
    if isinstance(manifest.get("schema_version"), str):
        keep["schema_version"] = manifest["schema_version"]
    if isinstance(manifest.get("inputs"), list):
        keep["inputs"] = manifest["inputs"]
    summary = manifest.get("summary")
    if isinstance(summary, dict):
        ew = summary.get("early_warning")
        if ew is None or (isinstance(ew, dict) and isinstance(ew.get("step"), int) and not isinstance(ew["step"], bool)):
            keep["summary"] = summary
        else:
            keep["summary"] = {k: v for k, v in summary.items() if k != "early_warning"}
    return {k: v for k, v in manifest.items() if k not in ("schema_version", "inputs", "summary")} | keep


def _early_warning(out: Path, manifest: dict[str, Any], steps: list[dict[str, Any]]) -> dict[str, Any] | None:
    summary = manifest.get("summary") or {}
    if "early_warning" in summary:
        return summary["early_warning"]  # type: ignore[no-any-return]
    from trajlab.trends import early_warning

    return early_warning(steps)  # a scan written before the manifest carried it: the scan's own statistic


def pick_run(runs: list[dict[str, Any]]) -> str | None:
    """The run the per-step sections show by default: of the runs with an early warning the one with the most
    calls, else the run with the most calls (None when there are no runs)."""
    if not runs:
        return None
    warned = [r for r in runs if r["early_warning"]] or runs
    return max(warned, key=lambda r: (r["calls"], r["trajectories"], r["run"]))["run"]


def _runs(out: Path, steps_rows: list[dict[str, Any]], run: str | None) -> tuple[
        str | None, list[dict[str, Any]], dict[str, list[dict[str, Any]]], dict[str, dict[str, int]]]:
    """The runs compared and the run the per-step sections show (validated)."""
    import pyarrow.parquet as pq

    from trajlab.tables import table_path
    from trajlab.trends import run_summaries

    steps_t = pq.read_table(table_path(out, "steps"))
    if "run" not in steps_t.column_names:  # a scan written before runs (schema 1.0): one unnamed run
        if run is not None:
            raise TableError(f"{out}: this scan has no runs (written by an older trajlab); re-scan it to use {param('run')}")
        return None, [], {}, {}
    runs = run_summaries(steps_t)
    names = [r["run"] for r in runs]
    if run is not None and run not in names:
        raise TableError(f"{out}: no run {run!r}; the runs are: {', '.join(names) or '(none)'}")
    chosen = run or pick_run(runs)
    per_run = {r["run"]: sorted((s for s in steps_rows if s["run"] == r["run"] and s["split"] == r["split"]
                                 and s["step"] is not None), key=lambda s: s["step"]) for r in runs}
    cats: dict[str, dict[str, int]] = {}
    for row in steps_t.select(["run", "category_counts"]).to_pylist():
        d = cats.setdefault(row["run"], {})
        for k, v in row["category_counts"] or []:
            d[k] = d.get(k, 0) + v
    return chosen, runs, per_run, cats


def collect(out: Path | str, *, split: str | None = None, max_categories: int = 8, top_names: int = 12,
            examples_per_category: int = 1, window: int | None = None, run: str | None = None) -> ReportData:
    """Read everything the report shows from the output directory ``out``.

    ``window``: steps pooled by the rolling lines of the charts (None: enough steps for ~50 calls).
    ``run``: the run the per-step sections show (default :func:`pick_run`); every run is in the comparison.
    """
    from trajlab.query import connect
    from trajlab.query.limits import SqlLimits

    out = Path(out)
    con = connect(out, limits=SqlLimits(memory_limit=REPORT_MEMORY))
    try:
        views = view_names(con)
        for need in ("trajectories", "steps"):
            if need not in views:
                raise TableError(f"{out}: no {need}.parquet; the report needs a complete `trajlab scan` output")
        from trajlab.outpaths import read_json_object

        manifest, damaged = read_json_object(out / "manifest.json")
        manifest = _usable_manifest(manifest)
        all_steps = query_rows(con, "SELECT * EXCLUDE (category_counts) FROM steps ORDER BY split, step NULLS FIRST")
        run, runs, run_steps, run_cats = _runs(out, all_steps, run)
        several = len(runs) > 1
        if several:  # the per-step sections show one run
            all_steps = [s for s in all_steps if s["run"] == run]
        split = split or _main_split(all_steps)
        steps = [s for s in all_steps if s["split"] == split and s["step"] is not None]
        ew = (next(r["early_warning"] for r in runs if r["run"] == run) if runs
              else _early_warning(out, manifest, all_steps))
        if ew and ew.get("split") not in (None, split):
            ew = None
        run_filter, run_params = ("WHERE run = ?", [run]) if several else ("", [])
        ov = query_rows(con, """
            SELECT count(*) AS trajectories, coalesce(sum(n_calls), 0) AS calls,
                   coalesce(sum(n_malformed_calls), 0) AS malformed_calls,
                   count(*) FILTER (WHERE n_malformed_calls > 0) AS trajectories_with_malformed,
                   avg(CAST(has_final_answer AS DOUBLE)) AS final_answer_rate,
                   avg(score) AS mean_score, count(DISTINCT step) AS steps,
                   min(step) AS first_step, max(step) AS last_step,
                   count(*) FILTER (WHERE truncated) AS truncated,
                   count(DISTINCT source_path) AS files,
                   string_agg(DISTINCT split, ', ' ORDER BY split) AS splits,
                   string_agg(DISTINCT tool_format, ', ' ORDER BY tool_format) AS tool_formats
            FROM trajectories """ + run_filter, run_params)[0]
        ov["malformed_rate"] = ov["malformed_calls"] / ov["calls"] if ov["calls"] else None
        ov["ingest_errors"] = (con.execute("SELECT count(*) FROM ingest_errors WHERE severity = 'error'")
                               .fetchall()[0][0] if "ingest_errors" in views else 0)
        cats_total: list[tuple[str, int]] = []
        categories: dict[str, list[int]] = {}
        other: list[str] = []
        if "malformed_by_step" in views:
            cats_total = [(r["category"], int(r["n"])) for r in query_rows(con, """
                SELECT category, sum(flagged_calls) AS n FROM malformed_by_step WHERE split = ?
                """ + run_filter.replace("WHERE", "AND") + """
                GROUP BY category HAVING sum(flagged_calls) > 0 ORDER BY n DESC, category""", [split, *run_params])]
            shown = [c for c, _ in cats_total[:max_categories]]
            other = [c for c, _ in cats_total[max_categories:]]
            per = query_rows(con, """
                SELECT step, category, flagged_calls, calls FROM malformed_by_step
                WHERE split = ? AND step IS NOT NULL """ + run_filter.replace("WHERE", "AND") + """
                ORDER BY step""", [split, *run_params])
            index = {s["step"]: i for i, s in enumerate(steps)}
            for c in shown:
                categories[c] = [0] * len(steps)
            if other:
                categories["other (" + str(len(other)) + " categories)"] = [0] * len(steps)
            okey = next((k for k in categories if k.startswith("other (")), None)
            for r in per:
                i = index.get(r["step"])
                if i is None or not r["calls"]:
                    continue
                key = r["category"] if r["category"] in categories else okey
                if key is not None:
                    categories[key][i] += int(r["flagged_calls"])
        garbled = (query_rows(con, "SELECT * FROM garbled_names LIMIT ?", [top_names])
                   if "garbled_names" in views else [])
        examples = (_examples(con, views, examples_per_category)
                    if {"findings", "trajectories", "calls"} <= views else [])
        rescore = _rescore(con, views)
    finally:
        con.close()
    w = window if window and window > 0 else auto_window([s["calls"] for s in steps])
    return ReportData(str(out), split, ov, steps, categories, cats_total, other, ew, garbled, examples, manifest,
                      rescore, w, run if several else None, runs, run_steps, run_cats, manifest_problem=damaged)


def _main_split(steps: list[dict[str, Any]]) -> str:
    """``train`` when it has steps, else the split with the most steps (what the early warning uses too)."""
    counts: dict[str, int] = {}
    for s in steps:
        if s["step"] is not None:
            counts[s["split"]] = counts.get(s["split"], 0) + 1
    if "train" in counts:
        return "train"
    if counts:
        return max(sorted(counts), key=lambda k: counts[k])
    return steps[0]["split"] if steps else "train"


def _examples(con: duckdb.DuckDBPyConnection, views: set[str], per_category: int) -> list[Example]:
    """Per category: the clearest example (a repaired call first, then the shortest text, earliest step).

    Ranked over narrow columns only (no output or call text), then the texts are read for the few picked
    findings alone (an ``IN`` filter the table scan applies): a big scan's findings are ranked without holding
    its texts, and no join ever builds on the trajectories' outputs."""
    picked = query_rows(con, """
        WITH c AS (
            SELECT call_id, repaired IS NULL AS no_repair, raw IS NULL AS no_raw, length(raw) AS raw_len FROM calls
        ), ranked AS (
            SELECT f.*, count(*) OVER (PARTITION BY f.category) AS n,
                   row_number() OVER (
                       PARTITION BY f.category
                       ORDER BY CASE f.severity WHEN 'error' THEN 0 WHEN 'warning' THEN 1 ELSE 2 END,
                                coalesce(c.no_repair, true), coalesce(c.no_raw, true),
                                coalesce(c.raw_len, greatest(0, f.char_end - f.char_start)),
                                f.step NULLS LAST, f.trajectory_id, f.char_start
                   ) AS rn
            FROM findings f LEFT JOIN c ON c.call_id = f.call_id
        )
        SELECT * FROM ranked WHERE rn <= ?
        ORDER BY CASE severity WHEN 'error' THEN 0 WHEN 'warning' THEN 1 ELSE 2 END, n DESC, category, rn
        """, [per_category])
    if not picked:
        return []
    outputs = _rows_by_id(con, "trajectories", "trajectory_id", ["output"], picked)
    calls = _rows_by_id(con, "calls", "call_id", ["function_name", "matched_tool", "status", "raw", "char_start",
                                                   "repaired", "repair_note"], picked)
    out = []
    for r in picked:
        cc = calls.get(r["call_id"]) or {}
        raw, call_start = cc.get("raw"), cc.get("char_start")
        inside = (raw is not None and call_start is not None
                  and call_start <= r["char_start"] and r["char_end"] <= call_start + len(raw)
                  and (r["char_end"] > r["char_start"] or r["char_start"] < call_start + len(raw)))
        if inside and raw is not None and call_start is not None:  # (narrowed for the type checker)
            text, base = raw, call_start
        else:  # a turn-level finding, or one that points past its call (e.g. text after the call)
            base = max(0, r["char_start"] - EXCERPT_CHARS)
            text = ((outputs.get(r["trajectory_id"]) or {}).get("output") or "")[
                base:max(base, r["char_end"]) + EXCERPT_CHARS]
        s = max(0, min(len(text), r["char_start"] - base))
        e = max(s, min(len(text), r["char_end"] - base))
        out.append(Example(r["category"], r["severity"], r["message"], r["rule_id"], r["trajectory_id"], r["step"],
                           r["split"], text, s, e, cc.get("repaired"), cc.get("repair_note"), cc.get("function_name"),
                           cc.get("matched_tool"), int(r["n"]), inside))
    return out


def _rows_by_id(con: duckdb.DuckDBPyConnection, table: str, key: str, columns: list[str],
               picked: list[dict[str, Any]]) -> dict[Any, dict[str, Any]]:
    """``columns`` of the rows of ``table`` whose ``key`` one of ``picked`` names, by key. The picked rows' steps
    are filtered on too: a scan's tables are written in step order, so the row groups' step statistics let the
    scan skip every row group that holds none of them (the ids are hashes: no such pruning by them)."""
    mine = [r for r in picked if r[key] is not None]
    if not mine:
        return {}
    ids = sorted({r[key] for r in mine})
    steps = sorted({r["step"] for r in mine if r["step"] is not None})
    by_step = all(r["step"] is not None for r in mine)
    sql = (f"SELECT {key}, {', '.join(columns)} FROM {table} WHERE {key} IN ({', '.join('?' * len(ids))})"
           + (f" AND step IN ({', '.join('?' * len(steps))})" if by_step else ""))
    return {r[key]: r for r in query_rows(con, sql, [*ids, *(steps if by_step else [])])}


def _rescore(con: duckdb.DuckDBPyConnection, views: set[str]) -> RescoreData | None:
    """Spike rates and token movements, when rescore tables exist."""
    return rescore_data(con, views)
