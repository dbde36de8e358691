"""Atomic file writes: every file trajlab writes goes to a temp file beside its target and is renamed into place.

A crash or a kill never leaves a half-written file under the target's name, and a reader sees either the old
file or the new one. Temp files are named ``.<target name>.<random>.tmp`` (:data:`TEMP_NAME` matches them, so
:func:`trajlab.outpaths.remove_stale_temps` can remove what a killed run left). A renamed file gets the mode a
plain ``open()`` would give it under the process umask (``mkstemp`` creates files ``0600``).

* :func:`atomic_path`: a context manager yielding the temp path, for writers that open the file themselves
  (Parquet, Arrow IPC); :func:`temp_beside` + :func:`commit_temp` are its two halves, for code whose temp file
  outlives one block.
* :func:`atomic_write_bytes` / :func:`atomic_write_json`: whole contents at once, fsynced by default.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

#: the name of a temp file made here (``.<name>.<random>.tmp``), and of those older trajlab versions left
TEMP_NAME = re.compile(r"\..+\.tmp")


def default_file_mode() -> int:
    """0666 less the process umask: the mode ``open()`` would give a new file."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def make_readable(tmp: str | Path) -> None:
    """Give a ``mkstemp`` file (created 0600) the mode a normal file would get under the current umask."""
    os.chmod(tmp, default_file_mode())


def temp_beside(path: Path) -> Path:
    """Create an empty, uniquely named temp file in ``path``'s directory (made if missing) and return its path;
    finish with :func:`commit_temp`, or unlink it on failure."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    return Path(tmp)


def commit_temp(tmp: str | Path, path: str | Path) -> None:
    """Give ``tmp`` a normal file's mode and rename it to ``path`` (atomic on one file system)."""
    make_readable(tmp)
    os.replace(tmp, path)


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temp path beside ``path`` to write; on normal exit it replaces ``path``, on an exception it is
    deleted and ``path`` is left as it was."""
    path = Path(path)
    tmp = temp_beside(path)
    try:
        yield tmp
        commit_temp(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def atomic_write_bytes(path: Path, data: bytes, *, fsync: bool = True) -> None:
    """Write ``data`` to ``path`` atomically. ``fsync=False`` for caches (scan's part files), where a file lost in
    a power cut is only recomputed."""
    with atomic_path(path) as tmp, open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        if fsync:
            os.fsync(f.fileno())


def atomic_write_json(path: Path, obj: Any, *, fsync: bool = True) -> None:
    """Write ``obj`` as indented, key-sorted UTF-8 JSON (one trailing newline) to ``path`` atomically."""
    atomic_write_bytes(path, (json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode(),
                       fsync=fsync)
