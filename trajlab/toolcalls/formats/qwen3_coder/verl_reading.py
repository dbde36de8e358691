"""verl 0.9.1's ``qwen3_coder`` reading of a turn (``Qwen3XMLToolParser``), reproduced with our own code.

Nothing unless the text holds ``<tool_call>``; blocks ``<tool_call>(.*?)</tool_call>|<tool_call>(.*?)$``; in each
block ``<function=(.*?)</function>|<function=(.*)$``; the name is the text up to the first ``>`` (verbatim; a
function without ``>`` is skipped); parameters ``<parameter=(.*?)</parameter>|<parameter=(.*?)$`` (no lookahead to
the next ``<parameter=``), name up to the first ``>`` (a parameter without one is skipped), the value without one
leading and one trailing newline, converted by :func:`~trajlab.toolcalls.verl_conversion.verl_convert` with the
properties of the tool of that exact name (none for an unknown name); a repeated parameter keeps the last value.
All regexes are DOTALL.
"""

from __future__ import annotations

import re
from typing import Any

from trajlab.toolcalls.schema import ToolIndex
from trajlab.toolcalls.verl_call import VerlCall
from trajlab.toolcalls.verl_conversion import verl_convert

_XML_BLOCK = re.compile(r"<tool_call>(.*?)</tool_call>|<tool_call>(.*?)$", re.DOTALL)
_XML_FUNCTION = re.compile(r"<function=(.*?)</function>|<function=(.*)$", re.DOTALL)
_XML_PARAMETER = re.compile(r"<parameter=(.*?)</parameter>|<parameter=(.*?)$", re.DOTALL)
_NO_PROPS: dict[str, Any] = {}


def verl_qwen3_coder_calls(text: str, index: ToolIndex | None) -> list[VerlCall]:
    """The calls verl's ``qwen3_coder`` parser executes for ``text``; offsets are into ``text``."""
    out: list[VerlCall] = []
    if "<tool_call>" not in text:
        return out
    for bm in _XML_BLOCK.finditer(text):
        g = 1 if bm.group(1) is not None else 2
        bs = bm.start(g)
        block = bm.group(g)
        for fm in _XML_FUNCTION.finditer(block):
            fg = 1 if fm.group(1) is not None else 2
            body = fm.group(fg)
            gt = body.find(">")
            if gt < 0:  # 0.9.1: "function without `>`", skipped with a warning
                continue
            name = body[:gt]
            tool = index.tools.get(name) if index is not None else None
            props = tool.properties if tool is not None else _NO_PROPS
            args: dict[str, Any] = {}
            for pm in _XML_PARAMETER.finditer(body, gt + 1):
                ptext = pm.group(1) if pm.group(1) else (pm.group(2) or "")
                pgt = ptext.find(">")
                if pgt < 0:  # 0.9.1: skipped with a warning
                    continue
                pname = ptext[:pgt]
                value = ptext[pgt + 1:]
                if value.startswith("\n"):
                    value = value[1:]
                if value.endswith("\n"):
                    value = value[:-1]
                args[pname] = verl_convert(value, pname, props)
            out.append(VerlCall(name, args, bs + fm.start(), bs + fm.end()))
    return out
