"""Resource bounds of a DuckDB connection (threads, memory, spill directory and its size) and the query timeout."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from trajlab.errors import TrajlabError, param

if TYPE_CHECKING:  # pragma: no cover
    import duckdb


@dataclass(frozen=True)
class SqlLimits:
    """Resource bounds of a DuckDB connection (a shared box: never all cores, all memory, or the cwd).

    ``threads``: default ``min(4, CPUs)``; ``memory_limit``: default a quarter of physical memory, at most
    8 GiB; ``temp_dir``: where DuckDB may spill, default ``<system temp>/trajlab-sql-<pid>`` (never the caller's
    working directory); ``max_temp_size``: the most DuckDB may spill there, default a quarter of the free space
    of that file system, at most 16 GiB (DuckDB's own default is 90% of the free disk); ``timeout_s``: a query
    still running after this many seconds is interrupted (None: no limit; the CLI's ``--timeout`` defaults to
    300). Sizes are DuckDB size strings (``"2GiB"``, ``"512MB"``); a bad one raises :class:`TrajlabError`.
    """

    threads: int | None = None
    memory_limit: str | None = None
    temp_dir: str | None = None
    timeout_s: float | None = None
    max_temp_size: str | None = None

    def __post_init__(self) -> None:
        for name in ("memory_limit", "max_temp_size"):
            v = getattr(self, name)
            if v is not None and not _SIZE.fullmatch(v):
                raise TrajlabError(f"{param(name)} {v!r}: not a size", hint="write it like 4GiB, 512MB or 2GB")
        if self.threads is not None and self.threads < 1:
            raise TrajlabError(f"{param('threads')} {self.threads}: must be at least 1")

    def settings(self) -> dict[str, Any]:
        import os
        import tempfile

        threads = self.threads or min(4, os.cpu_count() or 1)
        mem = self.memory_limit
        if mem is None:
            try:
                phys = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
            except (ValueError, OSError, AttributeError):
                phys = 8 << 30
            mem = f"{max(256, min(phys // 4, 8 << 30) >> 20)}MiB"
        temp = self.temp_dir or os.path.join(tempfile.gettempdir(), f"trajlab-sql-{os.getpid()}")
        spill = self.max_temp_size or f"{default_spill_bytes(temp) >> 20}MiB"
        return {"threads": threads, "memory_limit": mem, "temp_directory": temp, "max_temp_directory_size": spill}


_SIZE = re.compile(r"\d+(?:\.\d+)?\s*(?:[KMGT]i?B|B|bytes)?", re.IGNORECASE)
#: the default spill bound: this share of the free space where DuckDB spills, at most :data:`SPILL_CAP`
SPILL_SHARE = 0.25
SPILL_CAP = 16 << 30


def default_spill_bytes(temp_dir: str) -> int:
    """The default bound on what DuckDB may spill into ``temp_dir``: a quarter of its file system's free space
    (of the nearest existing parent), at most 16 GiB, at least 64 MiB, in whole MiB."""
    import os

    d = temp_dir
    while d and not os.path.isdir(d) and os.path.dirname(d) != d:
        d = os.path.dirname(d)
    try:
        st = os.statvfs(d or ".")
        free = st.f_bavail * st.f_frsize
    except (OSError, AttributeError):
        free = 4 << 30
    return (max(64 << 20, min(int(free * SPILL_SHARE), SPILL_CAP)) >> 20) << 20  # whole MiB, as DuckDB is told


DEFAULT_LIMITS = SqlLimits()


class Deadline:
    """Interrupt the connection's running query after ``seconds`` (a timer thread calls ``con.interrupt()``)."""

    def __init__(self, con: duckdb.DuckDBPyConnection, seconds: float | None) -> None:
        import threading

        self.fired = False
        self.seconds = seconds
        self.timer = None
        if seconds is not None and seconds > 0:
            def fire() -> None:
                self.fired = True
                con.interrupt()

            self.timer = threading.Timer(seconds, fire)
            self.timer.daemon = True

    def __enter__(self) -> Deadline:
        if self.timer is not None:
            self.timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.timer is not None:
            self.timer.cancel()

    def error(self, e: Exception) -> TrajlabError:
        if self.fired:
            return TrajlabError(f"query interrupted after {param('timeout_s')} {self.seconds:g} s",
                                hint=f"narrow the query (WHERE, LIMIT) or raise {param('timeout_s')}")
        return query_error(e)

    def failure(self, e: Exception) -> Exception:
        """What a failed query raises: :meth:`error` for a DuckDB or Arrow error, and for any error once the
        deadline fired (the interrupt surfaces as whatever was running); trajlab's own error otherwise as it is."""
        if isinstance(e, TrajlabError) and not self.fired:
            return e
        return self.error(e)


def query_error(e: Exception) -> TrajlabError:
    """The one-line error for a failed DuckDB query: DuckDB's message, except that running out of memory or of
    spill space says which bound was hit and how to raise it (DuckDB's own advice, ``SET`` / ``PRAGMA``, cannot
    work on trajlab's locked read-only connection)."""
    msg = duckdb_message(e)
    if "max_temp_directory_size" in msg or "out of memory" in msg.lower():
        which = "the spill bound" if "max_temp_directory_size" in msg else "the memory limit"
        return TrajlabError(f"{msg.splitlines()[0]} (the query needs more than {which})",
                            hint=f"narrow the query (WHERE, LIMIT, fewer columns), or raise "
                                 f"{param('memory_limit')} / {param('max_temp_size')}")
    return TrajlabError(msg)


def duckdb_message(e: Exception) -> str:
    """DuckDB's own message (with its LINE / caret lines), blank lines dropped."""
    return "\n".join(line.rstrip() for line in str(e).strip().splitlines() if line.strip())

