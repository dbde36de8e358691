"""User-facing error types.

Every expected problem (bad input, missing table, bad option) is raised as a :class:`TrajlabError`;
the CLI prints its message in one line and exits with its ``exit_code`` instead of a traceback.
"""

from __future__ import annotations


class TrajlabError(Exception):
    """An expected problem with a message meant for the user (no traceback is shown)."""

    exit_code: int = 2

    def __init__(self, message: str, *, hint: str | None = None, exit_code: int | None = None) -> None:
        super().__init__(message)
        self.hint = hint
        if exit_code is not None:
            self.exit_code = exit_code

    def __str__(self) -> str:  # pragma: no cover - trivial
        msg = super().__str__()
        return f"{msg}\n  hint: {self.hint}" if self.hint else msg


class MissingDependencyError(TrajlabError):
    """An optional dependency (e.g. the `rescore` extra) is not installed."""


class InputError(TrajlabError):
    """The input paths or files cannot be used at all."""


class CheckpointError(TrajlabError):
    """A checkpoint directory is incomplete, unsafe or cannot be built."""


class TableError(TrajlabError):
    """A scan output directory is missing tables or has an incompatible schema."""
