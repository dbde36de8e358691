"""Issue recording shared by the qwen3_coder state machine and the reader of simple calls.

A misspelt tag (:func:`tag_issue`), a parameter or function never closed (:func:`unclosed_parameter`,
:func:`unclosed_function`), a call never closed (:func:`call_close_at_end`), each with the edit that fixes it
(:func:`insertion`: a missing closing tag on a line of its own). Both readers record a problem through the same
function, so they build the same draft.
"""

from __future__ import annotations

from trajlab.toolcalls.draft import CallDraft, Edit
from trajlab.toolcalls.formats.qwen3_coder.lexer import CC, CO, FC, FO, PC, PO, Tok

_STRAY_VARIANT = {CO: "open_tool_call", CC: "close_tool_call", FO: "open_function", FC: "close_function",
                  PO: "open_parameter", PC: "close_parameter"}


def tag_issue(d: CallDraft, text: str, t: Tok) -> None:
    """Record on ``d`` the problem of a malformed tag spelling (and its edit)."""
    v = t.variant
    if v is None:
        return
    raw = text[t.start:t.end]
    if v == "stray_attr":
        canon = t.canonical()
        attr = t.attr.strip()
        d.add("stray_attribute", _STRAY_VARIANT[t.kind], t.start, t.end, tag=raw, attribute=attr, canonical=canon,
              edits=[Edit(t.start, t.end, canon, f"removed `{attr}` from `{raw}`")])
    elif v == "close_variant":
        canon = t.canonical()
        d.add("malformed_tag", "close_variant", t.start, t.end, tag=raw, format="qwen3_coder",
              canonical_hint=f"the closing tag is `{canon}`",
              edits=[Edit(t.start, t.end, canon, f"replaced `{raw}` by `{canon}`")])
    elif v == "missing_gt":
        canon = t.canonical()
        variant = "close_missing_gt" if t.kind in (CC, FC, PC) else "open_missing_gt"
        d.add("malformed_tag", variant, t.start, t.end, tag=raw, format="qwen3_coder",
              canonical_hint=f"it should read `{canon}`",
              edits=[Edit(t.end, t.end, ">", f"added the missing `>` to `{raw}`")])
    elif v == "fused":
        d.add("malformed_tag", "fused_parameter_open", t.start, t.end, tag=raw, raw_name=t.raw_name,
              format="qwen3_coder", canonical_hint=f"the tag is `<parameter={t.name}>` followed by the value",
              edits=[Edit(t.end - 1, t.end, ">", f"split `{raw}` into `<parameter={t.name}>` and its value")])
    elif v == "partial":  # `</tool_call` cut by the end of the text
        d.add("missing_call_close", "at_end", t.start, t.end, tag=raw,
              edits=[Edit(t.end, t.end, ">", "completed `</tool_call>`")])
    elif v in ("attr_syntax", "space"):
        canon = t.canonical()
        d.add("malformed_tag", "attribute_syntax" if v == "attr_syntax" else "space_in_tag", t.start, t.end,
              tag=raw, format="qwen3_coder", canonical_hint=f"it should read `{canon}`",
              edits=[Edit(t.start, t.end, canon, f"replaced `{raw}` by `{canon}`")])


def insertion(text: str, d: CallDraft, inserted_at: set[int], p: int, tag: str, what: str) -> Edit:
    """The edit that inserts the closing ``tag`` at ``p`` (on a line of its own) into the call ``d``."""
    prefix = "" if (p in inserted_at or text[p - 1:p] == "\n" or p == d.start) else "\n"
    inserted_at.add(p)
    return Edit(p, p, f"{prefix}{tag}\n", what)


_UNCLOSED_PARAM = {"param": "parameter_before_parameter", "func_close": "parameter_before_function_close",
                   "func": "parameter_before_function", "call_close": "parameter_at_call_close",
                   "end": "parameter_at_end"}


def unclosed_parameter(d: CallDraft, text: str, ptok: Tok, end_at: int, follower: str,
                       inserted_at: set[int]) -> None:
    """Record on ``d`` that the parameter opened by ``ptok`` runs to ``end_at``, where ``follower`` comes."""
    blocker = "the output ends inside the parameter" if follower == "end" else None
    edits = [] if follower == "end" else [
        insertion(text, d, inserted_at, end_at, "</parameter>", f"closed `<parameter={ptok.name}>`")]
    d.add("unclosed_tag", _UNCLOSED_PARAM[follower], ptok.start, ptok.end, tag=text[ptok.start:ptok.end],
          closer="</parameter>", edits=edits, blocker=blocker)


_UNCLOSED_FUNC = {"call_close": "function_at_call_close", "next_call": "function_at_call_close",
                  "func": "function_before_function", "end": "function_at_end"}


def unclosed_function(d: CallDraft, text: str, fn: Tok, end_at: int, follower: str, inserted_at: set[int]) -> None:
    """Record on ``d`` that the function opened by ``fn`` runs to ``end_at``, where ``follower`` comes."""
    edits = [] if follower == "end" else [
        insertion(text, d, inserted_at, end_at, "</function>", f"closed `<function={fn.name}>`")]
    d.add("unclosed_tag", _UNCLOSED_FUNC[follower], fn.start, fn.end, tag=text[fn.start:fn.end], closer="</function>",
          edits=edits, blocker="the output ends inside the function" if follower == "end" else None)


def call_close_at_end(d: CallDraft, open_start: int, open_end: int, fe: int) -> None:
    """Record on ``d`` that its ``<tool_call>`` is never closed: the call ends after ``</function>`` at ``fe``."""
    d.add("missing_call_close", "at_end", open_start, open_end, tag="<tool_call>",
          edits=[Edit(fe, fe, "\n</tool_call>", "added `</tool_call>`")])
