"""Fast path of the classifier: a turn whose calls are all canonical and well-formed.

Almost every call of a healthy run is written exactly as the chat template renders it::

    <tool_call>\\n<function=NAME>\\n<parameter=P>\\nVALUE\\n</parameter>\\n</function>\\n</tool_call>   (qwen3_coder)
    <tool_call>\\n{"name": NAME, "arguments": {...}}\\n</tool_call>                                   (hermes)

For such a turn the full pipeline of :mod:`.analyze` (scanner state machine, drafts, issues, checks, repairs)
ends with calls that have no finding at all. :func:`fast_calls` recognises the turn with regexes that read tags
exactly as the format's lexer does (hermes: the lexer's own ``FRAME_RE``; qwen3_coder: ``TAG_RE``'s grammar,
checked against it by the tests), checks the calls with the same schema functions
(:func:`~.schema.verl_convert`, :func:`~.schema.check_xml_value`, :func:`~.schema.check_json_value`) and
builds the same :class:`~trajlab.model.ParsedCall` records (and the same spans) directly.

It answers only when it is certain: every tag in the turn outside ``<think>`` is canonical and part of a
complete call, gaps between tags inside a call are whitespace, no other call markup (no call literal in the
text between calls or inside ``<think>``), names are declared (without a schema: a valid tool name),
parameters are declared (undeclared ones only where the tool allows them), required parameters are present,
no parameter is repeated, every value fits its type without a verl divergence, no stray ``>`` follows a call
and nothing but whitespace follows the last call. Anything else returns ``None`` and the full pipeline runs.
The caller (:func:`.analyze._analyze`) also requires no foreign markup, no user regex rules and closed
``<think>`` blocks.
"""

from __future__ import annotations

import json
import re
from typing import Any

from trajlab.model import ParsedCall
from trajlab.toolcalls.draft import CallDraft, ParamDraft
from trajlab.toolcalls.format_hermes import FRAME_RE
from trajlab.toolcalls.jsonbody import Member, json_spans, walk_valid
from trajlab.toolcalls.ruleset import RuleSet
from trajlab.toolcalls.schema import ToolIndex, check_json_value, check_xml_value, verl_convert

RawSpan = tuple[int, int, str, int | None]
Segment = tuple[int, int, bool]
_NO_PROPS: dict[str, Any] = {}


def fast_calls(text: str, fmt: str, index: ToolIndex | None, segments: list[Segment], rs: RuleSet,
               with_spans: bool) -> tuple[list[ParsedCall], list[RawSpan]] | None:
    """The calls (all ``ok``, no finding) and the calls' spans of a canonical turn; ``None``: run the full pipeline.

    ``segments`` are the turn's ``(start, end, in_think)`` pieces (as :func:`.analyze._segments` cuts them);
    spans are ``(start, end, kind, call_index)`` for the calls only (text and think spans are the caller's).
    """
    try:
        return _calls(text, fmt, index, segments, rs, with_spans)
    except Exception:  # never guess: whatever went wrong, the full pipeline decides (and reports it)
        return None


def _calls(text: str, fmt: str, index: ToolIndex | None, segments: list[Segment], rs: RuleSet,
           with_spans: bool) -> tuple[list[ParsedCall], list[RawSpan]] | None:
    parse = _xml_segment if fmt == "qwen3_coder" else _hermes_segment if fmt == "hermes" else None
    if parse is None or "<tool_call>" not in text:
        return None
    calls: list[ParsedCall] = []
    spans: list[RawSpan] | None = [] if with_spans else None
    for lo, hi, in_think in segments:
        if in_think:
            if rs.has_literal(text, lo, hi):
                return None
        elif not parse(text, lo, hi, index, rs, calls, spans):
            return None
    if not calls or text[calls[-1].end:].strip():
        return None
    return calls, spans or []


