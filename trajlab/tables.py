"""Table specs and deterministic Parquet writes: the :class:`TableSpec` type, the scan's six tables, and
:func:`write_table`, which writes any spec'd table.

A :class:`TableSpec` is a table's name, Arrow schema, sort key and a one-line description per column. The
scan's specs live here; ``rescore`` and the SFT pool declare theirs in :mod:`trajlab.rescore.specs` and
:mod:`trajlab.curate.specs`; :mod:`trajlab.table_registry` lists every one (``trajlab schema`` prints it, the
generated ``docs/reference/tables.md`` documents it). Writes are atomic (:mod:`trajlab.atomic`), and rows are sorted by the table's key before
writing so the same input gives the same bytes.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from trajlab.atomic import atomic_path
from trajlab.ownfiles import PARQUET_KEY

#: Bumped whenever a column is added, removed, renamed or changes type.
#: 1.1: calls.verl_executes, calls.verl_function_name, calls.verl_arguments (verl's reading of each call).
#: 1.2: trajectories.run; steps one row per (run, split, step) (was per (split, step)).
#: 1.4: trajectories.end_reason (why an output is truncated or has no final answer).
#:      rollout_tokens (exact tokens of sources that log them); steps.generated_tokens, control_logprob_mean,
#:      control_low_prob_share, logprob_mismatch, control_logprob_mismatch.
#:      the metrics table (the trainer's logged metrics per run and step).
#: 1.5: calls.status gains ``warning`` (warnings only: the call runs; ``malformed`` now means an error finding);
#:      steps.warning_calls, steps.warning_rate; ingest_errors.severity (error | note: nothing lost);
#:      trajectories.end_reason gains the ``stopped_in_*`` reasons (truncated only where the length limit was hit).
SCHEMA_VERSION = "1.5"

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
            metadata={PARQUET_KEY: self.name.encode(), b"trajlab.schema_version": SCHEMA_VERSION.encode()},
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
F32 = pa.float32()

TRAJECTORIES = TableSpec(
    "trajectories",
    "One row per trajectory (one dump line / record).",
    (
        C("trajectory_id", STR, "stable id: hash of source_path, the record index and the file's content (sha1)", False),
        C("source_path", STR, "input file, relative to the scanned root (several roots: prefixed with the root's name)", False),
        C("source_line", I64, "1-based line (JSONL) or record index (JSON list / Parquet)", False),
        C("source_format", STR, "verl_jsonl | verl_tool_json | openai_messages | nemo_rl_jsonl | trl_completions | "
          "skyrl_eval_jsonl | slime_pt", False),
        C("run", STR, "training run (experiment): the file's directory, split dir folded, or --run NAME", False),
        C("split", STR, "train | val", False),
        C("step", I64, "training step (from the record, else from the file name)"),
        C("group_id", STR, "GRPO prompt group: uid prefix (verl V1) or a hash of the prompt", False),
        C("score", F64, "reward as dumped (null when missing or not a number)"),
        C("tool_format", STR, "call format used for classification: one of `--tool-format`'s choices (the call "
          "formats of the families reference, from the registry) or none"),
        C("n_turns", I32, "number of turns (assistant + tool) in the output", False),
        C("n_calls", I32, "tool calls found in assistant turns", False),
        C("n_malformed_calls", I32, "calls with status malformed", False),
        C("has_final_answer", BOOL, "the last assistant turn has text outside <think> and no tool call, and the output is not "
          "truncated (a complete <answer> after a <think> never closed counts)", False),
        C("truncated", BOOL, "the output stops inside a structure it opened: a call or parameter, a <think> with no "
          "answer after it, an <answer> never closed, a tool response block (hit the length limit)", False),
        C("end_reason", STR, "why the output is truncated or has no final answer (null: a final answer): open_call | "
          "open_think | open_answer | open_tool_response | call_pending | after_tool_response | empty_answer | "
          "no_assistant_turn (trajlab.ending.END_REASONS)"),
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
          "schema type like verl's parser (numbers exactly; anyOf/oneOf/nullable by the first fitting branch; JSON arrays "
          "with true/false/null and a string's text null as written)"),
        C("status", STR, "ok | warning | malformed: malformed when a finding on the call is an error (it breaks), "
          "warning when its findings are warnings only (it runs, e.g. an integer for a string verl converts)",
          False),
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
        C("malformed_calls", I64, "calls with status malformed (an error finding: the call breaks)", False),
        C("malformed_rate", F64, "malformed_calls / calls (null when no calls)"),
        C("warning_calls", I64, "calls with status warning (warnings only: the call runs; not in malformed_calls)",
          False),
        C("warning_rate", F64, "warning_calls / calls (null when no calls)"),
        C("trajectories_with_malformed", I64, "", False),
        C("mean_score", F64, ""),
        C("final_answer_rate", F64, "share of trajectories with a final answer (trajectories.has_final_answer)", False),
        C("category_counts", pa.map_(STR, I64), "malformed calls (status malformed) per category (a call counts once per category; warning-only calls are in warning_calls)", False),
        # from rollout_tokens: null for trajectories without exact tokens (verl's text dumps), unless the verl
        # reward's record files (trajlab.verl.records) lie under the scanned paths: then from them (train steps)
        C("generated_tokens", I64, "tokens the policy generated (the loss mask's sum; null: no exact tokens; verl "
          "runs: from the reward's record files when present)"),
        C("control_logprob_mean", F64, "mean inference log-prob of the sampled control tokens (rollout_tokens.control; "
          "verl runs: the records' control_logprob_mean, weighted by control tokens)"),
        C("control_low_prob_share", F64, "share of sampled control tokens whose inference probability is below "
          "the scan's --control-prob threshold (default 0.5; verl records: the reward's control_prob)"),
        C("logprob_mismatch", F64, "mean |inference - training| log-prob over generated tokens (train-inference "
          "mismatch; null when either is not logged)"),
        C("control_logprob_mismatch", F64, "the same mean at generated control tokens only"),
    ),
    ("run", "split", "step"),
)

ROLLOUT_TOKENS = TableSpec(
    "rollout_tokens",
    "One row per token of trajectories whose source logs exact token ids (NeMo-RL train data): prompt, "
    "generations and environment in one sequence. Empty for text-only sources (verl dumps).",
    (
        C("trajectory_id", STR, "", False),
        C("turn", I32, "turns.turn_index of the turn holding the token (-1: the prompt)", False),
        C("position", I32, "0-based position in the sequence (prompt first)", False),
        C("token_id", I64, "the token id as logged", False),
        C("token", STR, "the token decoded alone, special tokens kept (a piece of a multi-byte character: U+FFFD)", False),
        C("generated", BOOL, "the policy sampled this token (the loss mask / response mask)", False),
        C("logprob", F64, "the inference engine's log-prob of the sampled token (null where not generated or not logged)"),
        C("train_logprob", F64, "the trainer's log-prob of the token (null where not logged)"),
        C("control", BOOL, "a control token of the tokenizer's family and the trajectory's call format "
          "(rules/control_tokens.yaml)", False),
        C("environment", BOOL, "a token that starts the environment's part (a role header, <tool_response> or the "
          "family's equivalent); generated, it means the model wrote the tool response itself", False),
    ),
    (),  # source order
)

INGEST_ERRORS = TableSpec(
    "ingest_errors",
    "Every record or file that could not be read (the good records of the same file are kept), and notes on "
    "records read whole (severity note: nothing lost).",
    (
        C("source_path", STR, "", False),
        C("line", I64, "1-based line or record index, null for whole-file problems"),
        C("reason", STR, "what was wrong", False),
        C("severity", STR, "error (something was lost: a record, a line, a field) | note (read whole; only said, "
          "e.g. NeMo-RL's logged content differs from the decoded ids, which are used)", False),
    ),
    ("source_path", "line", "reason"),
)

METRICS = TableSpec(
    "metrics",
    "The trainer's own metrics (verl's file logger, TensorBoard event files and W&B run files), one row per run, "
    "step, name and log; join to steps on (run, step).",
    (
        C("run", STR, "the run the log belongs to (see trajlab.metrics.sources for the matching rule)", False),
        C("step", I64, "training step as logged", False),
        C("name", STR, "metric name as logged, e.g. critic/score/mean", False),
        C("value", F64, "the value (NaN where the log has NaN or null; TensorBoard values are float32)"),
        C("logger", STR, "file (verl's file logger JSON lines) | tensorboard (an event file) | wandb (a W&B run "
          "file; the W&B runs of one experiment merged by step, the later run's value on an overlap)", False),
        C("source", STR, "the log's path (relative to the path it was found under); for W&B the run file the "
          "value came from", False),
    ),
    ("run", "step", "name", "logger", "source"),
)

SCAN_TABLES: dict[str, TableSpec] = {
    t.name: t for t in (TRAJECTORIES, TURNS, CALLS, FINDINGS, STEPS, INGEST_ERRORS, ROLLOUT_TOKENS, METRICS)
}


def empty_table(spec: TableSpec) -> pa.Table:
    return spec.schema.empty_table()


def to_table(spec: TableSpec, rows: Sequence[dict[str, Any]] | pa.Table) -> pa.Table:
    """Build an Arrow table with exactly the spec's schema from row dicts (or cast an existing table)."""
    if isinstance(rows, pa.Table):
        table = rows.select(spec.column_names)
        return table if table.schema.equals(spec.schema, check_metadata=True) else table.cast(spec.schema)
    cols = {c.name: [r.get(c.name) for r in rows] for c in spec.columns}
    return pa.table(cols, schema=spec.schema)


