"""Where calls stand in the turn: turn-level facts that belong to a call.

A call written inside ``<think>``, text after the last call (special tokens and later think blocks do not
count), truncation at the response-length limit; and the findings of a turn the fast path read as canonical,
where text after the last call is the only problem it can have.
"""

from __future__ import annotations

import re
from typing import Any

from trajlab.model import Finding, TurnContext
from trajlab.toolcalls.draft import MISSING, CallDraft, Issue, degenerate_loop, snip
from trajlab.toolcalls.fastpath import FastTurn
from trajlab.toolcalls.findings import BAD_SEVERITIES, call_status, issue_finding
from trajlab.toolcalls.formats import TEXT_INPUT_FORMATS
from trajlab.toolcalls.repair import Reclassify, repair_call
from trajlab.toolcalls.ruleset import RuleSet
from trajlab.toolcalls.schema import ToolIndex

_SPECIAL_TOKENS = re.compile(r"<\|(?:im_end|endoftext|eot_id|end|im_start|call|return|observation)\|>|<｜end▁of▁sentence｜>")
#: what starts the environment's part of a conversation, per family (call-formats.md): a chat role header
#: (ChatML ``<|im_start|>ROLE``, GLM ``<|observation|>``/``<|user|>``, Kimi ``<|im_system|>``/``<|im_user|>``,
#: harmony's ``<|start|>functions.NAME``) or a tool-response wrapper (``<tool_response>``, DeepSeek's
#: ``<｜tool▁output▁begin｜>``). After a call, the model writing one has fabricated the tool's reply.
_ENV_MARKER = re.compile(
    r"(?P<role><\|im_start\|>[a-z_]*|<\|observation\|>|<\|user\|>|<\|im_system\|>|<\|im_user\|>"
    r"|<\|start\|>functions\.)"
    r"|(?P<response><tool_response>|<｜tool▁outputs?▁begin｜>)")

#: a bare chat role line as verl's stripped decode leaves a role header (``<|im_start|>user`` minus its special
#: token): the word alone on its line, followed by more text
_ROLE_LINE = re.compile(r"(?:\A|\n)(?P<role>user|assistant|system|tool)[ \t]*\n(?=\S|\s*\S)")


def turn_facts(text: str, drafts: list[CallDraft], think: list[tuple[int, int, int, int, int, int]],
               ctx: TurnContext) -> None:
    """Step 3: turn-level facts that belong to a call (truncation at the length limit, a call inside
    ``<think>``, text after the last call)."""
    if ctx.output_truncated and ctx.is_last_turn:
        for d in drafts:
            for iss in d.issues:
                if iss.category == "truncated_call":
                    iss.params["where"] = f"{iss.params.get('where', 'inside the call')}, at the response-length limit"
    if len(drafts) == 1 and not drafts[0].in_think:  # the common case
        outside = drafts
    else:
        outside = [d for d in drafts if not d.in_think]
        for d in drafts:
            if d.in_think:
                preempts = any(o.start > d.start for o in outside)
                unparsed = any(i.category == "missing_call_open" for i in d.issues)  # (verl never sees it)
                d.add("call_inside_think", "unparsed" if unparsed else ("preempts" if preempts else "drafted"),
                      d.start, d.end)
    if len(outside) > 1:  # a bare role line between two calls: the model wrote a turn in between
        ordered = sorted(outside, key=lambda d: d.start)
        for a, b in zip(ordered, ordered[1:], strict=False):
            between = _role_between(text, a.end, b.start)
            if between is not None:
                a.issues.append(between)
    if outside:
        last = outside[0] if len(outside) == 1 else max(outside, key=lambda d: d.end)
        tail_issue = _text_after(text, last.end, think, ctx)
        if tail_issue is not None and last.fmt in TEXT_INPUT_FORMATS:
            # react: the parser reads the rest of the turn as the input; what the tail is (an invented observation,
            # a final answer, another action) is reported as such
            if any(i.category in _REACT_TAIL for i in last.issues):
                tail_issue = None
            elif tail_issue.variant == "allowed":
                tail_issue.variant = "into_input"
        if tail_issue is not None:
            last.issues.append(tail_issue)


