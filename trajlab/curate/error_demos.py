"""Error demonstrations: a broken call, what is wrong with it, and the corrected call as the only target.

For every malformed call with a confident repair (``calls.repaired``), the sample is:

1. the trajectory up to the broken turn (system and user prompt, earlier assistant turns and tool responses);
2. one feedback message, role ``user`` (or ``tool``, see ``rules/hints.yaml``), quoting the broken call and
   explaining it: one line per error/warning finding of the call (taxonomy category, the finding's
   explanation, the offending text), the call template of the format with the intended tool, and the
   declared tool names;
3. the corrected call as the last (assistant) message.

verl's ``MultiTurnSFTDataset`` trains *every* assistant message, so the broken text never appears in one: it is
only quoted in the feedback message, and a call is used only when no earlier assistant turn of its trajectory
has an error or warning finding (otherwise that earlier broken text would be trained as context). Every target
is re-checked with the classifier and must parse as one well-formed call with zero findings; if the stored
repair does not, the canonical rendering of the repaired arguments is tried, else the call is skipped.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from trajlab.curate.conversation import Message, ToolCallRef, attach_calls, build_conversation, thinking_mode
from trajlab.curate.hints import HintRules, fill, tool_names
from trajlab.curate.options import PoolOptions
from trajlab.curate.samples import Gate, Sample, prompt_key
from trajlab.curate.scan_tables import ScanTables, parse_tools

BATCH = 2000
SPAN_SHOWN = 160  # longest offending text quoted in a feedback line


@dataclass
class ErrorDemoResult:
    samples: list[Sample]
    stats: dict[str, int] = field(default_factory=dict)


def _quote(text: str) -> str:
    text = text if len(text) <= SPAN_SHOWN else text[: SPAN_SHOWN - 3] + "..."
    return json.dumps(text, ensure_ascii=False)


def verify_target(
    text: str, tool_format: str, tools: list[dict[str, Any]] | None, forbids_suffix: bool,
    rules_dirs: tuple[str, ...] = (),
) -> tuple[bool, Any]:
    """``(ok, parsed call)``: ``text`` is exactly one well-formed call with zero findings of any severity (under the
    built-in rules and the packs in ``rules_dirs``)."""
    from trajlab.model import TurnContext
    from trajlab.toolcalls import analyze_turn

    ctx = TurnContext(
        is_last_turn=False, output_truncated=False, forbids_suffix=forbids_suffix, schema_known=bool(tools)
    )
    ta = analyze_turn(text, tool_format=tool_format, tools=tools, context=ctx, rules_dirs=rules_dirs)
    ok = len(ta.calls) == 1 and ta.calls[0].status == "ok" and not ta.findings
    return ok, (ta.calls[0] if ta.calls else None)


def choose_target(call: dict[str, Any], tool_format: str, tools: list[dict[str, Any]] | None, forbids_suffix: bool,
                  rules_dirs: tuple[str, ...] = ()):
    """The corrected call text (stored repair, else canonical rendering) and its parse, or ``(None, None)``."""
    repaired = call.get("repaired")
    if repaired:
        ok, parsed = verify_target(repaired, tool_format, tools, forbids_suffix, rules_dirs)
        if ok:
            return repaired, parsed
    name = call.get("matched_tool")
    args_json = call.get("repaired_arguments")
    if name and args_json:
        try:
            args = json.loads(args_json)
        except ValueError:
            args = None
        if isinstance(args, dict):
            from trajlab.toolcalls import render_call

            try:
                text = render_call(name, args, tool_format)
            except Exception:  # an unknown format or arguments the renderer cannot write
                text = None
            if text:
                ok, parsed = verify_target(text, tool_format, tools, forbids_suffix, rules_dirs)
                if ok:
                    return text, parsed
    return None, None


def _explain(category: str) -> str:
    """The taxonomy's generic explanation of a category (used when a finding carries no message)."""
    try:
        from trajlab.toolcalls import explain

        return explain(category)
    except Exception:  # an unknown category of a user rule
        return ""


def feedback_text(
    rules: HintRules,
    call: dict[str, Any],
    findings: list[dict[str, Any]],
    output: str,
    tool_format: str,
    tools: list[dict[str, Any]] | None,
) -> str:
    """The feedback message for one broken call, from the ``error_feedback`` template."""
    lines = []
    for f in sorted(findings, key=lambda f: (f["char_start"], f["category"], f["char_end"], f.get("message") or "")):
        span = output[f["char_start"] : f["char_end"]] if f["char_end"] > f["char_start"] else ""
        msg = (f.get("message") or "").strip() or _explain(f["category"]) or rules.description(f["category"])
        lines.append(
            fill(rules.problem_line, {"category": f["category"], "message": msg, "span": _quote(span)}).rstrip()
        )
    cats = sorted({f["category"] for f in findings})
    params = {
        "broken_call": call["raw"],
        "problems": "\n".join(lines) if lines else "- the call does not follow the declared format",
        "tool_format": tool_format,
        "expected_form": rules.call_template(tool_format, tools, call.get("matched_tool")),
        "tool_names": tool_names(tools),
        "category": cats[0] if cats else "",
        "categories": ", ".join(cats),
    }
    return fill(rules.feedback_template, params).strip()


