"""The qwen3_coder call format (Qwen3-Coder, Qwen3.5, Qwen3.6): the format class, its reading and its renderer.

Grammar (what the chat templates render, parsers.md §A.7)::

    <tool_call>\\n<function=NAME>\\n<parameter=P>\\nVALUE\\n</parameter>\\n...</function>\\n</tool_call>

The format registry (:mod:`trajlab.toolcalls.formats`) imports this package; the reader's parts are its modules
(each imported by name; the package itself holds only the format class):

* :mod:`~.qwen3_coder.lexer`: one regex ``finditer`` over the text yields the tag tokens (``<tool_call>``,
  ``</tool_call>``, ``<function=...>``, ``</function>``, ``<parameter=...>``, ``</parameter>`` and their
  malformed spellings: attributes, ``</parameter/>``, ``</parameter1>``, a missing ``>``, a value fused into the
  open tag);
* :mod:`~.qwen3_coder.values`: which tags are tag text inside a parameter value rather than call structure;
* :mod:`~.qwen3_coder.machine`: a small state machine walks the *tokens* (never the characters) and builds one
  :class:`CallDraft` per call, recording every structural problem as an :class:`Issue` with the minimal
  :class:`Edit` that fixes it (:mod:`~.qwen3_coder.issues`). Values are the raw text between the tags with one
  leading and one trailing newline removed, as verl does;
* :mod:`~.qwen3_coder.simple`: most calls, malformed ones included, are *simple* -- canonical opening tags,
  closing tags that may be misspelt or missing, whitespace between tags. :func:`~.qwen3_coder.simple.read_call`
  reads such a call with a few regexes (``str.startswith`` for the canonical spellings) and builds the draft the
  state machine would build, with the same issue-recording functions; :meth:`Qwen3CoderFormat.find_calls` takes
  it for a segment whose calls are all simple, and :mod:`.fastpath` for whole turns. The lexer tries the
  canonical spellings first too.

:meth:`Qwen3CoderFormat.render` / :meth:`~Qwen3CoderFormat.render_raw` write a canonical call (repairs).
"""

from __future__ import annotations

from typing import Any

from trajlab.toolcalls.draft import CallDraft, Issue
from trajlab.toolcalls.formats.base import ToolFormat
from trajlab.toolcalls.formats.qwen3_coder.lexer import lex
from trajlab.toolcalls.formats.qwen3_coder.machine import Scanner
from trajlab.toolcalls.formats.qwen3_coder.simple import read_simple
from trajlab.toolcalls.formats.qwen3_coder.values import attach_literals, literal_tags
from trajlab.toolcalls.formats.qwen3_coder.verl_reading import verl_qwen3_coder_calls
from trajlab.toolcalls.ruleset import RuleSet
from trajlab.toolcalls.schema import ToolIndex
from trajlab.toolcalls.verl_call import VerlCall


class Qwen3CoderFormat(ToolFormat):
    """``<tool_call><function=NAME><parameter=P>VALUE</parameter></function></tool_call>``."""

    name = "qwen3_coder"
    models = "Qwen3-Coder, Qwen3.5, Qwen3.6"
    tools_source = "prompt_xml"
    verl_parser = "qwen3_coder"

    def find_calls(self, text: str, lo: int, hi: int, rs: RuleSet, excluded: list[tuple[int, int]],
                   spans: bool = True, fast: bool = True) -> tuple[list[CallDraft], list[Issue]]:
        if fast and not excluded:  # simple calls (most malformed ones too) are read with regexes
            simple = read_simple(text, lo, hi, rs, spans)
            if simple is not None:
                return simple, []
        toks = lex(text, lo, hi, rs, excluded)
        if not toks:
            return [], []
        toks, lit = literal_tags(text, toks)
        calls, issues = Scanner(text, lo, hi, rs, toks, spans).run()
        if lit:
            attach_literals(calls, lit)
        return calls, issues

    def render(self, name: str, arguments: dict[str, Any]) -> str:
        import json

        parts = ["<tool_call>\n<function=", name, ">\n"]
        for k, v in arguments.items():
            if isinstance(v, (dict, list, tuple)):
                v = json.dumps(v, ensure_ascii=False)
            parts += ["<parameter=", str(k), ">\n", str(v), "\n</parameter>\n"]
        parts.append("</function>\n</tool_call>")
        return "".join(parts)

    def render_raw(self, name: str, params: list[tuple[str, str]]) -> str:
        parts = ["<tool_call>\n<function=", name, ">\n"]
        for k, v in params:
            parts += ["<parameter=", k, ">\n", v, "\n</parameter>\n"]
        parts.append("</function>\n</tool_call>")
        return "".join(parts)

    def verl_read(self, text: str, index: ToolIndex | None) -> list[VerlCall] | None:
        """verl's ``Qwen3XMLToolParser`` (:mod:`.verl_reading`)."""
        return verl_qwen3_coder_calls(text, index)


__all__ = ["Qwen3CoderFormat"]


FORMATS_PROVIDED: tuple[ToolFormat, ...] = (Qwen3CoderFormat(),)
