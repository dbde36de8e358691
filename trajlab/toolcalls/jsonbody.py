"""JSON call bodies into call drafts: whole call objects (hermes, and JSON written where XML was expected) and
arguments-only objects (kimi_k2, deepseek_v31, gpt_oss).

:func:`fill_json_call` and :func:`fill_json_arguments` fill a :class:`~.draft.CallDraft` from a body: decoded and
diagnosed by :mod:`.json_decode`, its call shape checked by :mod:`.json_shape`, its members located by
:mod:`.json_walk` for the spans (:func:`json_spans`). :func:`find_bare_json` finds call objects written outside any
``<tool_call>``.
"""

from __future__ import annotations

import json
import re

from trajlab.toolcalls.draft import MISSING, CallDraft, ParamDraft, Ranges, snip
from trajlab.toolcalls.json_decode import Decoded, decode_body
from trajlab.toolcalls.json_shape import Shape, shape
from trajlab.toolcalls.json_walk import Member, walk, walk_valid
from trajlab.toolcalls.ruleset import RuleSet


def fill_json_call(d: CallDraft, text: str, bs: int, be: int, rs: RuleSet, *, at_end: bool = False,
                   spans: bool = True) -> Decoded:
    """Decode ``text[bs:be]`` into the draft ``d``: name, arguments, issues and (with ``spans``) the spans of the
    body."""
    body = text[bs:be]
    dec = decode_body(body, rs, at_end=at_end)
    for f in dec.found:
        d.add(f.category, f.variant, bs + f.start, bs + f.end, blocker=f.blocker, **f.params)
    if dec.truncated:
        d.add("truncated_call", "inside_json", bs, be, where="inside the JSON object",
              blocker="the output ends inside the call, the rest cannot be recovered")
    members = (walk_valid(text, bs, be) if dec.obj is not MISSING and not dec.repaired else None)
    if members is None:
        members = walk(text, bs, be)
    if dec.obj is not MISSING:
        sh = shape(dec.obj, rs, len(body.rstrip()))
        for f in sh.found:
            d.add(f.category, f.variant, bs + len(body) - len(body.lstrip()), bs + len(body.rstrip()),
                  blocker=f.blocker, **f.params)
        if isinstance(sh.name, str):
            d.name = sh.name
        d.json_args = sh.arguments
        d.coerce_strings = dec.coerce
        if dec.repaired or sh.found:
            d.rerender = True
        _json_params(d, members, sh, text)
    else:
        # nothing decodes: still locate what looks like the name for spans and messages
        nm = _NAME_GUESS.search(text, bs, be)
        if nm:
            d.name, d.name_start, d.name_end = nm.group(1), nm.start(1), nm.end(1)
    if spans:
        json_spans(d, text, bs, be, members)
    return dec


def fill_json_arguments(d: CallDraft, text: str, bs: int, be: int, rs: RuleSet, *, at_end: bool = False,
                        spans: bool = True, fmt: str = "") -> Decoded:
    """Decode ``text[bs:be]``, a body that is the *arguments object alone* (kimi_k2, deepseek_v31, gpt_oss), into
    ``d``: arguments, parameters, issues (``invalid_json`` / ``invalid_arguments`` / ``truncated_call``) and spans.

    A JSON string that holds an object (arguments double-encoded, as the gpt-oss template's ``tojson`` renders a
    string ``arguments``) is read as that object and reported ``invalid_arguments/arguments_string``.
    """
    body = text[bs:be]
    dec = decode_body(body, rs, at_end=at_end)
    for f in dec.found:
        if f.category == "format_mismatch":
            f.params["expected"] = fmt or f.params.get("expected", "")
        d.add(f.category, f.variant, bs + f.start, bs + f.end, blocker=f.blocker, **f.params)
    whole = (bs + len(body) - len(body.lstrip()), bs + len(body.rstrip()))
    if dec.truncated:
        d.add("truncated_call", "inside_json", bs, be, where="inside the JSON arguments",
              blocker="the output ends inside the call, the rest cannot be recovered")
    obj = dec.obj
    if obj is not MISSING and isinstance(obj, str):
        try:
            inner = json.loads(obj)
        except Exception:
            inner = MISSING
        if isinstance(inner, dict):
            d.add("invalid_arguments", "arguments_string", *whole,
                  problem="gives the arguments as a JSON-encoded string (double-encoded)")
            obj = inner
            d.rerender = True
    members: list[Member] = []
    if obj is not MISSING:
        if isinstance(obj, dict):
            d.json_args = obj
            if dec.repaired:
                d.rerender = True
            d.coerce_strings = dec.coerce
            members = (walk_valid(text, bs, be) if not dec.repaired and not d.rerender else None) or walk(text, bs, be)
            located = {mb.key: mb for mb in members if mb.depth == 1}
            if not d.rerender and len(located) == len(obj) and all(k in located for k in obj):
                for mb in members:
                    if mb.depth == 1:  # (each occurrence's own value: a duplicated key has several)
                        try:
                            val = json.loads(text[mb.vs:mb.ve]) if mb.vs >= 0 else obj.get(mb.key)
                        except (ValueError, RecursionError):
                            val = obj.get(mb.key)
                        d.params.append(ParamDraft(mb.key, mb.ks, mb.ke, None, val, mb.vs, mb.ve))
            else:
                for k, v in obj.items():
                    d.params.append(ParamDraft(str(k), -1, -1, None, v, -1, -1))
        else:
            d.add("invalid_arguments", "arguments_not_object", *whole,
                  problem=f"gives the arguments as a JSON {type(obj).__name__}, not an object",
                  blocker="the arguments are not an object")
    if spans:
        json_spans(d, text, bs, be, members)
    return dec


