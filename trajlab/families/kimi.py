"""The Kimi family (Kimi-K2, K2-Thinking): ``<|im_system|>``/``<|im_assistant|>`` headers around ``<|im_middle|>``.

Kimi's markers are special tokens and verl decodes Kimi with them kept, or a stripped dump keeps only the call id
and JSON (``functions.NAME:0{...}tool## Return of functions.NAME:0\\n...assistant``, call-formats.md §3). Both
shapes of the tool-result block are recognised; the stripped layout is not rebuilt for rescoring.
"""

from __future__ import annotations

import re

from trajlab.families.base import TokenLayout, ToolBlock

NAME = "kimi"
MODELS = "Kimi-K2, Kimi-K2-Thinking"
CALL_FORMATS = ("kimi_k2",)
ROLE_HEADERS = {"system": "<|im_system|>system<|im_middle|>", "user": "<|im_user|>user<|im_middle|>",
                "assistant": "<|im_assistant|>assistant<|im_middle|>", "tool": "<|im_system|>tool<|im_middle|>"}
SPECIAL_TOKENS = ("<|im_system|>", "<|im_user|>", "<|im_assistant|>", "<|im_middle|>", "<|im_end|>",
                  "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>", "<|tool_call_begin|>",
                  "<|tool_call_argument_begin|>", "<|tool_call_end|>")
TOOL_BLOCKS = (
    ToolBlock("<|im_system|>tool<|im_middle|>", re.compile(
        r"(?:<\|im_end\|>)?(?:<\|im_system\|>tool<\|im_middle\|>.*?(?:<\|im_end\|>|\Z))+"
        r"(?:<\|im_assistant\|>assistant<\|im_middle\|>)?", re.DOTALL)),
    ToolBlock("tool## Return of ", re.compile(
        r"tool## Return of .*?(?:assistant(?=<think>|functions\.|[A-Z<\s]|\Z)|\Z)", re.DOTALL)),
)
LAYOUT = TokenLayout("none", kept_markers=("<|im_middle|>", "<|tool_call_begin|>"))
CONTROL_TOKENS = "kimi"
TOKENIZER_ALIASES: dict[str, str] = {}
