"""SkyRL evaluation dumps: ``trainer.dump_eval_results`` (on by default) writes
``{export_path}/dumped_evals/global_step_{N}_evals/{data_source}.jsonl`` (``eval_only/`` for an evaluation without
training), one JSON line per sample (``dump_per_dataset_eval_results`` in ``skyrl/train/utils/trainer_utils.py``).

Each line: ``input_prompt`` and ``output_response`` (``tokenizer.decode`` with its defaults, so special tokens are
**kept**: role markers and end-of-turn tokens are in the text, as in verl-tool's records), ``score`` (a number, or
one reward per token that SkyRL sums), ``stop_reason`` (``stop``, ``length``, ...), ``env_class``, ``env_extras`` and
``data_source``. The directory's ``aggregated_results.jsonl`` holds the step's metrics, not samples; it is not a dump.
The step comes from the directory name; every record is validation data.
"""

from __future__ import annotations

import math
import re
from pathlib import PurePosixPath
from typing import Any

from trajlab.ingest.fields import coerce_float, prompt_hash
from trajlab.ingest.turns import split_turns
from trajlab.model import IngestError, RawTrajectory

FORMAT = "skyrl_eval_jsonl"
MAPPED_KEYS = ("input_prompt", "output_response", "score")
_STEP_DIR = re.compile(r"global_step_(\d{1,18})_evals")
#: the metrics file SkyRL writes beside the per-dataset dumps
AGGREGATED = "aggregated_results.jsonl"


def looks_like(obj: Any) -> bool:
    return isinstance(obj, dict) and "output_response" in obj and ("input_prompt" in obj or "stop_reason" in obj)


def accepts(obj: Any) -> bool:
    return isinstance(obj, dict) and ("output_response" in obj or "input_prompt" in obj)


def step_of(source_path: str) -> int | None:
    """The training step from the dump's directory (``global_step_40_evals``); None for ``eval_only``."""
    for part in reversed(PurePosixPath(source_path).parts[:-1]):
        m = _STEP_DIR.fullmatch(part)
        if m:
            return int(m.group(1))
    return None


def _score(v: Any) -> tuple[float | None, str | None]:
    if isinstance(v, list):  # token-level rewards: SkyRL's sequence reward is their sum
        nums = [float(x) for x in v if isinstance(x, (int, float)) and not isinstance(x, bool)]
        if len(nums) != len(v) or not all(math.isfinite(x) for x in nums):
            return None, "score is a list with non-numeric or non-finite entries; stored as null"
        return math.fsum(nums), None
    return coerce_float(v, "score")


def to_trajectory(
    obj: dict[str, Any], *, source_path: str, line: int, file_step: int | None, file_split: str | None,
) -> tuple[RawTrajectory | None, list[IngestError]]:
    """Convert one parsed dump line."""
    notes: list[IngestError] = []
    output = obj.get("output_response")
    if not isinstance(output, str):
        reason = "missing field 'output_response'" if output is None else "field 'output_response' is not a string"
        return None, [IngestError(source_path, line, reason + "; record skipped")]
    inp = obj.get("input_prompt")
    if not isinstance(inp, str):
        notes.append(IngestError(source_path, line, "field 'input_prompt' is missing or not a string; "
                                                    "kept with an empty prompt"))
        inp = ""
    score, why = _score(obj.get("score"))
    if why:
        notes.append(IngestError(source_path, line, why))
    step = step_of(source_path)
    if step is None:
        step = file_step if "eval_only" not in PurePosixPath(source_path).parts else None
    extra = {k: v for k, v in obj.items() if k not in MAPPED_KEYS}
    rec = RawTrajectory(
        source_path=source_path,
        source_line=line,
        source_format=FORMAT,
        split=file_split or "val",
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
