"""Locating the members of a JSON call body (keys and values) and their character spans.

:func:`walk` is a tolerant token walk (one regex ``finditer``, a Python step per JSON *token*, never per character)
that reads any text, broken JSON included; :func:`walk_valid` gives the same for a body that is valid JSON with one
C-scanner step per member. Both return :class:`Member` records of the top-level object and of the objects directly
inside it, from which :mod:`.jsonbody` takes the spans of the name and of each parameter, duplicate keys and edits.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

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
