"""Per-run caches of the rescore driver: decoded token labels, loaded tokenizers and classifier spans."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa


class TokenLabels:
    """Decoded display strings of token ids, cached."""

    def __init__(self, tokenizer: Any) -> None:
        self.tok = tokenizer
        self.cache: dict[int, str] = {}

    def __call__(self, tid: int) -> str:
        s = self.cache.get(tid)
        if s is None:
            s = self.tok.decode([tid], skip_special_tokens=False, clean_up_tokenization_spaces=False)
            self.cache[tid] = s
        return s

    def array(self, ids: np.ndarray) -> pa.Array:
        uniq, inv = np.unique(ids, return_inverse=True)
        labels = pa.array([self(int(u)) for u in uniq], type=pa.string())
        return labels.take(pa.array(inv.astype(np.int64)))


class TokenizerCache:
    """Checkpoints of one run usually ship identical tokenizer files: load each distinct set once."""

    def __init__(self, trust_remote_code: bool) -> None:
        self.trust_remote_code = trust_remote_code
        self.cache: dict[str, Any] = {}

    def __call__(self, ref_or_path: Any) -> Any:
        import hashlib

        from trajlab.rescore.tokenizers import load_tokenizer, tokenizer_dir_for

        d = tokenizer_dir_for(ref_or_path)
        h = hashlib.sha256()
        for f in sorted(d.iterdir()):
            if f.is_file() and (f.name.startswith(("tokenizer", "special_tokens", "added_tokens", "chat_template"))
                                or f.name in ("vocab.json", "merges.txt")):  # fmt: skip
                h.update(f.name.encode() + b"\0" + f.read_bytes())
        key = h.hexdigest()
        tok = self.cache.get(key)
        if tok is None:
            tok = load_tokenizer(ref_or_path, trust_remote_code=self.trust_remote_code)
            self.cache[key] = tok
        return tok


class SpanCache:
    """Classifier spans per (trajectory, turn), computed once per run."""

    def __init__(self, rules_dirs: Sequence[str | Path] = ()) -> None:
        self.cache: dict[tuple[str, int], list[Any]] = {}
        self.rules_dirs = tuple(str(d) for d in rules_dirs)
        self._analyze: Callable[..., Any] | None = None

    def __call__(self, tr: Any, turn_index: int, text: str) -> list[Any]:
        key = (tr.trajectory_id, turn_index)
        hit = self.cache.get(key)
        if hit is None:
            analyze = self._analyze
            if analyze is None:
                from trajlab.toolcalls import analyze_turn

                analyze = self._analyze = analyze_turn
            from trajlab.model import TurnContext

            ctx = TurnContext(schema_known=bool(tr.tools))
            analysis = analyze(
                text, tool_format=tr.tool_format or "none", tools=tr.tools, context=ctx, rules_dirs=self.rules_dirs
            )
            hit = list(analysis.spans)
            self.cache[key] = hit
        return hit
