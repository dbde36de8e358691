"""Recover tool schemas from a decoded prompt, or load them from a ``--tools`` file.

Three renderings occur in the system block of a verl dump's ``input``:

* Hermes / Qwen2.5 / Qwen3: ``<tools>`` then one ``{"type": "function", "function": {...}}`` JSON object per line;
* Qwen3.5 / Qwen3.6: the same JSON-lines block (objects may also be bare ``{"name": ..., "parameters": ...}``);
* Qwen3-Coder: XML ``<tools><function><name>..</name><description>..</description><parameters><parameter>
  <name>..</name><type>..</type>...</parameter></parameters></function></tools>`` (parsed with lxml in recover
  mode, since descriptions are not escaped).

Other families declare their tools elsewhere in the system block (call-formats.md); a call format whose
declarations are its own reads them itself (``ToolFormat.read_declarations``: Seed-OSS's ``Function:\ndef NAME(``
docstrings, Gemma 4's ``declaration:NAME{...}``), the others are read here:

* GLM-4.5+: the same JSON-lines ``<tools>`` block (read by the first rule);
* Kimi-K2: ``<|im_system|>tool_declare<|im_middle|>[...]<|im_end|>``, one JSON array of OpenAI tool objects
  (``tool_declare[...]`` when the decode dropped the special tokens);
* DeepSeek-V3.2 / V4 (DSML): one ``tojson`` line per tool inside ``<functions>`` ... ``</functions>``;
* Llama 3.1-3.3 / Llama 4 (JSON): after the instruction "... Do not use variables." one ``tojson(indent=4)`` object
  per tool (OpenAI ``{"type": "function", "function": {...}}`` objects), in the first user or the system message;
* DeepSeek-V3.1: ``### NAME\nDescription: ...\n\nParameters: {json}`` per tool under ``## Tools`` (the model
  card's block), or one ``tojson`` line per tool;
* gpt-oss (harmony): a TypeScript ``namespace functions { type NAME = (_: { p: string, q?: number }) => any; }`` in
  the developer message (lossy: ``integer`` is rendered ``number``; string unions become enums);
* ReAct agents: after "You have access to the following tools:" one ``name: description`` line per tool
  (LangChain's rendering, optionally ``, args: {json}``; Qwen's ReAct prompt: ``... Parameters: [{"name",
  "required", "schema"}] ...``) or one JSON schema per line, the ReAct paper's ``(1) Search[entity], which ...``
  (one string parameter, named in the brackets), and the names in "Action: ... should be one of [a, b]"; a tool
  listed by name only has open parameters (any arguments fit).

Every schema is normalised to ``{"name", "description", "parameters"}`` (a JSON-schema object).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Any

from trajlab.errors import InputError, param

_TOOLS_BLOCK = re.compile(r"<tools>\s*(.*?)\s*</tools>", re.DOTALL)
_FUNCTIONS_BLOCK = re.compile(r"<functions>\s*(.*?)\s*</functions>", re.DOTALL)
#: the end of the Llama 3.x JSON tool instructions; the tool objects follow
_LLAMA_LEAD = "Do not use variables."

#: the deepest nesting a tool schema may have (real schemas stay under ~20 levels; every schema walker, the
#: JSON encoder and the type checks recurse, so a deeper one is refused before it reaches them)
MAX_SCHEMA_DEPTH = 64


def nesting_depth(obj: Any, limit: int = MAX_SCHEMA_DEPTH) -> int:
    """How deeply ``obj`` nests lists and dicts (a scalar is 0), counted without recursion; stops counting at
    ``limit + 1``."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(obj, 1)]
    while stack:
        node, d = stack.pop()
        if isinstance(node, dict):
            children: Any = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        if d > deepest:
            deepest = d
            if deepest > limit:
                return deepest
        stack.extend((c, d + 1) for c in children if isinstance(c, (dict, list)))
    return deepest


def normalise_tool(obj: Any) -> dict[str, Any] | None:
    """Normalise one OpenAI-style or bare tool schema; ``None`` if it is not a tool schema."""
    if not isinstance(obj, dict) or nesting_depth(obj) > MAX_SCHEMA_DEPTH:
        return None  # (a schema nested deeper than any real one: read as no schema, not walked)
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
        except (json.JSONDecodeError, RecursionError):
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
    elif stripped.startswith("<tool>"):  # MiniMax-M2: one `<tool>{json}</tool>` per line
        tools = _json_lines(re.sub(r"</?tool>", "\n", block))
        src = "prompt_minimax"
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
    except (json.JSONDecodeError, RecursionError):
        return None
    return normalise_tools(arr)


