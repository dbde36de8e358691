"""Resource bounds of a DuckDB connection (threads, memory, spill directory) and the query timeout."""

from __future__ import annotations

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
    working directory); ``timeout_s``: a query still running after this many seconds is interrupted (None: no
    limit; the CLI's ``--timeout`` defaults to 300).
    """

    threads: int | None = None
    memory_limit: str | None = None
    temp_dir: str | None = None
    timeout_s: float | None = None

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
        return {"threads": threads, "memory_limit": mem, "temp_directory": temp}


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
        return TrajlabError(duckdb_message(e))

    def failure(self, e: Exception) -> Exception:
        """What a failed query raises: :meth:`error` for a DuckDB or Arrow error, and for any error once the
        deadline fired (the interrupt surfaces as whatever was running); trajlab's own error otherwise as it is."""
        if isinstance(e, TrajlabError) and not self.fired:
            return e
        return self.error(e)


def duckdb_message(e: Exception) -> str:
    """DuckDB's own message (with its LINE / caret lines), blank lines dropped."""
    return "\n".join(line.rstrip() for line in str(e).strip().splitlines() if line.strip())

