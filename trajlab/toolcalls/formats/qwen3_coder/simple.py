"""The regex reader of *simple* qwen3_coder calls (see :func:`read_call`) and the shapes it reads.

A simple call is read with a few regexes instead of the lexer and the state machine, with the same draft as
result; :func:`read_simple` reads a whole segment when every call in it is simple, and :mod:`.fastpath` uses
:func:`read_call` and the shape helpers (:data:`XmlShape`, :func:`shape_draft`, :func:`shape_spans`,
:func:`shape_content`) for whole turns.
"""

from __future__ import annotations

import re
from typing import Any

from trajlab.toolcalls.draft import CallDraft, ParamDraft
from trajlab.toolcalls.formats.qwen3_coder.issues import (
    call_close_at_end,
    tag_issue,
    unclosed_function,
    unclosed_parameter,
)
from trajlab.toolcalls.formats.qwen3_coder.lexer import CC, CO, FC, FO, PC, PO, TAG_AT, Tok, tag_at
from trajlab.toolcalls.formats.qwen3_coder.values import standalone
from trajlab.toolcalls.ruleset import RuleSet

#: a simple call as :func:`read_call` reads it: (start, end, name, name start, name end, parameters); a parameter
#: is (name, name start, name end, value start, value end, value), the value without one leading and one
#: trailing newline (as verl reads it)
XmlShape = tuple[int, int, str, int, int, list[tuple[str, int, int, int, int, str]]]


_SIMPLE_HEAD = re.compile(r"<tool_call>\s*<function=([^<>\n \t]{0,255})>")
# a canonical parameter tag and its value: everything up to the next `<` where TAG_RE matches (possessive), and
# the canonical closing tag if it comes there
_SIMPLE_PARAM = re.compile(r"\s*<parameter=([^<>\n \t]{0,255})>((?:[^<]++|<(?!/?[ \t]*(?:tool_call|function|"
                           r"parameter)))*+)(</parameter>)?")
_CANONICAL_TAIL = re.compile(r"\s*</function>\s*</tool_call>")
_SPACE = re.compile(r"\s*")


def read_call(text: str, start: int, hi: int, rs: RuleSet) -> tuple[XmlShape, CallDraft | None] | None:
    """The *simple* call at ``start`` (a ``<`` in ``text[:hi]``): its shape, and unless it is canonical, the
    draft the scanner makes of it (with its issues; no spans). None: no simple call starts there.

    Simple: it opens with canonical ``<tool_call>`` and ``<function=NAME>`` tags, each parameter with a canonical
    ``<parameter=NAME>``; a closing tag may be misspelt (any spelling the lexer reads as one: a stray attribute,
    ``</parameter1>``, a missing ``>``), a ``</parameter>`` may be missing before the next parameter, before
    ``</function>`` or before ``</tool_call>``, ``</function>`` may be missing before ``</tool_call>``, and the call
    may end without ``</tool_call>`` when no other tag follows it before ``hi``. Tags are separated by whitespace
    only. Most malformed calls are simple; the state machine would walk one token by token to the same draft
    (the same issues, built by the same functions), so reading it with a few regexes is only faster. The
    canonical spellings are tested first, with ``str.startswith``: a canonical call costs no token and no draft.
    """
    head = _SIMPLE_HEAD.match(text, start, hi)
    if head is None:
        return None
    ns, ne = head.span(1)
    r: _Read | None = None  # the draft, made with the first issue (a canonical call has none)
    params: list[tuple[str, int, int, int, int, str]] = []
    pos = head.end()
    nxt: Tok | None = None  # a closing tag that ends a value (whose `</parameter>` is missing)
    while (pm := _SIMPLE_PARAM.match(text, pos, hi)) is not None:
        pns, pne = pm.span(1)
        vs, q = pne + 1, pm.end(2)
        a, b = vs, q  # the value: one leading and one trailing newline removed
        if text.startswith("\n", a, b):
            a += 1
        if b > a and text[b - 1] == "\n":
            b -= 1
        params.append((pm.group(1), pns, pne, a, b, text[a:b]))
        if pm.start(3) >= 0:  # `</parameter>`
            pos = pm.end()
            continue
        nxt = tag_at(text, q, hi, rs)
        if nxt is None or nxt.kind in (CO, FO) or (nxt.kind == PO and nxt.variant is not None):
            return None
        if nxt.kind == PO or nxt.kind != PC and not standalone(text, nxt.start, nxt.end):
            return None  # the tag may be text of the value (`literal_tags`): the scanner decides
        if nxt.kind == PC:
            r = _tag_read(r, text, start, nxt)
            pos, nxt = nxt.end, None
            continue
        follower = "param" if nxt.kind == PO else "func_close" if nxt.kind == FC else "call_close"
        ptok = Tok(PO, pns - 11, vs, None, pm.group(1), pns, pne)  # `<parameter=` is 11 characters
        r = r or _Read(start)
        unclosed_parameter(r.d, text, ptok, q, follower, r.inserted)
        pos = q
        if nxt.kind != PO:
            break
        nxt = None
    if nxt is None:  # after the last parameter's closing tag (or the function tag): `</function>`, or `</tool_call>`
        tail = _CANONICAL_TAIL.match(text, pos, hi)
        if tail is not None:
            return _shape(text, hi, start, tail.end(), head.group(1), ns, ne, params, r, closed=True)
        p = _SPACE.match(text, pos, hi).end()
        if text.startswith("</function>", p, hi):
            end = p + 11
        else:
            nxt = tag_at(text, p, hi, rs)
            if nxt is None or nxt.kind not in (FC, CC):
                return None
    closed = True  # the call ends with its `</tool_call>` (in any spelling)
    if nxt is not None and nxt.kind == CC:  # the function is never closed
        fn = Tok(FO, ns - 10, head.end(), None, head.group(1), ns, ne)  # `<function=` is 10 characters
        r = r or _Read(start)
        unclosed_function(r.d, text, fn, nxt.start, "call_close", r.inserted)
        r = _tag_read(r, text, start, nxt)
        end = nxt.end
    else:
        if nxt is not None:  # a misspelt `</function>`
            r = _tag_read(r, text, start, nxt)
            end = nxt.end
        p = _SPACE.match(text, end, hi).end()
        if text.startswith("</tool_call>", p, hi):
            end = p + 12
        elif text.startswith("<", p, hi):
            cc = tag_at(text, p, hi, rs)
            if cc is None or cc.kind != CC:
                return None
            r = _tag_read(r, text, start, cc)
            end = cc.end
        elif TAG_AT.search(text, end, hi) is None:  # no `</tool_call>`, and no other tag after the call
            r = r or _Read(start)
            call_close_at_end(r.d, start, start + 11, end)  # `<tool_call>` is 11 characters
            closed = False
        else:
            return None
    return _shape(text, hi, start, end, head.group(1), ns, ne, params, r, closed=closed)


