"""The shapes of a family's facets: a tool-response block and a token layout (plain, frozen data).

A family module (:mod:`trajlab.families`) states its facets as module constants; the two that are more than
strings and tuples are these records. Nothing here reads text: ingest, rescore and the docs do, from the registry.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class ToolBlock:
    """How a family's chat template wraps one tool response (or a run of them) in a decoded dump.

    ``literal``: a string every such block contains (a cheap test before the regex); ``pattern``: one whole block,
    from the end of an assistant turn to the start of the next one (the next turn's header included), or ``None``
    where :mod:`trajlab.ingest.turns` splits the block itself (ChatML's ``user\\n<tool_response>``, read with
    ``str.find``); ``requires``: a regex the output must also match before the block is split (for wrappers of
    plain text another output may hold); ``shared``: the literal is markup other families' outputs may hold too
    (``<tool_response>``, ``Observation:``), so the block is tried after every family's own.
    """

    literal: str
    pattern: re.Pattern[str] | None
    requires: re.Pattern[str] | None = None
    shared: bool = False


@dataclass(frozen=True)
class TokenLayout:
    """Where a family's chat template puts the special tokens that a ``skip_special_tokens=True`` dump drops.

    ``rebuild``: ``"chatml"`` (:mod:`trajlab.rescore.stream` rebuilds ChatML's ``<|im_start|>``/``<|im_end|>``),
    ``"tokens"`` (the tokens below are put back), or ``"none"`` (the stripped text is tokenized as plain text).
    ``kept_markers``: any of these literally in the text means the source kept its special tokens.
    """

    rebuild: str
    kept_markers: tuple[str, ...] = ()
    bos: str | None = None  # before the input
    prompt_end: str | None = None  # the generation prompt, after the input and after every tool block
    turn_end_call: str | None = None  # generated after an assistant turn that a tool block follows
    turn_end_final: str | None = None  # generated after the last assistant turn


#: the values :attr:`TokenLayout.rebuild` takes
REBUILDS: tuple[str, ...] = ("chatml", "tokens", "none")
