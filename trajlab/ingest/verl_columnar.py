"""Columnar reader for clean verl JSONL byte ranges: one ``polars.read_ndjson`` call instead of a loop.

:func:`read_clean_segments` turns byte ranges of a verl rollout / validation dump into the record columns that
:mod:`trajlab.ingest.verl_jsonl` would produce record by record -- ``source_line``, ``split``, ``step``,
``group_id``, ``score``, ``input``, ``output`` and ``extra`` -- with the same values, byte for byte. It only
answers for ranges where that equivalence is certain and returns ``None`` with a reason otherwise, so the
caller falls back to the record-by-record reader, which reports every problem (file, line, reason):

* a blank or whitespace-only line, ``\\r\\n`` endings, invalid JSON (a truncated last line), ``NaN``, invalid
  UTF-8 or a lone surrogate (polars reads it as ``\\x00``): the reader must name the line;
* a missing or ``null`` field anywhere (``read_ndjson`` cannot tell an absent key from a null one; the
  record-by-record reader notes a missing ``score``), or a key twice in one record (``json.loads`` keeps the
  last value);
* a column whose JSON type polars would blur: a string column that also holds numbers / lists somewhere, a
  float column that also holds integer literals (``1`` and ``1.0`` both read as ``1.0``), a list / object /
  very large integer value. One byte-level regex over the range checks the first two cases.

Everything kept from the source that trajlab does not map to a column goes into ``extra`` exactly as
:func:`trajlab.ingest.fields.dumps_extra` writes it (sorted keys, ``json.dumps`` escaping and number
formatting), built from whole columns.
"""

from __future__ import annotations

import io
import json
import re
from dataclasses import dataclass

import polars as pl

from trajlab.ingest.fields import prompt_hash
from trajlab.ingest.verl_jsonl import MAPPED_KEYS, group_from_uid

_SIMPLE_EXTRA = (pl.String, pl.Int64, pl.Float64, pl.Boolean)
#: ``json.dumps(..., ensure_ascii=False)`` escapes exactly these characters
_JSON_ESCAPES: dict[str, str] = {chr(i): f"\\u{i:04x}" for i in range(32)}
_JSON_ESCAPES.update({"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f"})
_UID_GROUP = r"^(.*)_[0-9]+_[0-9]+$"


def json_string(expr: pl.Expr) -> pl.Expr:
    """``json.dumps(s, ensure_ascii=False)`` of every string in ``expr``, as a column expression."""
    return pl.lit('"') + expr.str.replace_many(list(_JSON_ESCAPES), list(_JSON_ESCAPES.values())) + pl.lit('"')


@dataclass(frozen=True)
class Segment:
    """One piece of input for :func:`read_clean_segments`: complete lines of one file, with its context."""

    data: bytes
    file_step: int | None  # step from the file name (used when records have no ``step``)
    file_split: str | None  # split from the path (else: ``val`` when records carry ``reward``)
    first_line: int  # line number of the first line of ``data``


def read_clean_segments(segments: list[Segment]) -> tuple[pl.DataFrame | None, str]:
    """Columns of the records in ``segments`` (complete lines of verl dumps, read in one call), or
    ``(None, reason)``.

    The frame has one row per line, in order: ``seg`` (index into ``segments``), ``source_line``, ``split``,
    ``step``, ``group_id``, ``score``, ``input``, ``output``, ``extra``.
    """
    if not segments or any(not s.data for s in segments):
        return None, "empty range"
    datas = [s.data if s.data.endswith(b"\n") else s.data + b"\n" for s in segments]
    data = datas[0] if len(datas) == 1 else b"".join(datas)
    if b"\r" in data:  # (blank lines show as a row count below the line count)
        return None, "CR line endings"
    counts = [d.count(b"\n") for d in datas]
    try:
        df = pl.read_ndjson(io.BytesIO(data), infer_schema_length=None)
    except Exception as e:  # polars raises ComputeError (and others) for anything it cannot read
        return None, f"read_ndjson: {type(e).__name__}"
    if df.height != sum(counts):
        return None, "blank or whitespace-only lines"
    schema = df.schema
    if schema.get("output") != pl.String or schema.get("input") != pl.String or "score" not in schema:
        return None, "input/output not strings, or score missing"
    if schema["score"] not in (pl.Float64, pl.Int64, pl.Boolean):
        return None, "score not a number"
    if "step" in schema and schema["step"] != pl.Int64 or "step" not in schema and any(
            s.file_step is None for s in segments):
        return None, "step not an integer"
    if "uid" in schema and schema["uid"] != pl.String:
        return None, "uid not a string"
    extras = sorted(c for c in df.columns if c not in MAPPED_KEYS)
    if any(schema[c] not in _SIMPLE_EXTRA for c in extras):
        return None, "nested or unusual extra values"
    if sum(df.null_count().row(0)):
        return None, "missing or null fields"
    # every key once per record: an unescaped `":` ends a key (a quote inside a string is escaped), so a record
    # with a key twice shows as more key ends than cells (json.loads keeps the last value, polars may not)
    if data.count(b'":') - data.count(b'\\":') != df.height * df.width:
        return None, "duplicate keys in a record (or keys spelled unusually)"
    strings = [c for c in df.columns if schema[c] == pl.String]
    if df.select(pl.any_horizontal(pl.col(strings).str.contains("\x00", literal=True)).any()).item():
        return None, "NUL characters or lone surrogates"
    if "uid" in schema and (df["uid"] == "").any():
        return None, "empty uid"
    if _types_blurred(data, strings, [c for c in extras if schema[c] == pl.Float64]):
        return None, "mixed JSON types in a column"

    seg_info = pl.DataFrame({
        "seg": list(range(len(segments))),
        "n": counts,
        "first_line": [s.first_line for s in segments],
        "file_step": [s.file_step for s in segments],
        "split": [s.file_split or ("val" if "reward" in schema else "train") for s in segments],
    }, schema={"seg": pl.UInt32, "n": pl.Int64, "first_line": pl.Int64, "file_step": pl.Int64, "split": pl.String})
    per_row = seg_info.select(pl.col("seg", "first_line", "file_step", "split").repeat_by("n").explode())
    per_row = per_row.with_columns(
        (pl.int_range(pl.len(), dtype=pl.Int64).over("seg") + pl.col("first_line")).alias("source_line"))
    step = pl.col("step") if "step" in schema else pl.col("file_step")
    out = pl.concat([df, per_row], how="horizontal").select(
        "seg",
        "source_line",
        "split",
        step.alias("step"),
        _group_ids(df).alias("group_id"),
        pl.col("score").cast(pl.Float64).alias("score"),
        pl.col("input"),
        pl.col("output"),
        _extra_json(df, extras, has_uid="uid" in schema).alias("extra"),
    )
    return out, ""


