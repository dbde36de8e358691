"""Recover tool schemas from a decoded prompt, or load them from a ``--tools`` file.

Three renderings occur in the system block of a verl dump's ``input``:

* Hermes / Qwen2.5 / Qwen3: ``<tools>`` then one ``{"type": "function", "function": {...}}`` JSON object per line;
* Qwen3.5 / Qwen3.6: the same JSON-lines block (objects may also be bare ``{"name": ..., "parameters": ...}``);
* Qwen3-Coder: XML ``<tools><function><name>..</name><description>..</description><parameters><parameter>
  <name>..</name><type>..</type>...</parameter></parameters></function></tools>`` (parsed with lxml in recover
  mode, since descriptions are not escaped).

Other families declare their tools elsewhere in the system block (call-formats.md):

* GLM-4.5+: the same JSON-lines ``<tools>`` block (read by the first rule);
* Kimi-K2: ``<|im_system|>tool_declare<|im_middle|>[...]<|im_end|>``, one JSON array of OpenAI tool objects
  (``tool_declare[...]`` when the decode dropped the special tokens);
* DeepSeek-V3.1: ``### NAME\nDescription: ...\n\nParameters: {json}`` per tool under ``## Tools`` (the model
  card's block), or one ``tojson`` line per tool;
* gpt-oss (harmony): a TypeScript ``namespace functions { type NAME = (_: { p: string, q?: number }) => any; }`` in
  the developer message (lossy: ``integer`` is rendered ``number``; string unions become enums).

Every schema is normalised to ``{"name", "description", "parameters"}`` (a JSON-schema object).
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

from trajlab.errors import InputError, param

_TOOLS_BLOCK = re.compile(r"<tools>\s*(.*?)\s*</tools>", re.DOTALL)


def normalise_tool(obj: Any) -> dict[str, Any] | None:
    """Normalise one OpenAI-style or bare tool schema; ``None`` if it is not a tool schema."""
    if not isinstance(obj, dict):
        return None
    if isinstance(obj.get("function"), dict):
        obj = obj["function"]
    name = obj.get("name")
    if not isinstance(name, str) or not name:
        return None
    params = obj.get("parameters")
    if not isinstance(params, dict):
        params = {"type": "object", "properties": {}}
    return {"name": name, "description": obj.get("description") or "", "parameters": params}


def normalise_tools(objs: Any) -> list[dict[str, Any]] | None:
    if not isinstance(objs, list):
        return None
    tools = [t for t in (normalise_tool(o) for o in objs) if t is not None]
    return tools or None


def _json_lines(block: str) -> list[dict[str, Any]] | None:
    tools: list[dict[str, Any]] = []
    dec = json.JSONDecoder()
    i, n = 0, len(block)
    while i < n:
        while i < n and block[i] in " \t\r\n":
            i += 1
        if i >= n:
            break
        if block[i] not in "{[":
            return tools or None
        try:
            obj, end = dec.raw_decode(block, i)
        except json.JSONDecodeError:
            return tools or None
        items = obj if isinstance(obj, list) else [obj]
        for o in items:
            t = normalise_tool(o)
            if t:
                tools.append(t)
        i = end
    return tools or None


def _xml_type(t: str | None) -> str:
    return (t or "string").strip() or "string"


def _xml_tools(block: str) -> list[dict[str, Any]] | None:
    from lxml import etree

    parser = etree.XMLParser(recover=True, resolve_entities=False, no_network=True, huge_tree=False)
    try:
        root = etree.fromstring(f"<tools>{block}</tools>".encode(), parser=parser)
    except (etree.XMLSyntaxError, ValueError):
        return None
    if root is None:
        return None
    tools: list[dict[str, Any]] = []
    for fn in root.iter("function"):
        name = (fn.findtext("name") or "").strip()
        if not name:
            continue
        props: dict[str, Any] = {}
        required: list[str] = []
        params_el = fn.find("parameters")
        if params_el is not None:
            for p in params_el.findall("parameter"):
                pname = (p.findtext("name") or "").strip()
                if not pname:
                    continue
                prop: dict[str, Any] = {"type": _xml_type(p.findtext("type"))}
                desc = p.findtext("description")
                if desc:
                    prop["description"] = desc.strip()
                for child in p:
                    if child.tag in ("name", "type", "description") or not isinstance(child.tag, str):
                        continue
                    txt = (child.text or "").strip()
                    try:
                        prop[child.tag] = json.loads(txt)
                    except (json.JSONDecodeError, ValueError):
                        prop[child.tag] = txt
                props[pname] = prop
            req = params_el.findtext("required")
            if req:
                try:
                    r = json.loads(req)
                    if isinstance(r, list):
                        required = [str(x) for x in r]
                except (json.JSONDecodeError, ValueError):
                    required = [s.strip() for s in req.split(",") if s.strip()]
        schema: dict[str, Any] = {"type": "object", "properties": props}
        if required:
            schema["required"] = required
        tools.append({"name": name, "description": (fn.findtext("description") or "").strip(), "parameters": schema})
    return tools or None


@lru_cache(maxsize=4096)
def _tools_from_block(block: str) -> tuple[str | None, str | None]:
    stripped = block.lstrip()
    if stripped.startswith("<function"):
        tools = _xml_tools(block)
        src = "prompt_xml"
    else:
        tools = _json_lines(block)
        src = "prompt_json"
    if not tools:
        return None, None
    return json.dumps(tools, ensure_ascii=False, sort_keys=True), src


_KIMI_DECLARE = re.compile(r"tool_declare(?:<\|im_middle\|>)?\s*(?:# Tools\s*)?(?=\[)")
_DS_TOOL = re.compile(r"^### ([^\n]+)\n(?:Description: ?(.*?)\n)?\s*Parameters: ?(?=\{)", re.MULTILINE | re.DOTALL)
_TS_NAMESPACE = re.compile(r"namespace functions \{(.*?)\n\} // namespace functions", re.DOTALL)
_TS_TYPE = re.compile(r"((?:^//[^\n]*\n)*)^type ([\w.\-]+) = \((?:_: \{\n(.*?)^\}|)\) => any;", re.MULTILINE | re.DOTALL)
_TS_PARAM = re.compile(r"((?:^//[^\n]*\n)*)^([\w\-]+)(\??): (.+?),(?: // default: ([^\n]*))?$", re.MULTILINE)


def _kimi_tools(text: str) -> list[dict[str, Any]] | None:
    m = _KIMI_DECLARE.search(text)
    if not m:
        return None
    try:
        arr, _end = json.JSONDecoder().raw_decode(text, m.end())
    except json.JSONDecodeError:
        return None
    return normalise_tools(arr)


def _deepseek_tools(text: str) -> list[dict[str, Any]] | None:
    tools: list[dict[str, Any]] = []
    dec = json.JSONDecoder()
    for m in _DS_TOOL.finditer(text):
        try:
            params, _end = dec.raw_decode(text, m.end())
        except json.JSONDecodeError:
            continue
        t = normalise_tool({"name": m.group(1).strip(), "description": (m.group(2) or "").strip(),
                            "parameters": params})
        if t:
            tools.append(t)
    return tools or None


def _ts_type(t: str) -> dict[str, Any]:
    t = t.strip()
    if t.endswith("[]"):
        return {"type": "array", "items": _ts_type(t[:-2])}
    if t in ("string", "number", "boolean"):
        return {"type": t}
    if t.startswith('"') and all(p.strip().startswith('"') for p in t.split("|")):
        try:
            return {"type": "string", "enum": [json.loads(p.strip()) for p in t.split("|")]}
        except json.JSONDecodeError:
            return {"type": "string"}
    if t.startswith("{"):
        return {"type": "object"}
    return {}


def _typescript_tools(text: str) -> list[dict[str, Any]] | None:
    ns = _TS_NAMESPACE.search(text)
    if not ns:
        return None
    tools: list[dict[str, Any]] = []
    for m in _TS_TYPE.finditer(ns.group(1)):
        desc = " ".join(line[2:].strip() for line in m.group(1).splitlines() if line.startswith("//"))
        props: dict[str, Any] = {}
        required: list[str] = []
        for pm in _TS_PARAM.finditer(m.group(3) or ""):
            prop = _ts_type(pm.group(4))
            pdesc = " ".join(line[2:].strip() for line in pm.group(1).splitlines() if line.startswith("//"))
            if pdesc:
                prop["description"] = pdesc
            props[pm.group(2)] = prop
            if not pm.group(3):
                required.append(pm.group(2))
        schema: dict[str, Any] = {"type": "object", "properties": props}
        if required:
            schema["required"] = required
        tools.append({"name": m.group(2), "description": desc, "parameters": schema})
    return tools or None


#: family system blocks tried when the prompt has no ``<tools>`` block: (literal, reader, tools_source)
_FAMILY_BLOCKS = (
    ("tool_declare", _kimi_tools, "prompt_kimi"),
    ("namespace functions {", _typescript_tools, "prompt_typescript"),
    ("Parameters:", _deepseek_tools, "prompt_deepseek"),
)


@lru_cache(maxsize=1024)
def _family_tools(input_text: str) -> tuple[str | None, str | None]:
    for lit, reader, src in _FAMILY_BLOCKS:
        if lit in input_text:
            tools = reader(input_text)
            if tools:
                return json.dumps(tools, ensure_ascii=False, sort_keys=True), src
    return None, None


def tools_from_prompt(input_text: str) -> tuple[list[dict[str, Any]] | None, str | None]:
    """Tool schemas rendered in the prompt's ``<tools>`` block (or another family's system block), and which
    rendering they came from.

    Returns ``(None, None)`` when the prompt declares no tools. Results are cached per distinct block, so
    GRPO groups (identical prompts) cost one parse.
    """
    if "<tools>" not in input_text:
        js, src = _family_tools(input_text)
        return (json.loads(js) if js else None), src
    # the Hermes preamble mentions an empty "<tools></tools>" before the real block: take the first non-empty one
    m = next((m for m in _TOOLS_BLOCK.finditer(input_text) if m.group(1).strip()), None)
    if not m:
        return None, None
    js, src = _tools_from_block(m.group(1))
    return (json.loads(js) if js else None), src


def load_tools_file(path: str | Path) -> list[dict[str, Any]]:
    """Load ``--tools FILE``: a JSON list of OpenAI tool schemas, or verl's tool-config YAML.

    verl's YAML has ``tools: [{class_name, config, tool_schema: {type: function, function: {...}}}]``.
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{param('tools')} file not found: {p}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"{param('tools')} file {p} cannot be read: {e}") from None
    data: Any
    if p.suffix.lower() in (".yaml", ".yml"):
        import yaml

        from trajlab.rulepacks import safe_load_yaml

        try:
            data = safe_load_yaml(text)
        except yaml.YAMLError as e:
            raise InputError(f"{param('tools')} file {p} is not valid YAML: {e}") from None
    else:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise InputError(f"{param('tools')} file {p} is not valid JSON (line {e.lineno}: {e.msg})") from None
    if isinstance(data, dict) and isinstance(data.get("tools"), list):
        items = [t.get("tool_schema", t) if isinstance(t, dict) else t for t in data["tools"]]
    elif isinstance(data, list):
        items = data
    else:
        raise InputError(
            f"{param('tools')} file {p}: expected a JSON list of tool schemas or a verl tool config with a 'tools:' list"
        )
    tools = normalise_tools(items)
    if not tools:
        raise InputError(f"{param('tools')} file {p} declares no tool with a 'name'")
    return tools
