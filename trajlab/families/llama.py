"""The Llama family (Llama 3.1, 3.2, 3.3, Llama 4): header-token turns, JSON calls, tool results in ``ipython``.

Llama 3.x writes ``<|start_header_id|>ROLE<|end_header_id|>\\n\\n...<|eot_id|>`` (Llama 4: ``<|header_start|>``,
``<|header_end|>``, ``<|eot|>``); a tool result is an ``ipython`` turn. The header and end-of-turn tokens are
special: a ``skip_special_tokens=True`` dump keeps the bare role words (``ipython\\n\\n...assistant\\n\\n``), which
are not rebuilt for rescoring (plain text).
"""

from __future__ import annotations

import re

from trajlab.families.base import TokenLayout, ToolBlock

NAME = "llama"
MODELS = "Llama 3.1, 3.2, 3.3, Llama 4"
CALL_FORMATS = ("llama3_json",)
ROLE_HEADERS = {"system": "<|start_header_id|>system<|end_header_id|>\n\n",
                "user": "<|start_header_id|>user<|end_header_id|>\n\n",
                "assistant": "<|start_header_id|>assistant<|end_header_id|>\n\n",
                "tool": "<|start_header_id|>ipython<|end_header_id|>\n\n"}
SPECIAL_TOKENS = ("<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>", "<|eom_id|>",
                  "<|python_tag|>", "<|header_start|>", "<|header_end|>", "<|eot|>", "<|eom|>")
TOOL_BLOCKS = (
    ToolBlock("ipython", re.compile(
        r"(?:<\|eo[mt](?:_id)?\|>)?(?:<\|(?:start_header_id|header_start)\|>)?ipython(?:<\|(?:end_header_id|header_end)\|>)?"
        r"\n\n.*?(?:(?:<\|eot(?:_id)?\|>)?(?:<\|(?:start_header_id|header_start)\|>)?assistant"
        r"(?:<\|(?:end_header_id|header_end)\|>)?\n\n|\Z)", re.DOTALL)),
)
LAYOUT = TokenLayout("none", kept_markers=("<|eot_id|>", "<|start_header_id|>", "<|header_start|>"))
CONTROL_TOKENS = "generic"
TOKENIZER_ALIASES: dict[str, str] = {}
