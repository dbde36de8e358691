"""verl's conversion of a raw XML parameter value into a Python value, reproduced.

:func:`verl_convert` reproduces how verl's ``qwen3_coder`` parser (0.9.1, adapted from Qwen3-Coder's
``qwen3coder_tool_parser.py``) turns a raw XML parameter value into a Python value, so that trajlab and the
trainer agree on the arguments of a well-formed call (parsers.md §A.6, verl-formats.md §2.3):

* ``"null"`` (any case) -> ``None`` for every type;
* a parameter the function does not declare (or a function not in the tools) -> the raw string;
* type = ``str(schema["type"]).strip().lower()`` (``"string"`` when the property has no type);
* string / str / text / varchar / char / enum -> raw; int* / uint* / long* / short* / unsigned* -> ``int()``;
  num* / float* -> ``float()``, integral floats become ``int``; boolean / bool / binary -> ``== "true"``;
  object / dict* -> ``json.loads``, then ``ast.literal_eval``; anything else -> ``ast.literal_eval``;
  every failed conversion keeps the raw string.

:func:`conversion_kind` / :func:`type_kind` name the branch a type string takes (cached in :data:`KIND_OF`);
:func:`verl_literal` is the ``ast.literal_eval`` fallback, memoised.
"""

from __future__ import annotations

import ast
import json
import warnings
from typing import Any

_STRING_TYPES = ("string", "str", "text", "varchar", "char", "enum")
_INT_PREFIXES = ("int", "uint", "long", "short", "unsigned")
_BOOL_TYPES = ("boolean", "bool", "binary")

def verl_type(prop: Any) -> str:
    """The type string verl's conversion switches on."""
    if isinstance(prop, dict) and "type" in prop:
        return str(prop["type"]).strip().lower()
    return "string"


# The branch verl's conversion (and :func:`check_xml_value`) takes for a type string, in their order of tests:
# string | int | num | bool | object | array | other. Cached per written type string (a schema has a handful).
KIND_OF: dict[str, str] = {}


def conversion_kind(ptype: str) -> str:
    """The conversion branch of a stripped, lower-case type string (as :func:`verl_type` returns it)."""
    if ptype in _STRING_TYPES:
        return "string"
    if ptype.startswith(_INT_PREFIXES):
        return "int"
    if ptype.startswith(("num", "float")):
        return "num"
    if ptype in _BOOL_TYPES:
        return "bool"
    if ptype == "object" or ptype.startswith("dict"):
        return "object"
    if ptype in ("array", "arr") or ptype.startswith("list"):
        return "array"
    return "other"


def type_kind(t: str) -> str:
    """:func:`conversion_kind` of a schema's ``type`` string as written (stripped and lower-cased here), cached."""
    k = KIND_OF.get(t)
    if k is None:
        k = conversion_kind(t.strip().lower())
        if len(KIND_OF) < 4096:
            KIND_OF[t] = k
    return k


def _plain_json(v: Any, depth: int = 0) -> bool:
    """True when ``v`` holds only str / int / float / list / str-keyed dict (no true/false/null).

    ``v`` is what ``json.loads`` returned, so its types are exactly the built-in ones (``type(x) is``).
    """
    if depth > 50:
        return False
    t = type(v)
    if t is str or t is int or t is float:
        return True
    if t is list:
        items: Any = v
    elif t is dict:
        items = v.values()
    else:
        return False  # bool, None
    inline = depth < 50  # a scalar one level down is plain unless it lies past the depth limit
    for x in items:
        tx = type(x)
        if inline and (tx is str or tx is int or tx is float):
            continue
        if not _plain_json(x, depth + 1):
            return False
    return True


_MISS: Any = object()
_JSON_WS = json.decoder.WHITESPACE.match
_JSON_SCAN = json.JSONDecoder().scan_once  # the C scanner behind json.loads (same settings as its decoder)


