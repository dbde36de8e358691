"""Table specs of the SFT pool: one per ``--style`` (``messages``, ``prompt-response``, ``openai``) and the
format-OOD evaluation set. Rows are built by :mod:`trajlab.curate.writers` and :mod:`trajlab.curate.ood`.

The conversation column (a list of structs) comes last in each spec: fastparquet (pandas' other Parquet engine)
reads null counts by top-level column position and fails on a nullable scalar after such a column."""

from __future__ import annotations

import pyarrow as pa

from trajlab.tables import BOOL, F64, I32, I64, STR, C, TableSpec

MESSAGE = pa.struct([pa.field("role", STR), pa.field("content", STR)])
TOOL_CALL = pa.struct(
    [
        pa.field("type", STR),
        pa.field("function", pa.struct([pa.field("name", STR), pa.field("arguments", STR)])),
    ]
)
OPENAI_MESSAGE = pa.struct(
    [pa.field("role", STR), pa.field("content", STR), pa.field("tool_calls", pa.list_(TOOL_CALL))]
)

_PROVENANCE = (
    C("kind", STR, "positive | error_demo | hint", False),
    C("trajectory_id", STR, "source trajectory (trajectories.trajectory_id)", False),
    C("step", I64, "training step of the source trajectory"),
    C("group_id", STR, "GRPO prompt group of the source trajectory", False),
    C("prompt_key", STR, "hash of the prompt text; the unit of the train/val split", False),
    C("split", STR, "train | val (by prompt, so no prompt is on both sides)", False),
    C("categories", pa.list_(STR), "error_demo: the broken call's categories; hint: the category hinted at", False),
    C("source_call_id", STR, "error_demo: the broken call (calls.call_id); null otherwise"),
    C("hint", STR, "hint: the hint template used (category id or low_score); null otherwise"),
    C("tool_format", STR, "call format of the source trajectory (qwen3_coder, hermes, glm45, ...) or none"),
    C("score", F64, "reward of the source trajectory (positive, hint)"),
    C("n_tokens", I64, "tokens of the rendered conversation (only with --tokenizer)"),
)

MESSAGES_SPEC = TableSpec(
    "sft_messages",
    "SFT pool rows, style `messages` (verl MultiTurnSFTDataset: data.messages_key=messages).",
    (
        C("sample_id", STR, "stable id of the sample (hash of kind, trajectory, call, hint)", False),
        C("enable_thinking", BOOL, "the trajectory shows thinking mode (think blocks / open <think> prompt)", False),
        *_PROVENANCE,
        C("messages", pa.list_(MESSAGE), "chat messages {role, content}: exact prompt and model text", False),
    ),
    ("sample_id",),
)

PROMPT_RESPONSE_SPEC = TableSpec(
    "sft_prompt_response",
    "SFT pool rows, style `prompt-response`: one row per assistant message (data.prompt_key/response_key).",
    (
        C("sample_id", STR, "stable id of the sample the row comes from", False),
        C("turn", I32, "0-based index of the response among the sample's assistant messages", False),
        C("response", STR, "the assistant message to train", False),
        C("enable_thinking", BOOL, "as in the messages style", False),
        *_PROVENANCE,
        C("prompt", pa.list_(MESSAGE), "every message before the response", False),
    ),
    ("sample_id", "turn"),
)

OPENAI_SPEC = TableSpec(
    "sft_openai",
    "SFT pool rows, style `openai`: structured tool_calls (arguments as JSON strings).",
    (
        C("sample_id", STR, "stable id of the sample", False),
        C("tools", STR, "JSON list of OpenAI tool schemas declared in the prompt (null when unknown)"),
        C("enable_thinking", BOOL, "as in the messages style", False),
        *_PROVENANCE,
        C("messages", pa.list_(OPENAI_MESSAGE), "{role, content, tool_calls}; content never null", False),
    ),
    ("sample_id",),
)

SPECS = {"messages": MESSAGES_SPEC, "prompt-response": PROMPT_RESPONSE_SPEC, "openai": OPENAI_SPEC}

OOD_SPEC = TableSpec(
    "sft_ood_eval",
    "Format-OOD evaluation prompts (held-back prompts, renamed tools and/or the other call format).",
    (
        C("sample_id", STR, "stable id (hash of prompt and variant)", False),
        C("variant", STR, "renamed | reformatted | renamed+reformatted", False),
        C("reference", STR, "first assistant turn of a clean trajectory, calls re-rendered; null if none"),
        C("tool_format", STR, "call format the prompt now asks for", False),
        C("source_tool_format", STR, "call format of the original prompt", False),
        C("tools", STR, "JSON list of the (renamed) OpenAI tool schemas", False),
        C("rename_map", STR, "JSON object old name -> new name ({} for `reformatted`)", False),
        C("expected_tools", pa.list_(STR), "tool names a correct answer may call", False),
        C("trajectory_id", STR, "source trajectory of the prompt (and of the reference)", False),
        C("group_id", STR, "", False),
        C("prompt_key", STR, "hash of the original prompt (a validation prompt of the pool)", False),
        C("step", I64, "step of the source trajectory"),
        C("prompt", pa.list_(MESSAGE), "system (with the re-rendered tool block) and user messages", False),
    ),
    ("prompt_key", "variant"),
)
