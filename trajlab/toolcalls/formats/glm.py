"""The GLM-4.5/4.6 and GLM-4.7 call formats (Zhipu / Z.ai): ``<tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value></tool_call>``.

Two layouts of one grammar (call-formats.md §2.1): ``glm45`` (GLM-4.5 / 4.6) puts a newline after the name and
after every closing key/value tag; ``glm47`` (GLM-4.7, GLM-5.x) writes no newline anywhere inside the call. Values
are raw text; the chat template renders strings as they are and every other value with ``tojson``.

The tags are ordinary text in the GLM tokenizer, so a verl dump keeps every call intact. verl's ``glm`` parser
needs both ``<tool_call>`` and ``</tool_call>``, takes the name as the text before the first ``<arg_key>``
(stripped), pairs keys and values with ``<arg_key>(.*?)</arg_key>\\s*<arg_value>(.*?)</arg_value>`` and converts a
value with ``json.loads`` of the stripped text, else keeps the string -- without the schema.
:func:`glm_convert` is that conversion. A declared string means the text as written (:meth:`GlmFormat.intended`);
where verl decodes it to another type, strips its quotes or strips white space at its ends, the call is still
well-formed and ``verl_conversion_divergence`` (info) says what verl passes (:meth:`GlmFormat.check_value`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from trajlab.toolcalls.draft import CallDraft, Edit, Issue, ParamDraft, Ranges, snip
from trajlab.toolcalls.formats.base import ToolFormat
from trajlab.toolcalls.jsonbody import fill_json_call
from trajlab.toolcalls.ruleset import RuleSet
from trajlab.toolcalls.type_checks import TypeCheck

#: a GLM tag: closing slash, tag name, what follows the name before `>` (attributes, a misspelt tail), the `>`
TAG_RE = re.compile(r"<(/?)(tool_call|arg_key|arg_value)([^<>\n]{0,48}?)(>|(?=[<\n])|\Z)")
_CLOSE_TAIL = re.compile(r"\d{1,3}|/|_?end|_?close")
_XML_IN = re.compile(r"<(?:function|parameter)=")


@dataclass(slots=True)
class _Tag:
    close: bool
    kind: str
    start: int
    end: int
    variant: str | None = None  # None | stray_attr | close_variant | missing_gt
    tail: str = ""

    @property
    def canon(self) -> str:
        return f"</{self.kind}>" if self.close else f"<{self.kind}>"


def _lex(text: str, lo: int, hi: int, excluded: list[tuple[int, int]]) -> list[_Tag]:
    out: list[_Tag] = []
    excl = Ranges(excluded) if excluded else None
    for m in TAG_RE.finditer(text, lo, hi):
        s, e = m.span()
        if excl and excl.covering(s) >= 0:
            continue
        slash, kind, tail, gt = m.groups()
        t = _Tag(bool(slash), kind, s, e)
        if tail:
            if tail[0] in " \t" and gt == ">":
                t.variant, t.tail = "stray_attr", tail.strip()
            elif gt == ">" and _CLOSE_TAIL.fullmatch(tail):
                t.variant, t.tail = "close_variant", tail
            else:
                continue  # another tag (`<tool_calls>`, `<arg_keys>`): not ours
        elif gt != ">":
            if e >= hi:
                continue  # the output ends inside the tag: the call is truncated
            t.variant = "missing_gt"
        out.append(t)
    return out


def layout_ws(ws: str) -> str:
    """White space next to a call's name in words (``"\n    "`` → "a newline and 4 spaces"; "" → "nothing")."""
    if not ws:
        return "nothing"
    names = {"\n": ("a newline", "newlines"), " ": ("a space", "spaces"), "\t": ("a tab", "tabs"),
             "\r": ("a carriage return", "carriage returns")}
    parts = []
    for ch, (one, many) in names.items():
        n = ws.count(ch)
        if n:
            parts.append(one if n == 1 else f"{n} {many}")
    other = len(ws) - sum(ws.count(ch) for ch in names)
    if other:
        parts.append(f"`{snip(ws, 12)}`" if not parts else f"{other} other characters")
    return " and ".join([", ".join(parts[:-1]), parts[-1]] if len(parts) > 1 else parts)


