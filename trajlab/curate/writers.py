"""Parquet layouts of the pool (one table spec per ``--style``) and the row builders that fill them.

* ``messages`` (default, verl ``MultiTurnSFTDataset``): ``messages`` = list of ``{role, content}`` with the exact
  text, ``enable_thinking`` (bool, never null: verl fails on nulls), provenance columns. There is no ``tools``
  column on purpose: the system message already holds the tool block the model saw, and passing ``tools`` to
  the chat template would render it twice. Every struct has exactly the keys ``role`` and ``content`` and
  tool calls stay literal text, so Parquet's struct-union padding (``"x": null`` in arguments) cannot occur.
* ``prompt-response`` (verl ``SFTDataset``, ``data.prompt_key``/``data.response_key``): one row per assistant
  message: ``prompt`` = every message before it, ``response`` = its text.
* ``openai``: ``messages`` with structured ``tool_calls`` (``{type, function: {name, arguments}}``, arguments a
  JSON string) cut out of the assistant text, ``tools`` as a JSON string of OpenAI tool schemas.

Rows are sorted by ``sample_id`` (a hash), and written atomically with :func:`trajlab.tables.write_table`, so
the same input and seed give the same bytes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from trajlab.curate.samples import Sample
from trajlab.curate.scan_tables import parse_tools
from trajlab.curate.specs import SPECS
from trajlab.tables import write_table


def _provenance(s: Sample) -> dict[str, Any]:
    return {
        "kind": s.kind,
        "trajectory_id": s.trajectory_id,
        "step": s.step,
        "group_id": s.group_id,
        "prompt_key": s.prompt_key,
        "split": s.split,
        "categories": list(s.categories),
        "source_call_id": s.source_call_id,
        "hint": s.hint_id,
        "tool_format": s.tool_format,
        "score": s.score,
        "n_tokens": s.n_tokens,
    }


def openai_tools(tools_json: str | None) -> str | None:
    tools = parse_tools(tools_json)
    if not tools:
        return None
    return json.dumps([{"type": "function", "function": dict(t)} for t in tools], ensure_ascii=False, sort_keys=True)


def rows_for(s: Sample, style: str) -> list[dict[str, Any]]:
    """The rows one sample gives in ``style``."""
    prov = _provenance(s)
    if style == "messages":
        return [
            {
                "sample_id": s.sample_id,
                "messages": [m.as_dict() for m in s.messages],
                "enable_thinking": s.enable_thinking,
                **prov,
            }
        ]
    if style == "prompt-response":
        rows = []
        turn = 0
        for i, m in enumerate(s.messages):
            if m.role != "assistant":
                continue
            rows.append(
                {
                    "sample_id": s.sample_id,
                    "turn": turn,
                    "prompt": [x.as_dict() for x in s.messages[:i]],
                    "response": m.content,
                    "enable_thinking": s.enable_thinking,
                    **prov,
                }
            )
            turn += 1
        return rows
    msgs = []
    for m in s.messages:
        calls = None
        content = m.content
        if m.role == "assistant" and m.tool_calls:
            calls = [{"type": "function", "function": {"name": c.name, "arguments": c.arguments}} for c in m.tool_calls]
            content = m.text if m.text is not None else m.content
        msgs.append({"role": m.role, "content": content or "", "tool_calls": calls})
    return [
        {
            "sample_id": s.sample_id,
            "messages": msgs,
            "tools": openai_tools(s.tools_json),
            "enable_thinking": s.enable_thinking,
            **prov,
        }
    ]


def write_samples(samples: list[Sample], style: str, path: Path) -> int:
    """Write ``samples`` in ``style`` to ``path`` (atomic, sorted); returns the number of rows."""
    rows = [r for s in samples for r in rows_for(s, style)]
    write_table(SPECS[style], rows, path)
    return len(rows)
