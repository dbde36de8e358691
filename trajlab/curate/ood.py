"""Format-OOD evaluation set (``--ood-eval``): held-back prompts with renamed tools and/or the other call format.

Interleaving SFT with RL is reported to hurt out-of-distribution *format* generalisation, so the pool comes with
a small set to measure that after training. It is built only from validation prompts (never trained on), each
in three variants:

* ``renamed``: every declared tool gets a new name (``rules/hints.yaml`` ``ood.renames``, else its snake_case
  words reversed: ``search_web`` → ``web_search``), same call format;
* ``reformatted``: same names, the tool block re-rendered for the other format (``qwen3_coder`` ↔ ``hermes``, or
  any format with ``--ood-format`` that has a template in ``ood.tool_blocks`` of ``rules/hints.yaml``; ``react``
  is LangChain's ReAct instructions with ``name: description, args: {...}`` tool lines; a format that declares its
  tools its own way renders them itself, ``ToolFormat.render_declarations``);
* ``renamed+reformatted``: both.

The system prompt keeps its own text; only its tool block (``# Tools`` header, ``<tools>`` list and the format
instructions that follow) is replaced by ``ood.tool_blocks[<format>]``; tool names are also replaced, as whole
words, in the rest of the prompt. ``reference`` is the first assistant turn of a clean trajectory of that prompt
with every call re-rendered (new names, target format), for teacher-forced scoring; null when there is none.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any

from trajlab.curate.conversation import Message, split_prompt
from trajlab.curate.hints import HintRules, fill
from trajlab.curate.samples import seeded_unit

VARIANTS = ("renamed", "reformatted", "renamed+reformatted")
_TOOLS_OPEN = re.compile(r"(?:^|\n)(<tools>)\n")

@dataclass
class OodSource:
    """One held-back prompt and what is known about it."""

    trajectory_id: str
    group_id: str
    prompt_key: str
    step: int | None
    input: str
    tool_format: str
    tools: list[dict[str, Any]]
    first_turn: str | None = None  # first assistant turn of a clean trajectory
    first_turn_calls: list[dict[str, Any]] = field(default_factory=list)  # its call rows (offsets in the turn)


def rename_tools(names: list[str], explicit: dict[str, str]) -> dict[str, str]:
    """Old → new tool names: explicit ones first, else reversed snake_case words, always unique and new."""
    taken = set(names)
    out: dict[str, str] = {}
    for n in names:
        new = explicit.get(n)
        if not new:
            parts = [p for p in n.split("_") if p]
            new = "_".join(reversed(parts)) if len(parts) > 1 else f"tool_{n}"
        base, k = new, 2
        while new in taken or new in out.values():
            new = f"{base}_{k}"
            k += 1
        out[n] = new
    return out


def _replace_names(text: str, mapping: dict[str, str]) -> str:
    if not mapping or not text:
        return text
    pat = re.compile(r"(?<![A-Za-z0-9_])(" + "|".join(re.escape(k) for k in sorted(mapping, key=len, reverse=True)) + r")(?![A-Za-z0-9_])")
    return pat.sub(lambda m: mapping[m.group(1)], text)


def locate_tool_block(system: str) -> tuple[int, int] | None:
    """``(start, end)`` of the tool block in a system text: ``# Tools`` header through the format instructions."""
    m = _TOOLS_OPEN.search(system)  # the list opens a line ("<tools></tools>" inside a sentence is prose)
    if m is None:
        return None
    i = m.start(1)
    j = system.find("\n</tools>", m.end())
    if j < 0:
        return None
    end = j + len("\n</tools>")
    h = system.rfind("# Tools", 0, i)
    start = h if h >= 0 and not system[h:i].count("\n\n\n") else i
    k = system.find("\n<tool_call>\n", end)  # the example call of the format instructions
    if 0 <= k - end <= 400:
        e = system.find("\n</tool_call>", k)
        if e >= 0:
            end = e + len("\n</tool_call>")
    rest = system[end:]
    if rest.lstrip().startswith("<IMPORTANT>"):
        e = system.find("</IMPORTANT>", end)
        if e >= 0:
            end = e + len("</IMPORTANT>")
    return start, end


