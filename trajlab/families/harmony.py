"""The harmony family (gpt-oss-20b, gpt-oss-120b): ``<|start|>ROLE<|channel|>CH<|message|>...<|end|>`` messages.

A call is a ``commentary`` message to ``functions.NAME``; the result comes back as a message from
``functions.NAME to=assistant``; the generation prompt is ``<|start|>assistant`` (call-formats.md §1). A dump
decoded with the markers stripped reads ``functions.NAME to=assistantcommentary...assistant``; that layout is not
rebuilt for rescoring (plain text).
"""

from __future__ import annotations

import re

from trajlab.families.base import TokenLayout, ToolBlock

NAME = "harmony"
MODELS = "gpt-oss-20b, gpt-oss-120b"
CALL_FORMATS = ("gpt_oss",)
ROLE_HEADERS = {"system": "<|start|>system<|message|>", "developer": "<|start|>developer<|message|>",
                "user": "<|start|>user<|message|>", "assistant": "<|start|>assistant",
                "tool": "<|start|>functions.NAME to=assistant<|channel|>commentary<|message|>"}
SPECIAL_TOKENS = ("<|start|>", "<|end|>", "<|message|>", "<|channel|>", "<|constrain|>", "<|call|>", "<|return|>",
                  "<|startoftext|>", "<|endoftext|>")
TOOL_BLOCKS = (
    ToolBlock(" to=assistant<|channel|>", re.compile(
        r"(?:<\|start\|>[^<]*? to=assistant<\|channel\|>[^<]*<\|message\|>.*?(?:<\|end\|>|\Z))+"
        r"(?:<\|start\|>assistant)?", re.DOTALL)),
    ToolBlock(" to=assistant", re.compile(
        r"functions\.\S+? to=assistant(?:commentary)?.*?(?:assistant(?=analysis|commentary|final)|\Z)", re.DOTALL)),
)
LAYOUT = TokenLayout("none", kept_markers=("<|message|>", "<|channel|>"))
CONTROL_TOKENS = "harmony"
TOKENIZER_ALIASES: dict[str, str] = {}
