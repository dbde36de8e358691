r"""What verl's tool parser executes for a turn: its reading, reproduced, and how it compares with the intended one.

trajlab's scanners read the call the model *meant* (``ParsedCall.arguments``): tag text inside a value is
kept as text when the closing structure says it is text. verl's agent loop reads the same text with plain
regexes and executes what they yield. Each call-format module reproduces that reading for its own format, as verl
**0.9.1** does it (``verl/experimental/agent_loop/tool_parser.py``; the regexes and conversions are listed in
``shared/spec/verl-formats.md`` §2.3 and ``parsers.md`` §A.6), with our own code, in its ``verl_read``
(:meth:`~trajlab.toolcalls.formats.base.ToolFormat.verl_read`; the format's ``verl_parser`` names verl's parser).
This module is the dispatcher and what the comparison shares.

:func:`verl_calls` returns verl's calls with where they come from; the classifier lines them up with the
calls trajlab found (:func:`same_value` compares arguments): each of ours is executed ``as_intended``,
``differently`` (another name or other arguments: a cut value, a merged parameter, a converted number) or
``dropped`` (verl executes no call for it). A format whose ``verl_read`` is the default (verl has no parser for
it, or its reading is not reproduced): ``None``.
"""

from __future__ import annotations

import json
from typing import Any

from trajlab.toolcalls.formats import FORMATS
from trajlab.toolcalls.schema import ToolIndex
from trajlab.toolcalls.verl_call import VerlCall, markers_kept

#: the verl release whose parsers are reproduced (messages name it)
VERL_VERSION = "0.9.1"

AS_INTENDED, DIFFERENTLY, DROPPED = "as_intended", "differently", "dropped"


def verl_calls(text: str, fmt: str, index: ToolIndex | None) -> list[VerlCall] | None:
    """The calls verl's parser for ``fmt`` executes for ``text`` (one generation); None: a format not modelled, or
    a turn whose special tokens the decode dropped (the format's ``verl_markers``, :func:`.verl_call.markers_kept`)."""
    f = FORMATS.get(fmt)
    if f is None:
        return None
    if f.verl_markers and not markers_kept(f.verl_markers, text):
        return None
    return f.verl_read(text, index)


def same_value(a: Any, b: Any) -> bool:
    """Whether two argument values are the same JSON (``1`` and ``1.0`` and ``True`` differ)."""
    if a is b:
        return True
    try:
        return json.dumps(a, sort_keys=True, default=repr) == json.dumps(b, sort_keys=True, default=repr)
    except (ValueError, TypeError, RecursionError):
        return False


def describe(vc: VerlCall, limit: int = 120) -> str:
    """``name({...})`` of a verl call, shortened to ``limit`` characters, on one line."""
    try:
        args = json.dumps(vc.arguments, ensure_ascii=False, default=repr)
    except (ValueError, TypeError, RecursionError):
        args = repr(vc.arguments)
    s = f"{vc.name}({args})".replace("\n", "\\n")
    return s if len(s) <= limit else s[: limit - 1] + "…"
