"""verl's file logger: ``trainer.logger=[..., file]`` writes one JSON line ``{"step": N, "data": {name: value}}``
per step (class ``FileLogger`` in ``verl/utils/tracking.py``, 0.6 and later; ``orjson`` writes NaN and inf as
``null``), to ``$VERL_FILE_LOGGER_PATH`` or ``${VERL_FILE_LOGGER_ROOT:-.}/{project}/{experiment}.jsonl``.

:func:`looks_like_metrics_record` tells such a line from a rollout dump record (discovery skips metrics logs as
dumps); :func:`read_file_log` reads one log: every bad line (not JSON, cut off, no step, data not an object)
costs only itself and is reported; a value that is not a number (a string, a list) is skipped; ``NaN``/``null``
stay as NaN, ``Infinity`` as inf. A step logged twice (a resumed run) keeps the last value of each name.
"""

from __future__ import annotations

import json
import math
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: a file-logger line longer than this is skipped (verl's lines are a few KiB)
MAX_LINE_BYTES = 16 << 20
#: the keys of a file-logger line (exactly these two)
RECORD_KEYS = frozenset({"step", "data"})


def looks_like_metrics_record(obj: Any) -> bool:
    """True for one line of verl's file logger: an object with exactly ``step`` (an integer) and ``data`` (an
    object)."""
    return (isinstance(obj, dict) and set(obj) == RECORD_KEYS and isinstance(obj.get("data"), dict)
            and isinstance(obj.get("step"), int) and not isinstance(obj.get("step"), bool))


#: how a file-logger line starts (``orjson``: ``{"step":1,"data":{``; ``json.dumps``: ``{"step": 1, "data": {``),
#: or with the two keys the other way round
_HEAD = re.compile(rb'\s*\{\s*(?:"step"\s*:\s*-?\d+\s*,\s*"data"\s*:\s*\{|"data"\s*:\s*\{)')


def is_regular_file(path: Path) -> bool:
    """True for a regular file (after symlinks): a FIFO, socket or device under a scanned tree is never opened
    (opening a FIFO blocks until a writer appears)."""
    try:
        return stat.S_ISREG(path.stat().st_mode)
    except (OSError, ValueError):
        return False


def is_metrics_log(path: Path) -> bool:
    """True when ``path`` (``.jsonl``/``.ndjson``/``.json``) is a file-logger log: its first line is one
    ``{"step": N, "data": {...}}`` record. Judged from the first 4 KiB (a dump record starts otherwise), then the
    first line (at most 1 MiB) is parsed to confirm."""
    if path.suffix.lower() not in (".jsonl", ".ndjson", ".json") or not is_regular_file(path):
        return False
    try:
        with open(path, "rb") as f:
            head = f.read(4096).removeprefix(b"\xef\xbb\xbf")
            if not _HEAD.match(head):
                return False
            f.seek(0)
            line = f.readline(1 << 20).removeprefix(b"\xef\xbb\xbf")
    except OSError:
        return False
    try:
        return looks_like_metrics_record(json.loads(line))
    except (ValueError, RecursionError):
        return False


@dataclass(frozen=True)
class LogProblem:
    """A line of a metrics log that could not be used (1-based ``line``) and why."""

    line: int
    reason: str


def number(value: Any) -> float | None:
    """A logged value as a float: numbers and booleans; ``None`` (orjson's NaN/inf) and the strings ``NaN``,
    ``Infinity``, ``-Infinity`` as NaN/inf; a one-element list of a number (a 0-d array written as a list) as
    that number; anything else None (skipped)."""
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        try:
            return float(value)
        except OverflowError:
            return math.inf if value > 0 else -math.inf
    if value is None:
        return math.nan
    if isinstance(value, str) and value.strip().lower() in ("nan", "inf", "+inf", "-inf", "infinity", "-infinity",
                                                           "+infinity"):
        return float(value.strip().lower().replace("infinity", "inf"))
    if isinstance(value, list) and len(value) == 1 and not isinstance(value[0], (list, dict, str)):
        return number(value[0])
    return None


def read_file_log(path: Path | str, problems: list[LogProblem] | None = None) -> dict[tuple[int, str], float]:
    """``{(step, name): value}`` of one file-logger log (last write wins for a step logged twice)."""
    out: dict[tuple[int, str], float] = {}
    bad: list[LogProblem] = []
    with open(path, "rb") as f:
        i = 0
        while raw := f.readline(MAX_LINE_BYTES):
            i += 1
            if i == 1:
                raw = raw.removeprefix(b"\xef\xbb\xbf")
            if len(raw) >= MAX_LINE_BYTES and not raw.endswith(b"\n"):
                while (more := f.readline(MAX_LINE_BYTES)) and not more.endswith(b"\n"):
                    pass  # the rest of an over-long line: skipped without holding it
                bad.append(LogProblem(i, f"line longer than {MAX_LINE_BYTES >> 20} MiB; skipped"))
                continue
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw)
            except (ValueError, RecursionError) as e:
                cut = not raw.endswith(b"\n")
                bad.append(LogProblem(i, "cut-off last line (the writer stopped mid-line)" if cut
                                      else f"not JSON: {type(e).__name__}"))
                continue
            if not isinstance(obj, dict) or not isinstance(obj.get("data"), dict):
                bad.append(LogProblem(i, "not a file-logger record ({\"step\": N, \"data\": {...}})"))
                continue
            step = obj.get("step")
            if isinstance(step, float) and step.is_integer():
                step = int(step)
            if not isinstance(step, int) or isinstance(step, bool):
                bad.append(LogProblem(i, f"step is not a whole number: {str(step)[:40]!r}"))
                continue
            for name, value in obj["data"].items():
                v = number(value)
                if v is not None:  # strings, lists, objects: not a metric value
                    out[(step, str(name))] = v
    if problems is not None:
        problems.extend(bad)
    return out
