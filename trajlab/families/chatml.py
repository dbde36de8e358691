"""The ChatML chat scaffold (Qwen family): its special tokens, the regexes that find them, its plain rendering.

A ChatML conversation is ``<|im_start|>ROLE\\nCONTENT<|im_end|>\\n`` per message. verl decodes rollouts without
special tokens, so a dump shows only ``ROLE\\n`` headers; sources that decoded with special tokens kept
(verl-tool step records) hold the tokens as literal text. Every module that strips, finds or renders ChatML
scaffolding takes the tokens, the role names and the patterns from here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
ENDOFTEXT = "<|endoftext|>"

#: the roles of ChatML headers, as a regex alternation (``system|user|assistant|tool``)
ROLES = "system|user|assistant|tool"

#: any of the three ChatML special tokens written out as text
SPECIALS = re.compile(r"<\|im_start\|>|<\|im_end\|>|<\|endoftext\|>")


def strip_specials(text: str) -> str:
    """``text`` without the ChatML special tokens a source kept (``<|im_start|>``, ``<|im_end|>``,
    ``<|endoftext|>``)."""
    return SPECIALS.sub("", text)


def render(messages: Iterable[Mapping[str, str]]) -> str:
    """Plain ChatML for ``{"role", "content"}`` messages: what a tokenizer without a chat template is given."""
    return "".join(f"{IM_START}{m['role']}\n{m['content']}{IM_END}\n" for m in messages)
