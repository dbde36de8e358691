"""Decoding a JSON call body the way verl does, and naming what is wrong when it does not decode.

:func:`decode_body` tries ``json.loads`` (what verl runs); when that fails it diagnoses the body (doubled braces,
text around the object, typographic or single quotes, trailing commas, the XML habits ``"name=..."`` /
``"key=value"``) as :class:`Found` issues and tries the matching fixes, so that a repair can be offered when exactly
one reading exists. The result is a :class:`Decoded`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from trajlab.toolcalls.draft import MISSING, snip
from trajlab.toolcalls.ruleset import RuleSet
from trajlab.toolcalls.verl_conversion import literal_eval_quiet


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
            v = literal_eval_quiet(w)
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
        fail = err or first_error
        truncated = at_end and _ends_early(fail, w)
        if not truncated and not any(f.category == "invalid_json" for f in found):
            pos = getattr(fail, "pos", None)
            s = brace + pos if isinstance(pos, int) and pos <= len(work) else lead
            found.append(Found("invalid_json", "syntax", s, max(s + 1, len(body.rstrip())), {}))
        why = f"the JSON does not decode even after the obvious fixes ({_err(fail)})"
        for f in found:
            f.params.setdefault("error", _err(first_error))
            if f.blocker is None:
                f.blocker = why
        return Decoded(MISSING, found, False, coerce, _err(fail), truncated)
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
        return f"{e.msg}{'' if e.msg.endswith(' at') else ' at'} line {e.lineno} column {e.colno}"
    return type(e).__name__


def _ends_early(e: Exception | None, w: str) -> bool:
    pos = getattr(e, "pos", None)
    msg = getattr(e, "msg", "")
    if not isinstance(pos, int):
        return False
    return pos >= len(w.rstrip()) - 1 or msg.startswith("Unterminated string")
