"""The Seed-OSS family (ByteDance Seed-OSS-36B): ``<seed:bos>ROLE\\n...<seed:eos>`` turns, ``<seed:tool_call>`` calls.

A tool response comes back as a ``<seed:bos>tool\\n...<seed:eos>`` message and the generation prompt is
``<seed:bos>assistant\\n`` (call-formats.md §6). The ``<seed:...>`` markers are special tokens: a
``skip_special_tokens=True`` dump keeps ``</function>\\ntool\\n...assistant\\n`` between turns, and loses the call
wrappers too, so that layout is scored as plain text.
"""

from __future__ import annotations

import re

from trajlab.families.base import TokenLayout, ToolBlock

NAME = "seed_oss"
MODELS = "Seed-OSS-36B (ByteDance)"
CALL_FORMATS = ("seed",)
ROLE_HEADERS = {"system": "<seed:bos>system\n", "user": "<seed:bos>user\n", "assistant": "<seed:bos>assistant\n",
                "tool": "<seed:bos>tool\n"}
SPECIAL_TOKENS = ("<seed:bos>", "<seed:eos>", "<seed:think>", "</seed:think>", "<seed:tool_call>",
                  "</seed:tool_call>")
TOOL_BLOCKS = (
    ToolBlock("<seed:bos>tool\n", re.compile(
        r"(?:<seed:bos>tool\n.*?(?:<seed:eos>|\Z))+(?:<seed:bos>assistant\n)?", re.DOTALL)),  # markers kept
    ToolBlock("</function>\ntool\n", re.compile(  # markers stripped
        r"(?<=</function>\n)tool\n.*?(?:assistant\n|\Z)", re.DOTALL)),
)
LAYOUT = TokenLayout("none", kept_markers=("<seed:bos>", "<seed:eos>", "<seed:tool_call>"))
CONTROL_TOKENS = "seed"
TOKENIZER_ALIASES: dict[str, str] = {}
