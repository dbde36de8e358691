"""The tolerant reader shared by the wrapped XML call formats: Seed-OSS (``seed``) and MiniMax-M2 (``minimax``).

Both families write calls as a *wrapper* tag around *invoke* tags holding *parameter* tags (call-formats.md §6):

* Seed-OSS: ``<seed:tool_call>\\n<function=NAME>\\n<parameter=K>V</parameter>\\n</function>\\n</seed:tool_call>``,
  one wrapper per call;
* MiniMax-M2: ``<minimax:tool_call>\\n<invoke name="NAME">\\n<parameter name="K">V</parameter>\\n</invoke>\\n
  </minimax:tool_call>``, one wrapper around every call of the turn.

:class:`XmlGrammar` says which spelling a family uses; :func:`scan` lexes the tags (canonical and malformed
spellings: a stray attribute, a misspelt closer, a missing ``>``, the other naming syntax) and walks them, building
one :class:`~trajlab.toolcalls.draft.CallDraft` per invoke with located issues and the minimal edit that repairs
each, where one is unambiguous. Values are the raw text between the tags; like verl's parsers, the intended
value is ``json.loads`` of the stripped text, else the stripped text (:func:`convert`).

The wrapper tags are special tokens of both tokenizers (verl-reward.md): a dump decoded with
``skip_special_tokens=True`` keeps the invokes but not the wrapper. A turn that shows none of the family's special
tokens (the grammar's ``kept_markers``, :func:`~trajlab.toolcalls.verl_call.markers_kept`: a kept turn ends with the end-of-turn token the model
generates after its calls) is read as such a stripped decode (its invokes need no wrapper); in a kept turn, an
invoke outside a wrapper is ``missing_call_open``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from trajlab.toolcalls.draft import CallDraft, Edit, Issue, ParamDraft, Ranges
from trajlab.toolcalls.ruleset import RuleSet
from trajlab.toolcalls.verl_call import markers_kept

W_OPEN, W_CLOSE, F_OPEN, F_CLOSE, P_OPEN, P_CLOSE = range(6)
_CLOSE_TAIL = re.compile(r"\d{1,3}|/|_?end|_?close")
_ATTR = re.compile(r'[ \t]+name="([^"\n]*)"')
_ATTR_LOOSE = re.compile(r"[ \t]*(?:name)?[ \t]*=[ \t]*['\"]?([^'\"\s>]*)['\"]?")


@dataclass(frozen=True, slots=True)
class XmlGrammar:
    """One family's spelling: the tag keywords and how an invoke / parameter tag carries its name."""

    fmt: str
    wrapper: str  # "seed:tool_call"
    invoke: str  # "function" | "invoke"
    param: str  # "parameter"
    by_attr: bool  # True: `<invoke name="N">`; False: `<function=N>`
    one_call_per_wrapper: bool
    kept_markers: tuple[str, ...] = ()  # the family's special-token markers (a kept decode shows one)

    def open_tag(self, kind: int, name: str = "") -> str:
        if kind == W_OPEN:
            return f"<{self.wrapper}>"
        kw = self.invoke if kind == F_OPEN else self.param
        return f'<{kw} name="{name}">' if self.by_attr else f"<{kw}={name}>"

    def close_tag(self, kind: int) -> str:
        return f"</{ {W_CLOSE: self.wrapper, F_CLOSE: self.invoke, P_CLOSE: self.param}[kind] }>"

    def lex_re(self) -> re.Pattern[str]:
        kws = "|".join(re.escape(k) for k in (self.wrapper, self.invoke, self.param))
        return re.compile(rf"<(/?)({kws})(?![\w:])([^<>\n]{{0,256}})(>?)")


@dataclass(slots=True)
class Tok:
    kind: int
    start: int
    end: int
    variant: str | None = None  # None: canonical | stray_attr | close_variant | missing_gt | syntax
    name: str = ""
    ns: int = -1
    ne: int = -1
    attr: str = ""


