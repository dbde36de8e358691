"""Salvage of a JSON list that does not parse whole: keep every readable record before (and after) the damage."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from trajlab.ingest.plan import FileTask
from trajlab.model import IngestError, RawTrajectory


def _salvage_json_list(task: FileTask, mod: Any, text: str, msg: str, lineno: int | None,
                       colno: int | None) -> Iterator[RawTrajectory | IngestError]:
    """A JSON list that does not parse whole (cut short by a crashed writer, or one record that cannot be read):
    keep every readable record; a record that cannot be read is reported and skipped when its end can be found."""
    from trajlab.ingest.stream import _convert

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
            yield IngestError(task.rel, n, f"record {n} cannot be read ({type(e).__name__}); skipped")
            j = _next_record_start(text, i)
            if j is None:
                break
            i = j
            continue
        n += 1
        if isinstance(obj, dict):
            yield from _convert(mod, obj, task, n)
    where = f" at line {lineno} column {colno}" if lineno is not None else ""
    if i < len(text) and text[i] == "]":
        if not bad:
            yield IngestError(task.rel, None, f"JSON list not readable whole ({msg}); records read one by one")
        return
    yield IngestError(
        task.rel, n + 1,
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
