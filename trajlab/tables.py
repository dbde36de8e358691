"""Table schemas (versioned) and atomic, deterministic Parquet writes.

Every table trajlab writes is declared here as a :class:`TableSpec`: name, Arrow schema, sort key and a
one-line description per column. ``trajlab schema`` prints these specs and the README documents them.
Writes go to a temporary file in the same directory and are renamed into place, so a crash never leaves a
half-written table. Rows are sorted by the table's key before writing so the same input gives the same bytes.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute  # noqa: F401  (pa.compute)
import pyarrow.parquet as pq

#: Bumped whenever a column is added, removed, renamed or changes type.
#: 1.1: calls.verl_executes, calls.verl_function_name, calls.verl_arguments (verl's reading of each call).
#: 1.2: trajectories.run; steps one row per (run, split, step) (was per (split, step)).
SCHEMA_VERSION = "1.2"

PARQUET_COMPRESSION = "zstd"


@dataclass(frozen=True)
class Column:
    name: str
    type: pa.DataType
    doc: str
    nullable: bool = True


@dataclass(frozen=True)
class TableSpec:
    name: str
    doc: str
    columns: tuple[Column, ...]
    sort_key: tuple[str, ...] = ()

    @property
    def schema(self) -> pa.Schema:
        return pa.schema(
            [pa.field(c.name, c.type, nullable=c.nullable) for c in self.columns],
            metadata={b"trajlab.table": self.name.encode(), b"trajlab.schema_version": SCHEMA_VERSION.encode()},
        )

    @property
    def column_names(self) -> list[str]:
        return [c.name for c in self.columns]


def C(name: str, type_: pa.DataType, doc: str, nullable: bool = True) -> Column:
    return Column(name, type_, doc, nullable)


STR = pa.string()
I64 = pa.int64()
I32 = pa.int32()
F64 = pa.float64()
BOOL = pa.bool_()

TRAJECTORIES = TableSpec(
    "trajectories",
    "One row per trajectory (one dump line / record).",
    (
        C("trajectory_id", STR, "stable id: hash of source_path, the record index and the file's content (sha1)", False),
        C("source_path", STR, "input file, relative to the scanned root (several roots: prefixed with the root's name)", False),
        C("source_line", I64, "1-based line (JSONL) or record index (JSON list / Parquet)", False),
        C("source_format", STR, "verl_jsonl | verl_tool_json | openai_messages", False),
        C("run", STR, "training run (experiment): the file's directory, split dir folded, or --run NAME", False),
        C("split", STR, "train | val", False),
        C("step", I64, "training step (from the record, else from the file name)"),
        C("group_id", STR, "GRPO prompt group: uid prefix (verl V1) or a hash of the prompt", False),
        C("score", F64, "reward as dumped (null when missing or not a number)"),
        C("tool_format", STR, "call format used for classification: qwen3_coder | hermes | glm45 | glm47 | kimi_k2 | deepseek_v31 | gpt_oss | none"),
        C("n_turns", I32, "number of turns (assistant + tool) in the output", False),
        C("n_calls", I32, "tool calls found in assistant turns", False),
        C("n_malformed_calls", I32, "calls with status malformed", False),
        C("has_final_answer", BOOL, "the last assistant turn contains no tool call and the output is not truncated", False),
        C("truncated", BOOL, "the output ends inside a call or a think block (hit the length limit)", False),
        C("schema_checked", BOOL, "tool schemas were known, so schema checks ran", False),
        C("input", STR, "the decoded prompt, as dumped"),
        C("output", STR, "the decoded response (all turns), as dumped"),
        C("tools", STR, "JSON list of tool schemas ({name, description, parameters}) or null"),
        C("extra", STR, "JSON object of every source key trajlab does not map to a column"),
    ),
    (),  # source order: files by first step then path, records by line
)

TURNS = TableSpec(
    "turns",
    "One row per turn; turns tile the trajectory's output (output[char_start:char_end] == text).",
    (
        C("trajectory_id", STR, "", False),
        C("turn_index", I32, "0-based position in the output", False),
        C("role", STR, "assistant (model text) | tool (tool response block with its chat scaffolding)", False),
        C("text", STR, "the turn's text", False),
        C("char_start", I64, "offset into trajectories.output", False),
        C("char_end", I64, "end offset (exclusive)", False),
    ),
    (),  # source order: files by first step then path, records by line
)

CALLS = TableSpec(
    "calls",
    "One row per tool call found in an assistant turn, well-formed or not.",
    (
        C("call_id", STR, "stable id: trajectory_id:turn_index:call_index", False),
        C("trajectory_id", STR, "", False),
        C("turn_index", I32, "", False),
        C("call_index", I32, "0-based position of the call within its turn", False),
        C("step", I64, "copied from trajectories for convenience"),
        C("split", STR, "copied from trajectories for convenience"),
        C("format", STR, "the markup the call is written in: a call format (qwen3_coder, hermes, glm45, ...) or foreign", False),
        C("raw", STR, "the call's text exactly as generated", False),
        C("char_start", I64, "offset into trajectories.output", False),
        C("char_end", I64, "end offset (exclusive)", False),
        C("function_name", STR, "function name as written (may be garbled)"),
        C("matched_tool", STR, "declared tool the call resolves to (exactly, or via a confident repair)"),
        C("arguments", STR, "JSON of the intended arguments: tag text inside a value kept as text, values converted by "
          "schema type like verl's parser (numbers exactly; anyOf/oneOf/nullable by the first fitting branch)"),
        C("status", STR, "ok | malformed", False),
        C("categories", pa.list_(STR), "taxonomy categories of error/warning findings on this call", False),
        C("repaired", STR, "corrected call text in the same format, when exactly one repair is plausible"),
        C("repaired_arguments", STR, "JSON of the repaired call's parsed arguments"),
        C("repair_note", STR, "why there is, or is not, a repair"),
        C("verl_executes", STR, "what verl 0.9.1's parser for the run's format executes for this call's text: "
          "as_intended | differently | dropped (null: a format verl's reading is not modelled for)"),
        C("verl_function_name", STR, "the function name verl executes, when it executes the call differently"),
        C("verl_arguments", STR, "JSON of the arguments verl executes, when it executes the call differently"),
    ),
    (),  # source order: files by first step then path, records by line
)

FINDINGS = TableSpec(
    "findings",
    "One row per problem found (calls and turn-level problems).",
    (
        C("trajectory_id", STR, "", False),
        C("turn_index", I32, "", False),
        C("call_id", STR, "the call it belongs to, null for turn-level findings"),
        C("step", I64, "copied from trajectories"),
        C("split", STR, "copied from trajectories"),
        C("category", STR, "taxonomy id (rules/taxonomy.yaml)", False),
        C("severity", STR, "error | warning | info", False),
        C("char_start", I64, "offset into trajectories.output", False),
        C("char_end", I64, "end offset (exclusive)", False),
        C("message", STR, "explanation (from the taxonomy's template)", False),
        C("rule_id", STR, "rule that fired", False),
    ),
    (),  # source order: files by first step then path, records by line
)

STEPS = TableSpec(
    "steps",
    "Aggregates per (run, split, step).",
    (
        C("run", STR, "training run (see trajectories.run)", False),
        C("split", STR, "", False),
        C("step", I64, "null when the step is unknown"),
        C("trajectories", I64, "", False),
        C("calls", I64, "", False),
        C("malformed_calls", I64, "", False),
        C("malformed_rate", F64, "malformed_calls / calls (null when no calls)"),
        C("trajectories_with_malformed", I64, "", False),
        C("mean_score", F64, ""),
        C("final_answer_rate", F64, "share of trajectories whose last assistant turn has no call", False),
        C("category_counts", pa.map_(STR, I64), "calls per category (a call counts once per category)", False),
    ),
    ("run", "split", "step"),
)

INGEST_ERRORS = TableSpec(
    "ingest_errors",
    "Every record or file that could not be read (the good records of the same file are kept).",
    (
        C("source_path", STR, "", False),
        C("line", I64, "1-based line or record index, null for whole-file problems"),
        C("reason", STR, "what was wrong", False),
    ),
    ("source_path", "line", "reason"),
)

SCAN_TABLES: dict[str, TableSpec] = {
    t.name: t for t in (TRAJECTORIES, TURNS, CALLS, FINDINGS, STEPS, INGEST_ERRORS)
}

#: Registry of every table trajlab writes anywhere (scan, rescore, sft pool); other modules add theirs.
ALL_TABLES: dict[str, TableSpec] = dict(SCAN_TABLES)


def register(spec: TableSpec) -> TableSpec:
    """Add a table spec to :data:`ALL_TABLES` (used by ``trajlab schema`` and the README test)."""
    ALL_TABLES[spec.name] = spec
    return spec


def empty_table(spec: TableSpec) -> pa.Table:
    return spec.schema.empty_table()


def to_table(spec: TableSpec, rows: Sequence[dict[str, Any]] | pa.Table) -> pa.Table:
    """Build an Arrow table with exactly the spec's schema from row dicts (or cast an existing table)."""
    if isinstance(rows, pa.Table):
        return rows.select(spec.column_names).cast(spec.schema)
    cols = {c.name: [r.get(c.name) for r in rows] for c in spec.columns}
    return pa.table(cols, schema=spec.schema)