def sort_table(spec: TableSpec, table: pa.Table) -> pa.Table:
    if not spec.sort_key or table.num_rows == 0:
        return table
    keys = [(k, "ascending") for k in spec.sort_key]
    try:  # the kernel itself: importing pyarrow.compute builds ~300 Python wrappers (0.03 s of every writer)
        from pyarrow._compute import SortOptions, TakeOptions, call_function
    except ImportError:  # pragma: no cover - a pyarrow that moved it
        import pyarrow.compute as pc

        return table.take(pc.sort_indices(table, sort_keys=keys))
    idx = call_function("sort_indices", [table], SortOptions(sort_keys=keys))
    return call_function("take", [table, idx], TakeOptions(boundscheck=True))  # Table.take loads pyarrow.compute


def write_table(spec: TableSpec, table: pa.Table | Sequence[dict[str, Any]], path: Path, *, sort: bool = True) -> Path:
    """Write ``table`` as zstd Parquet at ``path`` atomically (temp file in the same dir, then rename).

    The table is cast to the spec's schema and sorted by its key, so identical rows give identical bytes.
    """
    import pyarrow.parquet as pq

    table = to_table(spec, table)
    if sort:
        table = sort_table(spec, table)
    path = Path(path)
    with atomic_path(path) as tmp:
        pq.write_table(
            table,
            tmp,
            compression=PARQUET_COMPRESSION,
            write_statistics=True,
            use_dictionary=True,
            row_group_size=64 * 1024,
        )
    return path


def read_parts(spec: TableSpec, parts: Iterable[Path]) -> pa.Table:
    """The part files of one table, each cast to the spec's schema, concatenated in the order given (an empty
    table with the spec's schema when there are none); :func:`write_table` then sorts and writes the merge."""
    import pyarrow.parquet as pq

    tables = [to_table(spec, pq.read_table(p)) for p in parts]
    return pa.concat_tables(tables) if tables else empty_table(spec)


def table_path(out: Path | str, name: str) -> Path:
    return Path(out) / f"{name}.parquet"


#: what a category's count and share mean, said wherever they are shown (scan's summary, the report, the docs)
CATEGORY_SHARE = ("A category counts the malformed calls that carry it; its share is of all malformed calls. A call "
                  "can carry several categories, so the shares can add up to more than 100%.")
