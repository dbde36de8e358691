"""The ``records`` engine (the reference): every record of a range through ingest and the per-turn classifier.

It reads any input format and every kind of damage (each unreadable line becomes an ``ingest_errors`` row) and
defines what each table holds; the ``columnar`` engine (:mod:`trajlab.scan.columnar`) must write the same bytes.
Rows are collected as tuples in :data:`ROW_COLUMNS` order and transposed into columns once per range.
"""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa

from trajlab.ingest import FileTask, iter_records
from trajlab.ingest.fields import dumps_extra
from trajlab.model import IngestError, RawTrajectory, TurnAnalysis
from trajlab.scan.ids import trajectory_id
from trajlab.scan.options import WorkerOptions
from trajlab.scan.parts import PART_TABLES
from trajlab.tables import TableSpec

#: column order of the row tuples each table collects: its spec's (rows are transposed into columns once per task)
ROW_COLUMNS: dict[str, tuple[str, ...]] = {s.name: tuple(s.column_names) for s in PART_TABLES}
Rows = dict[str, list[tuple[Any, ...]]]


def record_loop(task: FileTask, opts: WorkerOptions, digest: str) -> dict[str, pa.Table]:
    """The part tables of a range, record by record (every format, every kind of damage)."""
    rows: Rows = {s.name: [] for s in PART_TABLES}
    errs = rows["ingest_errors"]
    for item in iter_records(task):
        if isinstance(item, IngestError):
            errs.append((item.source_path, item.line, item.reason, item.severity))
            continue
        try:
            record_rows(item, opts, rows, trajectory_id(task.rel, item.source_line, digest, item.sample),
                        dumps_extra(item.extra))
        except Exception as e:  # the classifier never raises by contract; keep going if it ever does
            errs.append((task.rel, item.source_line,
                         f"internal error while classifying (please report): {type(e).__name__}: {e}", "error"))
    return {spec.name: columns_table(spec, row_columns(spec.name, rows[spec.name])) for spec in PART_TABLES}


def record_rows(rec: RawTrajectory, opts: WorkerOptions, rows: Rows, traj_id: str, extra_json: str) -> None:
    """Append the rows of one trajectory (in :data:`ROW_COLUMNS` order) to ``rows``."""
    from trajlab.trajectory import analyze_trajectory

    an = analyze_trajectory(rec, tool_format=opts.tool_format, tools=opts.tools, rules_dirs=opts.rules_dirs)
    rows["trajectories"].append((
        traj_id, rec.source_path, rec.source_line, rec.source_format, rec.run, rec.split, rec.step, rec.group_id, rec.score,
        an.tool_format, len(rec.turns), an.n_calls, an.n_malformed, an.has_final_answer, an.truncated,
        an.end_reason, an.schema_checked, rec.input, rec.output, an.tools_json, extra_json,
    ))
    turns = rows["turns"]
    for turn, ta in an.turns:
        turns.append((traj_id, turn.index, turn.role, turn.text, turn.char_start, turn.char_end))
        if ta is not None:
            turn_rows(traj_id, turn.index, turn.char_start, ta, rec.step, rec.split, rows["calls"], rows["findings"])
    for note in an.notes:  # e.g. a turn over the per-turn cap: what was counted but not classified
        rows["ingest_errors"].append((rec.source_path, rec.source_line, note, "error"))
    if rec.tokens is not None:  # exact tokens (NeMo-RL): one row per token, and what only the tokens show
        from trajlab.scan.exact_tokens import fabricated_findings, token_rows

        rows["rollout_tokens"].extend(token_rows(traj_id, rec.tokens, an.tool_format, opts.rules_dirs))
        rows["findings"].extend(fabricated_findings(traj_id, rec, an, opts.rules_dirs))


def turn_rows(traj_id: str, ti: int, off: int, ta: TurnAnalysis, step: int | None, split: str,
              calls: list[tuple[Any, ...]], findings: list[tuple[Any, ...]]) -> None:
    """Append the ``calls`` and ``findings`` rows of one classified assistant turn (``off``: its start)."""
    call_ids = {}
    for c in ta.calls:
        cid = f"{traj_id}:{ti}:{c.call_index}"
        call_ids[c.call_index] = cid
        calls.append((
            cid, traj_id, ti, c.call_index, step, split, c.format, c.raw, c.start + off, c.end + off,
            c.function_name, c.matched_tool, json_or_none(c.arguments), c.status, list(c.categories),
            c.repaired, json_or_none(c.repaired_arguments) if c.repaired is not None else None, c.repair_note,
            c.verl_executes, c.verl_function_name,
            json_or_none(c.verl_arguments) if c.verl_executes == "differently" else None,
        ))
    for f in ta.findings:
        findings.append((
            traj_id, ti, call_ids.get(f.call_index) if f.call_index is not None else None, step, split,
            f.category, f.severity, f.start + off, f.end + off, f.message, f.rule_id,
        ))


#: ``json.dumps(v, ensure_ascii=False, sort_keys=True, default=str)``, without building an encoder per call
_ENCODE = json.JSONEncoder(ensure_ascii=False, sort_keys=True, default=str).encode


def json_or_none(v: Any) -> str | None:
    """A call's arguments as the ``calls`` table stores them (sorted keys, no ASCII escaping), ``None`` kept."""
    if v is None:
        return None
    return _ENCODE(v)


def row_columns(table: str, rows: list[tuple[Any, ...]]) -> dict[str, list[Any]]:
    """Row tuples of ``table`` (in :data:`ROW_COLUMNS` order) → one list per column."""
    names = ROW_COLUMNS[table]
    if not rows:
        return {c: [] for c in names}
    return {c: list(col) for c, col in zip(names, zip(*rows, strict=True), strict=True)}


def columns_table(spec: TableSpec, cols: dict[str, list[Any]]) -> pa.Table:
    """Column lists → an Arrow table with ``spec``'s exact schema."""
    return pa.table({c.name: pa.array(cols[c.name], type=c.type) for c in spec.columns}, schema=spec.schema)
