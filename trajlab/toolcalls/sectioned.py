"""A scanner for call formats built from marker tokens around JSON arguments (Kimi-K2, DeepSeek-V3.1).

Both families write one *section* per turn holding one or more calls::

    SECTION_BEGIN CALL_BEGIN head SEP {json arguments} CALL_END ... SECTION_END

(Kimi-K2: head = ``functions.NAME:IDX``; DeepSeek-V3.1: head = ``NAME``.) :class:`Markers` names the tokens of one
family; :class:`SectionScanner` lexes them (look-alike spellings included, reported ``malformed_tag``), walks the
sections and hands each head to the format's ``read_head`` and each argument body to
:func:`~trajlab.toolcalls.jsonbody.fill_json_arguments`. A call's extent includes its section's begin (first call)
and end (last call), so a call alone in its section repairs by text edits; calls sharing a section are repaired
by re-rendering.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from trajlab.toolcalls.draft import CallDraft, Edit, Issue, Ranges, snip
from trajlab.toolcalls.jsonbody import fill_json_arguments
from trajlab.toolcalls.ruleset import RuleSet

KINDS = ("section_begin", "section_end", "call_begin", "sep", "call_end")


@dataclass(frozen=True)
class Markers:
    """The five marker tokens of a family, and the look-alike characters its lexer also accepts."""

    section_begin: str
    section_end: str
    call_begin: str
    sep: str
    call_end: str
    confusables: tuple[tuple[str, str], ...] = ()  # (canonical char, regex class accepting look-alikes)

    def token(self, kind: str) -> str:
        return getattr(self, kind)

    def lexer(self) -> re.Pattern[str]:
        alts = []
        for k in KINDS:
            pat = re.escape(self.token(k))
            for ch, cls in self.confusables:
                pat = pat.replace(re.escape(ch), cls)
            alts.append(f"(?P<{k}>{pat})")
        return re.compile("|".join(alts))


@dataclass(slots=True)
class Tok:
    kind: str
    start: int
    end: int
    lookalike: bool


#: what a format's head reader returns: (name, name_start, name_end); it adds its own issues to the draft
HeadReader = Callable[[CallDraft, str, int, int, int], None]
#: a format's hook for an argument body it reads itself (e.g. DeepSeek-V3's fenced JSON); True when handled
ArgsReader = Callable[[CallDraft, str, int, int, RuleSet, bool, bool], bool]


class SectionScanner:
    """Find the calls of one segment for a :class:`Markers` family."""

    def __init__(self, fmt: str, markers: Markers, read_head: HeadReader, read_args: ArgsReader | None = None) -> None:
        self.fmt, self.m, self.read_head, self.read_args = fmt, markers, read_head, read_args
        self.lex_re = markers.lexer()

    def lex(self, text: str, lo: int, hi: int, excluded: list[tuple[int, int]]) -> list[Tok]:
        excl = Ranges(excluded) if excluded else None
        out: list[Tok] = []
        for mt in self.lex_re.finditer(text, lo, hi):
            if excl and excl.covering(mt.start()) >= 0:
                continue
            kind = mt.lastgroup or ""
            out.append(Tok(kind, mt.start(), mt.end(), mt.group() != self.m.token(kind)))
        return out

    def scan(self, text: str, lo: int, hi: int, rs: RuleSet, excluded: list[tuple[int, int]],
             spans: bool = True) -> tuple[list[CallDraft], list[Issue]]:
        toks = self.lex(text, lo, hi, excluded)
        calls: list[CallDraft] = []
        turn_issues: list[Issue] = []
        if not toks:
            return calls, turn_issues
        i, n = 0, len(toks)
        while i < n:
            t = toks[i]
            if t.kind in ("section_begin", "call_begin"):
                i = self._section(text, toks, i, hi, rs, spans, calls)
                continue
            turn_issues.append(Issue("malformed_tag", "orphan_close", t.start, t.end,
                                     {"tag": text[t.start:t.end], "format": self.fmt,
                                      "canonical_hint": "no call section is open here"}))
            i += 1
        return calls, turn_issues

    def _lookalike(self, d: CallDraft, text: str, t: Tok) -> None:
        d.span("structural", t.start, t.end)
        if t.lookalike:
            canon = self.m.token(t.kind)
            raw = text[t.start:t.end]
            d.add("malformed_tag", "lookalike_token", t.start, t.end, tag=raw, format=self.fmt,
                  canonical_hint=f"the special token is `{canon}`",
                  edits=[Edit(t.start, t.end, canon, f"replaced `{raw}` by the token `{canon}`")])

    def _section(self, text: str, toks: list[Tok], i: int, hi: int, rs: RuleSet, spans: bool,
                 calls: list[CallDraft]) -> int:
        m, n = self.m, len(toks)
        first = toks[i]
        sec_start = first.start
        mine: list[CallDraft] = []
        opened = first.kind == "section_begin"
        pending: list[Tok] = [first] if opened else []
        j = i + 1 if opened else i
        pos = first.end if opened else first.start
        ended: Tok | None = None
        junk: list[tuple[int, int]] = []
        while j < n:
            t = toks[j]
            if t.kind == "call_begin":
                if text[pos:t.start].strip():
                    junk.append((pos, t.start))
                d, j, pos, go_on = self._call(text, toks, j, hi, rs, spans, len(mine))
                if pending:
                    d.start = pending[0].start
                    for pt in pending:
                        self._lookalike(d, text, pt)
                    pending = []
                elif not mine and not opened:
                    d.add("missing_call_open", "section_begin", t.start, t.end, tag=m.call_begin,
                          edits=[Edit(t.start, t.start, m.section_begin, f"added `{m.section_begin}`")])
                mine.append(d)
                if not go_on:
                    break
                continue
            if t.kind == "section_end":
                if text[pos:t.start].strip():
                    junk.append((pos, t.start))
                ended = t
                j += 1
                break
            if t.kind == "section_begin":
                if not mine and pending:  # a doubled section opener
                    pending.append(t)
                    pos = t.end
                    j += 1
                    continue
                break  # the next section starts (this one was never closed)
            # a separator or call end outside a call
            if mine:
                mine[-1].add("malformed_tag", "orphan_close", t.start, t.end, tag=text[t.start:t.end], format=self.fmt,
                             canonical_hint="no call is open here",
                             edits=[Edit(t.start, t.end, "", f"removed `{text[t.start:t.end]}`")])
                mine[-1].span("text", t.start, t.end)
                mine[-1].end = t.end
            pos = t.end
            j += 1
        if not mine:
            end = ended.end if ended is not None else (toks[j].start if j < n else hi)
            d = CallDraft(self.fmt, sec_start, end)
            for pt in pending:
                self._lookalike(d, text, pt)
            inner = text[pending[-1].end if pending else sec_start:ended.start if ended is not None else end]
            if ended is None and j >= n and not inner.strip():
                d.add("truncated_call", "after_open", sec_start, end, where="right after the section opener",
                      blocker="the output ends right after the call section opens")
            else:
                d.add("empty_call", "empty" if not inner.strip() else "no_function", sec_start, end,
                      text=snip(inner.strip(), 40), blocker="the call section holds no call")
            if ended is not None:
                self._lookalike(d, text, ended)
            calls.append(d)
            return j
        last = mine[-1]
        for s, e in junk:
            core = text[s:e].strip()
            cs = s + text[s:e].find(core)
            host = next((d for d in mine if d.start >= e), last)
            host.add("junk_in_call", "between_calls", cs, cs + len(core), text=snip(core, 40),
                     edits=[Edit(cs, cs + len(core), "", "removed the text between the calls")])
            host.span("text", cs, cs + len(core))
        if ended is not None:
            last.end = ended.end
            self._lookalike(last, text, ended)
        elif opened and not any(iss.category in ("truncated_call",) for iss in last.issues):
            # (a section never opened has missing_call_open on its first call instead)
            last.add("missing_call_close", "section_end", last.start, last.end, tag=m.section_end,
                     edits=[Edit(last.end, last.end, m.section_end, f"added `{m.section_end}`")])
        if not opened and not pending:
            # every call of a section that was never opened is dropped by the family's parsers, not just the
            # first (whose edit adds the opener for all of them)
            for d in mine[1:]:
                d.add("missing_call_open", "section_begin", d.start, d.start, tag=m.call_begin, _covered=True)
        if len(mine) > 1:
            for d in mine:
                d.rerender = True
        for d in mine:
            d.spans.sort(key=lambda x: x[1])
        calls.extend(mine)
        return j

    def _call(self, text: str, toks: list[Tok], j: int, hi: int, rs: RuleSet, spans: bool,
              number: int) -> tuple[CallDraft, int, int, bool]:
        """One call from ``toks[j]`` (a call opener): (draft, next token index, position after it, go on)."""
        m, n = self.m, len(toks)
        cb = toks[j]
        d = CallDraft(self.fmt, cb.start, cb.end)
        self._lookalike(d, text, cb)
        j += 1
        nxt = toks[j] if j < n else None
        head_end = nxt.start if nxt is not None else hi
        if nxt is not None and nxt.kind == "sep":
            hs, he = cb.end, nxt.start
            self._lookalike(d, text, nxt)
            bs = nxt.end
            j += 1
        else:
            brace = text.find("{", cb.end, head_end)
            if brace < 0:
                if nxt is None:
                    d.add("truncated_call", "inside_head", cb.start, hi, where="before the arguments",
                          blocker="the output ends inside the call, the rest cannot be recovered")
                    self.read_head(d, text, cb.end, hi, number)
                    d.end = hi
                    return d, j, hi, False
                d.add("malformed_tag", "missing_separator", cb.start, head_end, tag=snip(text[cb.start:head_end], 30),
                      format=self.fmt, canonical_hint=f"the name is followed by `{m.sep}` and the JSON arguments",
                      blocker="the call has no arguments")
                self.read_head(d, text, cb.end, head_end, number)
                d.end = head_end
                if nxt.kind == "call_end":
                    self._lookalike(d, text, nxt)
                    d.end = nxt.end
                    return d, j + 1, nxt.end, True
                return d, j, head_end, True
            hs, he, bs = cb.end, brace, brace
            d.add("malformed_tag", "missing_separator", cb.start, brace, tag=snip(text[cb.start:brace], 30),
                  format=self.fmt, canonical_hint=f"the name is followed by `{m.sep}`",
                  edits=[Edit(brace, brace, m.sep, f"added `{m.sep}`")])
        self.read_head(d, text, hs, he, number)
        nxt = toks[j] if j < n else None
        be = nxt.start if nxt is not None else hi
        at_end = nxt is None
        body = text[bs:be]
        if not (self.read_args is not None and self.read_args(d, text, bs, be, rs, at_end, spans)):
            if at_end:
                be = bs + len(body.rstrip())
            fill_json_arguments(d, text, bs, be, rs, at_end=at_end, spans=spans, fmt=self.fmt)
        if nxt is not None and nxt.kind == "call_end":
            self._lookalike(d, text, nxt)
            d.end = nxt.end
            return d, j + 1, nxt.end, True
        # the call is not closed
        vend = bs + len(body.rstrip())
        d.end = vend
        if any(iss.category == "truncated_call" for iss in d.issues):
            d.end = hi if at_end else vend
            return d, j, d.end, not at_end
        variant = "call_at_end" if at_end else ("call_before_next" if nxt.kind == "call_begin" else "call_at_section_end")
        d.add("unclosed_tag", variant, cb.start, cb.end, tag=m.call_begin, closer=m.call_end,
              edits=[Edit(vend, vend, m.call_end, f"added `{m.call_end}`")])
        return d, j, vend, not at_end


def read_json_tail(text: str, start: int, hi: int) -> int:
    """End of the JSON value starting at ``text[start]`` (raw decode), or -1 when it does not decode."""
    import json

    try:
        _obj, end = json.JSONDecoder().raw_decode(text, start)
    except (ValueError, RecursionError):
        return -1
    return end if end <= hi else -1


def render_section(markers: Markers, calls: list[tuple[str, str]]) -> str:
    """A section of ``(head, arguments JSON text)`` calls, as the chat templates render it (no separators)."""
    body = "".join(f"{markers.call_begin}{h}{markers.sep}{a}{markers.call_end}" for h, a in calls)
    return f"{markers.section_begin}{body}{markers.section_end}"


__all__ = ["Markers", "SectionScanner", "read_json_tail", "render_section"]
