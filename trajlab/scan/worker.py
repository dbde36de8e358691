"""The worker side of a scan: one unit of work (consecutive small files, or one range of a big file) → part files.

The engines (:mod:`trajlab.scan.engines`) turn each range into part tables; the worker writes them, one file
per table for the whole unit, with each range's stats (:func:`trajlab.scan.parts.write_unit_parts`) and hands
freed memory back to the OS.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pyarrow as pa

from trajlab.ingest import FileTask
from trajlab.scan.engines import read_unit
from trajlab.scan.options import ScanOptions
from trajlab.scan.parts import RangeParts, write_unit_parts


def process_unit(unit: list[tuple[FileTask, str, str]], opts: ScanOptions, unit_dir: str) -> list[dict[str, Any]]:
    """Worker: ingest + classify a unit of work given as ``(task, file sha1, part directory of the file)``
    items, write the unit's part files into ``unit_dir`` and each item's ``done.json``. Returns their stats."""
    got = read_unit([(task, digest) for task, digest, _ in unit], opts)
    ranges = [RangeParts(task, digest, Path(part_dir), r.tables, r.engine, r.fallback)
              for (task, digest, part_dir), r in zip(unit, got, strict=True)]
    del got
    stats = write_unit_parts(Path(unit_dir), ranges)
    del ranges
    release_memory()
    return stats


def worker_init(parent_pid: int) -> None:
    """Initializer of a scan worker process: die with the scan (Linux: the kernel sends SIGKILL when the parent
    dies, even by ``kill -9``/the OOM killer), and leave Ctrl-C to the parent (exit quietly, no traceback)."""
    import signal

    def quiet_exit(*_: object) -> None:
        os._exit(130)

    signal.signal(signal.SIGINT, quiet_exit)
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux/glibc: the pool's own broken-pipe check remains
        pass
    if os.getppid() != parent_pid:  # the parent died before the line above
        os._exit(1)


def release_memory() -> None:
    """Hand freed memory back to the OS between units (a long-lived worker otherwise keeps its peak)."""
    pa.default_memory_pool().release_unused()
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        pass
