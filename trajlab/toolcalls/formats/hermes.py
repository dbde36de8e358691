"""The hermes call format (Qwen2.5, Qwen3, Qwen3-Next): ``<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>``.

The framing tags are found with one regex ``finditer``; each block body goes to :mod:`..jsonbody` (decode,
diagnose, locate). A block that holds the XML format instead is handed to the qwen3_coder scanner and reported
as ``format_mismatch``; another family's syntax (glm ``NAME<arg_key>``, a Python-style call) as
``foreign_format``. verl's hermes parser needs both tags and a decodable object with ``name`` and
``arguments`` (verl-formats.md §2.3); everything else is dropped, which is what the severities encode.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from trajlab.toolcalls.draft import CallDraft, Edit, Issue, Ranges, snip
from trajlab.toolcalls.formats.base import ToolFormat
from trajlab.toolcalls.jsonbody import fill_json_call
from trajlab.toolcalls.ruleset import RuleSet
from trajlab.toolcalls.schema import ToolIndex
from trajlab.toolcalls.verl_call import VerlCall

#: the frame lexer (shared with :mod:`.fastpath`)
FRAME_RE = re.compile(r"<(/?)([ \t]*)tool_call([^<>\n]{0,64})(>?)")
_XML_IN = re.compile(r"<(?:function|parameter)=")
#: verl 0.9.1's block regex (:meth:`HermesFormat.verl_read`)
_VERL_BLOCK = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)


@dataclass(slots=True)
class _Frame:
    close: bool
    start: int
    end: int
    variant: str | None
    attr: str = ""


def _lex(text: str, lo: int, hi: int, excluded: list[tuple[int, int]]) -> list[_Frame]:
    out: list[_Frame] = []
    excl = Ranges(excluded) if excluded else None
    for m in FRAME_RE.finditer(text, lo, hi):
        s, e = m.span()
        if excl and excl.covering(s) >= 0:
            continue
        slash, ws, tail, gt = m.groups()
        f = _Frame(bool(slash), s, e, None)
        if tail:
            if tail[0] not in " \t" or not gt:
                continue
            f.variant, f.attr = "stray_attr", tail
        elif not gt:
            if e >= hi:
                if not slash:
                    continue
                f.variant = "partial"
            else:
                f.variant = "missing_gt"
        if ws and f.variant is None:
            f.variant = "space"
        out.append(f)
    return out


_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\]]')


def literal_frames(text: str, frames: list[_Frame], hi: int) -> tuple[list[_Frame], list[_Frame]]:
    """Split the frames into the call structure and tag text inside the JSON strings of a call.

    A ``<tool_call>`` or ``</tool_call>`` written inside a JSON string (an agent writing a file that mentions
    the markup) is text when the call's object that holds the string is complete and valid JSON. Only looked at when a turn has more than two frames."""
    if len(frames) < 3:
        return frames, []
    out: list[_Frame] = []
    lit: list[_Frame] = []
    i, n = 0, len(frames)
    while i < n:
        f = frames[i]
        out.append(f)
        i += 1
        if f.close:
            continue
        p = f.end
        while p < hi and text[p] in " \t\r\n":
            p += 1
        if not text.startswith("{", p):
            continue
        strings: list[tuple[int, int]] = []
        depth, end = 0, -1
        for m in _JSON_TOKEN.finditer(text, p, hi):
            c = m.group()
            if c[0] == '"':
                strings.append(m.span())
            elif c in "{[":
                depth += 1
            else:
                depth -= 1
                if depth == 0:
                    end = m.end()
                    break
        if end < 0:
            continue
        try:  # only a valid object says for sure which text lies inside its strings
            json.loads(text[p:end])
        except (ValueError, RecursionError):
            continue
        while i < n and frames[i].start < end:
            g = frames[i]
            if any(a < g.start < b for a, b in strings):
                lit.append(g)
            else:
                out.append(g)
            i += 1
    return out, lit


