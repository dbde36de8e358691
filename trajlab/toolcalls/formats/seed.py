"""The Seed-OSS call format (ByteDance, verl parser ``seed``): one ``<seed:tool_call>`` wrapper per call.

Grammar (the llama.cpp copy of the ``ByteDance-Seed-OSS`` chat template)::

    <seed:tool_call>\\n<function=NAME>\\n<parameter=K>V</parameter>\\n...</function>\\n</seed:tool_call>

The reader is :mod:`trajlab.toolcalls.formats.wrapped_xml`. Values are raw text; verl's ``seed`` parser ``json.loads``
the stripped text (else keeps it). The template renders a non-string value with Python's ``str`` (``True``,
``{'a': 1}``), which ``json.loads`` cannot read back: such a value for a non-string parameter is
``type_mismatch/seed_python_literal`` (verl passes the string). A declared string that ``json.loads`` turns into
another type is ``verl_conversion_divergence`` (:meth:`SeedFormat.check_value`, shared with GLM's rule).
``<seed:tool_call>``, ``</seed:tool_call>``, ``<seed:think>`` and ``</seed:think>`` are special tokens: a
``skip_special_tokens=True`` dump shows the bare ``<function=...>`` blocks, which this reader takes as Seed calls
when the trajectory is Seed's (detected from the prompt's ``Function:\\ndef NAME(`` tool block).
"""

from __future__ import annotations

import json
import re
from typing import Any

from trajlab.toolcalls.draft import CallDraft, Issue
from trajlab.toolcalls.formats.base import ToolFormat
from trajlab.toolcalls.formats.glm import GlmFormat
from trajlab.toolcalls.formats.wrapped_xml import XmlGrammar, render, scan
from trajlab.toolcalls.ruleset import RuleSet
from trajlab.toolcalls.schema import ToolIndex
from trajlab.toolcalls.type_checks import TypeCheck
from trajlab.toolcalls.verl_call import VerlCall, json_value, received

#: the special-token markers a turn decoded with them kept shows (Seed generates its end-of-turn token after every
#: call): a turn with none is a ``skip_special_tokens=True`` decode
KEPT_MARKERS = ("<seed:", "</seed:")
GRAMMAR = XmlGrammar("seed", "seed:tool_call", "function", "parameter", by_attr=False, one_call_per_wrapper=True,
                     kept_markers=KEPT_MARKERS)
_VERL_BLOCK = re.compile(r"<seed:tool_call>(.*?)</seed:tool_call>", re.DOTALL)
_VERL_FUNCTION = re.compile(r"<function=([^>\n]+)>\s*(.*?)</function>", re.DOTALL)
_VERL_PARAMETER = re.compile(r"<parameter=([^>\n]+)>(.*?)</parameter>", re.DOTALL)
#: the tool block's ``Function:\ndef NAME(p: str):`` entries and their docstrings' ``- p (str) [必填]: ...`` lines
_DEF = re.compile(r"^Function:\ndef ([\w.\-]+)\((.*?)\):\n(.*?)\n    \"\"\"\n(?=\n|\Z)", re.MULTILINE | re.DOTALL)
_ARG = re.compile(r"^    - ([\w.\-]+) \((\w+)\)( \[必填\]| \[选填\])?: ?(.*)$", re.MULTILINE)
_SCHEMA_TYPES = {"str": "string", "int": "integer", "bool": "boolean", "list": "array"}
_PY_TYPES = {"string": "str", "integer": "int", "number": "int", "boolean": "bool", "array": "list"}
_PY_LITERAL = re.compile(r"True|False|None|[\[{].*'.*[\]}]", re.DOTALL)
_GLM_RULE = GlmFormat("seed", "\n", "")


def _value_text(v: Any) -> str:
    """A value as a repair or a training target writes it: strings raw, anything else JSON -- what verl's
    ``json.loads`` reads back as meant (the template's Python ``str`` would give ``True``, read as a string)."""
    return v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)