def _deepseek_tools(text: str) -> list[dict[str, Any]] | None:
    tools: list[dict[str, Any]] = []
    dec = json.JSONDecoder()
    for m in _DS_TOOL.finditer(text):
        try:
            params, _end = dec.raw_decode(text, m.end())
        except (json.JSONDecodeError, RecursionError):
            continue
        t = normalise_tool({"name": m.group(1).strip(), "description": (m.group(2) or "").strip(),
                            "parameters": params})
        if t:
            tools.append(t)
    return tools or None


def _functions_block(text: str) -> list[dict[str, Any]] | None:
    """DeepSeek-V3.2 / V4 (DSML): one ``tojson`` line per tool inside ``<functions>`` ... ``</functions>``."""
    m = _FUNCTIONS_BLOCK.search(text)
    return _json_lines(m.group(1)) if m else None


def _llama_tools(text: str) -> list[dict[str, Any]] | None:
    """Llama 3.x / 4 JSON tool block: after "... Do not use variables." one ``tojson(indent=4)`` object per tool."""
    at = text.rfind(_LLAMA_LEAD)
    if at < 0:
        return None
    return _json_lines(text[at + len(_LLAMA_LEAD):])


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


_REACT_HEADER = re.compile(r"(?:have access to|can use|may use|available tools|following tools)[^\n]*:[ \t]*\r?\n", re.IGNORECASE)
_REACT_END = re.compile(r"^[ \t]*(?:Use the following format|Question:|Thought:|Action:|Action Input:|Begin!|To use a tool)",
                        re.MULTILINE)
_REACT_LINE = re.compile(r"^[ \t]*(?:[-*•][ \t]*|\d+[.)][ \t]*)?`?([A-Za-z_][\w.\-]{0,63})`?(?:\([^)\n]*\))?[ \t]*:[ \t]*(.*)$")
_REACT_ARGS = re.compile(r",?[ \t]*args:[ \t]*(?=\{)|[ \t]*Parameters:[ \t]*(?=\[)")
_REACT_PAPER_TOOL = re.compile(r"\(\d+\)[ \t]*([A-Za-z_][\w.\-]{0,63})\[([A-Za-z_]\w{0,63})\][ \t]*,?[ \t]*([^\n]*)")
_REACT_ONE_OF = re.compile(r"Action[ \t]*:[^\n]*?\bone of[ \t]*\[([^\]\n]*)\]")


def _qwen_react_params(items: list[Any]) -> dict[str, Any]:
    """Qwen's ReAct prompt lists parameters as ``[{"name", "description", "required", "schema"}]``."""
    props: dict[str, Any] = {}
    required: list[str] = []
    for it in items:
        if isinstance(it, dict) and isinstance(it.get("name"), str):
            prop = dict(it["schema"]) if isinstance(it.get("schema"), dict) else {}
            if isinstance(it.get("description"), str):
                prop.setdefault("description", it["description"])
            props[it["name"]] = prop
            if it.get("required") is True:
                required.append(it["name"])
    return {"properties": props, "required": required} if props else {}


def _react_tool(name: str, desc: str, params: Any = None) -> dict[str, Any]:
    """A tool read from a ReAct prompt; without a schema its parameters are open (any arguments fit)."""
    if isinstance(params, list):
        params = _qwen_react_params(params)
    if isinstance(params, dict) and params:
        props = params.get("properties") if isinstance(params.get("properties"), dict) else params
        schema: dict[str, Any] = {"type": "object", "properties": props}
        if isinstance(params.get("required"), list):
            schema["required"] = params["required"]
        return {"name": name, "description": desc, "parameters": schema}
    return {"name": name, "description": desc, "parameters": {"type": "object", "properties": {},
                                                              "additionalProperties": True}}


