"""The qwen3_coder call format (Qwen3-Coder, Qwen3.5, Qwen3.6): lexer, tolerant state machine, renderer.

Grammar (what the chat templates render, parsers.md §A.7)::

    <tool_call>\\n<function=NAME>\\n<parameter=P>\\nVALUE\\n</parameter>\\n...</function>\\n</tool_call>

One regex ``finditer`` over the text yields the tag tokens (``<tool_call>``, ``</tool_call>``,
``<function=...>``, ``</function>``, ``<parameter=...>``, ``</parameter>`` and their malformed spellings:
attributes, ``</parameter/>``, ``</parameter1>``, a missing ``>``, a value fused into the open tag). A small
state machine walks the *tokens* (never the characters) and builds one :class:`CallDraft` per call, recording
every structural problem as an :class:`Issue` with the minimal :class:`Edit` that fixes it. Values are the
raw text between the tags with one leading and one trailing newline removed, as verl does.

Most calls, malformed ones included, are *simple*: canonical opening tags, closing tags that may be misspelt or
missing, whitespace between tags. :func:`read_call` reads such a call with a few regexes (``str.startswith`` for
the canonical spellings) and builds the draft the state machine would build, with the same issue-recording
functions; :meth:`Qwen3CoderFormat.find_calls` takes it for a segment whose calls are all simple, and
:mod:`.fastpath` for whole turns. The lexer tries the canonical spellings first too (``_LEX_RE``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from trajlab.toolcalls.draft import MISSING, CallDraft, Edit, Issue, ParamDraft, Ranges, snip
from trajlab.toolcalls.format_base import ToolFormat
from trajlab.toolcalls.jsonbody import decode_body, fill_json_call, walk
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
_STRAY_VARIANT = {CO: "open_tool_call", CC: "close_tool_call", FO: "open_function", FC: "close_function",
                  PO: "open_parameter", PC: "close_parameter"}


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


def _lex(text: str, lo: int, hi: int, rs: RuleSet, excluded: list[tuple[int, int]]) -> list[Tok]:
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


# -- tag text inside values ------------------------------------------------------------------------------------


def standalone(text: str, start: int, end: int) -> bool:
    """Whether the tag ``text[start:end]`` stands where the chat template writes the tags of a call: at the start
    of its line (only spaces or tabs before it) and followed by the end of the line or by another tag. Tag text a
    model writes *inside* a value (``x = "<tool_call>"``, ``<parameter=path> = 1``) has other text beside it."""
    p = start
    while p > 0 and text[p - 1] in " \t":
        p -= 1
    if p > 0 and text[p - 1] not in "\n\r":
        return False
    q, n = end, len(text)
    while q < n and text[q] in " \t":
        q += 1
    return q >= n or text[q] in "\n\r<"


def _closes_value(text: str, toks: list[Tok], i: int) -> bool:
    """Whether the ``</parameter>`` token ``toks[i]`` can end a value: only whitespace lies between it and the
    next tag, which opens a parameter, closes the function or the call, or opens the next call on a line of its
    own (or it is the last tag)."""
    if i + 1 >= len(toks):
        return True
    u = toks[i + 1]
    gap = text[toks[i].end:u.start]
    return (u.kind in (PO, FC, CC) or u.kind == CO and standalone(text, u.start, u.end)) and (
        not gap or gap.isspace())


def literal_tags(text: str, toks: list[Tok]) -> tuple[list[Tok], list[Tok]]:
    """Split the tokens into the call structure and the tag text that belongs to a parameter value.

    The intended reading of a value is the one the closing structure supports: inside an open value a tag is
    text when a ``</parameter>`` that can end the value (:func:`_closes_value`) still follows before the next
    call begins, and

    * it is a ``</parameter>`` that cannot end the value (text follows it on the line), or one followed by
      another ``</parameter>`` before the next opening tag that starts structure (the last of them ends the
      value);
    * it is written inside a line, with other text beside it -- ``x = "<tool_call>"``, ``doc = "<parameter=path>"``,
      ``s = "</function>"`` (a ``<parameter=`` right after a letter or digit is where a compact call that forgot
      ``</parameter>`` puts the next parameter: structure);
    * it opens a complete ``<tool_call>`` / ``<function=`` / ``<parameter=`` block on lines of its own (an example
      call in a file or prompt the model writes) and the value goes on after it: the whole block is text;
    * it opens a ``<tool_call>`` / ``<function=`` block on a line of its own that is not a complete call (a
      format description: ``<tool_call>\\n<function=NAME>``), or it is a closing tag on a line of its own;
    * it opens, on a line of its own, a parameter the call gives elsewhere (a repeated parameter is the worse
      reading).

    A complete, well-formed call that starts inside an unclosed value is a real call (the value was cut).

    Anything else keeps its structural meaning, so malformed calls (a missing ``</parameter>`` before the next
    ``<parameter=`` on its own line, a call cut short) read as before. Returns (structure, literal tags).
    """
    n = len(toks)
    # how often each parameter name opens on a line of its own in each call (a call starts at a `<tool_call>` on
    # its own line followed by `<function=`): a second `<parameter=NAME>` inside a value is text rather than a repeated parameter
    region = [0] * n
    alone = [False] * n
    opened: dict[tuple[int, str | None], int] = {}
    r = 0
    for k, t in enumerate(toks):
        alone[k] = standalone(text, t.start, t.end) or t.kind == PO and _compact_parameter(text, t)
    # a call starts at a `<tool_call>` on its own line that opens a complete call, or that follows a `</tool_call>`
    starts = [t.kind == CO and alone[k] and (
        k + 1 < n and toks[k + 1].kind == FO and not text[t.end:toks[k + 1].start].strip() and _starts_call(toks, k)
        or k > 0 and toks[k - 1].kind == CC and not text[toks[k - 1].end:t.start].strip()) for k, t in enumerate(toks)]
    for k, t in enumerate(toks):
        if starts[k]:
            r += 1
        region[k] = r
        if t.kind == PO and alone[k]:
            opened[(r, t.name)] = opened.get((r, t.name), 0) + 1
    # closes[k]: the `</parameter>` at k can end a value (not when a parameter the call gives on a line of its own
    # follows it inside the line: `x = "</parameter><parameter=path>"`)
    closes = [False] * n
    for k, t in enumerate(toks):
        if t.kind == PC and _closes_value(text, toks, k):
            u = toks[k + 1] if k + 1 < n else None
            closes[k] = u is None or not (u.kind == PO and not alone[k + 1] and (region[k], u.name) in opened)
    # of several `</parameter>` with only closing tags (and text) between them, the last one ends the value:
    # `</parameter></tool_call>` written in a value followed by the call's own closing tags is text
    run_pc = False
    for k in range(n - 1, -1, -1):
        kind = toks[k].kind
        after = toks[k - 1].kind if k > 0 and not text[toks[k - 1].end:toks[k].start].strip() else -1
        if starts[k] or kind == PO and (alone[k] or after == PC) or (
                kind == FO and alone[k] and _function_block(toks, k)) or (
                kind == CO and after == CC and k + 1 < n and toks[k + 1].kind == FO and _starts_call(toks, k)):
            run_pc = False  # (an opener that starts structure: a call, a function or parameter on its own line)
        elif kind == PC and closes[k]:
            if run_pc:
                closes[k] = False
            run_pc = True
    # later[k]: a `</parameter>` that can end a value comes at k or after, before the next call starts
    later = [False] * (n + 1)
    for k in range(n - 1, -1, -1):
        t = toks[k]
        if closes[k]:
            later[k] = True
        elif starts[k]:
            later[k] = False
        else:
            later[k] = later[k + 1]
    out: list[Tok] = []
    lit: list[Tok] = []
    in_value = False
    i = 0
    while i < n:
        t = toks[i]
        k = t.kind
        if not in_value:
            out.append(t)
            in_value = k == PO
            i += 1
            continue
        if k == PC:
            if closes[i] or not later[i + 1]:
                out.append(t)
                in_value = False
            else:
                lit.append(t)
            i += 1
            continue
        if alone[i]:
            if k in (CO, FO, PO):
                close = CC if k == CO else FC if k == FO else PC
                j = next((x for x in range(i + 1, n) if toks[x].kind == close), -1)
                if j >= 0 and later[j + 1] and (k != PO or not closes[j]):
                    lit += toks[i:j + 1]  # a whole block written as text, the value goes on after it
                    i = j + 1
                    continue
                if k != PO and later[i + 1] and not (j >= 0 and _well_formed(toks, i, j)):
                    lit.append(t)  # an opener whose block is not a call: text (the value is closed later)
                    i += 1
                    continue
                if k == PO and later[i + 1] and opened.get((region[i], t.name), 0) > 1:
                    lit.append(t)  # the parameter is given elsewhere in the call: this mention is text
                    i += 1
                    continue
            elif later[i + 1]:  # a closing tag on its own line, the value is closed later
                lit.append(t)
                i += 1
                continue
        elif later[i + 1] and not (k == PO and text[t.start - 1].isalnum()):
            lit.append(t)
            i += 1
            continue
        out.append(t)
        in_value = k == PO
        i += 1
    return out, lit


def _compact_parameter(text: str, t: Tok) -> bool:
    """A ``<parameter=NAME>`` at the start of its line whose ``</parameter>`` follows on the same line."""
    eol = text.find("\n", t.end)
    line_end = len(text) if eol < 0 else eol
    # (standalone with the tag's own `<` as what follows it: only the text before it on its line is looked at)
    return standalone(text, t.start, t.start) and text.find("</parameter", t.end, line_end) >= 0


def _starts_call(toks: list[Tok], i: int) -> bool:
    """Whether the ``<tool_call>`` at ``i`` opens a complete call, or one the end of the text cuts short."""
    j = next((x for x in range(i + 1, len(toks)) if toks[x].kind in (CC, CO)), -1)
    if j < 0:
        return True  # (a call cut by the end of the text)
    return toks[j].kind == CC and _well_formed(toks, i, j)


def _function_block(toks: list[Tok], i: int) -> bool:
    """Whether the ``<function=`` at ``i`` opens a complete function (its parameters closed)."""
    j = next((x for x in range(i + 1, len(toks)) if toks[x].kind in (FC, FO, CO, CC)), -1)
    return j >= 0 and toks[j].kind == FC and _well_formed(toks, i, j)


def _well_formed(toks: list[Tok], i: int, j: int) -> bool:
    """Whether ``toks[i:j + 1]`` is a complete call (``<tool_call>``, one function, closed parameters) or a
    complete function: a real call that starts inside an unclosed value, not text."""
    k = i
    if toks[k].kind == CO:
        k += 1
        if k > j or toks[k].kind != FO:
            return False
    k += 1  # after <function=...>
    while k < j and toks[k].kind == PO and k + 1 < j and toks[k + 1].kind == PC:
        k += 2
    if toks[i].kind == CO:
        return k + 1 == j and toks[k].kind == FC
    return k == j


def _attach_literals(drafts: list[CallDraft], lit: list[Tok]) -> None:
    """Record each literal tag on the call whose text holds it."""
    j = 0
    for d in drafts:  # (sorted by start; calls do not overlap)
        while j < len(lit) and lit[j].start < d.start:
            j += 1
        while j < len(lit) and lit[j].start < d.end:
            if d.literals is None:
                d.literals = []
            d.literals.append((lit[j].start, lit[j].end))
            j += 1


_BLOCK = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)
_FUNCTION = re.compile(r"\s*<function=([^>]*)>(.*?)</function>\s*", re.DOTALL)
_PARAMETER = re.compile(r"\s*<parameter=([^>]*)>(.*?)</parameter>", re.DOTALL)


def closed_reading(text: str, lo: int, hi: int) -> list[CallDraft] | None:
    """The calls of ``text[lo:hi]`` read the way verl's regexes read closed calls -- each ``<tool_call>`` block up
    to the first ``</tool_call>``, one ``<function=NAME>`` up to the first ``</function>``, each parameter up to
    the first ``</parameter>`` -- so that tag text verl reads as part of a value is kept there. None unless every
    call in the range is closed that way with nothing but whitespace between its tags (and no tag between the
    calls). :mod:`.analyze` weighs it against the scanner's reading (the fewer errors win)."""
    out: list[CallDraft] = []
    pos = lo
    for bm in _BLOCK.finditer(text, lo, hi):
        if _TAG_AT.search(text, pos, bm.start()) is not None:
            return None
        fm = _FUNCTION.fullmatch(text, bm.start(1), bm.end(1))
        if fm is None:
            return None
        d = CallDraft("qwen3_coder", bm.start(), bm.end(), fm.group(1), fm.start(1), fm.end(1))
        d.span("structural", bm.start(), fm.start(1))
        d.span("function_name", fm.start(1), fm.end(1))
        p, end = fm.start(2), fm.end(2)
        q = fm.end(1) + 1
        while p < end:
            pm = _PARAMETER.match(text, p, end)
            if pm is None:
                if text[p:end].strip():
                    return None
                break
            a, b = pm.start(2), pm.end(2)
            if text.startswith("\n", a, b):
                a += 1
            if b > a and text[b - 1] == "\n":
                b -= 1
            d.span("structural", q, pm.start(1))
            d.span("param_name", pm.start(1), pm.end(1))
            d.span("structural", pm.end(1), a)
            d.span("param_value", a, b)
            d.params.append(ParamDraft(pm.group(1), pm.start(1), pm.end(1), text[a:b], None, a, b))
            for tm in _TAG_AT.finditer(text, a, b):
                m = TAG_RE.match(text, tm.start(), b)
                if d.literals is None:
                    d.literals = []
                d.literals.append((tm.start(), m.end() if m is not None else tm.start() + 1))
            q = b
            p = pm.end()
        d.span("structural", q, bm.end())
        out.append(d)
        pos = bm.end()
    if not out or _TAG_AT.search(text, pos, hi) is not None:
        return None
    return out


