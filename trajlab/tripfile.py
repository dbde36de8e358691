"""The trip file: what ``trajlab watch`` leaves in its output directory when its circuit breaker trips, so that
something outside the watch can act on it -- the verl checkpoint callback (:mod:`trajlab.verl.breaker`) stops the
run after its next checkpoint, a supervisor script can kill the trainer.

``OUT/trip.json`` is a marked trajlab JSON object (:func:`trajlab.ownfiles.marked_json`, kind ``trip``) written
atomically at every trip (a reader never sees half a file), holding every trip of the watch so far::

    {"$trajlab": "trip", "version": 1, "written_at": 1764870000.0, "out": "/abs/OUT",
     "trips": [{"run": "exp", "step": 88, "rate": 0.1, "reason": "early_warning", "noticed_step": 90}],
     "next": ["trajlab handoff /abs/OUT", ...]}

``written_at`` (seconds since the epoch) lets a reader ignore a trip file older than itself (a trip of an earlier
attempt of the run, before the user resumed it); ``next`` holds the commands the watch printed for the hand-over.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from trajlab.atomic import atomic_write_json
from trajlab.errors import InputError
from trajlab.ownfiles import JSON_KEY, marked_json

#: the trip file's name in watch's output directory
TRIP_FILE = "trip.json"
#: the trip file's layout version (``version``)
TRIP_VERSION = 1


def trip_path(out: str | Path) -> Path:
    """Where the watch writing into ``out`` leaves its trip file."""
    return Path(out) / TRIP_FILE


def write_trip_file(out: str | Path, trips: list[dict[str, Any]], *, next_steps: list[str] | None = None,
                    now: float | None = None) -> Path:
    """Write (atomically, replacing the last one) the trip file of the watch writing into ``out``: every trip so
    far (``run``, ``step``, ``rate``, ``reason``, ``noticed_step``) and the commands that come next."""
    path = trip_path(out)
    atomic_write_json(path, marked_json("trip", {
        "version": TRIP_VERSION,
        "written_at": time.time() if now is None else now,
        "out": str(Path(out).resolve()),
        "trips": trips,
        "next": list(next_steps or []),
    }))
    return path


def read_trip_file(path: str | Path) -> dict[str, Any] | None:
    """The trip file at ``path`` (a file, or a watch output directory holding one), or None when there is none.

    Raises :class:`~trajlab.errors.InputError` (one line) when the file is there but is not a trip file trajlab
    wrote, or is one of a later layout version."""
    p = Path(path)
    if p.is_dir():
        p = p / TRIP_FILE
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as e:
        raise InputError(f"cannot read the trip file {p}: {e.strerror or e}",
                         hint="check the path given to the breaker (the watch's -o directory)") from None
    try:
        obj = json.loads(text)
    except ValueError:
        obj = None
    if not isinstance(obj, dict) or obj.get(JSON_KEY) != "trip" or not isinstance(obj.get("trips"), list):
        raise InputError(f"{p} is not a trip file written by trajlab watch",
                         hint="point the breaker at the -o directory of `trajlab watch` (it writes trip.json there)")
    if not isinstance(obj.get("version"), int) or obj["version"] > TRIP_VERSION:
        raise InputError(f"{p}: trip file version {obj.get('version')!r} is newer than this trajlab reads "
                         f"({TRIP_VERSION})", hint="upgrade trajlab where the breaker runs")
    return obj
