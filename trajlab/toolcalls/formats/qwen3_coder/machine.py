"""The tolerant qwen3_coder state machine: call drafts from the tag tokens of a segment, whatever their shape.

:class:`Scanner` walks the tokens of :func:`.lexer.lex` (after :func:`.values.literal_tags` has taken out the
tag text inside values) and builds one :class:`CallDraft` per call: its name, parameters and spans, and every
structural problem as an :class:`Issue` with the edit that fixes it -- tags missing or misspelt, a call without
``<tool_call>`` or ``</tool_call>``, several functions in one call, JSON or another family's syntax in the body,
text between the tags, a call cut by the end of the output.

It is longer than 400 lines on purpose: it is one automaton whose transitions (the ``run`` loop and the
element methods it calls) share the state of the call being read (:class:`_Call`), and the analysis of a
finished call's gaps and body belongs to the same state; split across modules it would be harder to follow.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from trajlab.toolcalls.draft import MISSING, CallDraft, Edit, Issue, ParamDraft, snip
from trajlab.toolcalls.formats.qwen3_coder.issues import (
    call_close_at_end,
    insertion,
    tag_issue,
    unclosed_function,
    unclosed_parameter,
)
from trajlab.toolcalls.formats.qwen3_coder.lexer import CC, CO, FC, FO, PC, PO, Tok
from trajlab.toolcalls.json_decode import decode_body
from trajlab.toolcalls.json_walk import walk
from trajlab.toolcalls.jsonbody import fill_json_call
from trajlab.toolcalls.ruleset import RuleSet


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


class Scanner:
    """Reads the calls of ``text[lo:hi]`` from its tokens: ``Scanner(...).run()`` gives (drafts, turn issues)."""

    def __init__(self, text: str, lo: int, hi: int, rs: RuleSet, toks: list[Tok], spans: bool = True) -> None:
        self.text, self.lo, self.hi, self.rs, self.toks = text, lo, hi, rs, toks
        self.spans = spans  # record the drafts' spans (False: the caller builds no tiling)
        self.calls: list[CallDraft] = []
        self.turn_issues: list[Issue] = []
        self.cur: _Call | None = None
        self.pending_bare: _Call | None = None

    # -- helpers --------------------------------------------------------------------------------------

    def _tag_issue(self, c: _Call, t: Tok) -> None:
        tag_issue(c.d, self.text, t)

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
        return insertion(self.text, c.d, c.inserted_at, p, tag, what)

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
            unclosed_parameter(c.d, text, p.tok, end_at, follower, c.inserted_at)
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
            unclosed_function(c.d, self.text, fn, end_at, follower, c.inserted_at)
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
                call_close_at_end(c.d, c.open_tok.start if c.open_tok else c.d.start,
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