def lex(g: XmlGrammar, text: str, lo: int, hi: int, excluded: list[tuple[int, int]]) -> list[Tok]:
    """The tag tokens of ``text[lo:hi]`` (tags inside ``excluded`` ranges and tags cut by the end are left out)."""
    out: list[Tok] = []
    excl = Ranges(excluded) if excluded else None
    for m in g.lex_re().finditer(text, lo, hi):
        s, e = m.span()
        if excl and excl.covering(s) >= 0:
            continue
        slash, kw, tail, gt = m.groups()
        if not gt and e >= hi:
            continue  # cut by the end of the text: part of a truncated call
        kind = (W_CLOSE if slash else W_OPEN) if kw == g.wrapper else (
            (F_CLOSE if slash else F_OPEN) if kw == g.invoke else (P_CLOSE if slash else P_OPEN))
        t = Tok(kind, s, e)
        if kind in (W_OPEN, W_CLOSE, F_CLOSE, P_CLOSE):
            if tail:
                if tail[0] in " \t" and gt:
                    t.variant, t.attr = "stray_attr", tail.strip()
                elif slash and gt and _CLOSE_TAIL.fullmatch(tail):
                    t.variant, t.attr = "close_variant", tail
                else:
                    continue  # another tag (`</parameters>`): not ours
            elif not gt:
                t.variant = "missing_gt"
            out.append(t)
            continue
        base = s + 1 + len(kw)
        if g.by_attr:
            am = _ATTR.match(tail)
            if am is not None:
                t.name, t.ns, t.ne = am.group(1), base + am.start(1), base + am.end(1)
                rest = tail[am.end():]
                if rest.strip() and gt:
                    t.variant, t.attr = "stray_attr", rest.strip()
                elif not gt:
                    t.variant = "missing_gt"
            elif (lm := _ATTR_LOOSE.fullmatch(tail)) is not None and lm.group(1) and gt:
                t.variant = "syntax"
                t.name, t.ns, t.ne = lm.group(1), base + lm.start(1), base + lm.end(1)
            else:
                continue
        else:
            if not tail.startswith("="):
                am = _ATTR.match(tail)
                if am is None or not gt:
                    continue  # `<function>`, `<parameters>`: not a call tag
                t.variant = "syntax"
                t.name, t.ns, t.ne = am.group(1), base + am.start(1), base + am.end(1)
            else:
                raw = tail[1:]
                core = raw.split(None, 1)[0] if raw.strip() else ""
                t.name, t.ns, t.ne = core, base + 1, base + 1 + len(core)
                rest = raw[len(core):]
                if rest.strip() and gt:
                    t.variant, t.attr = "stray_attr", rest.strip()
                elif not gt:
                    t.variant = "missing_gt"
        out.append(t)
    return out


def convert(raw: str) -> Any:
    """verl's ``seed`` / ``minimax`` value conversion: ``json.loads`` of the stripped text, else the stripped text."""
    v = raw.strip()
    try:
        return json.loads(v)
    except (ValueError, RecursionError):
        return v


