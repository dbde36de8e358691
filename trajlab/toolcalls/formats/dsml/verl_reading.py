"""verl 0.9.1's ``deepseek_v4`` reading of a turn (``DeepSeekV4ToolParser``), reproduced with our own code.

What verl does (``verl/experimental/agent_loop/tool_parser.py``, ``DeepSeekV4ToolParser``): the response ids are
decoded with special tokens *kept*, the pad and ``<｜end▁of▁sentence｜>`` tokens are removed from the text; with no
``<｜DSML｜tool_calls>`` in it there is no call. Otherwise every ``<｜DSML｜tool_calls>(.*?)</｜DSML｜tool_calls>`` block
(DOTALL, over the whole text, reasoning included) is read: each ``<｜DSML｜invoke name="(.*?)">(.*?)</｜DSML｜invoke>``
is one call, named verbatim; in its body every ``<｜DSML｜parameter name="(.*?)" string="(true|false)">(.*?)
</｜DSML｜parameter>`` is one argument, ``string="true"`` kept as text, ``string="false"`` ``json.loads``-ed (kept
as text when that fails); a repeated parameter keeps the last value. Nothing is validated against the tools.

Consequences the classifier reports (call-formats.md §6): a parameter tag with an extra attribute, or without
``string``, does not match, so the lazy name group runs on to the next parameter's ``string="…">`` and a parameter
named by the rest of the markup is executed instead; an unclosed parameter swallows the next one; a block closed
with another version's closer, a doubled-bar marker, a bare invoke: no call at all.
"""

from __future__ import annotations

import json
import re
from bisect import bisect_right
from typing import Any

#: one call verl executes: (name, arguments as the tool receives them, offset of its invoke, end of it)
DsmlCall = tuple[str, Any, int, int]

DSML = "｜DSML｜"
EOS = "<｜end▁of▁sentence｜>"
START = f"<{DSML}tool_calls>"
_BLOCK = re.compile(rf"<{DSML}tool_calls>(.*?)</{DSML}tool_calls>", re.DOTALL)
_INVOKE = re.compile(rf'<{DSML}invoke name="(.*?)">(.*?)</{DSML}invoke>', re.DOTALL)
_PARAM = re.compile(rf'<{DSML}parameter name="(.*?)" string="(true|false)">(.*?)</{DSML}parameter>', re.DOTALL)


def _without(text: str, tokens: tuple[str, ...]) -> tuple[str, list[int], list[int]]:
    """``text`` with ``tokens`` removed, and the map back: (clean text, clean offsets of the cuts, shift after each)."""
    cuts: list[tuple[int, int]] = []
    for tok in tokens:
        if not tok:
            continue
        pos = text.find(tok)
        while pos >= 0:
            cuts.append((pos, len(tok)))
            pos = text.find(tok, pos + len(tok))
    if not cuts:
        return text, [], []
    cuts.sort()
    parts, at, shift = [], 0, 0
    where: list[int] = []
    shifts: list[int] = []
    for pos, ln in cuts:
        if pos < at:
            continue
        parts.append(text[at:pos])
        shift += ln
        where.append(pos - shift + ln)
        shifts.append(shift)
        at = pos + ln
    parts.append(text[at:])
    return "".join(parts), where, shifts


def verl_dsml_calls(text: str, pad_token: str | None = None) -> list[DsmlCall]:
    """The calls verl 0.9.1's ``deepseek_v4`` parser executes for ``text`` (one generation, markup kept); offsets
    are into ``text``."""
    clean, where, shifts = _without(text, (pad_token or "", EOS))

    def back(pos: int) -> int:
        k = bisect_right(where, pos) - 1
        return pos + (shifts[k] if k >= 0 else 0)

    out: list[DsmlCall] = []
    if START not in clean:
        return out
    for bm in _BLOCK.finditer(clean):
        base = bm.start(1)
        for im in _INVOKE.finditer(bm.group(1)):
            args: dict[str, Any] = {}
            for pname, flag, value in _PARAM.findall(im.group(2)):
                if flag == "true":
                    args[pname] = value
                    continue
                try:
                    args[pname] = json.loads(value)
                except Exception:  # verl: a warning, the raw value kept
                    args[pname] = value
            try:  # verl passes json.dumps(arguments); the tool receives json.loads of it
                got = json.loads(json.dumps(args, ensure_ascii=False))
            except (ValueError, TypeError):
                got = args
            out.append((im.group(1), got, back(base + im.start()), back(base + im.end())))
    return out


def verl_dsml_content(text: str, pad_token: str | None = None) -> str:
    """The content verl's ``deepseek_v4`` parser returns: the text before the first block (the whole text when there
    is none), cut after its last ``</think>``, less a trailing blank line when a block follows."""
    clean = _without(text, (pad_token or "", EOS))[0]
    if START not in clean:
        return clean.rpartition("</think>")[2]
    return clean[:clean.index(START)].rpartition("</think>")[2].removesuffix("\n\n")
