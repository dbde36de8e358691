"""Classify one ingested trajectory: pick its call format and tool schemas, run the classifier per turn.

This is the glue between :mod:`trajlab.ingest` and :mod:`trajlab.toolcalls`; ``scan`` calls it for every
record and flattens the result into table rows. Prompt-level work (format detection from the instructions,
tool-schema parsing, the "NO suffix" rule) is cached per distinct prompt, so a GRPO group costs one parse.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from trajlab.ending import output_ending, prompt_opens_think, stopped, stopped_at_stop_token
from trajlab.ingest.tool_schemas import tools_from_prompt
from trajlab.model import RawTrajectory, Turn, TurnAnalysis, TurnContext
from trajlab.provenance import VERL_TEXT_SOURCES, ModelTurn, mark_model_turns


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
    end_reason: str | None = None  # why truncated / no final answer (a key of trajlab.ending.END_REASONS)
    notes: list[str] = field(default_factory=list)  # e.g. a turn over the per-turn cap (ingest_errors rows)
    model_turns: list[ModelTurn] = field(default_factory=list)  # tool turns the model wrote (trajlab.provenance)


#: per-turn work cap: an assistant turn is classified in full up to this many characters or this many calls
#: (``<tool_call>`` openers), whichever comes first; the rest is counted (openers, characters) and reported
TURN_CLASSIFY_CHARS = 4 * 1024 * 1024
TURN_CLASSIFY_CALLS = 1000
CALL_OPENER = "<tool_call>"


def turn_cut(text: str) -> int | None:
    """Where the classified part of an oversized turn ends (never inside a call: at a ``<tool_call>`` opener
    when there is one), or None when the whole turn is classified."""
    if len(text) <= TURN_CLASSIFY_CHARS and text.count(CALL_OPENER) <= TURN_CLASSIFY_CALLS:
        return None
    pos, n = -1, 0
    while n < TURN_CLASSIFY_CALLS:
        pos = text.find(CALL_OPENER, pos + 1, TURN_CLASSIFY_CHARS)
        if pos < 0:
            break
        n += 1
    if n == TURN_CLASSIFY_CALLS:  # cut before the first call past the call cap (or the char cap)
        nxt = text.find(CALL_OPENER, pos + 1, TURN_CLASSIFY_CHARS)
        if nxt > 0:
            return nxt
    last = text.rfind(CALL_OPENER, 0, TURN_CLASSIFY_CHARS)
    return last if last > 0 and len(text) > TURN_CLASSIFY_CHARS else TURN_CLASSIFY_CHARS


def cap_note(turn_index: int, text: str, cut: int) -> str:
    """The ``ingest_errors`` reason for a turn classified only up to ``cut``."""
    rest = len(text) - cut
    return (f"turn {turn_index}: {len(text):,} characters, over the per-turn cap ({TURN_CLASSIFY_CALLS:,} calls or "
            f"{TURN_CLASSIFY_CHARS // (1 << 20)} Mi characters); classified the first {cut:,} characters, "
            f"counted {text.count(CALL_OPENER, cut):,} more call openers in the remaining {rest:,} (not classified)")


@dataclass(frozen=True, slots=True)
class PromptFacts:
    tool_format: str
    tools_json: str | None
    tools_source: str | None
    forbids_suffix: bool
    opens_think: bool = False  # the prompt ends inside an opened <think> (a thinking template)


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
        opens_think=prompt_opens_think(input_text),
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
    tools_json: str | None
    use_tools: list[dict[str, Any]] | None
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
    notes: list[str] = []
    n_calls = n_bad = 0
    last_calls, last_trunc = 0, False
    for t in rec.turns:
        if t.role != "assistant":
            out.append((t, None))
            continue
        is_last = t.index == last_asst and t.char_end == len(rec.output)
        cut = turn_cut(t.text)
        if cut is not None:
            notes.append(cap_note(t.index, t.text, cut))
        ta = analyze_turn(
            t.text if cut is None else t.text[:cut], tool_format=fmt or "none", tools=use_tools, context=contexts[is_last], rules_dirs=rules_dirs,
            spans=with_spans,
        )
        out.append((t, ta))
        if ta.calls:
            n_calls += len(ta.calls)
            n_bad += sum(1 for c in ta.calls if c.status == "malformed")
        if t.index == last_asst:
            last_calls = len(ta.calls)
            last_trunc = any(f.category == "truncated_call" for f in ta.findings)
    model_turns: list[ModelTurn] = []
    if rec.source_format in VERL_TEXT_SOURCES and len(rec.turns) > 1:
        model_turns = mark_model_turns(out, fmt or "none", prompt=rec.input, env_turns=rec.env_turns,
                                       rules_dirs=rules_dirs)
        if model_turns:
            n_bad = sum(1 for _t, ta in out if ta is not None for c in ta.calls if c.status == "malformed")
    final = rec.turns[-1] if rec.turns else None
    end = output_ending(asst[-1].text if asst else None, n_calls=last_calls, truncated_call=last_trunc,
                        final_role=final.role if final is not None else None,
                        final_text=final.text if final is not None else "", tool_format=fmt or "none",
                        starts_in_think=facts.opens_think and bool(asst) and asst[-1].index == 0)
    if end.truncated and rec.tokens is not None and stopped_at_stop_token(rec.tokens.generated, rec.tokens.text):
        end = stopped(end)  # exact tokens: it ended with an end-of-turn token, so it did not hit the limit
    return TrajectoryAnalysis(
        tool_format=fmt or "none",
        tools=use_tools,
        tools_json=tools_json,
        schema_checked=schema_known,
        turns=out,
        n_calls=n_calls,
        n_malformed=n_bad,
        has_final_answer=end.has_final_answer,
        truncated=end.truncated,
        end_reason=end.reason,
        notes=notes,
        model_turns=model_turns,
    )


@lru_cache(maxsize=512)
def _tools_cached(tools_json: str) -> list[dict[str, Any]]:
    return json.loads(tools_json)
