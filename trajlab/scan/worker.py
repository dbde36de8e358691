"""The worker side of a scan: one unit of work (consecutive small files, or one range of a big file) → part files.

The engines (:mod:`trajlab.scan.engines`) turn each range into part tables; the worker writes them, one file
per table for the whole unit, with each range's stats (:func:`trajlab.scan.parts.write_unit_parts`) and hands
freed memory back to the OS.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from trajlab.ingest import FileTask
from trajlab.memory import release_memory
from trajlab.scan.engines import read_unit
from trajlab.scan.options import WorkerOptions
from trajlab.scan.parts import RangeParts, write_unit_parts


def process_unit(unit: list[tuple[FileTask, str, str]], opts: WorkerOptions, unit_dir: str) -> list[dict[str, Any]]:
    """Worker: ingest + classify a unit of work given as ``(task, file sha1, part directory of the file)``
    items, write the unit's part files into ``unit_dir`` and each item's ``done.json``. Returns their stats."""
    got = read_unit([(task, digest) for task, digest, _ in unit], opts)
    if opts.rollout_n:  # --rollout-n: the groups of records without a uid are runs of N consecutive records
        from trajlab.groups import regroup_table

        for r in got:
            r.tables["trajectories"] = regroup_table(r.tables["trajectories"], opts.rollout_n)
    ranges = [RangeParts(task, digest, Path(part_dir), r.tables, r.engine, r.fallback)
              for (task, digest, part_dir), r in zip(unit, got, strict=True)]
    del got
    stats = write_unit_parts(Path(unit_dir), ranges)
    del ranges
    release_memory()
    return stats


def worker_init(parent_pid: int) -> None:
    """Initializer of a scan worker process: die with the scan (Linux: the kernel sends SIGKILL when the parent
    dies, even by ``kill -9``/the OOM killer), leave Ctrl-C to the parent (exit quietly, no traceback), and
    load no pandas (:mod:`trajlab.import_gate`: the worker runs trajlab's code only)."""
    import signal

    from trajlab.import_gate import install

    install()

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


#: the environment variable polars reads once, at import, to size its thread pool
POLARS_THREADS_ENV = "POLARS_MAX_THREADS"


@contextmanager
def worker_threads(n_workers: int) -> Iterator[int | None]:
    """While worker processes are started, give each a polars thread pool of ``cpus // n_workers`` threads
    (at least 1) instead of one thread per CPU, so that ``--jobs N`` on a many-core machine runs N pools that
    share the CPUs rather than N pools that each claim all of them. A value the user set is left alone.
    Yields the thread count given (``None`` when the user's own value applies)."""
    if os.environ.get(POLARS_THREADS_ENV):
        yield None
        return
    threads = max(1, (os.cpu_count() or 1) // max(n_workers, 1))
    os.environ[POLARS_THREADS_ENV] = str(threads)  # spawned workers inherit it; this process's pool is sized
    try:
        yield threads
    finally:
        os.environ.pop(POLARS_THREADS_ENV, None)