class _Walk:
    def __init__(self, g: XmlGrammar, text: str, lo: int, hi: int, toks: list[Tok], stripped: bool) -> None:
        self.g, self.text, self.lo, self.hi, self.toks, self.stripped = g, text, lo, hi, toks, stripped
        self.calls: list[CallDraft] = []
        self.turn_issues: list[Issue] = []
        self.wrap: Tok | None = None  # the open wrapper
        self.wrap_calls = 0  # calls opened inside it
        self.d: CallDraft | None = None  # the open call
        self.d_closed = True  # its invoke was closed (`</function>` seen)
        self.p: Tok | None = None  # the open parameter
        self.p_name = ""
        self.prev: Tok | None = None

    # -- helpers ----------------------------------------------------------------------------------------------

    def _tag_issue(self, d: CallDraft | None, t: Tok) -> None:
        raw = self.text[t.start:t.end]
        g = self.g
        canon = g.close_tag(t.kind) if t.kind in (W_CLOSE, F_CLOSE, P_CLOSE) else g.open_tag(t.kind, t.name)
        add = d.add if d is not None else self._turn_add
        if t.variant == "stray_attr":
            add("stray_attribute", f"{g.fmt}_tag", t.start, t.end, tag=raw, attribute=t.attr, canonical=canon,
                edits=[Edit(t.start, t.end, canon, f"removed `{t.attr}` from `{raw}`")])
        elif t.variant == "close_variant":
            add("malformed_tag", "close_variant", t.start, t.end, tag=raw, format=g.fmt,
                canonical_hint=f"it should read `{canon}`",
                edits=[Edit(t.start, t.end, canon, f"replaced `{raw}` by `{canon}`")])
        elif t.variant == "missing_gt":
            add("malformed_tag", f"{g.fmt}_missing_gt", t.start, t.end, tag=raw, format=g.fmt,
                canonical_hint=f"it should read `{canon}`", edits=[Edit(t.start, t.end, canon, f"completed `{canon}`")])
        elif t.variant == "syntax":
            add("malformed_tag", f"{g.fmt}_name_syntax", t.start, t.end, tag=raw, format=g.fmt,
                canonical_hint=f"this family writes `{canon}`",
                edits=[Edit(t.start, t.end, canon, f"wrote the tag as `{canon}`")])
        if d is not None:
            if t.ns >= 0:
                d.span("structural", t.start, t.ns)
                d.span("function_name" if t.kind == F_OPEN else "param_name", t.ns, t.ne)
                d.span("structural", t.ne, t.end)
            else:
                d.span("structural", t.start, t.end)

    def _turn_add(self, category: str, variant: str, start: int, end: int, *, blocker: str | None = None,
                  edits: list[Edit] | None = None, **params: Any) -> Issue:
        iss = Issue(category, variant, start, end, params, edits or [], blocker)
        self.turn_issues.append(iss)
        return iss

    def _end_of(self, pos: int) -> int:
        """``pos`` moved back over white space (where an inserted closer goes)."""
        return self.lo + len(self.text[self.lo:pos].rstrip()) if pos > self.lo else pos

    def _close_param(self, at: int, why: str, closer_tok: Tok | None = None) -> None:
        """Close the open parameter at ``at`` (the position of the tag that ends it)."""
        p, d, g = self.p, self.d, self.g
        assert p is not None and d is not None
        if closer_tok is not None:
            val_end = closer_tok.start
        else:
            val_end = self._end_of(at)
            if val_end < p.end:
                val_end = p.end
            d.add("unclosed_tag", f"{g.fmt}_parameter_{why}", p.start, p.end, tag=self.text[p.start:p.end],
                  closer=g.close_tag(P_CLOSE),
                  edits=[Edit(val_end, val_end, g.close_tag(P_CLOSE), f"closed `{g.close_tag(P_CLOSE)}`")])
        raw = self.text[p.end:val_end]
        d.span("param_value", p.end, val_end)
        d.params.append(ParamDraft(p.name, p.ns, p.ne, None, convert(raw), p.end, val_end, raw))
        self.p = None

    def _finish_call(self, end: int) -> None:
        d = self.d
        assert d is not None
        d.end = max(d.end, end)
        d.spans.sort(key=lambda x: x[1])
        self.d = None

    def _close_invoke_missing(self, at: int, why: str) -> None:
        d, g = self.d, self.g
        assert d is not None
        end = self._end_of(at)
        d.end = max(d.end, end)
        d.add("unclosed_tag", f"{g.fmt}_invoke_{why}", d.name_start if d.name_start >= 0 else d.start, d.end,
              tag=g.open_tag(F_OPEN, d.name or ""), closer=g.close_tag(F_CLOSE),
              edits=[Edit(end, end, "\n" + g.close_tag(F_CLOSE), f"added `{g.close_tag(F_CLOSE)}`")])

    # -- the walk ---------------------------------------------------------------------------------------------

    def run(self) -> tuple[list[CallDraft], list[Issue]]:
        for t in self.toks:
            k = t.kind
            if k == W_OPEN:
                self._w_open(t)
            elif k == W_CLOSE:
                self._w_close(t)
            elif k == F_OPEN:
                self._f_open(t)
            elif k == F_CLOSE:
                if self.p is not None:
                    self._close_param(t.start, "at_invoke_close")
                if self.d is None or self.d_closed:
                    self._orphan(t)
                else:
                    self._tag_issue(self.d, t)
                    self.d_closed = True
                    self.d.end = t.end
                    if self.wrap is None:
                        self._finish_call(t.end)
            elif k == P_OPEN:
                if self.d is None or self.d_closed:
                    self._orphan(t)
                else:
                    if self.p is not None:
                        self._close_param(t.start, "before_next")
                    self._tag_issue(self.d, t)
                    self.p = t
            else:  # P_CLOSE
                if self.p is not None and self.d is not None:
                    self._tag_issue(self.d, t)
                    self._close_param(t.start, "", closer_tok=t)
                    self.d.end = t.end
                else:
                    self._orphan(t)
            self.prev = t
        self._at_end()
        self.calls.sort(key=lambda x: x.start)
        return self.calls, self.turn_issues

    def _orphan(self, t: Tok) -> None:
        raw = self.text[t.start:t.end]
        d = self.d
        target = d.add if d is not None else self._turn_add
        target("malformed_tag", "orphan_close" if t.kind in (W_CLOSE, F_CLOSE, P_CLOSE) else f"{self.g.fmt}_stray_open",
               t.start, t.end, tag=raw, format=self.g.fmt, canonical_hint="no call or parameter is open here",
               edits=[Edit(t.start, t.end, "", f"removed `{raw}`")])
        if d is not None:
            d.span("text", t.start, t.end)
            d.end = max(d.end, t.end)

    def _w_open(self, t: Tok) -> None:
        g, text = self.g, self.text
        if self.wrap is not None:
            between = text[self.prev.end:t.start] if self.prev is not None else "x"
            if self.prev is self.wrap and not between.strip():
                # a doubled opener: `<seed:tool_call><seed:tool_call>`
                (self.d.add if self.d is not None else self._turn_add)(
                    "malformed_tag", "doubled_marker", t.start, t.end, tag=text[t.start:t.end], format=g.fmt,
                    canonical_hint=f"a call opens with a single `{g.open_tag(W_OPEN)}`",
                    edits=[Edit(self.prev.end, t.end, "", f"removed the second `{g.open_tag(W_OPEN)}`")])
                return
            # the previous wrapper was never closed
            if self.p is not None:
                self._close_param(t.start, "at_wrapper_close")
            last = self.d if self.d is not None else (self.calls[-1] if self.calls else None)
            if self.d is not None and not self.d_closed:
                self._close_invoke_missing(t.start, "at_wrapper_close")
            if last is not None and last.start >= self.wrap.start:
                end = self._end_of(t.start)
                last.add("missing_call_close", "before_next_call", self.wrap.start, self.wrap.end,
                         tag=g.open_tag(W_OPEN),
                         edits=[Edit(end, end, "\n" + g.close_tag(W_CLOSE), f"added `{g.close_tag(W_CLOSE)}`")])
            if self.d is not None:
                self._finish_call(self.d.end)
        self.wrap, self.wrap_calls = t, 0

    def _w_close(self, t: Tok) -> None:
        g, text = self.g, self.text
        if self.wrap is None:
            if self.prev is not None and self.prev.kind == W_CLOSE and not text[self.prev.end:t.start].strip() \
                    and self.calls:
                self.calls[-1].add("malformed_tag", "doubled_marker", t.start, t.end, tag=text[t.start:t.end],
                                   format=g.fmt, canonical_hint=f"a call closes with a single `{g.close_tag(W_CLOSE)}`",
                                   edits=[Edit(self.prev.end, t.end, "", "removed the second closer")])
                self.calls[-1].end = t.end
                return
            self._orphan(t)
            return
        if self.p is not None:
            self._close_param(t.start, "at_wrapper_close")
        if self.d is not None and not self.d_closed:
            self._close_invoke_missing(t.start, "at_wrapper_close")
        last = self.d if self.d is not None else None
        if last is None and self.calls and self.calls[-1].start >= self.wrap.start:
            last = self.calls[-1]
        if last is not None:
            self._tag_issue(last, t)
            last.end = t.end
            last.spans.sort(key=lambda x: x[1])
        elif self.wrap_calls == 0:
            d = CallDraft(g.fmt, self.wrap.start, t.end)
            d.span("structural", self.wrap.start, t.end)
            d.add("empty_call", "empty", d.start, d.end, blocker="the wrapper holds no call: there is nothing to repair")
            self.calls.append(d)
        if self.d is not None:
            self._finish_call(t.end)
        self.wrap = None

    def _f_open(self, t: Tok) -> None:
        g = self.g
        if self.p is not None:
            self._close_param(t.start, "before_next")
        if self.d is not None:
            if not self.d_closed:
                self._close_invoke_missing(t.start, "before_next")
            self._finish_call(self.d.end)
        start = t.start
        d = CallDraft(g.fmt, start, t.end)
        if self.wrap is not None:
            if self.wrap_calls == 0:
                d.start = self.wrap.start
                self._tag_issue(d, self.wrap)
                d.span("structural", self.wrap.end, t.start)
            elif g.one_call_per_wrapper:
                ins = self._end_of(t.start)
                d.add("multiple_functions_in_call", f"{g.fmt}_wrapper", t.start, t.end,
                      edits=[Edit(ins, ins, "\n" + g.close_tag(W_CLOSE), f"closed `{g.close_tag(W_CLOSE)}` first"),
                             Edit(t.start, t.start, g.open_tag(W_OPEN) + "\n", f"opened `{g.open_tag(W_OPEN)}`")])
            self.wrap_calls += 1
        elif not self.stripped:
            d.add("missing_call_open", f"{g.fmt}_wrapper", t.start, t.end, tag=g.open_tag(W_OPEN),
                  edits=[Edit(t.start, t.start, g.open_tag(W_OPEN) + "\n", f"added `{g.open_tag(W_OPEN)}`")])
        d.name, d.name_start, d.name_end = t.name, t.ns, t.ne
        self._tag_issue(d, t)
        self.d, self.d_closed = d, False
        self.calls.append(d)

    def _at_end(self) -> None:
        g, text, hi = self.g, self.text, self.hi
        d = self.d
        trailing = text[self.prev.end:hi] if self.prev is not None else ""
        if self.p is not None and d is not None:
            if self.wrap is not None or not trailing.strip() or "\n" not in trailing.strip():
                p = self.p
                d.add("truncated_call", "inside_value", p.start, hi, where="inside a parameter value",
                      blocker="the output ends inside the call, the rest cannot be recovered")
                raw = text[p.end:hi]
                d.span("param_value", p.end, hi)
                d.params.append(ParamDraft(p.name, p.ns, p.ne, None, convert(raw), p.end, hi, raw))
                d.end = hi
                self.p = None
                self._finish_call(hi)
                return
            self._close_param(hi, "at_end")
        if d is not None and not self.d_closed:
            if not trailing.strip() and not d.params:
                d.add("truncated_call", "after_open", d.start, hi, where="right after the call's name",
                      blocker="the output ends inside the call, the rest cannot be recovered")
                d.end = hi
            else:
                self._close_invoke_missing(hi, "at_end")
        if self.wrap is not None:
            last = d if d is not None else (self.calls[-1] if self.calls and self.calls[-1].start >= self.wrap.start
                                            else None)
            if last is not None and not any(i.category == "truncated_call" for i in last.issues):
                end = self._end_of(hi)
                last.add("missing_call_close", "at_end", self.wrap.start, self.wrap.end, tag=g.open_tag(W_OPEN),
                         edits=[Edit(end, end, "\n" + g.close_tag(W_CLOSE), f"added `{g.close_tag(W_CLOSE)}`")])
            elif last is None:
                self._turn_add("truncated_call", "after_open", self.wrap.start, hi, where="right after the wrapper",
                               blocker="the output ends inside the call, the rest cannot be recovered")
        if d is not None:
            self._finish_call(d.end)