def _ok_call(name: str, matched: str | None, args: Any, text: str, start: int, end: int, fmt: str,
             ci: int) -> ParsedCall:
    return ParsedCall(call_index=ci, format=fmt, raw=text[start:end], start=start, end=end, function_name=name,
                      matched_tool=matched, arguments=args, status="ok", categories=[])


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
# A canonical tag as TAG_RE lexes it: a name is the tag's tail after `=` (at most 255 characters, no `<>\n`),
# without spaces or tabs (those are the lexer's malformed spellings). Gaps between tags: whitespace only.
_NAME = r"([^<>\n \t]{0,255})>"
_XML_HEAD = re.compile(r"<tool_call>\s*<function=" + _NAME)
# a value holds no tag: every `<` in it is one TAG_RE does not match (possessive: linear time)
_XML_PARAM = re.compile(r"\s*<parameter=" + _NAME + r"((?:[^<]++|<(?!" + _TAG_KW + r"))*+)</parameter>")
_XML_TAIL = re.compile(r"\s*</function>\s*</tool_call>")


def _xml_segment(text: str, lo: int, hi: int, index: ToolIndex | None, rs: RuleSet, calls: list[ParsedCall],
                 spans: list[RawSpan] | None) -> bool:
    """Parse the calls of one segment outside ``<think>`` into ``calls``; False when it is not canonical."""
    pos = lo
    while (m := _NEXT_MARKUP.search(text, pos, hi)) is not None:
        call = _xml_call(text, m.start(), hi, index, rs, len(calls), spans)
        if call is None:
            return False
        calls.append(call)
        pos = call.end
    return True


def _xml_call(text: str, start: int, hi: int, index: ToolIndex | None, rs: RuleSet, ci: int,
              spans: list[RawSpan] | None) -> ParsedCall | None:
    """The canonical call at ``start``: ``<tool_call>``, ``<function=NAME>``, parameters, closers; else None."""
    head = _XML_HEAD.match(text, start, hi)
    if head is None:
        return None
    pos = head.end()
    params: list[tuple[str, int, int, int, int]] = []  # (name, name start, name end, value start, value end)
    while (pm := _XML_PARAM.match(text, pos, hi)) is not None:
        params.append((pm.group(1), pm.start(1), pm.end(1), *_value_span(text, pm.start(2), pm.end(2))))
        pos = pm.end()
    tail = _XML_TAIL.match(text, pos, hi)
    if tail is None:
        return None
    end = tail.end()
    if text.startswith(">", end):
        return None  # a stray `>` after the call
    name = head.group(1)
    checked = _xml_arguments(name, [(p[0], text[p[3]:p[4]]) for p in params], index, rs)
    if checked is None:
        return None
    if spans is not None:
        content = [(head.start(1), head.end(1), "function_name")]
        for _pn, ns, ne, a, b in params:
            content += [(ns, ne, "param_name"), (a, b, "param_value")]
        _fill(spans, start, end, content, ci)
    return _ok_call(name, checked[0], checked[1], text, start, end, "qwen3_coder", ci)


def _value_span(text: str, vs: int, ve: int) -> tuple[int, int]:
    """The value between ``<parameter=P>`` and ``</parameter>``: one leading and one trailing newline removed."""
    a = vs + 1 if text.startswith("\n", vs, ve) else vs
    b = ve - 1 if ve > a and text[ve - 1] == "\n" else ve
    return a, b


def _xml_arguments(name: str, params: list[tuple[str, str]], index: ToolIndex | None,
                   rs: RuleSet) -> tuple[str | None, dict[str, Any]] | None:
    """(matched tool, arguments converted like verl) when the call raises no finding, else None."""
    ok, matched = _resolve(name, index, rs)
    if not ok:
        return None
    if index is None:  # no schema: no parameter checks, every value is the raw string (or None for "null")
        return None, {p: verl_convert(v, p, _NO_PROPS) for p, v in params}
    tool = index.tools[name]
    props = tool.properties
    args: dict[str, Any] = {}
    for p, raw in params:
        if p in args:
            return None  # a repeated parameter
        v = verl_convert(raw, p, props)
        if p in props:
            tc = check_xml_value(raw, props[p], v)
            if not tc.ok or tc.divergence:
                return None
        elif not tool.open_properties:
            return None  # an undeclared parameter
        args[p] = v
    if any(r not in args for r in tool.required):
        return None
    return matched, args


def _fill(spans: list[RawSpan], start: int, end: int, content: list[tuple[int, int, str]], ci: int) -> None:
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
    props = tool.properties
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