_VERL_PAIR = re.compile(r"<arg_key>(.*?)</arg_key>\s*<arg_value>(.*?)</arg_value>", re.DOTALL)
#: issues whose message says how verl's lazy pair regex reads the call (``verl_run``)
_PAIRING = ("glm_key_without_value", "glm_value_without_key")


def verl_glm_arguments(body: str) -> dict[str, Any]:
    """The arguments verl 0.9.1's ``glm`` parser reads from a call's ``body`` (the text between ``<tool_call>``
    and ``</tool_call>``): its lazy key/value pair regex over the text from the first ``<arg_key>``, keys
    stripped, values through :func:`glm_convert`. A stray tag runs a key or value on to the next pair."""
    first = body.find("<arg_key>")
    if first < 0:
        return {}
    return {k.strip(): glm_convert(v) for k, v in _VERL_PAIR.findall(body, first)}


def glm_convert(raw: str) -> Any:
    """verl's ``glm`` value conversion: ``json.loads`` of the stripped value, else the stripped string."""
    v = raw.strip()
    try:
        return json.loads(v)
    except (ValueError, RecursionError):
        return v


def _render_value(v: Any) -> str:
    return v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)


class _Scanner:
    def __init__(self, fmt: GlmFormat, text: str, lo: int, hi: int, rs: RuleSet, tags: list[_Tag],
                 excluded: list[tuple[int, int]], spans: bool, fast: bool) -> None:
        self.fmt, self.text, self.lo, self.hi, self.rs, self.tags = fmt, text, lo, hi, rs, tags
        self.excluded, self.want_spans, self.fast = excluded, spans, fast
        self.calls: list[CallDraft] = []
        self.turn_issues: list[Issue] = []

    # -- tags -----------------------------------------------------------------------------------------------

    def _tag_issue(self, d: CallDraft, t: _Tag) -> None:
        raw = self.text[t.start:t.end]
        if t.variant == "stray_attr":
            d.add("stray_attribute", "glm_tag", t.start, t.end, tag=raw, attribute=t.tail, canonical=t.canon,
                  edits=[Edit(t.start, t.end, t.canon, f"removed `{t.tail}` from `{raw}`")])
        elif t.variant == "close_variant":
            d.add("malformed_tag", "close_variant", t.start, t.end, tag=raw, format=self.fmt.name,
                  canonical_hint=f"it should read `{t.canon}`",
                  edits=[Edit(t.start, t.end, t.canon, f"replaced `{raw}` by `{t.canon}`")])
        elif t.variant == "missing_gt":
            d.add("malformed_tag", "glm_missing_gt", t.start, t.end, tag=raw, format=self.fmt.name,
                  canonical_hint=f"it should read `{t.canon}`",
                  edits=[Edit(t.start, t.end, t.canon, f"completed `{t.canon}`")])
        d.span("structural", t.start, t.end)

    # -- one call -------------------------------------------------------------------------------------------

    def _call(self, i: int) -> int:
        """Read the call opened by ``tags[i]``; returns the index of the first tag after it."""
        text, tags, sep = self.text, self.tags, self.fmt.sep
        op = tags[i]
        d = CallDraft(self.fmt.name, op.start, op.end)
        self._tag_issue(d, op)
        j = i + 1
        # the name: text up to the first tag
        name_end = tags[j].start if j < len(tags) else self.hi
        region = text[op.end:name_end]
        stripped = region.strip()
        if stripped.startswith("{") or _XML_IN.search(region):
            return self._other_format(d, i, j, op)
        if j < len(tags) and not tags[j].close and tags[j].kind == "tool_call" and j + 1 < len(tags) \
                and tags[j + 1].close and tags[j + 1].kind == "arg_key":
            # GLM-5.3: `<tool_call>` written where `<arg_key>` belongs (`NAME<tool_call>KEY</arg_key>...`)
            t = tags[j]
            d.add("malformed_tag", "glm_call_open_as_key", t.start, t.end, tag="<tool_call>", format=self.fmt.name,
                  canonical_hint="an argument opens with `<arg_key>`",
                  edits=[Edit(t.start, t.end, "<arg_key>", "replaced the inner `<tool_call>` by `<arg_key>`")])
            t.kind, t.variant = "arg_key", "handled"
        if stripped:
            ns = op.end + region.find(stripped)
            d.name, d.name_start, d.name_end = stripped, ns, ns + len(stripped)
            lead, trail = region[:ns - op.end], region[ns - op.end + len(stripped):]
            has_args = j < len(tags) and tags[j].kind == "arg_key"
            want_trail = sep if has_args or (j < len(tags) and tags[j].kind == "tool_call" and tags[j].close) else None
            if lead or (want_trail is not None and trail != want_trail):
                if want_trail is None:
                    want_trail = trail
                new = d.name + want_trail
                wants = "a newline" if want_trail == "\n" else ("nothing" if not want_trail else "`"
                                                                          + snip(want_trail, 10) + "`")
                off = [f"{layout_ws(lead)} before the name"] if lead else []
                if trail != want_trail:
                    off.append(f"{layout_ws(trail)} after the name, where the template writes {wants}")
                d.add("malformed_tag", "glm_layout", op.end, name_end, tag=snip(region, 30), format=self.fmt.name,
                      canonical_hint="; ".join(off),
                      edits=[Edit(op.end, name_end, new, "laid the name out as the template does")])
            d.span("structural", op.end, ns)
            d.span("function_name", ns, ns + len(stripped))
            d.span("structural", ns + len(stripped), name_end)
        else:
            d.span("structural", op.end, name_end)
        # the arguments
        closed = False
        body_end = self.hi  # where the call's body ends (its `</tool_call>`, however written, when closed)
        pos = name_end
        while j < len(tags):
            t = tags[j]
            if t.kind == "tool_call":
                if t.close:
                    self._junk(d, pos, t.start, "between_args")
                    self._tag_issue(d, t)
                    d.end = t.end
                    closed = True
                    body_end = t.start
                    j += 1
                else:  # the next call opens before this one closed
                    self._junk(d, pos, t.start, "between_args")
                    end = d.start + len(text[d.start:t.start].rstrip())
                    d.end = end
                    d.add("missing_call_close", "before_next_call", op.start, op.end, tag="<tool_call>",
                          edits=[Edit(end, end, sep + "</tool_call>", "added `</tool_call>`")])
                break
            if t.kind == "arg_key" and not t.close:
                self._junk(d, pos, t.start, "between_args")
                j, pos, ok = self._arg(d, j)
                if not ok:
                    break
                continue
            # a stray closer or a value without its key
            raw = text[t.start:t.end]
            d.add("malformed_tag", "orphan_close" if t.close else "glm_value_without_key", t.start, t.end, tag=raw,
                  format=self.fmt.name, canonical_hint="an argument reads `<arg_key>K</arg_key><arg_value>V</arg_value>`",
                  blocker=None if t.close else "which key the value belongs to is a guess",
                  edits=[Edit(t.start, t.end, "", f"removed `{raw}`")] if t.close else [])
            d.span("text", t.start, t.end)
            pos = t.end
            j += 1
        else:
            pass
        if d.name is None and not d.params and closed:
            d.add("empty_call", "empty", d.start, d.end, blocker="the block is empty: there is nothing to repair")
        elif not closed and not any(i.category in ("missing_call_close", "truncated_call") for i in d.issues):
            # the segment ends inside the call
            tail_end = self.hi
            body_end = d.start + len(text[d.start:tail_end].rstrip())
            if j >= len(tags) and pos < tail_end and text[pos:tail_end].strip():
                self._junk(d, pos, tail_end, "between_args")
            d.end = max(body_end, d.end)
            d.add("missing_call_close", "at_end", op.start, op.end, tag="<tool_call>",
                  edits=[Edit(d.end, d.end, sep + "</tool_call>", "added `</tool_call>`")])
        pairing = [iss for iss in d.issues if iss.variant in _PAIRING]
        if pairing:
            if closed:
                read = json.dumps(verl_glm_arguments(text[op.end:body_end]), ensure_ascii=False)
                run = f"runs the call with the arguments `{snip(read, 120)}`"
            else:
                run = "drops the call (it needs `</tool_call>`)"
            for iss in pairing:
                iss.params["verl_run"] = run
        d.spans.sort(key=lambda x: x[1])
        self.calls.append(d)
        return j

    def _junk(self, d: CallDraft, s: int, e: int, variant: str) -> None:
        seg = self.text[s:e]
        core = seg.strip()
        if not core:
            d.span("structural", s, e)
            return
        cs = s + seg.find(core)
        d.span("structural", s, cs)
        d.span("text", cs, cs + len(core))
        d.span("structural", cs + len(core), e)
        if variant == "between_key_value":
            d.add("junk_in_call", "glm_between_key_value", cs, cs + len(core), text=snip(core, 40),
                  edits=[Edit(cs, cs + len(core), "", "removed the text between `</arg_key>` and `<arg_value>`")])
        else:
            d.add("junk_in_call", "between_tags", cs, cs + len(core), text=snip(core, 40),
                  edits=[Edit(cs, cs + len(core), "", "removed the text between the arguments")])

    def _arg(self, d: CallDraft, j: int) -> tuple[int, int, bool]:
        """One ``<arg_key>K</arg_key><arg_value>V</arg_value>`` from ``tags[j]`` (an ``<arg_key>``); returns the next
        tag index, the position after the argument, and whether the call goes on."""
        text, tags, sep, n = self.text, self.tags, self.fmt.sep, len(self.tags)
        ko = tags[j]
        if ko.variant != "handled":
            self._tag_issue(d, ko)
        else:
            d.span("structural", ko.start, ko.end)
        j += 1
        nxt = tags[j] if j < n else None
        key_end = nxt.start if nxt is not None else self.hi
        key_raw = text[ko.end:key_end]
        key = key_raw.strip()
        ks = ko.end + (key_raw.find(key) if key else 0)
        if nxt is None:
            d.add("truncated_call", "inside_glm_key", ko.start, self.hi, where="inside an argument key",
                  blocker="the output ends inside the call, the rest cannot be recovered")
            d.span("param_name", ko.end, self.hi)
            d.end = self.hi
            return j, self.hi, False
        if nxt.close and nxt.kind == "arg_key":
            self._tag_issue(d, nxt)
            after_key = nxt.end
            j += 1
        elif nxt.kind == "arg_value" and not nxt.close:
            ins = ks + len(key)
            d.add("unclosed_tag", "glm_arg_key", ko.start, ko.end, tag="<arg_key>", closer="</arg_key>",
                  edits=[Edit(ins, ins, "</arg_key>", "closed `<arg_key>`")])
            after_key = key_end
        else:
            d.add("malformed_tag", "glm_key_without_value", ko.start, key_end, tag=snip(text[ko.start:key_end], 30),
                  format=self.fmt.name, canonical_hint="every `<arg_key>` is followed by its `<arg_value>`",
                  blocker=f"the value of `{key}` is missing")
            d.span("param_name", ks, ks + len(key))
            return j, key_end, True
        d.span("param_name", ks, ks + len(key))
        # between the key and its value
        vo = tags[j] if j < n else None
        if vo is None or vo.close or vo.kind != "arg_value":
            end = vo.start if vo is not None else self.hi
            if vo is None and not text[after_key:end].strip():
                d.add("truncated_call", "inside_glm_key", ko.start, self.hi, where="after an argument key",
                      blocker="the output ends inside the call, the rest cannot be recovered")
                d.end = self.hi
                return j, self.hi, False
            d.add("malformed_tag", "glm_key_without_value", ko.start, after_key, tag=snip(text[ko.start:after_key], 30),
                  format=self.fmt.name, canonical_hint="every `<arg_key>` is followed by its `<arg_value>`",
                  blocker=f"the value of `{key}` is missing")
            return j, after_key, True
        self._junk(d, after_key, vo.start, "between_key_value")
        self._tag_issue(d, vo)
        j += 1
        vc = tags[j] if j < n else None
        val_end = vc.start if vc is not None else self.hi
        if vc is None:
            d.add("truncated_call", "inside_glm_value", vo.start, self.hi, where="inside an argument value",
                  blocker="the output ends inside the call, the rest cannot be recovered")
            d.span("param_value", vo.end, self.hi)
            d.params.append(ParamDraft(key, ks, ks + len(key), None, glm_convert(text[vo.end:self.hi]), vo.end,
                                       self.hi, text[vo.end:self.hi]))
            d.end = self.hi
            return j, self.hi, False
        raw_val = text[vo.end:val_end]
        if vc.close and vc.kind == "arg_value":
            self._tag_issue(d, vc)
            after = vc.end
            j += 1
        else:
            raw_val = raw_val.rstrip()
            val_end = vo.end + len(raw_val)
            where = "glm_arg_value" if vc.kind == "arg_key" else "glm_arg_value_at_close"
            d.add("unclosed_tag", where, vo.start, vo.end, tag="<arg_value>", closer="</arg_value>",
                  edits=[Edit(val_end, val_end, "</arg_value>", "closed `<arg_value>`")])
            after = val_end
        d.span("param_value", vo.end, val_end)
        d.params.append(ParamDraft(key, ks, ks + len(key), None, glm_convert(raw_val), vo.end, val_end, raw_val))
        del sep
        return j, after, True

    def _other_format(self, d: CallDraft, i: int, j: int, op: _Tag) -> int:
        """A ``<tool_call>`` whose body is hermes JSON or qwen3_coder XML: ``format_mismatch``, re-rendered."""
        text, tags = self.text, self.tags
        k = j
        while k < len(tags) and not (tags[k].kind == "tool_call"):
            k += 1
        close = tags[k] if k < len(tags) and tags[k].close else None
        be = close.start if close is not None else (tags[k].start if k < len(tags) else self.hi)
        end = close.end if close is not None else be
        body = text[op.end:be]
        if _XML_IN.search(body):
            from trajlab.toolcalls.formats.qwen3_coder import Qwen3CoderFormat

            sub, _ = Qwen3CoderFormat().find_calls(text, op.start, end, self.rs, self.excluded, self.want_spans,
                                                   self.fast)
            for s in sub:
                s.add("format_mismatch", "xml_in_glm", s.start, s.end, found="an XML (qwen3_coder) call",
                      expected=self.fmt.name)
                s.rerender = True
                self.calls.append(s)
            return k + 1 if close is not None else k
        d.fmt = "hermes"
        d.end = end
        d.span("structural", op.start, op.end)
        fill_json_call(d, text, op.end, be, self.rs, at_end=close is None and k >= len(tags), spans=self.want_spans)
        if close is not None:
            d.span("structural", close.start, close.end)
        d.add("format_mismatch", "json_in_glm", op.start, end, found="a JSON (hermes) call", expected=self.fmt.name)
        d.rerender = True
        d.spans.sort(key=lambda x: x[1])
        self.calls.append(d)
        return k + 1 if close is not None else k

    def run(self) -> tuple[list[CallDraft], list[Issue]]:
        i = 0
        tags = self.tags
        while i < len(tags):
            t = tags[i]
            if t.kind == "tool_call" and not t.close:
                i = self._call(i)
                continue
            raw = self.text[t.start:t.end]
            self.turn_issues.append(Issue("malformed_tag", "orphan_close", t.start, t.end,
                                          {"tag": raw, "format": self.fmt.name,
                                           "canonical_hint": "no call is open here"}))
            i += 1
        self.calls.sort(key=lambda d: d.start)
        return self.calls, self.turn_issues


