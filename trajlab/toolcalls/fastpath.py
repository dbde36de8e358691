"""Fast path of the classifier: a turn whose calls are all canonical and well-formed (or, for qwen3_coder, simple).

Almost every call of a healthy run is written exactly as the chat template renders it::

    <tool_call>\\n<function=NAME>\\n<parameter=P>\\nVALUE\\n</parameter>\\n</function>\\n</tool_call>   (qwen3_coder)
    <tool_call>\\n{"name": NAME, "arguments": {...}}\\n</tool_call>                                   (hermes)

For such a turn the full pipeline of :mod:`.analyze` (scanner state machine, drafts, issues, checks, repairs)
ends with calls that have no finding at all. :func:`fast_calls` recognises the turn with regexes that read tags
exactly as the format's lexer does (hermes: the lexer's own ``FRAME_RE``; qwen3_coder:
:func:`.qwen3_coder.simple.read_call`, whose grammar is ``TAG_RE``'s, checked against it by the tests), checks
the calls with the same schema functions (:func:`~.verl_conversion.verl_convert`,
:func:`~.type_checks.check_xml_value`, :func:`~.type_checks.check_json_value`) and builds the same
:class:`~trajlab.model.ParsedCall` records (and the same spans) directly.

It answers only when it is certain: every tag in the turn outside ``<think>`` is canonical and part of a
complete call, gaps between tags inside a call are whitespace, no other call markup (no call literal in the
text between calls or inside ``<think>``), names are declared (without a schema: a valid tool name),
parameters are declared (undeclared ones only where the tool allows them), required parameters are present,
no parameter is repeated, every value fits its type without a verl divergence, no stray ``>`` follows a call
and nothing but whitespace follows the last call. Anything else returns ``None`` and the full pipeline runs.
Two cheap necessary conditions (the last ``<tool_call>`` is closed, the turn ends with ``</tool_call>``) are
checked first, so most malformed turns are turned away before any call is parsed.

:func:`read_turn` is what :func:`.analyze.analyze_turn` asks: with ``trailing_text=True`` text *without call
markup* may follow the last call (the caller reports it: ``text_after_call`` is the only finding such a turn
can have), and a qwen3_coder turn whose calls are all *simple* (canonical in form, or with misspelt or missing
closing tags) but not all canonical and well-formed comes back as the drafts the format's scanner would make,
issues included: the caller skips the scanner and goes on with the turn-level facts and the schema checks.
:func:`single_call` reads a repair's text. The caller also requires no foreign markup, no user regex rules and
closed ``<think>`` blocks, none opened twice (``unbalanced_think``/``reopened`` is a finding only the full pipeline
reports).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from trajlab.model import ParsedCall
from trajlab.toolcalls.draft import MISSING, CallDraft, ParamDraft, parsed_call
from trajlab.toolcalls.formats.hermes import FRAME_RE
from trajlab.toolcalls.formats.qwen3_coder.simple import (
    XmlShape,
    read_call,
    shape_content,
    shape_draft,
    shape_spans,
)
from trajlab.toolcalls.json_walk import Member, walk_valid
from trajlab.toolcalls.jsonbody import json_spans
from trajlab.toolcalls.ruleset import RuleSet
from trajlab.toolcalls.schema import ToolIndex
from trajlab.toolcalls.type_checks import check_json_value, check_xml_value
from trajlab.toolcalls.verl_conversion import verl_convert

RawSpan = tuple[int, int, str, int | None]
Segment = tuple[int, int, bool]
_NO_PROPS: dict[str, Any] = {}


@dataclass(slots=True)
class FastTurn:
    """What :func:`read_turn` makes of a turn whose calls are canonical, or (qwen3_coder) simple."""

    calls: list[ParsedCall] | None  # every call is also well-formed: the final calls (all ``ok``); else None
    spans: list[RawSpan]  # the spans of those calls (with ``with_spans``)
    drafts: list[CallDraft] | None  # otherwise (qwen3_coder): the drafts the format's scanner would make
    reads: list[tuple[XmlShape, CallDraft | None]]  # qwen3_coder: what was read of each call

    def arguments_again(self, ci: int, index: ToolIndex | None) -> Any:
        """The arguments of the well-formed qwen3_coder call ``ci`` converted once more (a fresh object, as
        classifying its text again would give them); MISSING for a hermes turn."""
        if not self.reads:
            return MISSING
        shape = self.reads[ci][0]
        return _xml_arguments(shape[2], shape[5], index)


def fast_calls(text: str, fmt: str, index: ToolIndex | None, segments: list[Segment], rs: RuleSet,
               with_spans: bool, trailing_text: bool = False) -> tuple[list[ParsedCall], list[RawSpan]] | None:
    """The calls (all ``ok``, no finding) and the calls' spans of a canonical turn; ``None``: run the full pipeline.

    ``segments`` are the turn's ``(start, end, in_think)`` pieces (as :func:`.think.turn_segments` cuts them);
    spans are ``(start, end, kind, call_index)`` for the calls only (text and think spans are the caller's).
    ``trailing_text=True`` also answers when more than whitespace follows the last call (text without call
    markup: the gap after a call is read like the gaps between calls); the caller then reports that text.
    """
    turn = read_turn(text, fmt, index, segments, rs, with_spans, trailing_text)
    if turn is None or turn.calls is None:
        return None
    return turn.calls, turn.spans


def single_call(text: str, fmt: str, index: ToolIndex | None, rs: RuleSet) -> tuple[int, Any] | None:
    """For a text with no think tag, meant to be one call (a repair's text): how many calls :func:`fast_calls`
    finds in it and the arguments of the first; None when it declines.

    The common case, a text that is exactly one canonical qwen3_coder call (and whitespace), is read directly:
    the checks :func:`fast_calls` would make around it (no other markup, nothing after the call) hold by
    construction. Anything else goes to :func:`fast_calls` with the text as one segment outside ``<think>``.
    """
    if fmt == "qwen3_coder" and text.startswith("<tool_call>"):
        try:
            read = read_call(text, 0, len(text), rs)
            if read is not None and read[1] is None and not text[read[0][1]:].strip():
                name, params = read[0][2], read[0][5]
                if not _resolve(name, index, rs)[0]:
                    return None
                args = _xml_arguments(name, params, index)
                return None if args is None else (1, args)
        except Exception:  # as in fast_calls: the full pipeline decides
            return None
    fast = fast_calls(text, fmt, index, [(0, len(text), False)], rs, False)
    return None if fast is None else (len(fast[0]), fast[0][0].arguments)


def read_turn(text: str, fmt: str, index: ToolIndex | None, segments: list[Segment], rs: RuleSet,
              with_spans: bool, trailing_text: bool = False) -> FastTurn | None:
    """:func:`fast_calls`, and for a qwen3_coder turn whose calls are all *simple*
    (:func:`.qwen3_coder.simple.read_call`: canonical, or with misspelt or missing closing tags) but not all
    canonical and well-formed (also: an undeclared or garbled name, a parameter that is undeclared, repeated,
    missing or of the wrong type), the drafts the format's scanner makes of them, so that the caller can go
    straight to the turn-level facts and the schema checks. ``None``: run the full pipeline.

    With ``trailing_text`` (the caller reports what follows the last call) the last call may also lack its
    ``</tool_call>``."""
    try:
        return _read(text, fmt, index, segments, rs, with_spans, trailing_text)
    except Exception:  # never guess: whatever went wrong, the full pipeline decides (and reports it)
        return None


def _read(text: str, fmt: str, index: ToolIndex | None, segments: list[Segment], rs: RuleSet,
          with_spans: bool, trailing_text: bool) -> FastTurn | None:
    if fmt not in ("qwen3_coder", "hermes") or "<tool_call>" not in text:
        return None
    # cheap necessary conditions, checked before any call is parsed: the last `<tool_call>` is closed (every
    # call is), and unless text may follow the last call, the turn ends with `</tool_call>` and whitespace
    if not trailing_text and (text.rfind("</tool_call>") < text.rfind("<tool_call>") or not _ends_with_call(text)):
        return None
    calls: list[ParsedCall] = []
    spans: list[RawSpan] | None = [] if with_spans else None
    xml = fmt == "qwen3_coder"
    reads: list[tuple[XmlShape, CallDraft | None]] = []
    well_formed = True
    for lo, hi, in_think in segments:
        if in_think:
            if rs.has_literal(text, lo, hi):
                return None
        elif xml:
            ok = _xml_segment(text, lo, hi, index, rs, reads, calls if well_formed else None, spans)
            if ok is None:
                return None
            well_formed = well_formed and ok
        elif not _hermes_segment(text, lo, hi, index, rs, calls, spans):
            return None
    end = reads[-1][0][1] if xml and reads else calls[-1].end if calls else -1
    if end < 0 or (not trailing_text and text[end:].strip()):
        return None
    if well_formed:
        return FastTurn(calls, spans or [], None, reads)
    drafts = []
    for shape, d in reads:
        if d is None:
            d = shape_draft(shape, with_spans)
        elif with_spans:
            shape_spans(d, shape)
        drafts.append(d)
    return FastTurn(None, [], drafts, reads)


def _ends_with_call(text: str) -> bool:
    """Whether the turn ends with ``</tool_call>`` and whitespace (every call of a canonical turn ends so, and
    nothing but whitespace follows the last one): a cheap necessary condition checked before any parsing."""
    if text.endswith("</tool_call>"):
        return True
    return text[-1:].isspace() and text.rstrip().endswith("</tool_call>")


def _ok_call(name: str, matched: str | None, args: Any, text: str, start: int, end: int, fmt: str,
             ci: int) -> ParsedCall:
    return parsed_call(ci, fmt, text[start:end], start, end, name, matched, args, "ok", [])


def _resolve(name: str, index: ToolIndex | None, rs: RuleSet) -> tuple[bool, str | None]:
    """(the name raises no finding, the declared tool it matches) -- exact names only."""
    if not name.strip():
        return False, None
    if index is None:
        return rs.valid_name_re.fullmatch(name) is not None, None
    return name in index.tools, name


# -- qwen3_coder ---------------------------------------------------------------------------------------------

# What the format's lexer (TAG_RE) takes as a tag: `<`, an optional `/`, spaces or tabs, a keyword.
_TAG_KW = r"/?[ \t]*(?:tool_call|function|parameter)"
#: the next thing in a gap between calls that a scanner reads: a tag, or a JSON key that starts a bare call
_NEXT_MARKUP = re.compile(r"<(?=" + _TAG_KW + r')|"(?:name|function)')


def _xml_segment(text: str, lo: int, hi: int, index: ToolIndex | None, rs: RuleSet,
                 reads: list[tuple[XmlShape, CallDraft | None]], calls: list[ParsedCall] | None,
                 spans: list[RawSpan] | None) -> bool | None:
    """Read the calls of one segment outside ``<think>`` into ``reads`` (shape, and draft unless canonical), and
    while they are all canonical and well-formed (``calls`` is not None) into ``calls``. None: a call is not
    simple, or there is other markup; False: a call is not canonical and well-formed."""
    pos = lo
    well_formed = calls is not None
    while (m := _NEXT_MARKUP.search(text, pos, hi)) is not None:
        read = read_call(text, m.start(), hi, rs)
        if read is None:
            return None
        reads.append(read)
        shape, d = read
        pos = shape[1]
        if well_formed and calls is not None:
            call = _xml_call(text, shape, index, rs, len(calls), spans) if d is None else None
            if call is None:
                well_formed = False
            else:
                calls.append(call)
    return well_formed


def _xml_call(text: str, shape: XmlShape, index: ToolIndex | None, rs: RuleSet, ci: int,
              spans: list[RawSpan] | None) -> ParsedCall | None:
    """The call of a canonical call's ``shape`` when it is well-formed (name, parameters, values), else None."""
    start, end, name, _ns, _ne, params = shape
    ok, matched = _resolve(name, index, rs)
    if not ok:
        return None
    args = _xml_arguments(name, params, index)
    if args is None:
        return None
    if spans is not None:
        _fill(spans, start, end, shape_content(shape), ci)
    return _ok_call(name, matched, args, text, start, end, "qwen3_coder", ci)


def _xml_arguments(name: str, params: list[tuple[str, int, int, int, int, str]],
                   index: ToolIndex | None) -> dict[str, Any] | None:
    """The arguments, converted like verl, of a call to the resolved ``name``; None when a parameter raises a
    finding (repeated, undeclared, a value that does not fit, a required one missing)."""
    if index is None:  # no schema: no parameter checks, every value is the raw string (or None for "null")
        return {p[0]: verl_convert(p[5], p[0], _NO_PROPS) for p in params}
    tool = index.tools[name]
    props = tool.properties
    intended = tool.intended
    args: dict[str, Any] = {}
    for p, _ns, _ne, _vs, _ve, raw in params:
        if p in args:
            return None  # a repeated parameter
        v = verl_convert(raw, p, props)
        if p in props:
            # no divergence: the value verl converts is the value the call means (`intended_value`)
            tc = check_xml_value(raw, intended[p], v, props[p])
            if not tc.ok or tc.divergence:
                return None
        elif not tool.open_properties:
            return None  # an undeclared parameter
        args[p] = v
    for r in tool.required:
        if r not in args:
            return None
    return args


def _fill(spans: list[RawSpan], start: int, end: int, content: list[tuple[int, int, str]], ci: int | None) -> None:
    """Spans of a call: the content spans in order, ``structural`` for everything between them."""
    pos = start
    for s, e, kind in content:
        if s > pos:
            spans.append((pos, s, "structural", ci))
        if e > s:
            spans.append((s, e, kind, ci))
        pos = max(pos, e)
    if end > pos:
        spans.append((pos, end, "structural", ci))


# -- hermes ----------------------------------------------------------------------------------------------------


def _hermes_segment(text: str, lo: int, hi: int, index: ToolIndex | None, rs: RuleSet, calls: list[ParsedCall],
                    spans: list[RawSpan] | None) -> bool:
    """Parse the ``<tool_call>`` blocks of one segment outside ``<think>``; False when one is not canonical."""
    pos = lo
    while (m := _NEXT_MARKUP.search(text, pos, hi)) is not None:
        start = m.start()
        if not text.startswith("<tool_call>", start):
            return False
        cl = FRAME_RE.search(text, start + 11, hi)  # the next frame the hermes lexer sees must close the block
        if cl is None or cl.group() != "</tool_call>":
            return False
        call = _hermes_call(text, start, start + 11, cl.start(), cl.end(), index, rs, len(calls), spans)
        if call is None:
            return False
        calls.append(call)
        pos = call.end
    return True


def _hermes_call(text: str, start: int, bs: int, be: int, end: int, index: ToolIndex | None, rs: RuleSet, ci: int,
                 spans: list[RawSpan] | None) -> ParsedCall | None:
    """One ``<tool_call>`` block whose body is exactly ``{"name": str, "arguments": {...}}`` (valid JSON)."""
    body = text[bs:be]
    if text.startswith(">", end) or not body.lstrip().startswith("{"):
        return None
    try:
        obj = json.loads(body)
    except Exception:  # JSONDecodeError, RecursionError: the full pipeline diagnoses it
        return None
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str) or "arguments" not in obj:
        return None
    name, args = obj["name"], obj["arguments"]
    members = walk_valid(text, bs, be) if isinstance(args, dict) else None
    if members is None:
        return None
    arg_members = [mb for mb in members if mb.depth == 2 and mb.parent == "arguments"]
    if len(arg_members) != len(args) or {mb.key for mb in arg_members} != args.keys():
        return None  # repeated keys, or arguments that cannot be located
    ok, matched = _resolve(name, index, rs)
    if not ok or (index is not None and not _json_args_fit(index, name, args)):
        return None
    if spans is not None:
        _hermes_spans(spans, text, start, bs, be, end, name, members, arg_members, ci)
    return _ok_call(name, matched, args, text, start, end, "hermes", ci)


def _json_args_fit(index: ToolIndex, name: str, args: dict[str, Any]) -> bool:
    tool = index.tools[name]
    props = tool.intended
    for k, v in args.items():
        if k in props:
            tc = check_json_value(v, props[k])
            if not tc.ok or tc.divergence:
                return False
        elif not tool.open_properties:
            return False  # an undeclared parameter
    return all(r in args for r in tool.required)


def _hermes_spans(spans: list[RawSpan], text: str, start: int, bs: int, be: int, end: int, name: str,
                  members: list[Member], arg_members: list[Member], ci: int) -> None:
    """The same spans the hermes scanner gives the block (the body's via :func:`.jsonbody.json_spans`)."""
    d = CallDraft("hermes", start, end, name)
    for mb in members:
        if mb.depth == 1 and mb.key == "name" and mb.vstr:
            d.name_start, d.name_end = mb.vs + 1, mb.ve - 1
            break
    d.params = [ParamDraft(mb.key, mb.ks, mb.ke, None, None, mb.vs, mb.ve) for mb in arg_members]
    d.span("structural", start, bs)
    json_spans(d, text, bs, be, members)
    d.span("structural", be, end)
    spans += [(s, e, k, ci) for k, s, e in d.spans]
