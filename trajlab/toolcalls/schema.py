"""Declared tools by name: the :class:`ToolIndex` of a tools list, with local ``$ref`` s resolved.

:func:`tool_index` returns the index of a tools list (cached per list; None when no schema is known). Each
:class:`ToolInfo` keeps the properties as declared (what verl's conversion reads, :mod:`.verl_conversion`) and
with ``$ref`` s resolved (what the type checks read, :mod:`.type_checks`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


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
            declared = t.get("parameters")
            params: dict[str, Any] = declared if isinstance(declared, dict) else {}
            props: dict[str, Any] = params.get("properties") if isinstance(params.get("properties"), dict) else {}
            resolved = resolve_refs(props, params) if _has_ref(props) else None
            if isinstance(params.get("$ref"), str):
                # the whole object is a `$ref` (pydantic's schema of a self-referencing model): the intended
                # reading resolves it; verl reads `parameters.properties` only, so as declared there are none
                top = resolve_refs({"$ref": params["$ref"]}, params)
                if isinstance(top, dict) and isinstance(top.get("properties"), dict):
                    params = {**top, **{k: v for k, v in params.items() if k not in ("$ref", "$defs", "definitions")}}
                    resolved = resolve_refs(params["properties"], declared)
            req = params.get("required") if isinstance(params.get("required"), list) else []
            addl = params.get("additionalProperties", False)
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
