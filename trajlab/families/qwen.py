"""The Qwen family (Qwen2.5, Qwen3, Qwen3-Next, Qwen3-Coder, Qwen3.5/3.6): ChatML turns, two call formats.

ChatML wraps every message in ``<|im_start|>ROLE\\n...<|im_end|>\\n`` (:mod:`trajlab.families.chatml` holds the
tokens); tool responses come back as a ``user`` message of ``<tool_response>`` blocks. verl decodes with special
tokens skipped, so a dump shows ``\\nuser\\n<tool_response>\\n...\\n</tool_response>\\nassistant\\n`` between turns,
which :mod:`trajlab.ingest.turns` splits with ``str.find`` (``pattern=None`` below) and
:mod:`trajlab.rescore.stream` rebuilds token for token (``rebuild="chatml"``).
"""

from __future__ import annotations

from trajlab.families.base import TokenLayout, ToolBlock
from trajlab.families.chatml import ENDOFTEXT, IM_END, IM_START

NAME = "qwen"
MODELS = "Qwen2.5, Qwen3, Qwen3-Next (hermes); Qwen3-Coder, Qwen3.5, Qwen3.6 (qwen3_coder)"
#: qwen3_coder before hermes: ``<function=`` is the sharper marker of the two
CALL_FORMATS = ("qwen3_coder", "hermes")
ROLE_HEADERS = {
    "system": f"{IM_START}system\n", "user": f"{IM_START}user\n", "assistant": f"{IM_START}assistant\n",
    "tool": f"{IM_START}user\n<tool_response>\n",
}
SPECIAL_TOKENS = (IM_START, IM_END, ENDOFTEXT)
TOOL_BLOCKS = (ToolBlock("user\n<tool_response>", None),)
LAYOUT = TokenLayout("chatml", kept_markers=(IM_START,), turn_end_call=IM_END, turn_end_final=IM_END)
CONTROL_TOKENS = "qwen"
#: the name its control-token set had (`families: qwen_chatml:` in a user pack's control_tokens.yaml still works)
ALIASES = ("qwen_chatml",)
#: ``--tokenizer`` alias -> the built-in real tokenizer it loads (:mod:`trajlab.rescore.qwen_tokenizers`)
TOKENIZER_ALIASES = {
    "qwen3": "qwen3", "qwen2.5": "qwen3", "qwen2": "qwen3",
    "qwen3.5": "qwen3_5", "qwen3_5": "qwen3_5", "qwen3.6": "qwen3_5", "qwen3_6": "qwen3_5",
}
