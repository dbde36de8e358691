"""Salvage of a JSON list that does not parse whole: keep every readable record before (and after) the damage."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from trajlab.model import IngestError


def salvage_json_list(rel: str, text: str, msg: str, lineno: int | None,
                      colno: int | None) -> Iterator[tuple[int, dict[str, Any]] | IngestError]:
    """A JSON list that does not parse whole (cut short by a crashed writer, or one record that cannot be read):
    keep every readable record; a record that cannot be read is reported and skipped when its end can be found.

    Yields ``(record index, record)`` for each readable JSON object (1-based, in file order; the caller converts
    it) and an :class:`~trajlab.model.IngestError` of file ``rel`` for each problem, in the order met. ``msg``,
    ``lineno`` and ``colno`` describe why the whole list did not parse.
    """
    dec = json.JSONDecoder()
    i = text.find("[") + 1
    n = 0
    bad = 0
    while True:
        while i < len(text) and text[i] in " \t\r\n,":
            i += 1
        if i >= len(text) or text[i] == "]":
            break
        try:
            obj, i = dec.raw_decode(text, i)
        except json.JSONDecodeError:
            break
        except (ValueError, RecursionError) as e:
            n += 1
            bad += 1
            yield IngestError(rel, n, f"record {n} cannot be read ({type(e).__name__}); skipped")
            j = _next_record_start(text, i)
            if j is None:
                break
            i = j
            continue
        n += 1
        if isinstance(obj, dict):
            yield n, obj
    where = f" at line {lineno} column {colno}" if lineno is not None else ""
    if i < len(text) and text[i] == "]":
        if not bad:
            yield IngestError(rel, None, f"JSON list not readable whole ({msg}); records read one by one")
        return
    yield IngestError(
        rel, n + 1,
        f"invalid JSON list ({msg}{where}); kept the {n - bad} complete records before it",
    )


def _next_record_start(text: str, i: int) -> int | None:
    """Where the next top-level record of a JSON list starts after an unreadable one at ``i`` (a ``},{``
    boundary at depth 1, found by counting brackets outside strings), or None."""
    depth = 0
    in_str = esc = False
    for j in range(i, len(text)):
        c = text[j]
        if in_str:
            if esc:
                esc = False
            elif c == "\\":
                esc = True
            elif c == '"':
                in_str = False
        elif c == '"':
            in_str = True
        elif c in "[{":
            depth += 1
        elif c in "]}":
            depth -= 1
            if depth < 0:
                return j
        elif c == "," and depth == 0:
            return j + 1
    return None
