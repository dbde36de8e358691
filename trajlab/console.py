"""Shared rich consoles: results to stdout, progress and warnings to stderr."""

from __future__ import annotations

from rich.console import Console

console = Console()
err_console = Console(stderr=True)


def warn(message: str) -> None:
    """Print a one-line warning to stderr (no markup interpretation of the message)."""
    err_console.print("[yellow]warning:[/] ", end="")
    err_console.print(message, markup=False, highlight=False, soft_wrap=True)
