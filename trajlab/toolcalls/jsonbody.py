"""JSON call bodies (hermes format, and JSON written inside the XML format): decode, diagnose, locate.

* :func:`decode_body` decodes a body like verl (``json.loads``); when that fails it names what is wrong
  (doubled braces, text around the object, typographic or single quotes, trailing commas, the XML habits
  ``"name=..."`` / ``"key=value"``) and tries the matching fixes, so a repair can be offered when exactly one
  reading exists.
* :func:`shape` checks the decoded object has the ``{"name": str, "arguments": {...}}`` shape verl needs.
* :func:`walk` is a tolerant token walk (one regex ``finditer``, a Python step per JSON *token*, never per
  character) that locates the name and the argument keys/values for spans, duplicate keys and edits.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass, field
from typing import Any

from trajlab.toolcalls.draft import MISSING, CallDraft, ParamDraft, Ranges, snip
from trajlab.toolcalls.ruleset import RuleSet

_JTOK = re.compile(r'"(?:[^"\\\n]|\\.)*"?|[{}\[\]:,]|[^\s"{}\[\]:,]+')


@dataclass(slots=True)
class Member:
    depth: int  # 1 = member of the top-level object, 2 = member of an object nested in it
    parent: str | None  # key of the depth-1 member holding this object (depth 2)
    key: str
    ks: int  # key content span (inside the quotes)
    ke: int
    vs: int  # value span (raw JSON text); -1 when the key has no value
    ve: int
    vstr: bool  # the value is a single string token: content is vs+1 .. ve-1


def _key_text(tok: str) -> str:
    if len(tok) >= 2 and tok.endswith('"'):
        try:
            return json.loads(tok)
        except ValueError:
            return tok[1:-1]
    return tok[1:]


def walk(text: str, start: int, end: int) -> list[Member]:
    """Members of the top-level object and of the objects directly inside it, with their spans."""
    members: list[Member] = []
    # frame: [kind, state, key, ks, ke, vs, ntok, parent, depth]
    stack: list[list[Any]] = []
    prev_end = start

    def emit(fr: list[Any], vend: int) -> None:
        if fr[8] <= 2 and fr[2] is not None:
            vs = fr[5]
            members.append(Member(fr[8], fr[7], fr[2], fr[3], fr[4], vs, vend if vs >= 0 else -1,
                                  vs >= 0 and fr[6] == 1 and text[vs] == '"' and vend - vs >= 2
                                  and text[vend - 1] == '"'))

    for m in _JTOK.finditer(text, start, end):
        a, b = m.span()
        c = text[a]
        top = stack[-1] if stack else None
        if c == "{" or c == "[":
            parent = None
            if top is not None and top[0] == "{":
                if top[1] == "value":
                    if top[5] < 0:
                        top[5] = a
                    top[6] += 1
                parent = top[2]
            stack.append([c, "key", None, -1, -1, -1, 0, parent, len(stack) + 1])
        elif c == "}" or c == "]":
            if top is not None and top[0] == "{" and top[1] in ("value", "colon"):
                emit(top, prev_end)
            if stack:
                stack.pop()
            prev_end = b
            continue
        elif c == ":":
            if top is not None and top[0] == "{" and top[1] == "colon":
                top[1] = "value"
        elif c == ",":
            if top is not None and top[0] == "{":
                if top[1] in ("value", "colon"):
                    emit(top, prev_end)
                top[1], top[2], top[5], top[6] = "key", None, -1, 0
        elif top is not None and top[0] == "{":
            if top[1] == "key":
                if c == '"':
                    top[2] = _key_text(m.group())
                    top[3] = a + 1
                    top[4] = b - 1 if b - a >= 2 and text[b - 1] == '"' else b
                else:
                    top[2], top[3], top[4] = m.group(), a, b
                top[1] = "colon"
            elif top[1] == "value":
                if top[5] < 0:
                    top[5] = a
                top[6] += 1
        prev_end = b
    while stack:
        fr = stack.pop()
        if fr[0] == "{" and fr[1] in ("value", "colon"):
            emit(fr, prev_end)
    return members


_WS = re.compile(r"[ \t\n\r]*")
_JSON_SPACE = " \t\n\r"  # (a one-character string is `in` it only when it is one of these)
_SCAN = json.JSONDecoder().scan_once


def _object_members(text: str, i: int, depth: int, parent: str | None, out: list[Member]) -> int:
    """Members of the JSON object at ``text[i] == '{'`` (valid JSON only), via the C scanner; returns its end.

    (Whitespace is skipped with the regex only where there is some: ``text[i] in _JSON_SPACE`` is cheaper.)
    """
    ws = _WS.match
    i += 1
    if text[i] in _JSON_SPACE:
        i = ws(text, i).end()
    if text[i] == "}":
        return i + 1
    while True:
        if text[i] != '"':
            raise ValueError("key expected")
        key, j = _SCAN(text, i)
        ks, ke = i + 1, j - 1
        if text[j] in _JSON_SPACE:
            j = ws(text, j).end()
        if text[j] != ":":
            raise ValueError("colon expected")
        vs = j + 1
        if text[vs] in _JSON_SPACE:
            vs = ws(text, vs).end()
        if depth == 1 and text[vs] == "{":
            ve = _object_members(text, vs, 2, key, out)
        else:
            _val, ve = _SCAN(text, vs)
        out.append(Member(depth, parent, key, ks, ke, vs, ve, text[vs] == '"'))
        k = ve
        if text[k] in _JSON_SPACE:
            k = ws(text, k).end()
        if text[k] == ",":
            i = k + 1
            if text[i] in _JSON_SPACE:
                i = ws(text, i).end()
            continue
        if text[k] == "}":
            return k + 1
        raise ValueError("comma expected")


def walk_valid(text: str, start: int, end: int) -> list[Member] | None:
    """:func:`walk` for a body that is valid JSON: one C-scanner step per member instead of per token."""
    i = _WS.match(text, start).end()
    if i >= end or text[i] != "{":
        return None
    out: list[Member] = []
    try:
        _object_members(text, i, 1, None, out)
    except (ValueError, IndexError, StopIteration):
        return None
    return out


# -- decoding -------------------------------------------------------------------------------------------


@dataclass(slots=True)
class Found:
    category: str
    variant: str
    start: int  # relative to the body
    end: int
    params: dict[str, Any] = field(default_factory=dict)
    blocker: str | None = None


@dataclass(slots=True)
class Decoded:
    obj: Any  # MISSING when nothing decodes
    found: list[Found]
    repaired: bool  # obj comes from lenient fixes, not from json.loads on the body as written
    coerce: bool  # string values came from "key=value" text
    error: str | None
    truncated: bool


_HYBRID_NAME = re.compile(r'([{,]\s*)"\s*(?:function|name)\s*=\s*"?([^",{}]*)"')
_HYBRID_DETECT = re.compile(r'"\s*(?:function|name)\s*=')
_KEY_EQ_SPLIT = re.compile(r'([{,]\s*)"([A-Za-z_][\w\-]*)\s*=\s*"\s*,\s*"')
_KEY_EQ = re.compile(r'([{,]\s*)"([A-Za-z_][\w\-]*)\s*=\s*"?([^",{}]*)"')
_KEY_EQ_QUOTED = re.compile(r'([{,]\s*)"([A-Za-z_][\w\-]*)"\s*=\s*"')
_KEY_EQ_DETECT = re.compile(r'[{,]\s*"([A-Za-z_][\w\-]*)\s*=|[{,]\s*"([A-Za-z_][\w\-]*)"\s*=\s*"')
_TRAILING_COMMA = re.compile(r",(\s*[}\]])")
_SINGLE_QUOTES = re.compile(r"[{,]\s*'[^'\n]*'\s*:")
_DOUBLE_OPEN = re.compile(r"\{\s*\{")


def _loads(s: str) -> Any:
    return json.loads(s)


def decode_body(body: str, rs: RuleSet, *, at_end: bool = False) -> Decoded:
    """Decode one call body; on failure diagnose it and try the fixes that match the diagnosis."""
    try:
        return Decoded(_loads(body), [], False, False, None, False)
    except Exception as e:  # JSONDecodeError, RecursionError on absurd nesting
        first_error = e
    found: list[Found] = []
    lead = len(body) - len(body.lstrip())
    brace = body.find("{")
    if brace < 0:
        return Decoded(MISSING, [Found("invalid_json", "syntax", lead, len(body.rstrip()),
                                       {"error": _err(first_error)}, "the block holds no JSON object")],
                       False, False, _err(first_error), at_end)
    if brace > lead:
        junk = body[lead:brace]
        found.append(Found("invalid_json", "leading_junk", lead, brace, {"junk": snip(junk, 40)}))
    work = body[brace:]
    m = _DOUBLE_OPEN.match(work)
    if m:
        found.append(Found("invalid_json", "doubled_braces", brace, brace + m.end()))
    curly = rs.curly_double + rs.curly_single
    if curly:
        cm = re.search(f"[{re.escape(curly)}]", work)
        if cm:
            found.append(Found("invalid_json", "curly_quotes", brace + cm.start(), brace + cm.end()))
    hm = _HYBRID_DETECT.search(work)
    if hm:
        kend = work.find('"', hm.end())
        found.append(Found("format_mismatch", "hybrid_name_eq", brace + hm.start(),
                           brace + (kend + 1 if kend >= 0 else hm.end()),
                           {"key": snip(work[hm.start():kend + 1 if kend >= 0 else hm.end()], 30),
                            "found": "a JSON/XML hybrid", "expected": "hermes"}))
    km = next((x for x in _KEY_EQ_DETECT.finditer(work) if (x.group(1) or x.group(2)) not in ("name", "function")),
              None)
    if km:
        ks = brace + km.start() + len(km.group()) - len(km.group().lstrip("{, \t\n"))
        kq = body.find('"', brace + km.end())
        found.append(Found("format_mismatch", "key_eq_value", ks, kq + 1 if kq >= 0 else brace + km.end(),
                           {"key": snip(body[ks:kq + 1 if kq >= 0 else brace + km.end()], 30),
                            "found": "`\"key=value\"` strings", "expected": "hermes"}))
    sm = _SINGLE_QUOTES.search(work)
    if sm:
        found.append(Found("invalid_json", "single_quotes", brace + sm.start(), brace + sm.end()))
    tm = _TRAILING_COMMA.search(work)
    if tm:
        found.append(Found("invalid_json", "trailing_comma", brace + tm.start(), brace + tm.start() + 1))

    # the fixes, in order
    w = work
    if curly:
        w = w.translate({ord(c): '"' for c in rs.curly_double} | {ord(c): "'" for c in rs.curly_single})
    if m:
        w = w[m.end() - 1:]
        if w.rstrip().endswith("}}"):
            w = w.rstrip()[:-1]
    coerce = False
    if hm:
        w = _HYBRID_NAME.sub(lambda x: f'{x.group(1)}"name": "{x.group(2).strip()}"', w)
    if km:
        w = _KEY_EQ_SPLIT.sub(lambda x: f'{x.group(1)}"{x.group(2)}": "', w)
        w = _KEY_EQ.sub(lambda x: f'{x.group(1)}"{x.group(2)}": "{x.group(3)}"', w)
        w = _KEY_EQ_QUOTED.sub(lambda x: f'{x.group(1)}"{x.group(2)}": "', w)
        coerce = True
    if tm:
        w = _TRAILING_COMMA.sub(r"\1", w)
    obj: Any = MISSING
    err: Exception | None = None
    try:
        obj = _loads(w)
    except Exception as e:
        err = e
        try:
            obj, idx = json.JSONDecoder().raw_decode(w)
            rest = w[idx:].strip()
            if rest:
                rest_at = len(body.rstrip()) - len(rest)  # the tail is not touched by the fixes
                if rest.startswith("{"):
                    found.append(Found("invalid_json", "concatenated_objects", max(rest_at, 0), len(body.rstrip()),
                                       blocker="two JSON objects in one block: which one was meant is a guess"))
                else:
                    found.append(Found("invalid_json", "trailing_junk", max(rest_at, 0), len(body.rstrip()),
                                       {"junk": snip(rest, 40)}))
        except Exception:
            obj = MISSING
    if obj is MISSING and sm:
        try:
            v = ast.literal_eval(w)
            if isinstance(v, (dict, list)):
                obj = v
        except Exception:
            pass
    if obj is MISSING and w.rstrip().endswith(")"):
        # `})` where `}}` was meant: the object is closed with a parenthesis
        try:
            obj = _loads(w.rstrip()[:-1] + "}")
            p = len(body.rstrip()) - 1
            found.append(Found("invalid_json", "wrong_closer", p, p + 1))
        except Exception:
            obj = MISSING
    if obj is MISSING:
        e = err or first_error
        truncated = at_end and _ends_early(e, w)
        if not truncated and not any(f.category == "invalid_json" for f in found):
            pos = getattr(e, "pos", None)
            s = brace + pos if isinstance(pos, int) and pos <= len(work) else lead
            found.append(Found("invalid_json", "syntax", s, max(s + 1, len(body.rstrip())), {}))
        why = f"the JSON does not decode even after the obvious fixes ({_err(e)})"
        for f in found:
            f.params.setdefault("error", _err(first_error))
            if f.blocker is None:
                f.blocker = why
        return Decoded(MISSING, found, False, coerce, _err(e), truncated)
    if not any(f.category == "invalid_json" for f in found):
        # every body that json.loads rejects is invalid JSON, whatever else is wrong with it
        pos = getattr(first_error, "pos", None)
        s = pos if isinstance(pos, int) and lead <= pos < len(body) else lead
        found.append(Found("invalid_json", "syntax", s, max(s + 1, min(len(body.rstrip()), s + 12)), {}))
    for f in found:
        f.params.setdefault("error", _err(first_error))
    return Decoded(obj, found, True, coerce, _err(first_error), False)


def _err(e: Exception) -> str:
    if isinstance(e, json.JSONDecodeError):
        return f"{e.msg} at line {e.lineno} column {e.colno}"
    return type(e).__name__


def _ends_early(e: Exception | None, w: str) -> bool:
    pos = getattr(e, "pos", None)
    msg = getattr(e, "msg", "")
    if not isinstance(pos, int):
        return False
    return pos >= len(w.rstrip()) - 1 or msg.startswith("Unterminated string")


# -- shape ----------------------------------------------------------------------------------------------


@dataclass(slots=True)
class Shape:
    name: Any  # str when found
    arguments: Any  # dict when usable, else MISSING
    found: list[Found]
    name_key: str | None  # key the name was read from
    args_key: str | None  # key the arguments were read from (None: flattened)


def shape(obj: Any, rs: RuleSet, body_len: int) -> Shape:
    """Check ``obj`` is ``{"name": str, "arguments": {...}}`` and read name and arguments from it."""
    found: list[Found] = []
    whole = (0, body_len)
    if isinstance(obj, list) and len(obj) == 1 and isinstance(obj[0], dict):
        found.append(Found("invalid_arguments", "call_not_object", *whole,
                           {"problem": "is a one-element list instead of an object"}))
        obj = obj[0]
    if not isinstance(obj, dict):
        what = "a list of calls" if isinstance(obj, list) else f"a JSON {type(obj).__name__}"
        found.append(Found("invalid_arguments", "call_not_object", *whole, {"problem": f"is {what}, not an object"},
                           blocker="the block is not a single call object"))
        return Shape(None, MISSING, found, None, None)
    name: Any = None
    name_key = None
    if "name" in obj:
        name, name_key = obj["name"], "name"
    elif isinstance(obj.get("function"), dict) and "name" in obj["function"]:  # OpenAI wrapper
        inner = obj["function"]
        found.append(Found("invalid_arguments", "function_key", *whole,
                           {"problem": "wraps the call in `function` (OpenAI message shape)"}))
        obj = {"name": inner.get("name"), "arguments": inner.get("arguments", {}), **{
            k: v for k, v in inner.items() if k not in ("name", "arguments")}}
        name, name_key = obj["name"], "name"
    else:
        for k in rs.alt_name_keys:
            if isinstance(obj.get(k), str):
                name, name_key = obj[k], k
                found.append(Found("invalid_arguments", "function_key", *whole,
                                   {"problem": f"gives the function name under `{k}` instead of `name`"}))
                break
    if name_key is None:
        found.append(Found("invalid_arguments", "missing_name", *whole, {"problem": "has no `name`"},
                           blocker="the call does not say which function it calls"))
        return Shape(None, MISSING, found, None, None)
    if not isinstance(name, str):
        found.append(Found("invalid_arguments", "name_not_string", *whole,
                           {"problem": f"has a `name` that is a JSON {type(name).__name__}"},
                           blocker="the function name is not a string"))
        return Shape(None, MISSING, found, name_key, None)
    args: Any = MISSING
    args_key: str | None = None
    if "arguments" in obj:
        args, args_key = obj["arguments"], "arguments"
    else:
        for k in rs.alt_arguments_keys:
            if k in obj:
                args, args_key = obj[k], k
                found.append(Found("invalid_arguments", "parameters_key", *whole,
                                   {"problem": f"passes its arguments under `{k}` instead of `arguments`"}))
                break
    if args_key is None:
        rest = {k: v for k, v in obj.items() if k != name_key and k not in ("id", "type")}
        if rest:
            found.append(Found("invalid_arguments", "flattened", *whole,
                               {"problem": "puts the arguments next to `name` instead of inside `arguments`"}))
            return Shape(name, rest, found, name_key, None)
        found.append(Found("invalid_arguments", "missing_arguments", *whole, {"problem": "has no `arguments`"}))
        return Shape(name, {}, found, name_key, None)
    if isinstance(args, str):
        try:
            dec = json.loads(args)
        except Exception:
            dec = MISSING
        if isinstance(dec, dict):
            found.append(Found("invalid_arguments", "arguments_string", *whole,
                               {"problem": "gives `arguments` as a JSON-encoded string"}))
            return Shape(name, dec, found, name_key, args_key)
        found.append(Found("invalid_arguments", "arguments_not_object", *whole,
                           {"problem": "gives `arguments` as a string that is not a JSON object"},
                           blocker="the arguments are a string that does not decode to an object"))
        return Shape(name, MISSING, found, name_key, args_key)
    if not isinstance(args, dict):
        found.append(Found("invalid_arguments", "arguments_not_object", *whole,
                           {"problem": f"gives `arguments` as a JSON {type(args).__name__}, not an object"},
                           blocker="the arguments are not an object"))
        return Shape(name, MISSING, found, name_key, args_key)
    return Shape(name, args, found, name_key, args_key)


# -- building a draft -----------------------------------------------------------------------------------


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
_NAME_GUESS = re.compile(r'"\s*(?:name|function)\s*"?\s*[:=]\s*"?([^",{}\s]+)"')
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