class _Scanner:
    def __init__(self, text: str, lo: int, hi: int, rs: RuleSet, frames: list[_Frame],
                 excluded: list[tuple[int, int]], spans: bool = True, fast: bool = True) -> None:
        self.text, self.lo, self.hi, self.rs, self.frames, self.excluded = text, lo, hi, rs, frames, excluded
        self.spans, self.fast = spans, fast  # (for the qwen3_coder scanner of XML written in a hermes block)
        self.calls: list[CallDraft] = []
        self.turn_issues: list[Issue] = []

    def _frame_issue(self, d: CallDraft, f: _Frame) -> None:
        raw = self.text[f.start:f.end]
        canon = "</tool_call>" if f.close else "<tool_call>"
        if f.variant == "stray_attr":
            d.add("stray_attribute", "close_tool_call" if f.close else "open_tool_call", f.start, f.end, tag=raw,
                  attribute=f.attr.strip(), canonical=canon,
                  edits=[Edit(f.start, f.end, canon, f"removed `{f.attr.strip()}` from `{raw}`")])
        elif f.variant in ("missing_gt", "space"):
            d.add("malformed_tag", "close_missing_gt" if f.variant == "missing_gt" else "space_in_tag",
                  f.start, f.end, tag=raw, format="hermes", canonical_hint=f"it should read `{canon}`",
                  edits=[Edit(f.start, f.end, canon, f"replaced `{raw}` by `{canon}`")])
        elif f.variant == "partial":
            d.add("missing_call_close", "at_end", f.start, f.end, tag=raw,
                  edits=[Edit(f.end, f.end, ">", "completed `</tool_call>`")])

    def _block(self, op: _Frame, close: _Frame | None, end: int, follower: str, doubled: list[_Frame]) -> None:
        text = self.text
        bs = op.end
        be = close.start if close is not None else end
        body = text[bs:be]
        call_end = close.end if close is not None else be
        if close is None:
            call_end = bs + len(body.rstrip())
        if close is not None and text[call_end:call_end + 1] == ">" and call_end < self.hi:
            stray_gt = call_end
            call_end += 1
        else:
            stray_gt = -1
        if _XML_IN.search(body) and not body.lstrip().startswith("{"):
            from trajlab.toolcalls.formats.qwen3_coder import Qwen3CoderFormat

            sub, _ = Qwen3CoderFormat().find_calls(text, op.start, call_end, self.rs, self.excluded, self.spans,
                                                   self.fast)
            for d in sub:
                d.add("format_mismatch", "xml_in_json", d.start, d.end, found="an XML (qwen3_coder) call",
                      expected="hermes")
                d.rerender = True
                self.calls.append(d)
            return
        d = CallDraft("hermes", op.start, call_end)
        for f in doubled:
            d.start = min(d.start, f.start)
            d.add("malformed_tag", "doubled_opener", f.start, f.end, tag=text[f.start:f.end], format="hermes",
                  canonical_hint="a call opens with a single `<tool_call>`",
                  edits=[Edit(f.start, op.start, "", "removed the repeated opener")])
            d.span("text", f.start, op.start)
        self._frame_issue(d, op)
        d.span("structural", op.start, op.end)
        stripped = body.strip()
        at_end = close is None and follower == "end"
        lead = bs + len(body) - len(body.lstrip())
        if not stripped:
            if close is None:
                d.add("truncated_call", "inside_json", d.start, be, where="right after `<tool_call>`",
                      blocker="the output ends right after `<tool_call>`")
            else:
                d.add("empty_call", "empty", d.start, call_end, blocker="the block is empty: there is nothing to repair")
            d.span("structural", bs, be)
        else:
            matched_foreign = False
            if not stripped.startswith("{") and "{" not in stripped[:12]:
                for fam, pat in self.rs.body_patterns:
                    m = pat.match(stripped)
                    if m:
                        d.fmt, d.family, d.name = "foreign", fam, m.group(1)
                        d.name_start, d.name_end = lead + m.start(1), lead + m.end(1)
                        d.add("foreign_format", "body", lead, bs + len(body.rstrip()), family=fam, expected="hermes",
                              blocker=f"the arguments of a {fam} call cannot be mapped reliably")
                        d.span("structural", bs, d.name_start)
                        d.span("function_name", d.name_start, d.name_end)
                        d.span("text", d.name_end, be)
                        matched_foreign = True
                        break
            if not matched_foreign:
                if "{" not in stripped:
                    # no JSON begun: text (prose after a `<tool_call>` token, a quoted tag), not a cut-off call,
                    # even where the output ends inside the block
                    d.add("empty_call", "no_function", lead, bs + len(body.rstrip()), text=snip(stripped, 40),
                          blocker="the block holds no JSON object")
                    d.span("text", bs, be)
                else:
                    fill_json_call(d, text, bs, be, self.rs, at_end=at_end, spans=self.spans)
        if close is not None:
            self._frame_issue(d, close)
            d.span("structural", close.start, close.end)
            if stray_gt >= 0:
                d.add("malformed_tag", "stray_gt", stray_gt, stray_gt + 1, tag=text[close.start:stray_gt + 1],
                      format="hermes", canonical_hint="the closing tag is `</tool_call>`",
                      edits=[Edit(stray_gt, stray_gt + 1, "", "removed the stray `>`")])
                d.span("text", stray_gt, stray_gt + 1)
        else:
            variant = "at_end" if follower == "end" else "before_next_call"
            d.add("missing_call_close", variant, op.start, op.end, tag=text[op.start:op.end],
                  edits=[Edit(call_end, call_end, "\n</tool_call>", "added `</tool_call>`")])
            d.rerender = True
        d.spans.sort(key=lambda x: x[1])
        self.calls.append(d)

    def run(self) -> tuple[list[CallDraft], list[Issue]]:
        text = self.text
        op: _Frame | None = None
        doubled: list[_Frame] = []
        frames, lit = literal_frames(text, self.frames, self.hi)
        for f in frames:
            if op is None:
                if not f.close:
                    op, doubled = f, []
                else:
                    raw = text[f.start:f.end]
                    self.turn_issues.append(Issue("malformed_tag", "orphan_close", f.start, f.end,
                                                  {"tag": raw, "format": "hermes",
                                                   "canonical_hint": "no call is open here"}))
                continue
            if not f.close:
                if set(text[op.end:f.start].strip()) <= {">"}:
                    doubled.append(op)
                    op = f
                    continue
                self._block(op, None, f.start, "next_call", doubled)
                op, doubled = f, []
                continue
            self._block(op, f, f.end, "close", doubled)
            op, doubled = None, []
        if op is not None:
            self._block(op, None, self.hi, "end", doubled)
        self.calls.sort(key=lambda d: d.start)
        for g in lit:
            for d in self.calls:
                if d.start <= g.start < d.end:
                    if d.literals is None:
                        d.literals = []
                    d.literals.append((g.start, g.end))
                    break
        return self.calls, self.turn_issues


