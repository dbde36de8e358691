"""TRL completion logs: ``GRPOConfig(log_completions=True)`` writes ``{output_dir}/completions/
completions_{global_step:05d}.parquet`` at every logging step (``GRPOTrainer.log``, with pandas' ``to_parquet``).

One row per completion of the last generation batch: ``step`` (the trainer's global step), ``prompt`` and
``completion`` (text decoded with ``skip_special_tokens=True``, so a chat template's role markers are gone, as in
verl's dumps), one float column per reward function (named after it), the columns reward functions added with
``log_extra``, and ``advantage``; some versions write ``mode`` (``train`` / ``eval``) first, and newer ones put eval
logs under ``completions/eval/``.

The score is the sum of the reward columns (TRL's default ``reward_weights`` are all 1; a NaN reward — a function
that returned None — is left out of the sum). The reward columns are the numeric columns other than ``step`` and
``advantage`` that sit before the first ``log_extra`` column; a numeric ``log_extra`` column is told apart only by
a ``trajlab/`` name (what :mod:`trajlab.trl.reward` writes). Every column is kept in ``extra``. Completions of one
prompt share a group (TRL repeats each prompt ``num_generations`` times).
"""

from __future__ import annotations

import math
import re
from pathlib import PurePosixPath
from typing import Any

from trajlab.ingest.fields import coerce_int, prompt_hash
from trajlab.ingest.turns import split_turns
from trajlab.model import IngestError, RawTrajectory

FORMAT = "trl_completions"
#: the columns TRL's writer always puts in a completions file
REQUIRED_COLUMNS = ("step", "prompt", "completion")
MAPPED_KEYS = ("step", "prompt", "completion", "mode")
NAME = re.compile(r"completions_(\d{1,18})\.parquet")
#: log_extra columns trajlab's TRL reward function writes (never a reward column)
OWN_PREFIX = "trajlab/"


def looks_like_columns(names: set[str]) -> bool:
    """Whether a Parquet file's columns are a TRL completions table."""
    return all(c in names for c in REQUIRED_COLUMNS) and "messages" not in names and "output" not in names


def looks_like(obj: Any) -> bool:
    return isinstance(obj, dict) and all(c in obj for c in REQUIRED_COLUMNS) and "output" not in obj


def accepts(obj: Any) -> bool:
    return isinstance(obj, dict) and "completion" in obj


def reward_columns(row: dict[str, Any]) -> list[str]:
    """The reward functions' columns of a row, in file order."""
    out = []
    for k, v in row.items():
        if k in MAPPED_KEYS or k == "advantage" or k.startswith(OWN_PREFIX):
            continue
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            out.append(k)
        elif v is None and out:  # a null reward (all-None function) keeps its place among the rewards
            out.append(k)
        elif out:
            break  # the first non-numeric column after the rewards: log_extra columns start here
    return out


def _text(v: Any) -> str | None:
    """A prompt or completion as text: a string, or a conversational list of messages joined by role."""
    if isinstance(v, str):
        return v
    if isinstance(v, list):
        parts = []
        for m in v:
            if isinstance(m, dict) and isinstance(m.get("content"), str):
                parts.append(f"{m.get('role', '')}\n{m['content']}\n")
        return "".join(parts)
    return None


def to_trajectory(
    obj: dict[str, Any], *, source_path: str, line: int, file_step: int | None, file_split: str | None,
) -> tuple[RawTrajectory | None, list[IngestError]]:
    """Convert one row of a completions file (``line``: its 1-based row number)."""
    notes: list[IngestError] = []
    output = _text(obj.get("completion"))
    if output is None:
        return None, [IngestError(source_path, line, "field 'completion' is missing or not text; row skipped")]
    inp = _text(obj.get("prompt"))
    if inp is None:
        notes.append(IngestError(source_path, line, "field 'prompt' is missing or not text; kept with an empty prompt"))
        inp = ""
    step, why = coerce_int(obj.get("step"), "step")
    if why:
        notes.append(IngestError(source_path, line, why))
    if step is None:
        m = NAME.fullmatch(PurePosixPath(source_path).name)
        step = int(m.group(1)) if m else file_step
    total, n = 0.0, 0
    cols = reward_columns(obj)
    for c in cols:
        v = obj.get(c)
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
            total += float(v)
            n += 1
    score = total if n else None
    if cols and not n:
        notes.append(IngestError(source_path, line, f"every reward column ({', '.join(cols)}) is null; score is null"))
    mode = obj.get("mode")
    split = file_split or ("val" if mode == "eval" else "train")
    extra = {k: v for k, v in obj.items() if k not in ("prompt", "completion")}
    extra["reward_columns"] = cols
    rec = RawTrajectory(
        source_path=source_path,
        source_line=line,
        source_format=FORMAT,
        split=split,
        step=step,
        group_id="p:" + prompt_hash(inp),
        score=score,
        input=inp,
        output=output,
        turns=split_turns(output),
        tools=None,
        tools_source=None,
        extra=extra,
    )
    return rec, notes