def _json_params(d: CallDraft, members: list[Member], sh: Shape, text: str) -> None:
    if sh.name_key is not None:
        for mb in members:
            if mb.depth == 1 and mb.key == sh.name_key and mb.vstr:
                d.name_start, d.name_end = mb.vs + 1, mb.ve - 1
                break
    if not isinstance(sh.arguments, dict):
        return
    if sh.args_key is not None:
        arg_members = [mb for mb in members if mb.depth == 2 and mb.parent == sh.args_key]
    else:
        arg_members = [mb for mb in members if mb.depth == 1 and mb.key not in (sh.name_key, "id", "type")]
    located = {mb.key: mb for mb in arg_members}
    if len(located) == len(sh.arguments) and all(k in located for k in sh.arguments):
        for mb in arg_members:  # in written order, duplicates included
            d.params.append(ParamDraft(mb.key, mb.ks, mb.ke, None, sh.arguments.get(mb.key), mb.vs, mb.ve))
    else:  # arguments came from a string or a repair: no reliable positions
        for k, v in sh.arguments.items():
            d.params.append(ParamDraft(str(k), -1, -1, None, v, -1, -1))


def json_spans(d: CallDraft, text: str, bs: int, be: int, members: list[Member]) -> None:
    """Spans of the body ``text[bs:be]``: name, parameter names and values, structural in between."""
    content: list[tuple[str, int, int]] = []
    if d.name_start >= 0:
        content.append(("function_name", d.name_start, d.name_end))
    for p in d.params:
        if p.name_start >= 0:
            content.append(("param_name", p.name_start, p.name_end))
        if p.value_start >= 0:
            vs, ve = p.value_start, p.value_end
            if ve - vs >= 2 and text[vs] == '"' and text[ve - 1] == '"':
                vs, ve = vs + 1, ve - 1
            content.append(("param_value", vs, ve))
    content.sort(key=lambda x: x[1])
    pos = bs
    for kind, s, e in content:
        if s < pos or e > be:
            continue
        if s > pos:
            d.span("structural", pos, s)
        d.span(kind, s, e)
        pos = e
    if pos < be:
        d.span("structural", pos, be)


_DECODER = json.JSONDecoder()  # stateless between calls (its scanner clears its memo after each one)
#: the first ``"name": "VALUE`` of a body that does not decode; the value ends at a quote, white space or a
#: backslash (``"name": "search\ "arguments": ...`` is ``search``, not a name further in)
_NAME_GUESS = re.compile(r'"\s*(?:name|function)\s*"?\s*[:=]\s*"?([^",{}\s\\]+)(?=["\s\\,}])')
_BARE = re.compile(r'\{\s*"(?:name|function)"\s*:')


def find_bare_json(text: str, lo: int, hi: int, occupied: list[tuple[int, int]], rs: RuleSet) -> list[CallDraft]:
    """JSON call objects written outside any ``<tool_call>`` (``{"name": ..., "arguments": ...}``)."""
    out: list[CallDraft] = []
    dec = _DECODER
    claimed = Ranges(occupied)
    pos = lo
    while True:
        m = _BARE.search(text, pos, hi)
        if not m:
            break
        s = m.start()
        inside = claimed.covering(s)
        if inside >= 0:
            pos = max(inside, m.end())  # skip the whole claimed call
            continue
        try:
            obj, e = dec.raw_decode(text, s)
        except Exception:
            pos = m.end()
            continue
        if e > hi:  # runs past the segment (e.g. into a think block): not a call of this segment
            pos = m.end()
            continue
        if not (isinstance(obj, dict) and isinstance(obj.get("name") or obj.get("function"), (str, dict))
                and any(k in obj for k in ("arguments", "parameters"))):
            pos = e
            continue
        d = CallDraft("hermes", s, e)
        fill_json_call(d, text, s, e, rs)
        d.add("missing_call_open", "bare_json", s, e, tag=snip(text[s:e], 30))
        d.rerender = True
        out.append(d)
        pos = e
    return out
