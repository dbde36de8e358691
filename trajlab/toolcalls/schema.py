"""Tool schemas: lookup by name, verl's value conversion, and the schema type checks.

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

:func:`check_xml_value` and :func:`check_json_value` say whether a value fits the declared type, and what
verl would pass instead when it does not.
"""

from __future__ import annotations

import ast
import json
import math
import re
from dataclasses import dataclass
from typing import Any

_STRING_TYPES = ("string", "str", "text", "varchar", "char", "enum")
_INT_PREFIXES = ("int", "uint", "long", "short", "unsigned")
_BOOL_TYPES = ("boolean", "bool", "binary")


@dataclass(frozen=True)
class ToolInfo:
    name: str
    properties: dict[str, Any]  # as declared (what verl's conversion reads)
    required: tuple[str, ...]
    open_properties: bool  # additionalProperties allows undeclared parameters
    resolved: dict[str, Any] | None = None  # the properties with `$ref`s resolved (None: the same as declared)

    @property
    def intended(self) -> dict[str, Any]:
        """The properties the intended reading checks and converts with (``$ref`` resolved)."""
        return self.resolved if self.resolved is not None else self.properties


class ToolIndex:
    """Declared tools by name (built once per tools list)."""

    def __init__(self, tools: list[dict[str, Any]]) -> None:
        self.tools: dict[str, ToolInfo] = {}
        for t in tools:
            if not isinstance(t, dict):
                continue
            if isinstance(t.get("function"), dict):  # tolerate the OpenAI wrapper
                t = t["function"]
            name = t.get("name")
            if not isinstance(name, str) or not name:
                continue
            params = t.get("parameters") if isinstance(t.get("parameters"), dict) else {}
            props = params.get("properties") if isinstance(params.get("properties"), dict) else {}
            req = params.get("required") if isinstance(params.get("required"), list) else []
            addl = params.get("additionalProperties", False)
            resolved = resolve_refs(props, params) if _has_ref(props) else None
            self.tools.setdefault(
                name, ToolInfo(name, props, tuple(str(r) for r in req), bool(addl) and addl is not False,
                               resolved if isinstance(resolved, dict) else None)
            )
        self.names: tuple[str, ...] = tuple(self.tools)

    def get(self, name: str | None) -> ToolInfo | None:
        return self.tools.get(name) if name is not None else None


def _has_ref(node: Any, depth: int = 0) -> bool:
    if depth > 40:
        return False
    if isinstance(node, dict):
        return "$ref" in node or any(_has_ref(v, depth + 1) for v in node.values())
    if isinstance(node, list):
        return any(_has_ref(v, depth + 1) for v in node)
    return False


def _pointer(root: Any, ref: str) -> Any:
    """The node a local JSON pointer (``#/$defs/Name``) names in ``root``; None when it names nothing."""
    node = root
    for part in ref[2:].split("/") if ref != "#" else ():
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node


def resolve_refs(node: Any, root: Any, depth: int = 0, seen: tuple[str, ...] = ()) -> Any:
    """``node`` with every local ``{"$ref": "#/..."}`` (``$defs``, ``definitions``) replaced by the schema it
    names, merged with the ref's sibling keys; a cyclic or dangling ref is left out (no type: any value)."""
    if depth > 32:
        return node
    if isinstance(node, dict):
        ref = node.get("$ref")
        rest = {k: v for k, v in node.items() if k != "$ref"} if ref is not None else node
        if isinstance(ref, str) and ref.startswith("#"):
            target = _pointer(root, ref) if ref not in seen else None
            if isinstance(target, dict):
                return resolve_refs({**target, **rest}, root, depth + 1, (*seen, ref))
            return {k: resolve_refs(v, root, depth + 1, seen) for k, v in rest.items()}
        return {k: resolve_refs(v, root, depth + 1, seen) for k, v in node.items()}
    if isinstance(node, list):
        return [resolve_refs(v, root, depth + 1, seen) for v in node]
    return node


_INDEX_CACHE: dict[int, tuple[Any, ToolIndex]] = {}


def tool_index(tools: list[dict[str, Any]] | None) -> ToolIndex | None:
    """The :class:`ToolIndex` of ``tools`` (``None`` when no schema is known), cached per list object."""
    if not tools:
        return None
    hit = _INDEX_CACHE.get(id(tools))
    if hit is not None and hit[0] is tools:
        return hit[1]
    idx = ToolIndex(tools)
    if not idx.tools:
        return None
    if len(_INDEX_CACHE) >= 64:
        _INDEX_CACHE.clear()
    _INDEX_CACHE[id(tools)] = (tools, idx)  # holding the list keeps its id from being reused
    return idx


