"""Read the tables of a scan directory for the SFT pool: checked up front, loaded lazily and only as needed.

The pool needs four scan tables (``trajectories``, ``turns``, ``calls``, ``findings``). Large text columns
(``input``, ``output``, turn ``text``) are read only for the trajectories that can become samples, so a scan of
many GB is filtered on its small columns first. Rescore results (``OUT/rescore/<label>/trajectory_scores``)
are optional and only used to rank candidates when present.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

import polars as pl

from trajlab.errors import TableError, param

REQUIRED_TABLES: dict[str, tuple[str, ...]] = {
    "trajectories": (
        "trajectory_id", "split", "step", "group_id", "score", "tool_format", "n_malformed_calls",
        "has_final_answer", "truncated", "input", "output", "tools",
    ),
    "turns": ("trajectory_id", "turn_index", "role", "text", "char_start", "char_end"),
    "calls": (
        "call_id", "trajectory_id", "turn_index", "call_index", "format", "raw", "char_start", "char_end",
        "function_name", "matched_tool", "arguments", "status", "categories", "repaired", "repaired_arguments",
    ),
    "findings": ("trajectory_id", "turn_index", "call_id", "category", "severity", "char_start", "char_end", "message"),
}

#: Columns of ``trajectories`` small enough to load for every row.
LIGHT_COLUMNS = (
    "trajectory_id", "split", "step", "group_id", "score", "tool_format", "n_malformed_calls",
    "has_final_answer", "truncated",
)


@dataclass
class ScanTables:
    """Lazy handles on one scan's tables plus the small columns loaded eagerly."""

    out: Path
    paths: dict[str, Path]
    light: pl.DataFrame  # LIGHT_COLUMNS for every trajectory
    bad_findings: pl.DataFrame  # error/warning findings: trajectory_id, turn_index, call_id, category, severity
    manifest: dict[str, Any] = field(default_factory=dict)
    rescore_label: str | None = None
    rescore_scores: pl.DataFrame | None = None  # trajectory_id, intrusion (max intrusion mass) when present
    rescore_log_odds: dict[str, float] = field(default_factory=dict)  # call_id -> log P(malformed)/P(repaired)

    def lazy(self, table: str) -> pl.LazyFrame:
        return pl.scan_parquet(self.paths[table])

    def heavy(self, ids: list[str]) -> dict[str, dict[str, Any]]:
        """``input``, ``output`` and ``tools`` of the given trajectories, by id."""
        if not ids:
            return {}
        df = (
            self.lazy("trajectories")
            .select("trajectory_id", "input", "output", "tools")
            .filter(pl.col("trajectory_id").is_in(ids))
            .collect()
        )
        return {r["trajectory_id"]: r for r in df.iter_rows(named=True)}

    def turns_of(self, ids: list[str]) -> dict[str, list[tuple[int, str, str, int]]]:
        """``(turn_index, role, text, char_start)`` per trajectory, in order."""
        if not ids:
            return {}
        df = (
            self.lazy("turns")
            .select("trajectory_id", "turn_index", "role", "text", "char_start")
            .filter(pl.col("trajectory_id").is_in(ids))
            .sort("trajectory_id", "turn_index")
            .collect()
        )
        out: dict[str, list[tuple[int, str, str, int]]] = {}
        for tid, idx, role, text, start in df.iter_rows():
            out.setdefault(tid, []).append((int(idx), role, text, int(start)))
        return out

    def calls_of(self, ids: list[str]) -> dict[str, list[dict[str, Any]]]:
        """Every call row of the given trajectories, ordered by turn and position."""
        if not ids:
            return {}
        df = (
            self.lazy("calls")
            .filter(pl.col("trajectory_id").is_in(ids))
            .sort("trajectory_id", "turn_index", "call_index")
            .collect()
        )
        out: dict[str, list[dict[str, Any]]] = {}
        for r in df.iter_rows(named=True):
            out.setdefault(r["trajectory_id"], []).append(r)
        return out


def _check_columns(path: Path, need: tuple[str, ...]) -> None:
    import pyarrow.parquet as pq

    try:
        names = set(pq.read_schema(path).names)
    except Exception as e:  # not a parquet file, truncated, ...
        raise TableError(f"{path}: cannot be read as a Parquet table ({type(e).__name__}: {e})") from None
    missing = [c for c in need if c not in names]
    if missing:
        raise TableError(
            f"{path}: missing column(s) {', '.join(missing)}",
            hint="the scan was written by an incompatible trajlab version; re-run `trajlab scan` into a fresh directory",
        )


def open_scan(out: str | Path) -> ScanTables:
    """Check that ``out`` holds a scan and load its small columns.

    Raises :class:`TableError` naming every missing table (and what to run) or incompatible column.
    """
    out = Path(out)
    if not out.exists():
        raise TableError(f"scan directory not found: {out}", hint=f"run `trajlab scan DUMPS... -o {out}` first")
    if not out.is_dir():
        raise TableError(f"{out} is not a directory (expected the output directory of `trajlab scan`)")
    from trajlab.outpaths import check_complete

    check_complete(out)
    paths = {name: out / f"{name}.parquet" for name in REQUIRED_TABLES}
    missing = [f"{n}.parquet" for n, p in paths.items() if not p.is_file()]
    if missing:
        raise TableError(
            f"{out} is missing scan table(s): {', '.join(missing)}",
            hint=f"point build-sft-pool at the output directory of `trajlab scan` (re-run `trajlab scan DUMPS... -o {out}`)",
        )
    for name, p in paths.items():
        _check_columns(p, REQUIRED_TABLES[name])

    has_run = "run" in pl.read_parquet_schema(paths["trajectories"])  # scans before schema 1.1 have no runs
    light = (
        pl.scan_parquet(paths["trajectories"])
        .select(*LIGHT_COLUMNS, *(("run",) if has_run else ()))
        .collect()
    )
    bad = (
        pl.scan_parquet(paths["findings"])
        .filter(pl.col("severity").is_in(["error", "warning"]))
        .select("trajectory_id", "turn_index", "call_id", "category", "severity")
        .collect()
    )
    from trajlab.outpaths import read_json_object

    manifest, _ = read_json_object(out / "manifest.json")  # damaged: the pool records no scan versions
    label, scores = _rescore_scores(out)
    log_odds = _rescore_log_odds(out / "rescore" / label) if label else {}
    return ScanTables(out, paths, light, bad, manifest, label, scores, log_odds)


