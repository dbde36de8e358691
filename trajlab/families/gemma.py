"""The Gemma 4 family (Google Gemma 4): ``<|turn>ROLE\\n...<turn|>`` turns, ``<|tool_call>...<tool_call|>`` calls.

``<tool_call|>`` is a stop token, so the tool's answer follows the call directly as
``<|tool_response>response:NAME{...}<tool_response|>`` (no role header). The turn, channel and call markers are
special tokens; a ``skip_special_tokens=True`` dump loses them (and the call wrappers), so it is scored as plain
text.
"""

from __future__ import annotations

import re

from trajlab.families.base import TokenLayout, ToolBlock

NAME = "gemma"
MODELS = "Gemma 4"
CALL_FORMATS = ("gemma4",)
ROLE_HEADERS = {"system": "<|turn>system\n", "user": "<|turn>user\n", "assistant": "<|turn>model\n",
                "tool": "<|tool_response>"}
SPECIAL_TOKENS = ("<bos>", "<|turn>", "<turn|>", "<|channel>", "<channel|>", "<|tool_call>", "<tool_call|>",
                  "<|tool_response>", "<tool_response|>", '<|"|>')
TOOL_BLOCKS = (
    ToolBlock("<|tool_response>", re.compile(r"(?:<\|tool_response>.*?(?:<tool_response\|>|\Z))+", re.DOTALL)),
)
LAYOUT = TokenLayout("none", kept_markers=("<|turn>", "<turn|>", "<|tool_call>"))
CONTROL_TOKENS = "gemma4"
TOKENIZER_ALIASES: dict[str, str] = {}
