"""Classify one assistant turn: find every call, check it, name each problem, offer repairs, tile the spans.

Pipeline of :func:`analyze_turn` (never raises):

1. fast paths: a few ``str.find`` calls; a turn with no markup returns a single ``text`` span, a turn whose
   only markup is think tags (or an invented tag) skips the call search (steps 2-5 would find nothing); a turn
   whose calls are all canonical and well-formed is recognised by :mod:`.fastpath` and returned directly (with
   its ``text_after_call`` finding, the only one such a turn can have); a qwen3_coder turn whose calls are all
   *simple* (canonical in form, or with misspelt or missing closing tags: see
   :func:`.format_qwen3_coder.read_call`) gets from :mod:`.fastpath` the drafts the scanner would make, and
   step 2 is skipped;
2. ``<think>`` regions are cut out; each segment is scanned for foreign markup, then by the turn's format
   module (``format_<name>.py``), then for bare JSON calls;
3. turn-level facts are attached (call inside ``<think>``, text after the last call);
4. each call draft is checked against the tool schema (names, parameters, required, types, with verl's
   value conversion) and its issues become :class:`~trajlab.model.Finding` records with the taxonomy's
   severity and message;
5. a repair is built when every error/warning of the call is repairable, and kept only if the repaired text
   re-classifies with no error or warning;
6. spans are sorted and the gaps filled with ``text``, so they tile the turn; user regex rules run last.
"""

from __future__ import annotations

import re
from typing import Any

from trajlab.model import Finding, ParsedCall, Span, TurnAnalysis, TurnContext
from trajlab.toolcalls.draft import MISSING, CallDraft, Edit, Issue, parsed_call, snip
from trajlab.toolcalls.fastpath import FastTurn, read_turn, single_call
from trajlab.toolcalls.format_foreign import find_foreign
from trajlab.toolcalls.formats import FORMATS, JSON_ARGUMENT_FORMATS
from trajlab.toolcalls.jsonbody import find_bare_json
from trajlab.toolcalls.names import match_name
from trajlab.toolcalls.ruleset import RuleSet, get_ruleset
from trajlab.toolcalls.schema import ToolIndex, check_json_value, check_xml_value, intended_value, tool_index
from trajlab.toolcalls.verl_parser import (
    AS_INTENDED,
    DIFFERENTLY,
    DROPPED,
    VERL_VERSION,
    VerlCall,
    describe,
    same_value,
    verl_calls,
)

#: take the fast paths: :mod:`.fastpath` for turns whose calls are canonical or simple, and the format scanners'
#: regex readers (tests switch it off to compare with the full pipeline: the token state machines)
FAST_PATH = True
_PLACEMENT = ("text_after_call", "call_inside_think")
_OPENER = re.compile(r"<(parameter|function)=([^<>\n]*)>")
_SPECIAL_TOKENS = re.compile(r"<\|(?:im_end|endoftext|eot_id|end|im_start|call|return|observation)\|>|<｜end▁of▁sentence｜>")
_BAD = ("error", "warning")


def detect_output_format(text: str, rs: RuleSet) -> str:
    """The call format the text itself is written in ('none' when it shows no call markup)."""
    for name in FORMATS:  # registry order: qwen3_coder before hermes (`<function=` is the sharper marker)
        marker = rs.output_markers.get(name)
        if marker is not None and marker.search(text):
            return name
    if "<tool_call>" in text:
        return "hermes"
    return "none"


def check_turn(text: str, tool_format: str, tools: Any, context: TurnContext, rs: RuleSet) -> TurnAnalysis:
    """:func:`analyze_turn` for a snippet known to be a tool-use turn (``trajlab rules check``)."""
    return _safe(text, tool_format, tools, context, rs, tool_context=True)


def analyze_turn(
    text: str,
    *,
    tool_format: str,
    tools: list[dict[str, Any]] | None,
    context: TurnContext,
    rules_dirs: tuple[str, ...] = (),
    spans: bool = True,
) -> TurnAnalysis:
    """Classify one assistant turn. Never raises: an internal failure becomes an ``internal_error`` finding.

    Args:
        text: the turn's text (offsets in the result are offsets into it).
        tool_format: ``qwen3_coder`` | ``hermes`` | ``none`` (``none``: detect from the text).
        tools: normalised tool schemas ``{"name", "description", "parameters"}``; ``None`` skips schema checks.
        context: facts about the turn (last turn, prompt forbids a suffix, ...).
        rules_dirs: user rule packs on top of the built-in ``rules/``.
        spans: build the tiling spans (``False`` leaves ``TurnAnalysis.spans`` empty: ``scan`` stores no spans,
            and tiling is a sixth of the cost of a call-heavy turn).
    """
    if not isinstance(text, str):
        text = "" if text is None else str(text)
    try:
        rs = get_ruleset(rules_dirs)
    except Exception as e:  # a broken user pack: classify with the built-in rules and say so
        try:
            rs = get_ruleset(())
        except Exception as e2:  # pragma: no cover - the built-in pack is part of the package
            return _failed(text, e2, None)
        ta = _safe(text, tool_format, tools, context, rs, with_spans=spans)
        ta.findings.append(_internal(rs, 0, len(text), e))
        return ta
    try:  # (`_safe`, inlined: this runs for every turn)
        return _analyze(text, tool_format, tools, context if isinstance(context, TurnContext) else TurnContext(),
                        rs, repair=True, with_spans=spans)
    except Exception as e:  # never raise on model text: report the turn unclassified
        return _failed(text, e, rs)