# -- issues (shared by the scanner and the reader of simple calls) --------------------------------------------


def _tag_issue(d: CallDraft, text: str, t: Tok) -> None:
    """Record on ``d`` the problem of a malformed tag spelling (and its edit)."""
    v = t.variant
    if v is None:
        return
    raw = text[t.start:t.end]
    if v == "stray_attr":
        canon = t.canonical()
        attr = t.attr.strip()
        d.add("stray_attribute", _STRAY_VARIANT[t.kind], t.start, t.end, tag=raw, attribute=attr, canonical=canon,
              edits=[Edit(t.start, t.end, canon, f"removed `{attr}` from `{raw}`")])
    elif v == "close_variant":
        canon = t.canonical()
        d.add("malformed_tag", "close_variant", t.start, t.end, tag=raw, format="qwen3_coder",
              canonical_hint=f"the closing tag is `{canon}`",
              edits=[Edit(t.start, t.end, canon, f"replaced `{raw}` by `{canon}`")])
    elif v == "missing_gt":
        canon = t.canonical()
        variant = "close_missing_gt" if t.kind in (CC, FC, PC) else "open_missing_gt"
        d.add("malformed_tag", variant, t.start, t.end, tag=raw, format="qwen3_coder",
              canonical_hint=f"it should read `{canon}`",
              edits=[Edit(t.end, t.end, ">", f"added the missing `>` to `{raw}`")])
    elif v == "fused":
        d.add("malformed_tag", "fused_parameter_open", t.start, t.end, tag=raw, raw_name=t.raw_name,
              format="qwen3_coder", canonical_hint=f"the tag is `<parameter={t.name}>` followed by the value",
              edits=[Edit(t.end - 1, t.end, ">", f"split `{raw}` into `<parameter={t.name}>` and its value")])
    elif v == "partial":  # `</tool_call` cut by the end of the text
        d.add("missing_call_close", "at_end", t.start, t.end, tag=raw,
              edits=[Edit(t.end, t.end, ">", "completed `</tool_call>`")])
    elif v in ("attr_syntax", "space"):
        canon = t.canonical()
        d.add("malformed_tag", "attribute_syntax" if v == "attr_syntax" else "space_in_tag", t.start, t.end,
              tag=raw, format="qwen3_coder", canonical_hint=f"it should read `{canon}`",
              edits=[Edit(t.start, t.end, canon, f"replaced `{raw}` by `{canon}`")])


