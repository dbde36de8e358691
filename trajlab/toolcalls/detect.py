"""Which call format a trajectory uses, and whether its prompt forbids text after a call.

The prompt's instructions decide first (the Qwen3.5/3.6/Qwen3-Coder block with
``<function=example_function_name>`` vs the Hermes block ``{"name": <function-name>, "arguments":
<args-json-object>}``, GLM's ``<tool_call>{function-name}<arg_key>...`` block, Kimi's ``tool_declare`` turn, the
DeepSeek-V3.1 tool-use block, gpt-oss's ``namespace functions {``; markers are data in
``rules/formats/<format>.yaml``), then how the tools are rendered (Qwen3-Coder's XML tool list, Kimi's
``tool_declare`` array, DeepSeek's ``### NAME`` blocks, harmony's TypeScript namespace: the format whose
``tools_source`` names the rendering, :data:`~trajlab.toolcalls.formats.SOURCE_FORMATS`), then what the output
itself contains. ReAct instructions (``Action:`` / ``Action Input:``, plain text a prompt may merely quote) count
only when no family's instructions or tool block are in the prompt (:data:`FALLBACK_FORMATS`).
"""

from __future__ import annotations

import re

from trajlab.toolcalls.analyze import detect_output_format
from trajlab.toolcalls.formats import FORMATS, SOURCE_FORMATS
from trajlab.toolcalls.ruleset import get_ruleset

#: formats whose instructions are plain text a prompt may merely quote (ReAct's "Action Input:"): their markers
#: count only when no other family's instructions or tool block are in the prompt
FALLBACK_FORMATS: tuple[str, ...] = ("react",)
_REACT_ACTION = re.compile(r"(?:^|\n)[ \t]*Action[ \t]*\d*[ \t]*:")
_NO_SUFFIX = re.compile(r"\bONLY\s+reply\b[^\n]{0,200}?\bNO\s+suffix", re.IGNORECASE)


def detect_tool_format(input_text: str, output_text: str = "", *, tools_source: str | None = None) -> str:
    """The call format (a name of :data:`~trajlab.toolcalls.formats.FORMATS`, or ``none``) of a trajectory with
    this prompt and output.

    When a prompt carries both instruction blocks, the one written last wins (it is the one the template
    appended for this conversation).
    """
    rs = get_ruleset(())
    text = input_text or ""
    best, best_pos = "none", -1
    for name, markers in rs.prompt_markers.items():
        if name not in FORMATS or name in FALLBACK_FORMATS:
            continue
        for m in markers:
            pos = text.rfind(m)
            if pos > best_pos:
                best, best_pos = name, pos
    if best != "none":
        return best
    if tools_source in SOURCE_FORMATS:
        return SOURCE_FORMATS[tools_source]
    for name in FALLBACK_FORMATS:  # plain-text instructions (ReAct): only where no family's own block is written
        if any(m in text for m in rs.prompt_markers.get(name, ())) and _react_prompt(text):
            return name
    return detect_output_format(output_text or "", rs) if output_text else "none"


def _react_prompt(text: str) -> bool:
    """Whether the prompt teaches the ReAct steps: an ``Action:`` line as well as the ``Action Input:`` marker."""
    return _REACT_ACTION.search(text) is not None


def prompt_forbids_suffix(input_text: str) -> bool:
    """True when the prompt says to reply ONLY with the call, with NO suffix (Qwen3-Coder / Qwen3.5 / 3.6)."""
    return bool(_NO_SUFFIX.search(input_text or ""))
