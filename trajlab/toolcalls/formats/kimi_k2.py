"""The Kimi-K2 call format (Moonshot): ``<|tool_calls_section_begin|><|tool_call_begin|>functions.NAME:IDX
<|tool_call_argument_begin|>{json}<|tool_call_end|>...<|tool_calls_section_end|>``.

The markers are special tokens of Kimi's tokenizer: decoded with ``skip_special_tokens=True`` (a plain verl dump)
they vanish and a call survives as ``functions.NAME:IDX{json}`` glued to its neighbours. Both forms are read:
the marker form by :class:`~trajlab.toolcalls.sectioned.SectionScanner`, the stripped form by a regex on the call
id followed by a raw JSON decode. The function name is read from the id ``functions.NAME:IDX``
(call-formats.md §3): an id without ``functions.`` or without ``:IDX`` is ``malformed_tag`` (vLLM 0.11 and SGLang
treat them differently, verl's ``kimi`` parser guesses the tool), an OpenAI-style id copied from history
(``call_59adf…``) names no function at all.
"""

from __future__ import annotations

import json
import re
from typing import Any

from trajlab.toolcalls.draft import CallDraft, Edit, Issue, Ranges
from trajlab.toolcalls.formats.base import ToolFormat
from trajlab.toolcalls.formats.toolcall_blocks import tool_call_blocks
from trajlab.toolcalls.jsonbody import fill_json_arguments
from trajlab.toolcalls.ruleset import RuleSet
from trajlab.toolcalls.sectioned import Markers, SectionScanner, read_json_tail, render_section

MARKERS = Markers(
    section_begin="<|tool_calls_section_begin|>",
    section_end="<|tool_calls_section_end|>",
    call_begin="<|tool_call_begin|>",
    sep="<|tool_call_argument_begin|>",
    call_end="<|tool_call_end|>",
    confusables=(),
)
_OPENAI_ID = re.compile(r"call_[A-Za-z0-9]{6,}|chatcmpl-tool-[A-Za-z0-9]+|toolu_[A-Za-z0-9]+")
#: the stripped form: an id directly followed by the JSON arguments
STRIPPED_RE = re.compile(r"functions\.([^\s:{}<>\"']{1,64}):(\d{1,4})[ \t]*(?=\{)")


def read_head(d: CallDraft, text: str, hs: int, he: int, number: int) -> None:
    """The call id ``functions.NAME:IDX`` between ``hs`` and ``he``: name, spans and id issues."""
    raw = text[hs:he]
    core = raw.strip()
    s = hs + (raw.find(core) if core else 0)
    e = s + len(core)
    d.span("structural", hs, s)
    if not core:
        d.add("unknown_function", "empty_name", hs, he, name="", declared="?",
              blocker="the call has no id, so no function name")
        return
    if _OPENAI_ID.fullmatch(core):
        d.span("text", s, e)
        d.add("malformed_tag", "kimi_foreign_id", s, e, tag=core, format="kimi_k2",
              canonical_hint="the id must be `functions.NAME:IDX`; this is an OpenAI call id copied from the history",
              blocker="the id does not say which function is called")
        d.span("structural", e, he)
        return
    ns = s
    if core.startswith("functions."):
        d.span("structural", s, s + 10)
        ns = s + 10
    else:
        d.add("malformed_tag", "kimi_id_namespace", s, e, tag=core, format="kimi_k2",
              canonical_hint="the template writes `functions.NAME:IDX`",
              edits=[Edit(s, s, "functions.", "added `functions.` to the call id")])
    m = re.search(r":(\d+)\Z", core)
    ne = e - len(m.group()) if m else e
    if not m:
        d.add("malformed_tag", "kimi_id_index", s, e, tag=core, format="kimi_k2",
              canonical_hint="the template ends it with `:IDX`, the call's index",
              edits=[Edit(e, e, f":{number}", f"added the index `:{number}` to the call id")])
    d.name, d.name_start, d.name_end = text[ns:ne], ns, ne
    d.span("function_name", ns, ne)
    d.span("structural", ne, he)


class KimiK2Format(ToolFormat):
    """Kimi-K2 tool-call sections (markers kept or stripped)."""

    name = "kimi_k2"
    tools_source = "prompt_kimi"
    models = "Kimi-K2, Kimi-K2-Thinking"
    json_arguments = True

    def __init__(self) -> None:
        self.scanner = SectionScanner(self.name, MARKERS, read_head)

    def find_calls(self, text: str, lo: int, hi: int, rs: RuleSet, excluded: list[tuple[int, int]],
                   spans: bool = True, fast: bool = True) -> tuple[list[CallDraft], list[Issue]]:
        if text.find("<|tool_call", lo, hi) >= 0:
            calls, issues = self.scanner.scan(text, lo, hi, rs, excluded, spans)
            claimed = [(d.start, d.end) for d in calls] + list(excluded)
        else:
            calls, issues, claimed = [], [], list(excluded)
        if text.find("functions.", lo, hi) >= 0:
            calls += self._stripped(text, lo, hi, rs, claimed, spans)
            claimed = [(d.start, d.end) for d in calls] + list(excluded)
        calls += tool_call_blocks(self.name, text, lo, hi, rs, claimed, spans, fast)
        calls.sort(key=lambda d: d.start)
        return calls, issues

    def _stripped(self, text: str, lo: int, hi: int, rs: RuleSet, claimed: list[tuple[int, int]],
                  spans: bool) -> list[CallDraft]:
        """Calls whose markers a ``skip_special_tokens`` decode removed: ``functions.NAME:IDX{json}``."""
        occ = Ranges(claimed)
        found = [m for m in STRIPPED_RE.finditer(text, lo, hi) if occ.covering(m.start()) < 0]
        out: list[CallDraft] = []
        for k, m in enumerate(found):
            nxt = found[k + 1].start() if k + 1 < len(found) else hi
            bs = m.end()
            end = read_json_tail(text, bs, nxt)
            at_end = end < 0 and nxt == hi
            be = end if end >= 0 else bs + len(text[bs:nxt].rstrip())
            d = CallDraft(self.name, m.start(), be)
            d.span("structural", m.start(), m.start(1))
            d.name, d.name_start, d.name_end = m.group(1), m.start(1), m.end(1)
            d.span("function_name", m.start(1), m.end(1))
            d.span("structural", m.end(1), bs)
            fill_json_arguments(d, text, bs, be, rs, at_end=at_end, spans=spans, fmt=self.name)
            d.rerender = True  # a repair writes the call with its markers
            d.spans.sort(key=lambda x: x[1])
            out.append(d)
        return out

    def render(self, name: str, arguments: Any) -> str:
        args = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
        return render_section(MARKERS, [(f"functions.{name}:0", args)])


FORMATS_PROVIDED: tuple[ToolFormat, ...] = (KimiK2Format(),)
