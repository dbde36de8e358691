"""Coercion of loosely typed dump fields (scores, steps, ids) with notes instead of exceptions.

Dumps written with ``json.dumps(default=str)`` (verl 0.8+) turn numpy scalars into strings such as
``"np.float32(0.5)"`` or ``"0.5"``; Python's json writer emits ``NaN``; very old dumps have no ``step``.
Each helper returns the value and, when something was off, a note for the ``ingest_errors`` table.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from typing import Any

_NUMPY_REPR = re.compile(r"^\s*(?:np|numpy)\.\w+\((.*)\)\s*$")
_STEP_IN_NAME = re.compile(r"(?:^|(?<=.)[-_])(?:step-)?(?:val-)?([0-9]+)\.(?:jsonl|json|parquet)(?:\.gz)?$")


INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1


def coerce_float(value: Any, field: str) -> tuple[float | None, str | None]:
    """A finite float, or ``None`` with a note saying why."""
    if value is None:
        return None, None
    if isinstance(value, bool):
        return float(value), None
    if isinstance(value, (int, float)):
        try:
            f = float(value)
        except OverflowError:
            return None, f"field {field!r} is an integer too large for a float ({len(str(abs(value)))} digits); stored as null"
    elif isinstance(value, str):
        s = value.strip()
        m = _NUMPY_REPR.match(s)
        if m:
            s = m.group(1)
        try:
            f = float(s)
        except (ValueError, OverflowError):
            return None, f"field {field!r} is not a number ({value[:40]!r}); stored as null"
    elif isinstance(value, list) and len(value) == 1:
        return coerce_float(value[0], field)
    else:
        return None, f"field {field!r} has type {type(value).__name__}, not a number; stored as null"
    if not math.isfinite(f):
        return None, f"field {field!r} is {f} (not finite); stored as null"
    return f, None


def coerce_int(value: Any, field: str) -> tuple[int | None, str | None]:
    if value is None:
        return None, None
    if isinstance(value, bool):
        return None, f"field {field!r} is a boolean, not an integer"
    if isinstance(value, int):
        if not INT64_MIN <= value <= INT64_MAX:
            return None, f"field {field!r} is an integer outside the 64-bit range; stored as null"
        return value, None
    f, note = coerce_float(value, field)
    if f is None:
        return None, note
    if f.is_integer():
        if not INT64_MIN <= f <= INT64_MAX:
            return None, f"field {field!r} is {f:g}, outside the 64-bit integer range; stored as null"
        return int(f), None
    return None, f"field {field!r} is {f}, not an integer; stored as null"


def score_and_step(score: Any, step: Any, file_step: int | None) -> tuple[float | None, int | None, list[str]]:
    """A record's score and step (``file_step``, the file name's, when the record has none), and the notes of
    :func:`coerce_float` / :func:`coerce_int` on them (score first)."""
    f, score_note = coerce_float(score, "score")
    i, step_note = coerce_int(step, "step")
    notes = [n for n in (score_note, step_note) if n]
    return f, (file_step if i is None else i), notes


def step_from_name(name: str) -> int | None:
    """The step number in a dump file name: ``37.jsonl``, ``fcl-step-37.json``, ``x-step-val-40.json``."""
    m = _STEP_IN_NAME.search(name)
    if not m or len(m.group(1)) > 18:  # more digits than fit a 64-bit step: not a step number
        return None
    return int(m.group(1))


def finite_float(x: Any) -> float | None:
    """``x`` as a finite float, else None (an integer too large for a float is None, not an OverflowError)."""
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    try:
        f = float(x)
    except OverflowError:
        return None
    return f if math.isfinite(f) else None


def messages_text(msgs: Any, limit: int | None = None) -> str:
    """Chat messages as plain text, ``"{role}\n{content}\n"`` per message whose content is a string (the first
    ``limit`` messages); anything that is not a list of mappings gives ``""``."""
    from collections.abc import Mapping

    parts = []
    for m in (list(msgs)[:limit] if limit is not None else msgs):
        if isinstance(m, Mapping) and isinstance(m.get("content"), str):
            parts.append(f"{m.get('role', '')}\n{m['content']}\n")
    return "".join(parts)


def prompt_hash(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


#: ``json.dumps(v, ensure_ascii=False, sort_keys=True, default=str)`` without building an encoder per call
_ENCODE = json.JSONEncoder(ensure_ascii=False, sort_keys=True, default=str).encode


def dumps_extra(extra: dict[str, Any]) -> str:
    """Deterministic JSON for the ``extra`` column (non-JSON values become strings, NaN becomes null)."""
    return _ENCODE(_clean(extra))


def _clean(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, dict):
        return {str(k): _clean(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_clean(x) for x in v]
    return v