class SeedFormat(ToolFormat):
    """``<seed:tool_call><function=NAME><parameter=K>V</parameter></function></seed:tool_call>``."""

    name = "seed"
    family = "Seed-OSS"
    tools_source = "prompt_seed"
    declarations_literal = "Function:\ndef "
    verl_parser = "seed"
    verl_markers = KEPT_MARKERS

    def find_calls(self, text: str, lo: int, hi: int, rs: RuleSet, excluded: list[tuple[int, int]],
                   spans: bool = True, fast: bool = True) -> tuple[list[CallDraft], list[Issue]]:
        return scan(GRAMMAR, text, lo, hi, rs, excluded)

    def render(self, name: str, arguments: dict[str, Any]) -> str:
        return render(GRAMMAR, [(name, [(str(k), _value_text(v)) for k, v in arguments.items()])])

    def render_raw(self, name: str, params: list[tuple[str, str]]) -> str:
        return render(GRAMMAR, [(name, params)])

    def check_value(self, written: str, value: Any, prop: Any) -> Any:
        """A Python literal (``True``, ``{'a': 1}``) for a non-string parameter: verl passes the text; otherwise
        GLM's rule (raw strings, ``json.loads`` for the rest)."""
        types = prop.get("type") if isinstance(prop, dict) else None
        if isinstance(value, str) and types not in (None, "string") and _PY_LITERAL.fullmatch(written.strip()):
            return TypeCheck(False, "seed_python_literal", str(types), value)
        return _GLM_RULE.check_value(written, value, prop)

    def intended(self, written: str, value: Any, prop: Any) -> Any:
        return _GLM_RULE.intended(written, value, prop)

    def read_declarations(self, text: str) -> list[dict[str, Any]] | None:
        """``Function:\\ndef NAME(p: str, q: int):`` with a docstring listing ``- p (str) [必填]: ...``
        (必填 = required; the Python types are lossy: ``int`` stands for integer and number)."""
        tools = []
        for m in _DEF.finditer(text):
            doc = m.group(3)
            desc = doc.split("Args:", 1)[0].strip().strip('"').strip()
            props: dict[str, Any] = {}
            required = []
            for a in _ARG.finditer(doc):
                t = _SCHEMA_TYPES.get(a.group(2))
                props[a.group(1)] = ({"type": t} if t else {}) | ({"description": a.group(4)} if a.group(4) else {})
                if a.group(3) == " [必填]":
                    required.append(a.group(1))
            tools.append({"name": m.group(1), "description": desc,
                          "parameters": {"type": "object", "properties": props, "required": required}})
        return tools or None

    def render_declarations(self, tools: list[dict[str, Any]]) -> str | None:
        """The tool block body: a Python ``def`` per tool with an ``Args:`` docstring (the template's layout)."""
        out = []
        for t in tools:
            params = t.get("parameters") or {}
            props = params.get("properties") or {}
            req = set(params.get("required") or [])

            def py(p: Any) -> str:
                return _PY_TYPES.get(str(p.get("type")) if isinstance(p, dict) else "", "Any")
            sig = ", ".join(f"{k}: {py(p)}" for k, p in props.items())
            args = "".join(f"\n    - {k} ({py(p)}) {'[必填]' if k in req else '[选填]'}: "
                           f"{(p.get('description') if isinstance(p, dict) else '') or ''}" for k, p in props.items())
            doc = f"\n\n    Args:{args}" if props else ""
            out.append(f'\n\n\nFunction:\ndef {t["name"]}({sig}):\n    """\n    {t.get("description") or ""}{doc}\n\n    """')
        return "".join(out)

    def verl_read(self, text: str, index: ToolIndex | None) -> list[VerlCall] | None:
        """verl's ``SeedToolParser``: nothing unless the text holds both ``<seed:tool_call>`` and
        ``</seed:tool_call>``; in each lazy wrapper block only the *first*
        ``<function=([^>\\n]+)>\\s*(.*?)</function>`` (name stripped, attributes kept in it), its parameters
        ``<parameter=([^>\\n]+)>(.*?)</parameter>`` (keys stripped), values ``json.loads`` of the stripped text,
        else the stripped text."""
        out: list[VerlCall] = []
        if "<seed:tool_call>" not in text or "</seed:tool_call>" not in text:
            return out
        for bm in _VERL_BLOCK.finditer(text):
            fm = _VERL_FUNCTION.search(text, bm.start(1), bm.end(1))
            if fm is None:
                continue
            args = {k.strip(): json_value(v) for k, v in _VERL_PARAMETER.findall(fm.group(2))}
            try:
                out.append(VerlCall(fm.group(1).strip(), received(args), fm.start(), fm.end()))
            except (ValueError, RecursionError):  # verl logs "Failed to decode Seed tool call"
                continue
        return out


FORMATS_PROVIDED: tuple[ToolFormat, ...] = (SeedFormat(),)
