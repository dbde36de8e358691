"""The Gemma 4 call format (Google, verl parser ``gemma4``): ``<|tool_call>call:NAME{k:<|"|>v<|"|>,n:3}<tool_call|>``.

Grammar (the llama.cpp copy of the ``gemma4`` chat template): the arguments are the template's own value syntax,
keys bare and sorted, strings between ``<|"|>`` delimiters, booleans / numbers / ``null`` bare, objects ``{k:v}``
and arrays ``[v,...]`` nested. ``<tool_call|>`` is a stop token (verl's parser asks for it), so a generation ends
there and the tool's answer follows as ``<|tool_response>response:NAME{...}<tool_response|>``.

This reader parses the value syntax exactly (:class:`_Values`) and names what breaks it: a string written
without the delimiters (``gemma_undelimited_string``; verl reads it up to the next ``,`` or ``}``), a JSON
string ``"..."`` (``gemma_json_string``; verl passes the quotes), an unterminated ``<|"|>``, a missing ``}``, a
head without ``call:``, a half-written or look-alike marker, a doubled opener.

``<|tool_call>``, ``<tool_call|>`` and ``<|"|>`` are special tokens of the Gemma 4 tokenizer: a
``skip_special_tokens=True`` dump shows ``call:NAME{k:v,n:3}``, strings without their delimiters. That stripped
form is read too (a turn with no Gemma marker at all: :data:`KEPT_MARKERS`), with
the string rule relaxed: a bare value is a string
there, and only its boundaries (a ``,`` or ``}`` inside it) are uncertain.
"""

from __future__ import annotations

import json
import re
from typing import Any

from trajlab.toolcalls.draft import MISSING, CallDraft, Edit, Issue, ParamDraft, Ranges
from trajlab.toolcalls.formats.base import ToolFormat
from trajlab.toolcalls.ruleset import RuleSet
from trajlab.toolcalls.schema import ToolIndex
from trajlab.toolcalls.verl_call import VerlCall, markers_kept, received

OPEN, CLOSE, QUOTE = "<|tool_call>", "<tool_call|>", '<|"|>'
#: the special-token markers a turn decoded with them kept shows (Gemma generates its `<tool_call|>` stop token
#: after a call): a turn with none is a ``skip_special_tokens=True`` decode
KEPT_MARKERS = ("<|tool_call>", "<tool_call|>", '<|"|>', "<|channel>", "<channel|>", "<turn|>", "<|turn>")
_VERL_CALL = re.compile(r"<\|tool_call>call:(\w+)\{(.*?)\}<tool_call\|>", re.DOTALL)
_VERL_ARG = re.compile(r'(\w+):(?:<\|"\|>(.*?)<\|"\|>|([^,}]*))')
#: an opener as written, canonical or half-written / look-alike (`<|tool_call|>`, `<|tool_call`, `<tool_call>`)
_OPEN_RE = re.compile(r"<\|tool_call\|?>|<\|tool_call(?![>|])|<tool_call>(?=call:)")
_HEAD_RE = re.compile(r"[ \t]*(call:)?([^\s{}<>:,]{0,128})[ \t]*(?=\{)")
_STRIPPED_RE = re.compile(r"(?<![\w:])call:([\w.\-]{1,128})(?=\{)")
_NUM = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?")
_KEY = re.compile(r"[ \t\n]*([\w.\-]+|<\|\"\|>[^<]{0,128}<\|\"\|>)[ \t]*:")
_CLOSE_VARIANTS = ("<tool_call|>", "<|tool_call|>", "</tool_call>")


class _Bad(Exception):
    def __init__(self, pos: int, what: str) -> None:
        super().__init__(what)
        self.pos, self.what = pos, what