def _insertion(text: str, d: CallDraft, inserted_at: set[int], p: int, tag: str, what: str) -> Edit:
    """The edit that inserts the closing ``tag`` at ``p`` (on a line of its own) into the call ``d``."""
    prefix = "" if (p in inserted_at or text[p - 1:p] == "\n" or p == d.start) else "\n"
    inserted_at.add(p)
    return Edit(p, p, f"{prefix}{tag}\n", what)


_UNCLOSED_PARAM = {"param": "parameter_before_parameter", "func_close": "parameter_before_function_close",
                   "func": "parameter_before_function", "call_close": "parameter_at_call_close",
                   "end": "parameter_at_end"}


def _unclosed_parameter(d: CallDraft, text: str, ptok: Tok, end_at: int, follower: str,
                        inserted_at: set[int]) -> None:
    """Record on ``d`` that the parameter opened by ``ptok`` runs to ``end_at``, where ``follower`` comes."""
    blocker = "the output ends inside the parameter" if follower == "end" else None
    edits = [] if follower == "end" else [
        _insertion(text, d, inserted_at, end_at, "</parameter>", f"closed `<parameter={ptok.name}>`")]
    d.add("unclosed_tag", _UNCLOSED_PARAM[follower], ptok.start, ptok.end, tag=text[ptok.start:ptok.end],
          closer="</parameter>", edits=edits, blocker=blocker)