def restrict_runs(tables: ScanTables, runs: tuple[str, ...]) -> None:
    """Keep only the trajectories of ``runs`` (``--run``, repeatable) as candidates: every kind of sample is
    chosen from ``tables.light``. Raises :class:`TableError` naming the runs the scan has."""
    if not runs:
        return
    if "run" not in tables.light.columns:
        raise TableError(f"{tables.out}: this scan has no runs (written by an older trajlab)",
                         hint=f"re-scan the dumps (trajlab scan DUMPS... -o {tables.out}) to use {param('runs')}")
    known = sorted(set(tables.light["run"].to_list()))
    missing = [r for r in runs if r not in known]
    if missing:
        raise TableError(f"{tables.out}: no run {', '.join(repr(m) for m in missing)}; the runs are: {', '.join(known)}",
                         hint=f"e.g. {param('runs', known[0])}" if known else None)
    tables.light = tables.light.filter(pl.col("run").is_in(list(runs)))


def split_at_step(tables: ScanTables, step: int | None) -> tuple[ScanTables, ScanTables]:
    """``tables`` cut at ``step`` for the emergency hand-over: (the candidates of steps before it, those of
    ``step`` on); both are ``tables`` itself when ``step`` is None. Raises :class:`TableError` when either side
    is empty (naming the steps the scan has)."""
    if step is None:
        return tables, tables
    steps = [int(x) for x in tables.light["step"].drop_nulls().to_list()]
    lo, hi = (min(steps), max(steps)) if steps else (None, None)
    if lo is None or hi is None or not lo < step <= hi:
        raise TableError(f"{tables.out}: {param('split_step', step)} leaves one side empty (the candidates' steps "
                         f"are {lo}..{hi})" if lo is not None else f"{tables.out}: no trajectory has a step",
                         hint=f"cut inside the run, e.g. at its early-warning step ({param('split_step', hi)} is "
                              f"the latest that works)" if hi is not None else None)
    return (replace(tables, light=tables.light.filter(pl.col("step") < step)),
            replace(tables, light=tables.light.filter(pl.col("step") >= step)))


def _rescore_scores(out: Path) -> tuple[str | None, pl.DataFrame | None]:
    """Max intrusion mass per trajectory from the last checkpoint's rescore, if such a table exists."""
    root = out / "rescore"
    if not root.is_dir():
        return None, None
    cands = sorted(p for p in root.glob("*/trajectory_scores.parquet") if p.is_file())
    if not cands:
        return None, None
    path = cands[-1]
    for p in cands:  # prefer the highest step label (global_step_140 after global_step_40)
        if _label_key(p.parent.name) >= _label_key(path.parent.name):
            path = p
    try:
        import pyarrow.parquet as pq

        names = pq.read_schema(path).names
    except Exception:
        return None, None
    col = next((c for c in names if "intrusion" in c and c.startswith("max")), None)
    col = col or next((c for c in names if "intrusion" in c), None)
    if "trajectory_id" not in names or col is None:
        return None, None
    df = (
        pl.scan_parquet(path)
        .group_by("trajectory_id")
        .agg(pl.col(col).cast(pl.Float64).max().alias("intrusion"))
        .collect()
    )
    return path.parent.name, df


def _rescore_log_odds(label_dir: Path) -> dict[str, float]:
    """``call_id -> log_odds`` from a rescore ``malformations`` table (how much the checkpoint prefers the
    malformed continuation over the repaired one), when the table exists."""
    path = label_dir / "malformations.parquet"
    if not path.is_file():
        return {}
    try:
        import pyarrow.parquet as pq

        names = pq.read_schema(path).names
    except Exception:
        return {}
    if "call_id" not in names or "log_odds" not in names:
        return {}
    df = (
        pl.scan_parquet(path)
        .select("call_id", pl.col("log_odds").cast(pl.Float64))
        .drop_nulls()
        .group_by("call_id")
        .agg(pl.col("log_odds").max())
        .collect()
    )
    return dict(zip(df["call_id"].to_list(), df["log_odds"].to_list(), strict=True))


def _label_key(label: str) -> tuple[int, str]:
    digits = "".join(ch if ch.isdigit() else " " for ch in label).split()
    return (int(digits[-1]) if digits else -1, label)


@lru_cache(maxsize=1024)
def parse_tools(tools_json: str | None) -> tuple[dict[str, Any], ...] | None:
    """The normalised tool schemas stored in ``trajectories.tools`` (cached per distinct JSON)."""
    if not tools_json:
        return None
    try:
        tools = json.loads(tools_json)
    except ValueError:
        return None
    if not isinstance(tools, list):
        return None
    return tuple(t for t in tools if isinstance(t, dict) and isinstance(t.get("name"), str))
