"""What ``trajlab show`` reads: one trajectory of a scan with its turns, calls and findings (:func:`load`),
picked by id, id prefix, or step and position."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trajlab.duckrows import query_rows, view_names
from trajlab.errors import TrajlabError, param, shell_word

if TYPE_CHECKING:  # pragma: no cover
    import duckdb


@dataclass
class Loaded:
    """Everything :func:`show` renders, read from the tables."""

    trajectory: dict[str, Any]
    turns: list[dict[str, Any]]
    calls: list[dict[str, Any]]
    findings: list[dict[str, Any]]
    position: tuple[int, int] | None  # (index within its step, trajectories at that step)


def has_view(con: duckdb.DuckDBPyConnection, name: str) -> bool:
    return bool(con.execute(
        "SELECT count(*) FROM duckdb_views() WHERE view_name = ?", [name]).fetchall()[0][0])


def resolve_id(con: duckdb.DuckDBPyConnection, trajectory_id: str, out: str | Path = "OUT") -> str:
    """The full id of ``trajectory_id`` (an id or a unique prefix); ``out`` names the scan in the hint."""
    hit = query_rows(con, "SELECT trajectory_id FROM trajectories WHERE trajectory_id = ?", [trajectory_id])
    if hit:
        return trajectory_id
    like = trajectory_id.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
    hits = query_rows(con, "SELECT trajectory_id FROM trajectories WHERE trajectory_id LIKE ? ESCAPE '\\' "
                      "ORDER BY trajectory_id LIMIT 6", [like])
    if len(hits) == 1:
        return hits[0]["trajectory_id"]
    if not hits:
        raise TrajlabError(f"no trajectory with id {trajectory_id!r}",
                           hint=f"list some with: trajlab sql {shell_word(out)} \"SELECT trajectory_id, step FROM "
                                "trajectories LIMIT 20\"")
    ids = ", ".join(h["trajectory_id"] for h in hits[:5])
    raise TrajlabError(f"id prefix {trajectory_id!r} is ambiguous: {ids}{', ...' if len(hits) > 5 else ''}")


def load(out: Path | str, trajectory_id: str | None = None, *, step: int | None = None,
         index: int | None = None, split: str | None = None, run: str | None = None) -> Loaded:
    """Read one trajectory with its turns, calls and findings (by id or id prefix, or by step and index;
    ``run`` picks the run when several have that step)."""
    from trajlab.query import connect

    con = connect(out)
    try:
        views = view_names(con)  # one look instead of one query per table
        if "trajectories" not in views:
            raise TrajlabError(f"{out}: no trajectories.parquet (not a scan output)")
        position = None
        exact: list[dict[str, Any]] = []
        if trajectory_id is not None:
            if step is not None or index is not None:
                raise TrajlabError(f"give a {param('trajectory_id')} or {param('step')}/{param('index')}, not both")
            # a full id: the row itself, one query (each query scans the table's Parquet file)
            exact = query_rows(con, "SELECT * FROM trajectories WHERE trajectory_id = ?", [trajectory_id])
            tid = trajectory_id if exact else resolve_id(con, trajectory_id, out)
        else:
            if step is None:
                raise TrajlabError(f"give a {param('trajectory_id')}, or {param('step', metavar='S')} (and {param('index', metavar='I')})")
            rows = query_rows(con, "SELECT trajectory_id, run FROM trajectories_at(?, split_name := ?, run_name := ?)",
                         [step, split, run])
            runs = sorted({r["run"] for r in rows})
            if len(runs) > 1:
                raise TrajlabError(f"step {step} is in {len(runs)} runs: {', '.join(runs)}",
                                   hint=f"pick one with {param('run')}, e.g. {param('run', runs[0])}")
            if not rows and run is not None and not query_rows(
                    con, "SELECT 1 FROM trajectories WHERE run = ? LIMIT 1", [run]):
                names = ", ".join(r["run"] for r in query_rows(con, "SELECT DISTINCT run FROM trajectories ORDER BY run", []))
                raise TrajlabError(f"no run {run!r}; the runs are: {names}")
            if not rows:
                steps = query_rows(con, "SELECT DISTINCT step FROM trajectories WHERE step IS NOT NULL "
                                   "AND (? IS NULL OR run = ?) ORDER BY step", [run, run])
                known = [r["step"] for r in steps]
                near = ", ".join(str(s) for s in sorted(known, key=lambda s: abs(s - step))[:5])
                raise TrajlabError(f"no trajectories at step {step}" + (f" (split {split})" if split else "")
                                   + (f" in run {run}" if run else "")
                                   + (f"; nearest steps: {near}" if near else ""))
            idx = 0 if index is None else index
            if not -len(rows) <= idx < len(rows):
                raise TrajlabError(f"{param('index')} {idx}: step {step} has {len(rows)} trajectories (0..{len(rows) - 1})")
            tid = rows[idx]["trajectory_id"]
            position = (idx % len(rows), len(rows))
        traj = (exact or query_rows(con, "SELECT * FROM trajectories WHERE trajectory_id = ?", [tid]))[0]
        turns = (query_rows(con, "SELECT * FROM turns WHERE trajectory_id = ? ORDER BY turn_index", [tid])
                 if "turns" in views else [])
        calls = (query_rows(con, "SELECT * FROM calls WHERE trajectory_id = ? ORDER BY turn_index, call_index", [tid])
                 if "calls" in views else [])
        findings = (query_rows(con, "SELECT * FROM findings WHERE trajectory_id = ? ORDER BY char_start, char_end, "
                               "category", [tid]) if "findings" in views else [])
    finally:
        con.close()
    if not turns and traj.get("output"):
        turns = [{"turn_index": 0, "role": "assistant", "text": traj["output"], "char_start": 0,
                  "char_end": len(traj["output"])}]
    return Loaded(traj, turns, calls, findings, position)

