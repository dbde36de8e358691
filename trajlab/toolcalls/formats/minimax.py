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

from typing import Any

from trajlab.toolcalls.draft import CallDraft, Issue
from trajlab.toolcalls.formats.base import ToolFormat
from trajlab.toolcalls.formats.glm import GlmFormat
from trajlab.toolcalls.formats.wrapped_xml import XmlGrammar, render, render_value, scan
from trajlab.toolcalls.ruleset import RuleSet

GRAMMAR = XmlGrammar("minimax", "minimax:tool_call", "invoke", "parameter", by_attr=True, one_call_per_wrapper=False)
_GLM_RULE = GlmFormat("minimax", "\n", "")


class MiniMaxFormat(ToolFormat):
    """``<minimax:tool_call><invoke name="NAME"><parameter name="K">V</parameter></invoke></minimax:tool_call>``."""

    name = "minimax"
    family = "MiniMax-M2, MiniMax-M2.5"

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


FORMATS_PROVIDED: tuple[ToolFormat, ...] = (MiniMaxFormat(),)