def verl_type(prop: Any) -> str:
    """The type string verl's conversion switches on."""
    if isinstance(prop, dict) and "type" in prop:
        return str(prop["type"]).strip().lower()
    return "string"


# The branch verl's conversion (and :func:`check_xml_value`) takes for a type string, in their order of tests:
# string | int | num | bool | object | array | other. Cached per written type string (a schema has a handful).
_KIND_OF: dict[str, str] = {}


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


def _type_kind(t: str) -> str:
    """:func:`_kind` of a schema's ``type`` string as written (stripped and lower-cased here), cached."""
    k = _KIND_OF.get(t)
    if k is None:
        k = conversion_kind(t.strip().lower())
        if len(_KIND_OF) < 4096:
            _KIND_OF[t] = k
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


# Recent `_literal` results: the same value is converted again when a malformed call's repair is re-classified.
# Only results that can be handed out without sharing mutable state are kept: immutable scalars, and lists of
# str/int/float (handed out as copies). Bounded: cleared when full; long values are not kept.
_LITERAL_MEMO: dict[str, Any] = {}
_MEMO_SIZE = 256
_MEMO_MAX_CHARS = 2048
_IMMUTABLE = (str, int, float)


def _literal(raw: str) -> Any:
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
        return ast.literal_eval(raw)
    except Exception:  # literal_eval raises many types (ValueError, SyntaxError, MemoryError, RecursionError)
        return raw


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
    kind = (_KIND_OF.get(t) or _type_kind(t)) if isinstance(t, str) else conversion_kind(str(t).strip().lower())
    if kind == "array" or kind == "other":
        return _literal(raw)
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
    return _literal(raw)


_UNSET: Any = object()


@dataclass(frozen=True)
class TypeCheck:
    ok: bool
    variant: str = ""  # type_mismatch variant, or verl_conversion_divergence variant when ok and diverges
    expected: str = ""
    verl: Any = None
    divergence: bool = False
    allowed: str = ""


_OK = TypeCheck(True)  # the common answer, shared (frozen): building a dataclass per value costs more than the check


def _enum_check(value: Any, prop: dict[str, Any]) -> TypeCheck | None:
    enum = prop.get("enum")
    if isinstance(enum, list) and enum and value not in enum:
        return TypeCheck(False, "enum", "one of the enum values", value, allowed=", ".join(map(str, enum[:12])))
    return None


def branches(prop: Any) -> list[dict[str, Any]] | None:
    """The alternatives a property allows, in order: ``anyOf`` / ``oneOf`` members (nested ones flattened), the
    entries of a ``type`` list, or the type and ``null`` for ``nullable: true``; None for a plain property."""
    if not isinstance(prop, dict):
        return None
    out: list[dict[str, Any]] | None = None
    for key in ("anyOf", "oneOf"):
        alts = prop.get(key)
        if isinstance(alts, list) and alts:
            out = []
            for a in alts:
                if isinstance(a, dict):
                    sub = branches(a)
                    out += sub if sub is not None else [a]
            break
    t = prop.get("type")
    if out is None and isinstance(t, list):
        base = {k: v for k, v in prop.items() if k not in ("type", "nullable")}
        out = [{**base, "type": x} for x in t if isinstance(x, str)]
    if prop.get("nullable") is True:
        if out is None:
            out = [{k: v for k, v in prop.items() if k != "nullable"}]
        out.append({"type": "null"})
    return out


def _branch_name(b: dict[str, Any]) -> str:
    t = b.get("type")
    if isinstance(t, str):
        return t
    if "enum" in b:
        return "one of " + ", ".join(map(str, b["enum"][:6])) if isinstance(b["enum"], list) else "enum"
    if "const" in b:
        return repr(b["const"])
    return "any value"


def _is_null_branch(b: dict[str, Any]) -> bool:
    return isinstance(b.get("type"), str) and b["type"].strip().lower() == "null"


_INT_TEXT = re.compile(r"\s*[-+]?\d+\s*")


def _exact_number(raw: str) -> Any:
    """The number a JSON-schema ``number`` value means, exactly: an int for integer text (no float() rounding),
    the float otherwise; None when it is no finite number."""
    if _INT_TEXT.fullmatch(raw):
        try:
            return int(raw)
        except ValueError:  # (a huge digit string past the int-conversion limit)
            return None
    try:
        f = float(raw)
    except ValueError:
        return None
    return f if math.isfinite(f) else None


