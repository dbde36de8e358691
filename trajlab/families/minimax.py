"""The MiniMax-M2 family (MiniMax-M2, M2.5): ``]~b]ROLE\\n...[e~[`` turns, ``<minimax:tool_call>`` calls.

Tool responses come back as one ``]~b]tool`` message of ``<response>`` blocks; the generation prompt is
``]~b]ai\\n`` (with ``<think>\\n`` after it). ``]~!b[``, ``]~b]``, ``[e~[`` and the call wrappers are special
tokens: a ``skip_special_tokens=True`` dump keeps ``tool\\n<response>...ai\\n`` between turns, and that layout is
scored as plain text.
"""

from __future__ import annotations

import re

from trajlab.families.base import TokenLayout, ToolBlock

NAME = "minimax_m2"
MODELS = "MiniMax-M2, MiniMax-M2.5"
CALL_FORMATS = ("minimax",)
ROLE_HEADERS = {"system": "]~!b[]~b]system\n", "user": "]~b]user\n", "assistant": "]~b]ai\n",
                "tool": "]~b]tool\n<response>"}
SPECIAL_TOKENS = ("]~!b[", "]~b]", "[e~[", "<minimax:tool_call>", "</minimax:tool_call>")
TOOL_BLOCKS = (
    ToolBlock("]~b]tool", re.compile(  # markers kept
        r"\n?\]~b\]tool(?:\n<response>.*?(?:</response>|\Z))+(?:\[e~\[\n?)?(?:\]~b\]ai\n(?:<think>\n)?)?",
        re.DOTALL)),
    ToolBlock("tool\n<response>", re.compile(  # markers stripped
        r"\n?tool(?:\n<response>.*?(?:</response>|\Z))+\n?(?:ai\n(?:<think>\n)?)?", re.DOTALL)),
)
LAYOUT = TokenLayout("none", kept_markers=("]~b]", "[e~[", "<minimax:tool_call>"))
CONTROL_TOKENS = "minimax"
TOKENIZER_ALIASES: dict[str, str] = {}