def after_canonical(text: str, fast: FastTurn, think: list[tuple[int, int, int, int, int, int]],
                    ctx: TurnContext, fmt: str, tools: Any, index: ToolIndex | None, rs: RuleSet,
                    repair: bool, reclassify: Reclassify) -> list[Finding]:
    """Findings of a turn whose calls :mod:`.fastpath` read as canonical, when text may follow the last call.

    The full pipeline finds the same calls with no issue of their own, so the only possible finding is
    ``text_after_call`` on the last call (steps 3-5 of the pipeline in :mod:`.analyze`, for that one issue): the
    last call is updated in place with the status, categories and repair :func:`.call.finish_call` would give it.
    The repair is the call's own text (the issue is only where it stands), which the fast path has just read as
    canonical and well-formed: classified alone, it is the same one call, whose arguments are its values
    converted once more (``reclassify`` is asked only when they cannot be).
    """
    assert fast.calls is not None
    out: list[Finding] = []
    for a, b in zip(fast.calls, fast.calls[1:], strict=False):  # a bare role line between two calls
        between = _role_between(text, a.end, b.start)
        if between is not None:
            fb = issue_finding(rs, between, fmt, a.call_index)
            out.append(fb)
            a.status, a.categories = call_status((fb.severity,)), [between.category]
    last = fast.calls[-1]
    iss = _text_after(text, last.end, think, ctx)
    if iss is None:
        return out
    f = issue_finding(rs, iss, fmt, last.call_index)
    if f.severity in BAD_SEVERITIES:
        last.status, last.categories = call_status((f.severity,)), [iss.category]
        if repair:
            name = last.function_name  # exact (or, without a schema, a valid name): the name a repair keeps
            tool = index.get(name) if index is not None else None
            d = CallDraft(last.format, last.start, last.end, name, issues=[iss])
            again = fast.arguments_again(last.call_index, index)
            last.repaired, last.repaired_arguments, last.repair_note = repair_call(
                d, [f], text, fmt, name, {}, tool.intended if tool is not None else {}, tools, index, rs,
                reclassify, recheck=None if again is MISSING else (1, again, []))
    return [*out, f]


def _role_between(text: str, start: int, end: int) -> Issue | None:
    """``fabricated_tool_response/role_line`` when a bare role line stands between two calls (``start:end``)."""
    role = _ROLE_LINE.search(text, start, end) if end > start else None
    if role is None:
        return None
    return Issue("fabricated_tool_response", "role_line", role.start("role"), end,
                 {"marker": role.group("role"), "text": snip(text[role.start("role"):end].strip(), 50), "loop": ""})


#: react issues that already name the text after the action
_REACT_TAIL = frozenset({"model_written_observation", "action_after_final_answer", "multiple_actions",
                         "missing_action_input"})


def _text_after(text: str, end: int, think: list[tuple[int, int, int, int, int, int]], ctx: TurnContext) -> Issue | None:
    tail = text[end:]
    if not tail.strip():
        return None
    # think blocks after the call are reasoning, not a suffix; special tokens are not text
    for cs, ce, os_, _oe, _c, c_e in think:
        s = max(os_ if os_ >= 0 else cs, end)
        e = c_e if c_e >= 0 else ce
        if e > s:
            tail = tail[: s - end] + " " * (e - s) + tail[e - end:]
    env = _ENV_MARKER.search(tail)
    role = _ROLE_LINE.search(tail)
    if role is not None and env is None:
        # a bare role line in stripped text: a chat turn the environment never writes after a call
        e = end + len(tail.rstrip())
        return Issue("fabricated_tool_response", "role_line", end + role.start("role"), e,
                     {"marker": role.group("role"), "text": snip(tail[role.start("role"):].strip(), 50),
                      "loop": degenerate_loop(tail[role.start("role"):])})
    if env is not None:  # the model went on to write the environment's part: the tool's reply is made up
        e = end + len(tail.rstrip())
        variant = "role_marker" if env.group("role") else "response_tag"
        return Issue("fabricated_tool_response", variant, end + env.start(), e,
                     {"marker": snip(env.group(), 40), "text": snip(tail[env.start():].strip(), 50)})
    tail = _SPECIAL_TOKENS.sub(lambda m: " " * len(m.group()), tail)
    core = tail.strip()
    if not core:
        return None
    s = end + (len(tail) - len(tail.lstrip()))
    e = end + len(tail.rstrip())
    variant = "forbidden" if ctx.forbids_suffix else "allowed"
    return Issue("text_after_call", variant, s, e, {"text": snip(core, 50)})