def _fits(raw: str, b: dict[str, Any]) -> tuple[bool, Any]:
    """Whether the raw XML value fits the branch ``b``, and the value it means there."""
    t = b.get("type")
    if not isinstance(t, str):
        if isinstance(b.get("enum"), list):
            return raw in b["enum"], raw
        if "const" in b:
            return raw == b["const"], raw
        sub = branches(b)
        if sub:
            for x in sub:
                ok, v = _fits(raw, x)
                if ok:
                    return ok, v
            return False, raw
        return True, raw  # no type: any value, as text
    tl = t.strip().lower()
    if tl == "null":
        return raw.lower() == "null", None
    kind = _type_kind(t)
    v: Any = raw
    if kind == "string":
        ok = True
    elif kind == "int":
        try:
            v = int(raw)
            ok = True
        except ValueError:
            ok = False
    elif kind == "num":
        v = _exact_number(raw)
        ok = v is not None
    elif kind == "bool":
        ok = raw.lower() in ("true", "false")
        v = raw.lower() == "true"
    elif kind in ("object", "array"):
        want = dict if kind == "object" else list
        try:
            v = json.loads(raw)
        except Exception:
            v = _literal(raw)
        ok = isinstance(v, want)
    else:
        v = _literal(raw)
        ok = True
    if ok and isinstance(b.get("enum"), list) and b["enum"] and v not in b["enum"]:
        ok = False
    return ok, v if ok else raw


def intended_value(raw: str, name: str, properties: dict[str, Any]) -> Any:
    """What a raw XML value means under the schema (the intended reading; ``properties`` with ``$ref``
    resolved): verl's conversion (:func:`verl_convert`) where it is exact; a ``number`` as the exact number its
    text says (no float() rounding); an ``anyOf`` / ``oneOf`` / type-list / nullable property by the first
    branch the value fits (``null`` first when a branch allows it); the raw text when no branch fits."""
    prop = properties.get(name) if name in properties else None
    br = branches(prop) if prop is not None else None
    if br is None:
        v = verl_convert(raw, name, properties)
        if (prop is not None and v is not None and not isinstance(v, str) and isinstance(prop, dict)
                and isinstance(prop.get("type"), str) and _type_kind(prop["type"]) == "num"):
            exact = _exact_number(raw)
            if exact is not None:
                return exact
        return v
    if len(raw) <= 4 and raw.lower() == "null" and any(_is_null_branch(b) for b in br):
        return None
    for b in br:
        ok, v = _fits(raw, b)
        if ok:
            return v
    return None if len(raw) <= 4 and raw.lower() == "null" else raw


def _same(a: Any, b: Any) -> bool:
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    try:
        return json.dumps(a, sort_keys=True, default=repr) == json.dumps(b, sort_keys=True, default=repr)
    except (ValueError, TypeError, RecursionError):
        return a == b


def check_xml_value(raw: str, prop: Any, converted: Any = _UNSET, verl_prop: Any = _UNSET) -> TypeCheck:
    """Does the raw XML value fit ``prop``'s type, and does verl's conversion keep the value it means?

    ``prop`` is the property as the intended reading sees it (``$ref`` resolved), ``verl_prop`` as declared
    (what verl's conversion reads; by default ``prop``). ``converted`` is :func:`verl_convert`'s result for the
    same value when the caller already has it. anyOf / oneOf / type lists / nullable: a value that fits no
    branch is a mismatch; one that verl converts to something else than its first fitting branch gives is a
    divergence. ``number``: an integer beyond 2^53 that float() rounds, or an integral float that verl turns
    into an int, is a divergence.
    """
    if not isinstance(prop, dict):
        return _OK
    br = branches(prop)
    vp = prop if verl_prop is _UNSET else verl_prop
    if br is not None or vp is not prop:
        return _check_resolved(raw, prop, br, vp, converted)
    t = prop.get("type")
    if len(raw) <= 4 and raw.lower() == "null":  # raw.lower() == "null" (see verl_convert)
        if isinstance(t, str) and _type_kind(t) == "string":
            return TypeCheck(True, "null_string", "string", None, divergence=True)
        return _OK
    if not isinstance(t, str):
        return _OK
    kind = _KIND_OF.get(t) or _type_kind(t)
    if kind == "array":
        v = converted if converted is not _UNSET else _literal(raw)
        if isinstance(v, list):
            return _OK
        try:
            j = json.loads(raw)
        except Exception:
            j = None
        if isinstance(j, list):
            return TypeCheck(True, "literal_eval", "JSON array", v, divergence=True)
        return TypeCheck(False, "array", "a JSON array", v)
    if kind == "string":
        return _enum_check(raw, prop) or _OK
    if kind == "int":
        try:
            v = int(raw)
        except Exception:
            return TypeCheck(False, "integer", "an integer", raw)
        return _enum_check(v, prop) or _OK
    if kind == "num":
        try:
            float(raw)
        except Exception:
            return TypeCheck(False, "number", "a number", raw)
        exact = _exact_number(raw)
        if exact is not None:
            v = converted if converted is not _UNSET else verl_convert(raw, "_", {"_": prop})
            if not _same(v, exact):
                return TypeCheck(True, "float_precision" if isinstance(exact, int) else "integral_float",
                                 "number", v, divergence=True)
        return _OK
    if kind == "bool":
        if raw.lower() in ("true", "false"):
            return _OK
        return TypeCheck(False, "boolean", "true or false", raw.lower() == "true")
    if kind == "object":
        try:
            v = json.loads(raw)
        except Exception:
            v = _literal(raw)
            if isinstance(v, dict):
                return _OK
            return TypeCheck(False, "object", "a JSON object", v)
        if isinstance(v, dict):
            return _OK
        return TypeCheck(False, "object", "a JSON object", v)
    return _OK


