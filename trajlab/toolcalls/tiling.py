"""Span tiling: the spans of a turn sorted, overlaps dropped, gaps filled with ``text``, neighbours merged."""

from __future__ import annotations

from typing import Any

from trajlab.model import Span


def tile_spans(spans: list[tuple[int, int, str, int | None]], n: int) -> list[Span]:
    """Sort, drop overlaps, fill gaps with ``text`` and merge neighbours of the same kind and call."""
    spans.sort()
    merged: list[list[Any]] = []  # [start, end, kind, call_index]
    pos = 0
    for s, e, k, ci in spans:
        if s < pos:
            s = pos
        if e > n:
            e = n
        if e <= s:
            continue
        if s > pos:
            if merged and merged[-1][2] == "text" and merged[-1][3] is None:
                merged[-1][1] = s
            else:
                merged.append([pos, s, "text", None])
        last = merged[-1] if merged else None
        if last is not None and last[2] == k and last[3] == ci and last[1] == s:
            last[1] = e
        else:
            merged.append([s, e, k, ci])
        pos = e
    if pos < n:
        if merged and merged[-1][2] == "text" and merged[-1][3] is None:
            merged[-1][1] = n
        else:
            merged.append([pos, n, "text", None])
    return [Span(k, s, e, ci) for s, e, k, ci in merged]
