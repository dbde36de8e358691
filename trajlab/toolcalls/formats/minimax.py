"""The MiniMax-M2 call format (verl parser ``minimax``): one ``<minimax:tool_call>`` wrapper around every invoke.

Grammar (the llama.cpp copy of the unsloth ``MiniMax-M2`` chat template)::

    <minimax:tool_call>\\n<invoke name="NAME">\\n<parameter name="K">V</parameter>\\n</invoke>\\n...</minimax:tool_call>

The reader is :mod:`trajlab.toolcalls.formats.wrapped_xml`. Values are raw text: the template writes strings as they are
and everything else with ``tojson``; verl's ``minimax`` parser ``json.loads`` the stripped text (else keeps it),
so a declared string that decodes to another type is ``verl_conversion_divergence`` (GLM's rule, shared). The
names must be double-quoted: ``<invoke name=NAME>`` or Seed's ``<invoke=NAME>`` is ``malformed_tag/minimax_name_syntax``
(verl's ``name="([^"]+)"`` does not match it). ``<minimax:tool_call>`` / ``</minimax:tool_call>`` are special
tokens (a ``skip_special_tokens=True`` dump keeps only the invokes); ``<think>`` / ``</think>`` are ordinary text.
"""

from __future__ import annotations

import json
import re
from typing import Any

from trajlab.toolcalls.draft import CallDraft, Issue
from trajlab.toolcalls.formats.base import ToolFormat
from trajlab.toolcalls.formats.glm import GlmFormat
from trajlab.toolcalls.formats.wrapped_xml import XmlGrammar, render, render_value, scan
from trajlab.toolcalls.ruleset import RuleSet
from trajlab.toolcalls.schema import ToolIndex
from trajlab.toolcalls.verl_call import VerlCall, json_value, received

#: the special-token markers a turn decoded with them kept shows (MiniMax generates its end-of-turn token after
#: every call): a turn with none is a ``skip_special_tokens=True`` decode
KEPT_MARKERS = ("<minimax:", "</minimax:", "[e~[", "]~b]")
GRAMMAR = XmlGrammar("minimax", "minimax:tool_call", "invoke", "parameter", by_attr=True, one_call_per_wrapper=False,
                     kept_markers=KEPT_MARKERS)
_VERL_BLOCK = re.compile(r"<minimax:tool_call>(.*?)</minimax:tool_call>", re.DOTALL)
_VERL_INVOKE = re.compile(r'<invoke name="([^"]+)">\s*(.*?)</invoke>', re.DOTALL)
_VERL_PARAMETER = re.compile(r'<parameter name="([^"]+)">(.*?)</parameter>', re.DOTALL)
_GLM_RULE = GlmFormat("minimax", "\n", "")


class MiniMaxFormat(ToolFormat):
    """``<minimax:tool_call><invoke name="NAME"><parameter name="K">V</parameter></invoke></minimax:tool_call>``."""

    name = "minimax"
    family = "MiniMax-M2, MiniMax-M2.5"
    tools_source = "prompt_minimax"
    verl_parser = "minimax"
    verl_markers = KEPT_MARKERS

    def find_calls(self, text: str, lo: int, hi: int, rs: RuleSet, excluded: list[tuple[int, int]],
                   spans: bool = True, fast: bool = True) -> tuple[list[CallDraft], list[Issue]]:
        return scan(GRAMMAR, text, lo, hi, rs, excluded)

    def render(self, name: str, arguments: dict[str, Any]) -> str:
        return render(GRAMMAR, [(name, [(str(k), render_value(v)) for k, v in arguments.items()])])

    def render_raw(self, name: str, params: list[tuple[str, str]]) -> str:
        return render(GRAMMAR, [(name, params)])

    def check_value(self, written: str, value: Any, prop: Any) -> Any:
        return _GLM_RULE.check_value(written, value, prop)

    def intended(self, written: str, value: Any, prop: Any) -> Any:
        return _GLM_RULE.intended(written, value, prop)

    def render_declarations(self, tools: list[dict[str, Any]]) -> str | None:
        """One ``<tool>{json}</tool>`` line per tool (inside the template's ``<tools>`` block)."""
        return "\n".join(f"<tool>{json.dumps(t, ensure_ascii=False)}</tool>" for t in tools)

    def verl_read(self, text: str, index: ToolIndex | None) -> list[VerlCall] | None:
        """verl's ``MiniMaxToolParser``: nothing unless the text holds both ``<minimax:tool_call>`` and
        ``</minimax:tool_call>``; in each lazy wrapper block every ``<invoke name="([^"]+)">\\s*(.*?)</invoke>``,
        parameters ``<parameter name="([^"]+)">(.*?)</parameter>``, values ``json.loads`` of the stripped text, else
        the stripped text; a block whose arguments fail to convert is lost whole."""
        out: list[VerlCall] = []
        if "<minimax:tool_call>" not in text or "</minimax:tool_call>" not in text:
            return out
        for bm in _VERL_BLOCK.finditer(text):
            found: list[VerlCall] = []
            try:
                for im in _VERL_INVOKE.finditer(text, bm.start(1), bm.end(1)):
                    args = {k.strip(): json_value(v) for k, v in _VERL_PARAMETER.findall(im.group(2))}
                    found.append(VerlCall(im.group(1).strip(), received(args), im.start(), im.end()))
            except (ValueError, RecursionError):  # verl logs "Failed to decode MiniMax tool call": the block is lost
                continue
            out += found
        return out


FORMATS_PROVIDED: tuple[ToolFormat, ...] = (MiniMaxFormat(),)