def _ordered(tool: dict[str, Any]) -> dict[str, Any]:
    """A tool schema with the key order chat templates print (name, description, parameters, rest)."""
    head = {k: tool[k] for k in ("name", "description", "parameters") if k in tool}
    return {**head, **{k: v for k, v in tool.items() if k not in head}}


def _tool_lines(tools: list[dict[str, Any]]) -> str:
    return "\n".join(
        json.dumps({"type": "function", "function": _ordered(t)}, ensure_ascii=False) for t in tools
    )


def _tool_sections(tools: list[dict[str, Any]]) -> str:
    """DeepSeek-V3.1's tool block body: one ``### NAME`` section per tool (the model card's layout)."""
    return "".join(f"### {t['name']}\nDescription: {t.get('description') or ''}\n\nParameters: "
                   f"{json.dumps(t.get('parameters') or {}, ensure_ascii=False)}\n\n" for t in tools)


def _ts_type(prop: Any) -> str:
    if not isinstance(prop, dict):
        return "any"
    if isinstance(prop.get("enum"), list) and prop["enum"]:
        return " | ".join(json.dumps(v, ensure_ascii=False) for v in prop["enum"])
    t = prop.get("type")
    if t == "array":
        return _ts_type(prop.get("items") or {}) + "[]"
    return {"string": "string", "integer": "number", "number": "number", "boolean": "boolean",
            "object": "object"}.get(str(t), "any")


def _tool_typescript(tools: list[dict[str, Any]]) -> str:
    """harmony's TypeScript rendering of the tools (the gpt-oss chat template's ``namespace functions`` body)."""
    out = []
    for t in tools:
        params = t.get("parameters") or {}
        props = params.get("properties") or {}
        req = set(params.get("required") or [])
        head = f"// {t.get('description')}\n" if t.get("description") else ""
        if not props:
            out.append(f"{head}type {t['name']} = () => any;\n")
            continue
        body = "".join((f"// {p['description']}\n" if isinstance(p, dict) and p.get("description") else "")
                       + f"{k}{'' if k in req else '?'}: {_ts_type(p)},\n" for k, p in props.items())
        out.append(f"{head}type {t['name']} = (_: {{\n{body}}}) => any;\n")
    return "\n".join(out)


def _tool_react(tools: list[dict[str, Any]]) -> str:
    """The ReAct tool list as LangChain renders it with arguments: ``name: description, args: {properties}``."""
    out = []
    for t in tools:
        props = (t.get("parameters") or {}).get("properties") or {}
        desc = " ".join(str(t.get("description") or "").split())
        out.append(f"{t['name']}: {desc}, args: {json.dumps(props, ensure_ascii=False)}")
    return "\n".join(out)


def _declarations(tools: list[dict[str, Any]], fmt: str) -> str:
    """The ``{tool_declarations}`` placeholder: the tools as ``fmt``'s chat template declares them
    (``ToolFormat.render_declarations``), or "" for a format without a rendering of its own."""
    from trajlab.toolcalls.formats import FORMATS

    f = FORMATS.get(fmt)
    got = f.render_declarations([_ordered(t) for t in tools]) if f is not None else None
    return got if got is not None else ""


def render_system(rules: HintRules, own_text: str, tools: list[dict[str, Any]], fmt: str) -> str | None:
    blocks = (rules.ood or {}).get("tool_blocks") or {}
    tpl = blocks.get(fmt)
    if not isinstance(tpl, str):
        return None
    own = own_text.strip()
    return fill(
        tpl,
        {
            "tool_lines": _tool_lines(tools),
            "tool_array": json.dumps([{"type": "function", "function": _ordered(t)} for t in tools], ensure_ascii=False),
            "tool_sections": _tool_sections(tools),
            "tool_typescript": _tool_typescript(tools),
            "tool_react": _tool_react(tools),
            "tool_declarations": _declarations(tools, fmt),
            "tool_names": ", ".join(str(t.get("name")) for t in tools),
            "system": own,
            "system_block": own + "\n\n" if own else "",
            "system_suffix": "\n\n" + own if own else "",
        },
    )


