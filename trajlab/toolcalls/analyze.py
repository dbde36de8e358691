"""Classify one assistant turn: find every call, check it, name each problem, offer repairs, tile the spans.

This module is the turn pipeline (:func:`analyze_turn`, :func:`check_turn`, :func:`detect_output_format`); each
step's work lives in a module of its own, named below. Pipeline of :func:`analyze_turn` (never raises):

1. fast paths: a few ``str.find`` calls; a turn with no markup returns a single ``text`` span, a turn whose
   only markup is think tags (or an invented tag) skips the call search (steps 2-5 would find nothing); a turn
   whose calls are all canonical and well-formed is recognised by :mod:`.fastpath` and returned directly (with
   its ``text_after_call`` finding, the only one such a turn can have); a qwen3_coder turn whose calls are all
   *simple* (canonical in form, or with misspelt or missing closing tags: see
   :func:`.qwen3_coder.simple.read_call`) gets from :mod:`.fastpath` the drafts the scanner would make, and
   step 2 is skipped;
2. ``<think>`` regions are cut out (:mod:`.think`); each segment is scanned for foreign markup, then by the
   turn's format module (``toolcalls/formats/<name>.py``), then for bare JSON calls;
3. turn-level facts are attached (call inside ``<think>``, text after the last call: :mod:`.placement`);
4. each call draft gets its verdict (:mod:`.call`): it is checked against the tool schema (names, parameters,
   required, types, with verl's value conversion: :mod:`.call_checks`) and against verl's own reading
   (:mod:`.verl_verdict`), and its issues become :class:`~trajlab.model.Finding` records with the taxonomy's
   severity and message (:mod:`.findings`);
5. a repair is built when every error/warning of the call is repairable, and kept only if the repaired text
   re-classifies with no error or warning (:mod:`.repair`, which re-runs this pipeline through
   :func:`_reclassify`);
6. spans are sorted and the gaps filled with ``text``, so they tile the turn (:mod:`.tiling`); invented tags and
   user regex rules run last (:mod:`.turn_checks`).

For a qwen3_coder turn the scanner's reading is weighed against verl's reading of closed calls
(:func:`_closed_reading`): the one with fewer errors wins.
"""

from __future__ import annotations

import re
from typing import Any

from trajlab.model import Finding, ParsedCall, Span, TurnAnalysis, TurnContext
from trajlab.toolcalls.call import finish_call
from trajlab.toolcalls.draft import CallDraft, Issue, snip
from trajlab.toolcalls.fastpath import read_turn, single_call
from trajlab.toolcalls.findings import BAD_SEVERITIES, finding_key, issue_finding
from trajlab.toolcalls.formats import FORMATS
from trajlab.toolcalls.formats.foreign import find_foreign
from trajlab.toolcalls.formats.qwen3_coder.values import closed_reading, standalone
from trajlab.toolcalls.jsonbody import find_bare_json
from trajlab.toolcalls.placement import after_canonical, turn_facts
from trajlab.toolcalls.ruleset import RuleSet, get_ruleset
from trajlab.toolcalls.schema import ToolIndex, tool_index
from trajlab.toolcalls.think import think_regions, think_spans, turn_segments, unbalanced_think
from trajlab.toolcalls.tiling import tile_spans
from trajlab.toolcalls.turn_checks import invented_tags, user_rules
from trajlab.toolcalls.verl_parser import verl_calls

#: take the fast paths: :mod:`.fastpath` for turns whose calls are canonical or simple, and the format scanners'
#: regex readers (tests switch it off to compare with the full pipeline: the token state machines)
FAST_PATH = True
_OPENER = re.compile(r"<(parameter|function)=([^<>\n]*)>")


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


# -- the pipeline -----------------------------------------------------------------------------------------


