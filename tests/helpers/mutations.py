"""Shared hypothesis helper: damage a text the way a collapsing model and a crashed writer do."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

OPS = ["delete", "insert", "duplicate", "truncate", "swap"]


def mutate(draw: Any, text: str, fragments: st.SearchStrategy[str]) -> str:
    """Apply 1-3 random edits to ``text``: delete, insert a drawn fragment, duplicate, truncate or swap a short
    span (at most 12 characters)."""
    for _ in range(draw(st.integers(1, 3))):
        n = len(text)
        i = draw(st.integers(0, n))
        j = draw(st.integers(i, min(n, i + 12)))
        op = draw(st.sampled_from(OPS))
        if op == "delete":
            text = text[:i] + text[j:]
        elif op == "insert":
            text = text[:i] + draw(fragments) + text[i:]
        elif op == "duplicate":
            text = text[:j] + text[i:j] + text[j:]
        elif op == "truncate":
            text = text[:i]
        else:
            text = text[:i] + text[j:] + text[i:j]
    return text
