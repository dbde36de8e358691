"""The qwen3_coder tag lexer: the tag tokens of a text, canonical and malformed spellings alike.

:data:`TAG_RE` is the tag grammar (``<``, an optional ``/``, spaces or tabs, a keyword, the rest of the tag);
:mod:`.fastpath` mirrors it and tests/test_toolcalls_fastpath.py checks that they agree. :func:`lex` runs one
``finditer`` of the same grammar with the canonical spellings tried first, and classifies every other match
into a :class:`Tok` with the *variant* of its misspelling (or drops it: ``</parameters>``, ``<function>``, a tag
cut by the end of the text). :func:`tag_at` reads the one token at a position (the reader of simple calls).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from trajlab.toolcalls.draft import Ranges
from trajlab.toolcalls.ruleset import RuleSet

#: the tag lexer (:mod:`.fastpath` mirrors its grammar; tests/test_toolcalls_fastpath.py checks they agree)
TAG_RE = re.compile(r"<(/?)([ \t]*)(tool_call|function|parameter)([^<>\n]{0,256})(>?)")
_NAME_ATTRS = re.compile(r"([^\s=]+)([ \t]+[\w\-:.]+[ \t]*=.*)")
_ATTR_NAME = re.compile(r'[ \t]+name[ \t]*=[ \t]*"([^"]*)"')
_SPACE_EQ = re.compile(r"[ \t]*=[ \t]*(.*)")

CO, CC, FO, FC, PO, PC = range(6)
_KIND = {("", "tool_call"): CO, ("/", "tool_call"): CC, ("", "function"): FO, ("/", "function"): FC,
         ("", "parameter"): PO, ("/", "parameter"): PC}
_CANON_CLOSE = {CC: "</tool_call>", FC: "</function>", PC: "</parameter>"}
# TAG_RE with the canonical spellings tried first, each in a group of its own, so the lexer takes them without
# looking at the parts (a canonical tag matches exactly where and as far as TAG_RE does): groups 1-4 are the
# tags without a name, 5-6 ``<function=NAME>`` / ``<parameter=NAME>``, 7-11 TAG_RE's own groups.
_LEX_RE = re.compile(r"<(?:(tool_call>)|(/tool_call>)|(/function>)|(/parameter>)"
                     r"|function=([^<>\n \t]{0,255})>|parameter=([^<>\n \t]{0,255})>|" + TAG_RE.pattern[1:] + ")")
_GROUP_KIND = (-1, CO, CC, FC, PC, FO, PO)


@dataclass(slots=True)
class Tok:
    kind: int
    start: int
    end: int
    variant: str | None = None  # None = canonical spelling
    name: str | None = None
    ns: int = -1  # name span
    ne: int = -1
    attr: str = ""
    raw_name: str = ""

    def canonical(self) -> str:
        if self.kind == CO:
            return "<tool_call>"
        if self.kind == FO:
            return f"<function={self.name or ''}>"
        if self.kind == PO:
            return f"<parameter={self.name or ''}>"
        return _CANON_CLOSE[self.kind]


def lex(text: str, lo: int, hi: int, rs: RuleSet, excluded: list[tuple[int, int]]) -> list[Tok]:
    toks: list[Tok] = []
    excl = Ranges(excluded) if excluded else None
    for m in _LEX_RE.finditer(text, lo, hi):
        s, e = m.span()
        if excl and excl.covering(s) >= 0:
            continue
        g = m.lastindex
        if g <= 4:  # a canonical tag without a name
            toks.append(Tok(_GROUP_KIND[g], s, e))
            continue
        if g <= 6:  # a canonical `<function=NAME>` / `<parameter=NAME>`
            toks.append(Tok(_GROUP_KIND[g], s, e, None, m.group(g), m.start(g), e - 1))
            continue
        slash, ws, kw, tail, gt = m.group(7, 8, 9, 10, 11)
        tok = _classify(s, e, slash, ws, kw, tail, gt, hi, rs)
        if tok is not None:
            toks.append(tok)
    return toks


def _classify(s: int, e: int, slash: str, ws: str, kw: str, tail: str, gt: str, hi: int, rs: RuleSet) -> Tok | None:
    """The token of a TAG_RE match (its groups; ``hi``: end of the scanned text), or None when it is no call tag
    (``</parameters>``, ``<function>``, a tag cut by the end of the text that belongs to a truncated call)."""
    kind = _KIND[(slash, kw)]
    tok = Tok(kind, s, e)
    at_end = e >= hi and not gt
    if slash:
        if tail == "":
            if not gt:
                if at_end and kind != CC:
                    return None  # `</parameter` cut by the end of the text: part of a truncated call
                tok.variant = "partial" if at_end else "missing_gt"
        elif tail[0] in " \t":
            if not gt:
                return None
            tok.variant, tok.attr = "stray_attr", tail
        elif rs.close_tail_re.fullmatch(tail):
            if not gt and at_end:
                return None
            tok.variant = "close_variant" if gt else "missing_gt"
        else:
            return None  # another tag: </function_calls>, </parameters>
        if ws:
            tok.variant = tok.variant or "space"
    elif kind == CO:
        if tail == "":
            if not gt:
                if at_end:
                    return None
                tok.variant = "missing_gt"
        elif tail[0] in " \t":
            if not gt:
                return None
            tok.variant, tok.attr = "stray_attr", tail
        else:
            return None  # <tool_calls>, <tool_call_begin>
        if ws:
            tok.variant = tok.variant or "space"
    else:  # FO / PO
        if ws:
            return None
        base = s + 1 + len(kw)
        if tail.startswith("="):
            name = tail[1:]
            ns = base + 1
            if not gt:
                if at_end:
                    return None  # `<function=sea` cut by the end: truncated
                if kind == PO and "=" in name:
                    # <parameter=command=create</parameter> : value fused into the open tag
                    k = name.index("=")
                    tok.variant, tok.raw_name = "fused", name
                    tok.name, tok.ns, tok.ne = name[:k], ns, ns + k
                    tok.end = ns + k + 1
                    return tok
                tok.variant = "missing_gt"
            am = _NAME_ATTRS.fullmatch(name)
            if am and gt:
                tok.variant, tok.attr = "stray_attr", am.group(2)
                name = am.group(1)
            tok.name, tok.ns, tok.ne = name, ns, ns + len(name)
        elif (am2 := _ATTR_NAME.match(tail)) is not None and gt:
            tok.variant = "attr_syntax"
            tok.name = am2.group(1)
            tok.ns, tok.ne = base + am2.start(1), base + am2.end(1)
        elif (sm := _SPACE_EQ.fullmatch(tail)) is not None and gt and tail[:1] in " \t":
            tok.variant = "space"
            tok.name = sm.group(1)
            tok.ns, tok.ne = base + sm.start(1), base + sm.end(1)
        else:
            return None  # <function>, <parameters>, <function_calls>: not a call tag
    return tok


#: a `<` where TAG_RE matches (a tag the lexer may read)
TAG_AT = re.compile(r"<(?=/?[ \t]*(?:tool_call|function|parameter))")


def tag_at(text: str, p: int, hi: int, rs: RuleSet) -> Tok | None:
    """The token the lexer reads at ``p`` (None: no call tag starts there)."""
    m = TAG_RE.match(text, p, hi)
    if m is None:
        return None
    slash, ws, kw, tail, gt = m.groups()
    return _classify(p, m.end(), slash, ws, kw, tail, gt, hi, rs)
