"""Pick the trajectories to rescore from a scan's tables, and load what the stream builder needs.

Selection runs in DuckDB over ``trajectories.parquet`` (with ``calls``, ``findings`` and ``turns`` available as
views, so ``--where`` may use sub-queries over them):

1. ``--where``: a SQL predicate over ``trajectories`` (e.g. ``split = 'train' AND score = 0``);
2. ``--steps``: a step list (``60,120`` or ranges ``80-130``);
3. ``--sample N``: per step, N trajectories chosen at random (seeded), half from those with a malformed call
   and half from those without; a short stratum is topped up from the other;
4. ``--limit``: the first M of what is left, in (step, trajectory_id) order.

The result is deterministic for the same tables, options and seed.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa

from trajlab.errors import TableError, TrajlabError, param
from trajlab.rescore.stream import LoggedTokens, TrajectoryText
from trajlab.tables import table_path


def parse_steps(spec: str | Iterable[int] | None) -> set[int] | None:
    """``"60,120,200-210"`` -> {60, 120, 200, ..., 210}; ``None``/empty -> ``None`` (all steps)."""
    if spec is None:
        return None
    if not isinstance(spec, str):
        return {int(s) for s in spec}
    out: set[int] = set()
    for part in spec.replace(" ", "").split(","):
        if not part:
            continue
        try:
            if "-" in part[1:]:
                a, b = part.split("-", 1)
                lo, hi = int(a), int(b)
                if hi < lo:
                    raise ValueError
                out.update(range(lo, hi + 1))
            else:
                out.add(int(part))
        except ValueError:
            raise TrajlabError(f"{param('steps')}: cannot read {part!r} (use a list like 60,120 or a range like 80-130)") from None
    return out or None


def _connect(out: Path):  # -> duckdb.DuckDBPyConnection
    import duckdb

    traj = table_path(out, "trajectories")
    if not traj.exists():
        raise TableError(f"{out}: no trajectories.parquet here; run `trajlab scan` first")
    con = duckdb.connect()
    for name in ("trajectories", "turns", "calls", "findings"):
        p = table_path(out, name)
        if p.exists():
            lit = str(p).replace("'", "''")
            con.execute(f"CREATE VIEW {name} AS SELECT * FROM read_parquet('{lit}')")
    return con


def select_trajectories(
    out: str | Path,
    *,
    where: str | None = None,
    steps: set[int] | None = None,
    sample: int | None = None,
    seed: int = 0,
    limit: int | None = None,
) -> list[str]:
    """Trajectory ids to rescore, ordered by (step, trajectory_id); see the module docstring."""
    out = Path(out)
    con = _connect(out)
    sql = "SELECT trajectory_id, step, n_malformed_calls > 0 AS bad FROM trajectories"
    conds = []
    if where:
        conds.append(f"({where})")
    if steps:
        conds.append("step IN (" + ",".join(str(int(s)) for s in sorted(steps)) + ")")
    if conds:
        sql += " WHERE " + " AND ".join(conds)
    sql += " ORDER BY step NULLS FIRST, trajectory_id"
    try:
        rows = con.execute(sql).fetchall()
    except Exception as e:  # duckdb raises its own error types for a bad predicate
        msg = str(e).splitlines()[0]
        raise TrajlabError(f"{param('where')} {where!r}: {msg}") from None
    finally:
        con.close()
    if sample is not None:
        if sample < 1:
            raise TrajlabError(f"{param('sample')} must be at least 1")
        rows = _stratified(rows, sample, seed)
    ids = [r[0] for r in rows]
    if limit is not None:
        if limit < 0:
            raise TrajlabError(f"{param('limit')} must not be negative")
        ids = ids[:limit]
    return ids


def _stratified(rows: Sequence[tuple], n: int, seed: int) -> list[tuple]:
    rng = np.random.default_rng(seed)
    by_step: dict[object, tuple[list, list]] = {}
    for r in rows:
        bad, good = by_step.setdefault(r[1], ([], []))
        (bad if r[2] else good).append(r)
    chosen: list[tuple] = []
    for step in sorted(by_step, key=lambda s: (s is not None, s if s is not None else 0)):
        bad, good = by_step[step]
        want_bad = min(len(bad), math.ceil(n / 2))
        want_good = min(len(good), n - want_bad)
        want_bad = min(len(bad), n - want_good)  # top up from the malformed stratum when clean ones are short
        for group, k in ((bad, want_bad), (good, want_good)):
            if k:
                idx = rng.choice(len(group), size=k, replace=False)
                chosen += [group[i] for i in sorted(idx)]
    chosen.sort(key=lambda r: (r[1] is not None, r[1] if r[1] is not None else 0, r[0]))
    return chosen


def text_lengths(out: str | Path, ids: Sequence[str]) -> dict[str, int]:
    """``len(input) + len(output)`` per trajectory id (to balance work across ranks before loading texts)."""
    if not ids:
        return {}
    con = _connect(Path(out))
    try:
        con.register("sel", pa.table({"trajectory_id": list(ids)}))
        rows = con.execute(
            "SELECT trajectory_id, coalesce(length(input), 0) + coalesce(length(output), 0) "
            "FROM trajectories JOIN sel USING (trajectory_id)"
        ).fetchall()
    finally:
        con.close()
    return {t: int(n) for t, n in rows}


def load_texts(out: str | Path, ids: Sequence[str]) -> list[TrajectoryText]:
    """Load input/output/turns/calls of the given trajectories (in the order of ``ids``)."""
    if not ids:
        return []
    out = Path(out)
    for name in ("turns", "calls"):
        if not table_path(out, name).exists():
            raise TableError(f"{out}: no {name}.parquet here; run `trajlab scan` first")
    con = _connect(out)
    try:
        con.register("sel", pa.table({"trajectory_id": list(ids), "ord": list(range(len(ids)))}))
        trows = con.execute(
            "SELECT t.trajectory_id, t.input, t.output, t.tool_format, t.truncated, t.tools, t.step, t.split, "
            "t.score, t.n_calls, t.n_malformed_calls FROM trajectories t JOIN sel USING (trajectory_id) ORDER BY sel.ord"
        ).fetchall()
        turns = con.execute(
            "SELECT trajectory_id, turn_index, role, char_start, char_end FROM turns JOIN sel USING (trajectory_id) "
            "ORDER BY trajectory_id, turn_index"
        ).fetchall()
        calls = con.execute(
            "SELECT trajectory_id, char_start, char_end FROM calls JOIN sel USING (trajectory_id) "
            "ORDER BY trajectory_id, char_start"
        ).fetchall()
    finally:
        con.close()
    turn_map: dict[str, list[tuple[int, str, int, int]]] = {}
    for tid, ti, role, cs, ce in turns:
        turn_map.setdefault(tid, []).append((int(ti), role, int(cs), int(ce)))
    call_map: dict[str, list[tuple[int, int]]] = {}
    for tid, cs, ce in calls:
        call_map.setdefault(tid, []).append((int(cs), int(ce)))
    exact = load_logged_tokens(out, ids)
    texts = []
    for tid, inp, outp, fmt, trunc, tools, step, split, score, n_calls, n_bad in trows:
        outp = outp or ""
        tl = turn_map.get(tid) or [(0, "assistant", 0, len(outp))]
        try:
            tools_v = json.loads(tools) if tools else None
        except json.JSONDecodeError:
            tools_v = None
        texts.append(
            TrajectoryText(
                trajectory_id=tid, input=inp or "", output=outp, turns=tl, tool_format=fmt,
                truncated=bool(trunc), tools=tools_v, step=step, split=split, score=score,
                n_calls=int(n_calls or 0), n_malformed_calls=int(n_bad or 0), call_ranges=call_map.get(tid, []),
                exact=exact.get(tid),
            )
        )  # fmt: skip
    return texts


def load_logged_tokens(out: str | Path, ids: Sequence[str]) -> dict[str, LoggedTokens]:
    """The logged token sequences (``rollout_tokens``) of the given trajectories that have one."""
    path = table_path(Path(out), "rollout_tokens")
    if not ids or not path.exists():
        return {}
    import polars as pl

    df = (pl.scan_parquet(path)
          .filter(pl.col("trajectory_id").is_in(list(ids)))
          .select("trajectory_id", "position", "token_id", "generated", "turn", "logprob")
          .sort("trajectory_id", "position")
          .collect())
    out_map: dict[str, LoggedTokens] = {}
    for part in df.partition_by("trajectory_id", maintain_order=True):
        out_map[part["trajectory_id"][0]] = LoggedTokens(
            part["token_id"].to_list(), part["generated"].to_list(), part["turn"].to_list(), part["logprob"].to_list())
    return out_map


def load_malformed_calls(out: str | Path, ids: Sequence[str]) -> dict[str, list[dict]]:
    """Calls that are not ok (status ``malformed`` or ``warning``: a warning's repair, e.g. text after the call, is
    a control-token departure too) per trajectory id, with their repair (may be null) and where their first error
    finding starts (offset into output; for calls without a repair, the malformation point)."""
    if not ids:
        return {}
    out = Path(out)
    has_findings = table_path(out, "findings").exists()
    con = _connect(out)
    try:
        con.register("sel", pa.table({"trajectory_id": list(ids)}))
        first = (
            "(SELECT min(f.char_start) FROM findings f WHERE f.call_id = c.call_id AND f.severity = 'error')"
            if has_findings
            else "NULL"
        )
        rows = con.execute(
            f"SELECT c.call_id, c.trajectory_id, c.turn_index, c.char_start, c.char_end, c.raw, c.repaired, "
            f"c.categories, {first} FROM calls c JOIN sel USING (trajectory_id) WHERE c.status <> 'ok' "
            "ORDER BY c.trajectory_id, c.turn_index, c.call_index"
        ).fetchall()
    finally:
        con.close()
    out_map: dict[str, list[dict]] = {}
    for call_id, tid, ti, cs, ce, raw, rep, cats, first_error in rows:
        out_map.setdefault(tid, []).append(
            {"call_id": call_id, "turn_index": int(ti), "char_start": int(cs), "char_end": int(ce),
             "raw": raw, "repaired": rep, "categories": list(cats or []),
             "first_error": None if first_error is None else int(first_error)}
        )  # fmt: skip
    return out_map