def scan(g: XmlGrammar, text: str, lo: int, hi: int, rs: RuleSet,
         excluded: list[tuple[int, int]]) -> tuple[list[CallDraft], list[Issue]]:
    """The calls of ``text[lo:hi]`` in grammar ``g`` and the problems that belong to no call. Never raises."""
    if text.find(g.invoke, lo, hi) < 0 and text.find(g.wrapper, lo, hi) < 0:
        return [], []
    toks = lex(g, text, lo, hi, excluded)
    if not toks:
        return [], []
    return _Walk(g, text, lo, hi, toks, stripped=not markers_kept(g.kept_markers, text)).run()


def render(g: XmlGrammar, calls: list[tuple[str, list[tuple[str, str]]]]) -> str:
    """Canonical text of calls with raw string values, laid out as the family's chat template writes them."""
    def one(name: str, params: list[tuple[str, str]]) -> str:
        body = "".join(g.open_tag(P_OPEN, k) + v + g.close_tag(P_CLOSE) + "\n" for k, v in params)
        return g.open_tag(F_OPEN, name) + "\n" + body + g.close_tag(F_CLOSE) + "\n"
    if g.one_call_per_wrapper:
        return "".join(f"{g.open_tag(W_OPEN)}\n{one(n, p)}{g.close_tag(W_CLOSE)}" for n, p in calls)
    return g.open_tag(W_OPEN) + "\n" + "".join(one(n, p) for n, p in calls) + g.close_tag(W_CLOSE)


def render_value(v: Any) -> str:
    """A value as the MiniMax template writes it (strings raw, anything else ``tojson``)."""
    return v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)


__all__ = ["XmlGrammar", "convert", "lex", "render", "render_value", "scan"]