class _Values:
    """A recursive reader of the template's value syntax over ``text[.. hi]``; records encoding issues."""

    def __init__(self, text: str, hi: int, stripped: bool) -> None:
        self.text, self.hi, self.stripped = text, hi, stripped
        self.found: list[tuple[str, int, int, str]] = []  # (variant, start, end, the value as written)

    def ws(self, i: int) -> int:
        t = self.text
        while i < self.hi and t[i] in " \t\n\r":
            i += 1
        return i

    def obj(self, i: int, top: list[tuple[str, int, int, Any, int, int]] | None = None) -> tuple[dict[str, Any], int]:
        """Read ``{...}`` at ``i``; returns the object and the position after ``}``. ``top`` collects the
        top-level entries (key, key start, key end, value, value start, value end)."""
        t = self.text
        out: dict[str, Any] = {}
        i += 1
        j = self.ws(i)
        if j < self.hi and t[j] == "}":
            return out, j + 1
        while True:
            m = _KEY.match(t, i, self.hi)
            if m is None:
                raise _Bad(self.ws(i), "a key")
            key = m.group(1)
            ks, ke = m.span(1)
            if key.startswith(QUOTE):
                key, ks, ke = key[len(QUOTE):-len(QUOTE)], ks + len(QUOTE), ke - len(QUOTE)
            vs = self.ws(m.end())
            val, ve = self.value(vs)
            out[key] = val
            if top is not None:
                top.append((key, ks, ke, val, vs, ve))
            j = self.ws(ve)
            if j >= self.hi:
                raise _Bad(j, "`}`")
            if t[j] == ",":
                i = j + 1
                continue
            if t[j] == "}":
                return out, j + 1
            raise _Bad(j, "`,` or `}`")

    def value(self, i: int) -> tuple[Any, int]:
        t, hi = self.text, self.hi
        if i >= hi:
            raise _Bad(i, "a value")
        if t.startswith(QUOTE, i):
            e = t.find(QUOTE, i + len(QUOTE), hi)
            if e < 0:
                raise _Bad(i, "the closing `<|\"|>`")
            return t[i + len(QUOTE):e], e + len(QUOTE)
        c = t[i]
        if c == "{":
            return self.obj(i)
        if c == "[":
            out: list[Any] = []
            j = self.ws(i + 1)
            if j < hi and t[j] == "]":
                return out, j + 1
            while True:
                v, e = self.value(self.ws(j))
                out.append(v)
                j = self.ws(e)
                if j < hi and t[j] == ",":
                    j += 1
                    continue
                if j < hi and t[j] == "]":
                    return out, j + 1
                raise _Bad(j, "`,` or `]`")
        if c == '"':
            try:
                s, e = json.JSONDecoder().raw_decode(t, i)
            except ValueError:
                raise _Bad(i, "a value") from None
            if e > hi:
                raise _Bad(i, "a value")
            self.found.append(("gemma_json_string", i, e, t[i:e]))
            return s, e
        e = i
        while e < hi and t[e] not in ",}]" and not t.startswith(CLOSE, e) and not t.startswith(QUOTE, e):
            e += 1
        raw = t[i:e].rstrip()
        e = i + len(raw)
        if not raw:
            raise _Bad(i, "a value")
        low = raw.lower()
        if low in ("true", "false"):
            return low == "true", e
        if low == "null":
            return None, e
        if _NUM.fullmatch(raw):
            return (float(raw) if any(ch in raw for ch in ".eE") else int(raw)), e
        if not self.stripped:
            self.found.append(("gemma_undelimited_string", i, e, raw))
        return raw, e


_DECLARATION = re.compile(r"declaration:([\w.\-]{1,128})(?=\{)")


def _lower_types(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: (x.lower() if k == "type" and isinstance(x, str) else _lower_types(x)) for k, x in v.items()}
    if isinstance(v, list):
        return [_lower_types(x) for x in v]
    return v


def read_declarations(text: str) -> list[dict[str, Any]]:
    """The tool schemas of a Gemma 4 system turn: each ``declaration:NAME{...}`` read with the template's value
    syntax (delimiters kept or stripped), types lower-cased; a declaration that does not parse is skipped."""
    stripped = QUOTE not in text
    out = []
    for m in _DECLARATION.finditer(text):
        try:
            obj, _ = _Values(text, len(text), stripped).obj(m.end())
        except (_Bad, RecursionError):
            continue
        params = _lower_types(obj.get("parameters") or {"type": "object", "properties": {}})
        out.append({"name": m.group(1), "description": str(obj.get("description", "")), "parameters": params})
    return out


def _render_schema(v: Any) -> str:
    """A schema value in the declaration syntax: keys sorted, strings delimited, ``type`` upper-cased."""
    if isinstance(v, dict):
        return "{" + ",".join(f"{k}:" + (_render_value(x.upper()) if k == "type" and isinstance(x, str)
                                         else _render_schema(x)) for k, x in sorted(v.items())) + "}"
    if isinstance(v, list):
        return "[" + ",".join(_render_schema(x) for x in v) + "]"
    return _render_value(v)


