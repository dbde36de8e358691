"""verl rollout / validation generation dumps (``trainer.rollout_data_dir``, ``trainer.validation_data_dir``).

One ``{global_step}.jsonl`` per step and directory, one JSON object per line with ``input``, ``output``,
``gts``, ``score``, ``step`` and then either the reward function's extra keys (legacy trainer: verl 0.7.x,
0.8.x, 0.9.x with ``use_v1=false``) or ``uid`` = ``{prompt_uuid}_{session}_{index}`` (V1 trainer, verl 0.9.x).
Validation dumps also carry ``reward``. Keys trajlab does not map to a column are kept in ``extra``.
"""

from __future__ import annotations

from typing import Any

from trajlab.ingest.fields import coerce_float, coerce_int, prompt_hash
from trajlab.ingest.turns import split_turns
from trajlab.model import IngestError, RawTrajectory

FORMAT = "verl_jsonl"
MAPPED_KEYS = ("input", "output", "step", "score", "uid")


def looks_like(obj: Any) -> bool:
    return isinstance(obj, dict) and "output" in obj and ("input" in obj or "score" in obj or "step" in obj)


def accepts(obj: Any) -> bool:
    """Per-record check (looser than detection): a dump line missing ``output`` gets a precise message."""
    return isinstance(obj, dict) and any(k in obj for k in ("input", "output", "step", "score", "gts"))


def group_from_uid(uid: str) -> str | None:
    """GRPO group of a V1 uid ``{uuid}_{session}_{index}`` (the uuid part)."""
    parts = uid.rsplit("_", 2)
    if len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit():
        return parts[0]
    return None


def to_trajectory(
    obj: dict[str, Any],
    *,
    source_path: str,
    line: int,
    file_step: int | None,
    file_split: str | None,
) -> tuple[RawTrajectory | None, list[IngestError]]:
    """Convert one parsed dump line; returns the record (or None when unusable) and notes for ingest_errors."""
    notes: list[IngestError] = []

    def note(reason: str) -> None:
        notes.append(IngestError(source_path, line, reason))

    output = obj.get("output")
    if not isinstance(output, str):
        reason = "missing field 'output'" if output is None else f"field 'output' is {type(output).__name__}, not a string"
        return None, [IngestError(source_path, line, reason + "; record skipped")]
    inp = obj.get("input")
    if inp is None:
        note("missing field 'input' (prompt); kept with an empty prompt, tool schemas unknown")
        inp = ""
    elif not isinstance(inp, str):
        note(f"field 'input' is {type(inp).__name__}, not a string; converted with str()")
        inp = str(inp)

    step, n = coerce_int(obj.get("step"), "step")
    if n:
        note(n)
    if step is None:
        step = file_step
        if "step" not in obj and step is None:
            note("no 'step' field and no step number in the file name; step is null")
    score, n = coerce_float(obj.get("score"), "score")
    if n:
        note(n)
    if "score" not in obj:
        note("missing field 'score'; stored as null")

    uid = obj.get("uid")
    uid = uid if isinstance(uid, str) and uid else None
    group = group_from_uid(uid) if uid else None
    if group is None:
        group = "p:" + prompt_hash(inp)
    split = file_split or ("val" if "reward" in obj else "train")
    extra = {k: v for k, v in obj.items() if k not in MAPPED_KEYS}
    if uid:
        extra["uid"] = uid
    rec = RawTrajectory(
        source_path=source_path,
        source_line=line,
        source_format=FORMAT,
        split=split,
        step=step,
        group_id=group,
        score=score,
        input=inp,
        output=output,
        turns=split_turns(output),
        tools=None,
        tools_source=None,
        extra=extra,
        uid=uid,
    )
    return rec, notes