def _react_tools(text: str) -> list[dict[str, Any]] | None:
    """The tool list of a ReAct prompt: after "You have access to the following tools:" one tool per line as
    ``name: description`` (LangChain's rendering, optionally ``, args: {json}``), one JSON schema per line, or
    both; plus the names of "Action: ... should be one of [a, b]" (tools with open parameters)."""
    if "Observation" not in text and "Action Input" not in text:
        return None  # (a ReAct prompt teaches the Observation or the Action Input step)
    tools: dict[str, dict[str, Any]] = {}
    dec = json.JSONDecoder()
    for hm in _REACT_HEADER.finditer(text):
        em = _REACT_END.search(text, hm.end())
        block = text[hm.end():em.start() if em else len(text)]
        for line in block.splitlines():
            stripped = line.strip()
            if not stripped:
                continue
            if stripped[0] in "{[":
                found = _json_lines(stripped)
                for t in found or ():
                    tools.setdefault(t["name"], t)
                continue
            m = _REACT_LINE.match(line)
            if m is None:
                continue
            desc, params = m.group(2).strip(), None
            am = _REACT_ARGS.search(desc)
            if am is not None:
                try:
                    params, _end = dec.raw_decode(desc, am.end())
                except (json.JSONDecodeError, RecursionError):
                    params = None
                if isinstance(params, (dict, list)) and nesting_depth(params) > MAX_SCHEMA_DEPTH:
                    params = None
                desc = desc[:am.start()].strip()
            tools.setdefault(m.group(1), _react_tool(m.group(1), desc, params))
        if tools:
            break
    for pm in _REACT_PAPER_TOOL.finditer(text):  # the ReAct paper's "(1) Search[entity], which searches ..."
        tools.setdefault(pm.group(1), _react_tool(pm.group(1), pm.group(3).strip(), {
            "properties": {pm.group(2): {"type": "string"}}, "required": [pm.group(2)]}))
    om = _REACT_ONE_OF.search(text)
    if om is not None:
        names = [nm for nm in (raw.strip().strip("'\"` ") for raw in om.group(1).split(","))
                 if nm and re.fullmatch(r"[A-Za-z_][\w.\-]{0,63}", nm)]
        if any(nm in tools for nm in names):  # the prompt's own list of actions: a listed line not in it
            tools = {k: v for k, v in tools.items() if k in names}  # ("Note: ...") is no tool
        for nm in names:
            tools.setdefault(nm, _react_tool(nm, ""))
    return list(tools.values()) or None


#: family system blocks tried when the prompt has no ``<tools>`` block, after the call formats' own readers
#: (:func:`_family_blocks`): (literal, reader, tools_source); the ReAct list last (its literal is plain text another
#: family's prompt may quote)
_FAMILY_BLOCKS = (
    ("tool_declare", _kimi_tools, "prompt_kimi"),
    ("<functions>", _functions_block, "prompt_dsml"),
    (_LLAMA_LEAD, _llama_tools, "prompt_llama"),
    ("namespace functions {", _typescript_tools, "prompt_typescript"),
    ("Parameters:", _deepseek_tools, "prompt_deepseek"),
    ("Action", _react_tools, "prompt_react"),
)

#: a reader of one rendering of tool declarations: the schemas, or None
Reader = Callable[[str], list[dict[str, Any]] | None]


@lru_cache(maxsize=1)
def _family_blocks() -> tuple[tuple[str, Reader, str | None], ...]:
    """The call formats that read their own tool declarations (``ToolFormat.read_declarations``), in detection
    order, then :data:`_FAMILY_BLOCKS`."""
    from trajlab.toolcalls.formats import FORMATS

    own = tuple((f.declarations_literal, f.read_declarations, f.tools_source) for f in FORMATS.values()
                if f.declarations_literal)
    return own + _FAMILY_BLOCKS


@lru_cache(maxsize=1024)
def _family_tools(input_text: str) -> tuple[str | None, str | None]:
    for lit, reader, src in _family_blocks():
        if lit in input_text:
            tools = reader(input_text)
            if tools:
                return json.dumps(tools, ensure_ascii=False, sort_keys=True), src
    return None, None


#: a prompt that declares tools (in any form): the ReAct and family phrasings, a ``<tools>`` / ``<functions>`` block,
#: a ``# Tools`` heading, OpenAI ``"type": "function"`` objects, Mistral's ``[AVAILABLE_TOOLS]``. A trajectory whose
#: prompt matches while no format and no schema was read declares its tools in a form trajlab does not read (the
#: scan summary says so). Valid as a Python and a Rust (polars) regex.
DECLARES_TOOLS_PATTERN = (
    r"(?im)(?:you have access to (?:the following |these )?(?:tools|functions|apis)|"
    r"(?:available|following) (?:tools|functions)[ \t]*:|<tools>|<functions>|^#{1,3} ?tools[ \t]*$|"
    r"\"type\"[ \t]*:[ \t]*\"function\"|\[AVAILABLE_TOOLS\])"
)


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


def _too_deep(p: Path) -> InputError:
    return InputError(f"{param('tools')} file {p} nests lists or objects more than {MAX_SCHEMA_DEPTH} levels deep, "
                      "deeper than any tool schema: pass the file of the run's tool schemas")


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
            if "while increasing" in str(e) and "level" in str(e):  # libyaml's own nesting limit
                raise _too_deep(p) from None
            raise InputError(f"{param('tools')} file {p} is not valid YAML: {e}") from None
        except RecursionError:  # the pure-Python parser's
            raise _too_deep(p) from None
    else:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise InputError(f"{param('tools')} file {p} is not valid JSON (line {e.lineno}: {e.msg})") from None
        except RecursionError:
            raise _too_deep(p) from None
    if nesting_depth(data, MAX_SCHEMA_DEPTH + 3) > MAX_SCHEMA_DEPTH + 3:  # (+3: the list, the verl config's wrappers)
        raise _too_deep(p)
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
