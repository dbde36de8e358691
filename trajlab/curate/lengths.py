"""Token lengths of samples (``--tokenizer`` / ``--max-tokens``), counted with a real tokenizer.

A sample's length is the token count of its whole conversation rendered with the tokenizer's chat template
(plain ChatML ``<|im_start|>role\\n...<|im_end|>\\n`` when the tokenizer has none). verl renders each message
alone and Qwen3's template drops think blocks there, so verl's count is at most this one: a sample that fits
here fits ``data.max_length`` there.
"""

from __future__ import annotations

from typing import Any

from trajlab.curate.samples import Sample
from trajlab.errors import TrajlabError, param


def load_tokenizer(name_or_path: str) -> Any:
    """A transformers tokenizer from a directory or hub name; no remote code."""
    try:
        from transformers import AutoTokenizer
    except ImportError:
        raise TrajlabError(
            f"{param('tokenizer')} needs the `transformers` package",
            hint="pip install 'trajlab[rescore]' (install torch==2.13.0 first)",
        ) from None
    try:
        return AutoTokenizer.from_pretrained(name_or_path, trust_remote_code=False)
    except Exception as e:
        raise TrajlabError(
            f"{param('tokenizer')} {name_or_path}: cannot load a tokenizer ({type(e).__name__}: {str(e).splitlines()[0][:200]})",
            hint="give a local directory with tokenizer.json / tokenizer_config.json",
        ) from None


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
        return "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in msgs)

    def count(self, s: Sample) -> int:
        if s.n_tokens is None:
            s.n_tokens = len(self.tok(self.render(s), add_special_tokens=False)["input_ids"])
        return s.n_tokens

    def fits(self, s: Sample) -> bool:
        n = self.count(s)
        return self.max_tokens is None or n <= self.max_tokens
