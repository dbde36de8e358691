"""Salvage of a JSON list that does not parse whole: read it record by record, resynchronise at the next record
boundary after each damaged record, and account for every record (kept, or named by an error).

A damaged record (a flipped byte, a raw control character, a record nested too deeply, a cut) costs only itself:
reading resumes at the next ``, {`` whose object parses whole, has the shape of a record (``is_record``: a known
format, or the keys of the records read so far) and is followed by ``,`` or ``]`` -- so an object nested inside
the damaged record is never mistaken for the next one. The stretch it skips is split into its top-level
elements by a bracket-and-string scan that never recurses, so a second damaged record (or a whole record of no
recognised shape) inside it gets its own error row or is read, never dropped. Where no such boundary follows (a list cut short by a
writer that died, damage that runs to the end), the error says how many records, by their starts, were not read.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from typing import Any

from trajlab.model import IngestError

#: a candidate start of the next top-level record: a ``{`` after a list separator
_NEXT_START = re.compile(r",\s*\{")
#: where a record may start in damaged text (its separator may be gone): a ``{`` after ``,`` or ``}``
_ANY_START = re.compile(r"[,}]\s*\{")
_WS = " \t\r\n"
_FIRST_KEY = re.compile(r'\s*"((?:[^"\\]|\\.){0,200})"\s*:')


def salvage_json_list(rel: str, text: str, msg: str, lineno: int | None, colno: int | None,
                      is_record: Callable[[Any], bool] = lambda obj: isinstance(obj, dict),
                      ) -> Iterator[tuple[int, Any] | IngestError]:
    """Every readable record of a JSON list that does not parse whole, and an error per damaged record.

    Yields ``(record index, value)`` for each element that parses (1-based, in file order; the caller converts
    it and reports a non-object) and an :class:`~trajlab.model.IngestError` of file ``rel`` for each damaged
    record (its index in ``line``) and for damage that cannot be resynchronised (how many records were not
    read). ``msg``, ``lineno`` and ``colno`` describe why the whole list did not parse; ``is_record`` tells a
    top-level record from an object nested in one when looking for the next record boundary.
    """
    dec = json.JSONDecoder()
    first = text.find("[")
    if first < 0:
        yield IngestError(rel, None, f"invalid JSON list ({msg}): no '[' found; nothing read")
        return
    i, n, bad = first + 1, 0, 0
    keys: list[frozenset[str]] = []  # key sets of the records read, to recognise the next one after damage
    first_keys: set[str] = set()  # the key each of them opens with, to count the records in an unread rest

    def looks_like_record(obj: Any) -> bool:
        return is_record(obj) or (isinstance(obj, dict) and frozenset(obj) in keys)

    def remember(obj: Any) -> None:
        if isinstance(obj, dict) and len(keys) < 16 and frozenset(obj) not in keys:
            keys.append(frozenset(obj))
            first_keys.add(next(iter(obj), ""))

    while True:
        while i < len(text) and (text[i] in _WS or text[i] == ","):
            i += 1
        if i >= len(text):
            if not bad:  # every record whole, only the closing bracket missing
                yield IngestError(rel, None, f"JSON list ends without ']' after record {n} (file cut short?); "
                                             f"all {n} records kept")
            return
        if text[i] == "]":
            break
        try:
            obj, end = dec.raw_decode(text, i)
        except (ValueError, RecursionError) as e:  # JSONDecodeError, a huge integer literal, nesting too deep
            why = _reason(e, text, i)
            nxt = _next_record(dec, text, i + 1, looks_like_record)
            if nxt is None:
                n += 1
                bad += 1
                yield _unreadable_rest(rel, text, i, n, why, n - bad, first_keys)
                return
            # the damaged stretch may hold more than one record (a second damaged one, or a whole record the
            # resynchronisation did not recognise): each is kept or named by its own error
            starts = _element_starts(text, i, nxt) or [i]
            for k, s in enumerate(starts):
                n += 1
                if k:
                    got = _element(dec, text, s, starts[k + 1] if k + 1 < len(starts) else nxt)
                    if not isinstance(got, str):
                        remember(got[0])
                        yield n, got[0]
                        continue
                    why = got
                bad += 1
                yield IngestError(rel, n, f"record {n} of the JSON list cannot be read ({why}); skipped, reading "
                                          "resumed at the next record")
            i = nxt
            continue
        n += 1
        remember(obj)
        yield n, obj
        i = end
    if not bad:  # it parsed record by record: the whole-list failure was elsewhere (e.g. after the ']')
        where = f" at line {lineno} column {colno}" if lineno is not None else ""
        yield IngestError(rel, None, f"JSON list not readable whole ({msg}{where}); records read one by one")


def _reason(e: Exception, text: str, i: int) -> str:
    if isinstance(e, json.JSONDecodeError):
        return f"{e.msg.removesuffix(' at')} at byte {e.pos - i} of the record"
    if isinstance(e, RecursionError):
        return "nested too deeply to read"
    return f"{type(e).__name__}: {str(e)[:120]}"


def _next_record(dec: json.JSONDecoder, text: str, start: int, looks_like_record: Callable[[Any], bool]) -> int | None:
    """Where the next whole top-level record starts after a damaged one (see the module docstring), or None."""
    for m in _NEXT_START.finditer(text, start):
        j = m.end() - 1
        try:
            obj, end = dec.raw_decode(text, j)
        except (ValueError, RecursionError):
            continue
        while end < len(text) and text[end] in _WS:
            end += 1
        if (end >= len(text) or text[end] in ",]") and looks_like_record(obj):
            return j
    return None


def _element_starts(text: str, i: int, j: int) -> list[int] | None:
    """The starts of the top-level list elements in ``text[i:j]`` (``i``: where a damaged element starts, ``j``:
    the start of the next whole record), by a scan of brackets and strings that never recurses (an element
    nested 10,000 deep is one element). None when the scan does not close every element and end on the
    separator before ``j`` (damage that broke a string or a bracket): the stretch is then one damaged record."""
    starts = [i]
    depth, in_str, esc, in_elem, comma = 0, False, False, True, False
    for k in range(i, j):
        c = text[k]
        if in_str:
            if esc:
                esc = False
            elif c == "\\":
                esc = True
            elif c == '"':
                in_str = False
                in_elem = depth > 0
            continue
        if not in_elem:
            if c in _WS:
                continue
            if c == "," and not comma:
                comma = True
                continue
            if not comma:
                return None
            starts.append(k)
            in_elem, comma = True, False
        if c == '"':
            in_str = True
        elif c in "{[":
            depth += 1
        elif c in "}]":
            depth -= 1
            if depth < 0:
                return None
            in_elem = depth > 0
        elif depth == 0 and (c in _WS or c == ","):  # the end of a scalar element
            in_elem, comma = False, c == ","
    return starts if depth == 0 and not in_str and not in_elem and comma else None


def _element(dec: json.JSONDecoder, text: str, s: int, stop: int) -> tuple[Any] | str:
    """The element at ``s`` when it parses whole and only a separator follows it before ``stop``, else why not."""
    try:
        obj, end = dec.raw_decode(text, s)
    except (ValueError, RecursionError) as e:
        return _reason(e, text, s)
    if end > stop or text[end:stop].strip(_WS + ","):
        return f"unexpected bytes after byte {min(end, stop) - s} of the record"
    return (obj,)


def _unreadable_rest(rel: str, text: str, i: int, n: int, why: str,
                     kept: int, first_keys: set[str]) -> IngestError:
    """The error for damage at record ``n`` (at ``i``) that no later record boundary recovers from; it counts
    the records in the unread rest by their starts (an object opening with the first key of the records read)."""
    rest = text[i:]
    if first_keys:
        starts = sum(1 for m in _ANY_START.finditer(rest) if _opens_with_key(rest, m.end(), first_keys))
        starts += 1 if rest.startswith("{") else 0
    else:
        starts = 1 + len(_ANY_START.findall(rest))
    starts = max(1, starts)
    if starts == 1 and not rest.rstrip().endswith("]"):
        return IngestError(rel, n, f"record {n} of the JSON list is cut short at the end of the file ({why}; "
                                   f"{len(rest):,} bytes; the writer probably died mid-write); kept the {kept} complete "
                                   "records before it")
    return IngestError(rel, n, f"record {n} of the JSON list cannot be read ({why}) and no record boundary follows: "
                               f"the last {len(rest):,} bytes, about {starts} record(s) by their starts, not read; kept the "
                               f"{kept} complete records before it")


def _opens_with_key(text: str, at: int, names: set[str]) -> bool:
    """Whether the object opening just before ``at`` starts with a key of ``names``."""
    m = _FIRST_KEY.match(text, at)
    return m is not None and m.group(1) in names