def _shape(text: str, hi: int, start: int, end: int, name: str, ns: int, ne: int, params: Any, r: _Read | None,
           *, closed: bool) -> Any:
    """The call's shape and its draft (None when it has no issue); None for a stray `>` after `</tool_call>` or a
    repeated parameter."""
    if closed and text[end:end + 1] == ">" and end < hi:
        return None
    if len(params) > 1 and len({p[0] for p in params}) < len(params):
        return None  # a repeated parameter may be tag text inside a value (`literal_tags`): the scanner decides
    shape = (start, end, name, ns, ne, params)
    if r is None:
        return shape, None
    _fill_draft(r.d, shape)
    return shape, r.d


class _Read:
    """The draft of a simple call that has an issue, and where closing tags are inserted (see `insertion`)."""

    __slots__ = ("d", "inserted")

    def __init__(self, start: int) -> None:
        self.d = CallDraft("qwen3_coder", start, start)
        self.inserted: set[int] = set()


def _tag_read(r: _Read | None, text: str, start: int, t: Tok) -> _Read | None:
    """Record the issue of the tag ``t`` if it is misspelt (making the draft then); returns the draft."""
    if t.variant is None:
        return r
    r = r or _Read(start)
    tag_issue(r.d, text, t)
    return r


def _fill_draft(d: CallDraft, shape: XmlShape) -> None:
    """Give ``d`` the extent, name and parameters of ``shape`` (as the scanner records them)."""
    start, d.end, d.name, d.name_start, d.name_end, params = shape
    d.params = [ParamDraft(pn, pns, pne, raw, None, a, b) for pn, pns, pne, a, b, raw in params]


def shape_draft(shape: XmlShape, spans: bool) -> CallDraft:
    """The scanner's draft of the canonical call ``shape`` (no issue), with its spans when ``spans``."""
    d = CallDraft("qwen3_coder", shape[0], shape[1])
    _fill_draft(d, shape)
    if spans:
        shape_spans(d, shape)
    return d


def shape_content(shape: XmlShape) -> list[tuple[int, int, str]]:
    """The content spans of a call, in order: its name, each parameter's name and value."""
    content = [(shape[3], shape[4], "function_name")]
    for _pn, pns, pne, a, b, _raw in shape[5]:
        content += [(pns, pne, "param_name"), (a, b, "param_value")]
    return content


def shape_spans(d: CallDraft, shape: XmlShape) -> None:
    """The spans the scanner gives the simple call ``shape``: its content, ``structural`` everything else."""
    pos = shape[0]
    for s, e, kind in shape_content(shape):
        if s > pos:
            d.span("structural", pos, s)
        d.span(kind, s, e)
        pos = max(pos, e)
    if shape[1] > pos:
        d.span("structural", pos, shape[1])


def read_simple(text: str, lo: int, hi: int, rs: RuleSet, spans: bool) -> list[CallDraft] | None:
    """The drafts the scanner makes of ``text[lo:hi]`` when every call in it is simple (:func:`read_call`) and
    no other tag occurs in it; None otherwise."""
    calls: list[CallDraft] = []
    pos = lo
    while (m := TAG_AT.search(text, pos, hi)) is not None:
        r = read_call(text, m.start(), hi, rs)
        if r is None:
            return None
        shape, d = r
        if d is None:
            calls.append(shape_draft(shape, spans))
        else:
            if spans:
                shape_spans(d, shape)
            calls.append(d)
        pos = shape[1]
    return calls
