"""Classify one ingested trajectory: pick its call format and tool schemas, run the classifier per turn.

This is the glue between :mod:`trajlab.ingest` and :mod:`trajlab.toolcalls`; ``scan`` calls it for every
record and flattens the result into table rows. Prompt-level work (format detection from the instructions,
tool-schema parsing, the "NO suffix" rule) is cached per distinct prompt, so a GRPO group costs one parse.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from trajlab.ingest.tool_schemas import tools_from_prompt
from trajlab.model import RawTrajectory, Turn, TurnAnalysis, TurnContext


@dataclass(slots=True)
class TrajectoryAnalysis:
    tool_format: str
    tools: list[dict[str, Any]] | None
    tools_json: str | None
    schema_checked: bool
    turns: list[tuple[Turn, TurnAnalysis | None]]  # analysis is None for tool turns
    n_calls: int
    n_malformed: int
    has_final_answer: bool
    truncated: bool


@dataclass(frozen=True, slots=True)
class PromptFacts:
    tool_format: str
    tools_json: str | None
    tools_source: str | None
    forbids_suffix: bool


@lru_cache(maxsize=2048)
def prompt_facts(input_text: str) -> PromptFacts:
    """Format, tools and format rules that the prompt alone determines (cached per distinct prompt)."""
    from trajlab.toolcalls import detect_tool_format, prompt_forbids_suffix

    tools, src = tools_from_prompt(input_text)
    return PromptFacts(
        tool_format=detect_tool_format(input_text, "", tools_source=src),
        tools_json=json.dumps(tools, ensure_ascii=False, sort_keys=True) if tools else None,
        tools_source=src,
        forbids_suffix=prompt_forbids_suffix(input_text),
    )


def analyze_trajectory(
    rec: RawTrajectory,
    *,
    tool_format: str | None = None,
    tools: list[dict[str, Any]] | None = None,
    rules_dirs: tuple[str, ...] = (),
    with_spans: bool = False,
) -> TrajectoryAnalysis:
    """Classify every assistant turn of ``rec``.

    ``tool_format`` / ``tools`` override what the prompt says (``--tool-format`` / ``--tools``); the record's
    own schemas (OpenAI-messages ``tools``) come next, then the prompt's ``<tools>`` block. ``with_spans``
    asks the classifier for the per-turn span tiling (the tables store none, so scan skips it).
    """
    from trajlab.toolcalls import analyze_turn, detect_tool_format

    facts = prompt_facts(rec.input)
    fmt = tool_format or facts.tool_format
    if fmt in (None, "", "none"):
        fmt = rec.tool_format_hint or detect_tool_format(rec.input, rec.output, tools_source=facts.tools_source)
    if tools is not None:
        tools_json = json.dumps(tools, ensure_ascii=False, sort_keys=True)
        use_tools = tools
    elif rec.tools:
        use_tools = rec.tools
        tools_json = json.dumps(rec.tools, ensure_ascii=False, sort_keys=True)
    else:
        tools_json = facts.tools_json
        use_tools = _tools_cached(tools_json) if tools_json else None
    schema_known = bool(use_tools)

    # one context per position (the classifier only reads it)
    contexts = {last: TurnContext(is_last_turn=last, output_truncated=False, forbids_suffix=facts.forbids_suffix,
                                  schema_known=schema_known) for last in (False, True)}
    asst = [t for t in rec.turns if t.role == "assistant"]
    last_asst = asst[-1].index if asst else -1
    out: list[tuple[Turn, TurnAnalysis | None]] = []
    n_calls = n_bad = 0
    last_has_call = False
    truncated = False
    for t in rec.turns:
        if t.role != "assistant":
            out.append((t, None))
            continue
        is_last = t.index == last_asst and t.char_end == len(rec.output)
        ta = analyze_turn(
            t.text, tool_format=fmt or "none", tools=use_tools, context=contexts[is_last], rules_dirs=rules_dirs,
            spans=with_spans,
        )
        out.append((t, ta))
        if ta.calls:
            n_calls += len(ta.calls)
            n_bad += sum(1 for c in ta.calls if c.status == "malformed")
        if t.index == last_asst:
            last_has_call = bool(ta.calls)
            if is_last and (
                any(f.category == "truncated_call" for f in ta.findings)
                or t.text.count("<think>") > t.text.count("</think>")
            ):
                truncated = True
    if rec.turns and rec.turns[-1].role == "tool":
        # the output ends inside a tool block: the run stopped before the model could answer
        last_has_call = True
        truncated = truncated or "</tool_response>" not in rec.turns[-1].text
    return TrajectoryAnalysis(
        tool_format=fmt or "none",
        tools=use_tools,
        tools_json=tools_json,
        schema_checked=schema_known,
        turns=out,
        n_calls=n_calls,
        n_malformed=n_bad,
        has_final_answer=bool(asst) and not last_has_call and not truncated,
        truncated=truncated,
    )


@lru_cache(maxsize=512)
def _tools_cached(tools_json: str) -> list[dict[str, Any]]:
    return json.loads(tools_json)