def _json_loads(raw: str) -> Any:
    """``json.loads(raw)`` for a ``str``, without the Python layers around the C scanner (raises ValueError)."""
    try:
        v, end = _JSON_SCAN(raw, _JSON_WS(raw, 0).end())
    except StopIteration:
        raise ValueError("no JSON value") from None
    if _JSON_WS(raw, end).end() != len(raw):
        raise ValueError("extra data")
    return v


# Recent `verl_literal` results: the same value is converted again when a malformed call's repair is re-classified.
# Only results that can be handed out without sharing mutable state are kept: immutable scalars, and lists of
# str/int/float (handed out as copies). Bounded: cleared when full; long values are not kept.
_LITERAL_MEMO: dict[str, Any] = {}
_MEMO_SIZE = 256
_MEMO_MAX_CHARS = 2048
_IMMUTABLE = (str, int, float)


def verl_literal(raw: str) -> Any:
    """``ast.literal_eval(raw)``, or ``raw`` when it fails (what verl does); memoised, see ``_LITERAL_MEMO``."""
    hit = _LITERAL_MEMO.get(raw, _MISS)
    if hit is not _MISS:
        return hit.copy() if type(hit) is list else hit
    v = _literal_uncached(raw)
    if len(raw) <= _MEMO_MAX_CHARS:
        tv = type(v)
        if tv in _IMMUTABLE or v is None or tv is bool:
            keep = v
        elif tv is list:
            for x in v:
                if type(x) not in _IMMUTABLE:
                    return v  # a nested value: not kept
            keep = v.copy()  # the caller owns `v`
        else:
            return v
        if len(_LITERAL_MEMO) >= _MEMO_SIZE:
            _LITERAL_MEMO.clear()
        _LITERAL_MEMO[raw] = keep
    return v


def _literal_uncached(raw: str) -> Any:
    """``ast.literal_eval(raw)``, or ``raw`` when it fails (what verl does).

    Fast path: a JSON text without backslashes and without true/false/null evaluates to the same value in
    Python, so ``json.loads`` (C) answers for the common case of JSON arrays/objects/numbers.
    """
    if "\\" not in raw and raw[:1] in "[{-0123456789":
        try:
            v = _json_loads(raw)
        except Exception:
            v = None
        if v is not None and _plain_json(v):
            return v
    try:
        return literal_eval_quiet(raw)
    except Exception:  # literal_eval raises many types (ValueError, SyntaxError, MemoryError, RecursionError)
        return raw


def literal_eval_quiet(text: str) -> Any:
    """``ast.literal_eval(text)`` without the compiler's warnings: model text such as ``'a\\ b'`` would make
    Python print ``SyntaxWarning: invalid escape sequence`` (3.12+; a DeprecationWarning before) on stderr."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ast.literal_eval(text)


def verl_convert(raw: str, name: str, properties: dict[str, Any]) -> Any:
    """Convert one raw XML parameter value exactly like verl's ``qwen3_coder`` parser."""
    # `raw.lower() == "null"` without lower-casing long values (lower-casing never shortens a string)
    if len(raw) <= 4 and raw.lower() == "null":
        return None
    if name not in properties:
        return raw
    prop = properties[name]
    if not isinstance(prop, dict) or "type" not in prop:
        return raw  # verl_type: "string"
    t = prop["type"]
    kind = (KIND_OF.get(t) or type_kind(t)) if isinstance(t, str) else conversion_kind(str(t).strip().lower())
    if kind == "array" or kind == "other":
        return verl_literal(raw)
    if kind == "string":
        return raw
    if kind == "int":
        try:
            return int(raw)
        except Exception:
            return raw
    if kind == "num":
        try:
            f = float(raw)
            return f if f - int(f) != 0 else int(f)
        except Exception:
            return raw
    if kind == "bool":
        return raw.lower() == "true"
    if kind == "object":
        try:
            return json.loads(raw)
        except Exception:
            pass
    return verl_literal(raw)