def _candidates(tables: ScanTables, opts: PoolOptions) -> tuple[pl.DataFrame, dict[str, int]]:
    light = tables.light.filter(pl.col("split").is_in(list(opts.source_splits)))
    calls = (
        tables.lazy("calls")
        .filter(pl.col("status").is_in(["malformed", "warning"]))  # a call with warnings only is corrected too
        .select(
            "call_id", "trajectory_id", "turn_index", "call_index", "raw", "char_start", "char_end",
            "function_name", "matched_tool", "categories", "repaired", "repaired_arguments",
        )
        .collect()
        .join(light.select("trajectory_id", "step", "group_id", "tool_format"), on="trajectory_id", how="inner")
    )
    first_bad = tables.bad_findings.group_by("trajectory_id").agg(pl.col("turn_index").min().alias("first_bad_turn"))
    calls = calls.join(first_bad, on="trajectory_id", how="left")
    stats = {
        "malformed_calls": calls.height,
        "no_repair": int(calls["repaired"].is_null().sum()),
    }
    with_repair = calls.filter(pl.col("repaired").is_not_null())
    # the broken turn must be the trajectory's first turn with an error/warning finding
    clean_ctx = with_repair.filter(pl.col("first_bad_turn").is_null() | (pl.col("first_bad_turn") >= pl.col("turn_index")))
    stats["earlier_turn_malformed"] = with_repair.height - clean_ctx.height
    return clean_ctx.sort("trajectory_id", "turn_index", "call_index"), stats


def build_error_demos(
    tables: ScanTables,
    opts: PoolOptions,
    rules: HintRules,
    *,
    fits: Callable[[Sample], bool] | None = None,
    task: Callable[[str, int], Callable[[int], None]] | None = None,
) -> ErrorDemoResult:
    """Every usable error demonstration of the scan (the ``error_demo`` file), deduplicated.

    ``task(description, total)`` returns a progress callback (advanced by trajectories processed).
    """
    from trajlab.trajectory import prompt_facts

    cands, stats = _candidates(tables, opts)
    findings_by_call: dict[str, list[dict[str, Any]]] = {}
    if cands.height:
        ids = cands["call_id"].unique().to_list()
        fdf = (
            tables.lazy("findings")
            .filter(pl.col("call_id").is_in(ids) & pl.col("severity").is_in(["error", "warning"]))
            .select("call_id", "category", "severity", "char_start", "char_end", "message")
            .collect()
        )
        for r in fdf.iter_rows(named=True):
            findings_by_call.setdefault(r["call_id"], []).append(r)
    rows_by_tid: dict[str, list[dict[str, Any]]] = {}
    for r in cands.iter_rows(named=True):
        rows_by_tid.setdefault(r["trajectory_id"], []).append(r)
    tids = list(rows_by_tid)
    advance = task("error demonstrations", len(tids)) if task is not None else None
    out: list[Sample] = []
    gate = Gate(fits)
    rejected = 0
    for b in range(0, len(tids), BATCH):
        batch_ids = tids[b : b + BATCH]
        heavy = tables.heavy(batch_ids)
        turns = tables.turns_of(batch_ids)
        calls_ctx = tables.calls_of(batch_ids) if opts.style == "openai" else {}
        for c in (r for t in batch_ids for r in rows_by_tid[t]):
            tid = c["trajectory_id"]
            h = heavy.get(tid)
            if h is None:
                continue
            fmt = c["tool_format"] or "none"
            tools_t = parse_tools(h["tools"])
            tools = [dict(t) for t in tools_t] if tools_t else None
            facts = prompt_facts(h["input"] or "")
            target, parsed = choose_target(c, fmt, tools, facts.forbids_suffix, opts.rules_dirs)
            if target is None:
                rejected += 1
                continue
            tts = turns.get(tid, [])
            conv = build_conversation(h["input"], tts, upto_turn=int(c["turn_index"]))
            if opts.style == "openai":
                attach_calls(
                    conv.messages, {t[0]: t[3] for t in tts}, {t[0]: t[2] for t in tts},
                    [x for x in calls_ctx.get(tid, []) if int(x["turn_index"]) < int(c["turn_index"])],
                )
            fb = feedback_text(rules, c, findings_by_call.get(c["call_id"], []), h["output"] or "", fmt, tools)
            name = getattr(parsed, "matched_tool", None) or getattr(parsed, "function_name", None) or c["matched_tool"]
            args = getattr(parsed, "arguments", None)
            target_msg = Message(
                "assistant",
                target,
                text="",
                tool_calls=[ToolCallRef(str(name or ""), json.dumps(args if args is not None else {}, ensure_ascii=False, sort_keys=True))],
            )
            s = Sample(
                kind="error_demo",
                trajectory_id=tid,
                step=c["step"],
                group_id=c["group_id"],
                prompt_key=prompt_key(h["input"]),
                tool_format=c["tool_format"],
                enable_thinking=thinking_mode(h["input"], h["output"]),
                messages=[*conv.messages, Message(rules.feedback_role, fb), target_msg],
                categories=sorted(set(c["categories"] or [])),
                source_call_id=c["call_id"],
                tools_json=h["tools"],
                # calls the latest rescored checkpoint would most likely repeat go first
                rank=-tables.rescore_log_odds[c["call_id"]] if c["call_id"] in tables.rescore_log_odds else math.inf,
            )
            if gate.admit(s):
                out.append(s)
        if advance is not None:
            advance(len(batch_ids))
    stats["repair_rejected"] = rejected
    stats["duplicates"] = gate.duplicates
    stats["too_long"] = gate.too_long
    stats["kept"] = len(out)
    return ErrorDemoResult(out, stats)
