"""Text from exact token ids: the tokenizer that decodes a source's ids, loaded lazily and once per process.

Sources that log token ids (NeMo-RL train data, verl rollout traces) are read as ids; their text is decoded
here with special tokens kept, segment by segment, so each turn's text is exactly what its ids spell. The
tokenizer is ``auto`` (the offline Qwen3.5/3.6 tokenizer of :mod:`trajlab.rescore.qwen_tokenizers`, then the
Qwen3 one, whichever fits the ids and the logged text) or what ``--tokenizer`` names (a directory or an alias
of :func:`trajlab.rescore.tokenizers.load_tokenizer`). ``tokenizers``/``transformers`` are imported here, in
the functions, only when such a source is read.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from trajlab.errors import TrajlabError, param

#: what ``auto`` tries, in order: every real tokenizer trajlab has offline
AUTO_CANDIDATES: tuple[str, ...] = ("qwen3.5", "qwen3")


@lru_cache(maxsize=8)
def load(name: str) -> Any:
    """The tokenizer ``name`` (an alias or a directory), loaded once per process; raises :class:`TrajlabError`
    (with a fix) when it cannot be loaded."""
    from trajlab.rescore.tokenizers import load_tokenizer

    return load_tokenizer(name)


def fits(tok: Any, ids: Sequence[int]) -> bool:
    """Whether every id of ``ids`` is in the vocabulary of ``tok``."""
    return not ids or (min(ids) >= 0 and max(ids) < len(tok))


def pick(name: str | None, ids: Sequence[int], text: str | None) -> tuple[Any, str, str | None]:
    """The tokenizer to decode ``ids`` with, its name, and a note when the choice is uncertain.

    ``name`` when given; ``None``/``auto``: the first of :data:`AUTO_CANDIDATES` whose decode of ``ids``
    reproduces the logged ``text`` of them, else the first whose vocabulary holds every id (with a note saying
    the text differs). Raises :class:`TrajlabError` when none fits (the message says how to pass one)."""
    if name is not None and name not in ("", "auto"):
        tok = load(name)
        if not fits(tok, ids):
            raise TrajlabError(f"token ids outside the vocabulary of the tokenizer {name} ({len(tok)} tokens)")
        return tok, name, None
    loaded: list[tuple[str, Any]] = []
    tried = []
    for cand in AUTO_CANDIDATES:  # loaded one at a time: the first that fits ends the search
        try:
            tok = load(cand)
        except TrajlabError as e:
            tried.append(f"{cand}: {e.args[0] if e.args else e}")
            continue
        if fits(tok, ids) and (text is None or tok.decode(list(ids), skip_special_tokens=False) == text):
            return tok, cand, None
        loaded.append((cand, tok))
    for cand, tok in loaded:
        if fits(tok, ids):
            return tok, cand, (f"no built-in tokenizer reproduces the logged text; decoded with {cand}, whose "
                               "vocabulary holds every id")
    tried += [f"{cand}: ids outside its vocabulary" for cand, _ in loaded]
    raise TrajlabError("no built-in tokenizer fits these token ids (" + "; ".join(tried) + ")",
                       hint=f"pass {param('tokenizer', metavar='DIR')} (the policy's tokenizer directory)")


def decode_segments(tok: Any, ids: Sequence[int], bounds: Sequence[tuple[int, int]]) -> list[str]:
    """The text of each ``[start, end)`` range of ``ids``, special tokens kept."""
    return [tok.decode(list(ids[s:e]), skip_special_tokens=False) for s, e in bounds]


def token_strings(tok: Any, ids: Sequence[int]) -> list[str]:
    """Each id decoded alone (special tokens kept; a piece of a multi-byte character reads as U+FFFD), through
    the Rust tokenizer in one call when the tokenizer is a fast one."""
    backend = getattr(tok, "backend_tokenizer", None)
    if backend is not None:
        return list(backend.decode_batch([[int(i)] for i in ids], skip_special_tokens=False))
    return list(tok.batch_decode([[i] for i in ids], skip_special_tokens=False))