def _check_resolved(raw: str, prop: dict[str, Any], br: list[dict[str, Any]] | None, verl_prop: Any,
                    converted: Any) -> TypeCheck:
    """:func:`check_xml_value` for a property with branches, or whose declared form verl reads differently."""
    verl = converted if converted is not _UNSET else verl_convert(raw, "_", {"_": verl_prop})
    if br is None:
        tc = check_xml_value(raw, prop)
        if not tc.ok:
            return TypeCheck(False, tc.variant, tc.expected, verl, allowed=tc.allowed)
        if tc.divergence and _same(tc.verl, verl):
            return tc
        intended = intended_value(raw, "_", {"_": prop})
        if not _same(intended, verl):
            return TypeCheck(True, "untyped_branch", _branch_name(prop), verl, divergence=True)
        return tc
    intended = intended_value(raw, "_", {"_": prop})
    fits = (len(raw) <= 4 and raw.lower() == "null" and any(_is_null_branch(b) for b in br)) or any(
        _fits(raw, b)[0] for b in br)
    expected = " or ".join(dict.fromkeys(_branch_name(b) for b in br))
    if not fits:
        return TypeCheck(False, "any_of", expected, verl)
    if not _same(intended, verl):
        variant = "type_list" if isinstance(verl_prop, dict) and isinstance(verl_prop.get("type"), list) \
            else "untyped_branch"
        return TypeCheck(True, variant, expected, verl, divergence=True)
    return _OK


_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
    "null": (type(None),),
}


def check_json_value(value: Any, prop: Any) -> TypeCheck:
    """Does a decoded JSON value fit ``prop``'s JSON-schema type? (verl's hermes parser converts nothing.)"""
    if not isinstance(prop, dict):
        return _OK
    br = branches(prop)
    if br is not None:
        if value is None and any(_is_null_branch(b) for b in br):
            return _OK
        for b in br:
            if check_json_value(value, b).ok:
                return _OK
        return TypeCheck(False, "json_type", " or ".join(dict.fromkeys(_branch_name(b) for b in br)), value)
    if isinstance(prop.get("const"), (str, int, float, bool)) and "type" not in prop:
        return _OK if value == prop["const"] else TypeCheck(False, "enum", "the constant", value,
                                                             allowed=repr(prop["const"]))
    t = prop.get("type")
    types = [t] if isinstance(t, str) else (t if isinstance(t, list) else None)
    if not types:
        return _enum_check(value, prop) or _OK
    if value is None and "null" in types:
        return _OK
    for ty in types:
        py = _JSON_TYPES.get(str(ty).lower())
        if py is None:
            return _enum_check(value, prop) or _OK  # unknown type name: do not judge
        if isinstance(value, bool) and bool not in py:
            continue
        if str(ty).lower() == "integer" and isinstance(value, float) and value.is_integer():
            return _enum_check(value, prop) or _OK
        if isinstance(value, py):
            return _enum_check(value, prop) or _OK
    return TypeCheck(False, "json_type", " or ".join(map(str, types)), value)
