"""Turns from exact tokens: a sequence of ids and its loss mask cut into the prompt, the policy's turns and the
environment's turns, each decoded with special tokens kept.

Shared by every source that logs exact tokens (NeMo-RL train data, slime rollout dumps): the prompt is every token
before the first generated one; after it, each maximal run of generated tokens is an ``assistant`` turn and each
run of the others a ``tool`` turn (the environment's reply with its chat scaffolding). The turns tile the output
exactly, and every position knows the turn that holds it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from trajlab.ingest import token_text
from trajlab.model import Turn


def mask_runs(mask: Sequence[bool]) -> list[tuple[int, int, bool]]:
    """Maximal runs ``(start, end, generated)`` of equal mask values."""
    out: list[tuple[int, int, bool]] = []
    s = 0
    for i in range(1, len(mask) + 1):
        if i == len(mask) or mask[i] != mask[s]:
            out.append((s, i, bool(mask[s])))
            s = i
    return out


@dataclass(frozen=True)
class TokenTurns:
    """The decoded prompt, output and turns of one exact-token sample, and the turn of every position
    (-1: the prompt)."""

    input: str
    output: str
    turns: list[Turn]
    turn_of: list[int]
    first_generated: int  # position of the first generated token (len(ids) when none is)


def decode_turns(tok: Any, ids: Sequence[int], mask: Sequence[bool]) -> TokenTurns:
    """Cut ``ids`` by ``mask`` (True where the policy generated) and decode each piece with ``tok``."""
    n = len(ids)
    first_gen = next((k for k, m in enumerate(mask) if m), n)
    runs = mask_runs(mask[first_gen:])
    bounds = [(first_gen + s, first_gen + e) for s, e, _ in runs]
    texts = token_text.decode_segments(tok, ids, [(0, first_gen), *bounds])
    inp, seg_texts = texts[0], texts[1:]
    turns: list[Turn] = []
    turn_of = [-1] * n
    pos = 0
    for k, ((s, e, gen), text) in enumerate(zip(runs, seg_texts, strict=True)):
        turns.append(Turn(k, "assistant" if gen else "tool", text, pos, pos + len(text)))
        pos += len(text)
        for j in range(first_gen + s, first_gen + e):
            turn_of[j] = k
    if not turns:
        turns.append(Turn(0, "assistant", "", 0, 0))
    return TokenTurns(inp, "".join(seg_texts), turns, turn_of, first_gen)