def _analyze(text: str, tool_format: str, tools: Any, ctx: TurnContext, rs: RuleSet, *, repair: bool,
             tool_context: bool = False, with_spans: bool = True) -> TurnAnalysis:
    n = len(text)
    if n == 0:
        return TurnAnalysis([], [], [])
    markup = _markup(text, rs)
    if markup == _NO_MARKUP:
        spans = [Span("text", 0, n)]
        findings = user_rules(text, rs, spans, [], [], tool_format) if rs.has_text_rules else []
        return TurnAnalysis([], findings, spans)

    fmt = tool_format if tool_format in FORMATS else detect_output_format(text, rs)
    index = tool_index(tools) if isinstance(tools, list) else None
    think = think_regions(text) if "think>" in text else []
    drafts: list[CallDraft] = []
    turn_issues: list[Issue] = []
    has_foreign = rs.foreign_untriggered
    if not has_foreign and markup == _CALL_MARKUP:
        for trig in rs.foreign_literals:
            if trig in text:
                has_foreign = True
                break
    segments = turn_segments(n, think) if think else [(0, n, False)]
    want_spans = with_spans or bool(rs.regex_rules)  # user regex rules read the tiling
    fast = None
    if (markup == _CALL_MARKUP and FAST_PATH and not has_foreign and not rs.regex_rules
            and (not think or (think[-1][4] >= 0 and not unbalanced_think(text, think)))):  # closed, none reopened
        fast = read_turn(text, fmt, index, segments, rs, with_spans, trailing_text=True)
        if fast is not None and fast.calls is not None:
            # every call canonical and well-formed: at most text after the last one to report
            findings = after_canonical(text, fast, think, ctx, fmt, tools, index, rs, repair, _reclassify)
            return TurnAnalysis(fast.calls, findings,
                                tile_spans(fast.spans + think_spans(think), n) if with_spans else [])
    if fast is not None and fast.drafts is not None:
        drafts = fast.drafts  # canonical in form: the drafts the scanner would make, without running it
    elif markup == _CALL_MARKUP:  # (otherwise no segment holds a call literal or a foreign trigger: nothing to find)
        _scan(text, fmt, segments, has_foreign, want_spans, rs, drafts, turn_issues)
    turn_facts(text, drafts, think, ctx)

    calls: list[ParsedCall] = []
    findings: list[Finding] = []
    spans: list[tuple[int, int, str, int | None]] = []
    vcalls = verl_calls(text, fmt, index) if drafts else None
    for i, d in enumerate(drafts):
        pc, fs = finish_call(i, d, text, fmt, index, rs, tools, repair, vcalls, _reclassify)
        calls.append(pc)
        findings += fs
        if want_spans and not d.in_think:
            spans += [(s, e, k, i) for k, s, e in d.spans]

    if (fmt == "qwen3_coder" and index is not None and not think and not has_foreign and not rs.regex_rules
            and (turn_issues or any(f.severity in BAD_SEVERITIES for f in findings))):
        alt = _closed_reading(text, fmt, index, rs, tools, repair, ctx, want_spans)
        if alt is not None:
            calls, findings, spans, drafts = alt
            turn_issues = []

    fmt_key = fmt if fmt in FORMATS else "none"
    for iss in turn_issues:
        findings.append(issue_finding(rs, iss, fmt_key, None))
    if want_spans:
        spans += think_spans(think)
    unbalanced = unbalanced_think(text, think) if think else []
    for cs, _ce, os_, oe, c_s, _c_e in think:
        if c_s < 0 and not any(v == "unclosed" and s == os_ for v, s, _e, _t in unbalanced):
            findings.append(issue_finding(rs, Issue("unclosed_think", "at_end", os_ if os_ >= 0 else cs,
                                                    oe if oe >= 0 else cs), fmt_key, None))
    for variant, s, e, tag in unbalanced:  # a think block left open (or opened twice) before a complete answer
        findings.append(issue_finding(rs, Issue("unbalanced_think", variant, s, e, {"tag": tag}), fmt_key, None))
    if not calls and (fmt in FORMATS or index is not None or tool_context):
        findings += invented_tags(text, think, rs, index, fmt_key)

    tiled = tile_spans(spans, n) if with_spans or rs.regex_rules else []
    if rs.regex_rules:
        findings += user_rules(text, rs, tiled, calls, drafts, fmt_key)
    if len(findings) > 1:
        findings.sort(key=finding_key)
    return TurnAnalysis(calls, findings, tiled if with_spans else [])


