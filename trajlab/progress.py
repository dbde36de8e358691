"""Progress bars: a rich progress display on stderr, drawn only when the caller asks for it (``--progress``).

Every command's bar goes through :func:`progress_bar`, so all of them write to the same console
(:data:`trajlab.console.err_console`, never stdout, which may carry a table or JSON) and all of them turn
into a no-op the same way. The column classes a caller picks from are re-exported here.
"""

from __future__ import annotations

from rich.progress import (
    BarColumn,
    DownloadColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)

from trajlab import console

__all__ = [
    "BarColumn", "DownloadColumn", "MofNCompleteColumn", "Progress", "TaskProgressColumn", "TextColumn",
    "TimeElapsedColumn", "TimeRemainingColumn", "TransferSpeedColumn", "progress_bar",
]  # fmt: skip


def progress_bar(*columns: str | ProgressColumn, enabled: bool = True, transient: bool = True) -> Progress:
    """A rich :class:`~rich.progress.Progress` with ``columns`` on stderr; it draws nothing unless ``enabled``.
    ``transient`` bars vanish when done (the command prints its own summary); others stay on screen. The
    console is looked up when the bar is made, so a replaced :data:`trajlab.console.err_console` is honoured.
    A transient bar on a stderr that is not a terminal (a log file, a pipe) draws nothing: it could not be
    redrawn in place and would leave only a blank line behind."""
    err = console.err_console
    return Progress(*columns, console=err, disable=not enabled or (transient and not err.is_terminal),
                    transient=transient)
