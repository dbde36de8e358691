"""Builders of verl-format dump lines for tests (the exact shapes verl 0.7.x / 0.9.x write, see
shared spec verl-formats.md §1): Qwen3.5 XML tool prompts, Hermes prompts, both turn separators."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

SEARCH_WEB = {
    "type": "function",
    "function": {
        "name": "search_web",
        "description": "Search the web and return the top results for each query.",
        "parameters": {
            "type": "object",
            "properties": {"queries": {"type": "array", "items": {"type": "string"}, "description": "Search queries."}},
            "required": ["queries"],
        },
    },
}
FETCH_WEB = {
    "type": "function",
    "function": {
        "name": "fetch_web",
        "description": "Fetch web pages and return their text.",
        "parameters": {
            "type": "object",
            "properties": {"urls": {"type": "array", "items": {"type": "string"}, "description": "URLs to fetch."}},
            "required": ["urls"],
        },
    },
}
TOOLS = [SEARCH_WEB, FETCH_WEB]


def qwen35_prompt(question: str, tools: list[dict[str, Any]] = TOOLS) -> str:
    """A Qwen3.5-style prompt as verl dumps it (special tokens stripped)."""
    lines = "\n".join(json.dumps(t, ensure_ascii=False) for t in tools)
    return (
        "system\n# Tools\n\nYou have access to the following functions:\n\n<tools>\n"
        f"{lines}\n</tools>\n\n"
        "If you choose to call a function ONLY reply in the following format with NO suffix:\n\n"
        "<tool_call>\n<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1\n</parameter>\n"
        "</function>\n</tool_call>\n\n<IMPORTANT>\nReminder:\n- Function calls MUST follow the specified format\n"
        "- Required parameters MUST be specified\n</IMPORTANT>\n"
        f"user\n{question}\nassistant\n"
    )


def hermes_prompt(question: str, tools: list[dict[str, Any]] = TOOLS) -> str:
    lines = "\n".join(json.dumps(t, ensure_ascii=False) for t in tools)
    return (
        "system\nYou are a helpful assistant.\n\n# Tools\n\nYou may call one or more functions to assist with the user "
        "query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
        f"{lines}\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
        '<tool_call></tool_call> XML tags:\n<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n'
        f"</tool_call>\nuser\n{question}\nassistant\n"
    )


def xml_call(name: str, **params: Any) -> str:
    body = "".join(
        f"<parameter={k}>\n{json.dumps(v, ensure_ascii=False) if not isinstance(v, str) else v}\n</parameter>\n"
        for k, v in params.items()
    )
    return f"<tool_call>\n<function={name}>\n{body}</function>\n</tool_call>"


def hermes_call(name: str, **args: Any) -> str:
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": args}, ensure_ascii=False) + "\n</tool_call>"


def tool_block(text: str, version: str = "0.9") -> str:
    lead = "\n" if version.startswith("0.9") else ""
    return f"{lead}user\n<tool_response>\n{text}\n</tool_response>\nassistant\n"


def output_of(turns: list[str], responses: list[str], version: str = "0.9") -> str:
    """Interleave assistant turns with tool blocks: a0 + tool(r0) + a1 + ..."""
    out = turns[0]
    for a, r in zip(turns[1:], responses, strict=False):
        out += tool_block(r, version) + a
    return out


def v1_line(step: int, inp: str, out: str, score: float, uid: str | None = None, session: int = 0) -> dict[str, Any]:
    return {"input": inp, "output": out, "gts": "x", "score": score, "step": step,
            "uid": f"{uid or uuid.UUID(int=step).hex}_{session}_0"}


def legacy_line(step: int, inp: str, out: str, score: float, **extra: Any) -> dict[str, Any]:
    return {"input": inp, "output": out, "gts": "x", "score": score, "step": step, "acc": score, **extra}


def write_jsonl(path: Path, rows: list[dict[str, Any]], tail: bytes = b"") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False).encode() + b"\n")
        f.write(tail)
    return path