def _safe(text: str, tool_format: str, tools: Any, context: Any, rs: RuleSet, *,
          tool_context: bool = False, with_spans: bool = True) -> TurnAnalysis:
    try:
        return _analyze(text, tool_format, tools, context if isinstance(context, TurnContext) else TurnContext(),
                        rs, repair=True, tool_context=tool_context, with_spans=with_spans)
    except Exception as e:  # never raise on model text: report the turn unclassified
        return _failed(text, e, rs)


def _internal(rs: RuleSet | None, s: int, e: int, exc: BaseException) -> Finding:
    err = f"{type(exc).__name__}: {snip(str(exc), 120)}"
    msg = rs.message("internal_error", "exception", {"error": err}) if rs else f"classifier failed: {err}"
    sev = rs.severity("internal_error", "exception", "") if rs else "warning"
    return Finding("internal_error", sev, s, e, msg, "trajlab/internal_error/exception", None)  # type: ignore[arg-type]


def _failed(text: str, exc: BaseException, rs: RuleSet | None) -> TurnAnalysis:
    n = len(text)
    return TurnAnalysis([], [_internal(rs, 0, n, exc)], [Span("text", 0, n)] if n else [])


_NO_MARKUP, _CALL_MARKUP, _OTHER_MARKUP = 0, 1, 2


def _markup(text: str, rs: RuleSet) -> int:
    """What the turn needs (a few ``str.find`` calls; the regexes only as a last resort): nothing
    (``_NO_MARKUP``), the full pipeline (``_CALL_MARKUP``), or the pipeline without its call search
    (``_OTHER_MARKUP``: think tags or an invented-tag candidate, but no call literal and no foreign trigger, so
    no segment holds a call: every scanner would skip every segment)."""
    for ch, lits in rs.segment_groups:  # the call literals and foreign triggers
        if ch in text:
            for lit in lits:
                if lit in text:
                    return _CALL_MARKUP
    other = _OTHER_MARKUP if not rs.foreign_untriggered else _CALL_MARKUP
    if "<" in text and ("</think>" in text or "<think>" in text):
        return other
    if rs.foreign_untriggered and rs.quick_re.search(text):
        return _CALL_MARKUP
    if "_" in text and "<" in text and rs.invented_quick.search(text) is not None:
        return other
    return _NO_MARKUP


# -- think regions ----------------------------------------------------------------------------------------


def _think_regions(text: str) -> list[tuple[int, int, int, int, int, int]]:
    """(content_start, content_end, open_start, open_end, close_start, close_end); -1 for a missing tag."""
    out: list[tuple[int, int, int, int, int, int]] = []
    o = text.find("<think>")
    c = text.find("</think>")  # (the tags cannot overlap: this is also the first close after `o`, if o < c)
    if c >= 0 and (o < 0 or c < o):  # the generation prompt opened <think>: the turn starts inside it
        out.append((0, c, -1, -1, c, c + 8))
        c = text.find("</think>", o + 7) if o >= 0 else -1
    while o >= 0:  # a block opened at `o`, closed at `c`
        if c < 0:
            out.append((o + 7, len(text), o, o + 7, -1, -1))
            break
        out.append((o + 7, c, o, o + 7, c, c + 8))
        o = text.find("<think>", c + 8)
        if o >= 0:
            c = text.find("</think>", o + 7)
    return out


def _segments(n: int, think: list[tuple[int, int, int, int, int, int]]) -> list[tuple[int, int, bool]]:
    segs: list[tuple[int, int, bool]] = []
    pos = 0
    for cs, ce, os_, _oe, _cs2, c_e in think:
        outer_s = os_ if os_ >= 0 else cs
        if outer_s > pos:
            segs.append((pos, outer_s, False))
        segs.append((cs, ce, True))
        pos = c_e if c_e >= 0 else ce
    if pos < n:
        segs.append((pos, n, False))
    return segs


# -- the pipeline -----------------------------------------------------------------------------------------


