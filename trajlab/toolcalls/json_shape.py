"""The shape of a decoded JSON call: ``{"name": str, "arguments": {...}}``, as verl needs it.

:func:`shape` reads the function name and the arguments from what :func:`~.json_decode.decode_body` returned,
through the usual departures (an OpenAI ``function`` wrapper, other name or argument keys, arguments as a JSON
string or written next to the name), each reported as a :class:`~.json_decode.Found` issue.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from trajlab.toolcalls.draft import MISSING
from trajlab.toolcalls.json_decode import Found
from trajlab.toolcalls.ruleset import RuleSet


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
