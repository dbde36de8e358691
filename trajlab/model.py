"""The in-memory records that flow between trajlab's stages.

``ingest`` produces :class:`RawTrajectory` records (and :class:`IngestError` for what it could not read);
``toolcalls`` turns each assistant turn into a :class:`TurnAnalysis` (calls, findings, spans);
``scan`` flattens both into the Parquet tables described in :mod:`trajlab.tables`.

Offsets: every ``start``/``end`` in a :class:`TurnAnalysis` is a character offset into the *turn text*
handed to the classifier. ``scan`` adds the turn's ``char_start`` so the tables hold offsets into the
trajectory's ``output`` string (Python ``str`` indices, i.e. Unicode code points, end exclusive).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Severity = Literal["error", "warning", "info"]
Role = Literal["assistant", "tool"]
SpanKind = Literal["structural", "function_name", "param_name", "param_value", "text", "think"]


@dataclass(slots=True)
class Turn:
    """One segment of a trajectory's ``output``: model text (``assistant``) or a tool/user block (``tool``).

    For verl dumps a ``tool`` turn holds the whole decoded scaffold between two assistant turns, e.g.
    ``"\\nuser\\n<tool_response>\\n...\\n</tool_response>\\nassistant\\n"``, so that the turns tile ``output``
    exactly (``output[char_start:char_end] == text``).
    """

    index: int
    role: Role
    text: str
    char_start: int
    char_end: int


@dataclass(slots=True)
class ExactTokens:
    """The exact token sequence of a trajectory, from sources that log it (NeMo-RL train data; verl rollout
    traces hold the same data): prompt, generations and environment in one sequence, position by position.

    ``generated[i]`` is True where the policy sampled token ``i`` (the loss mask); ``logprob`` is the inference
    engine's log-prob of the sampled token and ``train_logprob`` the trainer's (None where not logged, and at
    non-generated positions of sources that log zeros there). ``turn[i]`` is the index of the trajectory turn
    holding position ``i`` (-1: the prompt), ``text[i]`` the token's decoded string.
    """

    ids: list[int]
    generated: list[bool]
    logprob: list[float | None]
    train_logprob: list[float | None]
    turn: list[int]
    text: list[str]
    tokenizer: str  # what decoded the ids (an alias such as qwen3.5, or a directory)


@dataclass(slots=True)
class RawTrajectory:
    """One trajectory as read from a source file, before classification."""

    source_path: str
    source_line: int  # 1-based line (JSONL) or 1-based record index (JSON list / Parquet)
    source_format: str  # a format name of trajlab.ingest.detect.FORMATS (verl_jsonl, nemo_rl_jsonl, slime_pt, ...)
    split: str  # train | val
    step: int | None
    group_id: str
    score: float | None
    input: str
    output: str
    turns: list[Turn]
    tools: list[dict[str, Any]] | None  # normalised function schemas: {"name", "description", "parameters"}
    tools_source: str | None  # prompt_json | prompt_xml | tools_file | record | None
    extra: dict[str, Any]
    truncated: bool = False
    tool_format_hint: str | None = None  # what the source says about the call format, if anything
    uid: str | None = None
    warnings: list[str] = field(default_factory=list)  # non-fatal notes (e.g. NaN score)
    run: str = ""  # the training run (experiment) the record belongs to, from its file's directory
    sample: int | None = None  # the sample's index within its record, for sources with several per line (NeMo-RL)
    tokens: ExactTokens | None = None  # exact token ids and log-probs, when the source logs them


@dataclass(slots=True)
class IngestError:
    """A record (or whole file) that could not be read: kept in the ``ingest_errors`` table."""

    source_path: str
    line: int | None
    reason: str


@dataclass(slots=True)
class Span:
    """A lexical span of an assistant turn (offsets into the turn text)."""

    kind: SpanKind
    start: int
    end: int
    call_index: int | None = None


@dataclass(slots=True)
class Finding:
    """One problem found in a turn (offsets into the turn text)."""

    category: str
    severity: Severity
    start: int
    end: int
    message: str
    rule_id: str
    call_index: int | None = None  # index into TurnAnalysis.calls, None for turn-level findings


@dataclass(slots=True)
class ParsedCall:
    """One tool call (well-formed or not) found in an assistant turn."""

    call_index: int
    format: str  # qwen3_coder | hermes | foreign
    raw: str
    start: int
    end: int
    function_name: str | None  # as written
    matched_tool: str | None  # declared tool this call resolves to (exact or via a confident repair)
    arguments: Any  # parsed arguments (dict when parseable), converted by schema type like verl does
    status: Literal["ok", "malformed"]
    categories: list[str]
    repaired: str | None = None  # corrected call text in the same format, when exactly one repair is plausible
    repaired_arguments: Any = None
    repair_note: str | None = None  # why there is (or is not) a repair
    # what verl's parser for the turn's format executes for this call's text (trajlab.toolcalls.verl_parser):
    # as_intended | differently | dropped; None when the format is not one verl's reading is modelled for
    verl_executes: str | None = "as_intended"
    verl_function_name: str | None = None  # verl's name and arguments when it executes the call differently
    verl_arguments: Any = None


@dataclass(slots=True)
class TurnAnalysis:
    """What the classifier found in one assistant turn."""

    calls: list[ParsedCall]
    findings: list[Finding]
    spans: list[Span]


@dataclass(slots=True)
class TurnContext:
    """Facts about a turn's position and its prompt that some checks need."""

    is_last_turn: bool = True
    output_truncated: bool = False  # the whole output hit the length limit (verl `response_length`)
    forbids_suffix: bool = False  # the prompt says: ONLY reply in the call format with NO suffix
    schema_known: bool = False