def _analyze(text: str, tool_format: str, tools: Any, ctx: TurnContext, rs: RuleSet, *, repair: bool,
             tool_context: bool = False, with_spans: bool = True) -> TurnAnalysis:
    n = len(text)
    if n == 0:
        return TurnAnalysis([], [], [])
    markup = _markup(text, rs)
    if markup == _NO_MARKUP:
        spans = [Span("text", 0, n)]
        findings = _user_rules(text, rs, spans, [], [], tool_format) if rs.has_text_rules else []
        return TurnAnalysis([], findings, spans)

    fmt = tool_format if tool_format in FORMATS else detect_output_format(text, rs)
    index = tool_index(tools) if isinstance(tools, list) else None
    think = _think_regions(text) if "think>" in text else []
    drafts: list[CallDraft] = []
    turn_issues: list[Issue] = []
    has_foreign = rs.foreign_untriggered
    if not has_foreign and markup == _CALL_MARKUP:
        for trig in rs.foreign_literals:
            if trig in text:
                has_foreign = True
                break
    segments = _segments(n, think) if think else [(0, n, False)]
    want_spans = with_spans or bool(rs.regex_rules)  # user regex rules read the tiling
    fast = None
    if (markup == _CALL_MARKUP and FAST_PATH and not has_foreign and not rs.regex_rules
            and (not think or think[-1][4] >= 0)):  # every think block closed
        fast = read_turn(text, fmt, index, segments, rs, with_spans, trailing_text=True)
        if fast is not None and fast.calls is not None:
            # every call canonical and well-formed: at most text after the last one to report
            findings = _after_canonical(text, fast, think, ctx, fmt, tools, index, rs, repair)
            return TurnAnalysis(fast.calls, findings,
                                _tile(fast.spans + _think_spans(think), n) if with_spans else [])
    if fast is not None and fast.drafts is not None:
        drafts = fast.drafts  # canonical in form: the drafts the scanner would make, without running it
    elif markup == _CALL_MARKUP:  # (otherwise no segment holds a call literal or a foreign trigger: nothing to find)
        _scan(text, fmt, segments, has_foreign, want_spans, rs, drafts, turn_issues)
    _turn_facts(text, drafts, think, ctx)

    calls: list[ParsedCall] = []
    findings: list[Finding] = []
    spans: list[tuple[int, int, str, int | None]] = []
    vcalls = verl_calls(text, fmt, index) if drafts else None
    for i, d in enumerate(drafts):
        pc, fs = _finish(i, d, text, fmt, index, rs, tools, repair, vcalls)
        calls.append(pc)
        findings += fs
        if want_spans and not d.in_think:
            spans += [(s, e, k, i) for k, s, e in d.spans]

    if (fmt == "qwen3_coder" and index is not None and not think and not has_foreign and not rs.regex_rules
            and (turn_issues or any(f.severity in _BAD for f in findings))):
        alt = _closed_reading(text, fmt, index, rs, tools, repair, ctx, want_spans)
        if alt is not None:
            calls, findings, spans, drafts = alt
            turn_issues = []

    fmt_key = fmt if fmt in FORMATS else "none"
    for iss in turn_issues:
        findings.append(_finding(rs, iss, fmt_key, None))
    if want_spans:
        spans += _think_spans(think)
    for cs, _ce, os_, oe, c_s, _c_e in think:
        if c_s < 0:
            findings.append(_finding(rs, Issue("unclosed_think", "at_end", os_ if os_ >= 0 else cs, oe if oe >= 0
                                               else cs), fmt_key, None))
    if not calls and (fmt in FORMATS or index is not None or tool_context):
        findings += _invented(text, think, rs, index, fmt_key)

    tiled = _tile(spans, n) if with_spans or rs.regex_rules else []
    if rs.regex_rules:
        findings += _user_rules(text, rs, tiled, calls, drafts, fmt_key)
    if len(findings) > 1:
        findings.sort(key=_finding_key)
    return TurnAnalysis(calls, findings, tiled if with_spans else [])


def _closed_reading(text: str, fmt: str, index: ToolIndex, rs: RuleSet, tools: Any, repair: bool,
                    ctx: TurnContext, want_spans: bool) -> tuple[Any, Any, Any, Any] | None:
    """The turn read as verl's regexes read closed calls (:func:`.format_qwen3_coder.closed_reading`), when that
    reading is clean -- every call declared, complete and well-typed, no error or warning -- and the tag text it
    puts inside values is not a parameter the call leaves out (that is a ``</parameter>`` the model forgot):
    (calls, findings, spans, drafts); None when the scanner's reading stands."""
    from trajlab.toolcalls.format_qwen3_coder import closed_reading, standalone

    drafts = closed_reading(text, 0, len(text))
    if drafts is None or not any(d.literals for d in drafts):
        return None  # (without tag text inside a value the two readings do not differ in what matters here)
    for d in drafts:
        tool = index.tools.get(d.name or "")
        if tool is None:
            return None
        given = {p.name for p in d.params}
        lits = d.literals or []
        for k, (a, b) in enumerate(lits):
            m = _OPENER.match(text, a, b)
            if m is None:
                continue
            if m.group(1) == "parameter" and m.group(2) in tool.properties and m.group(2) not in given:
                return None  # a declared parameter the call lacks: its `</parameter>` is missing, not text
            if (m.group(1) == "function" and m.group(2) in index.tools and standalone(text, a, b) and k > 0
                    and text.startswith("<tool_call>", lits[k - 1][0]) and standalone(text, *lits[k - 1])):
                # a call of a declared tool on lines of its own, with parameters it declares: a new call after a
                # cut one (not when its parameters do not fit the tool: then it is text about a call)
                names = [m2.group(2) for a2, b2 in lits[k + 1:]
                         if (m2 := _OPENER.match(text, a2, b2)) is not None and m2.group(1) == "parameter"]
                if all(x in index.tools[m.group(2)].properties for x in names):
                    return None
    _turn_facts(text, drafts, [], ctx)
    vcalls = verl_calls(text, fmt, index)
    calls: list[ParsedCall] = []
    findings: list[Finding] = []
    spans: list[tuple[int, int, str, int | None]] = []
    for i, d in enumerate(drafts):
        pc, fs = _finish(i, d, text, fmt, index, rs, tools, repair, vcalls)
        if any(f.severity in _BAD for f in fs if f.category not in ("literal_tag_text", "nested_call")):
            return None
        calls.append(pc)
        findings += fs
        if want_spans:
            spans += [(s, e, k, i) for k, s, e in d.spans]
    return calls, findings, spans, drafts


def _finding_key(f: Finding) -> tuple[int, int, str]:
    return f.start, f.end, f.category


