"""The DeepSeek family (V3.1, V3.1-Terminus, V3.2-Exp): full-width-bar markers, no header after a tool output.

Every tool marker (``<｜tool▁calls▁begin｜>``, ``<｜tool▁output▁begin｜>``, ``<｜User｜>``, ``<｜Assistant｜>``) is an
ordinary token, so a verl dump keeps them; only ``<｜begin▁of▁sentence｜>`` and ``<｜end▁of▁sentence｜>`` are special
(call-formats.md §4). The model continues right after ``<｜tool▁output▁end｜>``: no assistant header follows.
"""

from __future__ import annotations

import re

from trajlab.families.base import TokenLayout, ToolBlock

NAME = "deepseek"
MODELS = "DeepSeek-V3.1, V3.1-Terminus, V3.2-Exp (deepseek_v31); DeepSeek-V3.2 (deepseek_v32); DeepSeek-V4 (deepseek_v4)"
#: deepseek_v31's full-width-bar markers before DSML's (V3.2, V4: ``<｜DSML｜function_calls>`` / ``tool_calls``)
CALL_FORMATS = ("deepseek_v31", "deepseek_v32", "deepseek_v4")
ROLE_HEADERS = {"system": "<｜begin▁of▁sentence｜>", "user": "<｜User｜>", "assistant": "<｜Assistant｜>",
                "tool": "<｜tool▁output▁begin｜>"}
SPECIAL_TOKENS = ("<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>")
TOOL_BLOCKS = (
    ToolBlock("<｜tool▁output▁begin｜>", re.compile(
        r"(?:<｜end▁of▁sentence｜>)?(?:<｜tool▁outputs▁begin｜>)?(?:<｜tool▁output▁begin｜>.*?(?:<｜tool▁output▁end｜>|\Z))+"
        r"(?:<｜tool▁outputs▁end｜>)?", re.DOTALL)),
    ToolBlock("<function_results>", re.compile(  # DSML (V3.2, V4)
        r"(?:<｜end▁of▁sentence｜>)?[ \t\r\n]*<function_results>.*?(?:</function_results>[ \t\r\n]*(?:</?think>[ \t\r\n]*)?|\Z)",
        re.DOTALL)),
)
LAYOUT = TokenLayout("tokens", kept_markers=("<｜end▁of▁sentence｜>",), bos="<｜begin▁of▁sentence｜>",
                     turn_end_call="<｜end▁of▁sentence｜>", turn_end_final="<｜end▁of▁sentence｜>")
CONTROL_TOKENS = "deepseek"
TOKENIZER_ALIASES: dict[str, str] = {}