_UNCLOSED_FUNC = {"call_close": "function_at_call_close", "next_call": "function_at_call_close",
                  "func": "function_before_function", "end": "function_at_end"}


def _unclosed_function(d: CallDraft, text: str, fn: Tok, end_at: int, follower: str, inserted_at: set[int]) -> None:
    """Record on ``d`` that the function opened by ``fn`` runs to ``end_at``, where ``follower`` comes."""
    edits = [] if follower == "end" else [
        _insertion(text, d, inserted_at, end_at, "</function>", f"closed `<function={fn.name}>`")]
    d.add("unclosed_tag", _UNCLOSED_FUNC[follower], fn.start, fn.end, tag=text[fn.start:fn.end], closer="</function>",
          edits=edits, blocker="the output ends inside the function" if follower == "end" else None)


def _call_close_at_end(d: CallDraft, open_start: int, open_end: int, fe: int) -> None:
    """Record on ``d`` that its ``<tool_call>`` is never closed: the call ends after ``</function>`` at ``fe``."""
    d.add("missing_call_close", "at_end", open_start, open_end, tag="<tool_call>",
          edits=[Edit(fe, fe, "\n</tool_call>", "added `</tool_call>`")])


# -- simple calls: read with regexes ----------------------------------------------------------------------------

#: a simple call as :func:`read_call` reads it: (start, end, name, name start, name end, parameters); a parameter
#: is (name, name start, name end, value start, value end, value), the value without one leading and one
#: trailing newline (as verl reads it)
XmlShape = tuple[int, int, str, int, int, list[tuple[str, int, int, int, int, str]]]

#: a `<` where TAG_RE matches (a tag the lexer may read)
_TAG_AT = re.compile(r"<(?=/?[ \t]*(?:tool_call|function|parameter))")
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
        nxt = _tag_at(text, q, hi, rs)
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
        _unclosed_parameter(r.d, text, ptok, q, follower, r.inserted)
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
            nxt = _tag_at(text, p, hi, rs)
            if nxt is None or nxt.kind not in (FC, CC):
                return None
    closed = True  # the call ends with its `</tool_call>` (in any spelling)
    if nxt is not None and nxt.kind == CC:  # the function is never closed
        fn = Tok(FO, ns - 10, head.end(), None, head.group(1), ns, ne)  # `<function=` is 10 characters
        r = r or _Read(start)
        _unclosed_function(r.d, text, fn, nxt.start, "call_close", r.inserted)
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
            cc = _tag_at(text, p, hi, rs)
            if cc is None or cc.kind != CC:
                return None
            r = _tag_read(r, text, start, cc)
            end = cc.end
        elif _TAG_AT.search(text, end, hi) is None:  # no `</tool_call>`, and no other tag after the call
            r = r or _Read(start)
            _call_close_at_end(r.d, start, start + 11, end)  # `<tool_call>` is 11 characters
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
    """The draft of a simple call that has an issue, and where closing tags are inserted (see `_insertion`)."""

    __slots__ = ("d", "inserted")

    def __init__(self, start: int) -> None:
        self.d = CallDraft("qwen3_coder", start, start)
        self.inserted: set[int] = set()


def _tag_read(r: _Read | None, text: str, start: int, t: Tok) -> _Read | None:
    """Record the issue of the tag ``t`` if it is misspelt (making the draft then); returns the draft."""
    if t.variant is None:
        return r
    r = r or _Read(start)
    _tag_issue(r.d, text, t)
    return r


def _tag_at(text: str, p: int, hi: int, rs: RuleSet) -> Tok | None:
    """The token the lexer reads at ``p`` (None: no call tag starts there)."""
    m = TAG_RE.match(text, p, hi)
    if m is None:
        return None
    slash, ws, kw, tail, gt = m.groups()
    return _classify(p, m.end(), slash, ws, kw, tail, gt, hi, rs)


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


def _read_simple(text: str, lo: int, hi: int, rs: RuleSet, spans: bool) -> list[CallDraft] | None:
    """The drafts the scanner makes of ``text[lo:hi]`` when every call in it is simple (:func:`read_call`) and
    no other tag occurs in it; None otherwise."""
    calls: list[CallDraft] = []
    pos = lo
    while (m := _TAG_AT.search(text, pos, hi)) is not None:
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


@dataclass(slots=True)
class _Param:
    tok: Tok
    vstart: int


@dataclass(slots=True)
class _Call:
    d: CallDraft
    open_tok: Tok | None
    bare: bool
    state: str = "call"  # call | func | param
    fn: Tok | None = None
    fn_close_end: int = -1
    nfunc: int = 0
    param: _Param | None = None
    pos: int = 0  # end of the last consumed token: the next gap starts here
    gaps: list[tuple[int, int, str]] = field(default_factory=list)
    inserted_at: set[int] | None = None  # where closing tags were inserted (created on the first insertion)


