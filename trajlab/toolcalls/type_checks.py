"""Values against the declared schema types: the type checks, and what a value is meant to be.

:func:`check_xml_value` and :func:`check_json_value` say whether a value fits the declared type, and what
verl would pass instead when it does not (a :class:`TypeCheck`). :func:`intended_value` is what a raw XML value
means under the schema (``anyOf`` / ``oneOf`` / type-list / nullable branches, exact numbers), which the checks
compare with verl's conversion (:mod:`.verl_conversion`).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

from trajlab.toolcalls.verl_conversion import KIND_OF, type_kind, verl_convert, verl_literal

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


def null_text(raw: str) -> bool:
    """Whether a raw XML value writes null for a property that allows it: ``null`` (any case), or ``None``, which
    is how the Qwen3-Coder template renders a null argument (scalars go through Jinja's ``| string``)."""
    return len(raw) <= 4 and (raw.lower() == "null" or raw == "None")


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
        return null_text(raw), None
    kind = type_kind(t)
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
            v = verl_literal(raw)
        ok = isinstance(v, want)
    else:
        v = verl_literal(raw)
        ok = True
    if ok and isinstance(b.get("enum"), list) and b["enum"] and v not in b["enum"]:
        ok = False
    return ok, v if ok else raw


def intended_value(raw: str, name: str, properties: dict[str, Any]) -> Any:
    """What a raw XML value means under the schema (the intended reading; ``properties`` with ``$ref``
    resolved): verl's conversion (:func:`verl_convert`) where it is exact; a ``number`` as the exact number its
    text says (no float() rounding); a ``string`` whose text is ``null`` as that text (verl passes None); an
    ``array`` / ``object`` written as JSON that verl's ``literal_eval`` cannot read (``true``, ``null`` inside)
    as the JSON value (verl passes the text); an ``anyOf`` / ``oneOf`` / type-list / nullable property by the
    first branch the value fits (``null`` first when a branch allows it); the raw text when no branch fits.
    Where this differs from verl's conversion, :func:`check_xml_value` reports the divergence and the call's
    verl reading (``verl_executes = differently``) carries verl's value."""
    prop = properties.get(name) if name in properties else None
    br = branches(prop) if prop is not None else None
    if br is None:
        v = verl_convert(raw, name, properties)
        kind = type_kind(prop["type"]) if isinstance(prop, dict) and isinstance(prop.get("type"), str) else None
        if kind == "num" and v is not None and not isinstance(v, str):
            exact = _exact_number(raw)
            if exact is not None:
                return exact
        elif kind == "string" and v is None:
            return raw  # `null` as a string parameter's text: the string (verl passes None: `null_string`)
        elif kind in ("array", "object") and isinstance(v, str) and isinstance(prop, dict):
            ok, meant = _fits(raw, prop)  # JSON that literal_eval cannot read (`true`, `null`): `literal_eval`
            if ok:
                return meant
        return v
    if null_text(raw) and any(_is_null_branch(b) for b in br):
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
        if isinstance(t, str) and type_kind(t) == "string":
            return TypeCheck(True, "null_string", "string", None, divergence=True)
        return _OK
    if not isinstance(t, str):
        return _OK
    kind = KIND_OF.get(t) or type_kind(t)
    if kind == "array":
        v = converted if converted is not _UNSET else verl_literal(raw)
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
            v = verl_literal(raw)
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
    fits = (null_text(raw) and any(_is_null_branch(b) for b in br)) or any(_fits(raw, b)[0] for b in br)
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
