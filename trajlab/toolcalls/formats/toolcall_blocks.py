"""``<tool_call>`` blocks written in a trajectory whose own call markup is another family's (Kimi-K2, DeepSeek-V3.1,
gpt-oss): each block is read with the Qwen3-Coder XML or Hermes JSON reader and becomes a ``format_mismatch`` call.

It lives apart from :mod:`trajlab.toolcalls.formats.base` so that the formats it borrows are imported directly,
not through the registry (:mod:`trajlab.toolcalls.formats`), which imports the formats that use it.
"""

from __future__ import annotations

from trajlab.toolcalls.draft import CallDraft, Ranges
from trajlab.toolcalls.formats.base import ToolFormat
from trajlab.toolcalls.formats.hermes import FORMATS_PROVIDED as HERMES_FORMATS
from trajlab.toolcalls.formats.qwen3_coder import FORMATS_PROVIDED as QWEN3_CODER_FORMATS
from trajlab.toolcalls.ruleset import RuleSet

#: the registered instances (the same objects as ``FORMATS["qwen3_coder"]`` and ``FORMATS["hermes"]``)
QWEN3_CODER: ToolFormat = QWEN3_CODER_FORMATS[0]
HERMES: ToolFormat = HERMES_FORMATS[0]


def tool_call_blocks(fmt: str, text: str, lo: int, hi: int, rs: RuleSet, excluded: list[tuple[int, int]],
                     spans: bool = True, fast: bool = True) -> list[CallDraft]:
    """``<tool_call>`` blocks (hermes JSON or qwen3_coder XML) in a trajectory of format ``fmt``, whose own markup
    is something else (kimi_k2, deepseek_v31, gpt_oss): each is a ``format_mismatch`` call, re-rendered on repair."""
    if text.find("<tool_call>", lo, hi) < 0:
        return []
    xml = text.find("<function=", lo, hi) >= 0
    other = QWEN3_CODER if xml else HERMES
    occ = Ranges(excluded) if excluded else None
    drafts, _issues = other.find_calls(text, lo, hi, rs, excluded, spans, fast)
    out: list[CallDraft] = []
    for d in drafts:
        if occ is not None and occ.covering(d.start) >= 0:
            continue
        if not any(i.category == "format_mismatch" for i in d.issues):
            d.add("format_mismatch", "other_family_call", d.start, d.end,
                  found=f"a {other.name} `<tool_call>` call", expected=fmt)
        d.rerender = True
        out.append(d)
    return out