def render_declaration(tool: dict[str, Any]) -> str:
    """One tool as the Gemma 4 template declares it (``<|tool>declaration:NAME{...}<tool|>``); read back by
    :func:`read_declarations`."""
    body = f"description:{_render_value(str(tool.get('description') or ''))}"
    if tool.get("parameters"):
        body += f",parameters:{_render_schema(tool['parameters'])}"
    return f"<|tool>declaration:{tool['name']}{{{body}}}<tool|>"


def _render_value(v: Any, top: bool = False) -> str:
    if isinstance(v, str):
        return QUOTE + v + QUOTE
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return "null"
    if isinstance(v, dict):
        return "{" + ",".join(f"{k}:{_render_value(x)}" for k, x in sorted(v.items())) + "}"
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(_render_value(x) for x in v) + "]"
    return str(v)


class Gemma4Format(ToolFormat):
    """``<|tool_call>call:NAME{k:<|"|>v<|"|>}<tool_call|>`` (markers kept) or ``call:NAME{k:v}`` (stripped)."""

    name = "gemma4"
    family = "Gemma 4"
    tools_source = "prompt_gemma4"
    declarations_literal = "declaration:"
    verl_parser = "gemma4"
    verl_markers = KEPT_MARKERS

    def find_calls(self, text: str, lo: int, hi: int, rs: RuleSet, excluded: list[tuple[int, int]],
                   spans: bool = True, fast: bool = True) -> tuple[list[CallDraft], list[Issue]]:
        if text.find("call:", lo, hi) < 0 and text.find("tool_call", lo, hi) < 0:
            return [], []
        occ = Ranges(excluded) if excluded else None
        kept = markers_kept(KEPT_MARKERS, text) or text.find("<|tool_call", lo, hi) >= 0
        calls: list[CallDraft] = []
        issues: list[Issue] = []
        opens = [m for m in _OPEN_RE.finditer(text, lo, hi) if occ is None or occ.covering(m.start()) < 0]
        pos = lo
        for k, m in enumerate(opens):
            if m.start() < pos:
                continue
            nxt = opens[k + 1].start() if k + 1 < len(opens) else hi
            if nxt == m.end() or not text[m.end():nxt].strip():
                # a doubled opener: the second one starts the call
                if k + 1 < len(opens):
                    issues.append(Issue("malformed_tag", "doubled_marker", m.start(), m.end(),
                                        {"tag": m.group(), "format": self.name,
                                         "canonical_hint": f"a call opens with a single `{OPEN}`"},
                                        [Edit(m.start(), nxt, "", f"removed the extra `{OPEN}`")]))
                    continue
            d, pos = self._call(text, m.start(), m.end(), m.group(), hi, kept)
            calls.append(d)
        # calls whose opener is missing (kept markers) or stripped by the decode
        claimed = Ranges([(d.start, d.end) for d in calls] + list(excluded))
        for m in _STRIPPED_RE.finditer(text, lo, hi):
            if claimed.covering(m.start()) >= 0:
                continue
            d, _ = self._call(text, m.start(), m.start(), "", hi, kept)
            if kept:
                d.add("missing_call_open", "gemma_opener", m.start(), m.end(), tag=OPEN,
                      edits=[Edit(m.start(), m.start(), OPEN, f"added `{OPEN}`")])
            calls.append(d)
        calls.sort(key=lambda x: x.start)
        return calls, issues

    def _call(self, text: str, s: int, oe: int, opener: str, hi: int, kept: bool) -> tuple[CallDraft, int]:
        d = CallDraft(self.name, s, oe)
        d.span("structural", s, oe)
        if opener and opener != OPEN:
            d.add("malformed_tag", "gemma_marker", s, oe, tag=opener, format=self.name,
                  canonical_hint=f"the opener is `{OPEN}`", edits=[Edit(s, oe, OPEN, f"replaced `{opener}` by `{OPEN}`")])
        hm = _HEAD_RE.match(text, oe, hi)
        if hm is None:
            end = len(text[:hi].rstrip()) if text.find(CLOSE, oe, hi) < 0 else text.find(CLOSE, oe, hi) + len(CLOSE)
            d.end = max(oe, end)
            d.add("truncated_call" if text.find(CLOSE, oe, hi) < 0 and not text[oe:hi].strip() else "malformed_tag",
                  "after_open" if not text[oe:hi].strip() else "gemma_call_head", s, d.end,
                  where="right after the opener", tag=text[s:min(d.end, s + 40)], format=self.name,
                  canonical_hint="a call reads `call:NAME{...}`",
                  blocker="no function name and arguments follow the opener")
            return d, d.end
        if opener and hm.group(1) is None:
            d.add("malformed_tag", "gemma_call_head", hm.start(2), hm.end(2), tag=text[oe:hm.end()], format=self.name,
                  canonical_hint="the name follows `call:`",
                  edits=[Edit(hm.start(2), hm.start(2), "call:", "added `call:`")])
        d.span("structural", oe, hm.start(2))
        d.name, d.name_start, d.name_end = hm.group(2), hm.start(2), hm.end(2)
        d.span("function_name", hm.start(2), hm.end(2))
        bs = hm.end()
        vals = _Values(text, hi, stripped=not kept)
        top: list[tuple[str, int, int, Any, int, int]] = []
        try:
            args, be = vals.obj(bs, top)
        except _Bad as b:
            self._broken(d, text, bs, hi, b, top, vals)
            return d, d.end
        self._fill(d, text, bs, be, top, vals, args)
        if text.startswith(CLOSE, be):
            d.span("structural", be, be + len(CLOSE))
            d.end = be + len(CLOSE)
        elif kept:
            alt = next((c for c in _CLOSE_VARIANTS[1:] if text.startswith(c, be)), None)
            if alt is not None:
                d.add("malformed_tag", "gemma_marker", be, be + len(alt), tag=alt, format=self.name,
                      canonical_hint=f"the closer is `{CLOSE}`",
                      edits=[Edit(be, be + len(alt), CLOSE, f"replaced `{alt}` by `{CLOSE}`")])
                d.span("structural", be, be + len(alt))
                d.end = be + len(alt)
            else:
                d.end = be
                d.add("missing_call_close", "at_end" if not text[be:hi].strip() else "gemma_closer", s, oe or be,
                      tag=OPEN, edits=[Edit(be, be, CLOSE, f"added `{CLOSE}`")])
        else:
            d.end = be
        d.spans.sort(key=lambda x: x[1])
        return d, d.end

    def _fill(self, d: CallDraft, text: str, bs: int, be: int, top: list[tuple[str, int, int, Any, int, int]],
              vals: _Values, args: dict[str, Any]) -> None:
        d.span("structural", bs, bs + 1)
        for key, ks, ke, val, vs, ve in top:
            d.params.append(ParamDraft(key, ks, ke, None, val, vs, ve))
            d.span("param_name", ks, ke)
            d.span("param_value", vs, ve)
        d.span("structural", be - 1, be)
        d.json_args = args
        for variant, s, e, raw in vals.found:
            if variant == "gemma_json_string":
                inner = json.loads(raw)
                ok = QUOTE not in inner
                d.add("invalid_json", variant, s, e, error=f"`{raw[:40]}` is a JSON string",
                      edits=[Edit(s, e, QUOTE + inner + QUOTE, "wrote the string between `<|\"|>` delimiters")]
                      if ok else [], blocker=None if ok else "the string holds the delimiter itself")
            else:
                d.add("invalid_json", variant, s, e, error=f"`{raw[:40]}` is a string without `<|\"|>` delimiters",
                      edits=[Edit(s, e, QUOTE + raw + QUOTE, "wrote the string between `<|\"|>` delimiters")])
        d.rerender = False

    def _broken(self, d: CallDraft, text: str, bs: int, hi: int, b: _Bad,
                top: list[tuple[str, int, int, Any, int, int]], vals: _Values) -> None:
        """The arguments do not parse: the call ends at its closer (or the end of the text)."""
        close = text.find(CLOSE, bs, hi)
        nxt = text.find(OPEN, bs, hi)
        if close < 0 or 0 <= nxt < close:
            end = nxt if nxt >= 0 else hi
            end = bs + len(text[bs:end].rstrip())
            d.end = max(end, bs)
            if nxt < 0 and b.pos >= hi - 1 and CLOSE not in text[bs:hi]:
                d.add("truncated_call", "inside_json", bs, d.end, where=f"expecting {b.what}",
                      blocker="the output ends inside the call, the rest cannot be recovered")
            else:
                d.add("invalid_json", "gemma_syntax", b.pos, max(b.pos + 1, d.end), error=f"expecting {b.what}",
                      blocker="where the arguments end is a guess")
            d.span("param_value", bs, d.end)
            return
        d.end = close + len(CLOSE)
        for key, ks, ke, val, vs, ve in top:
            d.params.append(ParamDraft(key, ks, ke, None, val, vs, ve))
        body = text[bs:close].rstrip()
        if b.what == "`}`" or (b.pos >= bs + len(body) and body.count("{") > body.count("}")):
            ins = bs + len(body)
            d.add("unclosed_tag", "gemma_brace", bs, bs + 1, tag="{", closer="}",
                  edits=[Edit(ins, ins, "}", "closed the arguments with `}`")])
            try:
                args, _ = _Values(text[:ins] + "}", ins + 1, vals.stripped).obj(bs)
                d.json_args = args
            except _Bad:
                d.json_args = MISSING
        elif text.startswith(QUOTE, b.pos) and b.what.startswith("the closing"):
            d.add("unclosed_tag", "gemma_string", b.pos, b.pos + len(QUOTE), tag=QUOTE, closer=QUOTE,
                  blocker="where the string ends is a guess")
        else:
            d.add("invalid_json", "gemma_syntax", b.pos, max(b.pos + 1, close), error=f"expecting {b.what}",
                  blocker="the arguments do not follow the template's syntax")
        d.span("param_value", bs, close)
        d.span("structural", close, close + len(CLOSE))
        d.spans.sort(key=lambda x: x[1])

    def render(self, name: str, arguments: dict[str, Any]) -> str:
        body = ",".join(f"{k}:{_render_value(v)}" for k, v in sorted(arguments.items()))
        return f"{OPEN}call:{name}{{{body}}}{CLOSE}"

    def render_raw(self, name: str, params: list[tuple[str, str]]) -> str:
        return self.render(name, dict(params))

    def read_declarations(self, text: str) -> list[dict[str, Any]] | None:
        """``<|tool>declaration:NAME{description:...,parameters:{...}}<tool|>`` in the template's value syntax
        (``declaration:NAME{...}`` when the decode dropped the special tokens): :func:`read_declarations`."""
        return read_declarations(text) or None

    def render_declarations(self, tools: list[dict[str, Any]]) -> str | None:
        """``<|tool>declaration:NAME{...}<tool|>`` per tool (:func:`render_declaration`)."""
        return "".join(render_declaration(t) for t in tools)

    def verl_read(self, text: str, index: ToolIndex | None) -> list[VerlCall] | None:
        """verl's ``Gemma4ToolParser``: nothing unless the text holds ``<|tool_call>``; calls
        ``<\\|tool_call>call:(\\w+)\\{(.*?)\\}<tool_call\\|>`` (DOTALL); arguments by
        ``(\\w+):(?:<\\|"\\|>(.*?)<\\|"\\|>|([^,}]*))`` (not DOTALL): a delimited string as it is, a bare value
        stripped and read as ``true`` / ``false`` / ``null`` (any case), ``int``, ``float``, else the text."""
        out: list[VerlCall] = []
        if "<|tool_call>" not in text:
            return out
        for m in _VERL_CALL.finditer(text):
            args: dict[str, Any] = {}
            for am in _VERL_ARG.finditer(m.group(2)):
                sv, bv = am.group(2), am.group(3)
                if sv is not None:
                    args[am.group(1)] = sv
                elif bv is not None:
                    args[am.group(1)] = _verl_bare(bv)
            try:
                out.append(VerlCall(m.group(1), received(args), m.start(), m.end()))
            except (ValueError, RecursionError):  # verl logs "Failed to parse Gemma4 tool call"
                continue
        return out


def _verl_bare(v: str) -> Any:
    """verl's reading of a bare argument value: ``true`` / ``false`` / ``null`` (any case), ``int``, ``float``,
    else the stripped text."""
    v = v.strip()
    low = v.lower()
    if low == "true":
        return True
    if low == "false":
        return False
    if low == "null":
        return None
    try:
        return int(v)
    except ValueError:
        try:
            return float(v)
        except ValueError:
            return v


FORMATS_PROVIDED: tuple[ToolFormat, ...] = (Gemma4Format(),)