class HermesFormat(ToolFormat):
    """``<tool_call>\\n{"name": NAME, "arguments": {...}}\\n</tool_call>``."""

    name = "hermes"
    models = "Qwen2.5, Qwen3, Qwen3-Next"
    verl_parser = "hermes"

    def find_calls(self, text: str, lo: int, hi: int, rs: RuleSet, excluded: list[tuple[int, int]],
                   spans: bool = True, fast: bool = True) -> tuple[list[CallDraft], list[Issue]]:
        frames = _lex(text, lo, hi, excluded)
        if not frames:
            return [], []
        return _Scanner(text, lo, hi, rs, frames, excluded, spans, fast).run()

    def render(self, name: str, arguments: Any) -> str:
        args = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
        return '<tool_call>\n{"name": ' + json.dumps(name, ensure_ascii=False) + ', "arguments": ' + args + "}\n</tool_call>"

    def render_raw(self, name: str, params: list[tuple[str, str]]) -> str:
        return self.render(name, dict(params))

    def verl_read(self, text: str, index: ToolIndex | None) -> list[VerlCall] | None:
        """verl's ``HermesToolParser``: nothing unless the text holds both ``<tool_call>`` and ``</tool_call>``;
        blocks ``<tool_call>(.*?)</tool_call>``; each is ``json.loads``-ed and must give ``obj["name"]`` and
        ``obj["arguments"]``; a block that fails is dropped (logged only). Arguments are passed through
        unconverted."""
        out: list[VerlCall] = []
        if "<tool_call>" not in text or "</tool_call>" not in text:
            return out
        for bm in _VERL_BLOCK.finditer(text):
            try:
                obj = json.loads(bm.group(1))
                name, args = obj["name"], obj["arguments"]
                if not isinstance(name, str):  # FunctionCall(name: str) rejects it: the block is dropped
                    continue
                # verl re-dumps the arguments; json.loads of that text is what the tool receives
                args = json.loads(json.dumps(args, ensure_ascii=False))
            except Exception:  # verl logs "Failed to decode tool call" and drops the block
                continue
            out.append(VerlCall(name, args, bm.start(), bm.end()))
        return out


FORMATS_PROVIDED: tuple[ToolFormat, ...] = (HermesFormat(),)
