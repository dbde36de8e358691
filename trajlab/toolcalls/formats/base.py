"""What a call-format module provides (the interface :mod:`trajlab.toolcalls.analyze` drives).

Adding a format means one new module in this folder with a :class:`ToolFormat` subclass listed in its
``FORMATS_PROVIDED`` (the registry, :mod:`trajlab.toolcalls.formats`, imports every module here), its name in its
family's ``CALL_FORMATS`` (:mod:`trajlab.families`), plus ``rules/formats/<name>.yaml`` (prompt and output markers)
and, if it needs new problem names, entries in ``rules/taxonomy.yaml``. What the shared stages need to know of one
format (the tool-list rendering that implies it, verl's reading of it, its prompt's tool declarations) is a hook
of the class below, read through the registry; no shared module names a format.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from trajlab.toolcalls.draft import CallDraft, Issue
from trajlab.toolcalls.ruleset import RuleSet

if TYPE_CHECKING:
    from trajlab.toolcalls.schema import ToolIndex
    from trajlab.toolcalls.verl_call import VerlCall


class ToolFormat:
    """One call format: a scanner that finds calls in text, and the canonical renderer.

    Class attributes a format may set:

    * ``json_arguments``: the arguments are one JSON object (``kimi_k2``, ``deepseek_v31``, ``gpt_oss``): a body
      that does not decode gives no arguments;
    * ``models``: the models that write the format, shown by ``trajlab rules list`` and the generated categories
      reference's format table (the model *family* the format belongs to is the one whose ``CALL_FORMATS`` in
      :mod:`trajlab.families` lists it);
    * ``text_input``: a call may give its arguments as plain text (``react``'s ``Action Input``): a draft whose
      ``json_args`` is a string is read by :meth:`text_arguments`;
    * ``tools_source``: the ``tools_source`` label (:func:`trajlab.ingest.tool_schemas.tools_from_prompt`) of the
      prompt's tool-list rendering that implies this format (``prompt_xml`` for ``qwen3_coder``); detection
      (:mod:`trajlab.toolcalls.detect`) falls back on it when the prompt has no instruction block;
    * ``declarations_literal``: a string every prompt that declares its tools the format's own way contains
      (tested before :meth:`read_declarations`; ``None``: the format has no reader of its own);
    * ``verl_parser``: the name of verl 0.9.1's parser for the format, whose reading :meth:`verl_read` reproduces;
    * ``verl_markers``: the family's special-token markers where verl's parser reads markup made of special tokens:
      a turn that shows none of them was decoded with ``skip_special_tokens=True`` (verl read token ids the text
      no longer shows), so :func:`trajlab.toolcalls.verl_parser.verl_calls` does not reproduce its reading.
    """

    name: str = ""
    json_arguments: bool = False
    models: str = ""
    text_input: bool = False
    tools_source: str | None = None
    declarations_literal: str | None = None
    verl_parser: str | None = None
    verl_markers: tuple[str, ...] = ()

    def find_calls(
        self, text: str, lo: int, hi: int, rs: RuleSet, excluded: list[tuple[int, int]], spans: bool = True,
        fast: bool = True,
    ) -> tuple[list[CallDraft], list[Issue]]:
        """Scan ``text[lo:hi]`` and return the calls found and the problems that belong to no call.

        ``excluded`` are ranges already claimed by another format's calls (foreign markup); the scanner
        ignores tags inside them. ``spans=False`` lets the scanner skip recording the drafts' spans (the caller
        builds no tiling; everything else must be the same). ``fast=False`` asks for the reference scanner where
        a format has a faster reader for common shapes (the results are the same; tests compare the two). Must
        never raise on arbitrary text.
        """
        raise NotImplementedError

    def render(self, name: str, arguments: dict[str, Any]) -> str:
        """The canonical text of a well-formed call, as the model's chat template renders it."""
        raise NotImplementedError

    def render_raw(self, name: str, params: list[tuple[str, str]]) -> str:
        """Like :meth:`render` from raw string values (kept verbatim where the format allows it)."""
        return self.render(name, dict(params))

    def text_arguments(self, text: str, props: dict[str, Any], required: tuple[str, ...] = ()) -> Any:
        """The arguments a plain-text input stands for under the tool's properties (``text_input`` formats)."""
        return text

    def check_value(self, written: str, value: Any, prop: Any) -> Any:
        """A format's own type check of one value written as ``written`` and converted to ``value``
        (a :class:`~trajlab.toolcalls.type_checks.TypeCheck`), or ``None`` for the shared JSON check."""
        return None

    def intended(self, written: str, value: Any, prop: Any) -> Any:
        """What a value written as ``written`` (converted by verl to ``value``) means under the property ``prop``
        (the intended reading in ``calls.arguments``); where it differs from ``value``, :meth:`check_value`
        reports the divergence. Default: verl's conversion."""
        return value

    def verl_read(self, text: str, index: ToolIndex | None) -> list[VerlCall] | None:
        """The calls verl's parser :attr:`verl_parser` executes for ``text`` (one generation, special tokens kept),
        as :class:`~trajlab.toolcalls.verl_call.VerlCall` with offsets into ``text``; ``None``: verl's reading of
        the format is not reproduced (the default)."""
        return None

    def read_declarations(self, text: str) -> list[dict[str, Any]] | None:
        """The tool schemas (``{"name", "description", "parameters"}``) a prompt declares in the format's own
        rendering (read by :func:`trajlab.ingest.tool_schemas.tools_from_prompt` when the prompt holds
        :attr:`declarations_literal`; its ``tools_source`` is :attr:`tools_source`); ``None``: none found."""
        return None

    def render_declarations(self, tools: list[dict[str, Any]]) -> str | None:
        """The tools as the format's chat template declares them in the system prompt: the ``{tool_declarations}``
        placeholder of ``ood.tool_blocks.<format>`` in ``rules/hints.yaml`` (``tools`` in the key order templates
        print: name, description, parameters, rest); ``None``: the format has no rendering of its own."""
        return None
