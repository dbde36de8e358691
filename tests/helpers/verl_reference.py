"""Reference parsers for verl 0.9.1's ``qwen3_coder`` and ``hermes`` tool-call formats, written independently of
trajlab from shared/spec/parsers.md §A.6 and verl-formats.md §2.3; the property and literal tests compare the
classifier's calls with them."""

from __future__ import annotations

import ast
import json
import re
from typing import Any


def ref_convert(value: str, name: str, props: dict[str, Any]) -> Any:
    """verl's qwen3_coder value conversion (parsers.md §A.6 / verl-formats.md §2.3)."""
    if value.lower() == "null":
        return None
    if name not in props:
        return value
    spec = props[name]
    kind = str(spec["type"]).strip().lower() if isinstance(spec, dict) and "type" in spec else "string"
    if kind in {"string", "str", "text", "varchar", "char", "enum"}:
        return value
    if any(kind.startswith(p) for p in ("int", "uint", "long", "short", "unsigned")):
        try:
            return int(value)
        except ValueError:
            return value
    if kind.startswith("num") or kind.startswith("float"):
        try:
            x = float(value)
        except ValueError:
            return value
        return int(x) if x == int(x) else x
    if kind in {"boolean", "bool", "binary"}:
        return value.lower() == "true"
    if kind == "object" or kind.startswith("dict"):
        try:
            return json.loads(value)
        except ValueError:
            pass
    try:
        return ast.literal_eval(value)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return value


def ref_qwen3_coder(text: str, tools: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    if "<tool_call>" not in text:
        return []
    by_name = {t["name"]: t["parameters"].get("properties", {}) for t in tools}
    out = []
    for closed, open_ in re.findall(r"<tool_call>(.*?)</tool_call>|<tool_call>(.*?)$", text, re.DOTALL):
        block = closed or open_
        for f_closed, f_open in re.findall(r"<function=(.*?)</function>|<function=(.*)$", block, re.DOTALL):
            fn = f_closed or f_open
            if ">" not in fn:
                continue
            name, rest = fn.split(">", 1)
            props = by_name.get(name, {})
            args: dict[str, Any] = {}
            for p_closed, p_open in re.findall(r"<parameter=(.*?)</parameter>|<parameter=(.*?)$", rest, re.DOTALL):
                p = p_closed or p_open
                if ">" not in p:
                    continue
                pname, value = p.split(">", 1)
                if value.startswith("\n"):
                    value = value[1:]
                if value.endswith("\n"):
                    value = value[:-1]
                args[pname] = ref_convert(value, pname, props)
            out.append((name, args))
    return out


def ref_hermes(text: str) -> list[tuple[str, Any]]:
    if "<tool_call>" not in text or "</tool_call>" not in text:
        return []
    out = []
    for block in re.findall(r"<tool_call>(.*?)</tool_call>", text, re.DOTALL):
        try:
            obj = json.loads(block)
            out.append((obj["name"], obj["arguments"]))
        except (ValueError, KeyError, TypeError):
            continue
    return out
