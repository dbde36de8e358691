"""A call as verl's agent loop executes it, and the pieces of verl's reading that several call formats share.

Each call-format module reproduces verl 0.9.1's parser of its format in its own ``verl_read``
(:class:`~trajlab.toolcalls.formats.base.ToolFormat`); :mod:`.verl_parser` dispatches to it. This module holds what
those readings have in common: the :class:`VerlCall` they return, the check that a turn was decoded with the
family's special tokens kept (:func:`markers_kept`), and verl's conversions of the wrapped-XML values
(:func:`json_value`) and of the arguments the tool receives (:func:`received`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any


@dataclass(slots=True)
class VerlCall:
    """One call verl's parser executes: name and arguments as the tool receives them, and where it was read.

    ``anchor`` is the offset of the text the call was read from (``<function=`` for qwen3_coder, the block's
    ``<tool_call>`` for hermes); ``end`` where that text ends."""

    name: str
    arguments: Any
    anchor: int
    end: int


def markers_kept(markers: tuple[str, ...], text: str) -> bool:
    """Whether ``text`` (one turn) shows one of a family's special-token ``markers``: it was decoded with the special
    tokens kept (a turn that shows none was decoded with ``skip_special_tokens=True``, a plain verl dump)."""
    return any(m in text for m in markers)


def json_value(raw: str) -> Any:
    """verl's value conversion of the wrapped-XML formats (:mod:`.formats.wrapped_xml`): ``json.loads`` of the
    stripped text, else the stripped text."""
    v = raw.strip()
    try:
        return json.loads(v)
    except (ValueError, RecursionError):
        return v


def received(args: dict[str, Any]) -> Any:
    """What the tool receives: verl dumps the arguments to JSON, the agent loop loads them back."""
    return json.loads(json.dumps(args, ensure_ascii=False))