def _scan(text: str, fmt: str, segments: list[tuple[int, int, bool]], has_foreign: bool, want_spans: bool,
          rs: RuleSet, drafts: list[CallDraft], turn_issues: list[Issue]) -> None:
    """Step 2: the calls of every segment (foreign markup, the format's scanner, bare JSON) into ``drafts``, in
    text order, and the problems that belong to no call into ``turn_issues``."""
    fmt_mod = FORMATS.get(fmt)
    for lo, hi, in_think in segments:
        if hi <= lo or (not rs.foreign_untriggered and not rs.has_literal(text, lo, hi)):
            continue
        seg_drafts = find_foreign(text, lo, hi, rs, rs.own_foreign.get(fmt, ())) if has_foreign else []
        excluded = [(d.start, d.end) for d in seg_drafts]
        if fmt_mod is not None:
            cds, tis = fmt_mod.find_calls(text, lo, hi, rs, excluded, spans=want_spans, fast=FAST_PATH)
            seg_drafts += cds
            if not in_think:
                turn_issues += tis
        if text.find('"name"', lo, hi) >= 0 or text.find('"function"', lo, hi) >= 0:
            occupied = [(d.start, d.end) for d in seg_drafts]
            for d in find_bare_json(text, lo, hi, occupied, rs):
                if fmt != "hermes" and fmt in FORMATS:
                    d.add("format_mismatch", "json_in_xml_call", d.start, d.end, found="a bare JSON (hermes) call",
                          expected=fmt)
                seg_drafts.append(d)
        if in_think:
            # reasoning may quote call fragments; only a real <tool_call> block inside <think> is executed by
            # verl, so bare functions / JSON objects written while thinking are not calls
            seg_drafts = [d for d in seg_drafts if not any(i.category == "missing_call_open" for i in d.issues)]
        for d in seg_drafts:
            d.in_think = in_think
        drafts += seg_drafts
    drafts.sort(key=_draft_start)


def _draft_start(d: CallDraft) -> int:
    return d.start


