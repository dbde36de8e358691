"""Intermediate records the format scanners produce before the shared checks turn them into ParsedCalls.

A format module (``format_qwen3_coder.py``, ``format_hermes.py``, ...) only does the *lexical* work: it
finds each call's extent, its function name and parameters with their character spans, the structural
problems it saw (an :class:`Issue` per problem, with a minimal text :class:`Edit` when one fixes it) and the
span kinds of every character it covers. Everything that needs the tool schema or the taxonomy (name
resolution, type conversion, severities, messages, repairs) happens afterwards in :mod:`.analyze`.
All offsets are absolute offsets into the turn text.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass, field, fields
from typing import Any

from trajlab.model import ParsedCall

#: Marker for "no decoded JSON value" (XML parameters only have raw text).
MISSING: Any = object()


@dataclass(slots=True)
class Edit:
    """Replace ``text[start:end]`` by ``new`` (an insertion when start == end)."""

    start: int
    end: int
    new: str
    what: str  # human-readable description, collected into ParsedCall.repair_note


@dataclass(slots=True)
class Issue:
    """One problem seen by a scanner or a check, before severity and message are looked up."""

    category: str
    variant: str
    start: int
    end: int
    params: dict[str, Any] = field(default_factory=dict)
    edits: list[Edit] = field(default_factory=list)
    blocker: str | None = None  # why this problem cannot be repaired (None: repairable / nothing to repair)


@dataclass(slots=True)
class ParamDraft:
    """One parameter as written: XML parameters carry ``raw`` text, JSON ones a decoded ``value``."""

    name: str
    name_start: int
    name_end: int
    raw: str | None
    value: Any
    value_start: int
    value_end: int
    written: str | None = None  # the value as written, where ``value`` is its conversion (glm: verl's json.loads)


@dataclass(slots=True)
class CallDraft:
    """One call (well-formed or not) as a scanner found it."""

    fmt: str  # qwen3_coder | hermes | foreign: the markup the call is written in
    start: int
    end: int
    name: str | None = None
    name_start: int = -1
    name_end: int = -1
    params: list[ParamDraft] = field(default_factory=list)
    json_args: Any = MISSING  # JSON calls: the arguments object (decoded, or leniently repaired)
    issues: list[Issue] = field(default_factory=list)
    spans: list[tuple[str, int, int]] = field(default_factory=list)  # (kind, start, end), sorted
    rerender: bool = False  # repair by rendering the parsed call instead of editing the raw text
    in_think: bool = False
    family: str | None = None  # foreign markup family
    coerce_strings: bool = False  # string values recovered from key=value text: convert by schema type on repair
    literals: list[tuple[int, int]] | None = None  # tag text read as part of a value (start, end of each tag)

    def add(self, category: str, variant: str, start: int, end: int, *, blocker: str | None = None,
            edits: list[Edit] | None = None, **params: Any) -> Issue:
        issue = Issue(category, variant, start, end, params, edits or [], blocker)
        self.issues.append(issue)
        return issue

    def span(self, kind: str, start: int, end: int) -> None:
        if end > start:
            self.spans.append((kind, start, end))


class Ranges:
    """Sorted ranges with an O(log n) membership test (for "is this tag inside a claimed call?")."""

    __slots__ = ("starts", "ends")

    def __init__(self, ranges: list[tuple[int, int]]) -> None:
        rs = sorted(ranges)
        self.starts = [a for a, _ in rs]
        self.ends = [b for _, b in rs]

    def __bool__(self) -> bool:
        return bool(self.starts)

    def covering(self, pos: int) -> int:
        """End of the range containing ``pos``, or -1 (the ranges are calls: they do not overlap)."""
        i = bisect_right(self.starts, pos) - 1
        if i >= 0 and pos < self.ends[i]:
            return self.ends[i]
        return -1


_PARSED_CALL_FIELDS = ("call_index", "format", "raw", "start", "end", "function_name", "matched_tool", "arguments",
                       "status", "categories", "repaired", "repaired_arguments", "repair_note")
# positional construction costs half of the keyword one (it runs for every call classified); it is used only while
# ParsedCall's leading fields are still these, in this order
_POSITIONAL = tuple(f.name for f in fields(ParsedCall))[:len(_PARSED_CALL_FIELDS)] == _PARSED_CALL_FIELDS


def parsed_call(call_index: int, fmt: str, raw: str, start: int, end: int, function_name: str | None,
                matched_tool: str | None, arguments: Any, status: str, categories: list[str],
                repaired: str | None = None, repaired_arguments: Any = None,
                repair_note: str | None = None) -> ParsedCall:
    """A :class:`~trajlab.model.ParsedCall` (``fmt`` is its ``format``)."""
    if _POSITIONAL:
        return ParsedCall(call_index, fmt, raw, start, end, function_name, matched_tool, arguments,  # type: ignore[arg-type]
                          status, categories, repaired, repaired_arguments, repair_note)
    return ParsedCall(call_index=call_index, format=fmt, raw=raw, start=start, end=end, function_name=function_name,
                      matched_tool=matched_tool, arguments=arguments, status=status,  # type: ignore[arg-type]
                      categories=categories, repaired=repaired, repaired_arguments=repaired_arguments,
                      repair_note=repair_note)


#: one character repeated this many times in a row (whitespace and common rule characters aside) is a loop
LOOP_MIN = 24
_LOOP = re.compile(r"([^\s\-=*_#.~`+|/\\0])\1{" + str(LOOP_MIN - 1) + ",}")


def degenerate_loop(s: str) -> str:
    """A note on the longest run of one repeated character in ``s`` (a degenerate generation loop), or ``""``."""
    best = None
    for m in _LOOP.finditer(s):
        if best is None or len(m.group()) > len(best.group()):
            best = m
    if best is None:
        return ""
    return f"; then a degenerate loop of one repeated character ({best.group(1)!r} x {len(best.group()):,})"


def snip(s: str, limit: int = 60) -> str:
    """A short one-line excerpt of ``s`` for messages."""
    s = s.replace("\n", "\\n")
    return s if len(s) <= limit else s[: limit - 1] + "…"
