"""The worker side of a scan: one unit of work (consecutive small files, or one range of a big file) → part files.

Clean verl dump ranges go through the ``columnar`` engine (:mod:`trajlab.scan.columnar`) together; a unit that
is not clean is halved until the bad range is isolated, and every range the columnar engine declines -- and every
other format -- goes through the ``records`` engine (:mod:`trajlab.scan.records`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa

from trajlab.ingest import FileTask
from trajlab.scan.columnar import process_segments
from trajlab.scan.options import ScanOptions
from trajlab.scan.parts import write_parts
from trajlab.scan.records import record_loop


def process_unit(unit: list[tuple[FileTask, str, str]], opts: ScanOptions) -> list[dict[str, Any]]:
    """Worker: ingest + classify a unit of work given as ``(task, file sha1, part directory)`` items, and
    write each item's part files. Returns their stats (what ``done.json`` holds)."""
    from polars.exceptions import PanicException

    results: dict[int, dict[str, pa.Table]] = {}
    verl = [i for i, (t, _, _) in enumerate(unit) if t.fmt == "verl_jsonl" and not t.path.lower().endswith(".parquet")]
    datas = {i: read_range(unit[i][0]) for i in verl}

    def columnar_pass(group: list[int]) -> None:
        """Try ``group`` in one pass; when it is not clean, halve it (a bad file costs log2(n) retries)."""
        try:
            got = process_segments([(unit[i][0], datas[i], unit[i][1]) for i in group], opts)
        except (Exception, PanicException):  # never lose a range to the fast path: the record loop decides
            got = None
        if got is not None:
            results.update(zip(group, got, strict=True))
        elif len(group) > 1:
            columnar_pass(group[: len(group) // 2])
            columnar_pass(group[len(group) // 2:])

    if verl:
        columnar_pass(verl)
    stats = []
    for i, (task, digest, part_dir) in enumerate(unit):
        tables = results.pop(i, None) or record_loop(task, opts, digest)
        stats.append(write_parts(task, digest, Path(part_dir), tables))
    datas.clear()
    release_memory()
    return stats


def release_memory() -> None:
    """Hand freed memory back to the OS between units (a long-lived worker otherwise keeps its peak)."""
    pa.default_memory_pool().release_unused()
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        pass


def read_range(task: FileTask) -> bytes:
    """The bytes of one task's range."""
    with open(task.path, "rb") as f:
        f.seek(task.start)
        return f.read(task.end - task.start)