def _types_blurred(data: bytes, string_cols: list[str], float_cols: list[str]) -> bool:
    """Whether a string column holds a non-string value somewhere, or a float column an integer literal.

    A JSON key followed by ``:`` can only occur as a key (quotes inside strings are escaped), so one search
    over the raw bytes answers for every row at once.
    """
    alts = []
    if string_cols:
        alts.append(b'"(?:' + b"|".join(re.escape(c.encode()) for c in string_cols) + rb')":\s*[^"\s]')
    if float_cols:
        alts.append(b'"(?:' + b"|".join(re.escape(c.encode()) for c in float_cols) + rb')":\s*-?[0-9]+\s*[,}\]]')
    return bool(alts) and re.search(b"|".join(alts), data) is not None


def _group_ids(df: pl.DataFrame) -> pl.Expr:
    """GRPO group: the uid's prompt part (verl V1), else ``p:`` + a hash of the prompt (legacy dumps)."""
    if "uid" in df.columns:
        first = df.select(pl.col("uid").str.extract(_UID_GROUP, 1)).to_series()
        grp = pl.lit(first)
        odd = df.filter(first.is_null())["uid"].unique().to_list()
        if odd:  # Python's str.isdigit also accepts non-ASCII digits: ask the record reader's own function
            exact = {u: group_from_uid(u) for u in odd}
            grp = grp.fill_null(pl.col("uid").replace_strict(exact, default=None, return_dtype=pl.String))
    else:
        grp = pl.lit(None, pl.String)
    missing = df.select(grp.is_null().alias("m"), "input").filter("m")["input"].unique()
    if missing.len():
        hashes = {s: "p:" + prompt_hash(s) for s in missing.to_list()}
        grp = grp.fill_null(pl.col("input").replace_strict(hashes, default=None, return_dtype=pl.String))
    return grp


def _extra_json(df: pl.DataFrame, extras: list[str], *, has_uid: bool) -> pl.Expr:
    """``dumps_extra`` of each row's unmapped keys (plus ``uid``), from whole columns."""
    keys = sorted([*extras, "uid"] if has_uid else extras)
    if not keys:
        return pl.lit("{}")
    parts: list[pl.Expr] = []
    for i, k in enumerate(keys):
        parts.append(pl.lit((", " if i else "{") + json.dumps(k, ensure_ascii=False) + ": "))
        dt = df.schema[k]
        col = pl.col(k)
        if dt == pl.String:
            parts.append(json_string(col))
        elif dt == pl.Int64:
            parts.append(col.cast(pl.String))
        elif dt == pl.Boolean:
            parts.append(pl.when(col).then(pl.lit("true")).otherwise(pl.lit("false")))
        else:  # Float64: Python's repr, computed once per distinct value
            uniq = df[k].unique().to_list()
            parts.append(col.replace_strict({v: json.dumps(v) for v in uniq}, return_dtype=pl.String))
    parts.append(pl.lit("}"))
    return pl.concat_str(parts)
