"""The GLM family (GLM-4.5, 4.6, 4.7): ``<|role|>`` headers, ``<|observation|>`` before tool responses.

The role headers are special tokens a verl dump drops; the ``<tool_response>`` blocks and the call markup
(``<tool_call>NAME<arg_key>..</arg_key><arg_value>..</arg_value></tool_call>``) are ordinary tokens and survive
(call-formats.md §2). The model generates ``<|observation|>`` to stop for a tool call and ``<|user|>`` after its
last turn; the generation prompt is ``<|assistant|>``.
"""

from __future__ import annotations

import re

from trajlab.families.base import TokenLayout, ToolBlock

NAME = "glm"
MODELS = "GLM-4.5, GLM-4.6 (glm45); GLM-4.7 (glm47)"
CALL_FORMATS = ("glm45", "glm47")
ROLE_HEADERS = {"system": "<|system|>\n", "user": "<|user|>\n", "assistant": "<|assistant|>",
                "tool": "<|observation|>"}
SPECIAL_TOKENS = ("[gMASK]", "<sop>", "<|system|>", "<|user|>", "<|assistant|>", "<|observation|>", "<|endoftext|>")
TOOL_BLOCKS = (
    ToolBlock("<tool_response>", re.compile(
        r"(?:<\|observation\|>)?(?:[ \t\r\n]*<tool_response>.*?(?:</tool_response>|\Z))+(?:<\|assistant\|>)?",
        re.DOTALL), shared=True),
)
LAYOUT = TokenLayout("tokens", kept_markers=("<|observation|>", "<|assistant|>"), prompt_end="<|assistant|>",
                     turn_end_call="<|observation|>", turn_end_final="<|user|>")
CONTROL_TOKENS = "glm"
TOKENIZER_ALIASES: dict[str, str] = {}