def sort_table(spec: TableSpec, table: pa.Table) -> pa.Table:
    if not spec.sort_key or table.num_rows == 0:
        return table
    keys = [(k, "ascending") for k in spec.sort_key]
    idx = pa.compute.sort_indices(table, sort_keys=keys)
    return table.take(idx)


def _umask_mode() -> int:
    um = os.umask(0)
    os.umask(um)
    return 0o666 & ~um


def make_readable(tmp: str | Path) -> None:
    """Give a ``mkstemp`` file (created 0600) the mode a normal file would get under the current umask."""
    os.chmod(tmp, _umask_mode())


def atomic_write_bytes(path: Path, data: bytes, *, fsync: bool = True) -> None:
    """Write ``data`` to a temp file beside ``path``, then rename it into place. ``fsync=False`` for caches
    (scan's part files), where a file lost in a power cut is only recomputed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            if fsync:
                os.fsync(f.fileno())
        make_readable(tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_json(path: Path, obj: Any, *, fsync: bool = True) -> None:
    atomic_write_bytes(path, (json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode(),
                       fsync=fsync)


def write_table(spec: TableSpec, table: pa.Table | Sequence[dict[str, Any]], path: Path, *, sort: bool = True) -> Path:
    """Write ``table`` as zstd Parquet at ``path`` atomically (temp file in the same dir, then rename).

    The table is cast to the spec's schema and sorted by its key, so identical rows give identical bytes.
    """
    table = to_table(spec, table)
    if sort:
        table = sort_table(spec, table)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        pq.write_table(
            table,
            tmp,
            compression=PARQUET_COMPRESSION,
            write_statistics=True,
            use_dictionary=True,
            row_group_size=64 * 1024,
        )
        make_readable(tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def write_parts(spec: TableSpec, parts: Iterable[Path], path: Path) -> Path:
    """Concatenate part files of one table into ``path`` (sorted, atomic); used to merge per-file results."""
    tables = [pq.read_table(p) for p in parts]
    table = pa.concat_tables(tables) if tables else empty_table(spec)
    return write_table(spec, table, path)


def table_path(out: Path | str, name: str) -> Path:
    return Path(out) / f"{name}.parquet"


def describe_tables(specs: Iterable[TableSpec] | None = None) -> list[dict[str, Any]]:
    """The documented schema as plain data (what ``trajlab schema --json`` prints)."""
    specs = list(specs) if specs is not None else list(ALL_TABLES.values())
    return [
        {
            "table": s.name,
            "doc": s.doc,
            "schema_version": SCHEMA_VERSION,
            "columns": [
                {"name": c.name, "type": str(c.type), "nullable": c.nullable, "doc": c.doc} for c in s.columns
            ],
        }
        for s in specs
    ]


#: Modules that register the table specs of the other commands (imported on demand by ``trajlab schema``).
SPEC_MODULES = ("trajlab.rescore.outputs", "trajlab.curate.writers")


def load_all_specs() -> dict[str, TableSpec]:
    """Every table spec: the scan's plus those registered by the rescore and SFT-pool modules."""
    import importlib

    for mod in SPEC_MODULES:
        try:
            importlib.import_module(mod)
        except ModuleNotFoundError as e:
            if not (e.name and mod.startswith(e.name)):
                raise
    return dict(ALL_TABLES)


def tables_markdown(specs: Iterable[TableSpec] | None = None) -> str:
    """The table reference as Markdown (the README's "Tables" section is this text; a test keeps them in sync)."""
    out: list[str] = []
    for d in describe_tables(specs):
        out.append(f"#### `{d['table']}`\n\n{d['doc']}\n")
        out.append("| column | type | null | meaning |\n|---|---|---|---|")
        for c in d["columns"]:
            doc = c["doc"].replace("|", "\\|")
            out.append(f"| `{c['name']}` | `{c['type']}` | {'yes' if c['nullable'] else 'no'} | {doc} |")
        out.append("")
    return "\n".join(out)