class _Scanner:
    def __init__(self, text: str, lo: int, hi: int, rs: RuleSet, toks: list[Tok], spans: bool = True) -> None:
        self.text, self.lo, self.hi, self.rs, self.toks = text, lo, hi, rs, toks
        self.spans = spans  # record the drafts' spans (False: the caller builds no tiling)
        self.calls: list[CallDraft] = []
        self.turn_issues: list[Issue] = []
        self.cur: _Call | None = None
        self.pending_bare: _Call | None = None

    # -- helpers --------------------------------------------------------------------------------------

    def _tag_issue(self, c: _Call, t: Tok) -> None:
        _tag_issue(c.d, self.text, t)

    def _tag_spans(self, c: _Call, t: Tok) -> None:
        d = c.d
        if t.kind in (FO, PO) and t.ns >= 0:
            d.span("structural", t.start, t.ns)
            d.span("function_name" if t.kind == FO else "param_name", t.ns, t.ne)
            d.span("structural", t.ne, t.end)
        else:
            d.span("structural", t.start, t.end)

    def _gap(self, c: _Call, upto: int, ctx: str) -> None:
        if upto > c.pos and (self.spans or not self.text[c.pos:upto].isspace()):
            c.gaps.append((c.pos, upto, ctx))  # (a whitespace gap only gets a `structural` span: kept for spans)

    def _ins(self, c: _Call, p: int, tag: str, what: str) -> Edit:
        if c.inserted_at is None:
            c.inserted_at = set()
        return _insertion(self.text, c.d, c.inserted_at, p, tag, what)

    def _new_call(self, t: Tok, bare: bool) -> _Call:
        d = CallDraft("qwen3_coder", t.start, t.end)
        c = _Call(d, None if bare else t, bare, pos=t.end)
        self.cur = c
        return c

    # -- element transitions ---------------------------------------------------------------------------

    def _open_function(self, c: _Call, t: Tok) -> None:
        if t.start > c.pos:
            self._gap(c, t.start, "call_head" if c.nfunc == 0 else "call_tail")
        if t.variant is not None:
            self._tag_issue(c, t)
        if self.spans:
            self._tag_spans(c, t)
        c.fn, c.nfunc, c.state, c.pos = t, c.nfunc + 1, "func", t.end
        if c.d.name is None and t.name is not None:
            c.d.name, c.d.name_start, c.d.name_end = t.name, t.ns, t.ne

    def _open_param(self, c: _Call, t: Tok) -> None:
        if t.start > c.pos:
            self._gap(c, t.start, "func")
        if t.variant is not None:
            self._tag_issue(c, t)
        if self.spans:
            self._tag_spans(c, t)
        c.param, c.state, c.pos = _Param(t, t.end), "param", t.end

    def _close_param(self, c: _Call, end_at: int, close: Tok | None, follower: str) -> None:
        """End the open parameter at ``end_at``; ``close`` is its closing tag (None: it was never closed)."""
        p = c.param
        assert p is not None
        text = self.text
        vs, ve = p.vstart, end_at
        a, b = vs, ve
        if text.startswith("\n", vs, ve):
            a += 1
        if b > a and text[b - 1] == "\n":
            b -= 1
        if self.spans:
            c.d.span("structural", vs, a)
            c.d.span("param_value", a, b)
            c.d.span("structural", b, ve)
        value = text[a:b] if b >= a else ""
        c.d.params.append(ParamDraft(p.tok.name or "", p.tok.ns, p.tok.ne, value, None, a, max(a, b)))
        if close is None:
            if c.inserted_at is None:
                c.inserted_at = set()
            _unclosed_parameter(c.d, text, p.tok, end_at, follower, c.inserted_at)
            c.pos = end_at
        else:
            if close.variant is not None:
                self._tag_issue(c, close)
            if self.spans:
                self._tag_spans(c, close)
            c.pos = close.end
        c.param = None
        c.state = "func"

    def _close_function(self, c: _Call, end_at: int, close: Tok | None, follower: str) -> None:
        fn = c.fn
        if c.state == "param":
            self._close_param(c, end_at, None, {"next_call": "call_close"}.get(follower, follower))
        self._gap(c, end_at, "func")
        if close is None and fn is not None:
            if c.inserted_at is None:
                c.inserted_at = set()
            _unclosed_function(c.d, self.text, fn, end_at, follower, c.inserted_at)
            c.pos = max(c.pos, end_at)
        elif close is not None:
            if close.variant is not None:
                self._tag_issue(c, close)
            if self.spans:
                self._tag_spans(c, close)
            c.pos = close.end
            c.fn_close_end = close.end
        c.state = "call"

    def _finish(self, c: _Call, end: int, close: Tok | None) -> None:
        """The call is complete (closed by ``close``, or ending at ``end``): analyse gaps, emit the draft."""
        d = c.d
        text = self.text
        self._gap(c, close.start if close is not None else end, "call_tail" if c.nfunc else "call_head")
        if close is not None:
            if close.variant is not None:
                self._tag_issue(c, close)
            d.span("structural", close.start, close.end)
            end = close.end
            if text[end:end + 1] == ">" and end < self.hi:
                d.add("malformed_tag", "stray_gt", end, end + 1, tag=text[close.start:end + 1], format="qwen3_coder",
                      canonical_hint="the closing tag is `</tool_call>`",
                      edits=[Edit(end, end + 1, "", "removed the stray `>`")])
                d.span("text", end, end + 1)
                end += 1
        d.end = max(end, d.start)
        if c.open_tok is not None:
            if c.open_tok.variant is not None:
                self._tag_issue(c, c.open_tok)
            d.span("structural", c.open_tok.start, c.open_tok.end)
        if c.nfunc == 0 and not d.params:
            self._body_without_function(c, close)
        elif c.gaps:
            self._analyse_gaps(c, truncated=close is None and end >= self.hi and any(
                i.category == "truncated_call" for i in d.issues))
        if self.spans:
            d.spans.sort(key=_span_start)
        self.calls.append(d)
        self.cur = None

    def _body_without_function(self, c: _Call, close: Tok | None) -> None:
        d, text = c.d, self.text
        bs = c.open_tok.end if c.open_tok is not None else d.start
        be = close.start if close is not None else d.end
        body = text[bs:be]
        stripped = body.strip()
        at_end = close is None
        if not stripped:
            if at_end:
                d.add("truncated_call", "after_open", d.start, d.end, where="right after `<tool_call>`",
                      blocker="the output ends right after `<tool_call>`")
            else:
                d.add("empty_call", "empty", d.start, d.end, blocker="the block is empty: there is nothing to repair")
            d.span("structural", bs, be)
            return
        lead = bs + (len(body) - len(body.lstrip()))
        if not stripped.startswith("{"):  # (a body that opens a JSON object is never read as another family's)
            for fam, pat in self.rs.body_patterns:
                m = pat.match(stripped)
                if m:
                    d.fmt, d.family, d.name = "foreign", fam, m.group(1)
                    d.name_start, d.name_end = lead + m.start(1), lead + m.end(1)
                    d.add("foreign_format", "body", lead, bs + len(body.rstrip()), family=fam,
                          expected="qwen3_coder", blocker=f"the arguments of a {fam} call cannot be mapped reliably")
                    d.span("structural", bs, d.name_start)
                    d.span("function_name", d.name_start, d.name_end)
                    d.span("text", d.name_end, be)
                    return
        brace = stripped.find("{")
        if 0 <= brace <= 40 and ('"name' in stripped or '"function' in stripped):
            d.fmt = "hermes"
            fill_json_call(d, text, bs, be, self.rs, at_end=at_end, spans=self.spans)
            d.add("format_mismatch", "json_in_xml_call", lead, bs + len(body.rstrip()),
                  found="a JSON (hermes) call", expected="qwen3_coder")
            d.rerender = True
            return
        if at_end:
            d.add("truncated_call", "after_open", d.start, d.end, where="before any `<function=...>`",
                  blocker="the output ends before the function name")
        else:
            d.add("empty_call", "no_function", lead, bs + len(body.rstrip()), text=snip(stripped, 40),
                  blocker="the block holds no function name")
        d.span("text", bs, be)

    def _analyse_gaps(self, c: _Call, truncated: bool = False) -> None:
        d, text, rs = c.d, self.text, self.rs
        for gs, ge, ctx in c.gaps:
            if truncated and ge >= self.hi and text[gs:ge].strip():
                d.span("text", gs, ge)  # the cut tail (e.g. a half-written `<`) belongs to the truncation
                continue
            seg = text[gs:ge]
            core = seg.strip()
            if not core:
                if self.spans:
                    d.span("structural", gs, ge)
                continue
            cs = gs + (len(seg) - len(seg.lstrip()))
            ce = gs + len(seg.rstrip())
            if self.spans:
                d.span("structural", gs, cs)
                d.span("structural", ce, ge)
            if ctx == "func" and core.startswith("{") and not d.params and d.json_args is MISSING:
                dec = decode_body(text[cs:ce], rs)
                if isinstance(dec.obj, dict) and not dec.found:
                    d.add("format_mismatch", "json_in_function", cs, ce, found="a JSON object inside `<function=...>`",
                          expected="qwen3_coder (one `<parameter=...>` per argument)")
                    d.json_args = dec.obj
                    d.rerender = True
                    members = [mb for mb in walk(text, cs, ce) if mb.depth == 1]
                    pos = cs
                    for mb in members:
                        if mb.ks > pos:
                            d.span("structural", pos, mb.ks)
                        d.span("param_name", mb.ks, mb.ke)
                        vs, ve = mb.vs, mb.ve
                        if vs < 0:
                            pos = mb.ke
                            continue
                        d.span("structural", mb.ke, vs)
                        d.span("param_value", vs, ve)
                        pos = ve
                        d.params.append(ParamDraft(mb.key, mb.ks, mb.ke, None, dec.obj.get(mb.key), vs, ve))
                    d.span("structural", pos, ce)
                    continue
            if set(core) == {">"}:
                d.add("malformed_tag", "stray_gt", cs, ce, tag=core, format="qwen3_coder",
                      canonical_hint="a tag is followed by a stray `>`",
                      edits=[Edit(cs, ce, "", "removed the stray `>`")])
                d.span("text", cs, ce)
                continue
            if _only_description_tags(core, rs.description_tags):
                de = ce + 1 if text[ce:ce + 1] == "\n" and ce < ge else ce
                d.add("malformed_tag", "description_tag", cs, ce, tag=snip(core, 40), format="qwen3_coder",
                      canonical_hint="the function name goes in `<function=NAME>` and arguments in `<parameter=...>`",
                      edits=[Edit(cs, de, "", f"removed `{snip(core, 40)}`")])
                d.span("text", cs, ce)
                continue
            d.add("junk_in_call", "between_tags", cs, ce, text=snip(core, 40),
                  blocker="text between the tags belongs to no parameter; dropping or keeping it is a guess")
            d.span("text", cs, ce)

    # -- driver ----------------------------------------------------------------------------------------

    def _flush_pending(self) -> None:
        c = self.pending_bare
        if c is None:
            return
        self.pending_bare = None
        d = c.d
        if c.fn is not None:
            p = c.fn_close_end if c.fn_close_end >= 0 else c.pos
            d.add("missing_call_close", "bare_function", c.fn.start, c.fn.end, tag=self.text[c.fn.start:c.fn.end],
                  edits=[self._ins(c, p, "</tool_call>", "added `</tool_call>`")])
        self._finish_no_close(c)

    def _finish_no_close(self, c: _Call) -> None:
        # a complete function without </tool_call>: the call ends after </function>
        self._finish(c, c.fn_close_end if c.fn_close_end >= 0 else c.pos, None)

    def _start_bare(self, t: Tok) -> _Call:
        c = self._new_call(t, bare=True)
        c.pos = t.start
        if t.kind == FO:
            c.d.add("missing_call_open", "bare_function", t.start, t.end, tag=self.text[t.start:t.end],
                    edits=[Edit(t.start, t.start, "<tool_call>\n", "added `<tool_call>`")])
        else:
            c.d.add("missing_call_open", "orphan_parameter", t.start, t.end, tag=self.text[t.start:t.end],
                    blocker="a parameter fragment without `<function=...>` does not say which function it calls")
        return c

    def run(self) -> tuple[list[CallDraft], list[Issue]]:
        toks, text = self.toks, self.text
        i, n = 0, len(toks)
        while i < n:
            t = toks[i]
            c = self.cur
            if c is None:
                if self.pending_bare is not None:
                    pb = self.pending_bare
                    if t.kind == CC and not text[pb.d.end:t.start].strip():
                        self.pending_bare = None
                        pb.pos = pb.d.end
                        self.cur = pb
                        self._finish(pb, t.end, t)
                        i += 1
                        continue
                    self._flush_pending()
                if t.kind == CO:
                    self._new_call(t, bare=False)
                elif t.kind == FO:
                    c = self._start_bare(t)
                    self._open_function(c, t)
                elif t.kind == PO:
                    c = self._start_bare(t)
                    c.nfunc = 1
                    self._open_param(c, t)
                else:  # a closing tag with no call open
                    raw = text[t.start:t.end]
                    self.turn_issues.append(Issue(
                        "malformed_tag", "orphan_close", t.start, t.end,
                        {"tag": raw, "format": "qwen3_coder", "canonical_hint": "no call is open here"}))
                i += 1
                continue

            st = c.state
            if t.kind == CO:
                if st == "param" and self._nested(i):
                    j = next(k for k in range(i + 1, n) if toks[k].kind == CC)
                    c.d.add("nested_call", "in_value", t.start, toks[j].end, param=c.param.tok.name if c.param else "",
                            blocker="a call inside a value: which text belongs to which call is a guess")
                    i = j + 1
                    continue
                if st == "call" and c.nfunc == 0 and set(text[c.pos:t.start].strip()) <= {">"}:
                    prev = c.open_tok
                    c.d.add("malformed_tag", "doubled_opener", prev.start if prev else t.start, t.end,
                            tag=text[prev.start:prev.end] if prev else "<tool_call>", format="qwen3_coder",
                            canonical_hint="a call opens with a single `<tool_call>`",
                            edits=[Edit(prev.start if prev else t.start, t.start, "", "removed the repeated opener")])
                    c.d.span("text", prev.start if prev else t.start, t.start)
                    c.open_tok = t
                    c.pos = t.end
                    i += 1
                    continue
                # the next call starts before this one is closed
                if st in ("param", "func"):
                    self._close_function(c, t.start, None, "next_call")
                self._gap(c, t.start, "call_tail" if c.nfunc else "call_head")
                c.pos = t.start
                if c.bare:
                    c.d.end = t.start
                    self.pending_bare = c
                    self.cur = None
                    self._flush_pending()
                else:
                    c.d.add("missing_call_close", "before_next_call",
                            c.open_tok.start if c.open_tok else c.d.start, c.open_tok.end if c.open_tok else c.d.start,
                            tag="<tool_call>", edits=[self._ins(c, t.start, "</tool_call>", "added `</tool_call>`")])
                    self._finish(c, t.start, None)
                continue  # reprocess t with no call open
            if t.kind == CC:
                if st in ("param", "func"):
                    self._close_function(c, t.start, None, "call_close")
                self._finish(c, t.end, t)
                i += 1
                continue
            if t.kind == FO:
                if st in ("param", "func"):
                    self._close_function(c, t.start, None, "func")
                if c.nfunc >= 1 and not c.bare:
                    self._split_function(c, t)
                    i += 1
                    continue
                if c.nfunc >= 1 and c.bare:
                    c.pos = t.start
                    self.pending_bare = c
                    self.cur = None
                    self._flush_pending()
                    continue
                self._open_function(c, t)
                i += 1
                continue
            if t.kind == FC:
                if st in ("param", "func"):
                    if st == "param":
                        self._close_param(c, t.start, None, "func_close")
                    self._close_function(c, t.start, t, "func_close")
                    if c.bare:
                        c.d.end = c.fn_close_end
                        self.pending_bare = c
                        self.cur = None
                else:
                    self._orphan_in_call(c, t)
                i += 1
                continue
            if t.kind == PO:
                if st == "param":
                    self._close_param(c, t.start, None, "param")
                if c.state == "func":
                    self._open_param(c, t)
                else:  # after </function> or before any <function=
                    self._gap(c, t.start, "call_tail" if c.nfunc else "call_head")
                    c.d.add("malformed_tag", "parameter_outside_function", t.start, t.end, tag=text[t.start:t.end],
                            format="qwen3_coder", canonical_hint="parameters go inside `<function=NAME>...</function>`",
                            blocker="a parameter outside `<function=...>`: which function it belongs to is a guess")
                    c.nfunc = max(c.nfunc, 1)
                    c.state = "func"
                    self._open_param(c, t)
                i += 1
                continue
            if t.kind == PC:
                if st == "param":
                    self._close_param(c, t.start, t, "param")
                else:
                    self._orphan_in_call(c, t)
                i += 1
                continue
            i += 1

        # end of the segment
        c = self.cur
        if c is not None:
            end = self.hi
            if c.state == "func" and c.fn is None:  # an orphan parameter fragment, complete in itself
                self._finish(c, c.pos, None)
            elif c.state in ("param", "func"):
                where = "inside the value of `" + (c.param.tok.name or "") + "`" if c.state == "param" else \
                    "inside `<function=" + ((c.fn.name if c.fn else "") or "") + ">`"
                c.d.add("truncated_call", "inside_value" if c.state == "param" else "inside_function",
                        c.d.start, end, where=where, blocker="the output ends inside the call; the rest cannot be recovered")
                self._close_function(c, end, None, "end")
                if c.bare and c.fn is not None:
                    c.d.add("missing_call_close", "bare_function", c.fn.start, c.fn.end,
                            tag=self.text[c.fn.start:c.fn.end])
                elif not c.bare:
                    c.d.add("missing_call_close", "at_end", c.open_tok.start if c.open_tok else c.d.start,
                            c.open_tok.end if c.open_tok else c.d.start, tag="<tool_call>")
                self._finish(c, end, None)
            elif c.nfunc == 0:
                if c.open_tok is not None:
                    c.d.add("missing_call_close", "at_end", c.open_tok.start, c.open_tok.end, tag="<tool_call>")
                self._finish(c, end, None)
            else:
                fe = c.fn_close_end if c.fn_close_end >= 0 else c.pos
                _call_close_at_end(c.d, c.open_tok.start if c.open_tok else c.d.start,
                                   c.open_tok.end if c.open_tok else c.d.start, fe)
                c.pos = fe
                self._finish(c, fe, None)
        self._flush_pending()
        self.calls.sort(key=lambda d: d.start)
        return self.calls, self.turn_issues

    def _nested(self, i: int) -> bool:
        toks = self.toks
        for j in range(i + 1, len(toks)):
            if toks[j].kind == CO:
                return False
            if toks[j].kind == CC:
                return j + 1 < len(toks) and toks[j + 1].kind in (PC, FC, CC)
        return False

    def _orphan_in_call(self, c: _Call, t: Tok) -> None:
        raw = self.text[t.start:t.end]
        self._gap(c, t.start, "call_tail" if c.nfunc else "call_head")
        c.d.add("malformed_tag", "orphan_close", t.start, t.end, tag=raw, format="qwen3_coder",
                canonical_hint="nothing is open that it could close",
                edits=[Edit(t.start, t.end, "", f"removed the unmatched `{raw}`")])
        c.d.span("text", t.start, t.end)
        c.pos = t.end

    def _split_function(self, c: _Call, t: Tok) -> None:
        """A second <function=...> inside one <tool_call>: verl parses both, so report two calls."""
        d = c.d
        self._gap(c, t.start, "call_tail")
        c.pos = t.start
        first = c.fn if c.fn is not None else t
        d.add("multiple_functions_in_call", "several", first.start, first.end, count=c.nfunc + 1,
              edits=[self._ins(c, t.start, "</tool_call>", "split the block: closed the first call")])
        self._finish(c, t.start, None)
        nc = self._new_call(t, bare=True)
        nc.open_tok = None
        nc.pos = t.start
        nc.d.add("multiple_functions_in_call", "several", t.start, t.end, count=2,
                 edits=[Edit(t.start, t.start, "<tool_call>\n", "split the block: opened a call for this function")])
        self._open_function(nc, t)
        nc.bare = False  # its </tool_call> is the shared one