class GlmFormat(ToolFormat):
    """GLM ``<tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value></tool_call>``; ``sep`` is the layout's
    separator (``"\\n"`` for glm45, ``""`` for glm47)."""

    models = "GLM"

    def __init__(self, name: str, sep: str, models: str) -> None:
        self.name, self.sep, self.models = name, sep, models

    def find_calls(self, text: str, lo: int, hi: int, rs: RuleSet, excluded: list[tuple[int, int]],
                   spans: bool = True, fast: bool = True) -> tuple[list[CallDraft], list[Issue]]:
        if text.find("tool_call", lo, hi) < 0 and text.find("arg_", lo, hi) < 0:
            return [], []
        tags = _lex(text, lo, hi, excluded)
        if not tags:
            return [], []
        return _Scanner(self, text, lo, hi, rs, tags, excluded, spans, fast).run()

    def render(self, name: str, arguments: dict[str, Any]) -> str:
        s = self.sep
        body = "".join(f"<arg_key>{k}</arg_key>{s}<arg_value>{_render_value(v)}</arg_value>{s}"
                       for k, v in arguments.items())
        return f"<tool_call>{name}{s}{body}</tool_call>"

    def render_raw(self, name: str, params: list[tuple[str, str]]) -> str:
        s = self.sep
        body = "".join(f"<arg_key>{k}</arg_key>{s}<arg_value>{v}</arg_value>{s}" for k, v in params)
        return f"<tool_call>{name}{s}{body}</tool_call>"

    def check_value(self, written: str, value: Any, prop: Any) -> Any:
        """A string parameter whose text verl's ``json.loads`` turns into another type, or whose white space at
        either end verl strips: a divergence (the template writes strings raw, so ``123`` or an indented code
        block for a string is well-formed); everything else: the shared JSON check."""
        if not _declares_string(prop):
            return None
        if isinstance(value, str) and written.strip().startswith('"'):
            return TypeCheck(True, "glm_string_quoted", "string", value, divergence=True)
        if not isinstance(value, str):
            if prop.get("enum") and written.strip() not in prop["enum"] or value is None and _allows_null(prop):
                return None  # (a nullable string's `null` is null: the template's tojson of None)
            return TypeCheck(True, "glm_string_decoded", "string", value, divergence=True)
        if written != value:
            return TypeCheck(True, "glm_string_stripped", "string", value, divergence=True)
        return None

    def intended(self, written: str, value: Any, prop: Any) -> Any:
        """A declared string is the text as written (the template renders strings raw: vLLM's and SGLang's glm
        parsers keep it so); any other type is verl's ``json.loads`` of the stripped text."""
        if not _declares_string(prop) or prop.get("enum") and written not in prop["enum"]:
            return value
        return None if value is None and _allows_null(prop) else written


def _types(prop: Any) -> list[Any]:
    t = prop.get("type") if isinstance(prop, dict) else None
    return [t] if isinstance(t, str) else (t if isinstance(t, list) else [])


def _declares_string(prop: Any) -> bool:
    """Whether ``prop`` declares a string (alone or in a type list) -- the values GLM's template writes raw."""
    return "string" in _types(prop)


def _allows_null(prop: Any) -> bool:
    return "null" in _types(prop) or isinstance(prop, dict) and prop.get("nullable") is True


FORMATS_PROVIDED: tuple[ToolFormat, ...] = (
    GlmFormat("glm45", "\n", "GLM-4.5, GLM-4.6"),
    GlmFormat("glm47", "", "GLM-4.7, GLM-5.x"),
)
