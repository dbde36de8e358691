"""``<think>`` regions of a turn: where they are, the segments they cut the turn into, their spans, the answer
block (``<answer>…</answer>``) that may follow them, and the blocks left unbalanced before it.

A region is ``(content_start, content_end, open_start, open_end, close_start, close_end)`` with ``-1`` for a tag
that is missing (a turn that starts inside the block the generation prompt opened, or a block never closed).
"""

from __future__ import annotations


def think_regions(text: str) -> list[tuple[int, int, int, int, int, int]]:
    """(content_start, content_end, open_start, open_end, close_start, close_end); -1 for a missing tag."""
    out: list[tuple[int, int, int, int, int, int]] = []
    o = text.find("<think>")
    c = text.find("</think>")  # (the tags cannot overlap: this is also the first close after `o`, if o < c)
    if c >= 0 and (o < 0 or c < o):  # the generation prompt opened <think>: the turn starts inside it
        out.append((0, c, -1, -1, c, c + 8))
        c = text.find("</think>", o + 7) if o >= 0 else -1
    while o >= 0:  # a block opened at `o`, closed at `c`
        if c < 0:
            out.append((o + 7, len(text), o, o + 7, -1, -1))
            break
        out.append((o + 7, c, o, o + 7, c, c + 8))
        o = text.find("<think>", c + 8)
        if o >= 0:
            c = text.find("</think>", o + 7)
    return out


def turn_segments(n: int, think: list[tuple[int, int, int, int, int, int]]) -> list[tuple[int, int, bool]]:
    segs: list[tuple[int, int, bool]] = []
    pos = 0
    for cs, ce, os_, _oe, _cs2, c_e in think:
        outer_s = os_ if os_ >= 0 else cs
        if outer_s > pos:
            segs.append((pos, outer_s, False))
        segs.append((cs, ce, True))
        pos = c_e if c_e >= 0 else ce
    if pos < n:
        segs.append((pos, n, False))
    return segs


def think_spans(think: list[tuple[int, int, int, int, int, int]]) -> list[tuple[int, int, str, int | None]]:
    """``structural`` spans of the think tags and ``think`` spans of their content."""
    spans: list[tuple[int, int, str, int | None]] = []
    for cs, ce, os_, oe, c_s, c_e in think:
        if os_ >= 0:
            spans.append((os_, oe, "structural", None))
        spans.append((cs, ce, "think", None))
        if c_s >= 0:
            spans.append((c_s, c_e, "structural", None))
    return spans


#: tags that wrap a think/answer run's final answer (``<answer>…</answer>``, ...)
ANSWER_TAGS: tuple[str, ...] = ("answer", "final_answer", "solution")


def complete_answer(text: str, start: int = 0) -> tuple[int, int, str] | None:
    """The first complete answer block (``<answer>…</answer>``, any of :data:`ANSWER_TAGS`) at or after ``start``:
    ``(start, end, tag)``. Two ``str.find`` per tag: if a tag's first opener has no closer after it, no later
    opener has one either (linear even on hostile text with many openers)."""
    best: tuple[int, int, str] | None = None
    for tag in ANSWER_TAGS:
        o = text.find(f"<{tag}>", start)
        if o < 0 or (best is not None and o >= best[0]):
            continue
        c = text.find(f"</{tag}>", o + len(tag) + 2)
        if c >= 0:
            best = (o, c + len(tag) + 3, tag)
    return best


def unbalanced_think(text: str, think: list[tuple[int, int, int, int, int, int]]) -> list[tuple[str, int, int, str]]:
    """``<think>`` blocks left open before a complete answer (``unclosed``: the span of the opener; the repair
    inserts ``</think>`` before the answer) and ``<think>`` opened again inside an open block (``reopened``: the
    span of the second opener; the repair deletes it): ``(variant, start, end, answer tag)``."""
    out: list[tuple[str, int, int, str]] = []
    for cs, ce, os_, _oe, c_s, _c_e in think:
        inner = text.find("<think>", cs, ce) if c_s >= 0 else -1
        if inner >= 0:
            out.append(("reopened", inner, inner + 7, ""))
        if c_s < 0 and os_ >= 0:
            m = complete_answer(text, cs)
            if m is not None:
                out.append(("unclosed", os_, os_ + 7, m[2]))
    return out


def repair_think(text: str) -> str | None:
    """The turn with its unbalanced ``<think>`` fixed (see :func:`unbalanced_think`): ``</think>`` inserted before
    the answer that follows an unclosed block, every extra opener inside a closed block deleted; None when there
    is nothing to fix."""
    think = think_regions(text) if "think>" in text else []
    if not unbalanced_think(text, think):
        return None
    pieces: list[str] = []
    pos = 0
    for cs, ce, os_, _oe, c_s, _c_e in think:
        if c_s >= 0:  # a closed block: drop the openers inside it
            pieces += [text[pos:cs], text[cs:ce].replace("<think>", "")]
            pos = ce
        elif os_ >= 0:  # the last block, never closed: close it before the answer that follows
            m = complete_answer(text, cs)
            if m is not None:
                pieces += [text[pos:m[0]], "</think>\n"]
                pos = m[0]
    pieces.append(text[pos:])
    return "".join(pieces)
