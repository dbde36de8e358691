"""Token lengths of samples (``--tokenizer`` / ``--max-tokens``), counted with a real tokenizer (loaded by
:func:`trajlab.rescore.tokenizers.load_tokenizer`, the one tokenizer loader).

A sample's length is the token count of its whole conversation rendered with the tokenizer's chat template
(plain ChatML ``<|im_start|>role\\n...<|im_end|>\\n`` when the tokenizer has none). verl renders each message
alone and Qwen3's template drops think blocks there, so verl's count is at most this one: a sample that fits
here fits ``data.max_length`` there.
"""

from __future__ import annotations

from typing import Any

from trajlab.curate.samples import Sample
from trajlab.families import chatml


class TokenCounter:
    """Counts and caches sample lengths; ``fits`` implements ``--max-tokens``."""

    def __init__(self, tokenizer: Any, max_tokens: int | None) -> None:
        self.tok = tokenizer
        self.max_tokens = max_tokens
        self._template = bool(getattr(tokenizer, "chat_template", None))

    def render(self, s: Sample) -> str:
        msgs = [m.as_dict() for m in s.messages]
        if self._template:
            try:
                return self.tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=False)
            except Exception:  # a template that rejects a role sequence: fall back to ChatML
                self._template = False
        return chatml.render(msgs)

    def count(self, s: Sample) -> int:
        if s.n_tokens is None:
            s.n_tokens = len(self.tok(self.render(s), add_special_tokens=False)["input_ids"])
        return s.n_tokens

    def fits(self, s: Sample) -> bool:
        n = self.count(s)
        return self.max_tokens is None or n <= self.max_tokens
