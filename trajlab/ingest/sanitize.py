"""The one sanitiser between input bytes and the text trajlab stores: every reader path goes through it.

Three things in input data cannot become the UTF-8 text of a Parquet column as they are:

* **invalid UTF-8** -- :func:`decode` replaces the bad bytes with U+FFFD and says at which byte;
* **lone UTF-16 surrogate escapes** (``"\\ud800"`` in JSON text; valid JSON, but the ``str`` it decodes to cannot
  be encoded) -- :func:`clean_record` replaces each with U+FFFD and says so; :func:`may_hold_surrogates` is the
  cheap byte test that decides whether a record needs the walk at all;
* **NUL**: a raw NUL byte inside a JSON string is invalid JSON (the record is an error row that names it); a
  ``\\u0000`` escape is a valid character and is kept as data.

Where it is applied: :mod:`trajlab.ingest.stream` passes every parsed record -- from a JSON line, a JSON list read
whole, a JSON list salvaged record by record (:mod:`trajlab.ingest.salvage`) or a Parquet row -- through
:func:`clean_record` before its format's converter sees it, and decodes every line and list with :func:`decode`.
The columnar engine (:mod:`trajlab.ingest.verl_columnar`) reads only ranges that need none of this: polars refuses
invalid UTF-8 and reads a lone surrogate escape as NUL, and the engine declines any range with a NUL, so such a
range falls back to the record reader and this module (``tests/test_scan_fuzz.py`` checks both engines agree).
"""

from __future__ import annotations

import re
from typing import Any

_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")

#: the note of a record whose lone surrogate escapes were replaced
SURROGATES_REPLACED = "lone UTF-16 surrogate escape(s) replaced with U+FFFD; record kept"


def decode(raw: bytes, what: str = "the line") -> tuple[str, str | None]:
    """``raw`` as text and ``None``, or with invalid UTF-8 replaced by U+FFFD and a note naming the first bad
    byte (``what``: where it sits, for the note)."""
    try:
        return raw.decode("utf-8"), None
    except UnicodeDecodeError as e:
        return raw.decode("utf-8", "replace"), (
            f"invalid UTF-8 at byte {e.start} of {what}; bad bytes replaced with U+FFFD, record kept")


def may_hold_surrogates(raw: bytes | str) -> bool:
    """Whether JSON text has a ``\\ud800``-``\\udfff`` escape (a lone one decodes to an unencodable str)."""
    b = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
    return b"\\u" in b and _SURROGATE_ESCAPE.search(b) is not None


def clean_record(obj: Any) -> tuple[Any, str | None]:
    """``obj`` with every lone UTF-16 surrogate in its strings (keys too) replaced by U+FFFD, and the note to
    record when any was (``None`` when ``obj`` was already clean)."""
    out, changed = _replace(obj)
    return out, SURROGATES_REPLACED if changed else None


def _replace(v: Any) -> tuple[Any, bool]:
    if isinstance(v, str):
        try:
            v.encode("utf-8")
            return v, False
        except UnicodeEncodeError:
            return v.encode("utf-16", "surrogatepass").decode("utf-16", "replace"), True
    if isinstance(v, dict):
        out, changed = {}, False
        for k, x in v.items():
            k2, c1 = _replace(k)
            x2, c2 = _replace(x)
            out[k2] = x2
            changed = changed or c1 or c2
        return out, changed
    if isinstance(v, list):
        items = [_replace(x) for x in v]
        return [x for x, _ in items], any(c for _, c in items)
    return v, False