def _reference(src: OodSource, mapping: dict[str, str], fmt: str) -> str | None:
    if src.first_turn is None:
        return None
    from trajlab.toolcalls import render_call

    text = src.first_turn
    pieces: list[str] = []
    pos = 0
    for c in sorted(src.first_turn_calls, key=lambda c: c["start"]):
        try:
            args = json.loads(c["arguments"]) if c.get("arguments") else None
        except ValueError:
            return None
        name = c.get("matched_tool") or c.get("function_name")
        if not isinstance(args, dict) or not name or c["start"] < pos:
            return None
        try:
            call = render_call(mapping.get(name, name), args, fmt)
        except Exception:
            return None
        pieces.append(_replace_names(text[pos : c["start"]], mapping))
        pieces.append(call)
        pos = c["end"]
    pieces.append(_replace_names(text[pos:], mapping))
    return "".join(pieces)


def build_ood_rows(sources: list[OodSource], rules: HintRules, seed: int, limit: int,
                   target_format: str | None = None) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Rows of ``ood_eval.parquet`` for up to ``limit`` held-back prompts.

    ``reformatted`` variants are rendered in ``target_format`` (any call format with a tool block in
    ``hints.yaml``) or, when it is None, in ``ood.other_format[<source format>]``.
    """
    other = (rules.ood or {}).get("other_format") or {}
    explicit = {str(k): str(v) for k, v in ((rules.ood or {}).get("renames") or {}).items()}
    stats = {"prompts": 0, "no_tools": 0, "no_tool_block": 0, "no_other_format": 0}
    rows: list[dict[str, Any]] = []
    for src in sorted(sources, key=lambda s: (seeded_unit(seed, "ood\x00" + s.prompt_key), s.prompt_key)):
        if stats["prompts"] >= limit:
            break
        if not src.tools:
            stats["no_tools"] += 1
            continue
        prompt = split_prompt(src.input)
        msgs = prompt.messages
        if not msgs or msgs[0].role != "system":
            stats["no_tool_block"] += 1
            continue
        loc = locate_tool_block(msgs[0].content)
        if loc is None:
            stats["no_tool_block"] += 1
            continue
        target_fmt = target_format or other.get(src.tool_format)
        if not target_fmt:
            stats["no_other_format"] += 1
            continue
        sysname = msgs[0].content
        own = (sysname[: loc[0]].rstrip() + "\n\n" + sysname[loc[1] :].lstrip()).strip()
        names = [t["name"] for t in src.tools]
        mapping_all = rename_tools(names, explicit)
        stats["prompts"] += 1
        for variant in VARIANTS:
            renamed = variant.startswith("renamed")
            fmt = target_fmt if variant.endswith("reformatted") else src.tool_format
            mapping = mapping_all if renamed else {}
            tools = copy.deepcopy(src.tools)
            for t in tools:
                t["name"] = mapping.get(t["name"], t["name"])
                if isinstance(t.get("description"), str):
                    t["description"] = _replace_names(t["description"], mapping)
            system = render_system(rules, _replace_names(own, mapping), tools, fmt)
            if system is None:
                continue
            new_msgs = [Message("system", system)] + [
                Message(m.role, _replace_names(m.content, mapping)) for m in msgs[1:]
            ]
            sid = hashlib.sha1(f"{src.prompt_key}\x00{variant}".encode()).hexdigest()[:16]
            rows.append(
                {
                    "sample_id": sid,
                    "variant": variant,
                    "prompt": [m.as_dict() for m in new_msgs],
                    "reference": _reference(src, mapping, fmt),
                    "tool_format": fmt,
                    "source_tool_format": src.tool_format,
                    "tools": json.dumps([{"type": "function", "function": t} for t in tools], ensure_ascii=False, sort_keys=True),
                    "rename_map": json.dumps(mapping, ensure_ascii=False, sort_keys=True),
                    "expected_tools": [t["name"] for t in tools],
                    "trajectory_id": src.trajectory_id,
                    "group_id": src.group_id,
                    "prompt_key": src.prompt_key,
                    "step": src.step,
                }
            )
    return rows, stats
