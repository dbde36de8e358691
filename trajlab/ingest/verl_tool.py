"""verl-tool / Tool-RL-Box step records: ``verl_step_records/{run}/{name}-step-{N}.json``.

Each file is one JSON list (``-step-val-{N}.json`` for validation). Records carry ``id``, ``traj_ids``,
``prompt``, ``response`` (decoded with special tokens kept), ``score`` and bookkeeping keys. trajlab strips
the chat special tokens (``<|im_start|>``, ``<|im_end|>``, ``<|endoftext|>``) so the text matches what a verl
dump holds, and keeps the untouched text in ``extra.raw_prompt`` / ``extra.raw_response``. The kept role
headers decide the turns (only a ``<|im_start|>user``/``tool`` block is the environment's).
"""

from __future__ import annotations

from typing import Any

from trajlab.families.chatml import strip_specials
from trajlab.ingest.fields import prompt_hash, score_and_step
from trajlab.ingest.turns import chatml_pieces, split_turns, turns_from_pieces
from trajlab.model import IngestError, RawTrajectory, Turn

FORMAT = "verl_tool_json"
MAPPED_KEYS = ("prompt", "response", "score", "step")


def looks_like(obj: Any) -> bool:
    return isinstance(obj, dict) and "response" in obj and ("prompt" in obj or "traj_ids" in obj)


def _turns(resp: str, output: str) -> list[Turn]:
    """Turns of a response: where its ChatML role headers were kept, they say which blocks are the
    environment's (a ``<tool_response>`` the model wrote inside its own turn stays in that turn); otherwise the
    stripped text is split as a verl dump's."""
    cut = chatml_pieces(resp)
    if cut is None:
        return split_turns(output)
    pieces, roles = cut
    return turns_from_pieces([strip_specials(p) for p in pieces], roles)


def to_trajectory(
    obj: dict[str, Any], *, source_path: str, line: int, file_step: int | None, file_split: str | None
) -> tuple[RawTrajectory | None, list[IngestError]]:
    notes: list[IngestError] = []
    resp = obj.get("response")
    if not isinstance(resp, str):
        return None, [IngestError(source_path, line, "missing or non-string field 'response'; record skipped")]
    prompt = obj.get("prompt")
    if not isinstance(prompt, str):
        notes.append(IngestError(source_path, line, "missing or non-string field 'prompt'; kept with an empty prompt"))
        prompt = ""
    inp = strip_specials(prompt)
    output = strip_specials(resp)
    score, step, why = score_and_step(obj.get("score"), obj.get("step"), file_step)
    notes += [IngestError(source_path, line, n) for n in why]
    tid = obj.get("traj_ids")
    if isinstance(tid, str) and len(tid) > 2:
        group = tid[:-2] if tid[-2] == "_" else tid
    elif obj.get("id") is not None:
        group = str(obj["id"])
    else:
        group = "p:" + prompt_hash(inp)
    extra = {k: v for k, v in obj.items() if k not in MAPPED_KEYS}
    if inp != prompt:
        extra["raw_prompt"] = prompt
    if output != resp:
        extra["raw_response"] = resp
    return RawTrajectory(
        source_path=source_path,
        source_line=line,
        source_format=FORMAT,
        split=file_split or "train",
        step=step,
        group_id=group,
        score=score,
        input=inp,
        output=output,
        turns=_turns(resp, output),
        tools=None,
        tools_source=None,
        extra=extra,
        uid=tid if isinstance(tid, str) else None,
    ), notes