def _closed_reading(text: str, fmt: str, index: ToolIndex, rs: RuleSet, tools: Any, repair: bool,
                    ctx: TurnContext, want_spans: bool) -> tuple[Any, Any, Any, Any] | None:
    """The turn read as verl's regexes read closed calls (:func:`.qwen3_coder.values.closed_reading`), when that
    reading is clean -- every call declared, complete and well-typed, no error or warning -- and the tag text it
    puts inside values is not a parameter the call leaves out (that is a ``</parameter>`` the model forgot):
    (calls, findings, spans, drafts); None when the scanner's reading stands. When verl's reading is not clean,
    the schema-guided one is tried: a ``<parameter=X>`` inside a value whose tool does not declare X is text
    (with the ``</parameter>`` that closes it), as vLLM reads it; verl's own reading is still what
    ``verl_executes`` reports, so where the two differ the call says so."""
    alt = _clean_reading(text, fmt, index, rs, tools, repair, ctx, want_spans, closed_reading(text, 0, len(text)))
    if alt is None:
        alt = _clean_reading(text, fmt, index, rs, tools, repair, ctx, want_spans,
                             closed_reading(text, 0, len(text), lambda name: _closed_names(index, name)))
    return alt


def _closed_names(index: ToolIndex, name: str) -> frozenset[str] | None:
    """The parameters tool ``name`` declares; None when it is undeclared or takes any parameter."""
    tool = index.tools.get(name)
    if tool is None or tool.open_properties:
        return None
    return frozenset(tool.properties)


def _clean_reading(text: str, fmt: str, index: ToolIndex, rs: RuleSet, tools: Any, repair: bool,
                   ctx: TurnContext, want_spans: bool,
                   drafts: list[CallDraft] | None) -> tuple[Any, Any, Any, Any] | None:
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
    turn_facts(text, drafts, [], ctx)
    vcalls = verl_calls(text, fmt, index)
    calls: list[ParsedCall] = []
    findings: list[Finding] = []
    spans: list[tuple[int, int, str, int | None]] = []
    for i, d in enumerate(drafts):
        pc, fs = finish_call(i, d, text, fmt, index, rs, tools, repair, vcalls, _reclassify)
        if any(f.severity in BAD_SEVERITIES for f in fs if f.category not in ("literal_tag_text", "nested_call")):
            return None
        calls.append(pc)
        findings += fs
        if want_spans:
            spans += [(s, e, k, i) for k, s, e in d.spans]
    return calls, findings, spans, drafts


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
            # verl, so bare functions / JSON objects written while thinking are not calls. A call begun with a
            # family's special token (Kimi's `<|tool_call_begin|>` without its section) is no quotation: it stays,
            # and says that verl drops it
            seg_drafts = [d for d in seg_drafts
                          if not any(i.category == "missing_call_open" and i.variant != "section_begin"
                                     for i in d.issues)]
        for d in seg_drafts:
            d.in_think = in_think
        drafts += seg_drafts
    drafts.sort(key=_draft_start)


def _draft_start(d: CallDraft) -> int:
    return d.start


def _reclassify(repaired: str, target: str, tools: Any, index: ToolIndex | None,
                rs: RuleSet) -> tuple[int, Any, list[str]]:
    """A repaired call text classified as ``_analyze(repaired, target, ...)`` does: the number of calls, the
    arguments of the first, and the categories of its error/warning findings (sorted). It is the ``reclassify``
    that :func:`.repair.repair_call` is given (the repair module does not import the pipeline).

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
    left = sorted({f.category for f in sub.findings if f.severity in BAD_SEVERITIES})
    return len(sub.calls), sub.calls[0].arguments if sub.calls else None, left