def _span_start(span: tuple[str, int, int]) -> int:
    return span[1]


def _only_description_tags(core: str, tags: tuple[str, ...]) -> bool:
    if not tags:
        return False
    alt = "|".join(re.escape(t) for t in tags)
    return re.fullmatch(rf"(?:\s*<({alt})>[^<]*</\1>)+\s*", core) is not None


class Qwen3CoderFormat(ToolFormat):
    """``<tool_call><function=NAME><parameter=P>VALUE</parameter></function></tool_call>``."""

    name = "qwen3_coder"
    family = "Qwen3-Coder, Qwen3.5, Qwen3.6"

    def find_calls(self, text: str, lo: int, hi: int, rs: RuleSet, excluded: list[tuple[int, int]],
                   spans: bool = True, fast: bool = True) -> tuple[list[CallDraft], list[Issue]]:
        if fast and not excluded:  # simple calls (most malformed ones too) are read with regexes
            simple = _read_simple(text, lo, hi, rs, spans)
            if simple is not None:
                return simple, []
        toks = _lex(text, lo, hi, rs, excluded)
        if not toks:
            return [], []
        toks, lit = literal_tags(text, toks)
        calls, issues = _Scanner(text, lo, hi, rs, toks, spans).run()
        if lit:
            _attach_literals(calls, lit)
        return calls, issues

    def render(self, name: str, arguments: dict[str, Any]) -> str:
        import json

        parts = ["<tool_call>\n<function=", name, ">\n"]
        for k, v in arguments.items():
            if isinstance(v, (dict, list, tuple)):
                v = json.dumps(v, ensure_ascii=False)
            parts += ["<parameter=", str(k), ">\n", str(v), "\n</parameter>\n"]
        parts.append("</function>\n</tool_call>")
        return "".join(parts)

    def render_raw(self, name: str, params: list[tuple[str, str]]) -> str:
        parts = ["<tool_call>\n<function=", name, ">\n"]
        for k, v in params:
            parts += ["<parameter=", k, ">\n", v, "\n</parameter>\n"]
        parts.append("</function>\n</tool_call>")
        return "".join(parts)


__all__ = ["Qwen3CoderFormat"]


FORMATS_PROVIDED: tuple[ToolFormat, ...] = (Qwen3CoderFormat(),)
