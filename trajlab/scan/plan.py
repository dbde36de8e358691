"""Planning a scan: input files → :class:`FileEntry` (format, cache key, byte-range tasks) → units of work.

A big file is cut into newline-aligned byte ranges (:func:`trajlab.ingest.plan_tasks`), each range its own
unit; consecutive small files of one directory are grouped into units of up to :data:`UNIT_BYTES`, so one
columnar pass reads many of them. A file's key hashes its path, size, mtime, format and the options'
fingerprint: it names the file's part directory, so a re-scan finds the parts of unchanged files.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trajlab.ingest import CHUNK_BYTES, FileTask

#: below this total input size, don't start worker processes
IN_PROCESS_BYTES = 16 * 1024 * 1024
#: small files are processed together up to this many bytes (a unit of work)
UNIT_BYTES = 16 * 1024 * 1024
#: a unit holds at most this many files
UNIT_FILES = 256


@dataclass
class FileEntry:
    """One input file of a scan: where it is, how it is read, its cache key and (once done) its range stats."""

    path: Path
    rel: str
    fmt: str
    size: int
    key: str
    tasks: list[FileTask]
    reused: bool = False
    sha: str | None = None
    stats: list[dict[str, Any]] = field(default_factory=list)

    @property
    def run(self) -> str:
        """The run the file belongs to (every task of a file carries it)."""
        return self.tasks[0].run if self.tasks else ""


def file_key(path: Path, rel: str, fmt: str, fingerprint: str, run: str = "") -> tuple[str, int]:
    """The cache key of a file (path, size, mtime, format, options' fingerprint, run) and its size."""
    st = path.stat()
    blob = f"{rel}\n{st.st_size}\n{st.st_mtime_ns}\n{fmt}\n{fingerprint}\n{run}"
    return hashlib.sha1(blob.encode()).hexdigest()[:20], st.st_size


def chunk_bytes_or_default(chunk_bytes: int | None) -> int:
    """The byte-range size to cut big files into (``None``: :data:`trajlab.ingest.CHUNK_BYTES`)."""
    return chunk_bytes or CHUNK_BYTES


Unit = list[tuple[FileEntry, FileTask]]


def units(todo: Unit, chunk_bytes: int) -> list[Unit]:
    """Group tasks into units of work: consecutive whole small files up to ``chunk_bytes`` together (one
    columnar pass instead of one per file), each range of a big file alone."""
    out: list[Unit] = []
    cur: Unit = []
    size = 0
    for e, t in todo:
        n = t.end - t.start
        if len(e.tasks) > 1:
            if cur:
                out.append(cur)
                cur, size = [], 0
            out.append([(e, t)])
            continue
        # a unit stays within one directory (one run, one dump layout), so its files read as one table
        if cur and (size + n > chunk_bytes or len(cur) >= UNIT_FILES or Path(cur[-1][0].rel).parent != Path(e.rel).parent):
            out.append(cur)
            cur, size = [], 0
        cur.append((e, t))
        size += n
    if cur:
        out.append(cur)
    return out
