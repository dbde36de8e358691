"""Generic OpenAI-messages records (JSONL or Parquet): SFT data and other frameworks' agent logs.

A record has ``messages`` (``system`` / ``user`` / ``assistant`` with optional structured ``tool_calls`` /
``tool``) and optionally ``tools`` (OpenAI schemas), a score (``score`` / ``reward``) and a ``step``.
trajlab renders it the way a verl dump would read after ``skip_special_tokens=True`` decoding:
``input`` = the messages before the first assistant message (``system\\n...\\nuser\\n...\\nassistant\\n``),
``output`` = assistant text + tool blocks (``\\nuser\\n<tool_response>\\n...\\n</tool_response>\\nassistant\\n``).
Structured tool calls are written in the Hermes form (``<tool_call>\\n{"name": ..., "arguments": ...}\\n
</tool_call>``); an ``arguments`` string that is not valid JSON is written as is, so the classifier reports it.
"""

from __future__ import annotations

import json
from typing import Any

from trajlab.ingest.fields import prompt_hash, score_and_step
from trajlab.ingest.tool_schemas import normalise_tools
from trajlab.ingest.turns import turns_from_pieces
from trajlab.model import IngestError, RawTrajectory

FORMAT = "openai_messages"
MAPPED_KEYS = ("messages", "tools", "score", "reward", "step")


def looks_like(obj: Any) -> bool:
    return isinstance(obj, dict) and isinstance(obj.get("messages"), list)


def _content(msg: dict[str, Any]) -> str:
    c = msg.get("content")
    if c is None:
        return ""
    if isinstance(c, str):
        return c
    if isinstance(c, list):  # content parts
        return "".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in c)
    return str(c)


def render_tool_call(tc: Any) -> str:
    fn = tc.get("function", tc) if isinstance(tc, dict) else {}
    name = fn.get("name") if isinstance(fn, dict) else None
    args = fn.get("arguments") if isinstance(fn, dict) else None
    if isinstance(args, str):
        try:
            args_text = json.dumps(json.loads(args), ensure_ascii=False)
        except json.JSONDecodeError:
            args_text = args  # keep the broken text so the classifier reports it
    else:
        args_text = json.dumps(args if args is not None else {}, ensure_ascii=False)
    return f'<tool_call>\n{{"name": {json.dumps(name, ensure_ascii=False)}, "arguments": {args_text}}}\n</tool_call>'


def to_trajectory(
    obj: dict[str, Any], *, source_path: str, line: int, file_step: int | None, file_split: str | None
) -> tuple[RawTrajectory | None, list[IngestError]]:
    notes: list[IngestError] = []
    msgs = obj.get("messages")
    if not isinstance(msgs, list) or not all(isinstance(m, dict) for m in msgs):
        return None, [IngestError(source_path, line, "field 'messages' is not a list of objects; record skipped")]
    first_asst = next((i for i, m in enumerate(msgs) if m.get("role") == "assistant"), len(msgs))
    prompt_parts = [f"{m.get('role', 'user')}\n{_content(m)}" for m in msgs[:first_asst]]
    inp = "\n".join(prompt_parts) + ("\n" if prompt_parts else "") + "assistant\n"
    out: list[str] = []
    roles: list[str] = []  # the turn role of each piece of ``out``: the messages say where turns begin
    pending_tool: list[str] = []

    def flush_tools() -> None:
        if pending_tool:
            body = "\n".join(f"<tool_response>\n{t}\n</tool_response>" for t in pending_tool)
            out.append(f"\nuser\n{body}\nassistant\n")
            roles.append("tool")
            pending_tool.clear()

    for m in msgs[first_asst:]:
        role = m.get("role")
        if role == "assistant":
            flush_tools()
            text = _content(m)
            calls = m.get("tool_calls") or []
            rendered = [render_tool_call(tc) for tc in calls if isinstance(tc, dict)]
            if rendered:
                text = (text.rstrip("\n") + "\n\n" if text.strip() else "") + "\n".join(rendered)
            out.append(text)
            roles.append("assistant")
        elif role in ("tool", "function", "ipython"):
            pending_tool.append(_content(m))
        else:  # a later user turn: keep it as a tool-like block so nothing is lost
            flush_tools()
            out.append(f"\nuser\n<tool_response>\n{_content(m)}\n</tool_response>\nassistant\n")
            roles.append("tool")
    flush_tools()
    output = "".join(out)
    tools = normalise_tools(obj.get("tools"))
    score, step, why = score_and_step(obj.get("score", obj.get("reward")), obj.get("step"), file_step)
    notes += [IngestError(source_path, line, n) for n in why]
    extra = {k: v for k, v in obj.items() if k not in MAPPED_KEYS}
    extra["messages"] = msgs
    return RawTrajectory(
        source_path=source_path,
        source_line=line,
        source_format=FORMAT,
        split=file_split or "train",
        step=step,
        group_id="p:" + prompt_hash(inp),
        score=score,
        input=inp,
        output=output,
        turns=turns_from_pieces(out, roles),
        tools=tools,
        tools_source="record" if tools else None,
        extra=extra,
        tool_format_hint="hermes" if any(m.get("tool_calls") for m in msgs) else None,
    ), notes
