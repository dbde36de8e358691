"""The DeepSeek-V3.1 call format (also V3.1-Terminus, V3.2-Exp): ``<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>NAME
<｜tool▁sep｜>{json}<｜tool▁call▁end｜>...<｜tool▁calls▁end｜>``.

The markers use the fullwidth bar ``｜`` (U+FF5C) and ``▁`` (U+2581); they are *not* special tokens in DeepSeek's
tokenizer (call-formats.md §4.2), so a verl dump keeps them. ASCII look-alikes (``<|tool▁calls▁begin|>``,
``<｜tool_call_begin｜>``) are other tokens entirely: ``malformed_tag/lookalike_token``. The older V3/R1 layout
``<｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\\n```json\\n{...}\\n```<｜tool▁call▁end｜>`` is
``format_mismatch`` (vLLM ``deepseek_v31`` reads the name ``function``), re-rendered in the V3.1 layout.
verl ships no parser for this family; vLLM's and SGLang's are the reference (call-formats.md §4.3).
"""

from __future__ import annotations

import json
import re
from typing import Any

from trajlab.toolcalls.draft import CallDraft, Issue
from trajlab.toolcalls.formats.base import ToolFormat
from trajlab.toolcalls.formats.toolcall_blocks import tool_call_blocks
from trajlab.toolcalls.jsonbody import fill_json_arguments
from trajlab.toolcalls.ruleset import RuleSet
from trajlab.toolcalls.sectioned import Markers, SectionScanner, render_section

MARKERS = Markers(
    section_begin="<｜tool▁calls▁begin｜>",
    section_end="<｜tool▁calls▁end｜>",
    call_begin="<｜tool▁call▁begin｜>",
    sep="<｜tool▁sep｜>",
    call_end="<｜tool▁call▁end｜>",
    confusables=(("｜", "[｜|]"), ("▁", "[▁_]")),
)
_V3_BODY = re.compile(r"\s*([\w.\-]+)[ \t]*\n```(?:json)?[ \t]*\n(.*?)\n?```\s*\Z", re.DOTALL)


def read_head(d: CallDraft, text: str, hs: int, he: int, number: int) -> None:
    """The name between the call opener and ``<｜tool▁sep｜>`` (vLLM takes it verbatim)."""
    raw = text[hs:he]
    core = raw.strip()
    s = hs + (raw.find(core) if core else 0)
    d.span("structural", hs, s)
    d.name, d.name_start, d.name_end = core, s, s + len(core)
    d.span("function_name", s, s + len(core))
    d.span("structural", s + len(core), he)


def read_v3_args(d: CallDraft, text: str, bs: int, be: int, rs: RuleSet, at_end: bool, spans: bool) -> bool:
    """The V3/R1 body ``NAME\\n```json\\n{...}\\n``` `` after a head ``function``: read, report, re-render."""
    if d.name != "function":
        return False
    m = _V3_BODY.match(text, bs, be)
    if not m:
        return False
    d.spans = [sp for sp in d.spans if sp[0] != "function_name"]
    d.span("structural", d.name_start, d.name_end)
    d.name, d.name_start, d.name_end = m.group(1), m.start(1), m.end(1)
    d.span("structural", bs, m.start(1))
    d.span("function_name", m.start(1), m.end(1))
    d.span("structural", m.end(1), m.start(2))
    fill_json_arguments(d, text, m.start(2), m.end(2), rs, spans=spans, fmt="deepseek_v31")
    d.span("structural", m.end(2), be)
    d.add("format_mismatch", "deepseek_v3_call", d.start, be, found="the DeepSeek-V3/R1 call layout "
          "(`function<｜tool▁sep｜>NAME` and fenced JSON)", expected="deepseek_v31")
    d.rerender = True
    return True


class DeepSeekV31Format(ToolFormat):
    """DeepSeek-V3.1 tool-call sections."""

    name = "deepseek_v31"
    tools_source = "prompt_deepseek"
    models = "DeepSeek-V3.1, V3.1-Terminus, V3.2-Exp"
    json_arguments = True

    def __init__(self) -> None:
        self.scanner = SectionScanner(self.name, MARKERS, read_head, read_v3_args)

    def find_calls(self, text: str, lo: int, hi: int, rs: RuleSet, excluded: list[tuple[int, int]],
                   spans: bool = True, fast: bool = True) -> tuple[list[CallDraft], list[Issue]]:
        if text.find("tool", lo, hi) < 0:
            return [], []
        calls, issues = self.scanner.scan(text, lo, hi, rs, excluded, spans)
        calls += tool_call_blocks(self.name, text, lo, hi, rs, [(d.start, d.end) for d in calls] + list(excluded),
                                  spans, fast)
        calls.sort(key=lambda d: d.start)
        return calls, issues

    def render(self, name: str, arguments: Any) -> str:
        args = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
        return render_section(MARKERS, [(name, args)])


FORMATS_PROVIDED: tuple[ToolFormat, ...] = (DeepSeekV31Format(),)