def _turn_facts(text: str, drafts: list[CallDraft], think: list[tuple[int, int, int, int, int, int]],
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
                d.add("call_inside_think", "preempts" if preempts else "drafted", d.start, d.end)
    if outside:
        last = outside[0] if len(outside) == 1 else max(outside, key=lambda d: d.end)
        tail_issue = _text_after(text, last.end, think, ctx)
        if tail_issue is not None:
            last.issues.append(tail_issue)


def _after_canonical(text: str, fast: FastTurn, think: list[tuple[int, int, int, int, int, int]],
                     ctx: TurnContext, fmt: str, tools: Any, index: ToolIndex | None, rs: RuleSet,
                     repair: bool) -> list[Finding]:
    """Findings of a turn whose calls :mod:`.fastpath` read as canonical, when text may follow the last call.

    The full pipeline finds the same calls with no issue of their own, so the only possible finding is
    ``text_after_call`` on the last call (steps 3-5 below, for that one issue): the last call is updated in place
    with the status, categories and repair :func:`_finish` would give it. The repair is the call's own text
    (the issue is only where it stands), which the fast path has just read as canonical and well-formed:
    classified alone, it is the same one call, whose arguments are its values converted once more.
    """
    assert fast.calls is not None
    last = fast.calls[-1]
    iss = _text_after(text, last.end, think, ctx)
    if iss is None:
        return []
    f = _finding(rs, iss, fmt, last.call_index)
    if f.severity in _BAD:
        last.status, last.categories = "malformed", [iss.category]
        if repair:
            name = last.function_name  # exact (or, without a schema, a valid name): the name a repair keeps
            tool = index.get(name) if index is not None else None
            d = CallDraft(last.format, last.start, last.end, name, issues=[iss])
            again = fast.arguments_again(last.call_index, index)
            last.repaired, last.repaired_arguments, last.repair_note = _repair(
                d, [f], text, fmt, name, {}, tool.intended if tool is not None else {}, tools, index, rs,
                recheck=None if again is MISSING else (1, again, []))
    return [f]


def _think_spans(think: list[tuple[int, int, int, int, int, int]]) -> list[tuple[int, int, str, int | None]]:
    """``structural`` spans of the think tags and ``think`` spans of their content."""
    spans: list[tuple[int, int, str, int | None]] = []
    for cs, ce, os_, oe, c_s, c_e in think:
        if os_ >= 0:
            spans.append((os_, oe, "structural", None))
        spans.append((cs, ce, "think", None))
        if c_s >= 0:
            spans.append((c_s, c_e, "structural", None))
    return spans


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
    tail = _SPECIAL_TOKENS.sub(lambda m: " " * len(m.group()), tail)
    core = tail.strip()
    if not core:
        return None
    s = end + (len(tail) - len(tail.lstrip()))
    e = end + len(tail.rstrip())
    variant = "forbidden" if ctx.forbids_suffix else "allowed"
    return Issue("text_after_call", variant, s, e, {"text": snip(core, 50)})


def _finding(rs: RuleSet, iss: Issue, fmt_key: str, call_index: int | None) -> Finding:
    sev, msg, rule_id = rs.describe(iss.category, iss.variant, fmt_key, iss.params)
    return Finding(iss.category, sev, iss.start, iss.end, msg, rule_id, call_index)  # type: ignore[arg-type]


# -- one call ----------------------------------------------------------------------------------------------


def _finish(i: int, d: CallDraft, text: str, fmt: str, index: ToolIndex | None, rs: RuleSet, tools: Any,
            repair: bool, vcalls: list[VerlCall] | None = None) -> tuple[ParsedCall, list[Finding]]:
    fmt_key = fmt if fmt in FORMATS else (d.fmt if d.fmt in FORMATS else "none")
    for iss in d.issues:
        if iss.category == "foreign_format":
            iss.params.setdefault("expected", fmt if fmt in FORMATS else "trainer's")
    matched, repair_name = _check_name(d, index, rs)
    tool = index.tools.get(matched) if index is not None and matched is not None else None
    props = tool.intended if tool is not None else {}
    renames: dict[str, str] = {}
    args = _arguments(d, props)
    if tool is not None and args is not None:
        renames = _check_params(d, tool, rs, args)
    verdict, mine = _verl_verdict(d, args, vcalls)
    if verdict is not None:
        _verl_issues(d, fmt, verdict, mine, vcalls, text)
    findings: list[Finding] = []
    bad: set[str] = set()
    for iss in d.issues:
        f = _finding(rs, iss, fmt_key, i)
        findings.append(f)
        if f.severity in _BAD:
            bad.add(f.category)
    if verdict is not None and verdict != AS_INTENDED and not d.literals:
        if not any(f.severity == "error" or f.category == "verl_conversion_divergence" for f in findings):
            # verl drops or mangles the call while no finding says so with an error: say it
            iss = d.add("verl_mismatch", "dropped" if verdict == DROPPED else "differently", d.start, d.end,
                        verl=_verl_does(fmt, verdict, mine, vcalls),
                        blocker="verl's parser reads this call text differently from how it reads")
            f = _finding(rs, iss, fmt_key, i)
            findings.append(f)
            bad.add(f.category)
        else:
            _say_what_verl_does(findings, fmt, verdict, mine, vcalls)
    cats = sorted(bad)
    repaired = repaired_args = note = None
    if cats and repair:
        repaired, repaired_args, note = _repair(d, findings, text, fmt, repair_name, renames, props, tools, index, rs)
    pc = parsed_call(i, d.fmt, text[d.start:d.end], d.start, d.end, d.name, matched, args,
                     "malformed" if cats else "ok", cats, repaired, repaired_args, note)
    pc.verl_executes = verdict
    if verdict == DIFFERENTLY:
        pc.verl_function_name, pc.verl_arguments = mine[0].name, mine[0].arguments
    return pc, findings


# -- verl's reading ------------------------------------------------------------------------------------------


def _verl_verdict(d: CallDraft, args: Any, vcalls: list[VerlCall] | None) -> tuple[str | None, list[VerlCall]]:
    """How verl executes the call ``d`` (``as_intended`` | ``differently`` | ``dropped``; None: not modelled for
    the turn's format), and verl's calls read from its text."""
    if vcalls is None:
        return None, []
    mine = [v for v in vcalls if d.start <= v.anchor < d.end]
    if not mine:
        return DROPPED, mine
    if len(mine) == 1 and mine[0].name == d.name and same_value(mine[0].arguments, args):
        return AS_INTENDED, mine
    return DIFFERENTLY, mine


def _verl_does(fmt: str, verdict: str, mine: list[VerlCall], vcalls: list[VerlCall] | None) -> str:
    """One sentence: what verl's parser executes for the call."""
    who = f"verl {VERL_VERSION}'s {fmt} parser"
    if verdict == DROPPED:
        end = " and, with no other call in the turn, the trajectory ends" if not vcalls else ""
        return f"{who} executes no call for it{end}"
    if verdict == AS_INTENDED:
        return f"{who} executes it as written"
    more = f" (and {len(mine) - 1} more call{'s' if len(mine) > 2 else ''} read from its text)" if len(mine) > 1 \
        else ""
    return f"{who} executes `{describe(mine[0])}`{more}"


def _verl_issues(d: CallDraft, fmt: str, verdict: str, mine: list[VerlCall], vcalls: list[VerlCall] | None,
                 text: str) -> None:
    """The findings that come from comparing the two readings of ``d``.

    Tag text inside a value: ``literal_tag_text`` (info when verl reads the call as intended, an error when it
    cuts, merges or drops it; ``nested_call`` when the text is a whole call). (A call that verl drops or
    executes differently with no error finding of its own gets ``verl_mismatch`` in :func:`_finish`.)"""
    does = _verl_does(fmt, verdict, mine, vcalls)
    if d.literals:
        s, e = d.literals[0]
        param = next((p.name for p in d.params if p.value_start <= s < max(p.value_end, p.value_start + 1)), "")
        tags = ", ".join(dict.fromkeys(f"`{snip(text[a:b], 30)}`" for a, b in d.literals[:4]))
        if verdict == AS_INTENDED:
            d.add("literal_tag_text", "as_intended", s, e, param=param, tags=tags, verl=does)
            return
        whole = all(any(text.startswith(tag, a) for a, _ in d.literals)
                    for tag in ("<tool_call>", "<function=", "</tool_call>"))
        if d.fmt == "hermes" and all(text.startswith("</", a) or text.startswith("<tool_call>", a)
                                     for a, _ in d.literals):
            # JSON can spell `</` as `<\/`: verl's regex no longer sees the tag, json.loads reads the same text
            edits = [Edit(a + 1, a + 1, "\\", f"escaped `{snip(text[a:b], 30)}` as `<\\/...`")
                     for a, b in d.literals if text.startswith("</", a)]
            d.add("literal_tag_text", "dropped" if verdict == DROPPED else "mangled", s, e, param=param, tags=tags,
                  verl=does, edits=edits,
                  blocker=None if edits else "verl reads the tag text in the value as markup")
            return
        cat, variant = ("nested_call", "in_value") if whole else (
            "literal_tag_text", "dropped" if verdict == DROPPED else "mangled")
        d.add(cat, variant, s, e, param=param, tags=tags, verl=does,
              blocker="the value holds tag text that verl's parser reads as markup, and raw XML values have no escape")
        return


def _say_what_verl_does(findings: list[Finding], fmt: str, verdict: str, mine: list[VerlCall],
                        vcalls: list[VerlCall] | None) -> None:
    """Append what verl executes to the message of the call's most severe finding (as a second line)."""
    if not findings:
        return
    order = {"error": 0, "warning": 1, "info": 2}
    f = min(findings, key=lambda x: order.get(x.severity, 3))
    if f.category in ("verl_mismatch", "verl_conversion_divergence") and "verl" in f.message:
        return
    f.message = f"{f.message.rstrip()}\nWhat verl does: {_verl_does(fmt, verdict, mine, vcalls)}."


def _check_name(d: CallDraft, index: ToolIndex | None, rs: RuleSet) -> tuple[str | None, str | None]:
    """Resolve the written name; returns (declared tool it resolves to, name to use in a repair)."""
    if d.name is None:
        return None, None
    s, e = (d.name_start, d.name_end) if d.name_start >= 0 else (d.start, d.end)
    declared = index.names if index is not None else None
    if d.name == "" or not d.name.strip():
        d.add("unknown_function", "empty_name", s, e, name=d.name, declared=_list(declared),
              blocker="the call has no function name")
        return None, None
    if index is not None and d.name in index.tools:
        return d.name, d.name  # what match_name answers for a declared name ("exact"), without its cache lookup
    nm = match_name(d.name, declared, rs)
    if nm.kind == "exact":
        return d.name, d.name
    rename = [Edit(s, e, nm.nearest or "", f"renamed `{d.name}` to `{nm.nearest}`")] if d.name_start >= 0 else []
    if nm.kind == "valid_no_schema":
        return None, d.name
    if nm.kind == "garbled":
        d.add("garbled_function_name", nm.variant, s, e, name=d.name, nearest=nm.nearest, how=nm.how, edits=rename)
        d.add("unknown_function", "undeclared", s, e, name=d.name, declared=_list(declared), _covered=True)
        if not rename:
            d.rerender = True
        return nm.nearest, nm.nearest
    if nm.kind == "ambiguous":
        d.add("garbled_function_name", "ambiguous", s, e, name=d.name, nearest=" or ".join(nm.candidates),
              how="with junk attached", candidates=", ".join(nm.candidates),
              blocker=f"`{d.name}` is equally near {', '.join(nm.candidates)}")
        d.add("unknown_function", "undeclared", s, e, name=d.name, declared=_list(declared))
        return None, None
    if nm.kind == "invalid_no_schema":
        if nm.nearest:
            d.add("garbled_function_name", "invalid_chars", s, e, name=d.name, nearest=nm.nearest, how=nm.how,
                  edits=rename)
            if not rename:
                d.rerender = True
            return None, nm.nearest
        d.add("garbled_function_name", "invalid_chars", s, e, name=d.name, nearest="?", how=nm.how,
              blocker=f"no clean tool name can be read from `{d.name}`")
        return None, None
    d.add("unknown_function", "undeclared", s, e, name=d.name, declared=_list(declared),
          blocker=f"no declared tool is near `{d.name}`")
    return None, None


def _list(names: tuple[str, ...] | None, limit: int = 12) -> str:
    if not names:
        return "none"
    shown = ", ".join(names[:limit])
    return shown + (f", … ({len(names)} in all)" if len(names) > limit else "")


def _arguments(d: CallDraft, props: dict[str, Any]) -> Any:
    if d.json_args is MISSING and (d.fmt == "hermes" or d.fmt in JSON_ARGUMENT_FORMATS):
        return None  # the JSON did not decode: no arguments
    if d.json_args is not MISSING:
        a = d.json_args
        if isinstance(a, dict) and d.coerce_strings and props:
            return {k: (intended_value(v, k, props) if isinstance(v, str) else v) for k, v in a.items()}
        return a if a is not MISSING else None
    out: dict[str, Any] = {}
    for p in d.params:
        if p.raw is not None:
            out[p.name] = intended_value(p.raw, p.name, props)
        else:
            out[p.name] = p.value
    return out


def _check_params(d: CallDraft, tool: Any, rs: RuleSet, args: Any) -> dict[str, str]:
    """Schema checks of the parameters; returns garbled parameter renames {written: declared}."""
    props = tool.intended
    fs, fe = (d.name_start, d.name_end) if d.name_start >= 0 else (d.start, d.end)
    renames: dict[str, str] = {}
    if not isinstance(args, dict) and not d.params:
        return renames
    seen: dict[str, list[Any]] = {}
    for p in d.params:
        occ = seen.get(p.name)
        if occ is None:
            seen[p.name] = [p]
        else:
            occ.append(p)
    present = set(seen) if d.params else set(args if isinstance(args, dict) else ())
    for name, occ in seen.items():
        p0 = occ[0]
        ps, pe = (p0.name_start, p0.name_end) if p0.name_start >= 0 else (d.start, d.end)
        if len(occ) > 1:
            vals = [p.raw if p.raw is not None else repr(p.value) for p in occ]
            same = all(v == vals[0] for v in vals)
            d.add("duplicate_parameter", "same_value" if same else "different_values", ps, pe, name=name,
                  count=len(occ), blocker=None if same else f"`{name}` has {len(occ)} different values: which one "
                  "was meant is a guess")
            if same:
                d.rerender = True  # the re-rendered call keeps one copy
        if name not in props:
            if tool.open_properties:
                continue
            free = tuple(k for k in props if k not in present)
            nm = match_name(name, free, rs) if free else None
            if nm is not None and nm.kind == "garbled" and nm.nearest:
                renames[name] = nm.nearest
                edits = [Edit(q.name_start, q.name_end, nm.nearest, f"renamed parameter `{name}` to `{nm.nearest}`")
                         for q in occ if q.name_start >= 0]
                if len(edits) < len(occ):
                    d.rerender = True
                d.add("unknown_parameter", "garbled", ps, pe, name=name, function=tool.name,
                      declared=_list(tuple(props)), nearest=nm.nearest, edits=edits)
            else:
                d.add("unknown_parameter", "undeclared", ps, pe, name=name, function=tool.name,
                      declared=_list(tuple(props)),
                      blocker=f"which declared parameter `{name}` stands for (if any) is a guess")
            continue
        prop = props[name]
        last = occ[-1]
        if last.raw is not None:
            tc = check_xml_value(last.raw, prop, verl_prop=tool.properties.get(name, prop))
            if tc.ok and not tc.divergence:
                continue  # the common case: nothing to report
            shown = last.raw
        else:
            val = last.value
            fobj = FORMATS.get(d.fmt) if last.written is not None else None  # (a format's own value check first)
            tc = fobj.check_value(last.written, val, prop) if fobj is not None else None
            if tc is not None:
                pass
            elif d.coerce_strings and isinstance(val, str):
                tc = check_xml_value(val, prop)
            else:
                tc = check_json_value(val, prop)
            shown = val if isinstance(val, str) else repr(val)
        vs, ve = (last.value_start, last.value_end) if last.value_start >= 0 else (ps, pe)
        if not tc.ok:
            d.add("type_mismatch", tc.variant, vs, ve, name=name, expected=tc.expected, value=snip(str(shown), 40),
                  verl=snip(repr(tc.verl), 40), allowed=tc.allowed,
                  blocker=f"the intended value of `{name}` is unknown")
        elif tc.divergence:
            d.add("verl_conversion_divergence", tc.variant, vs, ve, name=name, expected=tc.expected,
                  value=snip(str(shown), 40), verl=snip(repr(tc.verl), 40))
    covered = present | set(renames.values()) if renames else present
    for r in tool.required:
        if r not in covered:
            d.add("missing_required_parameter", "missing", fs, fe, name=r, function=tool.name,
                  blocker=f"the value of the required `{r}` is unknown")
    return renames


# -- repair -------------------------------------------------------------------------------------------------


def _edit_key(e: Edit) -> tuple[int, int]:
    return e.start, e.end


def _apply(text: str, start: int, end: int, edits: list[Edit]) -> str | None:
    """``text[start:end]`` with ``edits`` (sorted by :func:`_edit_key`) applied; None when they overlap."""
    out: list[str] = []
    pos = start
    for e in edits:
        if e.start < pos or e.end > end or e.start < start:
            return None  # overlapping or out-of-call edits: not one clean repair
        out.append(text[pos:e.start])
        out.append(e.new)
        pos = e.end
    out.append(text[pos:end])
    return "".join(out)


def _repair(d: CallDraft, findings: list[Finding], text: str, fmt: str, name: str | None, renames: dict[str, str],
            props: dict[str, Any], tools: Any, index: ToolIndex | None, rs: RuleSet,
            recheck: tuple[int, Any, list[str]] | None = None) -> tuple[str | None, Any, str | None]:
    """The repair of a call with errors/warnings: (repaired text, its arguments, note), or (None, None, why not).

    ``recheck`` is what :func:`_reclassify` would answer for the repaired text, when the caller knows it."""
    bad = [iss for iss, f in zip(d.issues, findings, strict=False) if f.severity in _BAD]
    blockers: list[str] = []
    placement_only = True  # every error/warning is about where the call is, not what it says
    unedited = False  # an error/warning that no text edit fixes (and no other issue covers)
    for iss in bad:
        why = iss.blocker
        if why is None:
            cat = rs.categories.get(iss.category)
            if cat is not None and not cat.repairable and not iss.params.get("_covered"):
                why = f"{iss.category} is not repairable (rules taxonomy)"
        if why and why not in blockers:
            blockers.append(why)
        if iss.category not in _PLACEMENT:
            placement_only = False
            if not iss.edits and not iss.params.get("_covered"):
                unedited = True
    if blockers:
        return None, None, "no repair: " + "; ".join(blockers)
    target = fmt if fmt in FORMATS else (d.fmt if d.fmt in FORMATS else None)
    if target is None:
        return None, None, "no repair: the trajectory's call format is unknown"
    if name is None:
        return None, None, "no repair: the function name cannot be recovered"
    needs_render = d.fmt != target or d.rerender or unedited
    what: list[str]
    if needs_render and not placement_only:
        fmt_mod = FORMATS[target]
        if d.json_args is MISSING and all(p.raw is not None for p in d.params):
            raw_params: dict[str, str] = {}
            for p in d.params:  # last value wins, like every parser
                raw_params[renames.get(p.name, p.name)] = p.raw or ""
            if target == "qwen3_coder":
                body = fmt_mod.render_raw(name, list(raw_params.items()))
            else:
                body = fmt_mod.render(name, {k: intended_value(v, k, props) for k, v in raw_params.items()})
        else:
            args = _arguments(d, props)
            if not isinstance(args, dict):
                return None, None, "no repair: the arguments cannot be recovered as an object"
            body = fmt_mod.render(name, {renames.get(k, k): v for k, v in args.items()})
        repaired = body
        what = [f"re-rendered as a canonical {target} call"]
        if name != d.name and d.name is not None:
            what.append(f"function `{d.name}` -> `{name}`")
        what += [f"parameter `{a}` -> `{b}`" for a, b in renames.items()]
    else:
        edits = [e for iss in d.issues for e in iss.edits]
        edits.sort(key=_edit_key)
        got = _apply(text, d.start, d.end, edits)
        if got is None:
            return None, None, "no repair: the fixes overlap, so more than one repair is plausible"
        repaired = got.strip()
        if placement_only:
            what = ["the call text itself is well-formed; " + (
                "move it after </think>" if any(i.category == "call_inside_think" for i in bad)
                else "drop the text after it")]
        else:
            what = [e.what for e in edits if e.what]
    n_calls, arguments, left = recheck if recheck is not None else _reclassify(repaired, target, tools, index, rs)
    if n_calls != 1 or left:
        why = ", ".join(left) if left else f"{n_calls} calls"
        return None, None, f"no repair: the automatic fix still leaves {why}"
    return repaired, arguments, "repaired: " + "; ".join(dict.fromkeys(what))


def _reclassify(repaired: str, target: str, tools: Any, index: ToolIndex | None,
                rs: RuleSet) -> tuple[int, Any, list[str]]:
    """A repaired call text classified as ``_analyze(repaired, target, ...)`` does: the number of calls, the
    arguments of the first, and the categories of its error/warning findings (sorted).

    A repair is usually a canonical call, so the fast path is asked first (:func:`.fastpath.single_call`, as
    ``_analyze`` would ask it: ``target`` is a known format, ``index`` is ``tool_index(tools)``, the text holds no
    think tag and no foreign markup, so it is one segment); when it declines, the full pipeline runs.
    """
    if FAST_PATH and not rs.regex_rules and not rs.foreign_untriggered and "think>" not in repaired:
        for trig in rs.foreign_literals:
            if trig in repaired:
                break
        else:
            fast = single_call(repaired, target, index, rs)
            if fast is not None:
                return fast[0], fast[1], []
    sub = _analyze(repaired, target, tools, TurnContext(), rs, repair=False, with_spans=False)
    left = sorted({f.category for f in sub.findings if f.severity in _BAD})
    return len(sub.calls), sub.calls[0].arguments if sub.calls else None, left


# -- turn-level extras ---------------------------------------------------------------------------------------


def _invented(text: str, think: list[tuple[int, int, int, int, int, int]], rs: RuleSet, index: ToolIndex | None,
              fmt_key: str) -> list[Finding]:
    out: list[Finding] = []
    for m in rs.invented_re.finditer(text):
        if any(cs <= m.start() < ce for cs, ce, *_ in think):
            continue
        tag = m.group(1)
        if tag in rs.invented_allowed:
            continue
        variant = "tool_named" if index is not None and tag in index.tools else "element"
        out.append(_finding(rs, Issue("invented_tag", variant, m.start(), m.end(), {"tag": tag}), fmt_key, None))
        if len(out) >= 3:
            break
    return out


def _tile(spans: list[tuple[int, int, str, int | None]], n: int) -> list[Span]:
    """Sort, drop overlaps, fill gaps with ``text`` and merge neighbours of the same kind and call."""
    spans.sort()
    merged: list[list[Any]] = []  # [start, end, kind, call_index]
    pos = 0
    for s, e, k, ci in spans:
        if s < pos:
            s = pos
        if e > n:
            e = n
        if e <= s:
            continue
        if s > pos:
            if merged and merged[-1][2] == "text" and merged[-1][3] is None:
                merged[-1][1] = s
            else:
                merged.append([pos, s, "text", None])
        last = merged[-1] if merged else None
        if last is not None and last[2] == k and last[3] == ci and last[1] == s:
            last[1] = e
        else:
            merged.append([s, e, k, ci])
        pos = e
    if pos < n:
        if merged and merged[-1][2] == "text" and merged[-1][3] is None:
            merged[-1][1] = n
        else:
            merged.append([pos, n, "text", None])
    return [Span(k, s, e, ci) for s, e, k, ci in merged]


def _user_rules(text: str, rs: RuleSet, spans: list[Span], calls: list[ParsedCall], drafts: list[CallDraft],
                fmt_key: str) -> list[Finding]:
    out: list[Finding] = []
    value_param: dict[int, str] = {}
    for d in drafts:
        for p in d.params:
            if p.value_start >= 0:
                value_param[p.value_start] = p.name
    for rule in rs.regex_rules:
        if rule.formats and fmt_key not in rule.formats:
            continue
        regions: list[tuple[int, int, int | None]] = []
        for target in rule.applies_to:
            if target == "turn":
                regions.append((0, len(text), None))
            elif target == "call":
                regions += [(c.start, c.end, c.call_index) for c in calls]
            else:
                for sp in spans:
                    if sp.kind != target:
                        continue
                    if rule.params is not None and value_param.get(sp.start) not in rule.params:
                        continue
                    regions.append((sp.start, sp.end, sp.call_index))
        for s, e, ci in regions:
            if rule.functions is not None and (ci is None or calls[ci].function_name not in rule.functions):
                continue
            for m in rule.pattern.finditer(text, s, e):
                if m.end() <= m.start():
                    continue
                sev = rule.severity or rs.categories[rule.category].severity
                msg = rule.message or rs.message(rule.category, None, {"match": snip(m.group(), 40)})
                try:
                    msg = msg.format(match=snip(m.group(), 40))
                except (KeyError, IndexError, ValueError):
                    pass
                out.append(Finding(rule.category, sev, m.start(), m.end(), msg, f"user/{rule.id}", ci))  # type: ignore[arg-type]
                if ci is not None and sev in _BAD and rule.category not in calls[ci].categories:
                    calls[ci].categories = sorted([*calls[ci].categories, rule.category])
                    calls[ci].status = "malformed"
    return out
